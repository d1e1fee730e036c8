// The runtime's CUDA kernels (runtime/cuda/kernel_source.h) loaded on a device, and launching
// one directly with an argument table staged through the ring (runtime/cuda/staging.h).
//
// Only files compiled with the CUDA toolkit include this header.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "runtime/cuda/module.h"

namespace loom::cuda {

// The module of runtime_kernel_source() on a device (compiled once per process and disk cache).
const Module& runtime_module(int device);

// Threads per block of every runtime kernel (their __launch_bounds__).
inline constexpr int kRuntimeBlock = 256;

// Stages [ip | sp | bufs] as one table, uploads it and launches `kernel` over n items.
void launch_staged(int device, const Kernel& kernel, int64_t n, std::span<const int64_t> ip,
                   std::span<const int64_t> sp, std::span<const void* const> bufs, const std::string& what);

}  // namespace loom::cuda
