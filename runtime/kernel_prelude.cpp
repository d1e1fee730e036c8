#include "runtime/kernel_prelude.h"

namespace loom {

// See the header. Kept byte-for-byte stable: it is part of every module's source, so of every
// disk-cache key.
const char* const kKernelPrelude = R"(
typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef signed char i8;
typedef short i16;
template <class T> LOOM_FN T loom_maximum(T a, T b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
template <class T> LOOM_FN T loom_minimum(T a, T b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
template <class T> LOOM_FN bool loom_isnan(T x) { return x != x; }
template <class T> LOOM_FN bool loom_isinf(T x) { return x == x && (x - x) != (x - x); }
template <class T> LOOM_FN T loom_iabs(T x) { return x < T(0) ? T(-x) : x; }
// A zero divisor gives 0 and -1 negates, wrapping (lazy/math.h int_div: the hardware traps).
template <class T> LOOM_FN T loom_idiv(T a, T b) {
  return b == T(0) ? T(0) : (T(-1) < T(0) && b == T(-1)) ? T(u64(0) - u64(a)) : T(a / b);
}
template <class T> LOOM_FN T loom_imod(T a, T b) { return (b == T(0) || (T(-1) < T(0) && b == T(-1))) ? T(0) : T(a % b); }
// Shifts; a count outside [0, bits) shifts every bit out (lazy/math.h shift_left / shift_right).
template <class T> LOOM_FN T loom_shl(T a, T b) { return (b < T(0) || b >= T(sizeof(T) * 8)) ? T(0) : T((u64)a << b); }
template <class T> LOOM_FN T loom_shr(T a, T b) {
  return (b < T(0) || b >= T(sizeof(T) * 8)) ? (a < T(0) ? T(-1) : T(0)) : T(a >> b);
}
template <class T> LOOM_FN T loom_ipow(T base, T e) {
  if (e < T(0)) return base == T(1) ? T(1) : (base == T(-1) ? ((e & T(1)) ? T(-1) : T(1)) : T(0));
  T r = T(1);
  while (e > T(0)) { if (e & T(1)) r = T(r * base); base = T(base * base); e = T(e >> 1); }
  return r;
}
LOOM_FN float loom_bits_f(u32 b) { union { u32 u; float f; } x; x.u = b; return x.f; }
LOOM_FN u32 loom_f_bits(float f) { union { u32 u; float f; } x; x.f = f; return x.u; }
LOOM_FN double loom_sp_double(i64 b) { union { i64 i; double d; } x; x.i = b; return x.d; }
LOOM_FN float loom_inff() { return loom_bits_f(0x7f800000u); }
LOOM_FN double loom_inf() { union { u64 u; double d; } x; x.u = 0x7ff0000000000000ull; return x.d; }
// float16 / bfloat16 <-> float32, rounding to nearest even (the same rules as runtime/half.h).
LOOM_FN float loom_h2f(u16 h) {
  u32 sign = (u32)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return loom_bits_f(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    float m = (float)mantissa * 5.9604644775390625e-8f;
    return sign ? -m : m;
  }
  return loom_bits_f(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}
LOOM_FN u16 loom_f2h(float value) {
  u32 f = loom_f_bits(value), sign = (f >> 16) & 0x8000u, a = f & 0x7fffffffu;
  if (a >= 0x7f800000u) return (u16)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return (u16)(sign | 0x7c00u);
  if (a < 0x38800000u) {
    if (a < 0x33000000u) return (u16)sign;
    u32 e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;
    u32 hm = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (hm & 1u))) ++hm;
    return (u16)(sign | hm);
  }
  u32 bits = a - 0x38000000u, rest = bits & 0x1fffu;
  bits >>= 13;
  if (rest > 0x1000u || (rest == 0x1000u && (bits & 1u))) ++bits;
  return (u16)(sign | bits);
}
LOOM_FN float loom_bf2f(u16 b) { return loom_bits_f((u32)b << 16); }
LOOM_FN u16 loom_f2bf(float value) {
  u32 f = loom_f_bits(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) return (u16)((f >> 16) | 0x40u);
  return (u16)((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}
)";

}  // namespace loom
