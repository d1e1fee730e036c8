// runtime/distributed below Python: the rendezvous stores (values, waits bounded by the timeout
// with errors naming the key, the file removed by the last process out), and a Gloo group of two
// ranks in two threads of this process (collectives against their definitions, the agreement
// check naming each rank's call, a group broken by a failure refusing later calls).
#include <algorithm>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <unistd.h>

#include "runtime/distributed/collective.h"
#include "runtime/distributed/store.h"
#include "runtime/distributed/work.h"
#include "runtime/error.h"

using namespace loom;
using namespace loom::distributed;
using namespace std::chrono_literals;

namespace {

// Boost.Test's assertions are not thread-safe, and the ranks below are threads: two at once
// corrupt its state (a rank then fails with a std::length_error from inside an assertion). So
// every assertion of this file takes one lock.
std::mutex assertion_mutex;
#define LOCKED_TEST(...)                                           \
  do {                                                             \
    std::lock_guard<std::mutex> assertion_lock(assertion_mutex);   \
    BOOST_TEST(__VA_ARGS__);                                       \
  } while (0)

template <typename F>
std::string error_of(F&& f, ErrorKind kind = ErrorKind::Distributed) {
  try {
    f();
  } catch (const Error& e) {
    LOCKED_TEST(static_cast<int>(e.kind()) == static_cast<int>(kind));
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Runs `body(group)` on two ranks, each in a thread, over a TCP store on a free port.
void two_ranks(const std::function<void(Group&)>& body, std::chrono::milliseconds timeout = 5s) {
  if (!gloo_unavailable_reason().empty()) return;  // a build without Gloo: nothing to run
  auto server = make_tcp_store("127.0.0.1", 0, true, 10s);
  int port = tcp_store_port(*server);
  std::vector<std::string> failures(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      try {
        auto store = r == 0 ? server : make_tcp_store("127.0.0.1", port, false, 10s);
        std::unique_ptr<Group> g = make_gloo_group({store, "test/", "127.0.0.1"}, r, 2, timeout);
        body(*g);
      } catch (const std::exception& e) {
        failures[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : ranks) t.join();
  for (const std::string& f : failures) LOCKED_TEST(f == "");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(distributed)

BOOST_AUTO_TEST_CASE(tcp_store_sets_waits_and_times_out_naming_the_key) {
  auto server = make_tcp_store("127.0.0.1", 0, true, 5s);
  auto client = make_tcp_store("127.0.0.1", tcp_store_port(*server), false, 5s);
  std::thread later([&] {
    std::this_thread::sleep_for(50ms);
    server->set("answer", "42");
  });
  LOCKED_TEST(client->get("answer", 5s) == "42");  // waited for it
  later.join();
  LOCKED_TEST(client->add("n", 2) == 2);
  LOCKED_TEST(server->add("n", 3) == 5);
  auto start = std::chrono::steady_clock::now();
  std::string e = error_of([&] { client->get("never", 200ms); });
  LOCKED_TEST(contains(e, "timed out after 0.2 s waiting for 'never'"), e);
  LOCKED_TEST((std::chrono::steady_clock::now() - start >= 190ms));  // deadlines are kept to the millisecond
  LOCKED_TEST(client->get("answer", 1s) == "42");  // usable again after a timeout
}

BOOST_AUTO_TEST_CASE(tcp_store_client_without_a_server_times_out) {
  auto probe = make_tcp_store("127.0.0.1", 0, true, 1s);
  int port = tcp_store_port(*probe);
  probe.reset();  // nobody listens there now
  std::string e = error_of([&] { make_tcp_store("127.0.0.1", port, false, 300ms)->set("k", "v"); });
  LOCKED_TEST(contains(e, "connecting to the rendezvous store at 127.0.0.1:" + std::to_string(port)), e);
}

BOOST_AUTO_TEST_CASE(file_store_is_removed_by_the_last_process_out) {
  auto path = std::filesystem::temp_directory_path() / ("loom-store-" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  {
    auto a = make_file_store(path.string(), 2);
    auto b = make_file_store(path.string(), 2);
    a->set("x", std::string("\0bytes", 6));
    LOCKED_TEST(b->get("x", 1s) == std::string("\0bytes", 6));
    b->set("x", "new");
    LOCKED_TEST(a->get("x", 1s) == "new");  // the last record wins
    LOCKED_TEST(a->add("c", 1) == 1);
    LOCKED_TEST(b->add("c", 1) == 2);
    std::string e = error_of([&] { a->get("missing", 100ms); });
    LOCKED_TEST(contains(e, "waiting for 'missing' in the rendezvous file"), e);
    a.reset();
    LOCKED_TEST(std::filesystem::exists(path));  // b is still there
  }
  LOCKED_TEST(!std::filesystem::exists(path));
}

BOOST_AUTO_TEST_CASE(gloo_collectives_between_two_threads) {
  two_ranks([](Group& g) {
    int r = g.rank();
    std::vector<float> x = {1.0f + r, 2.0f * (r + 1), -3.0f};
    run(g, {Kind::AllReduce, ReduceOp::Sum, 0, DType::Float32, {3}}, x.data(), x.data());
    LOCKED_TEST((x == std::vector<float>{3, 6, -6}));
    std::vector<double> y = {1.0 + r, 4.0};
    run(g, {Kind::AllReduce, ReduceOp::Avg, 0, DType::Float64, {2}}, y.data(), y.data());
    LOCKED_TEST((y == std::vector<double>{1.5, 4.0}));
    std::vector<int64_t> m = {r, 10 - r}, big(2);
    run(g, {Kind::AllReduce, ReduceOp::Max, 0, DType::Int64, {2}}, m.data(), big.data());
    LOCKED_TEST((big == std::vector<int64_t>{1, 10}));
    std::vector<int32_t> mine = {r, r}, all(4);
    run(g, {Kind::AllGather, ReduceOp::Sum, 0, DType::Int32, {2}}, mine.data(), all.data());
    LOCKED_TEST((all == std::vector<int32_t>{0, 0, 1, 1}));
    std::vector<float> whole = {1, 2, 3, 4}, part(2);
    run(g, {Kind::ReduceScatter, ReduceOp::Sum, 0, DType::Float32, {4}}, whole.data(), part.data());
    LOCKED_TEST((part == (r == 0 ? std::vector<float>{2, 4} : std::vector<float>{6, 8})));
    std::vector<float> b = {float(r), float(r)};
    run(g, {Kind::Broadcast, ReduceOp::Sum, 1, DType::Float32, {2}}, b.data(), b.data());
    LOCKED_TEST((b == std::vector<float>{1, 1}));
    std::vector<float> red = {1.0f + r}, kept(1);
    run(g, {Kind::Reduce, ReduceOp::Sum, 0, DType::Float32, {1}}, red.data(), kept.data());
    LOCKED_TEST(kept[0] == (r == 0 ? 3.0f : 2.0f));  // off the root: its own value
    std::vector<float> p = {float(10 * r)};
    if (r == 0) send(g, {p.data(), 1, DType::Float32}, 1, 7);
    else recv(g, {p.data(), 1, DType::Float32}, 0, 7);
    LOCKED_TEST(p[0] == 0.0f);
    barrier(g);
  });
}

// All-reduces of sizes going up and down (the direct path's per-thread memory grows and is
// reused), in place and not, each on heap memory freed right after its call (a finished Gloo
// buffer is kept until the next transfer: runtime/distributed/gloo.cpp, Note [Retiring unbound
// buffers]; under ASan this also checks that nothing touches such memory afterwards).
BOOST_AUTO_TEST_CASE(gloo_all_reduces_of_changing_sizes_on_memory_freed_after_each) {
  two_ranks([](Group& g) {
    int r = g.rank();
    // 400000 doubles: 25 chunks of Gloo's synchronous exchange, far past the sockets' buffers.
    for (int64_t n : {1, 5000, 3, 70000, 64, 5000, 400000}) {
      for (bool in_place : {true, false}) {
        auto in = std::make_unique<std::vector<double>>(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) (*in)[static_cast<size_t>(i)] = static_cast<double>(i % 97) * (r + 1) + r;
        auto out = std::make_unique<std::vector<double>>(static_cast<size_t>(n), -1.0);
        double* dst = in_place ? in->data() : out->data();
        run(g, {Kind::AllReduce, ReduceOp::Sum, 0, DType::Float64, {n}}, in->data(), dst);
        bool right = true;
        for (int64_t i = 0; i < n; ++i) right = right && dst[i] == static_cast<double>(i % 97) * 3 + 1;
        LOCKED_TEST(right, "n " << n << (in_place ? " in place" : "") << " on rank " << r);
        in.reset();  // freed at once: the transfer's buffer still names it
        out.reset();
      }
    }
  });
}

BOOST_AUTO_TEST_CASE(gloo_ranks_that_disagree_all_raise_naming_each_call) {
  two_ranks([](Group& g) {
    int r = g.rank();
    std::vector<float> x(3 + r, 1.0f);
    std::string e = error_of([&] {
      run(g, {Kind::AllReduce, ReduceOp::Sum, 0, DType::Float32, {3 + r}}, x.data(), x.data());
    });
    LOCKED_TEST(contains(e, "rank 0 called all_reduce(SUM) on float32[3]; rank 1 called all_reduce(SUM) on float32[4]"),
               e);
    e = error_of([&] {
      if (r == 0) run(g, {Kind::Broadcast, ReduceOp::Sum, 0, DType::Float32, {2, 1}}, x.data(), x.data());
      else run(g, {Kind::AllGather, ReduceOp::Sum, 0, DType::Int64, {2}}, x.data(), x.data());
    });
    LOCKED_TEST(contains(e, "rank 0 called broadcast(root 0) on float32[2, 1]; rank 1 called all_gather on int64[2]"), e);
    std::vector<float> ok = {1.0f};  // every rank saw the disagreement: the group still works
    run(g, {Kind::AllReduce, ReduceOp::Sum, 0, DType::Float32, {1}}, ok.data(), ok.data());
    LOCKED_TEST(ok[0] == 2.0f);
  });
}

// Disagreeing calls of several chunks each: every rank raises after the first chunks were sent,
// drops what its peer sent, and the next call finds the sockets empty.
BOOST_AUTO_TEST_CASE(gloo_ranks_that_disagree_on_large_calls_raise_and_the_group_still_works) {
  two_ranks([](Group& g) {
    int r = g.rank();
    int64_t n = r == 0 ? 70000 : 50000;
    std::vector<double> x(static_cast<size_t>(n) * 2, 1.0);
    for (Kind kind : {Kind::AllReduce, Kind::AllGather}) {
      std::string e = error_of([&] { run(g, {kind, ReduceOp::Sum, 0, DType::Float64, {n}}, x.data(), x.data()); });
      LOCKED_TEST(contains(e, "rank 0 called " + std::string(kind_name(kind))), e);
    }
    std::vector<double> ok(70000, 1.0 + r);
    run(g, {Kind::AllReduce, ReduceOp::Sum, 0, DType::Float64, {70000}}, ok.data(), ok.data());
    LOCKED_TEST(std::all_of(ok.begin(), ok.end(), [](double v) { return v == 3.0; }));
  });
}

// An all-gather whose input is the start of its output (rank 1's own part belongs further on):
// the peer's part lands where the input was while it is still being sent.
BOOST_AUTO_TEST_CASE(gloo_all_gather_from_the_start_of_its_own_output) {
  two_ranks([](Group& g) {
    int r = g.rank();
    int64_t n = 40000;  // 320 KB: several chunks
    std::vector<double> buf(static_cast<size_t>(n) * 2, -1.0);
    for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(i)] = static_cast<double>(i) + 1e6 * r;
    run(g, {Kind::AllGather, ReduceOp::Sum, 0, DType::Float64, {n}}, buf.data(), buf.data());
    bool right = true;
    for (int64_t k = 0; k < 2 * n; ++k) right = right && buf[static_cast<size_t>(k)] == static_cast<double>(k % n) + 1e6 * static_cast<double>(k / n);
    LOCKED_TEST(right, "rank " << r);
  });
}

BOOST_AUTO_TEST_CASE(gloo_group_broken_by_a_timeout_refuses_later_calls) {
  two_ranks([](Group& g) {
    std::vector<float> x = {1.0f};
    if (g.rank() == 1) {
      std::this_thread::sleep_for(1500ms);  // past rank 0's 1 s timeout
      return;
    }
    std::string e = error_of([&] { run(g, {Kind::AllReduce, ReduceOp::Sum, 0, DType::Float32, {1}}, x.data(), x.data()); });
    LOCKED_TEST(contains(e, "all_reduce failed on rank 0 of 2 (gloo): timed out after 1 s"), e);
    e = error_of([&] { barrier(g); });
    LOCKED_TEST(contains(e, "cannot be used after an earlier failure"), e);
  }, 1s);
}

BOOST_AUTO_TEST_CASE(async_work_runs_in_order_and_raises_at_wait) {
  two_ranks([](Group& g) {
    auto shared = std::shared_ptr<Group>(&g, [](Group*) {});  // start() takes the registry's shared_ptr
    std::vector<std::vector<float>> data(5, std::vector<float>(3, 1.0f + g.rank()));
    std::vector<std::unique_ptr<Work>> works;
    for (auto& d : data) {
      float* p = d.data();
      works.push_back(start(shared, [&g, p] {
        run(g, {Kind::AllReduce, ReduceOp::Sum, 0, DType::Float32, {3}}, p, p);
      }, {}));
    }
    std::vector<float> now = {1.0f};  // a synchronous call waits for the queued ones first
    run(g, {Kind::AllReduce, ReduceOp::Sum, 0, DType::Float32, {1}}, now.data(), now.data());
    for (auto& w : works) LOCKED_TEST(w->done());
    for (auto& w : works) w->wait();
    for (auto& d : data) LOCKED_TEST((d == std::vector<float>{3, 3, 3}));
    auto failing = start(shared, [] { LOOM_FAIL(Value, "the job's own error"); }, {});
    std::string e = error_of([&] { failing->wait(); }, ErrorKind::Value);
    LOCKED_TEST(e == "the job's own error");
    stop_queue(g);  // the thread ends before the group does
  });
}

BOOST_AUTO_TEST_SUITE_END()
