#include "fusion/targets.h"

#include "runtime/error.h"
#include "runtime/kernel_prelude.h"

namespace loom::fusion {
namespace {

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
LOOM_MATH1(erfc) LOOM_MATH1(log10) LOOM_MATH1(asin) LOOM_MATH1(acos) LOOM_MATH1(atan) LOOM_MATH1(sinh)
LOOM_MATH1(cosh) LOOM_MATH1(asinh) LOOM_MATH1(acosh) LOOM_MATH1(atanh)
#define LOOM_MATH2(name) float name##f(float, float) LOOM_SIMD; double name(double, double) LOOM_SIMD;
LOOM_MATH2(pow) LOOM_MATH2(atan2) LOOM_MATH2(hypot)
}
)";

// e^x in float32 on the CPU: loom's own, in arithmetic the compiler vectorizes, so it needs no
// vector math library: 1.011 ulp at most over all float32 inputs (all tried; 0.99 without FMA;
// glibc 2.36's vector expf behind the mask below: 2.64), and a loop of exp alone runs about 1.3x
// faster than with libmvec's here (AVX-512). Arguments above 89 are clamped to 89 (e^89 rounds
// to inf), and those below -104 are computed as 0 with the result forced to +0 (every e^x below
// -104 rounds to an exact +0, -inf included): clamping them to -104 instead gave the same results
// but made the last multiply underflow to a denormal in every such lane, which Intel CPUs finish
// in microcode (a causally masked softmax, half -inf, ran 2x slower); e^0 is computed at full speed.
// x = n ln2 + r, |r| <= ln2 / 2: n is x / ln2 rounded by adding 1.5 * 2^23 (no float-to-int
// conversion, so NaN stays NaN), ln2 a float pair whose high part times n is exact. e^r = 1 + r +
// r^2 P(r), P of degree 4 (minimax, relative error 3.1e-9; scripts/fit_cpu_math.py). 2^n is
// applied as two powers of two, so results down to the denormals round once; x > 89 gives inf.
constexpr const char* kCpuExp = R"(
#ifdef __FMA__
#define LOOM_FMAF(a, b, c) __builtin_fmaf(a, b, c)
#else
#define LOOM_FMAF(a, b, c) ((a) * (b) + (c))
#endif
LOOM_FN float loom_expf(float x) {
  const bool zero = x < -104.0f;
  const float xc = x > 89.0f ? 89.0f : (zero ? 0.0f : x);
  const float t = LOOM_FMAF(xc, 0x1.715476p+0f, 0x1.8p23f);
  const float n = t - 0x1.8p23f;
  float r = LOOM_FMAF(n, -0x1.62ep-1f, xc);
  r = LOOM_FMAF(n, -0x1.0bfbe8p-15f, r);
  float p = 0x1.6a54f0p-10f;
  p = LOOM_FMAF(p, r, 0x1.1239a0p-7f);
  p = LOOM_FMAF(p, r, 0x1.5558acp-5f);
  p = LOOM_FMAF(p, r, 0x1.555492p-3f);
  p = LOOM_FMAF(p, r, 0x1.fffffcp-2f);
  const float e = LOOM_FMAF(r * r, p, r) + 1.0f;
  const int k = (int)(loom_f_bits(t) - loom_f_bits(0x1.8p23f)), k1 = k >> 1, k2 = k - k1;
  const float y = (e * loom_bits_f((u32)(k1 + 127) << 23)) * loom_bits_f((u32)(k2 + 127) << 23);
  return zero ? 0.0f : y;
}
)";

// exp and exp2 of the C library with every argument below the function's underflow point (where
// the exact result rounds to +0 in the type: e^x < 2^-150 for float, 2^-1075 for double; -inf
// included) mapped to an exact 0 before the call. glibc's vector exp sends a lane holding such an
// argument to its scalar slow path (a causal mask's -inf made softmax kernels several times
// slower); an argument of +0 stays on the fast path, and the same mask applied to the result
// restores the 0. The mask is applied to the bits: written as selects (`z ? 0 : x`, then
// `z ? 0 : r`), GCC threads the two selects into one and calls exp on the original argument, and
// the slow path is back. Thresholds sit just below the underflow points, so no denormal result
// changes; NaN compares false and reaches the call. The CPU's float32 exp is loom_expf (above);
// CUDA's is this mask around its own expf (kCudaExpf).
constexpr const char* kExpHelpers = R"(
LOOM_FN float loom_mask_f(float v, u32 m) { return loom_bits_f(loom_f_bits(v) & m); }
LOOM_FN double loom_mask_d(double v, u64 m) { union { u64 u; double d; } x; x.d = v; x.u &= m; return x.d; }
LOOM_FN double loom_exp(double x) { const u64 m = (u64)-(i64)!(x < -746.0); return loom_mask_d(exp(loom_mask_d(x, m)), m); }
LOOM_FN float loom_exp2f(float x) { const u32 m = (u32)-(int)!(x < -150.0f); return loom_mask_f(exp2f(loom_mask_f(x, m)), m); }
LOOM_FN double loom_exp2(double x) { const u64 m = (u64)-(i64)!(x < -1075.0); return loom_mask_d(exp2(loom_mask_d(x, m)), m); }
)";

// erf in float32 on the CPU: loom's own, written in arithmetic the compiler vectorizes (-O3),
// so a loop calling it needs no vector math library. Where glibc's libmvec is found the loop
// would call its vector erff instead, but that is slower here (AVX-512, glibc 2.36: 0.45-0.55 ns
// an element against 0.33, one thread) and 4 ulp off at worst; without libmvec erff stays scalar.
// |x| < 1: x (c0 + s P(s)), s = x^2, c0 = 2/sqrt(pi) as a float pair (hi rounded toward zero,
// so x = -0 keeps its sign); 1 <= |x| < 3.92: sign(x) (1 - Q(|x| - m)), Q close to erfc there;
// beyond, erf rounds to +-1. NaN passes through. The coefficients are scripts/fit_cpu_math.py's
// (minimax fits, relative error 1.5e-9 and absolute error 6.6e-9 before rounding); the result is
// within 1.31 ulp of the exact erf for every float32 input (all 2^32 tried; 2.27 ulp where the
// CPU has no FMA: tests/python/test_cpu_math.py). float64 keeps the C library's erf (libmvec
// vectorizes it). CUDA renders its own erff.
constexpr const char* kCpuErf = R"(
LOOM_FN float loom_erff(float x) {
  const float a = __builtin_fabsf(x), s = x * x;
  float p = 0x1.48f0bap-14f;
  p = LOOM_FMAF(p, s, -0x1.a3ec54p-11f);
  p = LOOM_FMAF(p, s, 0x1.540a3cp-8f);
  p = LOOM_FMAF(p, s, -0x1.b7fab0p-6f);
  p = LOOM_FMAF(p, s, 0x1.ce2d28p-4f);
  p = LOOM_FMAF(p, s, -0x1.812740p-2f);
  p = LOOM_FMAF(p, s, 0x1.0429b6p-24f);
  const float small = LOOM_FMAF(x, 0x1.20dd74p+0f, x * p);
  const float u = a - 0x1.3ae148p+1f;
  float q = -0x1.24c108p-20f;
  q = LOOM_FMAF(q, u, -0x1.c77928p-24f);
  q = LOOM_FMAF(q, u, 0x1.22557cp-16f);
  q = LOOM_FMAF(q, u, -0x1.9d33aap-16f);
  q = LOOM_FMAF(q, u, -0x1.3dbe20p-14f);
  q = LOOM_FMAF(q, u, 0x1.39f48ep-12f);
  q = LOOM_FMAF(q, u, -0x1.7548bep-12f);
  q = LOOM_FMAF(q, u, -0x1.e15ea0p-12f);
  q = LOOM_FMAF(q, u, 0x1.80fd22p-9f);
  q = LOOM_FMAF(q, u, -0x1.bda024p-8f);
  q = LOOM_FMAF(q, u, 0x1.44de0cp-7f);
  q = LOOM_FMAF(q, u, -0x1.423042p-7f);
  q = LOOM_FMAF(q, u, 0x1.ac3f12p-8f);
  q = LOOM_FMAF(q, u, -0x1.5c289ep-9f);
  q = LOOM_FMAF(q, u, 0x1.07e6f6p-11f);
  const float large = loom_bits_f(loom_f_bits(a < 3.92f ? 1.0f - q : 1.0f) | (loom_f_bits(x) & 0x80000000u));
  return a < 1.0f ? small : (a == a ? large : x);
}
)";

constexpr const char* kCudaExpf = R"(
LOOM_FN float loom_expf(float x) { const u32 m = (u32)-(int)!(x < -104.0f); return loom_mask_f(expf(loom_mask_f(x, m)), m); }
)";

const std::string kCpuPrelude = std::string("#define LOOM_FN static inline __attribute__((always_inline))\n") +
                                kKernelPrelude + kCpuMath + kCpuExp + kExpHelpers + kCpuErf;

const std::string kCudaPrelude = std::string("#define LOOM_FN static __device__ __forceinline__\n") +
                                 kKernelPrelude + kExpHelpers + kCudaExpf + R"(
template <class T> LOOM_FN T loom_shfl_down(T v, int offset) { return __shfl_down_sync(0xffffffffu, v, offset); }
)";

struct FnNames {
  Fn fn;
  const char* cpu_float;
  const char* cpu_double;
  const char* cuda_float;
  const char* cuda_double;
  // A library routine of tens of instructions per element (exp, log, erf, ...), not one
  // instruction (sqrt, floor, abs): a row kernel keeps such a value once computed rather than
  // evaluating it again in a later pass over the row (costly()).
  bool costly;
};

// Math functions by target and type. Integers use the prelude's loom_i* helpers.
constexpr FnNames kFns[] = {
    {Fn::Exp, "loom_expf", "loom_exp", "loom_expf", "loom_exp", true},
    {Fn::Exp2, "loom_exp2f", "loom_exp2", "loom_exp2f", "loom_exp2", true},
    {Fn::Log, "logf", "log", "logf", "log", true},
    {Fn::Log2, "log2f", "log2", "log2f", "log2", true},
    {Fn::Log1p, "log1pf", "log1p", "log1pf", "log1p", true},
    {Fn::Expm1, "expm1f", "expm1", "expm1f", "expm1", true},
    {Fn::Sqrt, "__builtin_sqrtf", "__builtin_sqrt", "sqrtf", "sqrt", false},
    {Fn::Sin, "sinf", "sin", "sinf", "sin", true},
    {Fn::Cos, "cosf", "cos", "cosf", "cos", true},
    {Fn::Tan, "tanf", "tan", "tanf", "tan", true},
    {Fn::Tanh, "tanhf", "tanh", "tanhf", "tanh", true},
    {Fn::Erf, "loom_erff", "erf", "erff", "erf", true},
    {Fn::Floor, "__builtin_floorf", "__builtin_floor", "floorf", "floor", false},
    {Fn::Ceil, "__builtin_ceilf", "__builtin_ceil", "ceilf", "ceil", false},
    {Fn::Round, "__builtin_nearbyintf", "__builtin_nearbyint", "rintf", "rint", false},
    {Fn::Abs, "__builtin_fabsf", "__builtin_fabs", "fabsf", "fabs", false},
    {Fn::Pow, "powf", "pow", "powf", "pow", true},
    {Fn::Fmod, "__builtin_fmodf", "__builtin_fmod", "fmodf", "fmod", true},
    {Fn::Copysign, "__builtin_copysignf", "__builtin_copysign", "copysignf", "copysign", false},
    {Fn::Log10, "log10f", "log10", "log10f", "log10", true},
    {Fn::Asin, "asinf", "asin", "asinf", "asin", true},
    {Fn::Acos, "acosf", "acos", "acosf", "acos", true},
    {Fn::Atan, "atanf", "atan", "atanf", "atan", true},
    {Fn::Sinh, "sinhf", "sinh", "sinhf", "sinh", true},
    {Fn::Cosh, "coshf", "cosh", "coshf", "cosh", true},
    {Fn::Asinh, "asinhf", "asinh", "asinhf", "asinh", true},
    {Fn::Acosh, "acoshf", "acosh", "acoshf", "acosh", true},
    {Fn::Atanh, "atanhf", "atanh", "atanhf", "atanh", true},
    {Fn::Erfc, "erfcf", "erfc", "erfcf", "erfc", true},
    {Fn::Trunc, "__builtin_truncf", "__builtin_trunc", "truncf", "trunc", false},
    {Fn::Atan2, "atan2f", "atan2", "atan2f", "atan2", true},
    {Fn::Hypot, "hypotf", "hypot", "hypotf", "hypot", true},
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
    case Fn::ShiftLeft: return "loom_shl(%a, %b)";
    case Fn::ShiftRight: return "loom_shr(%a, %b)";
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
    bool binary = fn == Fn::Pow || fn == Fn::Fmod || fn == Fn::Copysign || fn == Fn::Atan2 || fn == Fn::Hypot;
    return std::string(name) + (binary ? "(%a, %b)" : "(%a)");
  }
  LOOM_FAIL(Runtime, "internal: no rendering of math function ", static_cast<int>(fn));
}

bool costly(Fn fn) {
  for (const FnNames& f : kFns)
    if (f.fn == fn) return f.costly;
  return false;  // the prelude's integer helpers, NaN tests, maximum and minimum
}

const TargetTable& target_table(TargetKind kind) { return kind == TargetKind::Cpu ? kCpu : kCuda; }

const char* compute_ctype(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "u8";
    case DType::Int8: return "i8";
    case DType::Int16: return "i16";
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
