// Scalar math used by the kernel expressions of elementwise ops (lazy/elementwise.h).
//
// The expressions are templates over a value type: instantiated with float, double or an integer
// type they are the CPU kernels; instantiated with fusion's symbolic values they generate the
// source of fused kernels. These overloads are the plain-value half, with PyTorch's semantics
// (NaN-propagating maximum, round-half-to-even, Python's floor division and remainder).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace loom::math {

// The number type behind a value type: T itself for plain values; fusion's symbolic values
// specialize this so `is_int` answers for the type they stand for.
template <typename T>
struct number_type {
  using type = T;
};
template <typename T>
inline constexpr bool is_int = std::is_integral_v<typename number_type<T>::type>;
// The value type like T that stands for a U: U itself for plain values (fusion's symbolic values
// specialize it), so an expression can compute a step in double whatever T is.
template <typename T, typename U>
struct rebind {
  using type = U;
};

template <typename T> T exp(T x) { return std::exp(x); }
template <typename T> T exp2(T x) { return std::exp2(x); }
template <typename T> T log(T x) { return std::log(x); }
template <typename T> T log2(T x) { return std::log2(x); }
template <typename T> T log1p(T x) { return std::log1p(x); }
template <typename T> T expm1(T x) { return std::expm1(x); }
template <typename T> T sqrt(T x) { return std::sqrt(x); }
template <typename T> T sin(T x) { return std::sin(x); }
template <typename T> T cos(T x) { return std::cos(x); }
template <typename T> T tan(T x) { return std::tan(x); }
template <typename T> T tanh(T x) { return std::tanh(x); }
template <typename T> T erf(T x) { return std::erf(x); }
template <typename T> T erfc(T x) { return std::erfc(x); }
template <typename T> T log10(T x) { return std::log10(x); }
template <typename T> T asin(T x) { return std::asin(x); }
template <typename T> T acos(T x) { return std::acos(x); }
template <typename T> T atan(T x) { return std::atan(x); }
template <typename T> T sinh(T x) { return std::sinh(x); }
template <typename T> T cosh(T x) { return std::cosh(x); }
template <typename T> T asinh(T x) { return std::asinh(x); }
template <typename T> T acosh(T x) { return std::acosh(x); }
template <typename T> T atanh(T x) { return std::atanh(x); }
template <typename T> T trunc(T x) { return std::trunc(x); }
template <typename T> T atan2(T y, T x) { return std::atan2(y, x); }
template <typename T> T hypot(T x, T y) { return std::hypot(x, y); }
template <typename T> T floor(T x) { return std::floor(x); }
template <typename T> T ceil(T x) { return std::ceil(x); }
template <typename T> T round(T x) { return std::nearbyint(x); }  // ties to even, as torch.round
template <typename T> T pow(T x, T y) { return std::pow(x, y); }
template <typename T> T fmod(T x, T y) { return std::fmod(x, y); }
template <typename T> bool isnan(T x) {
  if constexpr (is_int<T>) return false;
  else return std::isnan(x);
}
template <typename T> bool isinf(T x) {
  if constexpr (is_int<T>) return false;
  else return std::isinf(x);
}
template <typename T> T abs(T x) {
  if constexpr (std::is_unsigned_v<T>) return x;
  else if constexpr (is_int<T>) return x < 0 ? static_cast<T>(-x) : x;
  else return std::fabs(x);
}
// NaN-propagating, as torch.maximum / torch.minimum.
template <typename T> T maximum(T a, T b) {
  if (isnan(a) || isnan(b)) return isnan(a) ? a : b;
  return a > b ? a : b;
}
template <typename T> T minimum(T a, T b) {
  if (isnan(a) || isnan(b)) return isnan(a) ? a : b;
  return a < b ? a : b;
}
template <typename T> T copysign(T x, T y) { return std::copysign(x, y); }
template <typename T> T select(bool c, T a, T b) { return c ? a : b; }

// Bitwise ops on integers and bools. On bools they are the logical ops.
template <typename T> T bit_and(T a, T b) {
  if constexpr (std::is_same_v<typename number_type<T>::type, bool>) return a && b;
  else return static_cast<T>(a & b);
}
template <typename T> T bit_or(T a, T b) {
  if constexpr (std::is_same_v<typename number_type<T>::type, bool>) return a || b;
  else return static_cast<T>(a | b);
}
template <typename T> T bit_xor(T a, T b) {
  if constexpr (std::is_same_v<typename number_type<T>::type, bool>) return a != b;
  else return static_cast<T>(a ^ b);
}
template <typename T> T bit_not(T x) {
  if constexpr (std::is_same_v<typename number_type<T>::type, bool>) return !x;
  else return static_cast<T>(~x);
}

// Shifts of integers. A count outside [0, bits) shifts every bit out: 0 to the left, the sign to
// the right (PyTorch leaves these undefined, and its kernels give what the hardware gives).
template <typename T> bool shift_out_of_range(T count) {
  if constexpr (std::is_signed_v<T>) {
    if (count < 0) return true;
  }
  return count >= static_cast<T>(sizeof(T) * 8);
}
template <typename T> T shift_left(T a, T b) {
  return shift_out_of_range(b) ? T(0) : static_cast<T>(static_cast<uint64_t>(a) << b);
}
template <typename T> T shift_right(T a, T b) {
  if (!shift_out_of_range(b)) return static_cast<T>(a >> b);
  if constexpr (std::is_signed_v<T>) return a < 0 ? T(-1) : T(0);
  else return T(0);
}

// Integer division and remainder truncating toward zero; 0 for a zero divisor (eager mode raises
// ZeroDivisionError before running, as PyTorch does; generated kernels must not trap). A divisor
// of -1 negates, the most negative value wrapping to itself as loom's integer arithmetic wraps:
// the hardware's division traps there (x86's idiv raises SIGFPE and the process dies, as
// PyTorch's CPU kernels do on int64.min // -1). The same rule is the kernel prelude's
// loom_idiv / loom_imod and the CUDA library's loom_divmod.
template <typename T> constexpr bool divides_by_minus_one(T b) {
  if constexpr (std::is_signed_v<T>) return b == T(-1);
  else return false;
}
template <typename T> T int_div(T a, T b) {
  if (b == 0) return T(0);
  if (divides_by_minus_one(b)) return static_cast<T>(uint64_t{0} - static_cast<uint64_t>(a));
  return static_cast<T>(a / b);
}
template <typename T> T int_mod(T a, T b) { return b == 0 || divides_by_minus_one(b) ? T(0) : static_cast<T>(a % b); }

// Integer power by squaring. A negative exponent truncates 1 / base^-e toward zero (only bases
// 1 and -1 give non-zero results); a negative Python-scalar exponent is rejected when recorded.
template <typename T>
T ipow(T base, T exponent) {
  if constexpr (std::is_signed_v<T>) {
    if (exponent < 0) return base == 1 ? 1 : base == -1 ? ((exponent & 1) ? -1 : 1) : 0;
  }
  T result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = static_cast<T>(result * base);
    base = static_cast<T>(base * base);
    exponent >>= 1;
  }
  return result;
}

}  // namespace loom::math
