// The CUDA interface of a build without the CUDA toolkit: no GPUs, and a clear reason.
#include <cstring>

#include "runtime/cuda/cuda_device.h"
#include "runtime/error.h"

namespace loom::cuda {

bool compiled() noexcept { return false; }
int device_count() noexcept { return 0; }
std::string unavailable_reason() { return "loom was built without the CUDA toolkit"; }

std::string driver_unavailable_reason() { return "CUDA is not available (" + unavailable_reason() + ")"; }

void require(Device device) {
  LOOM_CHECK(!device.is_cuda(), Runtime, "CUDA is not available (", unavailable_reason(), ")");
}

DeviceProperties properties(int device) {
  require(Device(DeviceType::CUDA, static_cast<int16_t>(device)));
  return {};
}

std::unique_ptr<MemoryBackend> make_memory_backend(int device) {
  require(Device(DeviceType::CUDA, static_cast<int16_t>(device)));
  return nullptr;
}

void memcpy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  require(dst_device);
  require(src_device);
  std::memcpy(dst, src, nbytes);
}

// Reached only with a GPU array, which this build cannot make: allocating one already raised.
[[noreturn]] void unavailable() { LOOM_FAIL(Runtime, "CUDA is not available (", unavailable_reason(), ")"); }
void copy(const Array&, const Array&) { unavailable(); }
void fill(const Array&, Scalar) { unavailable(); }
void arange(const Array&, Scalar, Scalar) { unavailable(); }
void linspace(const Array&, double, double) { unavailable(); }
void uniform(const Array&, double, double, PhiloxState) { unavailable(); }
void normal(const Array&, double, double, PhiloxState) { unavailable(); }
void random_int(const Array&, int64_t, int64_t, PhiloxState) { unavailable(); }
void synchronize(Device device) { require(device); }
bool used(int) noexcept { return false; }
void device_synchronize(Device device) { require(device); }

}  // namespace loom::cuda
