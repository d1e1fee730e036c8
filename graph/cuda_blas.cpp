#include "graph/cuda_blas.h"

#include <cublas_v2.h>

#include <array>
#include <climits>
#include <optional>
#include <mutex>

#include "runtime/allocator.h"
#include "runtime/cuda/stream.h"

namespace loom::graph {
namespace {

// cuBLAS's recommendation for Hopper (smaller GPUs need less; this is a one-off 32 MiB).
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

void check_blas(cublasStatus_t s, const char* call, const std::string& what) {
  LOOM_CHECK(s == CUBLAS_STATUS_SUCCESS, Runtime, "cuBLAS error in ", call, " (", what, "): ", cublasGetStatusName(s), ": ",
             cublasGetStatusString(s));
}

cublasHandle_t handle(int device) {
  static std::mutex mu;
  static std::array<cublasHandle_t, 64> handles{};  // never destroyed: graphs hold their kernels
  LOOM_CHECK(device >= 0 && device < 64, Runtime, "device ordinal ", device, " is out of range");
  std::lock_guard lock(mu);
  cublasHandle_t& h = handles[static_cast<size_t>(device)];
  if (h) return h;
  LOOM_CHECK(!cuda::capturing(), Runtime, "internal: cuBLAS handle created while capturing a CUDA graph");
  cuda::set_device(device);
  std::string what = "the cuBLAS handle of cuda:" + std::to_string(device);
  cublasHandle_t created = nullptr;
  check_blas(cublasCreate(&created), "cublasCreate", what);
  // The stream first: setting it resets the workspace to cuBLAS's own pool.
  check_blas(cublasSetStream(created, cuda::stream(device)), "cublasSetStream", what);
  CachingAllocator::Allocation workspace =
      allocator_for(Device(DeviceType::CUDA, static_cast<int16_t>(device))).allocate(kWorkspaceBytes);
  check_blas(cublasSetWorkspace(created, workspace.ptr, kWorkspaceBytes), "cublasSetWorkspace", what);
  check_blas(cublasSetMathMode(created, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                                  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
             "cublasSetMathMode", what);
  h = created;
  return h;
}

// A Gemm as cuBLAS takes it (blas_shape, graph/cuda_program.h), with its types and scalars.
struct Call {
  cublasOperation_t ta, tb;
  int m, n, k, lda, ldb, ldc;
  cudaDataType type;
  cublasComputeType_t compute;
  float alpha_f = 1.0f, beta_f = 0.0f;
  double alpha_d = 1.0, beta_d = 0.0;
  const void* alpha() const { return compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&alpha_d) : &alpha_f; }
  const void* beta() const { return compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&beta_d) : &beta_f; }
};

int narrow(int64_t v, const Gemm& g) {
  LOOM_CHECK(v >= 0 && v <= INT_MAX, Runtime, "cuBLAS cannot take a dimension of ", v, " (", g.what, ")");
  return static_cast<int>(v);
}

Call call_of(const Gemm& g) {
  BlasShape b = blas_shape(g);
  Call c;
  c.ta = b.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  c.tb = b.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  c.m = narrow(b.m, g);
  c.n = narrow(b.n, g);
  c.k = narrow(b.k, g);
  c.lda = narrow(b.lda, g);
  c.ldb = narrow(b.ldb, g);
  c.ldc = narrow(b.ldc, g);
  switch (g.dtype) {
    case DType::Float32:
      c.type = CUDA_R_32F;
      c.compute = g.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      break;
    case DType::Float64:
      c.type = CUDA_R_64F;
      c.compute = CUBLAS_COMPUTE_64F;
      break;
    case DType::Float16:
      c.type = CUDA_R_16F;
      c.compute = CUBLAS_COMPUTE_32F;
      break;
    case DType::BFloat16:
      c.type = CUDA_R_16BF;
      c.compute = CUBLAS_COMPUTE_32F;
      break;
    default: LOOM_FAIL(Runtime, "internal: cuBLAS product of ", dtype_name(g.dtype), " (", g.what, ")");
  }
  return c;
}

// The common spacing of an operand's batches in elements, if they are evenly spaced.
std::optional<int64_t> spacing(const std::vector<int64_t>& offsets) {
  if (offsets.size() < 2) return 0;
  int64_t step = offsets[1] - offsets[0];
  for (size_t i = 2; i < offsets.size(); ++i)
    if (offsets[i] - offsets[i - 1] != step) return std::nullopt;
  return step;
}

}  // namespace

void prepare_blas(int device) { handle(device); }

void gemm_direct(int device, const Gemm& g, const std::vector<const void*>& left, const std::vector<const void*>& right,
                 const std::vector<void*>& out) {
  cublasHandle_t h = handle(device);
  cuda::set_device(device);
  Call c = call_of(g);
  std::optional<int64_t> sl = spacing(g.left.batch_offsets), sr = spacing(g.right.batch_offsets),
                         so = spacing(g.out.batch_offsets);
  if (g.batches > 1 && sl && sr && so) {
    check_blas(cublasGemmStridedBatchedEx(h, c.ta, c.tb, c.m, c.n, c.k, c.alpha(), right[0], c.type, c.lda, *sr, left[0],
                                          c.type, c.ldb, *sl, c.beta(), out[0], c.type, c.ldc, *so, narrow(g.batches, g),
                                          c.compute, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx", g.what);
    cuda::after_launch(device, "cuBLAS " + g.what);
    return;
  }
  for (int64_t b = 0; b < g.batches; ++b) {
    auto i = static_cast<size_t>(b);
    check_blas(cublasGemmEx(h, c.ta, c.tb, c.m, c.n, c.k, c.alpha(), right[i], c.type, c.lda, left[i], c.type, c.ldb,
                            c.beta(), out[i], c.type, c.ldc, c.compute, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx", g.what);
    cuda::after_launch(device, "cuBLAS " + g.what);
  }
}

void gemm_pointer_arrays(int device, const Gemm& g, const void* const* arrays) {
  cublasHandle_t h = handle(device);
  cuda::set_device(device);
  Call c = call_of(g);
  auto array = [&](int which) { return reinterpret_cast<const void* const*>(arrays + which * g.padded); };
  check_blas(cublasGemmBatchedEx(h, c.ta, c.tb, c.m, c.n, c.k, c.alpha(), array(1), c.type, c.lda, array(0), c.type,
                                 c.ldb, c.beta(), const_cast<void* const*>(array(2)), c.type, c.ldc,
                                 narrow(g.batches, g), c.compute, CUBLAS_GEMM_DEFAULT),
             "cublasGemmBatchedEx", g.what);
  cuda::after_launch(device, "cuBLAS " + g.what);
}

}  // namespace loom::graph
