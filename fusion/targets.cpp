#include "fusion/targets.h"

#include "runtime/error.h"

namespace loom::fusion {
namespace {

// Helpers both targets compile, written without headers (DESIGN: generated source includes no
// header, which keeps host compiles around 0.1 s). LOOM_FN is a static inline (device) function.
constexpr const char* kCommonPrelude = R"(
typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
template <class T> LOOM_FN T loom_maximum(T a, T b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
template <class T> LOOM_FN T loom_minimum(T a, T b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
template <class T> LOOM_FN bool loom_isnan(T x) { return x != x; }
template <class T> LOOM_FN bool loom_isinf(T x) { return x == x && (x - x) != (x - x); }
template <class T> LOOM_FN T loom_iabs(T x) { return x < T(0) ? T(-x) : x; }
template <class T> LOOM_FN T loom_idiv(T a, T b) { return b == T(0) ? T(0) : T(a / b); }
template <class T> LOOM_FN T loom_imod(T a, T b) { return b == T(0) ? T(0) : T(a % b); }
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

// The C library's math functions. Where the host compiler found glibc's vector math library
// (LOOM_LIBMVEC, rtc/host_compiler.cpp), they are declared as having vector variants, as glibc's
// own headers do under -ffast-math: loops calling them then vectorize (-O3) instead of calling
// the scalar function per element. The vector variants are accurate to a few ulp.
constexpr const char* kCpuMath = R"(
#ifdef LOOM_LIBMVEC
#define LOOM_SIMD __attribute__((simd("notinbranch")))
#else
#define LOOM_SIMD
#endif
extern "C" {
#define LOOM_MATH1(name) float name##f(float) LOOM_SIMD; double name(double) LOOM_SIMD;
LOOM_MATH1(exp) LOOM_MATH1(exp2) LOOM_MATH1(expm1) LOOM_MATH1(log) LOOM_MATH1(log2) LOOM_MATH1(log1p)
LOOM_MATH1(sin) LOOM_MATH1(cos) LOOM_MATH1(tan) LOOM_MATH1(tanh) LOOM_MATH1(erf)
float powf(float, float) LOOM_SIMD; double pow(double, double) LOOM_SIMD;
}
)";

const std::string kCpuPrelude = std::string("#define LOOM_FN static inline __attribute__((always_inline))\n") +
                                kCommonPrelude + kCpuMath;

const std::string kCudaPrelude = std::string("#define LOOM_FN static __device__ __forceinline__\n") +
                                 kCommonPrelude + R"(
template <class T> LOOM_FN T loom_shfl_down(T v, int offset) { return __shfl_down_sync(0xffffffffu, v, offset); }
)";

struct FnNames {
  Fn fn;
  const char* cpu_float;
  const char* cpu_double;
  const char* cuda_float;
  const char* cuda_double;
};

// Math functions by target and type. Integers use the prelude's loom_i* helpers.
constexpr FnNames kFns[] = {
    {Fn::Exp, "expf", "exp", "expf", "exp"},
    {Fn::Exp2, "exp2f", "exp2", "exp2f", "exp2"},
    {Fn::Log, "logf", "log", "logf", "log"},
    {Fn::Log2, "log2f", "log2", "log2f", "log2"},
    {Fn::Log1p, "log1pf", "log1p", "log1pf", "log1p"},
    {Fn::Expm1, "expm1f", "expm1", "expm1f", "expm1"},
    {Fn::Sqrt, "__builtin_sqrtf", "__builtin_sqrt", "sqrtf", "sqrt"},
    {Fn::Sin, "sinf", "sin", "sinf", "sin"},
    {Fn::Cos, "cosf", "cos", "cosf", "cos"},
    {Fn::Tan, "tanf", "tan", "tanf", "tan"},
    {Fn::Tanh, "tanhf", "tanh", "tanhf", "tanh"},
    {Fn::Erf, "erff", "erf", "erff", "erf"},
    {Fn::Floor, "__builtin_floorf", "__builtin_floor", "floorf", "floor"},
    {Fn::Ceil, "__builtin_ceilf", "__builtin_ceil", "ceilf", "ceil"},
    {Fn::Round, "__builtin_nearbyintf", "__builtin_nearbyint", "rintf", "rint"},
    {Fn::Abs, "__builtin_fabsf", "__builtin_fabs", "fabsf", "fabs"},
    {Fn::Pow, "powf", "pow", "powf", "pow"},
    {Fn::Fmod, "__builtin_fmodf", "__builtin_fmod", "fmodf", "fmod"},
    {Fn::Copysign, "__builtin_copysignf", "__builtin_copysign", "copysignf", "copysign"},
};

const TargetTable kCpu{TargetKind::Cpu, kCpuPrelude.c_str(), "extern \"C\" __attribute__((visibility(\"default\"))) void",
                       "double"};
const TargetTable kCuda{TargetKind::Cuda, kCudaPrelude.c_str(), "extern \"C\" __global__ void __launch_bounds__(256)",
                        "float"};

}  // namespace

std::string TargetTable::call(Fn fn, DType type) const {
  bool floating = type == DType::Float32 || type == DType::Float64;
  switch (fn) {
    case Fn::IsNan: return "loom_isnan(%a)";
    case Fn::IsInf: return "loom_isinf(%a)";
    case Fn::Maximum: return "loom_maximum(%a, %b)";
    case Fn::Minimum: return "loom_minimum(%a, %b)";
    case Fn::IntPow: return "loom_ipow(%a, %b)";
    case Fn::IntDiv: return "loom_idiv(%a, %b)";
    case Fn::IntMod: return "loom_imod(%a, %b)";
    case Fn::Abs:
      if (!floating) return "loom_iabs(%a)";
      break;
    default: break;
  }
  LOOM_CHECK(floating, Runtime, "internal: math function on ", dtype_name(type));
  for (const FnNames& f : kFns) {
    if (f.fn != fn) continue;
    const char* name = kind == TargetKind::Cpu ? (type == DType::Float32 ? f.cpu_float : f.cpu_double)
                                               : (type == DType::Float32 ? f.cuda_float : f.cuda_double);
    bool binary = fn == Fn::Pow || fn == Fn::Fmod || fn == Fn::Copysign;
    return std::string(name) + (binary ? "(%a, %b)" : "(%a)");
  }
  LOOM_FAIL(Runtime, "internal: no rendering of math function ", static_cast<int>(fn));
}

const TargetTable& target_table(TargetKind kind) { return kind == TargetKind::Cpu ? kCpu : kCuda; }

const char* compute_ctype(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "u8";
    case DType::Int32: return "int";
    case DType::Int64: return "i64";
    case DType::Float64: return "double";
    default: return "float";
  }
}

const char* storage_ctype(DType t) {
  switch (t) {
    case DType::Bool: return "u8";
    case DType::Float16:
    case DType::BFloat16: return "u16";
    default: return compute_ctype(t);
  }
}

}  // namespace loom::fusion
