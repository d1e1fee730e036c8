// Definition of MatMul: a[..., M, K] @ b[..., K, N] with the batch dims broadcast, the primitive
// behind matmul, mm, bmm, addmm and linear (lazy/ops.cpp adds their 1-d and bias handling).
// A library call and a fusion barrier (DESIGN decision 6).
#include "lazy/op.h"
#include "runtime/blas.h"
#include "runtime/error.h"

namespace loom {
namespace {

OutputMeta infer(std::span<const InputMeta> in, const Attrs&) {
  const InputMeta& a = in[0];
  const InputMeta& b = in[1];
  LOOM_CHECK(!a.is_scalar && !b.is_scalar && a.shape.size() >= 2 && b.shape.size() >= 2, Runtime,
             "internal: MatMul needs two tensors of at least 2 dims");
  int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back();
  int64_t k2 = b.shape[b.shape.size() - 2], n = b.shape.back();
  LOOM_CHECK(k == k2, Runtime, "mat1 and mat2 shapes cannot be multiplied (", m, "x", k, " and ", k2, "x", n, ")");
  LOOM_CHECK(a.dtype == b.dtype, Runtime, "expected m1 and m2 to have the same dtype, but got: ", dtype_name(a.dtype),
             " != ", dtype_name(b.dtype));
  LOOM_CHECK(a.dtype != DType::Bool, Runtime, "\"matmul\" not implemented for 'Bool'");
  Dims batch = broadcast_shapes(a.shape.first(a.shape.size() - 2), b.shape.first(b.shape.size() - 2));
  batch.push_back(m);
  batch.push_back(n);
  return {a.dtype, std::move(batch)};
}

// The strides of the last two dims with those of size-1 dims (never used to address) set to
// values BLAS accepts.
std::pair<int64_t, int64_t> matrix_strides(const Layout& l) {
  int64_t rows = l.sizes[l.ndim() - 2], cols = l.sizes[l.ndim() - 1];
  int64_t rs = l.strides[l.ndim() - 2], cs = l.strides[l.ndim() - 1];
  if (cols == 1) cs = 1;
  if (rows == 1) rs = std::max<int64_t>(cols, 1);
  return {rs, cs};
}

// A matrix BLAS can read: row-major or column-major with a leading dimension covering the other
// extent (not broadcast, not overlapping).
bool blas_friendly(const Layout& l) {
  int64_t rows = l.sizes[l.ndim() - 2], cols = l.sizes[l.ndim() - 1];
  auto [rs, cs] = matrix_strides(l);
  return (cs == 1 && rs >= cols) || (rs == 1 && cs >= rows);
}

void run_cpu(std::span<const Operand> in, const Attrs&, const Array& out) {
  const Array& a0 = *in[0].array;
  const Array& b0 = *in[1].array;
  // float16 / bfloat16 multiply in float32.
  DType compute = a0.dtype == DType::Float16 || a0.dtype == DType::BFloat16 ? DType::Float32 : a0.dtype;
  Array a = a0.dtype == compute && blas_friendly(a0.layout) ? a0 : copy_to(a0, compute, kCPU);
  Array b = b0.dtype == compute && blas_friendly(b0.layout) ? b0 : copy_to(b0, compute, kCPU);
  Array result = out.dtype == compute ? out : empty(out.sizes(), compute, kCPU);
  int64_t nd = out.ndim();
  int64_t m = out.sizes()[nd - 2], n = out.sizes()[nd - 1], k = a.sizes()[a.ndim() - 1];
  // Broadcast both operands' batch dims to the output's.
  Dims batch(out.sizes().first(nd - 2));
  auto batched = [&](const Array& x) {
    Dims target = batch;
    target.push_back(x.sizes()[x.ndim() - 2]);
    target.push_back(x.sizes()[x.ndim() - 1]);
    return expand(x.layout, target);
  };
  Layout la = batched(a), lb = batched(b);
  int64_t item = static_cast<int64_t>(itemsize(compute));
  auto [ars, acs] = matrix_strides(la);
  auto [brs, bcs] = matrix_strides(lb);
  const char* base_a = static_cast<const char*>(a.storage->data());
  const char* base_b = static_cast<const char*>(b.storage->data());
  char* base_out = static_cast<char*>(result.data());
  // Product i of the batch: its operands are found from i's index in the (broadcast) batch dims.
  auto product = [&](int64_t i) {
    int64_t oa = la.offset, ob = lb.offset;
    for (size_t d = batch.size(), rest = static_cast<size_t>(i); d-- > 0;) {
      int64_t index = static_cast<int64_t>(rest % static_cast<size_t>(batch[d]));
      rest /= static_cast<size_t>(batch[d]);
      oa += index * la.strides[d];
      ob += index * lb.strides[d];
    }
    return blas::BatchItem{{base_a + oa * item, ars, acs}, {base_b + ob * item, brs, bcs}, base_out + i * m * n * item};
  };
  blas::gemm_batch(compute, m, n, k, numel_of(batch), n, product);
  if (result.storage != out.storage) copy_(out, result);
}

const bool registered = [] {
  define_op(OpId::MatMul, OpDef{.name = "MatMul", .cls = OpClass::Other, .infer = infer, .run_cpu = run_cpu, .data_safe = true});
  return true;
}();

}  // namespace
}  // namespace loom
