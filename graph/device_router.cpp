#include "graph/device_router.h"

#include "runtime/cuda/cuda_device.h"

namespace loom::graph {

DeviceRouter::DeviceRouter(std::shared_ptr<Executor> cpu, std::shared_ptr<Executor> cuda)
    : cpu_(std::move(cpu)), cuda_(std::move(cuda)) {}

Executor& DeviceRouter::for_device(Device device) {
  if (device.is_cpu()) return *cpu_;
  cuda::require(device);
  LOOM_CHECK(cuda_, Runtime, "internal: no CUDA executor for ", device.str());
  return *cuda_;
}

std::vector<Array> DeviceRouter::run(const Trace& trace) { return for_device(trace.device).run(trace); }

void DeviceRouter::synchronize(Device device) { for_device(device).synchronize(device); }

Array DeviceRouter::run_op(OpId op, std::span<const Operand> inputs, const Attrs& attrs, const OutputMeta& meta,
                           Device device) {
  return for_device(device).run_op(op, inputs, attrs, meta, device);
}

}  // namespace loom::graph
