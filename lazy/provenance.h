// Where lazy work came from (issue 18): the Python line that recorded each node, and why and
// where each sync happened.
//
// Node sources. While sources are captured (a profile runs, or LOOM_DEBUG_SOURCE=1 for the whole
// process), Node::make asks for the current Python location (runtime/source_location.h) and
// files it under the node; executors read it back when they describe a generated kernel (the ops
// it fused and the line of each, graph/step_profile.h). Off, Node::make pays one predictable
// branch (Note [Profiler off path], runtime/profiler.h). The table is keyed by the node's
// address: capture is switched on with an empty table, and every node made while it is on
// overwrites its address's entry, so a lookup never finds a dead node's line (a node made before
// the switch has no entry: unknown).
//
// Record events. While a profile runs, ops recorded on a thread are spans too (every
// `record_sample`-th op, "record <Op>", category "record", on the thread's record lane): the time from the
// previous op (or the end of the last sync) to this op's node, which is what recording it cost
// the Python program (its Python line, the binding, shape inference, the node). Each sync also
// closes a "record" span over all of it since the last sync, with the number of ops.
//
// Sync sites (loom.explain_syncs()). Every sync that runs a trace is counted by its cause
// (SyncCause) and its Python line, always: a sync costs microseconds, the line a few hundred
// nanoseconds. The table holds one row per (cause, line).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "lazy/node.h"
#include "runtime/metrics.h"
#include "runtime/profiler.h"

namespace loom {

namespace detail {
extern std::atomic<bool> recording_hooked;  // sources captured or a profile on: note_recorded works
void note_recorded_slow(const Node& node);
}  // namespace detail

// Called by Node::make for every node it made.
inline void note_recorded(const Node& node) {
  if (detail::recording_hooked.load(std::memory_order_relaxed)) [[unlikely]]
    detail::note_recorded_slow(node);
}

// Source capture is on while anyone holds it (a profile: nested profiles nest), and for the whole
// process under LOOM_DEBUG_SOURCE=1. Turning it on clears the node table.
void hold_source_capture();
void release_source_capture();
bool capturing_sources() noexcept;

// Record events while a profile runs: every `every`-th op (0: none; the "record" span of each
// sync is always recorded). Set when a profile starts.
void set_record_sample(int64_t every);
// Turns the record hook on or off for a profile (profiles call it with start() and stop()).
void set_profiling_records(bool on);

// The Python line that recorded `node`, or -1.
int32_t node_source(const Node* node);

// One sync, from the moment its cause is known to the end of its work: counts its site, and
// while a profile runs is a "sync" span naming the cause and the line, preceded by the "record"
// span of the work recorded since the last sync on this thread. `runs`: the sync runs a trace
// (only those count, as loom.metrics() counts them).
class SyncScope {
 public:
  SyncScope(SyncCause cause, bool runs);
  ~SyncScope();
  SyncScope(const SyncScope&) = delete;
  SyncScope& operator=(const SyncScope&) = delete;

 private:
  profiler::Span span_;
};

struct SyncSite {
  SyncCause cause;
  int32_t source;  // runtime/source_location.h; -1: no Python line (a C++ caller)
  int64_t count;
};
// The sites of the syncs since the process started or the last reset, in first-seen order.
std::vector<SyncSite> sync_sites(bool reset);
const char* sync_cause_name(SyncCause cause) noexcept;

}  // namespace loom
