#include "runtime/cuda/stream.h"

#include <array>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_device.h"
#include "runtime/metrics.h"

namespace loom::cuda {
namespace {

constexpr int kMaxDevices = 64;

struct DeviceState {
  cudaStream_t stream = nullptr;
  volatile int32_t* error_host = nullptr;  // the error word as the host sees it
  int32_t* error_device = nullptr;         // and as kernels see it
  std::string last_launch;                 // for fault messages
  int sm_count = 0;
  int capability = 0;
};

std::mutex& state_mutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

// Never destroyed: tensors freed at interpreter exit may still queue work (see allocator_for).
std::array<DeviceState, kMaxDevices>& states() {
  static auto* s = new std::array<DeviceState, kMaxDevices>();
  return *s;
}

DeviceState& state(int device) {
  require(Device(DeviceType::CUDA, static_cast<int16_t>(device)));
  LOOM_CHECK(device >= 0 && device < kMaxDevices, Runtime, "device ordinal ", device, " is out of range");
  return states()[static_cast<size_t>(device)];
}

struct DataError {
  ErrorKind kind;
  std::string message;
};

std::vector<DataError>& data_errors() {
  static auto* e = new std::vector<DataError>();
  return *e;
}

thread_local int capture_depth = 0;

}  // namespace

void check(cudaError_t err, const char* what, const std::string& context) {
  if (err == cudaSuccess) [[likely]]
    return;
  cudaGetLastError();  // clears non-sticky errors so the next call does not report this one again
  LOOM_FAIL(Runtime, "CUDA error in ", what, context.empty() ? "" : " (", context, context.empty() ? "" : ")", ": ",
            cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

void set_device(int device) {
  // cudaSetDevice also makes the device's primary context current on this thread (CUDA 12 and
  // later), which the driver calls (module loads, launches) need: a thread's first call always
  // sets it, later ones only when something else changed the current device.
  thread_local bool bound = false;
  int current = -1;
  check(cudaGetDevice(&current), "cudaGetDevice");
  if (current == device && bound) return;
  check(cudaSetDevice(device), "cudaSetDevice", "cuda:" + std::to_string(device));
  bound = true;
}

cudaStream_t stream(int device) {
  DeviceState& s = state(device);
  if (s.stream) [[likely]]
    return s.stream;
  std::lock_guard lock(state_mutex());
  if (!s.stream) {
    set_device(device);
    cudaStream_t created = nullptr;
    check(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking), "cudaStreamCreateWithFlags",
          "the stream of cuda:" + std::to_string(device));
    s.stream = created;
  }
  return s.stream;
}

bool used(int device) noexcept {
  return device >= 0 && device < kMaxDevices && states()[static_cast<size_t>(device)].stream != nullptr;
}

bool launch_blocking() noexcept {
  static const bool on = [] {
    const char* v = std::getenv("LOOM_LAUNCH_BLOCKING");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

void synchronize(int device) {
  LOOM_CHECK(!capturing(), Runtime, "internal: synchronize while capturing a CUDA graph");
  DeviceState& s = state(device);
  set_device(device);
  cudaError_t err = cudaStreamSynchronize(stream(device));
  if (err != cudaSuccess) {
    std::string last = s.last_launch.empty() ? "none" : s.last_launch;
    check(err, "cudaStreamSynchronize",
          "a kernel failed on cuda:" + std::to_string(device) + "; last launched: " + last +
              (launch_blocking() ? "" : "; set LOOM_LAUNCH_BLOCKING=1 to stop at the failing launch"));
  }
  raise_data_errors(device);
}

void after_launch(int device, const std::string& what) {
  if (capturing()) return;  // recorded into a graph, not run: its replays count (graph_replays)
  count(metrics().kernel_launches);
  DeviceState& s = state(device);
  s.last_launch = what;
  if (!launch_blocking()) return;
  check(cudaGetLastError(), "kernel launch", what);
  check(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize", "after " + what + " (LOOM_LAUNCH_BLOCKING=1)");
  raise_data_errors(device);
}

int32_t* error_word(int device) {
  DeviceState& s = state(device);
  if (s.error_device) [[likely]]
    return s.error_device;
  std::lock_guard lock(state_mutex());
  if (!s.error_device) {
    set_device(device);
    // Mapped host memory: the host reads it without a copy. Where mapping is refused (some
    // virtualized drivers), a word of device memory, read with a copy at each check.
    void* host = nullptr;
    void* dev = nullptr;
    if (cudaHostAlloc(&host, sizeof(int32_t), cudaHostAllocMapped | cudaHostAllocPortable) == cudaSuccess &&
        cudaHostGetDevicePointer(&dev, host, 0) == cudaSuccess) {
      *static_cast<volatile int32_t*>(host) = 0;
      s.error_host = static_cast<volatile int32_t*>(host);
    } else {
      cudaGetLastError();
      if (host) cudaFreeHost(host);
      std::string what = "the error word of cuda:" + std::to_string(device);
      check(cudaMalloc(&dev, sizeof(int32_t)), "cudaMalloc", what);
      check(cudaMemsetAsync(dev, 0, sizeof(int32_t), stream(device)), "cudaMemsetAsync", what);
    }
    s.error_device = static_cast<int32_t*>(dev);
  }
  return s.error_device;
}

int32_t register_data_error(ErrorKind kind, const std::string& message) {
  std::lock_guard lock(state_mutex());
  std::vector<DataError>& all = data_errors();
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].kind == kind && all[i].message == message) return static_cast<int32_t>(i + 1);
  all.push_back({kind, message});
  return static_cast<int32_t>(all.size());
}

void raise_data_errors(int device) {
  DeviceState& s = state(device);
  if (!s.error_device) return;  // no kernel could have reported one
  int32_t code = 0;
  if (s.error_host) {
    code = *s.error_host;
    if (code == 0) [[likely]]
      return;
    *s.error_host = 0;
  } else {
    // The word lives on the device: read it on the stream, which the caller has just drained.
    check(cudaMemcpyAsync(&code, s.error_device, sizeof code, cudaMemcpyDeviceToHost, s.stream), "cudaMemcpyAsync",
          "the error word");
    check(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize", "the error word");
    if (code == 0) return;
    check(cudaMemsetAsync(s.error_device, 0, sizeof code, s.stream), "cudaMemsetAsync", "the error word");
  }
  DataError e{ErrorKind::Runtime, "a CUDA kernel reported an unknown data error (code " + std::to_string(code) + ")"};
  {
    std::lock_guard lock(state_mutex());
    if (code > 0 && static_cast<size_t>(code) <= data_errors().size()) e = data_errors()[static_cast<size_t>(code) - 1];
  }
  detail::throw_error(e.kind, detail::concat(e.message, " (found by a kernel on cuda:", device,
                                            "; reported at the next wait for the device: results computed "
                                            "since may hold garbage)"));
}

bool capturing() noexcept { return capture_depth > 0; }
CaptureScope::CaptureScope() { ++capture_depth; }
CaptureScope::~CaptureScope() { --capture_depth; }

int multiprocessor_count(int device) {
  DeviceState& s = state(device);
  if (!s.sm_count) {
    int n = 0;
    check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
    s.sm_count = n;
  }
  return s.sm_count;
}

int compute_capability(int device) {
  DeviceState& s = state(device);
  if (!s.capability) {
    int major = 0, minor = 0;
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute");
    s.capability = 10 * major + minor;
  }
  return s.capability;
}

}  // namespace loom::cuda
