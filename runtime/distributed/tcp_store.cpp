// TcpStore (runtime/distributed/store.h): rank 0 serves a key-value table on a thread; every
// process talks to it over one TCP connection, one request at a time.
//
// Requests: [op u8][key length u32][key][value length u64][value]. Replies: SET an ack byte;
// GET the value's length and bytes, sent once the key exists (the server parks the request
// until then); ADD the new sum as int64. A client that gives up waiting (its timeout) closes
// its connection, so a late reply can never be taken for the answer to a later request.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/distributed/store.h"
#include "runtime/error.h"

namespace loom::distributed {
namespace {

using Clock = std::chrono::steady_clock;
enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3 };

std::string seconds(std::chrono::milliseconds t) { return detail::concat(static_cast<double>(t.count()) / 1000.0, " s"); }

// Resolves host:port to IPv4/IPv6 addresses (numeric hosts and names alike).
addrinfo* resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* out = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out);
  LOOM_CHECK(rc == 0, Distributed, "the rendezvous store's address ", host, ":", port, " cannot be resolved: ",
             gai_strerror(rc));
  return out;
}

void send_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) throw std::system_error(errno, std::generic_category(), "send");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

// Reads exactly n bytes before `deadline`; false on timeout. Throws when the peer closed.
bool recv_all(int fd, void* data, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;
    ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) throw std::system_error(k == 0 ? ECONNRESET : errno, std::generic_category(), "recv");
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

std::string request(Op op, const std::string& key, const std::string& value) {
  std::string m(1, static_cast<char>(op));
  auto klen = static_cast<uint32_t>(key.size());
  auto vlen = static_cast<uint64_t>(value.size());
  m.append(reinterpret_cast<const char*>(&klen), sizeof klen).append(key);
  m.append(reinterpret_cast<const char*>(&vlen), sizeof vlen).append(value);
  return m;
}

// The table, served on a thread until the store that started it is destroyed.
class Server {
 public:
  Server(const std::string& host, int port) {
    addrinfo* list = resolve(host, port, true);
    std::string why;
    for (addrinfo* a = list; a && listen_fd_ < 0; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
        listen_fd_ = fd;
        sockaddr_storage bound{};
        socklen_t len = sizeof bound;
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
        port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                  : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      } else {
        why = std::strerror(errno);
        ::close(fd);
      }
    }
    freeaddrinfo(list);
    LOOM_CHECK(listen_fd_ >= 0, Distributed, "rank 0 cannot serve the rendezvous store on port ", port, " (",
               why, "): is the port (MASTER_PORT) in use by another job?");
    if (::pipe2(wake_, O_CLOEXEC) != 0) {
      ::close(listen_fd_);
      LOOM_FAIL(Distributed, "the rendezvous store cannot make a pipe: ", std::strerror(errno));
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~Server() {
    char c = 0;
    [[maybe_unused]] ssize_t k = ::write(wake_[1], &c, 1);
    thread_.join();
    for (auto& [fd, client] : clients_) ::close(fd);
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  int port() const noexcept { return port_; }

 private:
  struct Client {
    std::string in;  // bytes received, not yet a whole request
  };

  void serve() {
    std::vector<pollfd> fds;
    while (true) {
      fds.assign({{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}});
      for (auto& [fd, c] : clients_) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents) return;  // the store is being destroyed
      if (fds[1].revents & POLLIN) {
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          clients_[fd] = {};
        }
      }
      for (size_t i = 2; i < fds.size(); ++i)
        if (fds[i].revents) read_from(fds[i].fd);
    }
  }

  void drop(int fd) {
    ::close(fd);
    clients_.erase(fd);
    for (auto& [key, waiters] : waiting_) std::erase(waiters, fd);
  }

  void read_from(int fd) {
    char buf[65536];
    ssize_t k = ::recv(fd, buf, sizeof buf, 0);
    if (k <= 0) {
      if (k < 0 && (errno == EINTR || errno == EAGAIN)) return;
      return drop(fd);
    }
    std::string& in = clients_[fd].in;
    in.append(buf, static_cast<size_t>(k));
    while (true) {
      constexpr size_t head = 1 + sizeof(uint32_t);
      if (in.size() < head) return;
      uint32_t klen;
      std::memcpy(&klen, in.data() + 1, sizeof klen);
      if (in.size() < head + klen + sizeof(uint64_t)) return;
      uint64_t vlen;
      std::memcpy(&vlen, in.data() + head + klen, sizeof vlen);
      size_t total = head + klen + sizeof vlen + vlen;
      if (in.size() < total) return;
      auto op = static_cast<Op>(in[0]);
      std::string key = in.substr(head, klen);
      std::string value = in.substr(head + klen + sizeof vlen, vlen);
      in.erase(0, total);
      try {
        handle(fd, op, key, value);
      } catch (const std::exception&) {
        return drop(fd);  // a client that cannot take its reply is gone
      }
    }
  }

  void reply_value(int fd, const std::string& value) {
    auto n = static_cast<uint64_t>(value.size());
    std::string m(reinterpret_cast<const char*>(&n), sizeof n);
    m += value;
    send_all(fd, m.data(), m.size());
  }

  void handle(int fd, Op op, const std::string& key, const std::string& value) {
    switch (op) {
      case kSet: {
        table_[key] = value;
        char ack = 1;
        send_all(fd, &ack, 1);
        auto it = waiting_.find(key);
        if (it == waiting_.end()) return;
        std::vector<int> waiters = std::move(it->second);
        waiting_.erase(it);
        for (int w : waiters) {
          try {
            reply_value(w, value);
          } catch (const std::exception&) {
            drop(w);
          }
        }
        return;
      }
      case kGet: {
        auto it = table_.find(key);
        if (it == table_.end()) waiting_[key].push_back(fd);
        else reply_value(fd, it->second);
        return;
      }
      case kAdd: {
        int64_t delta = 0, sum = 0;
        std::memcpy(&delta, value.data(), std::min(value.size(), sizeof delta));
        auto it = table_.find(key);
        if (it != table_.end()) std::memcpy(&sum, it->second.data(), std::min(it->second.size(), sizeof sum));
        sum += delta;
        table_[key] = std::string(reinterpret_cast<const char*>(&sum), sizeof sum);
        send_all(fd, &sum, sizeof sum);
        return;
      }
    }
    throw std::runtime_error("unknown request");
  }

  int listen_fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::map<int, Client> clients_;
  std::map<std::string, std::string> table_;
  std::map<std::string, std::vector<int>> waiting_;
  std::thread thread_;
};

class TcpStore final : public Store {
 public:
  TcpStore(const std::string& host, int port, bool serve, std::chrono::milliseconds timeout)
      : host_(host), timeout_(timeout) {
    // The server listens on every interface, as PyTorch's does: clients reach it by whatever name
    // MASTER_ADDR gives rank 0's machine.
    if (serve) server_ = std::make_unique<Server>("", port);
    port_ = server_ ? server_->port() : port;
  }
  ~TcpStore() override {
    if (fd_ >= 0) ::close(fd_);
  }

  void set(const std::string& key, const std::string& value) override {
    std::lock_guard lock(mutex_);
    char ack;
    roundtrip(request(kSet, key, value), &ack, 1, "to set", key, timeout_);
  }

  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::lock_guard lock(mutex_);
    uint64_t n;
    Clock::time_point deadline = Clock::now() + timeout;
    roundtrip(request(kGet, key, ""), &n, sizeof n, "for", key, timeout);
    std::string value(n, '\0');
    receive(value.data(), n, deadline, "for", key, timeout);
    return value;
  }

  int64_t add(const std::string& key, int64_t delta) override {
    std::lock_guard lock(mutex_);
    int64_t sum;
    roundtrip(request(kAdd, key, std::string(reinterpret_cast<const char*>(&delta), sizeof delta)), &sum, sizeof sum,
              "to add to", key, timeout_);
    return sum;
  }

  int port() const noexcept { return port_; }

 private:
  // Connects (rank 0's server may not listen yet: retry until the store's timeout).
  void connect() {
    Clock::time_point deadline = Clock::now() + timeout_;
    std::string why;
    while (true) {
      addrinfo* list = resolve(host_, port_, false);
      for (addrinfo* a = list; a; a = a->ai_next) {
        int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          fd_ = fd;
          break;
        }
        why = std::strerror(errno);
        ::close(fd);
      }
      freeaddrinfo(list);
      if (fd_ >= 0) return;
      LOOM_CHECK(Clock::now() < deadline, Distributed, "timed out after ", seconds(timeout_),
                 " connecting to the rendezvous store at ", host_, ":", port_, " (", why,
                 "): is rank 0 running, and are MASTER_ADDR and MASTER_PORT the same for every rank?");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  void roundtrip(const std::string& message, void* reply, size_t n, const char* what, const std::string& key,
                 std::chrono::milliseconds timeout) {
    Clock::time_point deadline = Clock::now() + timeout;
    if (fd_ < 0) connect();
    try {
      send_all(fd_, message.data(), message.size());
    } catch (const std::exception& e) {
      lost(what, key, e.what());
    }
    receive(reply, n, deadline, what, key, timeout);
  }

  void receive(void* reply, size_t n, Clock::time_point deadline, const char* what, const std::string& key,
               std::chrono::milliseconds timeout) {
    bool done = false;
    try {
      done = recv_all(fd_, reply, n, deadline);
    } catch (const std::exception& e) {
      lost(what, key, e.what());
    }
    if (done) return;
    ::close(fd_);  // the reply may still come: never read it as another request's
    fd_ = -1;
    LOOM_FAIL(Distributed, "timed out after ", seconds(timeout), " waiting ", what, " '", key,
              "' in the rendezvous store at ", host_, ":", port_,
              ": a rank has not joined (or has died); check that every rank was started with the same world size");
  }

  [[noreturn]] void lost(const char* what, const std::string& key, const char* why) {
    ::close(fd_);
    fd_ = -1;
    LOOM_FAIL(Distributed, "lost the connection to the rendezvous store at ", host_, ":", port_, " while waiting ",
              what, " '", key, "' (", why, "): rank 0, which serves it, has probably exited");
  }

  std::string host_;
  int port_ = 0;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Server> server_;
  std::mutex mutex_;
  int fd_ = -1;
};

}  // namespace

std::shared_ptr<Store> make_tcp_store(const std::string& host, int port, bool serve, std::chrono::milliseconds timeout) {
  return std::make_shared<TcpStore>(host, port, serve, timeout);
}

int tcp_store_port(const Store& store) {
  const auto* s = dynamic_cast<const TcpStore*>(&store);
  LOOM_CHECK(s, Runtime, "internal: not a TCP store");
  return s->port();
}

}  // namespace loom::distributed
