#include "runtime/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include <cstring>

#include "runtime/cuda/staging.h"
#include "runtime/cuda/stream.h"
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

class DeviceMemory final : public MemoryBackend {
 public:
  explicit DeviceMemory(int device) : device_(device) {}
  Device device() const override { return Device(DeviceType::CUDA, static_cast<int16_t>(device_)); }
  void* allocate(size_t nbytes) override {
    set_device(device_);
    void* ptr = nullptr;
    cudaError_t err = cudaMalloc(&ptr, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky, but leave no trace for the next call
      return nullptr;      // the allocator frees its cache and retries
    }
    check(err, "cudaMalloc", std::to_string(nbytes) + " bytes on cuda:" + std::to_string(device_));
    return ptr;
  }
  void free(void* ptr, size_t) noexcept override {
    // The block may still be read by work queued on the stream: let it finish first. Errors are
    // ignored here (free cannot throw); the next checked call reports them.
    if (cudaSetDevice(device_) != cudaSuccess) return;
    if (!capturing()) cudaStreamSynchronize(stream_or_null());
    cudaFree(ptr);
  }

 private:
  cudaStream_t stream_or_null() const noexcept {
    try {
      return stream(device_);
    } catch (...) {
      return nullptr;
    }
  }
  int device_;
};

// Device -> host: small copies through the pinned ring (the driver's pageable path costs more),
// large ones straight into the destination. Both wait for the stream, then report data errors.
void download(void* dst, const void* src, int device, size_t nbytes) {
  set_device(device);
  cudaStream_t s = stream(device);
  if (nbytes <= kStagingChunk) {
    Staged staged = stage(device, nbytes, "a copy to the host");
    check(cudaMemcpyAsync(staged.host, src, nbytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync", "device to host");
    synchronize(device);
    std::memcpy(dst, staged.host, nbytes);
    return;
  }
  check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync", "device to host");
  synchronize(device);
}

// Host -> device through the pinned ring, a chunk at a time: returns once every byte was staged.
void upload_bytes(void* dst, const void* src, int device, size_t nbytes) {
  set_device(device);
  cudaStream_t s = stream(device);
  for (size_t done = 0; done < nbytes;) {
    size_t piece = std::min(nbytes - done, kStagingChunk);
    Staged staged = stage(device, piece, "a copy from the host");
    std::memcpy(staged.host, static_cast<const char*>(src) + done, piece);
    check(cudaMemcpyAsync(static_cast<char*>(dst) + done, staged.host, piece, cudaMemcpyHostToDevice, s),
          "cudaMemcpyAsync", "host to device");
    done += piece;
  }
}

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

DeviceProperties properties(int device) {
  require(Device(DeviceType::CUDA, static_cast<int16_t>(device)));
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties", "cuda:" + std::to_string(device));
  return {p.name, p.major, p.minor, p.totalGlobalMem, p.multiProcessorCount};
}

std::unique_ptr<MemoryBackend> make_memory_backend(int device) {
  require(Device(DeviceType::CUDA, static_cast<int16_t>(device)));
  return std::make_unique<DeviceMemory>(device);
}

void memcpy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  require(dst_device);
  require(src_device);
  if (nbytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, nbytes);
  } else if (dst_device.is_cpu()) {
    download(dst, src, src_device.index, nbytes);
  } else if (src_device.is_cpu()) {
    upload_bytes(dst, src, dst_device.index, nbytes);
  } else if (dst_device == src_device) {
    set_device(dst_device.index);
    check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream(dst_device.index)), "cudaMemcpyAsync",
          "device to device");
  } else {
    // Between GPUs: both streams drained, then a plain copy (rare; peer access is not set up).
    synchronize(src_device.index);
    synchronize(dst_device.index);
    check(cudaMemcpy(dst, src, nbytes, cudaMemcpyDefault), "cudaMemcpy", "between GPUs");
  }
}

void synchronize(Device device) {
  require(device);
  if (device.is_cuda()) synchronize(static_cast<int>(device.index));
}

void device_synchronize(Device device) {
  require(device);
  if (!device.is_cuda()) return;
  set_device(device.index);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", device.str());
}

}  // namespace loom::cuda
