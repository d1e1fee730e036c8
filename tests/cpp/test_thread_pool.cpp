// parallel_for: every index runs exactly once, chunks respect the grain, nested and concurrent
// calls complete (they run serially on their own thread instead of deadlocking).
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/error.h"
#include "runtime/thread_pool.h"
#include "runtime/warning.h"

using namespace loom;

BOOST_AUTO_TEST_SUITE(thread_pool)

BOOST_AUTO_TEST_CASE(every_index_runs_once) {
  for (int64_t n : {1, 2, 7, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    parallel_for(n, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (auto& h : hits) BOOST_TEST(h.load() == 1);
  }
}

BOOST_AUTO_TEST_CASE(chunks_respect_the_grain) {
  std::atomic<int> calls{0};
  parallel_for(100, 1000, [&](int64_t lo, int64_t hi) {
    BOOST_TEST(lo == 0);
    BOOST_TEST(hi == 100);
    ++calls;
  });
  BOOST_TEST(calls.load() == 1);
  std::atomic<int64_t> smallest{1 << 30};
  parallel_for(10000, 3000, [&](int64_t lo, int64_t hi) {
    int64_t size = hi - lo, cur = smallest.load();
    while (size < cur && !smallest.compare_exchange_weak(cur, size)) {
    }
  });
  BOOST_TEST(smallest.load() >= (num_threads() > 1 ? 3000 : 10000));
}

BOOST_AUTO_TEST_CASE(nested_and_concurrent_calls_complete) {
  std::atomic<int64_t> sum{0};
  parallel_for(8, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      parallel_for(100, 1, [&](int64_t a, int64_t b) { sum += b - a; });
  });
  BOOST_TEST(sum.load() == 800);
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r) parallel_for(1000, 10, [&](int64_t a, int64_t b) { total += b - a; });
    });
  for (auto& c : callers) c.join();
  BOOST_TEST(total.load() == 4 * 50 * 1000);
}

// The caller polls for the workers' last chunks before it sleeps (thread_pool.h): whether a
// worker's chunk ends during the poll or after it, the job returns only once every chunk ran.
BOOST_AUTO_TEST_CASE(a_job_returns_after_its_slowest_chunk) {
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  std::atomic<int64_t> worker_chunks{0};
  for (int64_t slow_us : {0, 20, 300}) {  // within the caller's poll, and past it
    for (int round = 0; round < 50; ++round) {
      std::vector<std::atomic<int>> done(16);
      pool.run(16, 1, [&](int64_t lo, int64_t hi) {
        // Every chunk takes a while, so that the worker (woken in tens of microseconds) gets
        // some; a worker's chunk takes longer, so that it finishes after the caller's.
        int64_t us = 5 + (std::this_thread::get_id() != caller ? slow_us : 0);
        auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
        while (std::chrono::steady_clock::now() < until) {
        }
        if (std::this_thread::get_id() != caller) worker_chunks.fetch_add(1);
        for (int64_t i = lo; i < hi; ++i) done[static_cast<size_t>(i)].store(1, std::memory_order_relaxed);
      });
      for (auto& d : done) BOOST_TEST_REQUIRE(d.load() == 1);
    }
  }
  BOOST_TEST(worker_chunks.load() > 0);  // the worker did take part
}

// set_num_threads (torch.set_num_threads): a resized pool runs its loops on exactly the new
// number of threads, and a loop running while another thread resizes completes.
BOOST_AUTO_TEST_CASE(a_resized_pool_runs_on_the_new_thread_count) {
  ThreadPool pool(2);
  for (int threads : {4, 1, 3, 3, 2}) {
    pool.resize(threads);
    BOOST_TEST(pool.threads() == threads);
    std::mutex mu;
    std::set<std::thread::id> seen;
    std::vector<std::atomic<int>> hits(4096);
    for (int round = 0; round < 200 && static_cast<int>(seen.size()) < threads; ++round)
      pool.run(4096, 1, [&](int64_t lo, int64_t hi) {
        auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
        while (std::chrono::steady_clock::now() < until) {
        }
        for (int64_t i = lo; i < hi; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        std::lock_guard lock(mu);
        seen.insert(std::this_thread::get_id());
      });
    BOOST_TEST(static_cast<int>(seen.size()) == threads);  // every thread took part, and no more
    int rounds = hits[0].load();
    for (auto& h : hits) BOOST_TEST_REQUIRE(h.load() == rounds);
  }
  std::atomic<int64_t> total{0};
  std::thread runner([&] {
    for (int r = 0; r < 100; ++r) pool.run(1000, 10, [&](int64_t a, int64_t b) { total += b - a; });
  });
  for (int r = 0; r < 20; ++r) pool.resize(1 + r % 3);
  runner.join();
  BOOST_TEST(total.load() == 100 * 1000);
}

BOOST_AUTO_TEST_CASE(set_num_threads_sizes_the_process_pool) {
  int before = num_threads();
  set_num_threads(3);
  BOOST_TEST(num_threads() == 3);
  BOOST_TEST(configured_threads() == 3);
  for (int bad : {0, -2, kMaxThreads + 1}) BOOST_CHECK_THROW(set_num_threads(bad), Error);
  BOOST_TEST(num_threads() == 3);
  set_num_threads(before);
  BOOST_TEST(num_threads() == before);
}

BOOST_AUTO_TEST_SUITE_END()

// Issue 12, item 4: a system that refuses threads gives a smaller pool, never a hang or a crash.
namespace {

std::atomic<int> allowed{0};
std::optional<std::thread> start_some(std::function<void()> work) {
  if (allowed.fetch_sub(1) <= 0) return std::nullopt;  // as pthread_create's EAGAIN
  return ThreadPool::start_thread(std::move(work));
}

std::vector<std::string> warned;
void record_warning(const std::string& message) { warned.push_back(message); }

}  // namespace

BOOST_AUTO_TEST_SUITE(thread_pool_limits)

BOOST_AUTO_TEST_CASE(a_pool_of_every_thread_asked_for_does_not_warn) {
  WarningHandler previous = set_warning_handler(record_warning);
  forget_reported_warnings();
  warned.clear();
  ThreadPool pool(4);
  BOOST_TEST(pool.threads() == 4);
  set_warning_handler(previous);
  BOOST_TEST(warned.empty());
}

BOOST_AUTO_TEST_CASE(refused_threads_give_a_smaller_pool_that_works_and_warn_once) {
  WarningHandler previous = set_warning_handler(record_warning);
  forget_reported_warnings();
  warned.clear();
  for (int refuse_after : {0, 1, 3}) {
    allowed = refuse_after;
    ThreadPool pool(8, start_some);
    BOOST_TEST(pool.threads() == refuse_after + 1);
    std::vector<std::atomic<int>> hits(100003);
    for (int round = 0; round < 20; ++round)
      pool.run(100003, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
    for (auto& h : hits) BOOST_TEST(h.load() == 20);
  }  // each pool joins its workers here: a destructor that hung would hang the test
  set_warning_handler(previous);
  BOOST_TEST_REQUIRE(warned.size() == 1u);  // once per process, not once per pool
  BOOST_TEST(warned[0].find("0 of 7 worker threads") != std::string::npos, warned[0]);
}

BOOST_AUTO_TEST_CASE(loom_num_threads_is_checked_not_atoi) {
  BOOST_TEST(parse_thread_count("1") == 1);
  BOOST_TEST(parse_thread_count(" 12 ") == 12);
  BOOST_TEST(parse_thread_count("1024") == kMaxThreads);
  for (const char* bad : {"abc", "0", "-3", "4x", "+4", "1.5", "", " ", "1025", "99999999999999999999", "0x10"}) {
    try {
      parse_thread_count(bad);
      BOOST_ERROR("accepted LOOM_NUM_THREADS='" << bad << "'");
    } catch (const Error& e) {
      BOOST_TEST((e.kind() == ErrorKind::Value));
      BOOST_TEST(std::string(e.what()).find("LOOM_NUM_THREADS='" + std::string(bad) + "'") != std::string::npos,
                 e.what());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
