// The derivatives of the elementwise primitives of lazy/elementwise.h's "more math" and
// "activations" blocks, in loom ops, with the values each reads. They follow PyTorch's formulas
// (tools/autograd/derivatives.yaml) and its choices at kinks: hardtanh passes no gradient at its
// bounds, leaky_relu passes the slope's at 0, threshold none where x <= threshold, hardswish
// passes the identity's at 3 (as PyTorch's vectorized kernel; its scalar loop, which serves the
// last few elements of a tensor, the middle branch's 1.5), hardsigmoid's 1/6 is a float's.
#include <cmath>

#include "lazy/derivatives.h"

namespace loom {
namespace {

using namespace derivative;
using ops::add;
using ops::binary;
using ops::div;
using ops::mul;
using ops::sub;
using ops::unary;
using ops::where;

constexpr double kLn10 = 2.302585092994046;
constexpr double kTwoOverSqrtPi = 1.1283791670955126;
constexpr double kSqrtPiOverTwo = 0.8862269254527580;

const Scalar kZero(int64_t{0});
const Scalar kOne(int64_t{1});

Tensor square(const Tensor& v) { return mul(v, v); }
// g where cond holds, 0 elsewhere: mask() of derivatives.h with the condition negated.
Tensor zero_where(const Tensor& cond, const Tensor& g) { return where(cond, kZero, g); }

DERIVATIVE(Log10) { g[0] = div(c.grad, mul(x(c), Scalar(kLn10))); }
DERIVATIVE(Asin) { g[0] = div(c.grad, unary(OpId::Sqrt, sub(kOne, square(x(c))))); }
DERIVATIVE(Acos) { g[0] = unary(OpId::Neg, div(c.grad, unary(OpId::Sqrt, sub(kOne, square(x(c)))))); }
DERIVATIVE(Atan) { g[0] = div(c.grad, add(square(x(c)), kOne)); }
DERIVATIVE(Sinh) { g[0] = mul(c.grad, unary(OpId::Cosh, x(c))); }
DERIVATIVE(Cosh) { g[0] = mul(c.grad, unary(OpId::Sinh, x(c))); }
DERIVATIVE(Asinh) { g[0] = mul(c.grad, unary(OpId::Rsqrt, add(square(x(c)), kOne))); }
DERIVATIVE(Acosh) { g[0] = mul(c.grad, unary(OpId::Rsqrt, sub(square(x(c)), kOne))); }
DERIVATIVE(Atanh) { g[0] = div(c.grad, sub(kOne, square(x(c)))); }
DERIVATIVE(Erfc) {
  g[0] = mul(c.grad, mul(unary(OpId::Exp, unary(OpId::Neg, square(x(c)))), Scalar(-kTwoOverSqrtPi)));
}
// d/dy erfinv(y) = sqrt(pi) / 2 * exp(erfinv(y)^2), with erfinv recomputed from y (as PyTorch).
DERIVATIVE(Erfinv) {
  g[0] = mul(c.grad, mul(unary(OpId::Exp, square(unary(OpId::Erfinv, x(c)))), Scalar(kSqrtPiOverTwo)));
}
DERIVATIVE(Trunc) { g[0] = zeros(c.out_shape, c.out_dtype, c.grad); }
// atan2 and hypot take two tensors (PyTorch's signatures, ops::atan2 / ops::hypot).
DERIVATIVE(Atan2) {
  Arg a = in(c, 0), b = in(c, 1);
  Tensor denominator = add(mul(a, a), mul(b, b));
  if (c.needs_grad[0]) g[0] = mul(c.grad, div(b, denominator));
  if (c.needs_grad[1]) g[1] = mul(c.grad, div(unary(OpId::Neg, Tensor(a.tensor)), denominator));
}
DERIVATIVE(Hypot) {
  if (c.needs_grad[0]) g[0] = mul(c.grad, div(in(c, 0), result(c)));
  if (c.needs_grad[1]) g[1] = mul(c.grad, div(in(c, 1), result(c)));
}
// copysign(a, b) is a or -a: the gradient's sign is result / a's, and 0 where a is 0 (PyTorch).
DERIVATIVE(Copysign) {
  if (c.needs_grad[0]) {
    const Tensor& a = saved(c, 0);
    g[0] = zero_where(binary(OpId::Eq, a, kZero), mul(c.grad, div(result(c), a)));
  }
  if (c.needs_grad[1]) g[1] = zeros(c.out_shape, c.out_dtype, c.grad);
}
// PyTorch's: xlogy(grad, y) for x, but 0 where x == 0 and y <= 0; grad * x / y for y.
DERIVATIVE(Xlogy) {
  Arg x = in(c, 0), y = in(c, 1);
  if (c.needs_grad[0]) {
    Arg y_nonpositive = y.is_tensor() ? Arg(binary(OpId::Le, y, kZero)) : Arg(Scalar(y.scalar.as_double() <= 0));
    Tensor zero_base = binary(OpId::LogicalAnd, binary(OpId::Eq, x, kZero), y_nonpositive);
    g[0] = zero_where(zero_base, binary(OpId::Xlogy, c.grad, y));
  }
  if (c.needs_grad[1]) g[1] = div(mul(c.grad, x), y);
}
DERIVATIVE(Fmod) {
  g[0] = c.grad;
  if (c.needs_grad[1]) g[1] = mul(unary(OpId::Neg, c.grad), ops::div(in(c, 0), in(c, 1), "trunc"));
}

// elu(x) = scale * (x > 0 ? x : alpha * (exp(input_scale * x) - 1)), for elu and selu, whose
// parameters are Python numbers (ops::elu).
void elu_grads(const BackwardContext& c, Grads& g) {
  const Tensor& v = x(c);
  double alpha = c.scalars[1].as_double(), scale = c.scalars[2].as_double(), input_scale = c.scalars[3].as_double();
  Tensor negative = mul(unary(OpId::Exp, mul(v, Scalar(input_scale))), Scalar(alpha * scale * input_scale));
  g[0] = mul(c.grad, where(binary(OpId::Gt, v, kZero), Scalar(scale), negative));
}
DERIVATIVE(Elu) { elu_grads(c, g); }
// PyTorch's CeluBackward divides 1 by alpha rounded to float32 (its input_scale), whatever the
// dtype.
DERIVATIVE(Celu) {
  const Tensor& v = x(c);
  double alpha = c.scalars[1].as_double();
  double input_scale = 1.0 / static_cast<double>(static_cast<float>(alpha));
  Tensor negative = mul(unary(OpId::Exp, mul(v, Scalar(input_scale))), Scalar(alpha * input_scale));
  g[0] = mul(c.grad, where(binary(OpId::Gt, v, kZero), kOne, negative));
}
DERIVATIVE(LeakyRelu) {
  g[0] = where(binary(OpId::Gt, x(c), kZero), c.grad, mul(c.grad, in(c, 1)));
}
DERIVATIVE(Hardtanh) {
  const Tensor& v = x(c);
  Tensor outside = binary(OpId::LogicalOr, binary(OpId::Le, v, in(c, 1)), binary(OpId::Ge, v, in(c, 2)));
  g[0] = zero_where(outside, c.grad);
}
DERIVATIVE(Hardsigmoid) {
  const Tensor& v = x(c);
  Tensor inside = binary(OpId::LogicalAnd, binary(OpId::Gt, v, Scalar(int64_t{-3})), binary(OpId::Lt, v, Scalar(int64_t{3})));
  g[0] = mask(inside, mul(c.grad, Scalar(static_cast<double>(1.0f / 6.0f))));  // PyTorch's float 1/6
}
DERIVATIVE(Hardswish) {
  const Tensor& v = x(c);
  Tensor middle = mul(c.grad, add(div(v, Scalar(int64_t{3})), Scalar(0.5)));
  g[0] = where(binary(OpId::Lt, v, Scalar(int64_t{-3})), kZero,
               where(binary(OpId::Lt, v, Scalar(int64_t{3})), middle, c.grad));
}
// d/dx log(sigmoid(x)) = sigmoid(-x) = 1 / (1 + e^x), from z = e^-|x| so that nothing overflows.
DERIVATIVE(LogSigmoid) {
  const Tensor& v = x(c);
  Tensor z = unary(OpId::Exp, unary(OpId::Neg, unary(OpId::Abs, v)));
  Tensor ratio = div(z, add(z, kOne));
  g[0] = mul(c.grad, where(binary(OpId::Lt, v, kZero), sub(kOne, ratio), ratio));
}
// d/dx x tanh(softplus(x)) = tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2).
DERIVATIVE(Mish) {
  const Tensor& v = x(c);
  Tensor t = unary(OpId::Tanh, unary(OpId::Log1p, unary(OpId::Exp, v)));
  g[0] = mul(c.grad, add(t, mul(mul(v, unary(OpId::Sigmoid, v)), sub(kOne, mul(t, t)))));
}
// Both shrinks pass no gradient where -lambd <= x <= lambd.
void shrink_grads(const BackwardContext& c, Grads& g) {
  const Tensor& v = x(c);
  Arg lambd = in(c, 1);
  Tensor negative_lambd = lambd.is_tensor() ? unary(OpId::Neg, Tensor(lambd.tensor)) : Tensor();
  Arg low = lambd.is_tensor() ? Arg(negative_lambd) : Arg(Scalar(-lambd.scalar.as_double()));
  Tensor inside = binary(OpId::LogicalAnd, binary(OpId::Ge, v, low), binary(OpId::Le, v, lambd));
  g[0] = zero_where(inside, c.grad);
}
DERIVATIVE(Hardshrink) { shrink_grads(c, g); }
DERIVATIVE(Softshrink) { shrink_grads(c, g); }
DERIVATIVE(Threshold) { g[0] = zero_where(binary(OpId::Le, x(c), in(c, 1)), c.grad); }

// The special functions (lazy/special_math.h), PyTorch's formulas. i0e' = i1e - sign(x) i0e;
// i1e' = i0e - i1e (sign(x) + 1/x), 1/2 at 0; erfcx' = 2 x erfcx - 2/sqrt(pi). K0e and K1e have
// none (nor K0, K1): PyTorch's modified_bessel_k0/k1 and their scaled forms are not differentiable (their bindings detach).
DERIVATIVE(I0e) {
  g[0] = mul(c.grad, sub(unary(OpId::I1e, x(c)), mul(unary(OpId::Sign, x(c)), result(c))));
}
DERIVATIVE(I1e) {
  Tensor slope = sub(unary(OpId::I0e, x(c)),
                     mul(result(c), add(unary(OpId::Sign, x(c)), unary(OpId::Reciprocal, x(c)))));
  g[0] = mul(c.grad, where(binary(OpId::Eq, x(c), kZero), Scalar(0.5), slope));
}
DERIVATIVE(Erfcx) {
  g[0] = mul(c.grad, sub(mul(mul(x(c), result(c)), Scalar(2.0)), Scalar(kTwoOverSqrtPi)));
}
// i0' = i1; i1' = i0 - i1 / x, 1/2 at 0.
DERIVATIVE(I0) { g[0] = mul(c.grad, unary(OpId::I1, x(c))); }
DERIVATIVE(I1) {
  Tensor slope = sub(unary(OpId::I0, x(c)), div(result(c), x(c)));
  g[0] = mul(c.grad, where(binary(OpId::Eq, x(c), kZero), Scalar(0.5), slope));
}
// d/dq zeta(s, q) = -s zeta(s + 1, q); none for s, as in PyTorch (which raises when asked).
DERIVATIVE(Zeta) {
  LOOM_CHECK(!c.needs_grad[0], NotImplemented, "the derivative for 'zeta' is not implemented.");
  Arg s = in(c, 0);
  Arg next = s.is_tensor() ? Arg(add(s, kOne)) : Arg(Scalar(s.scalar.as_double() + 1));
  g[1] = mul(c.grad, mul(binary(OpId::Zeta, next, in(c, 1)), s.is_tensor() ? Arg(unary(OpId::Neg, s.tensor))
                                                                         : Arg(Scalar(-s.scalar.as_double()))));
}

#undef DERIVATIVE

const bool registered = [] {
  struct Entry {
    OpId op;
    void (*fn)(const BackwardContext&, Grads&);
    SavedValues saves;
  };
  const Entry entries[] = {
      {OpId::Log10, d_Log10, kSelf}, {OpId::Asin, d_Asin, kSelf}, {OpId::Acos, d_Acos, kSelf},
      {OpId::Atan, d_Atan, kSelf}, {OpId::Sinh, d_Sinh, kSelf}, {OpId::Cosh, d_Cosh, kSelf},
      {OpId::Asinh, d_Asinh, kSelf}, {OpId::Acosh, d_Acosh, kSelf}, {OpId::Atanh, d_Atanh, kSelf},
      {OpId::Erfc, d_Erfc, kSelf}, {OpId::Erfinv, d_Erfinv, kSelf}, {OpId::Trunc, d_Trunc, kNothing},
      {OpId::Atan2, d_Atan2, kBoth},
      {OpId::Hypot, d_Hypot, {.inputs_for = {kIn0, kIn1}, .result_for = 3}},
      // the result's sign against self's; the sign source gets a zero gradient
      {OpId::Copysign, d_Copysign, {.inputs_for = {kIn0}, .result_for = 1}},
      {OpId::Xlogy, d_Xlogy, kBoth},
      {OpId::Fmod, d_Fmod, {.inputs_for = {0, kIn0 | kIn1}}},
      {OpId::Elu, d_Elu, kSelf}, {OpId::Celu, d_Celu, kSelf}, {OpId::LeakyRelu, d_LeakyRelu, kSelf},
      {OpId::Hardtanh, d_Hardtanh, kSelf}, {OpId::Hardsigmoid, d_Hardsigmoid, kSelf},
      {OpId::Hardswish, d_Hardswish, kSelf}, {OpId::LogSigmoid, d_LogSigmoid, kSelf}, {OpId::Mish, d_Mish, kSelf},
      {OpId::Hardshrink, d_Hardshrink, kSelf}, {OpId::Softshrink, d_Softshrink, kSelf},
      {OpId::Threshold, d_Threshold, kSelf},
      {OpId::I0e, d_I0e, {.inputs_for = {kIn0}, .result_for = 1}},
      {OpId::I1e, d_I1e, {.inputs_for = {kIn0}, .result_for = 1}},
      {OpId::Erfcx, d_Erfcx, {.inputs_for = {kIn0}, .result_for = 1}},
      {OpId::Zeta, d_Zeta, {.inputs_for = {0, kIn0 | kIn1}}},
      {OpId::I0, d_I0, kSelf}, {OpId::I1, d_I1, {.inputs_for = {kIn0}, .result_for = 1}},
  };
  for (const Entry& e : entries) define_backward(e.op, e.fn, e.saves);
  return true;
}();

}  // namespace
}  // namespace loom
