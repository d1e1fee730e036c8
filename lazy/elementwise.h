// The elementwise ops: for each, its dtype rule and its kernel expression, written once.
//
// `f` is a template over the value type so the same text is the CPU kernel (T = float, double,
// an integer type) and, in fusion, the generator of fused kernel source (T = a symbolic value).
// It computes in the op's compute type: the promoted dtype, with float16 / bfloat16 computed as
// float32. Python-scalar arguments (softplus's beta, nan_to_num's replacements) are operands like
// any other, so a changing value never changes a trace.
#pragma once

#include "lazy/math.h"
#include "lazy/op.h"
#include "lazy/special_math.h"

namespace loom {

enum class DTypeRule : uint8_t {
  Promote,       // result: the promoted dtype of the inputs (add, maximum, neg)
  PromoteFloat,  // like Promote, but integers and bool become the default float (exp, div)
  Float,         // like Promote, for floating tensors only: integers and bool raise (gelu, silu)
  Integral,      // like Promote, for integer and bool operands only: floats raise (bitwise_and)
  Compare,       // computed in the promoted dtype, result bool (eq, isnan)
  Logical,       // inputs read as bool, result bool (logical_and)
  Select,        // where(cond, a, b): cond bool, the rest promoted; result promoted
};

// The dtype an elementwise op computes in, from its inputs (weak scalars, PyTorch's rules):
// integers become the default float for PromoteFloat ops, everything is bool for logical ops,
// and `where`'s condition does not take part. Computation itself happens in compute_type() of
// this (float32 for float16 / bfloat16).
template <typename F>
DType promoted_dtype(std::span<const InputMeta> in) {
  if (F::rule == DTypeRule::Logical) return DType::Bool;
  size_t first = F::rule == DTypeRule::Select ? 1 : 0;
  // Tensors of one dtype and no numbers (most ops of a program) promote to that dtype.
  bool uniform = first < in.size();
  for (size_t i = first; i < in.size() && uniform; ++i)
    uniform = !in[i].is_scalar && in[i].dtype == in[first].dtype;
  if (uniform) {
    DType p = in[first].dtype;
    return F::rule == DTypeRule::PromoteFloat && !is_floating(p) ? default_float_dtype() : p;
  }
  ResultType r;
  for (size_t i = first; i < in.size(); ++i) {
    if (in[i].is_scalar) r.add_scalar(in[i].kind);
    else r.add_tensor(in[i].dtype, static_cast<int64_t>(in[i].shape.size()));
  }
  DType p = r.get();
  if (F::rule == DTypeRule::PromoteFloat && !is_floating(p)) p = default_float_dtype();
  return p;
}

// Whether op F has a kernel for inputs stored as S: floating types only for PromoteFloat and
// Float ops, integers and bool only for Integral ones, bool only for logical ops, no bool where
// the op rejects it.
template <typename F, typename S>
constexpr bool supports() {
  if constexpr (F::rule == DTypeRule::Logical) return std::is_same_v<S, bool>;
  else if constexpr (F::rule == DTypeRule::PromoteFloat || F::rule == DTypeRule::Float) return !std::is_integral_v<S>;
  else if constexpr (F::rule == DTypeRule::Integral) return std::is_integral_v<S> && (F::allow_bool || !std::is_same_v<S, bool>);
  else if constexpr (!F::allow_bool) return !std::is_same_v<S, bool>;
  else return true;
}

// Calls fn(F{}) with the op struct of an elementwise OpId (not Cast); false if op is not one.
template <typename Fn>
bool visit_elementwise(OpId op, Fn&& fn);

namespace ew {

using namespace loom::math;

template <typename T> constexpr T one() { return T(1); }

#define LOOM_EW(Name, Rule, Arity, AllowBool) \
  static constexpr OpId id = OpId::Name;      \
  static constexpr DTypeRule rule = DTypeRule::Rule; \
  static constexpr int arity = Arity;         \
  static constexpr bool allow_bool = AllowBool;

struct Neg { LOOM_EW(Neg, Promote, 1, false) template <typename T> static T f(T x) { return -x; } };
struct Abs { LOOM_EW(Abs, Promote, 1, false) template <typename T> static T f(T x) { return abs(x); } };
struct Exp { LOOM_EW(Exp, PromoteFloat, 1, true) template <typename T> static T f(T x) { return exp(x); } };
struct Exp2 { LOOM_EW(Exp2, PromoteFloat, 1, true) template <typename T> static T f(T x) { return exp2(x); } };
struct Log { LOOM_EW(Log, PromoteFloat, 1, true) template <typename T> static T f(T x) { return log(x); } };
struct Log2 { LOOM_EW(Log2, PromoteFloat, 1, true) template <typename T> static T f(T x) { return log2(x); } };
struct Log1p { LOOM_EW(Log1p, PromoteFloat, 1, true) template <typename T> static T f(T x) { return log1p(x); } };
struct Expm1 { LOOM_EW(Expm1, PromoteFloat, 1, true) template <typename T> static T f(T x) { return expm1(x); } };
struct Sqrt { LOOM_EW(Sqrt, PromoteFloat, 1, true) template <typename T> static T f(T x) { return sqrt(x); } };
struct Rsqrt { LOOM_EW(Rsqrt, PromoteFloat, 1, true) template <typename T> static T f(T x) { return one<T>() / sqrt(x); } };
struct Sin { LOOM_EW(Sin, PromoteFloat, 1, true) template <typename T> static T f(T x) { return sin(x); } };
struct Cos { LOOM_EW(Cos, PromoteFloat, 1, true) template <typename T> static T f(T x) { return cos(x); } };
struct Tan { LOOM_EW(Tan, PromoteFloat, 1, true) template <typename T> static T f(T x) { return tan(x); } };
struct Tanh { LOOM_EW(Tanh, PromoteFloat, 1, true) template <typename T> static T f(T x) { return tanh(x); } };
struct Sigmoid {
  LOOM_EW(Sigmoid, PromoteFloat, 1, true)
  template <typename T> static T f(T x) { return one<T>() / (one<T>() + exp(-x)); }
};
struct Relu {
  LOOM_EW(Relu, Promote, 1, false)
  // max(x, 0) that keeps NaN, as torch.relu.
  template <typename T> static T f(T x) { return select(x < T(0), T(0), x); }
};
struct Gelu {
  LOOM_EW(Gelu, Float, 1, false)
  template <typename T> static T f(T x) { return T(0.5) * x * (one<T>() + erf(x * T(0.7071067811865476))); }
};
struct GeluTanh {
  LOOM_EW(GeluTanh, Float, 1, false)
  template <typename T>
  static T f(T x) {
    return T(0.5) * x * (one<T>() + tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)));
  }
};
struct Silu { LOOM_EW(Silu, Float, 1, false) template <typename T> static T f(T x) { return x / (one<T>() + exp(-x)); } };
// softplus(x, beta, threshold) = log1p(exp(beta x)) / beta, linear above the threshold.
struct Softplus {
  LOOM_EW(Softplus, Float, 3, false)
  template <typename T>
  static T f(T x, T beta, T threshold) {
    return select(x * beta > threshold, x, log1p(exp(x * beta)) / beta);
  }
};
struct Erf { LOOM_EW(Erf, PromoteFloat, 1, true) template <typename T> static T f(T x) { return erf(x); } };
struct Floor {
  LOOM_EW(Floor, Promote, 1, false)
  template <typename T> static T f(T x) {
    if constexpr (is_int<T>) return x;
    else return floor(x);
  }
};
struct Ceil {
  LOOM_EW(Ceil, Promote, 1, false)
  template <typename T> static T f(T x) {
    if constexpr (is_int<T>) return x;
    else return ceil(x);
  }
};
struct Round {
  LOOM_EW(Round, Promote, 1, false)
  template <typename T> static T f(T x) {
    if constexpr (is_int<T>) return x;
    else return round(x);
  }
};
struct Sign {
  LOOM_EW(Sign, Promote, 1, true)
  template <typename T> static T f(T x) { return T(T(0) < x) - T(x < T(0)); }
};
struct Reciprocal { LOOM_EW(Reciprocal, PromoteFloat, 1, true) template <typename T> static T f(T x) { return one<T>() / x; } };
struct Square { LOOM_EW(Square, Promote, 1, false) template <typename T> static T f(T x) { return x * x; } };
struct BitwiseNot { LOOM_EW(BitwiseNot, Integral, 1, true) template <typename T> static T f(T x) { return bit_not(x); } };
struct LogicalNot { LOOM_EW(LogicalNot, Logical, 1, true) template <typename B> static B f(B x) { return !x; } };
struct IsNan { LOOM_EW(IsNan, Compare, 1, true) template <typename T> static auto f(T x) { return isnan(x); } };
struct IsInf { LOOM_EW(IsInf, Compare, 1, true) template <typename T> static auto f(T x) { return isinf(x); } };
// nan_to_num(x, nan, posinf, neginf).
struct NanToNum {
  LOOM_EW(NanToNum, Promote, 4, true)
  template <typename T>
  static T f(T x, T nan, T posinf, T neginf) {
    if constexpr (is_int<T>) return x;
    else return select(isnan(x), nan, select(isinf(x), select(x > T(0), posinf, neginf), x));
  }
};

struct Add { LOOM_EW(Add, Promote, 2, true) template <typename T> static T f(T a, T b) { return a + b; } };
struct Sub { LOOM_EW(Sub, Promote, 2, false) template <typename T> static T f(T a, T b) { return a - b; } };
struct Mul {
  LOOM_EW(Mul, Promote, 2, true)
  template <typename T> static T f(T a, T b) {
    if constexpr (std::is_same_v<T, bool>) return a && b;
    else return a * b;
  }
};
struct Div { LOOM_EW(Div, PromoteFloat, 2, true) template <typename T> static T f(T a, T b) { return a / b; } };
// Python's floor division: rounds toward negative infinity. For floats, computed as PyTorch
// does (through fmod) so that results match to the last bit.
struct FloorDiv {
  LOOM_EW(FloorDiv, Promote, 2, false)
  template <typename T>
  static T f(T a, T b) {
    if constexpr (is_int<T>) {
      T q = int_div(a, b);
      return select((int_mod(a, b) != T(0)) && ((a < T(0)) != (b < T(0))), T(q - T(1)), q);
    } else {
      T mod = fmod(a, b);
      T div = (a - mod) / b;
      div = select((mod != T(0)) && ((b < T(0)) != (mod < T(0))), div - T(1), div);
      T fl = floor(div);
      fl = select(div - fl > T(0.5), fl + T(1), fl);
      T result = select(div != T(0), fl, copysign(T(0), a / b));
      return select(b == T(0), a / b, result);  // IEEE results for a zero divisor
    }
  }
};
// Python's remainder: the result has the sign of the divisor.
struct Remainder {
  LOOM_EW(Remainder, Promote, 2, false)
  template <typename T>
  static T f(T a, T b) {
    if constexpr (is_int<T>) {
      T r = int_mod(a, b);
      return select((r != T(0)) && ((r < T(0)) != (b < T(0))), T(r + b), r);
    } else {
      T r = fmod(a, b);
      return select((r != T(0)) && ((r < T(0)) != (b < T(0))), r + b, r);
    }
  }
};
struct Pow {
  LOOM_EW(Pow, Promote, 2, false)
  template <typename T>
  static T f(T a, T b) {
    if constexpr (is_int<T>) return ipow(a, b);
    else return pow(a, b);
  }
};
struct Maximum { LOOM_EW(Maximum, Promote, 2, true) template <typename T> static T f(T a, T b) { return maximum(a, b); } };
struct Minimum { LOOM_EW(Minimum, Promote, 2, true) template <typename T> static T f(T a, T b) { return minimum(a, b); } };
struct Eq { LOOM_EW(Eq, Compare, 2, true) template <typename T> static auto f(T a, T b) { return a == b; } };
struct Ne { LOOM_EW(Ne, Compare, 2, true) template <typename T> static auto f(T a, T b) { return a != b; } };
struct Lt { LOOM_EW(Lt, Compare, 2, true) template <typename T> static auto f(T a, T b) { return a < b; } };
struct Le { LOOM_EW(Le, Compare, 2, true) template <typename T> static auto f(T a, T b) { return a <= b; } };
struct Gt { LOOM_EW(Gt, Compare, 2, true) template <typename T> static auto f(T a, T b) { return a > b; } };
struct Ge { LOOM_EW(Ge, Compare, 2, true) template <typename T> static auto f(T a, T b) { return a >= b; } };
struct LogicalAnd { LOOM_EW(LogicalAnd, Logical, 2, true) template <typename B> static B f(B a, B b) { return a && b; } };
struct LogicalOr { LOOM_EW(LogicalOr, Logical, 2, true) template <typename B> static B f(B a, B b) { return a || b; } };
struct BitwiseAnd { LOOM_EW(BitwiseAnd, Integral, 2, true) template <typename T> static T f(T a, T b) { return bit_and(a, b); } };
struct BitwiseOr { LOOM_EW(BitwiseOr, Integral, 2, true) template <typename T> static T f(T a, T b) { return bit_or(a, b); } };
struct BitwiseXor { LOOM_EW(BitwiseXor, Integral, 2, true) template <typename T> static T f(T a, T b) { return bit_xor(a, b); } };

struct Where {
  LOOM_EW(Where, Select, 3, true)
  template <typename T, typename B> static T f(B c, T a, T b) { return select(c, a, b); }
};

// ---- more math (issue 13): each a function of the C library, or (erfinv) one written here ----

struct Log10 { LOOM_EW(Log10, PromoteFloat, 1, true) template <typename T> static T f(T x) { return log10(x); } };
struct Asin { LOOM_EW(Asin, PromoteFloat, 1, true) template <typename T> static T f(T x) { return asin(x); } };
struct Acos { LOOM_EW(Acos, PromoteFloat, 1, true) template <typename T> static T f(T x) { return acos(x); } };
struct Atan { LOOM_EW(Atan, PromoteFloat, 1, true) template <typename T> static T f(T x) { return atan(x); } };
struct Sinh { LOOM_EW(Sinh, PromoteFloat, 1, true) template <typename T> static T f(T x) { return sinh(x); } };
struct Cosh { LOOM_EW(Cosh, PromoteFloat, 1, true) template <typename T> static T f(T x) { return cosh(x); } };
struct Asinh { LOOM_EW(Asinh, PromoteFloat, 1, true) template <typename T> static T f(T x) { return asinh(x); } };
struct Acosh { LOOM_EW(Acosh, PromoteFloat, 1, true) template <typename T> static T f(T x) { return acosh(x); } };
struct Atanh { LOOM_EW(Atanh, PromoteFloat, 1, true) template <typename T> static T f(T x) { return atanh(x); } };
struct Erfc { LOOM_EW(Erfc, PromoteFloat, 1, true) template <typename T> static T f(T x) { return erfc(x); } };
// The inverse of erf, which the C library lacks, computed in double whatever the dtype: M.
// Giles' approximation ("Approximating the erfinv function", GPU Computing Gems, 2011; both of its
// branches computed and one selected) refined by four Newton steps, on erf(x) = |y| for |y| < 0.9
// and on log(erfc(x)) = log(1 - |y|) above, where erf loses the digits that tell x apart (PyTorch's
// float64 erfinv is off by 1e-4 there). Written in the kernel expressions' own operations, it
// fuses like any other op. erfinv(+-1) = +-inf; |y| > 1 gives nan.
struct Erfinv {
  LOOM_EW(Erfinv, PromoteFloat, 1, true)
  template <typename T>
  static T f(T y0) {
    using D = typename rebind<T, double>::type;
    D y(y0);
    D a = abs(y);
    D w = -log((D(1) - a) * (D(1) + a));
    D c = w - D(2.5);
    D central = D(2.81022636e-08);
    for (double k : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
                     0.246640727, 1.50140941})
      central = D(k) + central * c;
    D t = sqrt(w) - D(3);
    D tail = D(-0.000200214257);
    for (double k : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                     1.00167406, 2.83297682})
      tail = D(k) + tail * t;
    D x = select(w < D(5), central, tail) * a;
    D log_rest = log(D(1) - a);
    for (int step = 0; step < 4; ++step) {
      D slope = D(1.1283791670955126) * exp(-(x * x));  // erf'(x)
      D e = erfc(x);
      x = x - select(a < D(0.9), (erf(x) - a) / slope, (log_rest - log(e)) * e / slope);
    }
    return T(copysign(select(a == D(1), D(INFINITY), x), y));
  }
};
struct Trunc {
  LOOM_EW(Trunc, Promote, 1, false)
  template <typename T> static T f(T x) {
    if constexpr (is_int<T>) return x;
    else return trunc(x);
  }
};
struct Atan2 { LOOM_EW(Atan2, PromoteFloat, 2, true) template <typename T> static T f(T a, T b) { return atan2(a, b); } };
// Floating operands only: integer hypot raises in ops::hypot, as in PyTorch.
struct Hypot { LOOM_EW(Hypot, PromoteFloat, 2, true) template <typename T> static T f(T a, T b) { return hypot(a, b); } };
struct Copysign { LOOM_EW(Copysign, PromoteFloat, 2, true) template <typename T> static T f(T a, T b) { return copysign(a, b); } };
// x * log(y), 0 where x is 0 unless y is nan (PyTorch's definition). A primitive, not a composite
// of log, mul and where, for PyTorch's gradient: log(y) for x also where x is 0 (but where y <= 0),
// which a where() selecting 0 there would not pass.
struct Xlogy {
  LOOM_EW(Xlogy, PromoteFloat, 2, true)
  template <typename T>
  static T f(T x, T y) { return select(isnan(y), y, select(x == T(0), T(0), x * log(y))); }
};
// C's fmod on floats; integers take ops::fmod's composite over Remainder, which raises for a zero
// divisor as PyTorch does (a generated kernel cannot).
struct Fmod { LOOM_EW(Fmod, PromoteFloat, 2, true) template <typename T> static T f(T a, T b) { return fmod(a, b); } };
// Shifts, named as PyTorch's kernels are (lshift, rshift) so that dtype errors read alike.
struct Lshift {
  LOOM_EW(Lshift, Integral, 2, false)
  template <typename T> static T f(T a, T b) { return shift_left(a, b); }
};
struct Rshift {
  LOOM_EW(Rshift, Integral, 2, false)
  template <typename T> static T f(T a, T b) { return shift_right(a, b); }
};

// ---- special functions (torch.special's Bessel functions, erfcx, zeta): lazy/special_math.h
// has the algorithms. Each computes in double whatever the dtype (as Erfinv), so float32 results
// are the double values rounded once.

template <typename T, typename Fn>
T in_double(T x, Fn fn) {
  using D = typename rebind<T, double>::type;
  return T(fn(D(x)));
}
// I0, I1 (torch.i0, special.i1) and exp(-|x|) I0(x), exp(-|x|) I1(x) (special.i0e, i1e). The
// unscaled ones are the scaled times exp(|x|), which overflows (in double) from |x| = 709.78 as
// PyTorch's and scipy's (Cephes) do, a little before I itself would; NaN at +-inf, as theirs.
struct I0 {
  LOOM_EW(I0, PromoteFloat, 1, true)
  template <typename T>
  static T f(T x) {
    return in_double(x, [](auto d) { return special::i0e(d) * exp(abs(d)); });
  }
};
struct I1 {
  LOOM_EW(I1, PromoteFloat, 1, true)
  template <typename T>
  static T f(T x) {
    return in_double(x, [](auto d) { return special::i1e(d) * exp(abs(d)); });
  }
};
struct I0e {
  LOOM_EW(I0e, PromoteFloat, 1, true)
  template <typename T> static T f(T x) { return in_double(x, [](auto d) { return special::i0e(d); }); }
};
struct I1e {
  LOOM_EW(I1e, PromoteFloat, 1, true)
  template <typename T> static T f(T x) { return in_double(x, [](auto d) { return special::i1e(d); }); }
};
// K0, K1 (special.modified_bessel_k0 / k1) and exp(x) K0(x), exp(x) K1(x)
// (special.scaled_modified_bessel_k0 / k1).
struct K0 {
  LOOM_EW(K0, PromoteFloat, 1, true)
  template <typename T> static T f(T x) { return in_double(x, [](auto d) { return special::k0e(d) * exp(-d); }); }
};
struct K1 {
  LOOM_EW(K1, PromoteFloat, 1, true)
  template <typename T> static T f(T x) { return in_double(x, [](auto d) { return special::k1e(d) * exp(-d); }); }
};
struct K0e {
  LOOM_EW(K0e, PromoteFloat, 1, true)
  template <typename T> static T f(T x) { return in_double(x, [](auto d) { return special::k0e(d); }); }
};
struct K1e {
  LOOM_EW(K1e, PromoteFloat, 1, true)
  template <typename T> static T f(T x) { return in_double(x, [](auto d) { return special::k1e(d); }); }
};
struct Erfcx {
  LOOM_EW(Erfcx, PromoteFloat, 1, true)
  template <typename T> static T f(T x) { return in_double(x, [](auto d) { return special::erfcx(d); }); }
};
// The Hurwitz zeta function zeta(s, q) (special.zeta; polygamma is built on it).
struct Zeta {
  LOOM_EW(Zeta, PromoteFloat, 2, true)
  template <typename T>
  static T f(T s, T q) {
    using D = typename rebind<T, double>::type;
    return T(special::zeta(D(s), D(q)));
  }
};

// ---- activations (issue 13): PyTorch's formulas; Python-number parameters are operands ----

// elu(x) = scale * (x > 0 ? x : alpha * (exp(input_scale * x) - 1)); selu and celu are elus.
struct Elu {
  LOOM_EW(Elu, Float, 4, false)
  template <typename T>
  static T f(T x, T alpha, T scale, T input_scale) {
    return select(x > T(0), x * scale, expm1(x * input_scale) * (alpha * scale));
  }
};
// celu(x, alpha) = elu(x, alpha, 1, 1 / alpha): its own op for its own grad_fn (CeluBackward0).
struct Celu {
  LOOM_EW(Celu, Float, 4, false)
  template <typename T>
  static T f(T x, T alpha, T scale, T input_scale) { return Elu::f(x, alpha, scale, input_scale); }
};
struct LeakyRelu {
  LOOM_EW(LeakyRelu, Float, 2, false)
  template <typename T> static T f(T x, T slope) { return select(x > T(0), x, x * slope); }
};
// clamp(x, min_val, max_val), NaN kept (integer hardtanh is ops::clamp).
struct Hardtanh {
  LOOM_EW(Hardtanh, Float, 3, false)
  template <typename T> static T f(T x, T lo, T hi) { return minimum(maximum(x, lo), hi); }
};
struct Hardsigmoid {
  LOOM_EW(Hardsigmoid, Float, 1, false)
  template <typename T> static T f(T x) { return minimum(maximum(x + T(3), T(0)), T(6)) / T(6); }
};
struct Hardswish {
  LOOM_EW(Hardswish, Float, 1, false)
  template <typename T> static T f(T x) { return x * minimum(maximum(x + T(3), T(0)), T(6)) / T(6); }
};
// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), which neither overflows nor loses small values.
struct LogSigmoid {
  LOOM_EW(LogSigmoid, Float, 1, false)
  template <typename T> static T f(T x) { return minimum(x, T(0)) - log1p(exp(-abs(x))); }
};
struct Mish {
  LOOM_EW(Mish, Float, 1, false)
  template <typename T> static T f(T x) { return x * tanh(log1p(exp(x))); }
};
struct Hardshrink {
  LOOM_EW(Hardshrink, Float, 2, false)
  template <typename T> static T f(T x, T lambd) { return select(x >= -lambd && x <= lambd, T(0), x); }
};
struct Softshrink {
  LOOM_EW(Softshrink, Float, 2, false)
  template <typename T>
  static T f(T x, T lambd) { return select(x > lambd, x - lambd, select(x < -lambd, x + lambd, T(0))); }
};
// threshold(x, threshold, value): value where x <= threshold. Integer tensors too (ops::threshold
// converts the numbers to their dtype first, so they do not promote it).
struct Threshold {
  LOOM_EW(Threshold, Promote, 3, false)
  template <typename T> static T f(T x, T threshold, T value) { return select(x <= threshold, value, x); }
};

// ---- the optimizers' updates (lazy/optimizer_steps.cpp) ----
//
// Each is what PyTorch 1.13's single-tensor optimizers write as two to five ops, with the same
// operations in the same order and in the same compute type, so its results are the same bits:
// an optimizer step then records three or four nodes per parameter instead of a dozen (the
// record cost of a small model's step), and they fuse like any elementwise op. Their numbers
// are operands, trace parameters. Not differentiable: optimizer updates run under no_grad.
//
// a + b * s: the L2-decayed gradient (grad.add(param, alpha=weight_decay)), param.add_(d_p,
// alpha=-lr), nesterov's d_p.add(buf, alpha=momentum).
struct AddScaled {
  LOOM_EW(AddScaled, Float, 3, false)
  template <typename T> static T f(T a, T b, T s) { return a + (b * s); }
};
// state.mul_(decay).add_(x, alpha=weight): a moving average (Adam's exp_avg, SGD's momentum buffer).
struct EmaUpdate {
  LOOM_EW(EmaUpdate, Float, 4, false)
  template <typename T> static T f(T state, T x, T decay, T weight) { return (state * decay) + (x * weight); }
};
// state.mul_(decay).addcmul_(x, x, value=weight): the moving average of the square, as
// PyTorch's addcmul computes it ((x * weight) * x).
struct EmaSquareUpdate {
  LOOM_EW(EmaSquareUpdate, Float, 4, false)
  template <typename T> static T f(T state, T x, T decay, T weight) { return (state * decay) + ((x * weight) * x); }
};
// param.addcdiv_(num, den, value=s): a step along num / den.
struct StepAlong {
  LOOM_EW(StepAlong, Float, 4, false)
  template <typename T> static T f(T p, T num, T den, T s) { return p + ((num * s) / den); }
};
// Adam's parameter update: param.mul_(keep) (AdamW's decay; keep is 1 otherwise, and p * 1 is p
// to the bit), then param.addcdiv_(exp_avg, (second.sqrt() / bias_correction2_sqrt).add_(eps),
// value=s), s = -lr / bias_correction1.
struct AdamUpdate {
  LOOM_EW(AdamUpdate, Float, 7, false)
  template <typename T>
  static T f(T p, T exp_avg, T second, T keep, T s, T bias_correction2_sqrt, T eps) {
    return (p * keep) + ((exp_avg * s) / ((sqrt(second) / bias_correction2_sqrt) + eps));
  }
};

#undef LOOM_EW

}  // namespace ew

template <typename Fn>
bool visit_elementwise(OpId op, Fn&& fn) {
  using namespace ew;
  switch (op) {
#define LOOM_EW_CASE(Name) \
  case OpId::Name: fn(Name{}); return true;
    LOOM_EW_CASE(Neg) LOOM_EW_CASE(Abs) LOOM_EW_CASE(Exp) LOOM_EW_CASE(Exp2) LOOM_EW_CASE(Log) LOOM_EW_CASE(Log2)
    LOOM_EW_CASE(Log1p) LOOM_EW_CASE(Expm1) LOOM_EW_CASE(Sqrt) LOOM_EW_CASE(Rsqrt) LOOM_EW_CASE(Sin) LOOM_EW_CASE(Cos)
    LOOM_EW_CASE(Tan) LOOM_EW_CASE(Tanh) LOOM_EW_CASE(Sigmoid) LOOM_EW_CASE(Relu) LOOM_EW_CASE(Gelu)
    LOOM_EW_CASE(GeluTanh) LOOM_EW_CASE(Silu) LOOM_EW_CASE(Softplus) LOOM_EW_CASE(Erf) LOOM_EW_CASE(Floor)
    LOOM_EW_CASE(Ceil) LOOM_EW_CASE(Round) LOOM_EW_CASE(Sign) LOOM_EW_CASE(Reciprocal) LOOM_EW_CASE(Square)
    LOOM_EW_CASE(BitwiseNot) LOOM_EW_CASE(LogicalNot) LOOM_EW_CASE(IsNan) LOOM_EW_CASE(IsInf) LOOM_EW_CASE(NanToNum) LOOM_EW_CASE(Add)
    LOOM_EW_CASE(Sub) LOOM_EW_CASE(Mul) LOOM_EW_CASE(Div) LOOM_EW_CASE(FloorDiv) LOOM_EW_CASE(Remainder)
    LOOM_EW_CASE(Pow) LOOM_EW_CASE(Maximum) LOOM_EW_CASE(Minimum) LOOM_EW_CASE(Eq) LOOM_EW_CASE(Ne) LOOM_EW_CASE(Lt)
    LOOM_EW_CASE(Le) LOOM_EW_CASE(Gt) LOOM_EW_CASE(Ge) LOOM_EW_CASE(LogicalAnd) LOOM_EW_CASE(LogicalOr)
    LOOM_EW_CASE(BitwiseAnd) LOOM_EW_CASE(BitwiseOr) LOOM_EW_CASE(BitwiseXor)
    LOOM_EW_CASE(Where)
    LOOM_EW_CASE(Log10) LOOM_EW_CASE(Asin) LOOM_EW_CASE(Acos) LOOM_EW_CASE(Atan) LOOM_EW_CASE(Sinh) LOOM_EW_CASE(Cosh)
    LOOM_EW_CASE(Asinh) LOOM_EW_CASE(Acosh) LOOM_EW_CASE(Atanh) LOOM_EW_CASE(Erfc) LOOM_EW_CASE(Erfinv)
    LOOM_EW_CASE(Trunc) LOOM_EW_CASE(Atan2) LOOM_EW_CASE(Hypot) LOOM_EW_CASE(Copysign) LOOM_EW_CASE(Xlogy) LOOM_EW_CASE(Fmod)
    LOOM_EW_CASE(Lshift) LOOM_EW_CASE(Rshift) LOOM_EW_CASE(Elu) LOOM_EW_CASE(Celu) LOOM_EW_CASE(LeakyRelu)
    LOOM_EW_CASE(Hardtanh) LOOM_EW_CASE(Hardsigmoid) LOOM_EW_CASE(Hardswish) LOOM_EW_CASE(LogSigmoid)
    LOOM_EW_CASE(I0) LOOM_EW_CASE(I1) LOOM_EW_CASE(K0) LOOM_EW_CASE(K1) LOOM_EW_CASE(I0e) LOOM_EW_CASE(I1e) LOOM_EW_CASE(K0e) LOOM_EW_CASE(K1e) LOOM_EW_CASE(Erfcx) LOOM_EW_CASE(Zeta)
    LOOM_EW_CASE(Mish) LOOM_EW_CASE(Hardshrink) LOOM_EW_CASE(Softshrink) LOOM_EW_CASE(Threshold)
    LOOM_EW_CASE(AddScaled) LOOM_EW_CASE(EmaUpdate) LOOM_EW_CASE(EmaSquareUpdate) LOOM_EW_CASE(StepAlong)
    LOOM_EW_CASE(AdamUpdate)
#undef LOOM_EW_CASE
    default: return false;
  }
}
}  // namespace loom
