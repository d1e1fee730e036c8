// The source of the runtime's own CUDA kernels: fills, strided copies with dtype conversion,
// arange, linspace and random numbers. Plain text generation, built with or without the CUDA
// toolkit, so the tests compile it with NVRTC on machines without a GPU.
//
// Every kernel takes loom's kernel ABI (runtime/cuda/module.h): (ip, sp, bufs), in device memory.
// Layouts (n = elements, r = rank after merging dims, strides in elements, T = a DType's value):
//   loom_copy_<itemsize>  ip = [n, r, sizes[r], dst_strides[r], src_strides[r]]   bufs = [src, dst]
//   loom_convert          ip = as copy   sp = [dst T, src T]                        bufs = [src, dst]
//   loom_fill_<itemsize>  ip = [n, r, sizes[r], strides[r]]   sp = [value's bits]  bufs = [dst]
//   loom_arange           ip = [n]   sp = [T, int start, int step, start's bits, step's bits, integral]
//   loom_linspace         ip = [n]   sp = [T, start's bits, end's bits]
//   loom_uniform          ip = as fill   sp = [T, seed, offset, low's bits, high's bits, digits]
//   loom_normal           ip = as fill   sp = [T, seed, offset, mean's bits, std's bits]
//   loom_randint          ip = as fill   sp = [T, seed, offset, low, high]
// (arange, linspace, uniform, normal and randint write bufs = [dst]; "bits" of a double: its 64-bit
// pattern; a fill value: its bit pattern in the destination's dtype, zero-extended.) Random
// kernels give element i (row-major index, whatever the strides) the Philox block the CPU gives
// it (runtime/random.h); conversions round as runtime/dtype.h's convert(). Kernels that serve
// every dtype read T at run time: one module of a dozen kernels compiles in a fraction of a
// second, where a kernel per dtype (pair) took seconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/layout.h"

namespace loom::cuda {

// The whole module's source (generated once).
const std::string& runtime_kernel_source();

// What that source starts with, for other modules of hand-written kernels (graph/'s library
// kernels): the kernel prelude (runtime/kernel_prelude.h), LOOM_KERNEL and LOOM_FOR_EACH (a
// grid-stride loop), the strided walks loom_offset1 / loom_offset2 over an ip as above, Philox,
// and loom_value with loom_load / loom_store, which read and write any dtype by its code as
// convert() does.
const std::string& device_helpers();

// loom_copy_<itemsize> for equal dtypes, else loom_convert (its sp: dtype_code of each).
std::string copy_kernel(DType dst, DType src);
std::string fill_kernel(DType dtype);
// T in sp.
inline int64_t dtype_code(DType d) noexcept { return static_cast<int64_t>(d); }

// The ip of a walk over `sizes` by one operand (b empty) or two, in row-major order: size-1 dims
// dropped and dims that are contiguous in every operand merged, so a dense copy is rank 1.
std::vector<int64_t> strided_ip(IntSpan sizes, IntSpan a, IntSpan b = {});

// A double's bit pattern, as sp carries float parameters.
int64_t double_bits(double v) noexcept;

}  // namespace loom::cuda
