// Sync points and the registries of live pending tensors (DESIGN decisions 3 and 14).
//
// Every pending lazy tensor is linked into a registry while it lives: the registry of the thread
// that recorded it, for its device. A sync point (item(), tolist(), repr, .to("cpu"),
// loom.sync(), ...) materializes ALL live pending tensors of the calling thread's registry of
// the device as one trace, so a training step becomes one graph, then drops their IR. Threads do
// not see each other's half-recorded work: four threads training four models make four traces
// per step, each the same every step.
//
// Tensors shared between threads. A pending tensor that a thread other than its recorder uses
// (reads it, records an op on it, writes it in place) is computed first: alone, when it is a
// fresh value, or with its recorder's whole registry when it is an in-place write (whose
// registry may hold reads of the old values, which must run before the write). A pending write
// into memory that a thread reads (pending_write_overlaps) syncs the registry holding it. While
// a sync computes a tensor (it is "in flight"), a thread that needs it waits for that sync.
//
// Failures (Note [A failed sync changes nothing]). A sync runs a trace; when it fails it raises,
// and it leaves the tensors as if the failed computation had never been asked for:
//   - every tensor it would have written in place keeps the value it had before the sync, and
//     stays readable: a tensor with a destination (a parameter, optimizer state, a view of them)
//     is materialized with its storage again, which the executor never wrote (lazy/executor.h);
//     an in-place write of a dead tensor (an orphan write) is dropped. Their autograd history
//     goes back to what it was before their first write, and their version counters move on
//     (lazy/version_counter.h: values saved from them since still count as current);
//   - a tensor made since the last sync and then written in place (optimizer state made at the
//     first step) goes back to its value before its first write: pending again (computed now
//     after a node's failure, at the next sync after another failure), or errored when that
//     value depended on the failed node. No in-place write of the failed sync stands, whether
//     it depended on the failure or not: state stays consistent (a parameter and its moments);
//   - the fresh results (never written in place) that depend on the failure are errored:
//     reading or using one raises the original error (naming the op that failed). Which depend
//     on it: for a failure of one node (NodeError: an index out of range, an integer division by
//     zero) those computed from that node; for any other failure (out of memory, a failed
//     compile, an interrupt) all;
//   - the fresh results that do not depend on it are computed (the sync runs again without the
//     failed ones, until nothing fails), so nothing left pending fails the next sync.
// Views follow their bases. The sync then raises the original error (NodeError's message names
// the op; an interrupt raises KeyboardInterrupt).
//
// Threads and locks. The registries, the tensors' lazy state and the trace builder's scratch
// (Node::trace_index) are serialized by the embedding's lock (Python's GIL) for tensors that
// threads share; a thread's own pending tensors are its own. Syncs run a CPU trace inside a
// BlockingRegion (runtime/blocking.h): the lock is released while the trace runs or compiles,
// and while a thread waits for another thread's sync; nothing here is touched then except the
// flight bookkeeping (under a mutex of its own). (GPU traces run with the lock held for now.) A
// sync on the thread the embedding delivers interrupts to stops between steps when interrupted
// (graph/compiled.cpp): a failure like any other.
#pragma once

#include "lazy/executor.h"
#include "lazy/tensor.h"
#include "runtime/metrics.h"

namespace loom {

// Why syncs happen (Note [Sync causes]). A sync point names its cause for the syncs it makes
// while a SyncReason lives on its thread; loom.metrics() counts each sync that runs a trace as
// `syncs` and `syncs_<cause>` (SyncCause, runtime/metrics.h). Reasons nest and the outermost one
// names the cause: printing a tensor reads its elements with item(), and those syncs are repr's.
// A sync with no reason given (a thread reading another thread's pending tensor, a pending
// write into memory being read) counts as SyncCause::Other.
namespace detail {
extern thread_local SyncCause sync_reason;
extern thread_local int sync_reason_depth;
}  // namespace detail

class SyncReason {
 public:
  explicit SyncReason(SyncCause cause) noexcept {
    if (detail::sync_reason_depth++ == 0) detail::sync_reason = cause;
  }
  ~SyncReason() {
    if (--detail::sync_reason_depth == 0) detail::sync_reason = SyncCause::Other;
  }
  SyncReason(const SyncReason&) = delete;
  SyncReason& operator=(const SyncReason&) = delete;
};

void register_pending(TensorImpl* t);
void unregister_pending(TensorImpl* t);
// A pending in-place write whose tensor died before the sync (e.g. `x[0].add_(1)` on a temporary
// view): it still has to land in its destination. It joins `t`'s registry; `counter` and
// `version` say what a failed sync undoes (TensorImpl::roll_back).
void register_orphan_write(TensorImpl& t, Ref<Node> node, Array destination, Ref<VersionCounter> counter,
                           uint64_t version);

// Materializes every live pending tensor of the calling thread on `device` (its backend
// device), or undoes or fails them as the note above says, raising the failure.
// Returns after the work is launched; `synchronize` also waits for it to finish.
void sync(Device device);
void sync_all();
void synchronize_all();
// Makes t's value current: syncs if t is pending (its thread's registry, see above) or a pending
// in-place op will write memory of t, and waits if a sync of another thread computes it. Raises
// t's error if t is (or becomes) errored, and the sync's failure if the sync fails.
void materialize(TensorImpl& t);
// materialize(t) as a sync point of `cause`: what an op calls when it needs the values of its
// input at the call, such as the ops whose result's shape depends on values (unique, nonzero,
// masked_select: SyncCause::DataDependentShape). A no-op for a tensor that is not pending.
inline void sync_for(SyncCause cause, TensorImpl& t) {
  SyncReason reason(cause);
  materialize(t);
}
// What TensorImpl::read_node does for a pending tensor that this thread did not record or that a
// sync computes now: computes it or waits (above). Inside a sync's own bookkeeping, nothing.
void prepare_foreign_read(TensorImpl& t);
// Whether `t` (pending) is in the calling thread's registry.
bool recorded_here(const TensorImpl& t) noexcept;

// The key of the last trace executed on any device (tests and diagnostics).
uint64_t last_trace_key();

// Whether a pending in-place write of some tensor will write memory of `region` (a materialized
// array) at the next sync. Every lazy op asks it of each materialized input: the common answer
// (no pending write into the storage at all) is inline; only then are the registries searched
// (the caller's first: another thread's is searched only when the caller's holds no such write).
bool find_overlapping_pending_write(const Array& region);
inline bool pending_write_overlaps(const Array& region) {
  return region.storage && region.storage->pending_writes() > 0 && find_overlapping_pending_write(region);
}
// Lands the pending writes into `region`'s memory: syncs the registries that hold them (this
// thread's or another's), or waits for the sync in flight that computes them.
void sync_writes_into(const Array& region);

// Number of live pending tensors of the calling thread on a device (tests and diagnostics).
int64_t pending_count(Device device);

}  // namespace loom
