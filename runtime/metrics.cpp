#include "runtime/metrics.h"

namespace loom {

Metrics& metrics() noexcept {
  static Metrics m;
  return m;
}

void Metrics::reset() noexcept {
  for (auto* c : {&traces, &graph_cache_hits, &graph_cache_misses, &kernels_compiled, &modules_loaded_from_disk,
                  &kernel_launches, &graph_replays, &compile_nanoseconds, &nodes_recorded, &arena_bytes, &arena_live_peak_bytes,
                  &plan_cache_evictions})
    c->store(0, std::memory_order_relaxed);
}

}  // namespace loom
