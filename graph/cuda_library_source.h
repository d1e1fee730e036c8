// The source of the CUDA kernels behind the library steps of a program (fusion/program.h) that
// are not matrix products of floats (those go to cuBLAS) nor plain copies and fills (the
// runtime's kernels): gathers, scatters (by sum, replacement, product, maximum, minimum),
// indexing, cumulative sums, integer floor division and remainder, and integer matrix products.
// Plain text, built with or without the CUDA toolkit so the tests compile it with NVRTC anywhere.
//
// ABI and helpers as the runtime's kernels (runtime/cuda/kernel_source.h). Index kernels report
// an index out of range, and the division kernel a zero divisor, by storing their `code` in the
// error word (runtime/cuda/stream.h), the last buffer of their bufs; the element is then skipped.
// Layouts (r = rank, strides in elements, T = dtype code, "over out" = one stride per out dim):
//   loom_gather       ip = [n, r, sizes[r], x_strides[r], index_strides[r], dim, dim_size, itemsize, code]
//                     bufs = [x, index, out (contiguous), error]
//   loom_scatter_add  ip = [n, r, index sizes[r], out_strides[r], index_strides[r], src_strides[r], dim,
//                     dim_size, T, code]   bufs = [index, src, out, error]
//   loom_scatter_reduce  ip = [n, r, index sizes[r], out_strides[r], index_strides[r], src_strides[r],
//                     dim, dim_size, T, kind (0 replace, 1 prod, 2 amax, 3 amin), reset, code]
//                     bufs = [index, src, out, error]
//   loom_index        ip = [n, R, k, sizes[R] (out), x_strides over out[R],
//                     k x (index_strides over out[R], x_stride, dim_size, index_is_int64),
//                     wrap_negative, itemsize, code]   bufs = [x, index_0..k-1, out (contiguous), error]
//   loom_index_put    ip = [n, R, k, sizes[R] (region), out_strides over region[R],
//                     k x (index_strides over region[R], out_stride, dim_size, index_is_int64),
//                     value_strides over region[R], has_values, accumulate, T, values' T, wrap_negative,
//                     code]
//                     sp = [the value's bits when !has_values]   bufs = [values, index_0..k-1, out, error]
//   loom_cumsum       ip = [lines, r, sizes[r], x_strides[r], out_strides[r], dim, x T, out T]
//                     bufs = [x, out]
//   loom_int_divmod   ip = [n, r, sizes[r], a_strides[r], b_strides[r], remainder, a T, b T, out T,
//                     a_is_scalar, b_is_scalar, code]   sp = [a, b] (scalars, in out T)
//                     bufs = [a, b, out (contiguous), error]
//   loom_int_matmul   ip = [batches, m, n, k, a_row_stride, a_col_stride, b_row_stride, b_col_stride,
//                     c_row_stride, T]   bufs = [a pointers, b pointers, c pointers] (per batch)
#pragma once

#include <string>

namespace loom::graph {

const std::string& cuda_library_source();
// The kernels alone, without the helpers they start with (cuda::device_helpers()).
const char* cuda_library_kernels();

}  // namespace loom::graph
