// The CUDA side of the runtime as seen by the rest of loom: device discovery, device memory and
// copies. Built from cuda_device.cpp when the CUDA toolkit is found, from no_cuda.cpp otherwise,
// so callers never need #ifdefs.
//
// loom links only the CUDA runtime (libcudart), never libcuda (DESIGN decision 12): the same build
// loads on a machine with no GPU and no driver, where device_count() is 0 and
// unavailable_reason() says why.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/allocator.h"
#include "runtime/device.h"

namespace loom::cuda {

// True when loom was compiled with the CUDA backend.
bool compiled() noexcept;
// Number of usable GPUs: 0 without a driver or a device. Never throws; probed once.
int device_count() noexcept;
// Why device_count() is 0 ("no CUDA driver: ..."); empty when GPUs exist.
std::string unavailable_reason();
// Throws RuntimeError naming the device when it cannot be used.
void require(Device device);

std::unique_ptr<MemoryBackend> make_memory_backend(int device);

// Synchronous copy of nbytes between any two of host and GPU memory.
void memcpy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

}  // namespace loom::cuda
