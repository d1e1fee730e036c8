// scaled_dot_product_attention: softmax(q k^T * scale + mask) v as a composite with a derivative
// of its own (record_composite, lazy/autograd.h). The forward keeps the attention
// probabilities P (as PyTorch's math path does) and the dropout mask; the derivative is
//   dv = P'^T g,  dP' = g v^T,  dP = dP' * keep / (1 - p),  dS = P * (dP - rowsum(dP * P)) * scale,
//   dq = dS k,  dk = dS^T q
// (P' the dropped-out probabilities): two products each way and one row kernel between them,
// instead of the chain through masked_fill, softmax's shift and the scale's products.
#include <cmath>
#include <limits>
#include <optional>

#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "runtime/error.h"

namespace loom::ops {
namespace {

Tensor transpose_last(const Tensor& x) { return transpose(x, -2, -1); }

// The scores q k^T * scale, masked: -inf where a bool mask is false or (is_causal) a key comes
// after its query, a float mask added.
Tensor masked_scores(const Tensor& q, const Tensor& k, const Tensor& mask, bool is_causal, double scale) {
  Tensor scores = mul(matmul(q, transpose_last(k)), Scalar(scale));
  double inf = std::numeric_limits<double>::infinity();
  if (is_causal) {
    int64_t n = q->sizes()[q->ndim() - 2], m = k->sizes()[k->ndim() - 2];
    Tensor keep = tril(full(Dims{n, m}, Scalar(true), DType::Bool, placement_of(q)));
    scores = masked_fill(scores, unary(OpId::LogicalNot, keep), Arg(Scalar(-inf)));
  }
  if (mask) {
    if (mask->dtype() == DType::Bool) scores = masked_fill(scores, unary(OpId::LogicalNot, mask), Arg(Scalar(-inf)));
    else scores = add(scores, mask);
  }
  return scores;
}

// P' = P * keep / (1 - p): `keep` empty without dropout, p = 1 drops everything.
Tensor dropped(const Tensor& x, const Tensor& keep, double p) {
  if (p >= 1.0) return mul(x, Scalar(0.0));
  if (!keep) return x;
  return mul(mul(x, keep), Scalar(1.0 / (1.0 - p)));
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* attn_mask,
                                    double dropout_p, bool is_causal, std::optional<double> scale) {
  LOOM_CHECK(q->ndim() >= 2 && k->ndim() >= 2 && v->ndim() >= 2, Runtime,
             "scaled_dot_product_attention: query, key and value need at least 2 dims, got ", q->ndim(), ", ",
             k->ndim(), " and ", v->ndim());
  LOOM_CHECK(!(is_causal && attn_mask), Runtime,
             "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
  double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q->sizes()[q->ndim() - 1]));
  Tensor mask = attn_mask ? *attn_mask : Tensor();
  Tensor out, probs, keep;
  {
    GradModeGuard unrecorded(false);
    probs = softmax(masked_scores(q, k, mask, is_causal, s), -1);
    if (dropout_p > 0.0 && dropout_p < 1.0)
      keep = binary(OpId::Ge, rand(probs->sizes(), probs->dtype(), placement_of(probs)), Scalar(dropout_p));
    out = matmul(dropout_p > 0.0 ? dropped(probs, keep, dropout_p) : probs, v);
  }
  // PyTorch 2's grad_fn on the CPU (its flash-attention kernel for CPUs).
  record_composite(
      {"ScaledDotProductFlashAttentionForCpuBackward0", {q.get(), k.get(), v.get()}, 0b111u, false, {probs, keep, mask}},
      *out, [dropout_p, is_causal, s](const Tensor& g, const CompositeSaved& saved) -> std::vector<Tensor> {
        const Tensor &q = saved.inputs[0], &k = saved.inputs[1], &v = saved.inputs[2];
        const Tensor &keep = saved.extras[1], &mask = saved.extras[2];
        Tensor p = saved.recompute() ? softmax(masked_scores(q, k, mask, is_causal, s), -1) : saved.extras[0];
        std::vector<Tensor> grads(3);
        if (saved.needs_grad[2]) grads[2] = matmul(transpose_last(dropout_p > 0.0 ? dropped(p, keep, dropout_p) : p), g);
        if (saved.needs_grad[0] || saved.needs_grad[1]) {
          Tensor dp = matmul(g, transpose_last(v));
          if (dropout_p > 0.0) dp = dropped(dp, keep, dropout_p);
          Tensor ds = mul(mul(p, sub(dp, sum(mul(dp, p), DimList{-1}, true))), Scalar(s));
          if (saved.needs_grad[0]) grads[0] = matmul(ds, k);
          if (saved.needs_grad[1]) grads[1] = matmul(transpose_last(ds), q);
        }
        return grads;
      });
  return out;
}

}  // namespace loom::ops
