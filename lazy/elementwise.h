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
  ResultType r;
  size_t first = F::rule == DTypeRule::Select ? 1 : 0;
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
  else if constexpr (F::rule == DTypeRule::Integral) return std::is_integral_v<S>;
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
#undef LOOM_EW_CASE
    default: return false;
  }
}
}  // namespace loom
