// parallel_for: every index runs exactly once, chunks respect the grain, nested and concurrent
// calls complete (they run serially on their own thread instead of deadlocking).
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/thread_pool.h"

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

BOOST_AUTO_TEST_SUITE_END()
