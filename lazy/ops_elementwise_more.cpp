// The op library's second block of elementwise ops (lazy/ops.h, "more elementwise math and the
// activations"): thin wrappers over the primitives of lazy/elementwise.h, which add the checks
// PyTorch makes before its kernels run, and composites of primitives for the rest. A composite
// fuses into one kernel like a primitive and differentiates through its parts; where PyTorch's
// gradient differs from the parts' at a special point (an infinity, a tie), the composite
// selects what PyTorch's formula gives there.
#include <cmath>
#include <limits>

#include "lazy/ops.h"
#include "runtime/error.h"

namespace loom::ops {
namespace {

constexpr double kPi = 3.141592653589793;
constexpr double kLn2 = 0.6931471805599453;

const Scalar kZero(int64_t{0});
const Scalar kOne(int64_t{1});

// PyTorch's message for an op without a kernel for a dtype.
void require_floating(bool floating, const char* op, DType dtype) {
  LOOM_CHECK(floating, Runtime, "\"", op, "\" not implemented for '", dtype_info(dtype).scalar_type_name, "'");
}

Tensor as_floating(const Tensor& x) { return is_floating(x->dtype()) ? x : cast(x, default_float_dtype()); }

Tensor filled(const Tensor& like, bool value) {
  return full(like->sizes(), Scalar(value), DType::Bool, placement_of(like));
}

Tensor logical_and(const Tensor& a, const Tensor& b) { return binary(OpId::LogicalAnd, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return binary(OpId::LogicalOr, a, b); }

// log(exp(a) + exp(b)) in base e or 2: max + log1p(b^-|a - b|) (/ ln 2), and a itself where
// both are the same infinity (PyTorch's special case: inf - inf would give nan). The difference
// is replaced there before it is used, so no nan reaches the gradient either.
Tensor log_add_exp(const Tensor& a0, const Tensor& b0, bool base2) {
  DType r = result_type({a0, b0});
  require_floating(is_floating(r), base2 ? "logaddexp2" : "logaddexp", r);
  Tensor a = cast(a0, r), b = cast(b0, r);  // a bool operand cannot be subtracted
  Tensor same_infinity = logical_and(unary(OpId::IsInf, a), binary(OpId::Eq, a, b));
  Tensor distance = unary(OpId::Abs, sub(a, b));
  distance = where(same_infinity, kZero, distance);
  Tensor m = binary(OpId::Maximum, a, b);
  Tensor value = base2 ? add(m, div(unary(OpId::Log1p, unary(OpId::Exp2, unary(OpId::Neg, distance))), Scalar(kLn2)))
                       : add(m, unary(OpId::Log1p, unary(OpId::Exp, unary(OpId::Neg, distance))));
  return where(same_infinity, a, value);
}

}  // namespace

Tensor trunc(const Tensor& x) { return unary(OpId::Trunc, x); }

Tensor frac(const Tensor& x) {
  require_floating(is_floating(x->dtype()), "frac", x->dtype());
  return sub(x, unary(OpId::Trunc, x));
}

// Integers: C's remainder, whose sign is the dividend's, from Python's (the divisor's), which
// raises for a zero divisor as PyTorch does.
Tensor fmod(const Tensor& a, const Arg& b) {
  DType r = result_type({a, b});
  if (is_floating(r)) return binary(OpId::Fmod, a, b);
  LOOM_CHECK(r != DType::Bool, Runtime, "\"fmod\" not implemented for 'Bool'");
  Tensor rem = binary(OpId::Remainder, a, b);
  Tensor signs_differ = binary(OpId::Ne, binary(OpId::Lt, rem, kZero), binary(OpId::Lt, a, kZero));
  Tensor adjust = logical_and(binary(OpId::Ne, rem, kZero), signs_differ);
  return where(adjust, binary(OpId::Sub, rem, b), rem);
}

Tensor copysign(const Tensor& a, const Arg& b) { return binary(OpId::Copysign, a, b); }
Tensor atan2(const Tensor& a, const Tensor& b) { return binary(OpId::Atan2, a, b); }

Tensor hypot(const Tensor& a, const Tensor& b) {
  DType r = result_type({a, b});
  require_floating(is_floating(r), "hypot", r);
  return binary(OpId::Hypot, a, b);
}

Tensor logaddexp(const Tensor& a, const Tensor& b) { return log_add_exp(a, b, false); }
Tensor logaddexp2(const Tensor& a, const Tensor& b) { return log_add_exp(a, b, true); }

// One of x and y is a tensor (PyTorch's signatures).
Tensor xlogy(const Arg& x, const Arg& y) { return binary(OpId::Xlogy, x, y); }

// x * 2^e, as PyTorch computes it.
Tensor ldexp(const Tensor& a, const Tensor& b) { return mul(a, pow(Scalar(2.0), b)); }

// pow in float64 whatever the operands' dtypes.
Tensor float_power(const Arg& a, const Arg& b) {
  auto f64 = [](const Arg& x) -> Arg {
    if (x.is_tensor()) return Arg(cast(Tensor(x.tensor), DType::Float64));
    return Arg(Scalar(x.scalar.as_double()));
  };
  return pow(f64(a), f64(b));
}

// a where a >= b or b is nan, else b: the value of fmax, and PyTorch's gradient (a tie goes to a).
Tensor fmax(const Tensor& a, const Tensor& b) {
  return where(logical_or(binary(OpId::Ge, a, b), unary(OpId::IsNan, b)), a, b);
}
Tensor fmin(const Tensor& a, const Tensor& b) {
  return where(logical_or(binary(OpId::Le, a, b), unary(OpId::IsNan, b)), a, b);
}

Tensor heaviside(const Tensor& x, const Tensor& values) {
  LOOM_CHECK(x->dtype() == values->dtype(), Runtime,
             "heaviside is not yet implemented for tensors with different dtypes.");
  return where(binary(OpId::Eq, x, kZero), values, cast(binary(OpId::Gt, x, kZero), x->dtype()));
}

Tensor shift_left(const Arg& a, const Arg& b) { return binary(OpId::Lshift, a, b); }
Tensor shift_right(const Arg& a, const Arg& b) { return binary(OpId::Rshift, a, b); }

// x - x is 0 exactly when x is finite (nan for infinities and nan).
Tensor isfinite(const Tensor& x) {
  if (!is_floating(x->dtype())) return filled(x, true);
  return binary(OpId::Eq, sub(x, x), kZero);
}
Tensor isposinf(const Tensor& x) {
  if (!is_floating(x->dtype())) return filled(x, false);
  return binary(OpId::Eq, x, Scalar(std::numeric_limits<double>::infinity()));
}
Tensor isneginf(const Tensor& x) {
  if (!is_floating(x->dtype())) return filled(x, false);
  return binary(OpId::Eq, x, Scalar(-std::numeric_limits<double>::infinity()));
}
Tensor isreal(const Tensor& x) { return filled(x, true); }

// The sign bit, which -0.0 and -nan have too: the sign copysign reads.
Tensor signbit(const Tensor& x) {
  if (x->dtype() == DType::Bool) return filled(x, false);
  if (!is_floating(x->dtype())) return binary(OpId::Lt, x, kZero);
  return binary(OpId::Lt, binary(OpId::Copysign, Scalar(1.0), x), kZero);
}

// PyTorch's isclose: a == b, or both nan (equal_nan), or |a - b| <= atol + |rtol * b| and finite,
// computed in the default float dtype for integers and bools.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  LOOM_CHECK(a->dtype() == b->dtype(), Runtime, dtype_info(a->dtype()).scalar_type_name, " did not match ",
             dtype_info(b->dtype()).scalar_type_name);
  LOOM_CHECK(rtol >= 0, Runtime, "rtol must be greater than or equal to zero, but got ", rtol);
  LOOM_CHECK(atol >= 0, Runtime, "atol must be greater than or equal to zero, but got ", atol);
  Tensor close = binary(OpId::Eq, a, b);
  bool floating = is_floating(a->dtype());
  if (equal_nan && floating) close = logical_or(close, logical_and(unary(OpId::IsNan, a), unary(OpId::IsNan, b)));
  if (rtol == 0 && atol == 0) return close;
  Tensor fa = floating ? a : cast(a, default_float_dtype());
  Tensor fb = floating ? b : cast(b, default_float_dtype());
  Tensor allowed = add(unary(OpId::Abs, mul(fb, Scalar(rtol))), Scalar(atol));
  Tensor actual = unary(OpId::Abs, sub(fa, fb));
  return logical_or(close, logical_and(isfinite(actual), binary(OpId::Le, actual, allowed)));
}

Tensor deg2rad(const Tensor& x) { return mul(x, Scalar(kPi / 180.0)); }
Tensor rad2deg(const Tensor& x) { return mul(x, Scalar(180.0 / kPi)); }

// sin(pi x) / (pi x), 1 at 0. The division runs on x replaced by 1 at 0, so the branch not taken
// there sends no nan into the gradient (PyTorch's is 0 at 0).
Tensor sinc(const Tensor& x0) {
  Tensor x = as_floating(x0);
  Tensor zero = binary(OpId::Eq, x, kZero);
  Tensor scaled = mul(where(zero, kOne, x), Scalar(kPi));
  return where(zero, kOne, div(unary(OpId::Sin, scaled), scaled));
}

// log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps is given (PyTorch's gradient: none
// outside, the bounds included inside). The clamp is PyTorch's logit's own, not clamp(): below eps
// gives eps, else above 1 - eps gives 1 - eps. That differs from clamp() where the bounds cross
// (eps > 0.5: clamp gives 1 - eps everywhere, PyTorch eps below it), and a NaN eps bounds nothing
// (no comparison with NaN holds) where clamp() would make every element NaN.
Tensor logit(const Tensor& x0, std::optional<double> eps) {
  Tensor z = as_floating(x0);
  if (eps && !std::isnan(*eps)) {
    Tensor below = binary(OpId::Lt, z, Scalar(*eps));
    z = where(below, Arg(Scalar(*eps)), Arg(clamp(z, std::nullopt, Arg(Scalar(1.0 - *eps)))));
  }
  return unary(OpId::Log, div(z, sub(kOne, z)));
}

Tensor positive(const Tensor& x) {  // x itself
  LOOM_CHECK(x->dtype() != DType::Bool, Runtime, "The `+` operator, on a bool tensor is not supported.");
  return x;
}

// ---- activations ----

Tensor elu(const Tensor& x, Scalar alpha, Scalar scale, Scalar input_scale) {
  return apply(OpId::Elu, {Arg(x), Arg(alpha), Arg(scale), Arg(input_scale)});
}

Tensor celu(const Tensor& x, Scalar alpha) {
  LOOM_CHECK(alpha.as_double() != 0.0, Runtime, "ZeroDivisionError: alpha cannot be 0 for CELU");
  return apply(OpId::Celu, {Arg(x), Arg(alpha), Arg(kOne), Arg(Scalar(1.0 / alpha.as_double()))});
}

Tensor selu(const Tensor& x) {
  return elu(x, Scalar(1.6732632423543772848170429916717), Scalar(1.0507009873554804934193349852946), kOne);
}

Tensor leaky_relu(const Tensor& x, Scalar negative_slope) {
  return apply(OpId::LeakyRelu, {Arg(x), Arg(negative_slope)});
}

// Integers: a clamp to the limits truncated to integers, as PyTorch converts them.
Tensor hardtanh(const Tensor& x, Scalar min_val, Scalar max_val) {
  DType d = x->dtype();
  if (is_floating(d)) return apply(OpId::Hardtanh, {Arg(x), Arg(min_val), Arg(max_val)});
  LOOM_CHECK(d != DType::Bool, Runtime, "Bool inputs not supported for hardtanh");
  Scalar lo(min_val.as_int()), hi(max_val.as_int());
  LOOM_CHECK(d != DType::UInt8 || (lo.as_int() >= 0 && hi.as_int() >= 0), Runtime,
             "cannot do hardtanh on an unsigned type with negative limits");
  return clamp(x, Arg(lo), Arg(hi));
}

Tensor hardsigmoid(const Tensor& x) { return unary(OpId::Hardsigmoid, x); }
Tensor hardswish(const Tensor& x) { return unary(OpId::Hardswish, x); }
Tensor log_sigmoid(const Tensor& x) { return unary(OpId::LogSigmoid, x); }
Tensor mish(const Tensor& x) { return unary(OpId::Mish, x); }

Tensor hardshrink(const Tensor& x, Scalar lambd) { return apply(OpId::Hardshrink, {Arg(x), Arg(lambd)}); }

Tensor softshrink(const Tensor& x, Scalar lambd) {
  LOOM_CHECK(lambd.as_double() >= 0, Runtime, "lambda must be greater or equal to 0, but found to be ",
             lambd.as_double(), ".");
  return apply(OpId::Softshrink, {Arg(x), Arg(lambd)});
}

// An integer tensor compares with and takes the numbers converted to its dtype (checked, then
// wrapping: -1 is 255 in uint8, as PyTorch converts them), so they do not promote it to float.
Tensor threshold(const Tensor& x, Scalar threshold, Scalar value) {
  DType d = x->dtype();
  LOOM_CHECK(d != DType::Bool, Runtime, "\"threshold\" not implemented for 'Bool'");
  threshold.check_fits(d);
  value.check_fits(d);
  if (is_integral(d)) {
    threshold = threshold.stored_as(d);
    value = value.stored_as(d);
  }
  return apply(OpId::Threshold, {Arg(x), Arg(threshold), Arg(value)});
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  require_floating(is_floating(x->dtype()), "prelu", x->dtype());
  LOOM_CHECK(x->ndim() > 0, Runtime, "Not allow zero-dim input tensor.");
  LOOM_CHECK(weight->ndim() <= 1, Runtime, "prelu: Expected `weight` to be a scalar or 1D tensor, but got ndim = ",
             weight->ndim());
  LOOM_CHECK(weight->dtype() == x->dtype(), Runtime, "Found dtype ", dtype_info(weight->dtype()).scalar_type_name,
             " but expected ", dtype_info(x->dtype()).scalar_type_name);
  int64_t channels = x->ndim() >= 2 ? x->sizes()[1] : 1;
  int64_t n = weight->numel();
  LOOM_CHECK(n == 1 || n == channels, Runtime,
             "Mismatch of parameter numbers and input channel size. Found parameter numbers = ", n,
             " and channel size = ", channels, ".");
  Tensor w = weight;
  if (n == 1) {
    w = reshape(weight, Dims{});
  } else {
    Dims shape(static_cast<size_t>(x->ndim() - 1), 1);
    shape[0] = n;
    w = reshape(weight, shape);
  }
  return where(binary(OpId::Gt, x, kZero), x, mul(w, x));
}

}  // namespace loom::ops
