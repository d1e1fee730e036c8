// Sync points and the registry of live pending tensors (DESIGN decision 3).
//
// Every pending lazy tensor is linked into its device's registry while it lives. A sync point
// (item(), tolist(), repr, .to("cpu"), loom.sync(), ...) materializes ALL live pending tensors of
// the device as one trace, so a training step becomes one graph, then drops their IR.
#pragma once

#include "lazy/executor.h"
#include "lazy/tensor.h"

namespace loom {

void register_pending(TensorImpl* t);
void unregister_pending(TensorImpl* t);
// A pending in-place write whose tensor died before the sync (e.g. `x[0].add_(1)` on a temporary
// view): it still has to land in its destination.
void register_orphan_write(Ref<Node> node, Array destination);

// Materializes every live pending tensor of `device` (its backend device). Returns after the work
// is launched; `synchronize` also waits for it to finish.
void sync(Device device);
void sync_all();
void synchronize_all();
// Makes t's value current: syncs its device if t is pending or a pending in-place op will write
// into its storage (and with it, materializes everything pending on the device).
void materialize(TensorImpl& t);

// The key of the last trace executed on any device (tests and diagnostics).
uint64_t last_trace_key();

// Number of live pending tensors on a device (tests and diagnostics).
int64_t pending_count(Device device);

}  // namespace loom
