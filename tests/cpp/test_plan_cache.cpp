// The plan cache (graph/plan_cache.h) on its own: LRU order, the entry and per-device byte
// bounds, pinned plans outliving eviction, a failed lowering, two threads lowering one key, and
// threads running, inserting and evicting at once. The plans here are plain CachedPlans that
// record what happens to them; the executors' plans are tested through Python
// (tests/python/test_plan_cache.py).
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <future>
#include <random>
#include <thread>

#include "graph/plan_cache.h"
#include "runtime/error.h"
#include "runtime/metrics.h"

using namespace loom;
using namespace loom::graph;

namespace {

std::atomic<int64_t> live_plans{0};

PlanCache& cache() { return graph::plan_cache(); }

struct TestPlan final : CachedPlan {
  explicit TestPlan(int64_t id) : id(id) { ++live_plans; }
  ~TestPlan() override {
    alive = false;
    --live_plans;
  }
  int64_t id;
  std::atomic<bool> alive{true};
  std::atomic<int> runners{0};
};

// Sets the cache's bounds on an empty cache; restores them (and empties it) at the end.
struct Bounds {
  PlanCache::Limits old = cache().limits();
  explicit Bounds(PlanCache::Limits limits) {
    cache().clear();
    cache().set_limits(limits);
  }
  ~Bounds() {
    cache().set_limits(old);
    cache().clear();
  }
};

constexpr Device kGpu{DeviceType::CUDA, 0};

// Pins `key`, lowering a TestPlan of `bytes` (counted in `lowered`) on a miss.
Pin<TestPlan> pin(PlanCache::Owner owner, uint64_t key, int* lowered = nullptr, int64_t bytes = 0,
                  Device device = kCPU) {
  return cache().pin<TestPlan>(owner, key, device, [&] {
    if (lowered) ++*lowered;
    return PlanCache::Lowered{std::make_shared<TestPlan>(static_cast<int64_t>(key)), bytes};
  });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(plan_cache)

BOOST_AUTO_TEST_CASE(least_recently_used_go_first) {
  Bounds bounds({int64_t{1} << 30, 3});
  PlanCache::Owner owner = PlanCache::new_owner();
  int lowered = 0;
  for (uint64_t k : {1, 2, 3}) pin(owner, k, &lowered);
  pin(owner, 1, &lowered);  // a hit: 2 is now the least recently used
  pin(owner, 4, &lowered);  // evicts 2
  BOOST_TEST(lowered == 4);
  for (uint64_t k : {1, 3, 4}) pin(owner, k, &lowered);
  BOOST_TEST(lowered == 4);
  pin(owner, 2, &lowered);
  BOOST_TEST(lowered == 5);
  BOOST_TEST(metrics().plan_cache_entries.load() == 3);
  // Another owner's key is another entry.
  pin(PlanCache::new_owner(), 2, &lowered);
  BOOST_TEST(lowered == 6);
}

BOOST_AUTO_TEST_CASE(bytes_are_bounded_per_device) {
  Bounds bounds({100, 100});
  PlanCache::Owner owner = PlanCache::new_owner();
  int lowered = 0;
  pin(owner, 1, &lowered, 40);
  pin(owner, 2, &lowered, 40);
  pin(owner, 3, &lowered, 90, kGpu);  // another device's budget: evicts nothing on the CPU
  BOOST_TEST(metrics().plan_cache_entries.load() == 3);
  BOOST_TEST(metrics().plan_cache_bytes.load() == 170);
  int64_t evictions = metrics().plan_cache_evictions.load();
  pin(owner, 4, &lowered, 40);  // 120 bytes on the CPU: 1 goes
  BOOST_TEST(metrics().plan_cache_evictions.load() == evictions + 1);
  BOOST_TEST(metrics().plan_cache_bytes.load() == 170);
  pin(owner, 2, &lowered);
  pin(owner, 3, &lowered);
  BOOST_TEST(lowered == 4);
  pin(owner, 1, &lowered);
  BOOST_TEST(lowered == 5);
  // A plan bigger than the budget stays until the next insertion.
  pin(owner, 5, &lowered, 500);
  BOOST_TEST(metrics().plan_cache_bytes.load() == 590);
  pin(owner, 5, &lowered);
  BOOST_TEST(lowered == 6);
}

BOOST_AUTO_TEST_CASE(a_pinned_plan_outlives_its_eviction) {
  Bounds bounds({int64_t{1} << 30, 1});
  PlanCache::Owner owner = PlanCache::new_owner();
  int64_t before = live_plans.load();
  {
    Pin<TestPlan> running = pin(owner, 1);
    pin(owner, 2);  // evicts 1, which is running
    cache().clear();
    BOOST_TEST(running->alive.load());
    BOOST_TEST(live_plans.load() == before + 1);
  }
  BOOST_TEST(live_plans.load() == before);
  BOOST_TEST(metrics().plan_cache_entries.load() == 0);
  BOOST_TEST(metrics().plan_cache_bytes.load() == 0);
}

BOOST_AUTO_TEST_CASE(a_failed_lowering_leaves_the_cache_as_it_was) {
  Bounds bounds({int64_t{1} << 30, 2});
  PlanCache::Owner owner = PlanCache::new_owner();
  int lowered = 0;
  pin(owner, 1, &lowered, 8);
  pin(owner, 2, &lowered, 8);
  auto failing = [&]() -> PlanCache::Lowered { LOOM_FAIL(Runtime, "the compiler failed"); };
  BOOST_CHECK_THROW(cache().pin<TestPlan>(owner, 3, kCPU, failing), Error);
  BOOST_TEST(metrics().plan_cache_entries.load() == 2);
  BOOST_TEST(metrics().plan_cache_bytes.load() == 16);
  pin(owner, 1, &lowered);
  pin(owner, 2, &lowered);
  BOOST_TEST(lowered == 2);
}

BOOST_AUTO_TEST_CASE(two_threads_lowering_one_key_run_the_first_plan_inserted) {
  Bounds bounds({int64_t{1} << 30, 10});
  PlanCache::Owner owner = PlanCache::new_owner();
  std::promise<void> lowering, inserted;
  int64_t before = live_plans.load();
  int64_t slow_ran = 0;
  std::thread slow([&] {
    Pin<TestPlan> p = cache().pin<TestPlan>(owner, 7, kCPU, [&] {
      lowering.set_value();
      inserted.get_future().wait();  // lowers until the other thread has inserted its plan
      return PlanCache::Lowered{std::make_shared<TestPlan>(100), 0};
    });
    slow_ran = p->id;
  });
  lowering.get_future().wait();
  {
    Pin<TestPlan> fast =
        cache().pin<TestPlan>(owner, 7, kCPU, [&] { return PlanCache::Lowered{std::make_shared<TestPlan>(7), 0}; });
    BOOST_TEST(fast->id == 7);
  }
  inserted.set_value();
  slow.join();
  BOOST_TEST(slow_ran == 7);
  BOOST_TEST(live_plans.load() == before + 1);  // the losing plan is gone
  BOOST_TEST(metrics().plan_cache_entries.load() == 1);
}

BOOST_AUTO_TEST_CASE(threads_run_insert_and_evict_at_once) {
  // Two plans fit for eight keys: lookups, insertions and evictions interleave. A plan's runs
  // take turns, and no plan is destroyed while a run holds it.
  Bounds bounds({int64_t{1} << 30, 2});
  PlanCache::Owner owner = PlanCache::new_owner();
  int64_t before = live_plans.load();
  std::atomic<int> overlapping{0}, dead{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 3000; ++i) {
        Pin<TestPlan> p = pin(owner, rng() % 8, nullptr, 16);
        if (p->runners.fetch_add(1) != 0) ++overlapping;
        std::this_thread::yield();
        if (!p->alive.load()) ++dead;
        p->runners.fetch_sub(1);
        if (i % 500 == 0) cache().clear();
      }
    });
  for (std::thread& th : threads) th.join();
  BOOST_TEST(overlapping.load() == 0);
  BOOST_TEST(dead.load() == 0);
  BOOST_TEST(metrics().plan_cache_entries.load() <= 2);
  cache().clear();
  BOOST_TEST(live_plans.load() == before);
}

BOOST_AUTO_TEST_SUITE_END()
