// FileStore (runtime/distributed/store.h): an append-only file of records [key length u32][key]
// [value length u64][value], the last record of a key being its value. Writers take an exclusive
// flock, readers a shared one; get() polls until its key appears.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "runtime/distributed/store.h"
#include "runtime/error.h"

namespace loom::distributed {
namespace {

using Clock = std::chrono::steady_clock;

class Locked {
 public:
  Locked(int fd, int how) : fd_(fd) {
    while (::flock(fd_, how) != 0)
      LOOM_CHECK(errno == EINTR, Distributed, "cannot lock the rendezvous file: ", std::strerror(errno));
  }
  ~Locked() { ::flock(fd_, LOCK_UN); }

 private:
  int fd_;
};

class FileStore final : public Store {
 public:
  FileStore(std::string path, int world_size) : path_(std::move(path)), world_size_(world_size) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    LOOM_CHECK(fd_ >= 0, Distributed, "cannot open the rendezvous file ", path_, ": ", std::strerror(errno));
  }
  ~FileStore() override {
    try {
      if (add("__loom_left", 1) >= world_size_) ::unlink(path_.c_str());  // the last one out
    } catch (...) {
    }
    ::close(fd_);
  }

  void set(const std::string& key, const std::string& value) override {
    Locked lock(fd_, LOCK_EX);
    append(key, value);
  }

  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    Clock::time_point deadline = Clock::now() + timeout;
    auto pause = std::chrono::milliseconds(1);
    while (true) {
      {
        Locked lock(fd_, LOCK_SH);
        std::map<std::string, std::string> t = read();
        if (auto it = t.find(key); it != t.end()) return it->second;
      }
      LOOM_CHECK(Clock::now() < deadline, Distributed, "timed out after ", timeout.count() / 1000.0,
                 " s waiting for '", key, "' in the rendezvous file ", path_,
                 ": a rank has not joined (or has died), or the file holds an earlier job's records (remove it)");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
  }

  int64_t add(const std::string& key, int64_t delta) override {
    Locked lock(fd_, LOCK_EX);
    std::map<std::string, std::string> t = read();
    int64_t sum = 0;
    if (auto it = t.find(key); it != t.end()) std::memcpy(&sum, it->second.data(), std::min(it->second.size(), sizeof sum));
    sum += delta;
    append(key, std::string(reinterpret_cast<const char*>(&sum), sizeof sum));
    return sum;
  }

 private:
  std::map<std::string, std::string> read() {
    std::string bytes;
    char buf[65536];
    for (off_t at = 0;;) {
      ssize_t k = ::pread(fd_, buf, sizeof buf, at);
      if (k < 0 && errno == EINTR) continue;
      LOOM_CHECK(k >= 0, Distributed, "cannot read the rendezvous file ", path_, ": ", std::strerror(errno));
      if (k == 0) break;
      bytes.append(buf, static_cast<size_t>(k));
      at += k;
    }
    std::map<std::string, std::string> t;
    size_t at = 0;
    while (true) {
      uint32_t klen;
      uint64_t vlen;
      if (bytes.size() < at + sizeof klen) break;
      std::memcpy(&klen, bytes.data() + at, sizeof klen);
      if (bytes.size() < at + sizeof klen + klen + sizeof vlen) break;
      std::memcpy(&vlen, bytes.data() + at + sizeof klen + klen, sizeof vlen);
      size_t end = at + sizeof klen + klen + sizeof vlen + vlen;
      if (bytes.size() < end) break;
      t[bytes.substr(at + sizeof klen, klen)] = bytes.substr(end - vlen, vlen);
      at = end;
    }
    return t;
  }

  void append(const std::string& key, const std::string& value) {
    auto klen = static_cast<uint32_t>(key.size());
    auto vlen = static_cast<uint64_t>(value.size());
    std::string r(reinterpret_cast<const char*>(&klen), sizeof klen);
    r.append(key).append(reinterpret_cast<const char*>(&vlen), sizeof vlen).append(value);
    off_t end = ::lseek(fd_, 0, SEEK_END);
    for (size_t done = 0; done < r.size();) {
      ssize_t k = ::pwrite(fd_, r.data() + done, r.size() - done, end + static_cast<off_t>(done));
      if (k < 0 && errno == EINTR) continue;
      LOOM_CHECK(k > 0, Distributed, "cannot write the rendezvous file ", path_, ": ", std::strerror(errno));
      done += static_cast<size_t>(k);
    }
  }

  std::string path_;
  int world_size_;
  int fd_ = -1;
};

}  // namespace

std::shared_ptr<Store> make_file_store(const std::string& path, int world_size) {
  return std::make_shared<FileStore>(path, world_size);
}

}  // namespace loom::distributed
