// float32 matrix products small enough that OpenBLAS spends more time around its kernel than in
// it (attention's per-head products: 32x16 by 16x32, 32x32 by 32x16), with AVX-512 register
// tiles: 2 to 3 times OpenBLAS 0.3.21's single-threaded speed on those shapes on the measured
// machine (perf/RESULTS.md, 2026-12-02 07:40). Used by runtime/blas.cpp; any thread may call it.
#pragma once

#include <cstdint>

namespace loom::blas {

// Whether small_sgemm serves an m x k by k x n product on this CPU (it has AVX-512F and the
// sizes are within the kernel's bounds).
bool small_sgemm_serves(int64_t m, int64_t n, int64_t k) noexcept;

// out (m x n, row-major with leading dimension ldc) = A @ B, where element (i, p) of A is at
// a[i * a_row + p * a_col] and element (p, j) of B at b[p * b_row + j * b_col] (any strides).
// Only where small_sgemm_serves(m, n, k); k >= 1.
void small_sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b,
                 int64_t b_row, int64_t b_col, float* out, int64_t ldc);

}  // namespace loom::blas
