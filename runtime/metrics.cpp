#include "runtime/metrics.h"

namespace loom {

Metrics& metrics() noexcept {
  static Metrics m;
  return m;
}

std::span<const MetricField> metric_fields() noexcept {
  static const MetricField fields[] = {
      {"traces", &Metrics::traces},
      {"graph_cache_hits", &Metrics::graph_cache_hits},
      {"graph_cache_misses", &Metrics::graph_cache_misses},
      {"kernels_compiled", &Metrics::kernels_compiled},
      {"kernels_optimized", &Metrics::kernels_optimized},
      {"modules_loaded_from_disk", &Metrics::modules_loaded_from_disk},
      {"kernel_launches", &Metrics::kernel_launches},
      {"graph_replays", &Metrics::graph_replays},
      {"graph_capture_failures", &Metrics::graph_capture_failures},
      {"compile_seconds", &Metrics::compile_nanoseconds, 1e-9},
      {"nodes_recorded", &Metrics::nodes_recorded},
      {"collectives", &Metrics::collectives},
      {"collective_bytes", &Metrics::collective_bytes},
      {"exchange_reads_polled", &Metrics::exchange_reads_polled},
      {"exchange_reads_blocked", &Metrics::exchange_reads_blocked},
      {"syncs", &Metrics::syncs},
#define LOOM_SYNC_CAUSE_ROW(id, name) {"syncs_" #name, &Metrics::syncs_##name},
      LOOM_FOR_EACH_SYNC_CAUSE(LOOM_SYNC_CAUSE_ROW)
#undef LOOM_SYNC_CAUSE_ROW
      {"arena_bytes", &Metrics::arena_bytes},
      {"arena_live_peak_bytes", &Metrics::arena_live_peak_bytes},
      {"plan_cache_evictions", &Metrics::plan_cache_evictions},
      {"plan_cache_entries", &Metrics::plan_cache_entries, 1.0, true},
      {"plan_cache_bytes", &Metrics::plan_cache_bytes, 1.0, true},
      {"compiled_calls", &Metrics::compiled_calls},
      {"compiled_replays", &Metrics::compiled_replays},
      {"compiled_recaptures", &Metrics::compiled_recaptures},
      {"compiled_fallbacks", &Metrics::compiled_fallbacks},
      {"compiled_replay_seconds", &Metrics::compiled_replay_nanoseconds, 1e-9},
      {"compiled_plan_seconds", &Metrics::compiled_plan_nanoseconds, 1e-9},
  };
  return fields;
}

void count_sync(SyncCause cause) noexcept {
  static constexpr std::atomic<int64_t> Metrics::*kByCause[] = {
#define LOOM_SYNC_CAUSE_MEMBER(id, name) &Metrics::syncs_##name,
      LOOM_FOR_EACH_SYNC_CAUSE(LOOM_SYNC_CAUSE_MEMBER)
#undef LOOM_SYNC_CAUSE_MEMBER
  };
  Metrics& m = metrics();
  count(m.syncs);
  count(m.*kByCause[static_cast<size_t>(cause)]);
}

void Metrics::reset() noexcept {
  for (const MetricField& f : metric_fields())
    if (!f.state) (this->*f.field).store(0, std::memory_order_relaxed);
}

}  // namespace loom
