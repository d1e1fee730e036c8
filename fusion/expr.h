// Kernel expressions: the SSA form of the computation inside one fused kernel, and `Sym`, the
// symbolic value type that builds it.
//
// The elementwise ops' expressions (lazy/elementwise.h) are templates over the value type.
// Instantiated with Sym<float> instead of float, they append instructions to the current
// ExprBuilder instead of computing, so the same text that is the CPU kernel of an op is also the
// generator of that op's part of a fused kernel. Math functions become Call instructions that
// each target renders from its table (fusion/targets.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <type_traits>

#include "lazy/math.h"
#include "runtime/dtype.h"

namespace loom::fusion {

enum class ExprOp : uint8_t {
  Literal,  // `literal`
  Param,    // scalar parameter `index` of the launch (a trace's Scalar leaf)
  Load,     // load site `index`
  Reduced,  // the result of reduction stage `index` (row kernels)
  Cast,     // a -> type
  Neg,
  Not,
  Add,
  Sub,
  Mul,
  Div,
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,
  And,
  Or,
  BitAnd,  // integers
  BitOr,
  BitXor,
  BitNot,
  Select,  // a ? b : c
  Call,    // math function `fn` of a (, b)
};

// Math functions a kernel may call. Targets render each for float and double (and integers
// where it applies); see fusion/targets.cpp.
enum class Fn : uint8_t {
  Exp, Exp2, Log, Log2, Log1p, Expm1, Sqrt, Sin, Cos, Tan, Tanh, Erf, Floor, Ceil, Round, Abs, Pow, Fmod,
  Copysign, IsNan, IsInf, Maximum, Minimum, IntPow, IntDiv, IntMod,
  Log10, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Erfc, Trunc, Atan2, Hypot, ShiftLeft, ShiftRight,
};

// Which loop an expression lives in: a pointwise kernel has one; a row kernel computes Outer
// expressions once per row and Inner ones for every element of the row.
enum class Space : uint8_t { Outer, Inner };

struct Expr {
  ExprOp op;
  DType type;  // the compute type: bool, uint8, int32, int64, float32 or float64
  Space space = Space::Outer;
  Fn fn = Fn::Exp;
  int32_t a = -1, b = -1, c = -1;
  int32_t index = -1;
  double literal = 0;

  friend bool operator==(const Expr&, const Expr&) = default;
};

// Builds the expressions of one kernel, merging identical ones (common subexpressions). An
// expression's operands come before it (SSA order), so walks over a kernel's expressions are loops
// in index order.
class ExprBuilder {
 public:
  int32_t add(Expr e);
  // Drops the expressions from `size` on (undoing what a failed attempt added).
  void truncate(size_t size);
  const std::vector<Expr>& exprs() const noexcept { return exprs_; }
  std::vector<Expr>& mutable_exprs() noexcept { return exprs_; }
  // The space an instruction built from these operands belongs to: Inner if any operand is.
  Space space_of(std::initializer_list<int32_t> operands) const;
  int32_t cast(int32_t e, DType to);

  // The builder that Sym operations append to (set by BuilderScope).
  static ExprBuilder& current();

 private:
  struct Hash {
    size_t operator()(const Expr& e) const noexcept;
  };
  std::vector<Expr> exprs_;
  std::unordered_map<Expr, int32_t, Hash> index_;
  friend class BuilderScope;
};

// Makes a builder current for Sym operations on this thread.
class BuilderScope {
 public:
  explicit BuilderScope(ExprBuilder& b);
  ~BuilderScope();
  BuilderScope(const BuilderScope&) = delete;
  BuilderScope& operator=(const BuilderScope&) = delete;

 private:
  ExprBuilder* previous_;
};

// Compute types: float16 / bfloat16 compute in float32.
DType compute_type(DType storage) noexcept;

// A symbolic value of compute type T (bool, uint8_t, int32_t, int64_t, float, double).
template <typename T>
struct Sym {
  int32_t id;

  Sym() : id(-1) {}
  explicit Sym(int32_t expr, int) : id(expr) {}
  // Literals: T(0.5), T(1).
  Sym(double v) : id(ExprBuilder::current().add(Expr{ExprOp::Literal, dtype_of<T>, Space::Outer, Fn::Exp, -1, -1, -1, -1, v})) {}
  Sym(int v) : Sym(static_cast<double>(v)) {}
  Sym(long v) : Sym(static_cast<double>(v)) {}
  Sym(long long v) : Sym(static_cast<double>(v)) {}
  // Conversions between symbolic types: T(x < 0).
  template <typename U>
  explicit Sym(Sym<U> other) : id(ExprBuilder::current().cast(other.id, dtype_of<T>)) {}
};

namespace detail {
inline int32_t emit(ExprOp op, DType type, std::initializer_list<int32_t> operands, Fn fn = Fn::Exp) {
  ExprBuilder& b = ExprBuilder::current();
  Expr e{op, type, b.space_of(operands), fn};
  auto it = operands.begin();
  if (operands.size() > 0) e.a = *it++;
  if (operands.size() > 1) e.b = *it++;
  if (operands.size() > 2) e.c = *it++;
  return b.add(e);
}
template <typename T>
Sym<T> call(Fn fn, Sym<T> a) {
  return Sym<T>(emit(ExprOp::Call, dtype_of<T>, {a.id}, fn), 0);
}
template <typename T>
Sym<T> call(Fn fn, Sym<T> a, Sym<T> b) {
  return Sym<T>(emit(ExprOp::Call, dtype_of<T>, {a.id, b.id}, fn), 0);
}
}  // namespace detail

#define LOOM_SYM_BINARY(op, kind)                                                        \
  template <typename T>                                                                  \
  Sym<T> operator op(Sym<T> a, Sym<T> b) {                                               \
    return Sym<T>(detail::emit(ExprOp::kind, dtype_of<T>, {a.id, b.id}), 0);             \
  }
LOOM_SYM_BINARY(+, Add)
LOOM_SYM_BINARY(-, Sub)
LOOM_SYM_BINARY(*, Mul)
LOOM_SYM_BINARY(/, Div)
#undef LOOM_SYM_BINARY

#define LOOM_SYM_COMPARE(op, kind)                                                       \
  template <typename T>                                                                  \
  Sym<bool> operator op(Sym<T> a, Sym<T> b) {                                            \
    return Sym<bool>(detail::emit(ExprOp::kind, DType::Bool, {a.id, b.id}), 0);          \
  }
LOOM_SYM_COMPARE(<, Lt)
LOOM_SYM_COMPARE(<=, Le)
LOOM_SYM_COMPARE(>, Gt)
LOOM_SYM_COMPARE(>=, Ge)
LOOM_SYM_COMPARE(==, Eq)
LOOM_SYM_COMPARE(!=, Ne)
#undef LOOM_SYM_COMPARE

template <typename T>
Sym<T> operator-(Sym<T> a) {
  return Sym<T>(detail::emit(ExprOp::Neg, dtype_of<T>, {a.id}), 0);
}
// Bitwise operators on integer values (bools use the logical ones).
#define LOOM_SYM_BITWISE(op, kind)                                                       \
  template <typename T>                                                                  \
    requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)                         \
  Sym<T> operator op(Sym<T> a, Sym<T> b) {                                               \
    return Sym<T>(detail::emit(ExprOp::kind, dtype_of<T>, {a.id, b.id}), 0);             \
  }
LOOM_SYM_BITWISE(&, BitAnd)
LOOM_SYM_BITWISE(|, BitOr)
LOOM_SYM_BITWISE(^, BitXor)
#undef LOOM_SYM_BITWISE
template <typename T>
  requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
Sym<T> operator~(Sym<T> a) {
  return Sym<T>(detail::emit(ExprOp::BitNot, dtype_of<T>, {a.id}), 0);
}

inline Sym<bool> operator!(Sym<bool> a) { return Sym<bool>(detail::emit(ExprOp::Not, DType::Bool, {a.id}), 0); }
inline Sym<bool> operator&&(Sym<bool> a, Sym<bool> b) {
  return Sym<bool>(detail::emit(ExprOp::And, DType::Bool, {a.id, b.id}), 0);
}
inline Sym<bool> operator||(Sym<bool> a, Sym<bool> b) {
  return Sym<bool>(detail::emit(ExprOp::Or, DType::Bool, {a.id, b.id}), 0);
}

// Math, found by argument-dependent lookup from the op templates, preferred over the plain-value
// templates of lazy/math.h because they are more specialized.
template <typename T> Sym<T> exp(Sym<T> x) { return detail::call(Fn::Exp, x); }
template <typename T> Sym<T> exp2(Sym<T> x) { return detail::call(Fn::Exp2, x); }
template <typename T> Sym<T> log(Sym<T> x) { return detail::call(Fn::Log, x); }
template <typename T> Sym<T> log2(Sym<T> x) { return detail::call(Fn::Log2, x); }
template <typename T> Sym<T> log1p(Sym<T> x) { return detail::call(Fn::Log1p, x); }
template <typename T> Sym<T> expm1(Sym<T> x) { return detail::call(Fn::Expm1, x); }
template <typename T> Sym<T> sqrt(Sym<T> x) { return detail::call(Fn::Sqrt, x); }
template <typename T> Sym<T> sin(Sym<T> x) { return detail::call(Fn::Sin, x); }
template <typename T> Sym<T> cos(Sym<T> x) { return detail::call(Fn::Cos, x); }
template <typename T> Sym<T> tan(Sym<T> x) { return detail::call(Fn::Tan, x); }
template <typename T> Sym<T> tanh(Sym<T> x) { return detail::call(Fn::Tanh, x); }
template <typename T> Sym<T> erf(Sym<T> x) { return detail::call(Fn::Erf, x); }
template <typename T> Sym<T> floor(Sym<T> x) { return detail::call(Fn::Floor, x); }
template <typename T> Sym<T> ceil(Sym<T> x) { return detail::call(Fn::Ceil, x); }
template <typename T> Sym<T> round(Sym<T> x) { return detail::call(Fn::Round, x); }
template <typename T> Sym<T> abs(Sym<T> x) { return detail::call(Fn::Abs, x); }
template <typename T> Sym<T> pow(Sym<T> x, Sym<T> y) { return detail::call(Fn::Pow, x, y); }
template <typename T> Sym<T> fmod(Sym<T> x, Sym<T> y) { return detail::call(Fn::Fmod, x, y); }
template <typename T> Sym<T> copysign(Sym<T> x, Sym<T> y) { return detail::call(Fn::Copysign, x, y); }
template <typename T> Sym<T> maximum(Sym<T> x, Sym<T> y) { return detail::call(Fn::Maximum, x, y); }
template <typename T> Sym<T> minimum(Sym<T> x, Sym<T> y) { return detail::call(Fn::Minimum, x, y); }
template <typename T> Sym<T> ipow(Sym<T> x, Sym<T> y) { return detail::call(Fn::IntPow, x, y); }
template <typename T> Sym<T> int_div(Sym<T> x, Sym<T> y) { return detail::call(Fn::IntDiv, x, y); }
template <typename T> Sym<T> int_mod(Sym<T> x, Sym<T> y) { return detail::call(Fn::IntMod, x, y); }
template <typename T> Sym<T> log10(Sym<T> x) { return detail::call(Fn::Log10, x); }
template <typename T> Sym<T> asin(Sym<T> x) { return detail::call(Fn::Asin, x); }
template <typename T> Sym<T> acos(Sym<T> x) { return detail::call(Fn::Acos, x); }
template <typename T> Sym<T> atan(Sym<T> x) { return detail::call(Fn::Atan, x); }
template <typename T> Sym<T> sinh(Sym<T> x) { return detail::call(Fn::Sinh, x); }
template <typename T> Sym<T> cosh(Sym<T> x) { return detail::call(Fn::Cosh, x); }
template <typename T> Sym<T> asinh(Sym<T> x) { return detail::call(Fn::Asinh, x); }
template <typename T> Sym<T> acosh(Sym<T> x) { return detail::call(Fn::Acosh, x); }
template <typename T> Sym<T> atanh(Sym<T> x) { return detail::call(Fn::Atanh, x); }
template <typename T> Sym<T> erfc(Sym<T> x) { return detail::call(Fn::Erfc, x); }
template <typename T> Sym<T> trunc(Sym<T> x) { return detail::call(Fn::Trunc, x); }
template <typename T> Sym<T> atan2(Sym<T> y, Sym<T> x) { return detail::call(Fn::Atan2, y, x); }
template <typename T> Sym<T> hypot(Sym<T> x, Sym<T> y) { return detail::call(Fn::Hypot, x, y); }
template <typename T> Sym<T> shift_left(Sym<T> x, Sym<T> y) { return detail::call(Fn::ShiftLeft, x, y); }
template <typename T> Sym<T> shift_right(Sym<T> x, Sym<T> y) { return detail::call(Fn::ShiftRight, x, y); }
template <typename T> Sym<bool> isnan(Sym<T> x) {
  if constexpr (std::is_integral_v<T>) return Sym<bool>(0.0);
  else return Sym<bool>(detail::emit(ExprOp::Call, DType::Bool, {x.id}, Fn::IsNan), 0);
}
template <typename T> Sym<bool> isinf(Sym<T> x) {
  if constexpr (std::is_integral_v<T>) return Sym<bool>(0.0);
  else return Sym<bool>(detail::emit(ExprOp::Call, DType::Bool, {x.id}, Fn::IsInf), 0);
}
template <typename T> Sym<T> select(Sym<bool> c, Sym<T> a, Sym<T> b) {
  return Sym<T>(detail::emit(ExprOp::Select, dtype_of<T>, {c.id, a.id, b.id}), 0);
}

}  // namespace loom::fusion

namespace loom::math {
template <typename T>
struct number_type<fusion::Sym<T>> {
  using type = T;
};
template <typename T, typename U>
struct rebind<fusion::Sym<T>, U> {
  using type = fusion::Sym<U>;
};
}  // namespace loom::math
