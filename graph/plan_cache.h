// The plan cache: the plans every executor has lowered traces into, in one process-wide cache
// bounded by bytes and by entries, the least recently used evicted first.
//
// Note [Plan cache]
//
// What is cached. A plan is what an executor made of a trace (graph/compiled.h,
// graph/cuda_executor.h, graph/cuda_emulator.h): its program, memory plan and kernels, the arena
// its intermediates live in and, on a GPU, its private pool, argument table and CUDA Graph. An
// entry is keyed by the executor that made it (an Owner: a fused and an unfused executor lower
// one trace differently) and that executor's key of the trace (graph/binding.h plan_key). Eager
// GPU ops run as one-node traces (graph/op_trace.h): their plans are entries like any other.
//
// Bounds. LOOM_PLAN_CACHE_MB (default 1024): the most memory the cached plans of one device hold
// in that device's allocator (arenas, scratch, argument tables: PlanMemory below).
// LOOM_PLAN_CACHE_ENTRIES (default 512): the most plans, all devices together; it also bounds
// the host memory of the plans' descriptions (programs, kernel parameters: kilobytes a plan),
// which the byte bound does not count. An insertion that takes a bound over evicts the least
// recently used plans until both hold again; the plan just inserted is never evicted by its own
// insertion, so a plan bigger than the budget still runs (the next insertion evicts it).
//
// Lifetime. An executor runs a plan through a Pin: a reference to it and its run lock, for the
// time of one run. Evicting or clearing drops only the cache's reference, so a plan is destroyed
// when its last run ends, never during one. Nothing outside a run needs a plan: results never
// alias its arena (graph/binding.h collect_results hands out fresh output buffers and copies any
// other value), so destroying it frees its memory (PlanMemory: back to the system at once) and,
// on a GPU, its CUDA Graph, once the device's stream has drained. The cache itself is never destroyed: no plan is destroyed
// by a static destructor, after the CUDA driver may have gone. For the same reason a destroyed
// executor's plans stay until they are evicted or cleared (they are never found again, so they
// age out of the cache).
//
// Kernel modules. A plan holds the modules it launches kernels from; the module caches of
// rtc/host_compiler.h (CPU) and runtime/cuda/module.h (GPU) hold them weakly, so a module is
// unloaded when the last plan using it is destroyed. Not a bounded module cache of its own,
// because modules are shared by every plan of one program structure (batch sizes and scalar
// values are kernel arguments, not source: DESIGN decision 6): while any plan of the family is
// cached, a re-lowered plan finds its module in memory and neither compiles nor loads anything,
// and the plan bounds already bound the modules (at most two a plan). A module that no cached
// plan uses costs a load from the disk cache (no compile) when it is needed again. One bound,
// one set of knobs.
//
// Threads. One mutex guards the entries, never held while lowering (compiles take seconds) nor
// while destroying plans (a GPU plan waits for its stream). Two threads that miss the same key
// both lower it; the first insertion wins and both run the winner. The runs of a GPU plan take
// turns on its run lock (they share its table and graph); a CPU plan gives each run at once an
// arena of its own (graph/compiled.cpp), so its runs overlap (the extra arenas come from the
// plan's pool, but the cache counts the bytes the plan held when inserted). Runs of different
// plans never wait for each other.
//
// Metrics (runtime/metrics.h): graph_cache_hits and graph_cache_misses per lookup,
// plan_cache_entries and plan_cache_bytes (what the cache holds now), plan_cache_evictions
// (plans evicted for a bound; clear() is not an eviction).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/array.h"
#include "runtime/device.h"

namespace loom::graph {

// What an executor lowers a trace into. Executors derive their plan types from it.
struct CachedPlan {
  CachedPlan() = default;
  CachedPlan(const CachedPlan&) = delete;
  CachedPlan& operator=(const CachedPlan&) = delete;
  virtual ~CachedPlan() = default;

  // Whether a run of the plan uses state that other runs of it also use (a GPU plan's argument
  // table and graph): then its runs take turns. A plan type whose runs each take their own memory
  // sets this to false (the CPU plan: an arena per run).
  static constexpr bool kExclusiveRuns = true;
  std::mutex running;  // held by the run that uses the plan (Pin), for exclusive plans
};

// A plan for the time of one run: alive, and for a plan whose runs are exclusive, no other run of
// it in progress.
template <typename P>
class Pin {
 public:
  explicit Pin(std::shared_ptr<P> plan) : plan_(std::move(plan)), lock_(plan_->running, std::defer_lock) {
    if constexpr (P::kExclusiveRuns) lock_.lock();
  }
  P& operator*() const noexcept { return *plan_; }
  P* operator->() const noexcept { return plan_.get(); }
  // The plan itself, for work that outlives the run (a weak reference to it: graph/compiled.cpp).
  const std::shared_ptr<P>& shared() const noexcept { return plan_; }

 private:
  std::shared_ptr<P> plan_;  // declared first: released after the lock, so the lock never outlives the plan
  std::unique_lock<std::mutex> lock_;
};

class PlanCache {
 public:
  using Owner = uint64_t;

  struct Limits {
    int64_t bytes_per_device;
    int64_t entries;
  };

  // A plan as its executor lowered it, with the bytes it holds in its device's allocator.
  struct Lowered {
    std::shared_ptr<CachedPlan> plan;
    int64_t bytes = 0;
  };

  // The limits of the environment: LOOM_PLAN_CACHE_MB and LOOM_PLAN_CACHE_ENTRIES, each a
  // non-negative integer (0: keep only the plan inserted last); anything else is an error.
  static Limits limits_from_environment();

  // A new owner: each executor takes one when it is made.
  static Owner new_owner() noexcept;

  // The plan `owner` made of the trace with `key` on `device`, pinned for one run. A hit makes it
  // the most recently used; a miss calls `lower()` (returning Lowered, its plan a P) without the
  // cache's lock, inserts its plan and evicts for the bounds. If `lower` throws, the cache is as
  // it was. Every plan of an owner must be of one type P.
  template <typename P, typename Lower>
  Pin<P> pin(Owner owner, uint64_t key, Device device, Lower&& lower) {
    std::vector<std::shared_ptr<CachedPlan>> evicted;  // destroyed after the lock, before the run
    std::shared_ptr<CachedPlan> plan = find(owner, key);
    if (!plan) plan = insert(owner, key, device, lower(), evicted);
    evicted.clear();
    return Pin<P>(std::static_pointer_cast<P>(std::move(plan)));
  }

  // Drops every plan (of every executor and device). Plans being run are destroyed when their
  // runs end.
  void clear();

  Limits limits() const;
  // Sets the bounds and evicts down to them at once.
  void set_limits(Limits limits);

 private:
  struct Entry {
    Owner owner;
    uint64_t key;
    Device device;
    int64_t bytes;
    std::shared_ptr<CachedPlan> plan;
  };
  struct Id {
    Owner owner;
    uint64_t key;
    friend bool operator==(const Id&, const Id&) = default;
  };
  struct IdHash {
    size_t operator()(const Id& id) const noexcept;
  };

  explicit PlanCache(Limits limits);
  friend PlanCache& plan_cache();

  std::shared_ptr<CachedPlan> find(Owner owner, uint64_t key);
  std::shared_ptr<CachedPlan> insert(Owner owner, uint64_t key, Device device, Lowered lowered,
                                     std::vector<std::shared_ptr<CachedPlan>>& evicted);
  // Evicts least recently used entries other than `keep` until the bounds hold.
  void evict_locked(const Entry* keep, std::vector<std::shared_ptr<CachedPlan>>& evicted);
  void erase_locked(std::list<Entry>::iterator it, std::vector<std::shared_ptr<CachedPlan>>& evicted);
  int64_t& device_bytes_locked(Device device);
  bool over_locked(Device device);
  void publish_locked() const;  // the gauges of runtime/metrics.h

  mutable std::mutex mu_;
  Limits limits_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<Id, std::list<Entry>::iterator, IdHash> index_;
  std::unordered_map<uint32_t, int64_t> device_bytes_;  // by device (type, index)
  int64_t bytes_ = 0;
};

// The process's plan cache, made on first use with limits_from_environment() (which may throw:
// the next use tries again). Never destroyed.
PlanCache& plan_cache();

// The memory a plan holds for its life (arena, scratch, argument table): a private pool of its
// device's allocator (runtime/allocator.h), released when the plan goes. So an evicted plan's
// memory returns to the system at once; in the default pool it would stay reserved, in free lists
// of sizes that later plans (of other batch sizes) seldom ask for. Arrays allocated here may
// outlive it: their blocks then return to the system when they are freed.
class PlanMemory {
 public:
  explicit PlanMemory(Device device);
  ~PlanMemory();
  PlanMemory(const PlanMemory&) = delete;
  PlanMemory& operator=(const PlanMemory&) = delete;

  // A new array of the pool.
  Array allocate(IntSpan sizes, DType dtype);
  // What the pool holds from the system: the plan's bytes in the plan cache's bound.
  int64_t bytes() const;

 private:
  CachingAllocator& allocator_;
  PoolId pool_;
};

}  // namespace loom::graph
