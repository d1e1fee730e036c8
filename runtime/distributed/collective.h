// What a collective means in loom, in one place: the IR's collective ops (lazy/collectives.h)
// on the CPU, the CUDA executor's collective steps and the eager calls all come here, and here
// each becomes transport calls (group.h). The algorithm is chosen here too: on host groups, an
// all-reduce of a latency-bound size (any size for two ranks) is an all-gather (one round of
// messages) reduced by every rank in rank order, larger ones the transport's ring. What a
// transport lacks is composed here: AVG is SUM scaled by 1/size where the transport has no AVG,
// reduce_scatter an all-reduce of which each rank keeps its chunk where it has no
// reduce_scatter (Gloo).
//
// The agreement check. Before the data moves, every rank's description of the call (its kind,
// reduce op, root, dtype and shape) is exchanged; if they differ, every rank raises the same
// error naming each rank's call, instead of hanging or reading garbage. On Gloo it travels as a
// header ahead of the data where the call is one all-gather (all_gather, the direct all-reduce:
// group.h, gather_parts), so it adds no round of messages; other calls exchange it first
// (LOOM_DIST_CHECK=0 turns it off on every rank: it must be off everywhere or nowhere). NCCL
// cannot afford it inside a CUDA Graph and skips it (group.h: exchange).
#pragma once

#include "runtime/array.h"
#include "runtime/distributed/group.h"

namespace loom::distributed {

enum class Kind : uint8_t { AllReduce, Broadcast, AllGather, ReduceScatter, Reduce, Gather, Scatter };
const char* kind_name(Kind kind) noexcept;

// One collective as this rank calls it. `shape` is the shape every rank must agree on: the
// input's, except scatter's (its output). Element counts per kind (n = numel of `shape`):
//   AllReduce, Broadcast, Reduce   in n, out n (in may be out); Reduce leaves out = in off root
//   AllGather                      in n, out size*n (rank order)
//   ReduceScatter                  in n = size*m, out m (this rank's chunk)
//   Gather                         in n, out size*n at root, 0 elsewhere
//   Scatter                        in size*n at root (0 elsewhere), out n
struct Call {
  Kind kind = Kind::AllReduce;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  DType dtype = DType::Float32;
  Dims shape;
};

int64_t input_count(const Call& call, const Group& group);
int64_t output_count(const Call& call, const Group& group);

// Runs `call` on `group` from `in` to `out` (the group's memory: host for Gloo, the group's GPU
// for NCCL, where it is queued on loom's stream). Raises a Distributed error (group.h) on a
// transport failure or a disagreement between ranks.
void run(Group& group, const Call& call, const void* in, void* out);

// Point to point and barrier, after the group's queued asynchronous work (work.h).
void send(Group& group, Span in, int peer, uint32_t tag);
void recv(Group& group, Span out, int peer, uint32_t tag);
void barrier(Group& group);

// Whether collectives check that the ranks agree (LOOM_DIST_CHECK, read once).
bool agreement_checks() noexcept;

}  // namespace loom::distributed
