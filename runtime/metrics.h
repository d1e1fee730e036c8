// Process-wide counters of what the engine did (DESIGN decision 13): loom.metrics() reads them,
// tests assert on them (a second run of a step compiles nothing), the perf harness reports them.
// Every layer increments the counters it owns; they are relaxed atomics, so counting is cheap
// enough for hot paths.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

namespace loom {

// Why a lazy sync ran: what asked for the values of pending tensors (lazy/sync.h SyncReason).
// loom.metrics() counts syncs per cause as syncs_<name>, and all of them as syncs.
#define LOOM_FOR_EACH_SYNC_CAUSE(X)                                                                 \
  X(Explicit, explicit)        /* loom.sync(), loom.synchronize() */                               \
  X(Item, item)                /* a Python number: item(), bool(), int(), float(), an index */     \
  X(Repr, repr)                /* printing a tensor */                                             \
  X(Host, host)                /* values leaving the device: tolist(), numpy(), buffers, DLPack, .to() */ \
  X(DataDependentShape, data_dependent_shape) /* an op whose result's shape depends on values */   \
  X(Step, step)                /* the end of an optimizer step (loom.optim.Optimizer.step) */      \
  X(Other, other)              /* anything else: another thread's tensor, a write into read memory */

enum class SyncCause : uint8_t {
#define LOOM_SYNC_CAUSE_ENUM(id, name) id,
  LOOM_FOR_EACH_SYNC_CAUSE(LOOM_SYNC_CAUSE_ENUM)
#undef LOOM_SYNC_CAUSE_ENUM
};

struct Metrics {
  std::atomic<int64_t> traces{0};                  // syncs that executed a non-empty trace
  std::atomic<int64_t> graph_cache_hits{0};        // traces whose executable graph was cached
  std::atomic<int64_t> graph_cache_misses{0};      // traces lowered anew
  std::atomic<int64_t> kernels_compiled{0};        // kernels produced by run-time compilation
  // Kernels compiled again at the full optimisation level in the background, for plans that
  // kept running (rtc/kernel_units.h): not in kernels_compiled, which counts the compiles a
  // run waited for.
  std::atomic<int64_t> kernels_optimized{0};
  std::atomic<int64_t> modules_loaded_from_disk{0};
  std::atomic<int64_t> kernel_launches{0};         // kernels run, eager and lazy
  std::atomic<int64_t> graph_replays{0};           // executable graphs launched
  std::atomic<int64_t> graph_capture_failures{0};  // plans whose capture failed: they run without a graph
  std::atomic<int64_t> compile_nanoseconds{0};
  std::atomic<int64_t> nodes_recorded{0};          // lazy IR nodes created
  // Lazy syncs that ran a trace (of pending tensors or writes), in all and by cause (SyncCause).
  std::atomic<int64_t> syncs{0};
#define LOOM_SYNC_CAUSE_FIELD(id, name) std::atomic<int64_t> syncs_##name{0};
  LOOM_FOR_EACH_SYNC_CAUSE(LOOM_SYNC_CAUSE_FIELD)
#undef LOOM_SYNC_CAUSE_FIELD
  std::atomic<int64_t> collectives{0};             // collectives run (runtime/distributed/collective.h)
  std::atomic<int64_t> collective_bytes{0};        // bytes they sent in (this rank's input)
  // Reads of loom's own Gloo exchanges (runtime/distributed/gloo.cpp, Note [Spinning before a
  // blocking read]): whose message arrived while the reader polled, and that went to a blocking
  // read (the polling gave up, or is off).
  std::atomic<int64_t> exchange_reads_polled{0};
  std::atomic<int64_t> exchange_reads_blocked{0};
  // Gauges of the memory plan of the graph run last (BENCH.md `memory`): the size of its
  // intermediate arena, and the most bytes of intermediates alive at any one step, the floor
  // any plan must reach.
  std::atomic<int64_t> arena_bytes{0};
  std::atomic<int64_t> arena_live_peak_bytes{0};
  // The plan cache (graph/plan_cache.h): plans evicted for its bounds (a counter), and what it
  // holds now (gauges of its state, which reset() leaves alone): plans, and the bytes they hold
  // in their devices' allocators.
  std::atomic<int64_t> plan_cache_evictions{0};
  std::atomic<int64_t> plan_cache_entries{0};
  std::atomic<int64_t> plan_cache_bytes{0};
  // loom.compile (pyext/compile_bindings.cpp): calls of compiled functions, those a captured step
  // served, steps captured after the first for a function (a guard failed), and calls that ran
  // uncompiled (the function fell back for good, or that call could not replay).
  std::atomic<int64_t> compiled_calls{0};
  std::atomic<int64_t> compiled_replays{0};
  std::atomic<int64_t> compiled_recaptures{0};
  std::atomic<int64_t> compiled_fallbacks{0};
  // The time of the replayed calls, from entering the compiled function to returning its result,
  // and the part of it the executor ran the plan (the host overhead of a replay is the rest).
  std::atomic<int64_t> compiled_replay_nanoseconds{0};
  std::atomic<int64_t> compiled_plan_nanoseconds{0};

  // Zeroes the counters and the gauges of the last run (not the plan cache's state).
  void reset() noexcept;
};

// Every field by the name loom.metrics() gives it: the one list reset() and the bindings walk,
// so a new counter is one line here and one in metric_fields(). `scale` converts the stored
// integer for display (nanoseconds to seconds); `state` marks gauges of what exists now, which
// reset() leaves alone.
struct MetricField {
  const char* name;
  std::atomic<int64_t> Metrics::*field;
  double scale = 1.0;
  bool state = false;
};
std::span<const MetricField> metric_fields() noexcept;

Metrics& metrics() noexcept;

inline void count(std::atomic<int64_t>& counter, int64_t n = 1) noexcept {
  counter.fetch_add(n, std::memory_order_relaxed);
}

// Counts one sync of `cause` (syncs and syncs_<cause>).
void count_sync(SyncCause cause) noexcept;

}  // namespace loom
