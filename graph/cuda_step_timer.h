// Spans timed on a GPU's stream (issue 18): a profile's steps of a CUDA plan, each a pair of
// CUDA events recorded on loom's stream around the work it queued, read after the work ran, so
// timing a step adds no wait. The events are read when the profile stops (the flusher of
// runtime/profiler.h waits for the last of them there) and placed on the host's clock through an
// anchor event recorded at the first timed step of the profile (on a busy stream the anchor runs
// later than it was recorded: the GPU lane is then shifted late by that much, never reordered).
// A stream that is capturing a graph is not timed (an event recorded there would become a node
// of the graph): a graph's replay is timed as one span instead. With the toolkit only.
#pragma once

#include <cuda_runtime_api.h>

#include "runtime/profiler.h"

namespace loom::graph {

class CudaStepTimer {
 public:
  // Times what the caller queues on `device`'s stream until the timer ends, when a profile runs
  // and the stream is not capturing.
  explicit CudaStepTimer(int device) {
    if (profiler::active()) [[unlikely]] begin(device);
  }
  ~CudaStepTimer() {
    if (event_) [[unlikely]] end();
  }
  CudaStepTimer(const CudaStepTimer&) = delete;
  CudaStepTimer& operator=(const CudaStepTimer&) = delete;
  // The span to describe (name, category, bytes), or null when not timing.
  profiler::Event* event() noexcept { return event_; }

 private:
  void begin(int device);
  void end() noexcept;
  profiler::Event* event_ = nullptr;
  cudaEvent_t start_ = nullptr;
  int device_ = 0;
};

}  // namespace loom::graph
