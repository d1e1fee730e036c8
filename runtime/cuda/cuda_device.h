// The CUDA side of the runtime as seen by the rest of loom: device discovery, device memory,
// copies, and the data-movement work on GPU arrays (fills, strided copies with dtype conversion,
// arange, linspace, random numbers), queued on the device's stream (runtime/cuda/stream.h).
// Built from cuda_device.cpp and array_ops.cpp when the CUDA toolkit is found, from no_cuda.cpp
// otherwise, so callers never need #ifdefs.
//
// loom links only the CUDA runtime (libcudart), never libcuda (DESIGN decision 12): the same build
// loads on a machine with no GPU and no driver, where device_count() is 0 and
// unavailable_reason() says why.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/allocator.h"
#include "runtime/array.h"
#include "runtime/device.h"

namespace loom::cuda {

// True when loom was compiled with the CUDA backend.
bool compiled() noexcept;
// Number of usable GPUs: 0 without a driver or a device. Never throws; probed once.
int device_count() noexcept;
// Why device_count() is 0 ("no CUDA driver: ..."); empty when GPUs exist.
std::string unavailable_reason();
// Why the driver entry points loom needs (runtime/cuda/driver.h) cannot be had: "" when they can.
// Never throws; the tests check that a machine without a GPU reports it cleanly.
std::string driver_unavailable_reason();
// Throws RuntimeError naming the device when it cannot be used.
void require(Device device);

// What torch.cuda.get_device_properties reports of a GPU. Throws as require() for a device that
// cannot be used.
struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;  // the compute capability
  size_t total_memory = 0;   // bytes
  int multi_processor_count = 0;
};
DeviceProperties properties(int device);

std::unique_ptr<MemoryBackend> make_memory_backend(int device);

// Copies nbytes between any two of host and GPU memory. Returns when the host memory involved
// may be reused: a copy to the host has landed; a copy from the host has been staged (pinned) and
// queued. Device-to-device copies are queued. Copies to the host wait for the device and raise
// any error its kernels reported.
void memcpy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

// Work on arrays of which at least one is on a GPU, queued on that GPU's stream. Semantics are
// runtime/array.h's (copy_: dst and src have the same sizes, src already broadcast).
void copy(const Array& dst, const Array& src);
void fill(const Array& dst, Scalar value);
void arange(const Array& dst, Scalar start, Scalar step);
void linspace(const Array& dst, double start, double end);
void uniform(const Array& dst, double low, double high, PhiloxState state);
void normal(const Array& dst, double mean, double std, PhiloxState state);
void random_int(const Array& dst, int64_t low, int64_t high, PhiloxState state);

// Waits until the work queued on a GPU has finished; raises a fault or data error it hit.
void synchronize(Device device);
// Waits for all work on a GPU, on every stream (memory another library produced).
void device_synchronize(Device device);
// Whether loom has queued work on GPU `device` in this process (its stream exists).
bool used(int device) noexcept;

}  // namespace loom::cuda
