#include "rtc/trusted_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/environment.h"
#include "runtime/error.h"

namespace loom::rtc {
namespace {

// Why a folder or file with this status is not trusted, or "" when it is.
std::string distrust(const struct stat& st, const char* what) {
  if (st.st_uid != ::geteuid()) {
    return std::string("the ") + what + " is owned by user " + std::to_string(st.st_uid) + ", not by this user (" +
           std::to_string(::geteuid()) + ")";
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string("the ") + what + " is writable by " + (st.st_mode & S_IWOTH ? "others" : "its group") +
           " (mode " + mode + ")";
  }
  return "";
}

// Checks an open folder; closes it and returns nullopt-like -1 when it is not trusted.
int checked_dir(int fd, const std::string& path, std::string& why) {
  if (fd < 0) {
    why = "cannot open " + path + ": " + std::strerror(errno);
    return -1;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
    why = path + " is not a folder";
  } else {
    why = distrust(st, "folder");
    if (why.empty()) return fd;
    why = path + ": " + why;
  }
  ::close(fd);
  return -1;
}

bool proc_fd_works() {
  static const bool works = ::access("/proc/self/fd", X_OK) == 0;
  return works;
}

// Private folders to remove at exit, each by the process that made it (a fork()ed child that
// exits through atexit must not remove its parent's).
std::mutex private_mu;
std::vector<std::pair<pid_t, std::string>>* private_dirs = nullptr;

void remove_private_dirs() {
  std::lock_guard lock(private_mu);
  for (const auto& [pid, path] : *private_dirs) {
    if (pid != ::getpid()) continue;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
}

// A relative path from the working directory (held as a descriptor after, so a later chdir does
// not move it).
std::string fs_absolute(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? std::string() : p.string();
}

}  // namespace

std::optional<TrustedDir> TrustedDir::open(const std::string& given, std::string& why) {
  std::string path = given.empty() || given[0] == '/' ? given : fs_absolute(given);
  if (path.empty()) {
    why = "no folder is named";
    return std::nullopt;
  }
  // Missing folders on the way are made 0700 (the user's own, as what loom makes in them).
  for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1))
    ::mkdir(path.substr(0, slash).c_str(), 0700);
  ::mkdir(path.c_str(), 0700);
  int fd = checked_dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC), path, why);
  if (fd < 0) return std::nullopt;
  return TrustedDir(fd, path);
}

std::optional<TrustedDir> TrustedDir::sub(const std::string& name, std::string& why) const {
  ::mkdirat(fd_, name.c_str(), 0700);
  std::string path = path_of(name);
  int fd = checked_dir(::openat(fd_, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), path, why);
  if (fd < 0) return std::nullopt;
  return TrustedDir(fd, path);
}

TrustedDir TrustedDir::make_private(const std::string& prefix) {
  // $TMPDIR unless others could rename things in it (writable without the sticky bit).
  std::string base = "/tmp";
  if (std::string t = environment_value("TMPDIR"); t[0] == '/') {
    struct stat st;
    if (::stat(t.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && (!(st.st_mode & (S_IWGRP | S_IWOTH)) || (st.st_mode & S_ISVTX)))
      base = t;
  }
  std::string pattern = base + "/" + prefix + "XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  LOOM_CHECK(::mkdtemp(buf.data()), Runtime, "cannot make a private temporary folder ", pattern, ": ",
             std::strerror(errno));
  std::string path(buf.data());
  {
    std::lock_guard lock(private_mu);
    if (!private_dirs) {
      private_dirs = new std::vector<std::pair<pid_t, std::string>>();
      std::atexit(remove_private_dirs);
    }
    private_dirs->emplace_back(::getpid(), path);
  }
  std::string why;
  int fd = checked_dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), path, why);
  LOOM_CHECK(fd >= 0, Runtime, "the private temporary folder is not private: ", why);
  return TrustedDir(fd, path);
}

TrustedDir::TrustedDir(TrustedDir&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}

TrustedDir& TrustedDir::operator=(TrustedDir&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
  }
  return *this;
}

TrustedDir::~TrustedDir() {
  if (fd_ >= 0) ::close(fd_);
}

std::string TrustedDir::held_path_of(const std::string& name) const {
  if (!proc_fd_works()) return path_of(name);
  return "/proc/self/fd/" + std::to_string(fd_) + "/" + name;
}

namespace {

// Reads an open file to its end; false (errno set) on a read error.
bool read_all(int fd, std::string& bytes) {
  bytes.clear();
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      bytes.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      return n == 0;
    }
  }
}

}  // namespace

TrustedDir::Read TrustedDir::read_file(const std::string& name, std::string& bytes, std::string& why,
                                       bool make_private) const {
  why.clear();
  // O_NONBLOCK: a FIFO in its place must not block the open.
  int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Read::Missing;
    why = path_of(name) + (errno == ELOOP ? std::string(" is a symbolic link") : ": " + std::string(std::strerror(errno)));
    return Read::Refused;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = path_of(name) + " is not a regular file";
  } else {
    if (make_private && st.st_uid == ::geteuid() && ::fchmod(fd, 0600) == 0) st.st_mode = (st.st_mode & ~07777) | 0600;
    why = distrust(st, "file");
    if (!why.empty()) {
      why = path_of(name) + ": " + why;
    } else if (!read_all(fd, bytes)) {
      why = "cannot read " + path_of(name) + ": " + std::strerror(errno);
    }
  }
  ::close(fd);
  return why.empty() ? Read::Ok : Read::Refused;
}

TrustedDir::Read TrustedDir::read(const std::string& name, std::string& bytes, std::string& why) const {
  return read_file(name, bytes, why, false);
}

TrustedDir::Read TrustedDir::read_output(const std::string& name, std::string& bytes, std::string& why) const {
  return read_file(name, bytes, why, true);
}

void TrustedDir::write(const std::string& name, const std::string& bytes) const {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = name + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  int fd = ::openat(fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  LOOM_CHECK(fd >= 0, Runtime, "cannot write ", path_of(tmp), ": ", std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      ::unlinkat(fd_, tmp.c_str(), 0);
      LOOM_FAIL(Runtime, "cannot write ", path_of(tmp), ": ", std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (::renameat(fd_, tmp.c_str(), fd_, name.c_str()) != 0) {
    int e = errno;
    ::unlinkat(fd_, tmp.c_str(), 0);
    LOOM_FAIL(Runtime, "cannot move ", path_of(tmp), " to ", path_of(name), ": ", std::strerror(e));
  }
}

void TrustedDir::remove(const std::string& name) const noexcept { ::unlinkat(fd_, name.c_str(), 0); }

}  // namespace loom::rtc
