// layer_norm and rms_norm: composites with derivatives of their own (record_composite,
// lazy/autograd.h). The forward runs unrecorded and keeps its per-row statistics; the derivative
// is PyTorch's closed form over them (native_layer_norm_backward), so backward is two row
// reductions for the input (mean(g w) and mean(g w xhat)) and column sums for weight and bias,
// instead of the chain of the primitives' derivatives (which recomputes the residual chain and
// walks the mean / variance / rsqrt steps back one reduction each).
#include <cmath>
#include <string>

#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "runtime/dtype.h"
#include "runtime/layout.h"
#include "runtime/error.h"

namespace loom::ops {
namespace {

// The last `k` dims of an n-dim tensor.
DimList last_dims(int64_t k, int64_t ndim) {
  DimList dims;
  for (int64_t d = ndim - k; d < ndim; ++d) dims.push_back(d);
  return dims;
}

// PyTorch's check of an affine parameter against normalized_shape (the trailing sizes of x).
void check_affine(const Tensor* t, const char* what, const Tensor& x, int64_t k) {
  if (!t) return;
  IntSpan sizes = (*t)->sizes(), xs = x->sizes();
  bool same = static_cast<int64_t>(sizes.size()) == k;
  for (int64_t i = 0; same && i < k; ++i) same = sizes[i] == xs[xs.size() - k + i];
  LOOM_CHECK(same, Runtime, "Expected ", what, " to be of same shape as normalized_shape, but got ", what,
             " of shape ", format_dims(sizes), " and normalized_shape = ",
             format_dims(IntSpan(xs.data() + xs.size() - k, static_cast<size_t>(k))));
}

Tensor optional_tensor(const Tensor* t) { return t ? *t : Tensor(); }

// PyTorch's kernel-dtype error ("LayerNormKernelImpl" not implemented for 'Long').
void require_floating(const Tensor& x, const char* kernel_name) {
  LOOM_CHECK(is_floating(x->dtype()), Runtime, "\"", kernel_name, "\" not implemented for '",
             dtype_info(x->dtype()).scalar_type_name, "'");
}

// native_layer_norm's kernel reads weight and bias in the input's dtype.
void require_same_dtype(const Tensor* t, const Tensor& x) {
  if (!t) return;
  LOOM_CHECK((*t)->dtype() == x->dtype(), Runtime, "expected scalar type ", dtype_info(x->dtype()).scalar_type_name,
             " but found ", dtype_info((*t)->dtype()).scalar_type_name);
}

// (mean, rstd) of x over `dims`, kept: rstd = 1 / sqrt(var + eps), the biased variance.
std::pair<Tensor, Tensor> moments(const Tensor& x, const DimList& dims, double eps) {
  Tensor mu = mean(x, dims, true);
  Tensor centered = sub(x, mu);
  Tensor var = mean(mul(centered, centered), dims, true);
  return {mu, unary(OpId::Rsqrt, add(var, Scalar(eps)))};
}

Tensor rms_rstd(const Tensor& x, const DimList& dims, double eps) {
  return unary(OpId::Rsqrt, add(mean(mul(x, x), dims, true), Scalar(eps)));
}

}  // namespace

Tensor layer_norm(const Tensor& x, int64_t normalized_ndim, const Tensor* weight, const Tensor* bias, double eps) {
  LOOM_CHECK(normalized_ndim >= 1 && normalized_ndim <= x->ndim(), Runtime, "layer_norm: normalized_shape of ",
             normalized_ndim, " dims for an input of ", x->ndim(), " dims");
  require_floating(x, "LayerNormKernelImpl");
  check_affine(weight, "weight", x, normalized_ndim);
  check_affine(bias, "bias", x, normalized_ndim);
  require_same_dtype(weight, x);
  require_same_dtype(bias, x);
  DimList dims = last_dims(normalized_ndim, x->ndim());
  Tensor y, mu, rstd;
  {
    GradModeGuard unrecorded(false);
    std::tie(mu, rstd) = moments(x, dims, eps);
    y = mul(sub(x, mu), rstd);
    if (weight) y = mul(y, *weight);
    if (bias) y = add(y, *bias);
  }
  // Saves x and the weight (bits 0 and 1), the mean and rstd: xhat = (x - mean) * rstd,
  // dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) with gw = g * weight, dweight = the
  // column sum of g * xhat, dbias that of g (record_composite sums them to the weight's shape).
  bool has_weight = weight != nullptr;
  record_composite({"NativeLayerNormBackward0", {x.get(), optional_tensor(weight).get(), optional_tensor(bias).get()},
                    has_weight ? 0b11u : 0b01u, false, {mu, rstd}},
                   *y, [dims, eps, has_weight](const Tensor& g, const CompositeSaved& s) -> std::vector<Tensor> {
                     const Tensor& x = s.inputs[0];
                     auto [mu, rstd] = s.recompute() ? moments(x, dims, eps) : std::pair{s.extras[0], s.extras[1]};
                     Tensor xhat = mul(sub(x, mu), rstd);
                     std::vector<Tensor> grads(3);
                     if (s.needs_grad[0]) {
                       Tensor gw = has_weight ? mul(g, s.inputs[1]) : g;
                       Tensor centered = sub(gw, mean(gw, dims, true));
                       grads[0] = mul(rstd, sub(centered, mul(xhat, mean(mul(gw, xhat), dims, true))));
                     }
                     if (s.needs_grad[1]) grads[1] = mul(g, xhat);
                     if (s.needs_grad[2]) grads[2] = g;
                     return grads;
                   });
  return y;
}

Tensor rms_norm(const Tensor& x, int64_t normalized_ndim, const Tensor* weight, double eps) {
  LOOM_CHECK(normalized_ndim >= 1 && normalized_ndim <= x->ndim(), Runtime, "rms_norm: normalized_shape of ",
             normalized_ndim, " dims for an input of ", x->ndim(), " dims");
  require_floating(x, "rms_norm");
  check_affine(weight, "weight", x, normalized_ndim);
  DimList dims = last_dims(normalized_ndim, x->ndim());
  Tensor y, rstd;
  {
    GradModeGuard unrecorded(false);
    rstd = rms_rstd(x, dims, eps);
    y = mul(x, rstd);
    if (weight) y = mul(y, *weight);
  }
  // y = x * r * w with r = 1 / sqrt(mean(x^2) + eps): dx = r * (gw - x * r^2 * mean(gw * x)),
  // dweight = the column sum of g * x * r. PyTorch 2's rms_norm on the CPU is a composite ending
  // in a product, hence its grad_fn's name.
  bool has_weight = weight != nullptr;
  record_composite({"MulBackward0", {x.get(), optional_tensor(weight).get()}, has_weight ? 0b11u : 0b01u, false, {rstd}},
                   *y, [dims, eps, has_weight](const Tensor& g, const CompositeSaved& s) -> std::vector<Tensor> {
                     const Tensor& x = s.inputs[0];
                     Tensor r = s.recompute() ? rms_rstd(x, dims, eps) : s.extras[0];
                     std::vector<Tensor> grads(2);
                     if (s.needs_grad[0]) {
                       Tensor gw = has_weight ? mul(g, s.inputs[1]) : g;
                       Tensor r3_mean = mul(mul(mul(r, r), r), mean(mul(gw, x), dims, true));
                       grads[0] = sub(mul(gw, r), mul(x, r3_mean));
                     }
                     if (s.needs_grad[1]) grads[1] = mul(g, mul(x, r));
                     return grads;
                   });
  return y;
}

}  // namespace loom::ops
