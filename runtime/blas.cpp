#include "runtime/blas.h"

#include "runtime/blas_small.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"

#ifdef LOOM_HAVE_OPENBLAS
#include <cblas.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#endif

namespace loom::blas {
namespace {

template <typename T, typename Acc>
void naive_gemm(int64_t m, int64_t n, int64_t k, Matrix a, Matrix b, T* out, int64_t ldc) {
  const T* A = static_cast<const T*>(a.data);
  const T* B = static_cast<const T*>(b.data);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      Acc acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += static_cast<Acc>(A[i * a.row_stride + p * a.col_stride]) *
               static_cast<Acc>(B[p * b.row_stride + j * b.col_stride]);
      out[i * ldc + j] = static_cast<T>(acc);
    }
}

#ifdef LOOM_HAVE_OPENBLAS
// A strided matrix as BLAS sees it (row-major): untransposed with lda = row stride, or
// transposed with lda = column stride.
struct BlasOperand {
  CBLAS_TRANSPOSE trans;
  int64_t ld;
};

// OpenBLAS chooses its kernels from the CPU model when it loads, and releases older than the CPU
// fall back to generic ones: Debian 12's OpenBLAS 0.3.21 runs Sapphire Rapids machines on its
// SSE3 "Prescott" kernels, 4 to 5x slower than its AVX-512 ones on the small products of training
// loops. Unless the user chose (OPENBLAS_CORETYPE), loom re-runs OpenBLAS's run-time kernel
// selection for the family the CPU's instruction set supports. The choice is process-wide (numpy
// and PyTorch share the library); OpenBLAS builds without run-time selection are left alone.
void choose_openblas_kernels() {
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  using Name = const char* (*)();
  using Hook = void (*)();
  auto corename = reinterpret_cast<Name>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  auto quit = reinterpret_cast<Hook>(::dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  auto init = reinterpret_cast<Hook>(::dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (!corename || !quit || !init) return;
  std::string current = corename();
  bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const char* family = nullptr;
  if (avx512 && current != "SkylakeX" && current != "Cooperlake" && current != "SapphireRapids") family = "SkylakeX";
  else if (!avx512 && avx2 && current != "Haswell" && current != "Zen") family = "Haswell";
  if (!family) return;
  ::setenv("OPENBLAS_CORETYPE", family, 0);
  quit();
  init();
}

// Products below this many multiply-adds run on the calling thread. OpenBLAS splits anything
// above 2^18 across its workers, and waking them (or their spinning) costs more than it saves
// on the small products of training loops: a 32x128x128 step took 35 to 270 us threaded against
// 8 us on one thread on this machine. (On an idle machine, with OpenBLAS's workers hot, threading
// from 2^18 up made BENCH's mlp step 10% faster; with the other core busy it made it 30 times
// slower: perf/RESULTS.md, 2026-12-02 04:20.)
constexpr int64_t kThreadedMultiplyAdds = int64_t{1} << 22;

// Restricts OpenBLAS to one thread for one call.
class SingleThreaded {
 public:
  SingleThreaded() : saved_(openblas_get_num_threads()) {
    if (saved_ > 1) openblas_set_num_threads(1);
  }
  ~SingleThreaded() {
    if (saved_ > 1) openblas_set_num_threads(saved_);
  }
  SingleThreaded(const SingleThreaded&) = delete;
  SingleThreaded& operator=(const SingleThreaded&) = delete;

 private:
  int saved_;
};

BlasOperand as_blas(Matrix x, int64_t cols) {
  if (x.col_stride == 1 && x.row_stride >= cols) return {CblasNoTrans, std::max<int64_t>(x.row_stride, 1)};
  return {CblasTrans, std::max<int64_t>(x.col_stride, 1)};
}
#endif

}  // namespace

void choose_kernels() {
#ifdef LOOM_HAVE_OPENBLAS
  static std::once_flag once;
  std::call_once(once, [] {
    choose_openblas_kernels();
    // OpenBLAS starts a worker per core unless OPENBLAS_NUM_THREADS or OMP_NUM_THREADS say
    // otherwise: with LOOM_NUM_THREADS=1 (one thread per rank of a data-parallel job) a large
    // product still ran on every core. Its products use no more threads than loom's kernels
    // (the configured count: asking the pool would start it here, at import).
    if (openblas_get_num_threads() > configured_threads()) openblas_set_num_threads(configured_threads());
  });
#endif
}

void set_threads(int threads) {
#ifdef LOOM_HAVE_OPENBLAS
  choose_kernels();  // its cap must not undo this count later
  openblas_set_num_threads(threads);
#else
  (void)threads;
#endif
}

bool uses_openblas() noexcept {
#ifdef LOOM_HAVE_OPENBLAS
  return true;
#else
  return false;
#endif
}

namespace {

// Whether OpenBLAS computes products of this dtype and size (its thread count then matters).
bool openblas_serves(DType dtype, int64_t m, int64_t n, int64_t k) {
#ifdef LOOM_HAVE_OPENBLAS
  if (dtype == DType::Float32) return !small_sgemm_serves(m, n, k);
  return dtype == DType::Float64;
#else
  (void)dtype, (void)m, (void)n, (void)k;
  return false;
#endif
}

#ifdef LOOM_HAVE_OPENBLAS
// The one lock of OpenBLAS's calls (blas.h says why).
std::mutex& openblas_lock() {
  static std::mutex one_at_a_time;
  return one_at_a_time;
}
#endif

// One product with whatever thread count OpenBLAS has: the caller holds openblas_lock() for the
// dtypes OpenBLAS serves.
void product(DType dtype, int64_t m, int64_t n, int64_t k, Matrix a, Matrix b, void* out, int64_t ldc) {
  if (dtype == DType::Float32 && small_sgemm_serves(m, n, k))
    return small_sgemm(m, n, k, static_cast<const float*>(a.data), a.row_stride, a.col_stride,
                       static_cast<const float*>(b.data), b.row_stride, b.col_stride, static_cast<float*>(out), ldc);
  switch (dtype) {
#ifdef LOOM_HAVE_OPENBLAS
    case DType::Float32:
    case DType::Float64: {
      LOOM_CHECK((a.col_stride == 1 || a.row_stride == 1) && (b.col_stride == 1 || b.row_stride == 1), Runtime,
                 "internal: gemm operands need a unit stride");
      if (k == 0) {
        // BLAS leaves C untouched for K = 0; the product of empty matrices is zeros.
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            if (dtype == DType::Float32) static_cast<float*>(out)[i * ldc + j] = 0;
            else static_cast<double*>(out)[i * ldc + j] = 0;
          }
        return;
      }
      BlasOperand A = as_blas(a, k), B = as_blas(b, n);
      if (dtype == DType::Float32)
        cblas_sgemm(CblasRowMajor, A.trans, B.trans, m, n, k, 1.0f, static_cast<const float*>(a.data), A.ld,
                    static_cast<const float*>(b.data), B.ld, 0.0f, static_cast<float*>(out), ldc);
      else
        cblas_dgemm(CblasRowMajor, A.trans, B.trans, m, n, k, 1.0, static_cast<const double*>(a.data), A.ld,
                    static_cast<const double*>(b.data), B.ld, 0.0, static_cast<double*>(out), ldc);
      return;
    }
#else
    case DType::Float32: return naive_gemm<float, double>(m, n, k, a, b, static_cast<float*>(out), ldc);
    case DType::Float64: return naive_gemm<double, double>(m, n, k, a, b, static_cast<double*>(out), ldc);
#endif
    case DType::Int32: return naive_gemm<int32_t, int64_t>(m, n, k, a, b, static_cast<int32_t*>(out), ldc);
    case DType::Int64: return naive_gemm<int64_t, int64_t>(m, n, k, a, b, static_cast<int64_t*>(out), ldc);
    case DType::UInt8: return naive_gemm<uint8_t, int64_t>(m, n, k, a, b, static_cast<uint8_t*>(out), ldc);
    case DType::Int8: return naive_gemm<int8_t, int64_t>(m, n, k, a, b, static_cast<int8_t*>(out), ldc);
    case DType::Int16: return naive_gemm<int16_t, int64_t>(m, n, k, a, b, static_cast<int16_t*>(out), ldc);
    default: LOOM_FAIL(Runtime, "internal: gemm on ", dtype_name(dtype));
  }
}

}  // namespace

void gemm(DType dtype, int64_t m, int64_t n, int64_t k, Matrix a, Matrix b, void* out, int64_t ldc) {
  gemm_batch(dtype, m, n, k, 1, ldc, [&](int64_t) { return BatchItem{a, b, out}; });
}

void gemm_batch(DType dtype, int64_t m, int64_t n, int64_t k, int64_t count, int64_t ldc,
                const std::function<BatchItem(int64_t)>& item) {
  if (count <= 0 || m == 0 || n == 0) return;
  choose_kernels();
  auto run = [&] {
    for (int64_t i = 0; i < count; ++i) {
      BatchItem p = item(i);
      product(dtype, m, n, k, p.a, p.b, p.out, ldc);
    }
  };
#ifdef LOOM_HAVE_OPENBLAS
  if (openblas_serves(dtype, m, n, k)) {
    // One lock and one thread count for the whole batch.
    std::lock_guard lock(openblas_lock());
    std::optional<SingleThreaded> one_thread;
    if (m * n * k < kThreadedMultiplyAdds) one_thread.emplace();
    return run();
  }
#endif
  run();
}

}  // namespace loom::blas
