#include "graph/cuda_step_timer.h"

#include <memory>
#include <mutex>
#include <vector>

#include "runtime/cuda/stream.h"

namespace loom::graph {
namespace {

struct Anchor {
  cudaEvent_t event = nullptr;
  int64_t host_ns = 0;
  int64_t profile = 0;  // profiler::started_ns() of the profile it anchors
};

struct Pending {
  profiler::Event event;
  int device;
  cudaEvent_t anchor, start, end;
  int64_t anchor_ns;
};

struct Timers {
  std::mutex mu;
  std::vector<Anchor> anchors;  // per device
  std::vector<Pending> pending;
};

Timers& timers() {
  static Timers* t = new Timers();
  return *t;
}

// Reads every pending span: waits for its end event (the profile is stopping), converts the
// device's times to the host clock through its anchor, and hands the span to the profile.
void flush() {
  std::vector<Pending> pending;
  {
    Timers& t = timers();
    std::lock_guard lock(t.mu);
    pending.swap(t.pending);
  }
  for (Pending& p : pending) {
    float from_anchor = 0, duration = 0;
    bool ok = cudaEventSynchronize(p.end) == cudaSuccess &&
              cudaEventElapsedTime(&from_anchor, p.anchor, p.start) == cudaSuccess &&
              cudaEventElapsedTime(&duration, p.start, p.end) == cudaSuccess;
    cudaEventDestroy(p.start);
    cudaEventDestroy(p.end);
    if (!ok) {
      cudaGetLastError();  // a fault is the next checked call's to report, not the profiler's
      continue;
    }
    p.event.start_ns = p.anchor_ns + static_cast<int64_t>(static_cast<double>(from_anchor) * 1e6);
    p.event.duration_ns = static_cast<int64_t>(static_cast<double>(duration) * 1e6);
    p.event.thread = profiler::gpu_lane(p.device);
    profiler::emit(std::move(p.event));
  }
}

}  // namespace

void CudaStepTimer::begin(int device) {
  static const bool registered = (profiler::add_flusher(&flush), true);
  static_cast<void>(registered);
  if (cuda::capturing()) return;
  cudaStream_t s = cuda::stream(device);
  cudaEvent_t start = nullptr;
  if (cudaEventCreate(&start) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  Timers& t = timers();
  {
    std::lock_guard lock(t.mu);
    if (t.anchors.size() <= static_cast<size_t>(device)) t.anchors.resize(static_cast<size_t>(device) + 1);
    Anchor& a = t.anchors[static_cast<size_t>(device)];
    if (a.profile != profiler::started_ns()) {
      if (!a.event && cudaEventCreate(&a.event) != cudaSuccess) {
        cudaGetLastError();
        cudaEventDestroy(start);
        return;
      }
      cudaEventRecord(a.event, s);
      a.host_ns = profiler::now_ns();
      a.profile = profiler::started_ns();
    }
  }
  cudaEventRecord(start, s);
  start_ = start;
  device_ = device;
  event_ = new profiler::Event();
  event_->category = "cuda";
}

void CudaStepTimer::end() noexcept {
  std::unique_ptr<profiler::Event> e(event_);
  event_ = nullptr;
  cudaEvent_t stop = nullptr;
  cudaStream_t s = cuda::stream(device_);
  if (cudaEventCreate(&stop) != cudaSuccess || cudaEventRecord(stop, s) != cudaSuccess) {
    cudaGetLastError();
    cudaEventDestroy(start_);
    if (stop) cudaEventDestroy(stop);
    return;
  }
  try {
    Timers& t = timers();
    std::lock_guard lock(t.mu);
    const Anchor& a = t.anchors[static_cast<size_t>(device_)];
    t.pending.push_back({std::move(*e), device_, a.event, start_, stop, a.host_ns});
  } catch (...) {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop);
  }
}

}  // namespace loom::graph
