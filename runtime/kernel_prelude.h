// The helper definitions every generated kernel module starts with, on both targets: integer
// type names, NaN-aware maximum / minimum, integer helpers, and float16 / bfloat16 conversions
// that round exactly as runtime/half.h does.
//
// The text is header-free (DESIGN: facts measured; a host compile without <cmath> takes a third
// of the time) and expects LOOM_FN to be defined first: a static inline function on the CPU, a
// static __device__ __forceinline__ one in CUDA. fusion/targets.cpp puts it in the fused modules,
// runtime/cuda/kernels.cpp in the runtime's own CUDA kernels (fills, copies, random numbers), so
// a value converted by either rounds the same way.
#pragma once

namespace loom {

extern const char* const kKernelPrelude;

}  // namespace loom
