// allocator_for(): the process-wide allocator of each device.
//
// The allocators are created on first use and deliberately never destroyed: tensors held by
// Python module globals are freed during interpreter teardown, after C++ static destructors may
// already have run, and must still find their allocator.
#include <array>
#include <mutex>

#include "runtime/allocator.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/error.h"

namespace loom {

CachingAllocator& allocator_for(Device device) {
  if (device.is_cpu()) {
    static CachingAllocator* host = new CachingAllocator(make_host_memory_backend());
    return *host;
  }
  cuda::require(device);
  static std::mutex mu;
  static std::array<CachingAllocator*, 64> gpus{};
  LOOM_CHECK(device.index >= 0 && device.index < static_cast<int>(gpus.size()), Runtime, "device ordinal ", device.index,
             " is out of range");
  std::lock_guard lock(mu);
  CachingAllocator*& slot = gpus[device.index];
  if (!slot) slot = new CachingAllocator(cuda::make_memory_backend(device.index));
  return *slot;
}

}  // namespace loom
