// Collectives as ops of the IR (DESIGN decision 17): AllReduce, Broadcast, AllGather,
// ReduceScatter, ReduceToRoot, GatherToRoot and ScatterFromRoot are primitives with a shape rule and a CPU kernel
// (lazy/ops_collective.cpp) and, where they have one, a derivative (lazy/derivatives.cpp: the
// gradient of an all-reduce sum is an all-reduce sum, of an all-gather a reduce-scatter). On
// eager tensors they run at once; on lazy tensors they record a node like any op, so a training
// step with its gradient all-reduces stays one trace and one cached plan (a library step of the
// CPU plan; on a GPU, NCCL calls inside the step's CUDA Graph: graph/cuda_lowering.cpp).
// Attributes name the process group by id (runtime/distributed/group.h), so a plan recorded on
// one group never runs on another.
//
// Note [Collectives run in program order]. Every rank must run the same collectives in the same
// order, even where a rank's syncs split its work differently (rank 0 reads the loss between two
// all-reduces, rank 1 does not), and even when a rank drops a result it does not read. So each
// lazy collective takes the previous pending collective of its device as an extra input, a
// token its kernel never reads: data dependencies then order them as they were recorded in
// every executor and every plan, and the last one is kept alive until it runs, which keeps the
// whole chain in the next trace.
//
// Note [The token is no result]. The token kept for the next collective is a tensor of its own
// on the collective's node, not the result handed to the caller: the caller's result lives and
// dies as any result does (a bucket whose views became the .grads dies with its Python local),
// and a sync computes the token only to run the collective. Nothing outside this file ever holds
// the token, which is how loom.compile knows a result of a step that nobody reads is one
// (is_token: graph/captured_step.cpp captures such a step, and its replays drop that output).
//
// A collective that fails (runtime/distributed/group.h: a peer died, a timeout, ranks that
// disagree) fails as a data error does (lazy/sync.h): the tensors computed from it, and through
// the token from the collectives recorded after it, raise its error; the rest of the step runs.
#pragma once

#include "lazy/tensor.h"
#include "runtime/distributed/collective.h"

namespace loom::collectives {

using distributed::ReduceOp;

// In place, as torch.distributed's calls: self's value becomes the result (an in-place op for
// autograd and version counters).
void all_reduce_(TensorImpl& self, int64_t group, ReduceOp op);
void broadcast_(TensorImpl& self, int64_t group, int64_t src);
// At dst: the reduction; elsewhere self keeps its value.
void reduce_(TensorImpl& self, int64_t group, ReduceOp op, int64_t dst);

Tensor all_reduce(const Tensor& x, int64_t group, ReduceOp op);
Tensor broadcast(const Tensor& x, int64_t group, int64_t src);
// 1-d: every rank's x, flattened, in rank order.
Tensor all_gather(const Tensor& x, int64_t group);
// 1-d: this rank's chunk of the reduction of flattened x (numel divisible by the group's size).
Tensor reduce_scatter(const Tensor& x, int64_t group, ReduceOp op);
// 1-d at dst: every rank's x, flattened, in rank order; elsewhere empty.
Tensor gather(const Tensor& x, int64_t group, int64_t dst);
// Chunk r of `chunks` at src (flattened, size * numel(shape) elements) on rank r, of `shape`.
// Ranks other than src pass any tensor of the output's dtype and placement as `chunks`.
Tensor scatter(const Tensor& chunks, IntSpan shape, int64_t group, int64_t src);

// Whether a lazy collective recorded on `device` has not run yet.
bool pending(Device device);
// Whether `t` is the token of the last lazy collective of its device (Note [The token is no
// result]).
bool is_token(const TensorImpl& t);

// The transport call (runtime/distributed/collective.h) a collective node makes on an input of
// `dtype` and `shape`: how an executor runs it.
distributed::Call call(OpId op, const Attrs& attrs, DType dtype, IntSpan shape);
bool is_collective(OpId op) noexcept;

}  // namespace loom::collectives
