// The installed executor: sends each trace to the executor of its device (trace.device), so the
// CPU path is untouched by the CUDA one. Eager GPU ops (Executor::run_op) go to the GPU's.
//
// Thread safety: syncs of several threads may call run() at once (lazy/executor.h). An executor
// that is not thread_safe() (the CUDA executor, the CUDA emulator) is called by one thread at a
// time: the router holds its lock around every call into it (run, run_op, synchronize); the
// others (the compiled CPU executor, the interpreter) run concurrently.
#pragma once

#include <memory>
#include <mutex>

#include "lazy/executor.h"

namespace loom::graph {

class DeviceRouter final : public Executor {
 public:
  // `cuda` may be null (a build without the CUDA toolkit: no GPU traces exist there).
  DeviceRouter(std::shared_ptr<Executor> cpu, std::shared_ptr<Executor> cuda);
  std::vector<Array> run(const Trace& trace) override;
  bool thread_safe() const noexcept override { return true; }
  void synchronize(Device device) override;
  Array run_op(OpId op, std::span<const Operand> inputs, const Attrs& attrs, const OutputMeta& meta,
               Device device) override;

 private:
  // An executor and the lock its calls take (none for a thread-safe one).
  struct Target {
    Executor& executor;
    std::unique_lock<std::mutex> lock;
  };
  Target for_device(Device device);
  std::shared_ptr<Executor> cpu_, cuda_;
  std::mutex cpu_mu_, cuda_mu_;
};

}  // namespace loom::graph
