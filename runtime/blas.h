// Matrix products on the host: C = A @ B for row-major strided matrices.
//
// float32 and float64 go to OpenBLAS when loom was built with it (Debian's libopenblas); other
// builds, and integer types, use a plain blocked loop. float16 and bfloat16 are multiplied in
// float32 by the caller (as PyTorch's CPU backend does).
//
// float32 products small enough that OpenBLAS spends more time around its kernel than in it use
// loom's own AVX-512 kernel where the CPU has one (runtime/blas_small.h).
//
// Thread safety: any thread may call gemm and gemm_batch; OpenBLAS calls run one at a time (a
// small product limits OpenBLAS's process-wide thread count for its duration, which must not
// change under another thread's product; a batch takes the lock and sets the count once). Lazy
// syncs of several threads reach here at once (lazy/sync.h).
#pragma once

#include <cstdint>
#include <functional>

#include "runtime/dtype.h"

namespace loom::blas {

// One matrix operand: element (i, j) is at data[i * row_stride + j * col_stride]. For float32
// and float64 it must be row-major (col_stride 1, row_stride >= cols) or column-major
// (row_stride 1, col_stride >= rows); callers copy other layouts.
struct Matrix {
  const void* data;
  int64_t row_stride;
  int64_t col_stride;
};

// out (M x N, row-major with leading dimension ldc) = A (M x K) @ B (K x N). dtype is float32,
// float64, int32, int64 or uint8.
void gemm(DType dtype, int64_t m, int64_t n, int64_t k, Matrix a, Matrix b, void* out, int64_t ldc);

// One product of a batch: its operands and where its result goes (row-major, leading dimension
// ldc of gemm_batch).
struct BatchItem {
  Matrix a, b;
  void* out;
};

// `count` products of the same shapes (a batched matmul): item(i) gives the operands of product
// i. The same as `count` calls of gemm, with OpenBLAS's lock taken and its thread count set once.
void gemm_batch(DType dtype, int64_t m, int64_t n, int64_t k, int64_t count, int64_t ldc,
                const std::function<BatchItem(int64_t)>& item);

// Makes OpenBLAS use the best kernels for this CPU when it chose generic ones (once per process;
// runtime/blas.cpp says why), and at most loom's thread count (LOOM_NUM_THREADS: the setting is
// process-wide, so numpy's products in the same process follow it too). gemm calls it; loom._C calls it at import so that the choice is made
// before any timing.
void choose_kernels();
// OpenBLAS's thread count from now on (set_num_threads: torch.set_num_threads sets its BLAS's too).
void set_threads(int threads);

// True when OpenBLAS serves float32 / float64 products.
bool uses_openblas() noexcept;

}  // namespace loom::blas
