// Host matrix products (runtime/blas.h): loom's small float32 kernel (runtime/blas_small.h) and
// gemm against a double-precision loop, over shapes that cover every tile and remainder of the
// kernel (rows 1 to 19, columns across the 16- and 32-wide blocks, depths 1 to 128), both
// operand orders in memory, and a result with a leading dimension wider than its rows.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/blas.h"
#include "runtime/blas_small.h"

using namespace loom;

namespace {

struct Case {
  int64_t m, n, k;
  bool a_column_major, b_column_major;
};

// Runs `product` on random operands laid out as `c` says, and checks every element of the result
// against a double loop and every padding element of the result's rows against its sentinel.
template <typename Product>
void check(const Case& c, Product&& product) {
  std::mt19937 gen(static_cast<unsigned>(c.m * 1000003 + c.n * 1009 + c.k));
  std::normal_distribution<float> normal;
  std::vector<float> a(c.m * c.k), b(c.k * c.n);
  for (float& x : a) x = normal(gen);
  for (float& x : b) x = normal(gen);
  auto at_a = [&](int64_t i, int64_t p) { return c.a_column_major ? a[p * c.m + i] : a[i * c.k + p]; };
  auto at_b = [&](int64_t p, int64_t j) { return c.b_column_major ? b[j * c.k + p] : b[p * c.n + j]; };
  loom::blas::Matrix ma = c.a_column_major ? loom::blas::Matrix{a.data(), 1, c.m} : loom::blas::Matrix{a.data(), c.k, 1};
  loom::blas::Matrix mb = c.b_column_major ? loom::blas::Matrix{b.data(), 1, c.k} : loom::blas::Matrix{b.data(), c.n, 1};
  int64_t ldc = c.n + 3;
  const float sentinel = 12345.0f;
  std::vector<float> out(c.m * ldc, sentinel);
  product(ma, mb, out.data(), ldc);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double want = 0, scale = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        want += double(at_a(i, p)) * double(at_b(p, j));
        scale += std::abs(double(at_a(i, p)) * double(at_b(p, j)));
      }
      BOOST_TEST_REQUIRE(std::abs(out[i * ldc + j] - want) <= 1e-5 * (scale + 1),
                         c.m << "x" << c.k << " @ " << c.k << "x" << c.n << " (" << c.a_column_major
                             << c.b_column_major << ") at " << i << "," << j << ": " << out[i * ldc + j]
                             << " != " << want);
    }
    for (int64_t j = c.n; j < ldc; ++j) BOOST_TEST_REQUIRE(out[i * ldc + j] == sentinel, "padding written");
  }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int64_t m : {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 19, 32})
    for (int64_t n : {1, 5, 15, 16, 17, 31, 32, 33, 47, 48, 50, 64, 65, 97, 127, 128})
      for (int64_t k : {1, 3, 16, 32, 128})
        for (int layout = 0; layout < 4; ++layout) all.push_back({m, n, k, (layout & 1) != 0, (layout & 2) != 0});
  return all;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(host_blas)

BOOST_AUTO_TEST_CASE(small_kernel_matches_a_double_loop) {
  if (!loom::blas::small_sgemm_serves(32, 16, 32)) return;  // no AVX-512 here: gemm below covers OpenBLAS
  for (const Case& c : cases()) {
    BOOST_TEST_REQUIRE(loom::blas::small_sgemm_serves(c.m, c.n, c.k));
    check(c, [&](loom::blas::Matrix a, loom::blas::Matrix b, float* out, int64_t ldc) {
      loom::blas::small_sgemm(c.m, c.n, c.k, static_cast<const float*>(a.data), a.row_stride, a.col_stride,
                        static_cast<const float*>(b.data), b.row_stride, b.col_stride, out, ldc);
    });
  }
}

BOOST_AUTO_TEST_CASE(small_kernel_bounds) {
  BOOST_TEST(!loom::blas::small_sgemm_serves(32, 129, 16));  // wider than its packed block
  BOOST_TEST(!loom::blas::small_sgemm_serves(32, 16, 129));  // deeper
  BOOST_TEST(!loom::blas::small_sgemm_serves(512, 64, 64));  // OpenBLAS's own size
  BOOST_TEST(loom::blas::small_sgemm_serves(32, 128, 128));   // BENCH mlp's largest
  BOOST_TEST(!loom::blas::small_sgemm_serves(32, 16, 0));
}

BOOST_AUTO_TEST_CASE(gemm_and_batches_match_a_double_loop) {
  for (const Case& c : cases())
    if (c.m % 4 == 1 && c.k != 3)
      check(c, [&](loom::blas::Matrix a, loom::blas::Matrix b, float* out, int64_t ldc) {
        loom::blas::gemm(DType::Float32, c.m, c.n, c.k, a, b, out, ldc);
      });
  // A batch of two products writes each where its item says.
  Case c{9, 33, 32, false, true};
  check(c, [&](loom::blas::Matrix a, loom::blas::Matrix b, float* out, int64_t ldc) {
    std::vector<float> second(c.m * ldc);
    loom::blas::gemm_batch(DType::Float32, c.m, c.n, c.k, 2, ldc, [&](int64_t i) {
      return loom::blas::BatchItem{a, b, i == 0 ? static_cast<void*>(second.data()) : static_cast<void*>(out)};
    });
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) BOOST_TEST_REQUIRE(second[i * ldc + j] == out[i * ldc + j]);
  });
}

BOOST_AUTO_TEST_SUITE_END()
