#include "runtime/blas_small.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LOOM_SMALL_SGEMM 1
#include <immintrin.h>
#endif

namespace loom::blas {

// Bounds: B is packed on the stack (kMaxK x kMaxN floats, 64 KiB), and from about 2^19
// multiply-adds OpenBLAS's packing pays for itself. BENCH mlp's products (32 x 128 x 128 at most)
// measured 1.2 to 1.8 times OpenBLAS's single-threaded speed, attention's 2 to 3 times.
constexpr int64_t kMaxK = 128, kMaxN = 128, kMaxMultiplyAdds = int64_t{1} << 19;

#ifdef LOOM_SMALL_SGEMM
namespace {

#define LOOM_AVX512 __attribute__((target("avx512f,fma")))

// Rows x (16 * Vectors) of the result in registers: each step of the inner dim loads Vectors
// rows of packed B and broadcasts Rows elements of A. Not inlined into its caller: inlined, GCC
// schedules the tile's loops together with the caller's and spills the accumulators (half the
// speed on the measured machine). `columns` counts the valid columns of the tile (masked store).
template <int Rows, int Vectors>
LOOM_AVX512 __attribute__((noinline)) void tile(int64_t k, const float* a, int64_t a_row, int64_t a_col,
                                                  const float* packed, int64_t ldp, float* out, int64_t ldc,
                                                  int64_t columns) {
  // The loops over the tile are unrolled whole (GCC's -O2 would keep them, and the accumulators
  // in memory: 2.5 times slower).
  __m512 acc[Rows][Vectors];
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < Vectors; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    __m512 b[Vectors];
#pragma GCC unroll 4
    for (int v = 0; v < Vectors; ++v) b[v] = _mm512_load_ps(packed + p * ldp + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r) {
      __m512 x = _mm512_set1_ps(a[r * a_row + p * a_col]);
#pragma GCC unroll 4
      for (int v = 0; v < Vectors; ++v) acc[r][v] = _mm512_fmadd_ps(x, b[v], acc[r][v]);
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < Vectors; ++v) {
    int64_t left = columns - 16 * v;
    if (left <= 0) break;
    auto mask = static_cast<__mmask16>(left >= 16 ? 0xFFFF : (1u << left) - 1);
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r) _mm512_mask_storeu_ps(out + r * ldc + 16 * v, mask, acc[r][v]);
  }
}

// The rows [0, m) of one column block, in tiles of Rows rows and then smaller ones.
template <int Rows, int Vectors>
LOOM_AVX512 void rows(int64_t m, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* packed,
                      int64_t ldp, float* out, int64_t ldc, int64_t columns) {
  int64_t i = 0;
  for (; i + Rows <= m; i += Rows)
    tile<Rows, Vectors>(k, a + i * a_row, a_row, a_col, packed, ldp, out + i * ldc, ldc, columns);
  if constexpr (Rows > 1) rows<Rows / 2, Vectors>(m - i, k, a + i * a_row, a_row, a_col, packed, ldp, out + i * ldc, ldc, columns);
}

LOOM_AVX512 void product(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col,
                         const float* b, int64_t b_row, int64_t b_col, float* out, int64_t ldc) {
  // B packed row-major with its rows padded to whole vectors (zeros past n), aligned.
  int64_t ldp = (n + 15) / 16 * 16;
  alignas(64) float packed[kMaxK * kMaxN];
  for (int64_t p = 0; p < k; ++p) {
    float* row = packed + p * ldp;
    for (int64_t j = 0; j < n; ++j) row[j] = b[p * b_row + j * b_col];
    for (int64_t j = n; j < ldp; ++j) row[j] = 0.0f;
  }
  // Blocks of 32 columns (8 x 32 tiles: 16 accumulators, 2 loads of B and 8 broadcasts per
  // step), then one of 16 (8 x 16 tiles; 16 x 16 ones measured 10% slower).
  int64_t j = 0;
  for (; j + 16 < n; j += 32) rows<8, 2>(m, k, a, a_row, a_col, packed + j, ldp, out + j, ldc, n - j);
  if (j < n) rows<8, 1>(m, k, a, a_row, a_col, packed + j, ldp, out + j, ldc, n - j);
}

bool has_avx512() noexcept {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  return yes;
}

}  // namespace
#endif

bool small_sgemm_serves(int64_t m, int64_t n, int64_t k) noexcept {
#ifdef LOOM_SMALL_SGEMM
  return k >= 1 && k <= kMaxK && n >= 1 && n <= kMaxN && m >= 1 && m * n * k <= kMaxMultiplyAdds && has_avx512();
#else
  (void)m, (void)n, (void)k;
  return false;
#endif
}

void small_sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b,
                 int64_t b_row, int64_t b_col, float* out, int64_t ldc) {
#ifdef LOOM_SMALL_SGEMM
  product(m, n, k, a, a_row, a_col, b, b_row, b_col, out, ldc);
#else
  (void)m, (void)n, (void)k, (void)a, (void)a_row, (void)a_col, (void)b, (void)b_row, (void)b_col, (void)out, (void)ldc;
#endif
}

}  // namespace loom::blas
