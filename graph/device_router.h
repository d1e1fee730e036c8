// The installed executor: sends each trace to the executor of its device (trace.device), so the
// CPU path is untouched by the CUDA one. Eager GPU ops (Executor::run_op) go to the GPU's.
#pragma once

#include <memory>

#include "lazy/executor.h"

namespace loom::graph {

class DeviceRouter final : public Executor {
 public:
  // `cuda` may be null (a build without the CUDA toolkit: no GPU traces exist there).
  DeviceRouter(std::shared_ptr<Executor> cpu, std::shared_ptr<Executor> cuda);
  std::vector<Array> run(const Trace& trace) override;
  void synchronize(Device device) override;
  Array run_op(OpId op, std::span<const Operand> inputs, const Attrs& attrs, const OutputMeta& meta,
               Device device) override;

 private:
  Executor& for_device(Device device);
  std::shared_ptr<Executor> cpu_, cuda_;
};

}  // namespace loom::graph
