// The op table's rows (pyext/op_table.h) of the second elementwise family: more math
// (trigonometric and hyperbolic functions, fmod, copysign, logaddexp, xlogy, shifts, tests such
// as isfinite and isclose) and the activations that loom.nn.functional calls, with PyTorch's
// names, aliases (arcsin, fix, absolute, ...), signatures and defaults.
#include <cmath>
#include <limits>

#include "lazy/dispatch.h"
#include "lazy/ops_movement.h"
#include "pyext/objects.h"
#include "pyext/op_table.h"
#include "runtime/error.h"
#include "runtime/layout.h"

namespace loom::py {
namespace {


template <OpId op>
Result unary(const Parsed& p) {
  return ops::unary(op, p.tensor(0));
}

// The in-place function forms PyTorch has beside Tensor.<op>_ (torch.celu_(x)): the result of
// the function row `fn` written into the first argument, which is returned.
template <Result (*fn)(const Parsed&)>
Result in_place(const Parsed& p) {
  Tensor self = tensor_of(p.object(0));  // held: update() may release the GIL (tensor_operators.cpp)
  check_no_internal_overlap(*self);
  update(*self, [&] { return fn(p).take_tensor(); });
  return Py_NewRef(p.object(0));
}

// (Tensor, Arg) or (Scalar, Tensor): the overloads of xlogy, float_power and the shifts.
template <Tensor (*fn)(const Arg&, const Arg&)>
Result tensor_or_scalar_first(const Parsed& p) {
  return p.index == 0 ? fn(p.arg(0), p.arg(1)) : fn(Arg(p.scalar(0)), Arg(p.tensor(1)));
}

Result allclose(const Parsed& p) {
  Tensor close = ops::all(ops::isclose(p.tensor(0), p.tensor(1), p.real(2), p.real(3), p.boolean(4)));
  PyRef value = PyRef::checked(wrap(close));
  int truth = PyObject_IsTrue(value.get());  // a sync point in lazy mode, as item()
  if (truth < 0) throw PythonError{};
  return Py_NewRef(truth ? Py_True : Py_False);
}

// rrelu: in training, each negative element scaled by its own slope drawn uniformly from
// [lower, upper]; in evaluation by their mean (a leaky_relu).
Result rrelu(const Parsed& p) {
  Tensor x = p.tensor(0);
  double lower = p.scalar(1).as_double(), upper = p.scalar(2).as_double();
  LOOM_CHECK(lower <= upper, Runtime, "Lower bound should be less than or equal to the upper bound");
  if (!p.boolean(3)) return ops::leaky_relu(x, Scalar((lower + upper) / 2));
  LOOM_CHECK(is_floating(x->dtype()), Runtime, "\"rrelu\" not implemented for '",
             dtype_info(x->dtype()).scalar_type_name, "'");
  Tensor u = ops::rand(x->sizes(), x->dtype(), {x->device(), x->is_lazy()});
  Tensor slopes = ops::add(ops::mul(u, Scalar(upper - lower)), Scalar(lower));
  return ops::where(ops::binary(OpId::Le, x, Scalar(int64_t{0})), ops::mul(x, slopes), x);
}

// Tensor.float_power_: its result is float64, which PyTorch writes only into a float64 self.
Result float_power_(const Parsed& p) {
  Tensor self = tensor_of(p.self);  // held: update() may release the GIL (tensor_operators.cpp)
  LOOM_CHECK(self->dtype() == DType::Float64, Runtime, "the base given to float_power_ has dtype ",
             dtype_info(self->dtype()).scalar_type_name, " but the operation's result requires dtype Double");
  check_no_internal_overlap(*self);
  update(*self, [&] { return ops::float_power(Arg(self.get()), p.arg(1)); });
  return Py_NewRef(p.self);
}

// lgamma and digamma: composites of elementwise primitives (one fused kernel on the lazy device;
// their derivatives are autograd's of the parts). Floating results; integers are promoted.
Tensor floating(const Tensor& x) { return is_floating(x->dtype()) ? x : ops::cast(x, default_float_dtype()); }
constexpr double kPi = 3.141592653589793;

// The poles at 0, -1, -2, ...: where x is a non-positive integer.
Tensor at_pole(const Tensor& x) {
  return ops::binary(OpId::LogicalAnd, ops::binary(OpId::Le, x, Scalar(0.0)),
                     ops::binary(OpId::Eq, x, ops::unary(OpId::Floor, x)));
}

// log|Gamma(x)| by Lanczos' approximation (g = 7, nine terms: about 15 digits for x >= 0.5) and,
// below 0.5, the reflection log(pi / |sin(pi x)|) - lgamma(1 - x). Both branches see an argument
// of at least 0.5, so neither makes a NaN that where()'s gradient would carry.
Tensor lgamma(const Tensor& x0) {
  static constexpr double c[] = {0.99999999999980993,  676.5203681218851,     -1259.1392167224028,
                                 771.32342877765313,   -176.61502916214059,   12.507343278686905,
                                 -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7};
  Tensor x = floating(x0);
  Tensor reflect = ops::binary(OpId::Lt, x, Scalar(0.5));
  Tensor y = ops::where(reflect, ops::sub(Scalar(int64_t{1}), x), x);  // >= 0.5
  Tensor z = ops::sub(y, Scalar(int64_t{1}));
  Tensor a = ops::full(x->sizes(), Scalar(c[0]), x->dtype(), placement_of(x));
  for (int k = 1; k < 9; ++k) a = ops::add(a, ops::div(Scalar(c[k]), ops::add(z, Scalar(double(k)))));
  Tensor t = ops::add(z, Scalar(7.5));
  Tensor direct = ops::add(ops::sub(ops::add(Scalar(0.9189385332046727), ops::mul(ops::add(z, Scalar(0.5)),
                                                                                   ops::unary(OpId::Log, t))),
                                    t),
                           ops::unary(OpId::Log, a));
  Tensor sin_pix = ops::unary(OpId::Abs, ops::unary(OpId::Sin, ops::mul(x, Scalar(kPi))));
  Tensor reflected = ops::sub(ops::unary(OpId::Log, ops::div(Scalar(kPi), sin_pix)), direct);
  Tensor value = ops::where(reflect, reflected, direct);
  // log|Gamma| is +inf at both infinities, as PyTorch gives: the series computes inf - inf = NaN at
  // +inf, and sin(pi x) is NaN at -inf.
  Tensor infinite = ops::binary(OpId::LogicalOr, at_pole(x), ops::binary(OpId::Eq, ops::unary(OpId::Abs, x),
                                                                          Scalar(std::numeric_limits<double>::infinity())));
  return ops::where(infinite, Scalar(std::numeric_limits<double>::infinity()), value);
}

// digamma: psi(x) = psi(x + 6) - sum 1/(x + k), k < 6, with psi's asymptotic series at x + 6
// (error below 1e-15 there) and, below 0.5, the reflection psi(1 - x) - pi / tan(pi x). PyTorch's
// values at the poles: -inf at 0, NaN at the negative integers.
Tensor digamma(const Tensor& x0) {
  Tensor x = floating(x0);
  Tensor reflect = ops::binary(OpId::Lt, x, Scalar(0.5));
  Tensor y = ops::where(reflect, ops::sub(Scalar(int64_t{1}), x), x);  // >= 0.5
  Tensor shift = ops::full(x->sizes(), Scalar(0.0), x->dtype(), placement_of(x));
  for (int k = 0; k < 6; ++k) shift = ops::add(shift, ops::unary(OpId::Reciprocal, ops::add(y, Scalar(double(k)))));
  Tensor w = ops::add(y, Scalar(6.0));
  Tensor w2 = ops::unary(OpId::Reciprocal, ops::mul(w, w));
  // ln w - 1/(2w) - sum B_2k / (2k w^2k), the sum by Horner's rule in 1/w^2.
  static constexpr double b[] = {1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760, 1.0 / 12};
  Tensor series = ops::full(x->sizes(), Scalar(b[6]), x->dtype(), placement_of(x));
  for (int k = 5; k >= 0; --k) series = ops::add(ops::mul(series, w2), Scalar(b[k]));
  series = ops::mul(series, w2);
  Tensor psi = ops::sub(ops::sub(ops::sub(ops::unary(OpId::Log, w), ops::div(Scalar(0.5), w)), series), shift);
  Tensor cot = ops::div(Scalar(kPi), ops::unary(OpId::Tan, ops::mul(x, Scalar(kPi))));
  Tensor value = ops::where(reflect, ops::sub(psi, cot), psi);
  Tensor zero = ops::binary(OpId::Eq, x, Scalar(0.0));
  value = ops::where(at_pole(x), Scalar(std::numeric_limits<double>::quiet_NaN()), value);
  return ops::where(zero, Scalar(-std::numeric_limits<double>::infinity()), value);
}

// polygamma(n, x): digamma for n = 0, else (-1)^(n+1) n! zeta(n + 1, x), so its derivative is
// zeta's: polygamma(n + 1, x).
Tensor polygamma(int64_t n, const Tensor& x) {
  LOOM_CHECK(n >= 0, Runtime, "polygamma(n, x) does not support negative n.");
  if (n == 0) return digamma(x);
  double factorial = std::tgamma(static_cast<double>(n) + 1);  // inf from n = 171, as the series' values
  return ops::mul(ops::binary(OpId::Zeta, Scalar(static_cast<double>(n) + 1), floating(x)),
                  Scalar(n % 2 ? factorial : -factorial));
}

// The special functions PyTorch does not differentiate (Bessel K and the spherical j0): computed
// on a detached input, so the result does not require grad, as PyTorch's.
template <OpId op>
Result not_differentiable(const Parsed& p) {
  return ops::unary(op, ops::detach(p.tensor(0)));
}

// sin(x) / x, 1 at 0 and 0 at +-inf; near 0 (|x| < 1e-4, where the quotient's rounding would
// show) its series 1 - x^2/6.
Result spherical_bessel_j0(const Parsed& p) {
  Tensor x = floating(ops::detach(p.tensor(0)));
  Tensor small = ops::binary(OpId::Lt, ops::unary(OpId::Abs, x), Scalar(1e-4));
  Tensor series = ops::sub(Scalar(int64_t{1}), ops::div(ops::mul(x, x), Scalar(6.0)));
  Tensor quotient = ops::div(ops::unary(OpId::Sin, x), x);
  Tensor value = ops::where(small, series, quotient);
  return ops::where(ops::unary(OpId::IsInf, x), Scalar(0.0), value);
}

// gcd / lcm: two integer tensors (not bool) broadcast and promoted.
std::pair<Tensor, Tensor> integer_pair(const char* name, const Tensor& a, const Tensor& b) {
  LOOM_CHECK(is_integral(a->dtype()) && is_integral(b->dtype()), Runtime, name,
             " is only implemented for integer tensors, got ", dtype_info(a->dtype()).scalar_type_name, " and ",
             dtype_info(b->dtype()).scalar_type_name);
  DType dtype = result_type({Arg(a), Arg(b)});
  Dims shape = broadcast_shapes(a->sizes(), b->sizes());
  return {ops::cast(ops::expand(a, shape), dtype), ops::cast(ops::expand(b, shape), dtype)};
}

// The greatest common divisor, non-negative (gcd(0, 0) = 0): Euclid's steps over the whole
// tensor until every remainder is 0, which needs a look at the values after each step (a sync on
// the lazy device; at most ~90 steps for int64).
Tensor gcd(const Tensor& input, const Tensor& other) {
  auto [a0, b0] = integer_pair("gcd", input, other);
  Tensor a = ops::unary(OpId::Abs, a0), b = ops::unary(OpId::Abs, b0);
  for (;;) {
    Tensor nonzero = ops::binary(OpId::Ne, b, Scalar(int64_t{0}));
    Array any = copy_to(ops::values_for_shape(ops::any(nonzero), "gcd"), DType::Int64, kCPU);
    if (*static_cast<const int64_t*>(any.data()) == 0) return a;
    Tensor divisor = ops::where(nonzero, b, Scalar(int64_t{1}));
    Tensor rest = ops::where(nonzero, ops::binary(OpId::Remainder, a, divisor), b);
    a = ops::where(nonzero, b, a);
    b = rest;
  }
}

// The least common multiple, non-negative; 0 when either is 0.
Tensor lcm(const Tensor& input, const Tensor& other) {
  auto [a, b] = integer_pair("lcm", input, other);
  Tensor g = gcd(a, b);
  Tensor zero = ops::binary(OpId::Eq, g, Scalar(int64_t{0}));
  Tensor quotient = ops::div(a, ops::where(zero, Scalar(int64_t{1}), g), "trunc");
  return ops::where(zero, Scalar(int64_t{0}), ops::unary(OpId::Abs, ops::mul(quotient, b)));
}

// nextafter: the next representable value after input towards other, by a step of the bit
// pattern (read as an integer of the same width, which orders the magnitudes of one sign): up
// when moving away from zero, down when moving towards it; from zero the smallest subnormal of
// other's sign; other itself when equal; NaN when either is.
Tensor nextafter(const Tensor& input, const Tensor& other) {
  LOOM_CHECK(is_floating(input->dtype()) && is_floating(other->dtype()), Runtime,
             "nextafter is only implemented for floating-point tensors, got ",
             dtype_info(input->dtype()).scalar_type_name,
             " and ", dtype_info(other->dtype()).scalar_type_name);
  DType dtype = result_type({Arg(input), Arg(other)});
  Dims shape = broadcast_shapes(input->sizes(), other->sizes());
  Tensor x = ops::contiguous(ops::cast(ops::expand(input, shape), dtype));
  Tensor y = ops::cast(ops::expand(other, shape), dtype);
  DType bits_type = itemsize(dtype) == 8 ? DType::Int64 : itemsize(dtype) == 4 ? DType::Int32 : DType::Int16;
  double tiny = dtype == DType::Float64   ? std::numeric_limits<double>::denorm_min()
                : dtype == DType::Float32 ? std::numeric_limits<float>::denorm_min()
                : dtype == DType::Float16 ? std::ldexp(1.0, -24)
                                          : std::ldexp(1.0, -133);  // bfloat16
  Tensor bits = ops::view_dtype(ops::clone(ops::detach(x)), bits_type);
  Tensor away = ops::binary(OpId::Eq, ops::binary(OpId::Gt, y, x), ops::binary(OpId::Gt, x, Scalar(0.0)));
  Tensor stepped = ops::where(away, ops::add(bits, Scalar(int64_t{1})), ops::sub(bits, Scalar(int64_t{1})));
  Tensor result = ops::view_dtype(ops::contiguous(stepped), dtype);
  Tensor from_zero = ops::copysign(ops::full(shape, Scalar(tiny), dtype, placement_of(x)), y);
  result = ops::where(ops::binary(OpId::Eq, x, Scalar(0.0)), from_zero, result);
  result = ops::where(ops::binary(OpId::Eq, x, y), y, result);
  Tensor nan = ops::binary(OpId::LogicalOr, ops::unary(OpId::IsNan, x), ops::unary(OpId::IsNan, y));
  return ops::where(nan, ops::add(x, y), result);
}

Result relu(const Parsed& p) { return ops::unary(OpId::Relu, p.tensor(0)); }
Result elu(const Parsed& p) { return ops::elu(p.tensor(0), p.scalar(1), p.scalar(2), p.scalar(3)); }
Result celu(const Parsed& p) { return ops::celu(p.tensor(0), p.scalar(1)); }
Result selu(const Parsed& p) { return ops::selu(p.tensor(0)); }
Result leaky_relu(const Parsed& p) { return ops::leaky_relu(p.tensor(0), p.scalar(1)); }
Result hardtanh(const Parsed& p) { return ops::hardtanh(p.tensor(0), p.scalar(1), p.scalar(2)); }
Result relu6(const Parsed& p) { return ops::hardtanh(p.tensor(0), Scalar(int64_t{0}), Scalar(int64_t{6})); }
Result hardsigmoid(const Parsed& p) { return ops::hardsigmoid(p.tensor(0)); }
Result hardswish(const Parsed& p) { return ops::hardswish(p.tensor(0)); }
Result mish(const Parsed& p) { return ops::mish(p.tensor(0)); }
Result threshold(const Parsed& p) { return ops::threshold(p.tensor(0), p.scalar(1), p.scalar(2)); }

const Row kRows[] = {
    // loom's tensors are real: angle is pi for negative values (0 else, NaN for NaN), in a floating
    // dtype; conj_physical is a copy.
    {{"angle(Tensor input)"}, kBoth, [](const Parsed& p) -> Result {
       Tensor x = p.tensor(0);
       Tensor f = is_floating(x->dtype()) ? x : ops::cast(x, default_float_dtype());
       Tensor zero = ops::full(f->sizes(), Scalar(0.0), f->dtype(), placement_of(f));
       Tensor a = ops::where(ops::binary(OpId::Lt, f, Scalar(0.0)), Scalar(kPi), zero);
       return ops::where(ops::unary(OpId::IsNan, f), f, a);  // through f: a gradient of zero, as PyTorch's
     }},
    {{"conj_physical(Tensor input)"}, kAll | kInplaceFunction, LOOM_BODY(ops::clone(p.tensor(0)))},
    {{"gcd(Tensor input, Tensor other)"}, kAll | kInplaceFunction, LOOM_BODY(gcd(p.tensor(0), p.tensor(1))),
     "Integers only; loops over Euclid's steps, reading after each whether any remainder is left (a sync on the "
     "lazy device)."},
    {{"lcm(Tensor input, Tensor other)"}, kAll | kInplaceFunction, LOOM_BODY(lcm(p.tensor(0), p.tensor(1))),
     "Integers only; computed from gcd."},
    {{"nextafter(Tensor input, Tensor other)"}, kAll,
     LOOM_BODY(nextafter(p.tensor(0), p.tensor(1)))},
    // ---- math ----
    {{"trunc(Tensor input)"}, kAll | kInplaceFunction, LOOM_BODY(ops::trunc(p.tensor(0)))},
    {{"fix(Tensor input)"}, kAll | kInplaceFunction, LOOM_BODY(ops::trunc(p.tensor(0))), "trunc()"},
    {{"frac(Tensor input)"}, kAll | kInplaceFunction, LOOM_BODY(ops::frac(p.tensor(0)))},
    {{"log10(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Log10>},
    {{"lgamma(Tensor input)"}, kAll, LOOM_BODY(lgamma(p.tensor(0))), "log|Gamma(input)| (inf at the poles)."},
    {{"digamma(Tensor input)"}, kAll, LOOM_BODY(digamma(p.tensor(0))),
     "The logarithmic derivative of Gamma (-inf at 0, NaN at the negative integers)."},
    {{"polygamma(int n, Tensor input)"}, kFunction, LOOM_BODY(polygamma(p.int64(0), p.tensor(1))),
     "The n-th derivative of digamma: (-1)^(n+1) n! zeta(n + 1, input) for n >= 1."},
    {{"i0(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::I0>,
     "The modified Bessel function of the first kind of order 0."},
    // torch.special's Bessel functions, erfcx and zeta (loom.special names them)
    {{"_special_i1(Tensor input)"}, kFunction, unary<OpId::I1>},
    {{"_special_i0e(Tensor input)"}, kFunction, unary<OpId::I0e>},
    {{"_special_i1e(Tensor input)"}, kFunction, unary<OpId::I1e>},
    {{"_special_modified_bessel_i0(Tensor input)"}, kFunction, not_differentiable<OpId::I0>},
    {{"_special_modified_bessel_i1(Tensor input)"}, kFunction, not_differentiable<OpId::I1>},
    {{"_special_modified_bessel_k0(Tensor input)"}, kFunction, not_differentiable<OpId::K0>},
    {{"_special_modified_bessel_k1(Tensor input)"}, kFunction, not_differentiable<OpId::K1>},
    {{"_special_scaled_modified_bessel_k0(Tensor input)"}, kFunction, not_differentiable<OpId::K0e>},
    {{"_special_scaled_modified_bessel_k1(Tensor input)"}, kFunction, not_differentiable<OpId::K1e>},
    {{"_special_spherical_bessel_j0(Tensor input)"}, kFunction, spherical_bessel_j0},
    {{"_special_erfcx(Tensor input)"}, kFunction, unary<OpId::Erfcx>},
    {{"_special_zeta(Tensor input, Arg other)", "_special_zeta(Scalar self, Tensor other)"}, kFunction,
     [](const Parsed& p) -> Result {
       return p.index == 0 ? ops::binary(OpId::Zeta, p.arg(0), p.arg(1))
                           : ops::binary(OpId::Zeta, Arg(p.scalar(0)), Arg(p.tensor(1)));
     }},
    {{"asin(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Asin>}, {{"arcsin(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Asin>},
    {{"acos(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Acos>}, {{"arccos(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Acos>},
    {{"atan(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Atan>}, {{"arctan(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Atan>},
    {{"sinh(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Sinh>}, {{"cosh(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Cosh>},
    {{"asinh(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Asinh>}, {{"arcsinh(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Asinh>},
    {{"acosh(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Acosh>}, {{"arccosh(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Acosh>},
    {{"atanh(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Atanh>}, {{"arctanh(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Atanh>},
    {{"erfc(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Erfc>}, {{"erfinv(Tensor input)"}, kAll, unary<OpId::Erfinv>},
    {{"absolute(Tensor input)"}, kAll, unary<OpId::Abs>, "abs()"},
    {{"sgn(Tensor input)"}, kAll, unary<OpId::Sign>, "sign() (loom has no complex dtypes)"},
    {{"positive(Tensor input)"}, kBoth, LOOM_BODY((ops::positive(p.tensor(0)), Py_NewRef(p.object(0))))},
    {{"deg2rad(Tensor input)"}, kAll | kInplaceFunction, LOOM_BODY(ops::deg2rad(p.tensor(0)))},
    {{"rad2deg(Tensor input)"}, kAll | kInplaceFunction, LOOM_BODY(ops::rad2deg(p.tensor(0)))},
    {{"sinc(Tensor input)"}, kAll | kInplaceFunction, LOOM_BODY(ops::sinc(p.tensor(0)))},
    {{"logit(Tensor input, float? eps=None)"}, kAll | kInplaceFunction, LOOM_BODY(ops::logit(p.tensor(0), p.optional_real(1)))},
    {{"fmod(Tensor input, Arg other)"}, kAll, LOOM_BODY(ops::fmod(p.tensor(0), p.arg(1)))},
    {{"copysign(Tensor input, Arg other)"}, kAll, LOOM_BODY(ops::copysign(p.tensor(0), p.arg(1)))},
    {{"atan2(Tensor input, Tensor other)"}, kAll, LOOM_BODY(ops::atan2(p.tensor(0), p.tensor(1)))},
    {{"arctan2(Tensor input, Tensor other)"}, kAll, LOOM_BODY(ops::atan2(p.tensor(0), p.tensor(1)))},
    {{"hypot(Tensor input, Tensor other)"}, kAll, LOOM_BODY(ops::hypot(p.tensor(0), p.tensor(1)))},
    {{"logaddexp(Tensor input, Tensor other)"}, kBoth, LOOM_BODY(ops::logaddexp(p.tensor(0), p.tensor(1)))},
    {{"logaddexp2(Tensor input, Tensor other)"}, kBoth, LOOM_BODY(ops::logaddexp2(p.tensor(0), p.tensor(1)))},
    {{"xlogy(Tensor input, Arg other)", "xlogy(Scalar self, Tensor other)"}, kAll | kInplaceFunction, tensor_or_scalar_first<ops::xlogy>},
    {{"ldexp(Tensor input, Tensor other)"}, kAll | kInplaceFunction, LOOM_BODY(ops::ldexp(p.tensor(0), p.tensor(1)))},
    {{"float_power(Tensor input, Arg exponent)", "float_power(Scalar self, Tensor exponent)"}, kBoth,
     tensor_or_scalar_first<ops::float_power>},
    {{"float_power_(Tensor input, Arg exponent)"}, kMethod, float_power_,
     "In place: writes float_power()'s result into self, which must be float64."},
    {{"fmax(Tensor input, Tensor other)"}, kBoth, LOOM_BODY(ops::fmax(p.tensor(0), p.tensor(1)))},
    {{"fmin(Tensor input, Tensor other)"}, kBoth, LOOM_BODY(ops::fmin(p.tensor(0), p.tensor(1)))},
    {{"heaviside(Tensor input, Tensor values)"}, kAll, LOOM_BODY(ops::heaviside(p.tensor(0), p.tensor(1)))},
    {{"clamp_min(Tensor input, Arg min)"}, kAll | kInplaceFunction, LOOM_BODY(ops::clamp(p.tensor(0), p.arg(1), std::nullopt))},
    {{"clamp_max(Tensor input, Arg max)"}, kAll | kInplaceFunction, LOOM_BODY(ops::clamp(p.tensor(0), std::nullopt, p.arg(1)))},
    {{"bitwise_left_shift(Tensor input, Arg other)", "bitwise_left_shift(Scalar self, Tensor other)"}, kAll,
     tensor_or_scalar_first<ops::shift_left>},
    {{"bitwise_right_shift(Tensor input, Arg other)", "bitwise_right_shift(Scalar self, Tensor other)"}, kAll,
     tensor_or_scalar_first<ops::shift_right>},
    {{"isfinite(Tensor input)"}, kBoth, LOOM_BODY(ops::isfinite(p.tensor(0)))},
    {{"isposinf(Tensor input)"}, kBoth, LOOM_BODY(ops::isposinf(p.tensor(0)))},
    {{"isneginf(Tensor input)"}, kBoth, LOOM_BODY(ops::isneginf(p.tensor(0)))},
    {{"isreal(Tensor input)"}, kBoth, LOOM_BODY(ops::isreal(p.tensor(0)))},
    {{"signbit(Tensor input)"}, kBoth, LOOM_BODY(ops::signbit(p.tensor(0)))},
    {{"isclose(Tensor input, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False)"}, kBoth,
     LOOM_BODY(ops::isclose(p.tensor(0), p.tensor(1), p.real(2), p.real(3), p.boolean(4)))},
    {{"promote_types(ScalarType type1, ScalarType type2) -> ScalarType"}, kFunction,
     LOOM_BODY(Py_NewRef(dtype_object(promote_types(*p.optional_dtype(0), *p.optional_dtype(1))))),
     "The smallest dtype both convert to without losing their category (PyTorch's table)."},
    {{"allclose(Tensor input, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) -> bool"},
     kBoth, allclose, "A Python bool (a sync point in lazy mode)."},

    // ---- activations (loom.nn.functional's, and PyTorch's torch.celu, torch.threshold, ...) ----
    // Where PyTorch has them: torch.nn.functional's builtins (torch._C._nn) are functions only, with
    // in-place functions beside them (elu_, hardtanh_, ...: what F.<name>(inplace=True) calls).
    {{"relu_(Tensor input)"}, kFunction, in_place<relu>},
    {{"elu(Tensor input, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1)"}, kFunction, elu},
    {{"elu_(Tensor input, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1)"}, kFunction, in_place<elu>},
    {{"celu(Tensor input, Scalar alpha=1.0)"}, kFunction, celu},
    {{"celu_(Tensor input, Scalar alpha=1.0)"}, kFunction, in_place<celu>},
    {{"selu(Tensor input)"}, kFunction, selu},
    {{"selu_(Tensor input)"}, kFunction, in_place<selu>},
    {{"leaky_relu(Tensor input, Scalar negative_slope=0.01)"}, kFunction, leaky_relu},
    {{"leaky_relu_(Tensor input, Scalar negative_slope=0.01)"}, kFunction, in_place<leaky_relu>},
    {{"hardtanh(Tensor input, Scalar min_val=-1, Scalar max_val=1)"}, kFunction, hardtanh},
    {{"hardtanh_(Tensor input, Scalar min_val=-1, Scalar max_val=1)"}, kFunction, in_place<hardtanh>},
    {{"relu6(Tensor input)"}, kFunction, relu6},
    {{"relu6_(Tensor input)"}, kFunction, in_place<relu6>},
    {{"hardsigmoid(Tensor input)"}, kFunction, hardsigmoid},
    {{"hardsigmoid_(Tensor input)"}, kFunction, in_place<hardsigmoid>},
    {{"hardswish(Tensor input)"}, kFunction, hardswish},
    {{"hardswish_(Tensor input)"}, kFunction, in_place<hardswish>},
    {{"log_sigmoid(Tensor input)"}, kFunction, LOOM_BODY(ops::log_sigmoid(p.tensor(0)))},
    {{"mish(Tensor input)"}, kFunction, mish},
    {{"mish_(Tensor input)"}, kFunction, in_place<mish>},
    {{"hardshrink(Tensor input, Scalar lambd=0.5)"}, kBoth, LOOM_BODY(ops::hardshrink(p.tensor(0), p.scalar(1)))},
    {{"softshrink(Tensor input, Scalar lambd=0.5)"}, kFunction, LOOM_BODY(ops::softshrink(p.tensor(0), p.scalar(1)))},
    {{"threshold(Tensor input, Scalar threshold, Scalar value)"}, kFunction, threshold},
    {{"threshold_(Tensor input, Scalar threshold, Scalar value)"}, kFunction, in_place<threshold>},
    {{"prelu(Tensor input, Tensor weight)"}, kBoth, LOOM_BODY(ops::prelu(p.tensor(0), p.tensor(1)))},
    {{"rrelu(Tensor input, Scalar lower=0.125, Scalar upper=0.3333333333333333, bool training=False)"}, kFunction,
     rrelu, "In training, every negative element has its own slope, drawn from [lower, upper]."},
    {{"rrelu_(Tensor input, Scalar lower=0.125, Scalar upper=0.3333333333333333, bool training=False)"}, kFunction,
     in_place<rrelu>},
};

}  // namespace

void add_elementwise_rows(MethodDefs& defs) { add_rows(kRows, defs); }

}  // namespace loom::py
