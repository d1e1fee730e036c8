// The compiled executor: lowers each new trace once into a fused, compiled program and replays
// it for every later trace with the same key (DESIGN decisions 6 to 9).
//
// Lowering: fusion::partition -> step order (steps that can fail on their data first) ->
// in-place donation (results written straight into their destination where nothing reads the
// old values afterwards) -> memory plan (intermediates share one arena by liveness) ->
// fusion::render -> rtc::compile_host (memory and disk caches). Replay binds the trace's inputs,
// parameters, destinations and fresh output buffers, then runs the steps: generated kernels,
// library calls (matmul, gathers), and copies of the in-place results not donated. Plans live in
// the process's bounded plan cache (graph/plan_cache.h).
#pragma once

#include "graph/plan_cache.h"
#include "lazy/executor.h"

namespace loom::graph {

struct CompiledOptions {
  bool fuse = true;  // LOOM_FUSION=0 turns this off: one kernel per op, same path
};

// Thread safety: run() may be called by several threads at once (syncs run without the GIL):
// plans live in the plan cache (graph/plan_cache.h, guarded by its mutex), a plan is shared by
// the runs that use it at once (each with an arena of its own: its runs are not exclusive), and kernels split their loops over the thread pool, which runs one job at a
// time (the other callers run theirs alone, runtime/thread_pool.h).
//
// Failures and interrupts (lazy/sync.h): a run allocates everything it needs before its first
// write into a destination, and results are written straight into destinations only after the
// last step that can fail; until that first write it checks for an interrupt between steps (and
// between slices of a long kernel). So a run that throws has written no destination.
class CompiledExecutor final : public Executor {
 public:
  explicit CompiledExecutor(CompiledOptions options);
  ~CompiledExecutor() override;
  std::vector<Array> run(const Trace& trace) override;
  bool thread_safe() const noexcept override { return true; }
  void synchronize(Device) override {}

  struct Plan;

 private:
  Pin<Plan> plan_for(const Trace& trace);
  PlanCache::Lowered lower(const Trace& trace, uint64_t key);

  CompiledOptions options_;
  PlanCache::Owner owner_;  // its plans in the plan cache (graph/plan_cache.h)
};

// The options of the environment: LOOM_FUSION=0 disables fusion.
CompiledOptions options_from_environment();

}  // namespace loom::graph
