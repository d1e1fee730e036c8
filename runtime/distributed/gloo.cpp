// The Gloo transport (runtime/distributed/group.h): host memory, TCP between every pair of
// processes (two full meshes made through the rendezvous store: Note [The exchange context]),
// Gloo's own algorithms (ring all-reduce, ...). Every call blocks until this rank's part is done, at most the group's
// timeout; Gloo's exceptions (a peer that closed its connection, a timeout) become Distributed
// errors that name the call and break the group.
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/logging.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "runtime/distributed/group.h"
#include "runtime/distributed/reduce.h"
#include "runtime/distributed/store.h"
#include "runtime/error.h"
#include "runtime/metrics.h"

namespace loom::distributed {
namespace {

using Clock = std::chrono::steady_clock;

// Gloo's view of loom's store, under the group's prefix.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  GlooStore(std::shared_ptr<distributed::Store> store, std::string prefix, std::chrono::milliseconds timeout)
      : store_(std::move(store)), prefix_(std::move(prefix)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(prefix_ + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    std::string v = store_->get(prefix_ + key, timeout_);
    return {v.begin(), v.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    Clock::time_point deadline = Clock::now() + timeout;
    for (const std::string& k : keys) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      store_->get(prefix_ + k, std::max(left, std::chrono::milliseconds(1)));
    }
  }

 private:
  std::shared_ptr<distributed::Store> store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

// Gloo's reduction function: c = a op b over n elements (c may be a or b).
gloo::ReduceOptions::Func reduce_function(DType dtype, ReduceOp op) {
  return [dtype, op](void* c, const void* a, const void* b, size_t n) { combine(c, a, b, n, dtype, op); };
}

// Gloo sizes its messages by sizeof(T) of the pointer type it is given: one of these per width.
template <typename F>
decltype(auto) by_width(DType dtype, F&& f) {
  switch (itemsize(dtype)) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    default: return f(uint64_t{});
  }
}

// Note [Spinning before a blocking read]. A synchronous pair's read sleeps in the kernel until
// the peer's message arrives, and a rank that arrives first at an exchange sleeps and is woken
// once or twice per call. On this project's 2-core VM the sleep and wake-up cost far more than
// the wait itself (perf/RESULTS.md, "ddp, polling before blocking reads"): an eager all-reduce
// of BENCH mlp's 166.5 KiB bucket took 175-181 us with sleeping reads, 83-85 us with polling
// ones, and 160 against 90 us of the caller's CPU time. So before each blocking read the
// caller polls the socket (FIONREAD, without sleeping) until the whole message is there or
// `spin` has passed, and only then reads. The blocking read stays the fallback: a peer that is
// late, dead or hung costs at most `spin` of polling, then the read fails or times out as
// before. Polling only pays where every rank has a core of its own: with more ranks on this
// machine than CPUs this process may use, a polling rank would take the core the rank it waits
// for needs, so by default `spin` is zero there. LOOM_DIST_SPIN_US sets it whatever the count
// (0: off). Gloo's own busyPoll mode is not used: it polls until the group's timeout, with no
// blocking fallback. loom.metrics() counts the reads served by polling and those that went to
// a blocking read (exchange_reads_polled, exchange_reads_blocked).
constexpr int kDefaultSpinUs = 100;

std::chrono::microseconds spin_budget(int group_size) {
  if (const char* v = std::getenv("LOOM_DIST_SPIN_US"); v && *v)
    return std::chrono::microseconds(std::max(0, std::atoi(v)));
  // Ranks sharing this machine: the launcher's count where it says, else the whole group.
  int local = group_size;
  if (const char* v = std::getenv("LOCAL_WORLD_SIZE"); v && *v) local = std::max(1, std::atoi(v));
  cpu_set_t cpus;
  int cores = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  return std::chrono::microseconds(local <= cores ? kDefaultSpinUs : 0);
}

// The socket of each exchange pair by peer rank, for the polling above (-1 where none is found:
// reads from that peer block at once, as before). Gloo does not hand out a pair's socket, but
// it does its listening address, and every pair's connection was either accepted on this
// rank's listening address (this end's local address) or made to the peer's (this end's
// remote address). So the ranks publish their pairs' listening addresses through the store and
// each matches its open sockets against them.
bool same_endpoint(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto &x = reinterpret_cast<const sockaddr_in&>(a), &y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    const auto &x = reinterpret_cast<const sockaddr_in6&>(a), &y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port && std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
  }
  return false;
}

std::vector<int> pair_sockets(gloo::Context& context, distributed::Store& store, const std::string& prefix, int rank,
                              int size, std::chrono::milliseconds timeout) {
  constexpr size_t kAddr = sizeof(sockaddr_storage);
  auto listening = [&](int peer) {
    sockaddr_storage a{};
    if (auto* tcp = dynamic_cast<const gloo::transport::tcp::Address*>(&context.getPair(peer)->address()))
      a = tcp->getSockaddr();
    return a;
  };
  std::string mine(kAddr * static_cast<size_t>(size), '\0');
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) {
      sockaddr_storage a = listening(peer);
      std::memcpy(mine.data() + kAddr * static_cast<size_t>(peer), &a, kAddr);
    }
  store.set(prefix + "listening/" + std::to_string(rank), mine);
  std::vector<sockaddr_storage> local(static_cast<size_t>(size)), remote(static_cast<size_t>(size));
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    local[static_cast<size_t>(peer)] = listening(peer);
    std::string theirs = store.get(prefix + "listening/" + std::to_string(peer), timeout);
    if (theirs.size() == mine.size())
      std::memcpy(&remote[static_cast<size_t>(peer)], theirs.data() + kAddr * static_cast<size_t>(rank), kAddr);
  }
  // A socket connected to a peer's listening address is that peer's pair. One whose local
  // address is this rank's listening address for a peer is that pair's accepted end, unless it
  // is connected to another listener (an outgoing connection can reuse a closed listener's port).
  // A peer matched by two sockets gets none: its reads then just block.
  std::vector<int> sockets(static_cast<size_t>(size), -1);
  std::vector<int> matches(static_cast<size_t>(size), 0);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = std::atoi(entry.path().filename().c_str());
    sockaddr_storage here{}, there{};
    socklen_t n = sizeof here, m = sizeof there;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&here), &n) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&there), &m) != 0)
      continue;  // not a socket, or not connected
    int by_remote = -1, by_local = -1;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      if (same_endpoint(there, remote[static_cast<size_t>(peer)])) by_remote = peer;
      if (same_endpoint(here, local[static_cast<size_t>(peer)])) by_local = peer;
    }
    int peer = by_remote >= 0 ? by_remote : by_local;
    if (peer < 0) continue;
    sockets[static_cast<size_t>(peer)] = fd;
    ++matches[static_cast<size_t>(peer)];
  }
  for (int peer = 0; peer < size; ++peer)
    if (matches[static_cast<size_t>(peer)] != 1) sockets[static_cast<size_t>(peer)] = -1;
  return sockets;
}

// Bytes of a message on a synchronous pair: Gloo's preamble (six size_t: gloo/transport/tcp/pair.h,
// Op), then the payload.
constexpr size_t kPreambleBytes = 6 * sizeof(size_t);

// The chunk of mesh_exchange (Note [One message per peer]), the same on every rank: at most two
// chunks and their heads per direction are ever unread, which the receiving socket's buffer
// must hold, or two ranks would block writing to each other until the timeout. Each rank asks
// for large receive buffers on its exchange sockets (kWantReceiveBuffer; Linux caps it at
// net.core.rmem_max and reports twice what it grants, and the window it advertises is at least
// half the reported size), publishes a quarter of the smallest it got, and every rank takes the
// smallest published. A rank with a socket it could not find publishes kUnknownChunk, what a
// default buffer holds twice (tcp_rmem's default, 128 KiB, autotuned upwards from there).
constexpr int kWantReceiveBuffer = 4 << 20;
constexpr size_t kUnknownChunk = size_t{64} << 10, kMinChunk = size_t{16} << 10;

size_t agreed_chunk(distributed::Store& store, const std::string& prefix, int rank, int size,
                    const std::vector<int>& sockets, std::chrono::milliseconds timeout, size_t head) {
  if (size == 1) return kUnknownChunk;  // never used: nothing is sent
  size_t mine = SIZE_MAX;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    int fd = sockets[static_cast<size_t>(peer)], granted = 0;
    socklen_t len = sizeof granted;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kWantReceiveBuffer, sizeof kWantReceiveBuffer) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &granted, &len) != 0) {
      mine = std::min(mine, kUnknownChunk);
      continue;
    }
    size_t quarter = static_cast<size_t>(granted) / 4;
    mine = std::min(mine, quarter > head + kPreambleBytes ? quarter - head - kPreambleBytes : 0);
  }
  mine = std::max(mine, kMinChunk) / 64 * 64;
  store.set(prefix + "chunk/" + std::to_string(rank), std::to_string(mine));
  size_t chunk = mine;
  for (int r = 0; r < size; ++r)
    if (r != rank) chunk = std::min<size_t>(chunk, std::stoull(store.get(prefix + "chunk/" + std::to_string(r), timeout)));
  return chunk;
}

class GlooGroup final : public Group {
 public:
  GlooGroup(std::shared_ptr<gloo::Context> context, std::shared_ptr<gloo::Context> exchange, std::vector<int> sockets,
            size_t chunk, int rank, int size, std::chrono::milliseconds timeout)
      : Group(rank, size, kCPU, timeout), context_(std::move(context)), exchange_(std::move(exchange)),
        spin_(spin_budget(size)), sockets_(std::move(sockets)), chunk_(chunk) {}

  // A message's head (Note [One message per peer]): room for the agreement check's header.
  static constexpr size_t kHead = 256;

  const char* backend() const noexcept override { return "gloo"; }

  void all_reduce(Span in, Span out, ReduceOp op) override {
    guarded("all_reduce", [&] {
      by_width(in.dtype, [&](auto w) {
        using W = decltype(w);
        gloo::AllreduceOptions o(context_);
        if (in.data != out.data) o.setInput(static_cast<W*>(in.data), in.count);
        o.setOutput(static_cast<W*>(out.data), out.count);
        o.setReduceFunction(reduce_function(in.dtype, op));
        o.setTag(next_tag());
        gloo::allreduce(o);
      });
    });
  }

  void broadcast(Span buf, int root) override {
    guarded("broadcast", [&] {
      by_width(buf.dtype, [&](auto w) {
        using W = decltype(w);
        gloo::BroadcastOptions o(context_);
        o.setOutput(static_cast<W*>(buf.data), buf.count);
        o.setRoot(root);
        o.setTag(next_tag());
        gloo::broadcast(o);
      });
    });
  }

  // Every rank sends its part straight to every other: one round of messages where Gloo's ring
  // takes size - 1, which is what small and two-rank exchanges are bound by.
  void all_gather(Span in, Span out) override {
    std::vector<const char*> parts;
    guarded("all_gather", [&] { mesh_exchange(nullptr, in.data, in.bytes(), parts, "all_gather"); });
    for (int r = 0; r < size(); ++r)  // memmove: this rank's part may be `in` itself, anywhere in out
      std::memmove(static_cast<char*>(out.data) + static_cast<size_t>(r) * in.bytes(), parts[static_cast<size_t>(r)],
                   in.bytes());
  }

  std::vector<std::string> gather_parts(const std::string* header, Span in, std::vector<const char*>& parts,
                                        const char* what) override {
    std::vector<std::string> headers;
    guarded(what, [&] { headers = mesh_exchange(header, in.data, in.bytes(), parts, what); });
    return headers;
  }
  bool has_gather_parts() const noexcept override { return true; }

  void reduce(Span in, Span out, ReduceOp op, int root) override {
    guarded("reduce", [&] {
      by_width(in.dtype, [&](auto w) {
        using W = decltype(w);
        gloo::ReduceOptions o(context_);
        // Gloo reduces in the output buffer, on every rank: non-roots lend their input's copy.
        if (in.data != out.data) o.setInput(static_cast<W*>(in.data), in.count);
        o.setOutput(static_cast<W*>(out.data), out.count);
        o.setRoot(root);
        o.setReduceFunction(reduce_function(in.dtype, op));
        o.setTag(next_tag());
        gloo::reduce(o);
      });
    });
  }

  void gather(Span in, Span out, int root) override {
    guarded("gather", [&] {
      by_width(in.dtype, [&](auto w) {
        using W = decltype(w);
        gloo::GatherOptions o(context_);
        o.setInput(static_cast<W*>(in.data), in.count);
        if (rank() == root) o.setOutput(static_cast<W*>(out.data), out.count);
        o.setRoot(root);
        o.setTag(next_tag());
        gloo::gather(o);
      });
    });
  }

  void scatter(Span in, Span out, int root) override {
    guarded("scatter", [&] {
      by_width(in.dtype, [&](auto w) {
        using W = decltype(w);
        gloo::ScatterOptions o(context_);
        if (rank() == root) {
          std::vector<W*> chunks;
          for (int r = 0; r < size(); ++r) chunks.push_back(static_cast<W*>(in.data) + r * out.count);
          o.setInputs(chunks, static_cast<size_t>(out.count));
        }
        o.setOutput(static_cast<W*>(out.data), out.count);
        o.setRoot(root);
        o.setTag(next_tag());
        gloo::scatter(o);
      });
    });
  }

  void send(Span in, int peer, uint32_t tag) override {
    guarded("send", [&] {
      auto buf = context_->createUnboundBuffer(in.data, in.bytes());
      buf->send(peer, gloo::Slot::build(kPointToPoint, tag));
      if (!buf->waitSend(timeout())) throw gloo::IoException("timed out");
      retire(std::move(buf));
    });
  }

  void recv(Span out, int peer, uint32_t tag) override {
    guarded("recv", [&] {
      auto buf = context_->createUnboundBuffer(out.data, out.bytes());
      buf->recv(peer, gloo::Slot::build(kPointToPoint, tag));
      if (!buf->waitRecv(timeout())) throw gloo::IoException("timed out");
      retire(std::move(buf));
    });
  }

  void barrier() override {
    guarded("barrier", [&] {
      gloo::BarrierOptions o(context_);
      o.setTag(next_tag());
      gloo::barrier(o);
    });
  }

  void copy(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }

  // A headed gather of no data: the same first message as every headed call, so that a rank
  // checking a broadcast and one checking an all-reduce read each other's headers.
  std::vector<std::string> exchange(const std::string& mine, const char* what) override {
    std::vector<std::string> headers;
    std::vector<const char*> parts;
    guarded(what, [&] { headers = mesh_exchange(&mine, nullptr, 0, parts, what); });
    return headers;
  }

 private:
  // Slots of point-to-point messages: a prefix no Gloo collective uses.
  static constexpr uint8_t kPointToPoint = 0xd1;

  // Note [One message per peer]. mesh_exchange gathers every rank's n bytes at `mine` over the
  // exchange context's pairs (Note [The exchange context]), with `header` (when given) in the
  // same messages: parts[r] = rank r's bytes, in landing_ (this rank's own: a copy), and
  // returns every rank's header (Group::gather_parts). On this project's 2-core VM a message
  // on a loopback pair cost about 8 us to write and 7 to read whatever its size, besides 0.04
  // to 0.09 us a KiB (perf/RESULTS.md, "ddp, one message per peer"): an all-reduce of
  // BENCH mlp's 166.5 KiB sent as a header and two chunks spent more on its three messages
  // than on its bytes. So each rank's bytes go in as few messages as the sockets' buffers
  // allow, the header ahead of the first, in one contiguous region: landing_ has a slot per
  // rank, a head of kHead bytes (n, the header's length, the header) then max(n, chunk_)
  // bytes. This rank fills its own slot (the only copy) and writes its first message (head
  // and first chunk) to every peer, each peer's landing in this rank's slot for it; then it
  // reads every peer's first message. Every first message fits its slot whatever its peer's
  // n (at most kHead + chunk_ bytes), so a disagreement is read whole, found from the heads,
  // and returned with nothing left in the sockets. Then chunk by chunk: write chunk k, read
  // every peer's chunk k. A rank writes chunk k only after reading every peer's chunk k - 1,
  // which each peer wrote after reading this rank's chunk k - 2: at most two chunks per
  // direction are ever unread, which the receiving socket's buffer holds (chunk_, agreed at
  // connection: agreed_chunk), so two ranks' blocking writes never wait on each other.
  std::vector<std::string> mesh_exchange(const std::string* header, const void* mine, size_t n,
                                         std::vector<const char*>& parts, const char* what) {
    std::vector<std::string> headers;
    if (size() == 1) {
      parts.assign(1, static_cast<const char*>(mine));
      if (header) headers.push_back(*header);
      return headers;
    }
    size_t header_bytes = header ? header->size() : 0;
    LOOM_CHECK(header_bytes <= kHead - 2 * sizeof(uint64_t), Runtime, "internal: a ", header_bytes,
               "-byte header in a ", kHead, "-byte head");
    size_t stride = kHead + round_up(std::max(n, chunk_), 64);
    char* base = landing(stride * static_cast<size_t>(size()));
    auto slot = [&](int r) { return base + static_cast<size_t>(r) * stride; };
    char* own = slot(rank());
    uint64_t words[2] = {n, header_bytes};
    std::memset(own, 0, kHead);  // no uninitialized bytes on the wire
    std::memcpy(own, words, sizeof words);
    if (header) std::memcpy(own + sizeof words, header->data(), header_bytes);
    if (n > 0) std::memcpy(own + kHead, mine, n);

    using Buffer = std::unique_ptr<gloo::transport::Buffer>;
    std::vector<int> peers;
    for (int r = 0; r < size(); ++r)
      if (r != rank()) peers.push_back(r);
    std::vector<Buffer> sends, recvs;
    for (int peer : peers) {
      recvs.push_back(exchange_->getPair(peer)->createRecvBuffer(kDataSlot, slot(peer), stride));
      sends.push_back(exchange_->getPair(peer)->createSendBuffer(kDataSlot, own, stride));
    }
    auto transfer = [&](size_t offset, size_t bytes) {
      for (Buffer& b : sends) {
        b->send(offset, bytes, offset);
        b->waitSend();  // returns at once: the write in send() was blocking
      }
      for (size_t i = 0; i < peers.size(); ++i) {
        await_message(peers[i], bytes);
        recvs[i]->waitRecv();  // reads the peer's next message, on this thread
      }
    };
    size_t first = std::min(n, chunk_);
    transfer(0, kHead + first);

    // The heads: every rank's length and header.
    bool agree = true;
    for (int peer : peers) agree = agree && std::memcmp(slot(peer), own, sizeof words + header_bytes) == 0;
    if (header)
      for (int r = 0; r < size(); ++r) {
        uint64_t theirs[2];
        std::memcpy(theirs, slot(r), sizeof theirs);
        headers.emplace_back(slot(r) + sizeof theirs, std::min<uint64_t>(theirs[1], kHead - sizeof theirs));
      }
    if (!agree) {
      if (header && std::any_of(headers.begin(), headers.end(), [&](const std::string& h) { return h != *header; }))
        return headers;  // the caller names each rank's call
      std::string lengths;
      for (int r = 0; r < size(); ++r) {
        uint64_t theirs;
        std::memcpy(&theirs, slot(r), sizeof theirs);
        lengths += detail::concat(r ? ", " : "", "rank ", r, " ", theirs, " bytes");
      }
      LOOM_FAIL(Distributed, what, ": the ranks of the process group (gloo) passed inputs of different sizes: ",
                lengths);
    }
    for (size_t offset = first; offset < n; offset += chunk_) transfer(kHead + offset, std::min(chunk_, n - offset));
    parts.resize(static_cast<size_t>(size()));
    for (int r = 0; r < size(); ++r) parts[static_cast<size_t>(r)] = slot(r) + kHead;
    // A buffer unregisters its slot from its pair when destroyed, and the sends share the
    // receives' slots: every transfer is done by now, so the order no longer matters.
    return headers;
  }

  static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

  // landing_, at least `bytes` of it (grow-only: fresh memory costs page faults at every call,
  // as many bytes touched again as the exchange moves), aligned for the reductions' vectors.
  char* landing(size_t bytes) {
    if (landing_bytes_ < bytes) {
      landing_.reset();
      landing_.reset(new char[bytes + 64]);  // uninitialized: each call writes what it reads
      landing_bytes_ = bytes;
    }
    return landing_.get() + (64 - reinterpret_cast<uintptr_t>(landing_.get()) % 64) % 64;
  }

  // Polls the exchange pair of `peer` until a message of `payload` bytes has arrived whole, at
  // most spin_ (Note [Spinning before a blocking read]); the read that follows reads it.
  void await_message(int peer, size_t payload) const {
    int fd = sockets_[static_cast<size_t>(peer)];
    if (spin_.count() > 0 && fd >= 0) {
      size_t whole = kPreambleBytes + payload;
      Clock::time_point until = Clock::now() + spin_;
      do {
        int ready = 0;
        if (ioctl(fd, FIONREAD, &ready) != 0) break;
        if (static_cast<size_t>(ready) >= whole) return count(metrics().exchange_reads_polled);
      } while (Clock::now() < until);
    }
    count(metrics().exchange_reads_blocked);
  }

  // The exchange context's slot: a message goes to the peer's buffer registered at its slot.
  static constexpr int kDataSlot = 2;

  // Note [The exchange context]. Gloo's TCP pairs normally hand every receive to Gloo's network
  // thread: it reads the socket and wakes the calling thread, and while the calling thread holds
  // the pair's lock (posting a receive, writing a message itself) that thread's epoll reports
  // the socket again and again and it spins (Pair::handleEvents gives up on try_lock). On two
  // ranks sharing two cores that spinning and the hand-offs took as much CPU as the step itself
  // (perf/RESULTS.md, ddp). So the exchanges loom makes itself (the agreement check, all_gather,
  // and through it the direct all-reduce: collective.h) run on a second context whose pairs are
  // in Gloo's synchronous mode: out of the network thread's epoll, blocking sockets, read and
  // written by the calling thread alone (one thread at a time uses a group: work.h). Sync pairs
  // only take Gloo's pinned buffers (its unbound buffers, which Gloo's own algorithms use, need
  // the network thread), so those algorithms stay on `context_`. A peer that dies makes the
  // blocking read fail at once; one that hangs, after the group's timeout (SO_RCVTIMEO).

  // Note [Retiring unbound buffers]. Gloo's network thread signals a transfer complete while it
  // still holds the buffer, and destroying a buffer waits for that thread to let go by spinning
  // on sched_yield. On a busy machine the spinning thread can keep that thread off the core until
  // the scheduler's next tick: each collective then took 4 to 16 ms instead of about 70 us (the
  // ddp workload on 2 cores). So a finished buffer is kept until the next one finishes, when
  // the network thread has long let go; it never touches the memory it names again (every
  // transfer on it is done, and its slot is never used again).
  void retire(std::unique_ptr<gloo::transport::UnboundBuffer> buf) { retired_ = std::move(buf); }

  // Collectives are matched by tag across ranks; every rank makes the same calls in the same
  // order, so counting them gives the same tags everywhere.
  uint32_t next_tag() { return tag_++; }

  template <typename F>
  void guarded(const char* what, F&& f) {
    check_usable();
    try {
      f();
    } catch (const gloo::Exception& e) {
      fail(what, e.what());
    } catch (const gloo::EnforceNotMet& e) {
      // A synchronous pair read a message no buffer of this call waits for: the ranks' calls
      // went out of step (each rank must make the same calls in the same order).
      broken(detail::concat(what, " failed on rank ", rank(), " of ", size(), " (gloo): a message of another call ",
                            "arrived; the ranks' collective calls are out of step [", e.what(), "]"));
    }
  }

  // Gloo says "Timed out" (its algorithms) or "Read timeout"/"Write timeout" (synchronous pairs).
  [[noreturn]] void fail(const char* what, const std::string& why) {
    bool timed_out = why.find("imed out") != std::string::npos || why.find("imeout") != std::string::npos;
    broken(detail::concat(what, " failed on rank ", rank(), " of ", size(), " (gloo): ",
                          timed_out ? detail::concat("timed out after ", timeout().count() / 1000.0,
                                                     " s waiting for the other ranks (one may be stuck, or dead)")
                                    : "a peer closed its connection: another rank has probably exited or crashed",
                          " [", why, "]"));
  }

  std::shared_ptr<gloo::Context> context_;
  std::shared_ptr<gloo::Context> exchange_;  // Note [The exchange context]
  std::chrono::microseconds spin_;           // Note [Spinning before a blocking read]
  std::vector<int> sockets_;                 // of exchange_'s pairs, by rank (-1: this rank, or not found)
  size_t chunk_;                             // Note [One message per peer]: agreed_chunk
  std::unique_ptr<char[]> landing_;          // of mesh_exchange (landing())
  size_t landing_bytes_ = 0;
  std::unique_ptr<gloo::transport::UnboundBuffer> retired_;  // destroyed before the context
  uint32_t tag_ = 0;
};

}  // namespace

std::unique_ptr<Group> make_gloo_group(const Rendezvous& r, int rank, int size, std::chrono::milliseconds timeout) {
  gloo::transport::tcp::attr attr;
  attr.hostname = r.hostname;
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    LOOM_FAIL(Distributed, "gloo cannot open a TCP device on '", r.hostname.empty() ? "this host's name" : r.hostname,
              "': ", e.what(), " (set GLOO_SOCKET_IFNAME to an interface, or use MASTER_ADDR=127.0.0.1 on one machine)");
  }
  // Two full meshes: Gloo's algorithms' and the synchronous one of Note [The exchange context].
  auto connect = [&](const std::string& prefix, bool sync) {
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(timeout);
    GlooStore store(r.store, prefix, timeout);
    try {
      context->connectFullMesh(store, device);
      if (sync)
        for (int peer = 0; peer < size; ++peer)
          if (peer != rank) context->getPair(peer)->setSync(true, /*busyPoll=*/false);
    } catch (const Error&) {
      throw;  // the store's own, naming what it waited for
    } catch (const std::exception& e) {
      LOOM_FAIL(Distributed, "gloo could not connect rank ", rank, " to the other ", size - 1, " ranks: ", e.what());
    }
    return context;
  };
  auto context = connect(r.prefix, false);
  auto exchange = connect(r.prefix + "exchange/", true);
  std::vector<int> sockets = pair_sockets(*exchange, *r.store, r.prefix + "exchange/", rank, size, timeout);
  size_t chunk = agreed_chunk(*r.store, r.prefix + "exchange/", rank, size, sockets, timeout, GlooGroup::kHead);
  return std::make_unique<GlooGroup>(std::move(context), std::move(exchange), std::move(sockets), chunk, rank, size,
                                     timeout);
}

std::string gloo_unavailable_reason() { return ""; }

}  // namespace loom::distributed
