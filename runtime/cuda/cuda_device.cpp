#include "runtime/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include <mutex>

#include "runtime/error.h"

namespace loom::cuda {
namespace {

struct Discovery {
  int count = 0;
  std::string reason;
};

const Discovery& discovery() {
  static const Discovery d = [] {
    Discovery r;
    cudaError_t err = cudaGetDeviceCount(&r.count);
    if (err != cudaSuccess) {
      // No driver ("CUDA driver version is insufficient"), no device, or a broken install: all
      // mean "no GPU" to loom. Clear the sticky error so later runtime calls are not poisoned.
      r.count = 0;
      r.reason = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
      cudaGetLastError();
    } else if (r.count == 0) {
      r.reason = "no CUDA device found";
    }
    return r;
  }();
  return d;
}

void check(cudaError_t err, const char* what) {
  LOOM_CHECK(err == cudaSuccess, Runtime, "CUDA error in ", what, ": ", cudaGetErrorName(err), ": ",
             cudaGetErrorString(err));
}

class DeviceMemory final : public MemoryBackend {
 public:
  explicit DeviceMemory(int device) : device_(device) {}
  Device device() const override { return Device(DeviceType::CUDA, static_cast<int16_t>(device_)); }
  void* allocate(size_t nbytes) override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    void* ptr = nullptr;
    cudaError_t err = cudaMalloc(&ptr, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky, but leave no trace for the next call
      return nullptr;      // the allocator frees its cache and retries
    }
    check(err, "cudaMalloc");
    return ptr;
  }
  void free(void* ptr, size_t) noexcept override {
    cudaSetDevice(device_);
    cudaFree(ptr);
  }

 private:
  int device_;
};

}  // namespace

bool compiled() noexcept { return true; }
int device_count() noexcept { return discovery().count; }
std::string unavailable_reason() { return discovery().reason; }

void require(Device device) {
  if (!device.is_cuda()) return;
  LOOM_CHECK(device_count() > 0, Runtime, "CUDA is not available (", unavailable_reason(), ")");
  LOOM_CHECK(device.index >= 0 && device.index < device_count(), Runtime, "CUDA error: invalid device ordinal ", device.index,
             " (", device_count(), " device(s) present)");
}

std::unique_ptr<MemoryBackend> make_memory_backend(int device) {
  require(Device(DeviceType::CUDA, static_cast<int16_t>(device)));
  return std::make_unique<DeviceMemory>(device);
}

void memcpy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  require(dst_device);
  require(src_device);
  cudaMemcpyKind kind = dst_device.is_cpu() ? (src_device.is_cpu() ? cudaMemcpyHostToHost : cudaMemcpyDeviceToHost)
                                            : (src_device.is_cpu() ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice);
  check(cudaMemcpy(dst, src, nbytes, kind), "cudaMemcpy");
}

}  // namespace loom::cuda
