// The boundary between recording and execution: lazy/ builds a Trace and hands it to an
// Executor; graph/ implements executors (lowering, caching, replay) and installs one. lazy/
// never includes graph/ (DESIGN: layers).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "lazy/node.h"
#include "runtime/error.h"

namespace loom {

// A trace: the nodes needed by its outputs, in post-order (inputs before users), with common
// subexpressions merged. Node indices refer to `nodes`.
struct Trace {
  struct Output {
    int node;                          // index into nodes
    std::optional<Array> destination;  // in-place results: write here (an existing storage)
  };

  Device device;
  std::vector<Node*> nodes;                  // borrowed: the roots keep them alive during execution
  std::vector<SmallVec<int32_t, 3>> inputs;  // per node: indices of its inputs
  std::vector<Output> outputs;
  uint64_t key = 0;  // equal keys <=> same computation on inputs of the same description
};

// The failure of one node of a trace, found while computing it: an error that depends on the
// data (an index out of range, an integer division by zero). `node` is the node's index in the
// trace; the message is the cause's, naming the lazy op. Executors report such failures with it
// (and only such: an out-of-memory error is not the node's fault), so that a sync can tell the
// outputs the failure reaches from those it does not (lazy/sync.h).
class NodeError : public Error {
 public:
  NodeError(const Error& cause, int node, OpId op);
  int node() const noexcept { return node_; }

 private:
  int node_;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Computes every output. Returns one array per output (in order): the destination for
  // in-place outputs, else new storage. A failure throws (NodeError when a node's computation
  // failed; Error(Interrupted) when it stopped on request, runtime/blocking.h) and leaves all
  // tensors untouched: no destination is written, so the sync can give every tensor its value
  // from before (lazy/sync.h). (A GPU finds data errors inside its kernels, after the launch:
  // graph/cuda_executor.h reports them at the next wait instead.)
  //
  // Syncs call run() without the embedding's lock (runtime/blocking.h), so two threads may call
  // it at once: an executor whose run() allows that says so with thread_safe(); the others are
  // called one run at a time (graph/device_router.h). run() reads the trace's nodes and the
  // arrays of its Input leaves, and touches no tensor.
  virtual std::vector<Array> run(const Trace& trace) = 0;
  virtual bool thread_safe() const noexcept { return false; }
  // Waits until the work launched for `device` has finished (a no-op where runs are synchronous).
  virtual void synchronize(Device device) = 0;
  // Eager mode on a device whose kernels only an executor has (a GPU): runs one op at once and
  // returns its result, a new array of `meta`'s dtype and shape on `device`. The default raises
  // NotImplementedError.
  virtual Array run_op(OpId op, std::span<const Operand> inputs, const Attrs& attrs, const OutputMeta& meta,
                       Device device);
};

// The key of a trace whose nodes, inputs and outputs are set (sync points compute it for the
// traces they build; executors for traces of their own, such as one eager op).
uint64_t trace_key(const Trace& trace);

// The executor used by sync points. graph/ installs one; until then syncs fail clearly. A sync
// holds the executor it runs until it returns, so installing another one meanwhile is safe.
void install_executor(std::unique_ptr<Executor> executor);
Executor& executor();
// The installed executor, for a caller that runs it as a sync does (loom.compile's replays,
// graph/captured_step.h): held until the caller lets it go.
std::shared_ptr<Executor> shared_executor();

}  // namespace loom
