#include "graph/device_router.h"

#include "runtime/cuda/cuda_device.h"

namespace loom::graph {

DeviceRouter::DeviceRouter(std::shared_ptr<Executor> cpu, std::shared_ptr<Executor> cuda)
    : cpu_(std::move(cpu)), cuda_(std::move(cuda)) {}

DeviceRouter::Target DeviceRouter::for_device(Device device) {
  Executor* e = cpu_.get();
  std::mutex* mu = &cpu_mu_;
  if (!device.is_cpu()) {
    cuda::require(device);
    LOOM_CHECK(cuda_, Runtime, "internal: no CUDA executor for ", device.str());
    e = cuda_.get();
    mu = &cuda_mu_;
  }
  if (e->thread_safe()) return {*e, {}};
  return {*e, std::unique_lock(*mu)};
}

std::vector<Array> DeviceRouter::run(const Trace& trace) { return for_device(trace.device).executor.run(trace); }

void DeviceRouter::synchronize(Device device) { for_device(device).executor.synchronize(device); }

Array DeviceRouter::run_op(OpId op, std::span<const Operand> inputs, const Attrs& attrs, const OutputMeta& meta,
                           Device device) {
  return for_device(device).executor.run_op(op, inputs, attrs, meta, device);
}

}  // namespace loom::graph
