// The interpreter: runs a trace node by node with the eager CPU kernels. It is the reference
// executor (every lazy result must equal what it computes) and the fallback for what the
// compiled path does not handle.
#pragma once

#include "lazy/executor.h"

namespace loom::graph {

class Interpreter final : public Executor {
 public:
  std::vector<Array> run(const Trace& trace) override;
  bool thread_safe() const noexcept override { return true; }  // no state of its own
  void synchronize(Device) override {}
};

// Installs the default executor for lazy traces (called when loom._C loads): the compiled
// executor for CPU traces and the CUDA executor for GPU ones, with the environment's options
// (graph/compiled.h, graph/cuda_executor.h), behind a DeviceRouter.
void install_default_executor();

}  // namespace loom::graph
