// The boundary between recording and execution: lazy/ builds a Trace and hands it to an
// Executor; graph/ implements executors (lowering, caching, replay) and installs one. lazy/
// never includes graph/ (DESIGN: layers).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "lazy/node.h"

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

class Executor {
 public:
  virtual ~Executor() = default;
  // Computes every output. Returns one array per output (in order): the destination for
  // in-place outputs, else new storage. A failure throws and leaves all tensors untouched.
  virtual std::vector<Array> run(const Trace& trace) = 0;
  // Waits until the work launched for `device` has finished (a no-op where runs are synchronous).
  virtual void synchronize(Device device) = 0;
};

// The executor used by sync points. graph/ installs one; until then syncs fail clearly.
void install_executor(std::unique_ptr<Executor> executor);
Executor& executor();

}  // namespace loom
