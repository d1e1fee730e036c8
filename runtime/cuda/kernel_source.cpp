#include "runtime/cuda/kernel_source.h"

#include <cstring>
#include <sstream>

#include "runtime/kernel_prelude.h"

namespace loom::cuda {
namespace {

const char* kUnsigned[] = {nullptr, "u8", "u16", nullptr, "u32", nullptr, nullptr, nullptr, "u64"};

// Walks, Philox and the normal draw. Philox and the draws repeat runtime/philox.h and
// runtime/random.h in device code: the two must give every element the same bits.
constexpr const char* kHelpers = R"(
#define LOOM_KERNEL extern "C" __global__ void __launch_bounds__(256)
#define LOOM_FOR_EACH(i, n) _Pragma("unroll 1") for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)
// Element offsets of row-major index i in one or two strided operands (ip: n, r, sizes, strides...).
// Not inlined: the 64-bit divisions are long, and one shared copy keeps the module small and
// quick to compile.
static __device__ __noinline__ i64 loom_offset1(const i64* ip, i64 i) {
  const int r = (int)ip[1];
  const i64* sizes = ip + 2;
  const i64* s = sizes + r;
  if (r == 1) return i * s[0];  // dense walks merge to one dim: no division
  i64 o = 0;
  for (int d = r - 1; d >= 0; --d) { const i64 x = i % sizes[d]; i /= sizes[d]; o += x * s[d]; }
  return o;
}
static __device__ __noinline__ void loom_offset2(const i64* ip, i64 i, i64* a, i64* b) {
  const int r = (int)ip[1];
  const i64* sizes = ip + 2;
  const i64* sa = sizes + r;
  const i64* sb = sa + r;
  if (r == 1) { *a = i * sa[0]; *b = i * sb[0]; return; }
  i64 oa = 0, ob = 0;
  for (int d = r - 1; d >= 0; --d) { const i64 x = i % sizes[d]; i /= sizes[d]; oa += x * sa[d]; ob += x * sb[d]; }
  *a = oa;
  *b = ob;
}
struct loom_block { u32 x[4]; };
static __device__ __noinline__ loom_block loom_philox(u64 element, u64 seed, u64 offset) {
  u32 c[4] = {(u32)element, (u32)(element >> 32), (u32)offset, (u32)(offset >> 32)};
  u32 k0 = (u32)seed, k1 = (u32)(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const u64 p0 = (u64)0xD2511F53u * c[0], p1 = (u64)0xCD9E8D57u * c[2];
    const u32 n0 = (u32)(p1 >> 32) ^ c[1] ^ k0, n1 = (u32)p1, n2 = (u32)(p0 >> 32) ^ c[3] ^ k1, n3 = (u32)p0;
    c[0] = n0; c[1] = n1; c[2] = n2; c[3] = n3;
  }
  loom_block b = {{c[0], c[1], c[2], c[3]}};
  return b;
}
LOOM_FN u64 loom_random_u64(const loom_block& b, int pair) { return ((u64)b.x[2 * pair + 1] << 32) | b.x[2 * pair]; }
LOOM_FN double loom_random_unit(u64 bits, int digits) { return (double)(bits >> (64 - digits)) / (double)(1ull << digits); }
static __device__ __noinline__ double loom_random_normal(const loom_block& b) {
  const double u1 = 1.0 - loom_random_unit(loom_random_u64(b, 0), 53);
  const double u2 = loom_random_unit(loom_random_u64(b, 1), 53);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
// A value on its way between dtypes: an integer (bools and integers) or a double (floats; 16-bit
// floats widen exactly). Integers never pass through a double, which would round them twice.
struct loom_value { bool is_float; i64 i; double d; };
LOOM_FN loom_value loom_int(i64 v) { loom_value x = {false, v, 0.0}; return x; }
LOOM_FN loom_value loom_float(double v) { loom_value x = {true, 0, v}; return x; }
// The dtype codes are loom::DType's: bool, uint8, int32, int64, float16, bfloat16, float32, float64,
// int8, int16.
static __device__ __noinline__ loom_value loom_load(const void* base, i64 at, int type) {
  switch (type) {
    case 0: return loom_int(((const u8*)base)[at] != 0);
    case 1: return loom_int(((const u8*)base)[at]);
    case 2: return loom_int(((const int*)base)[at]);
    case 3: return loom_int(((const i64*)base)[at]);
    case 4: return loom_float(loom_h2f(((const u16*)base)[at]));
    case 5: return loom_float(loom_bf2f(((const u16*)base)[at]));
    case 6: return loom_float(((const float*)base)[at]);
    case 8: return loom_int(((const i8*)base)[at]);
    case 9: return loom_int(((const i16*)base)[at]);
    default: return loom_float(((const double*)base)[at]);
  }
}
// As runtime/dtype.h's convert(): to bool is != 0, to 16-bit floats goes through float, float to
// uint8 through a wide integer (as the host's conversion does).
static __device__ __noinline__ void loom_store(void* base, i64 at, int type, loom_value v) {
  switch (type) {
    case 0: ((u8*)base)[at] = (u8)(v.is_float ? v.d != 0.0 : v.i != 0); break;
    case 1: ((u8*)base)[at] = (u8)(v.is_float ? (i64)v.d : v.i); break;
    case 2: ((int*)base)[at] = v.is_float ? (int)v.d : (int)v.i; break;
    case 3: ((i64*)base)[at] = v.is_float ? (i64)v.d : v.i; break;
    case 4: ((u16*)base)[at] = loom_f2h(v.is_float ? (float)v.d : (float)v.i); break;
    case 5: ((u16*)base)[at] = loom_f2bf(v.is_float ? (float)v.d : (float)v.i); break;
    case 6: ((float*)base)[at] = v.is_float ? (float)v.d : (float)v.i; break;
    case 8: ((i8*)base)[at] = (i8)(v.is_float ? (i64)v.d : v.i); break;
    case 9: ((i16*)base)[at] = (i16)(v.is_float ? (i64)v.d : v.i); break;
    default: ((double*)base)[at] = v.is_float ? v.d : (double)v.i; break;
  }
}
)";

// The kernels that serve every dtype.
constexpr const char* kTypedKernels = R"(
LOOM_KERNEL loom_convert(const i64* ip, const i64* sp, void* const* bufs) {
  LOOM_FOR_EACH(i, ip[0]) { i64 d, o; loom_offset2(ip, i, &d, &o); loom_store(bufs[1], d, (int)sp[0], loom_load(bufs[0], o, (int)sp[1])); }
}
LOOM_KERNEL loom_arange(const i64* ip, const i64* sp, void* const* bufs) {
  LOOM_FOR_EACH(i, ip[0]) loom_store(bufs[0], i, (int)sp[0], sp[5] ? loom_int(sp[1] + i * sp[2])
                                                              : loom_float(loom_sp_double(sp[3]) + (double)i * loom_sp_double(sp[4])));
}
// As the CPU: the first half counts up from start, the second half down from end.
LOOM_KERNEL loom_linspace(const i64* ip, const i64* sp, void* const* bufs) {
  const i64 n = ip[0];
  const double start = loom_sp_double(sp[1]), end = loom_sp_double(sp[2]);
  const double step = n > 1 ? (end - start) / (double)(n - 1) : 0.0;
  const i64 half = n == 1 ? 1 : n / 2;
  LOOM_FOR_EACH(i, n) loom_store(bufs[0], i, (int)sp[0], loom_float(i < half ? start + step * (double)i : end - step * (double)(n - 1 - i)));
}
LOOM_KERNEL loom_uniform(const i64* ip, const i64* sp, void* const* bufs) {
  const double low = loom_sp_double(sp[3]), high = loom_sp_double(sp[4]);
  LOOM_FOR_EACH(i, ip[0]) {
    const loom_block b = loom_philox((u64)i, (u64)sp[1], (u64)sp[2]);
    loom_store(bufs[0], loom_offset1(ip, i), (int)sp[0], loom_float(low + (high - low) * loom_random_unit(loom_random_u64(b, 0), (int)sp[5])));
  }
}
LOOM_KERNEL loom_normal(const i64* ip, const i64* sp, void* const* bufs) {
  const double mean = loom_sp_double(sp[3]), std = loom_sp_double(sp[4]);
  LOOM_FOR_EACH(i, ip[0]) {
    const loom_block b = loom_philox((u64)i, (u64)sp[1], (u64)sp[2]);
    loom_store(bufs[0], loom_offset1(ip, i), (int)sp[0], loom_float(mean + std * loom_random_normal(b)));
  }
}
LOOM_KERNEL loom_randint(const i64* ip, const i64* sp, void* const* bufs) {
  const u64 range = (u64)sp[4] - (u64)sp[3];
  LOOM_FOR_EACH(i, ip[0]) {
    const loom_block b = loom_philox((u64)i, (u64)sp[1], (u64)sp[2]);
    loom_store(bufs[0], loom_offset1(ip, i), (int)sp[0], loom_int((i64)((u64)sp[3] + loom_random_u64(b, 0) % range)));
  }
}
)";

std::string build() {
  std::ostringstream s;
  s << "// loom's runtime kernels (runtime/cuda/kernel_source.cpp).\n" << device_helpers();
  for (int size : {1, 2, 4, 8}) {
    const char* u = kUnsigned[size];
    s << "LOOM_KERNEL loom_copy_" << size << "(const i64* ip, const i64* sp, void* const* bufs) {\n"
      << "  const " << u << "* src = (const " << u << "*)bufs[0]; " << u << "* dst = (" << u << "*)bufs[1];\n"
      << "  LOOM_FOR_EACH(i, ip[0]) { i64 d, o; loom_offset2(ip, i, &d, &o); dst[d] = src[o]; }\n}\n"
      << "LOOM_KERNEL loom_fill_" << size << "(const i64* ip, const i64* sp, void* const* bufs) {\n"
      << "  " << u << "* dst = (" << u << "*)bufs[0]; const " << u << " v = (" << u << ")(u64)sp[0];\n"
      << "  LOOM_FOR_EACH(i, ip[0]) dst[loom_offset1(ip, i)] = v;\n}\n";
  }
  s << kTypedKernels;
  return s.str();
}

}  // namespace

const std::string& device_helpers() {
  static const std::string text = std::string("#define LOOM_FN static __device__ __forceinline__\n") + kKernelPrelude + kHelpers;
  return text;
}

const std::string& runtime_kernel_source() {
  static const std::string source = build();
  return source;
}

std::string copy_kernel(DType dst, DType src) {
  return dst == src ? "loom_copy_" + std::to_string(itemsize(dst)) : "loom_convert";
}
std::string fill_kernel(DType d) { return "loom_fill_" + std::to_string(itemsize(d)); }

std::vector<int64_t> strided_ip(IntSpan sizes, IntSpan a, IntSpan b) {
  bool two = !b.empty();
  Dims ms, ma, mb;  // merged dims, outermost first
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    if (!ms.empty() && ma.back() == a[d] * sizes[d] && (!two || mb.back() == b[d] * sizes[d])) {
      ms.back() *= sizes[d];
      ma.back() = a[d];
      if (two) mb.back() = b[d];
      continue;
    }
    ms.push_back(sizes[d]);
    ma.push_back(a[d]);
    if (two) mb.push_back(b[d]);
  }
  std::vector<int64_t> ip{numel_of(sizes), static_cast<int64_t>(ms.size())};
  ip.insert(ip.end(), ms.begin(), ms.end());
  ip.insert(ip.end(), ma.begin(), ma.end());
  if (two) ip.insert(ip.end(), mb.begin(), mb.end());
  return ip;
}

int64_t double_bits(double v) noexcept {
  int64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

}  // namespace loom::cuda
