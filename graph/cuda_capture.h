// When a plan runs as a CUDA Graph, and what a failed capture does: written once for the CUDA
// executor (graph/cuda_executor.cpp) and its host emulator (graph/cuda_emulator.cpp), so the
// emulator checks the same decisions without a GPU.
//
// A plan's first run launches its steps directly (and lets cuBLAS and the driver finish their
// lazy set-up); its second captures them on the stream and instantiates the graph; later runs
// replay it. A capture can fail: the driver refuses an operation inside it, instantiation fails,
// a step allocates (runtime/allocator.h CaptureGuard). The capture is then ended and its partial
// graph discarded (the stream is usable again), and the plan runs its steps directly from then
// on, with the same results, never capturing again: the failure is counted
// (metrics().graph_capture_failures), kept as the plan's reason, and warned about once per
// process (runtime/warning.h). Under LOOM_CUDA_GRAPHS=strict the failure raises instead, at every
// run that tries, for the tests that must see graphs.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/error.h"

namespace loom::graph {

// LOOM_CUDA_GRAPHS=strict, read once; the tests switch it (returns the previous setting).
bool strict_cuda_graphs() noexcept;
bool set_strict_cuda_graphs(bool strict) noexcept;

// A test hook: the next capture in this process fails as a real one can. Allocate: a step
// allocates from the device's allocator (refused by the CaptureGuard). Synchronize: a step waits
// for the capturing stream (on a GPU the driver refuses and invalidates the capture).
enum class CaptureFault { None, Allocate, Synchronize };
void inject_capture_fault(CaptureFault fault) noexcept;
// The fault injected for this capture (at most once), None mostly.
CaptureFault take_capture_fault() noexcept;

// One plan's graph through its runs.
class GraphLife {
 public:
  enum class Run { Direct, Capture, Replay };

  // How this run goes. `eligible`: this run may use a graph (graphs on, not
  // LOOM_LAUNCH_BLOCKING, operands aligned for cuBLAS in a graph, a program with steps).
  Run next(bool eligible) const noexcept {
    if (!eligible || !failure_.empty()) return Run::Direct;
    if (has_graph_) return Run::Replay;
    return runs_ > 0 ? Run::Capture : Run::Direct;
  }
  // How this run goes, capturing first when it is time: `capture()` records and instantiates
  // the graph, or throws Error after cleaning up; `name()` names the plan for the warning.
  // Returns Replay or Direct, never Capture; rethrows under LOOM_CUDA_GRAPHS=strict.
  template <typename Capture, typename Name>
  Run start(bool eligible, Capture&& capture, Name&& name) {
    Run how = next(eligible);
    if (how != Run::Capture) return how;
    try {
      capture();
      captured();
      return Run::Replay;
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Distributed) throw;  // a broken process group: not the graph's fault
      capture_failed(name(), e);
      return Run::Direct;
    }
  }

  void captured() noexcept { has_graph_ = true; }
  // The capture of `plan` failed with `e` and was cleaned up: rethrows it under
  // LOOM_CUDA_GRAPHS=strict; else the plan runs directly from now on (counted, warned once).
  // Call from inside the catch.
  void capture_failed(const std::string& plan, const Error& e);
  void ran() noexcept { ++runs_; }
  // Why the plan runs without a graph ("" while it may have one).
  const std::string& failure() const noexcept { return failure_; }

 private:
  int64_t runs_ = 0;
  bool has_graph_ = false;
  std::string failure_;
};

}  // namespace loom::graph
