// Sync points and the registry of live pending tensors (DESIGN decision 3).
//
// Every pending lazy tensor is linked into its device's registry while it lives. A sync point
// (item(), tolist(), repr, .to("cpu"), loom.sync(), ...) materializes ALL live pending tensors of
// the device as one trace, so a training step becomes one graph, then drops their IR.
//
// A failure that depends on the data (an index out of range, an integer division by zero) is
// found only when a node runs. The executor reports which node failed (NodeError); the sync then
// computes every pending tensor that does not depend on that node, and turns the ones that do
// into errored tensors, which raise that error whenever they are read or used. So one bad value
// fails the tensors computed from it, at their reads, and nothing else: unrelated tensors, later
// syncs and the storage an errored in-place op would have written (it keeps its old values) stay
// usable. The sync itself raises only for failures that are not a node's (out of memory).
#pragma once

#include "lazy/executor.h"
#include "lazy/tensor.h"

namespace loom {

void register_pending(TensorImpl* t);
void unregister_pending(TensorImpl* t);
// A pending in-place write whose tensor died before the sync (e.g. `x[0].add_(1)` on a temporary
// view): it still has to land in its destination.
void register_orphan_write(Ref<Node> node, Array destination);

// Materializes every live pending tensor of `device` (its backend device), or makes it errored.
// Returns after the work is launched; `synchronize` also waits for it to finish.
void sync(Device device);
void sync_all();
void synchronize_all();
// Makes t's value current: syncs its device if t is pending or a pending in-place op will write
// memory of t (and with it, materializes everything pending on the device). Raises t's
// error if t is (or becomes) errored.
void materialize(TensorImpl& t);

// The key of the last trace executed on any device (tests and diagnostics).
uint64_t last_trace_key();

// Whether a pending in-place write of some tensor will write memory of `region` (a materialized
// array) at the next sync. Every lazy op asks it of each materialized input: the common answer
// (no pending write into the storage at all) is inline; only then is the registry searched.
bool find_overlapping_pending_write(const Array& region);
inline bool pending_write_overlaps(const Array& region) {
  return region.storage && region.storage->pending_writes() > 0 && find_overlapping_pending_write(region);
}

// Number of live pending tensors on a device (tests and diagnostics).
int64_t pending_count(Device device);

}  // namespace loom
