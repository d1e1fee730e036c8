#include "graph/cuda_library_source.h"

#include "runtime/cuda/kernel_source.h"

namespace loom::graph {
namespace {

constexpr const char* kKernels = R"(
LOOM_FN void loom_report(void* error, i64 code) {
  volatile int* word = (volatile int*)error;
  if (*word == 0) *word = (int)code;  // any one reporter wins; the host only needs one code
}
LOOM_FN void loom_copy_item(void* dst, i64 d, const void* src, i64 s, i64 itemsize) {
  switch (itemsize) {
    case 1: ((u8*)dst)[d] = ((const u8*)src)[s]; break;
    case 2: ((u16*)dst)[d] = ((const u16*)src)[s]; break;
    case 4: ((u32*)dst)[d] = ((const u32*)src)[s]; break;
    default: ((u64*)dst)[d] = ((const u64*)src)[s]; break;
  }
}
LOOM_FN i64 loom_read_index(const void* index, i64 at, i64 is_int64) {
  return is_int64 ? ((const i64*)index)[at] : (i64)((const int*)index)[at];
}
// base[at] += v in dtype `type`, atomically. 8- and 16-bit types update their aligned 32-bit
// word with compare-and-swap. Sums round once in the dtype, as the CPU's.
static __device__ __noinline__ void loom_atomic_add(void* base, i64 at, int type, loom_value v) {
  switch (type) {
    case 2: atomicAdd((int*)base + at, v.is_float ? (int)v.d : (int)v.i); return;
    case 3: atomicAdd((unsigned long long*)base + at, (unsigned long long)(v.is_float ? (i64)v.d : v.i)); return;
    case 6: atomicAdd((float*)base + at, v.is_float ? (float)v.d : (float)v.i); return;
    case 7: atomicAdd((double*)base + at, v.is_float ? v.d : (double)v.i); return;
    default: break;
  }
  const int size = (type == 4 || type == 5 || type == 9) ? 2 : 1;
  char* p = (char*)base + at * size;
  unsigned int* word = (unsigned int*)((unsigned long long)p & ~3ull);
  const unsigned int shift = (unsigned int)((unsigned long long)p & 3ull) * 8u;
  const unsigned int mask = (size == 2 ? 0xffffu : 0xffu) << shift;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    const unsigned int e = (assumed & mask) >> shift;
    unsigned int sum;
    if (type == 0) sum = (e != 0 || (v.is_float ? v.d != 0.0 : v.i != 0)) ? 1u : 0u;
    else if (type == 1 || type == 8) sum = (u8)(e + (u8)(v.is_float ? (i64)v.d : v.i));
    else if (type == 9) sum = (u16)(e + (u16)(v.is_float ? (i64)v.d : v.i));
    else if (type == 4) sum = loom_f2h(loom_h2f((u16)e) + (v.is_float ? (float)v.d : (float)v.i));
    else sum = loom_f2bf(loom_bf2f((u16)e) + (v.is_float ? (float)v.d : (float)v.i));
    old = atomicCAS(word, assumed, (assumed & ~mask) | ((sum << shift) & mask));
  } while (old != assumed);
}

LOOM_KERNEL loom_gather(const i64* ip, const i64* sp, void* const* bufs) {
  const int r = (int)ip[1];
  const i64* sizes = ip + 2; const i64* xs = sizes + r; const i64* is = xs + r;
  const i64 dim = is[r], dim_size = is[r + 1], itemsize = is[r + 2], code = is[r + 3];
  LOOM_FOR_EACH(e, ip[0]) {
    i64 rest = e, xo = 0, io = 0;
    for (int d = r - 1; d >= 0; --d) {
      const i64 c = rest % sizes[d]; rest /= sizes[d];
      io += c * is[d];
      if (d != dim) xo += c * xs[d];
    }
    const i64 i = ((const i64*)bufs[1])[io];
    if (i < 0 || i >= dim_size) { loom_report(bufs[3], code); continue; }
    if (r > 0) xo += i * xs[dim];
    loom_copy_item(bufs[2], e, bufs[0], xo, itemsize);
  }
}

LOOM_KERNEL loom_scatter_add(const i64* ip, const i64* sp, void* const* bufs) {
  const int r = (int)ip[1];
  const i64* sizes = ip + 2; const i64* os = sizes + r; const i64* is = os + r; const i64* ss = is + r;
  const i64 dim = ss[r], dim_size = ss[r + 1], type = ss[r + 2], code = ss[r + 3];
  LOOM_FOR_EACH(e, ip[0]) {
    i64 rest = e, oo = 0, io = 0, so = 0;
    for (int d = r - 1; d >= 0; --d) {
      const i64 c = rest % sizes[d]; rest /= sizes[d];
      io += c * is[d];
      so += c * ss[d];
      if (d != dim) oo += c * os[d];
    }
    const i64 i = ((const i64*)bufs[0])[io];
    if (i < 0 || i >= dim_size) { loom_report(bufs[3], code); continue; }
    if (r > 0) oo += i * os[dim];
    loom_atomic_add(bufs[2], oo, (int)type, loom_load(bufs[1], so, (int)type));
  }
}

// The element offset in the indexed tensor of position e of the index space (out or region):
// the strided part plus each index's pick, negative indices wrapped when allowed. Returns false
// (having reported) when an index is out of range.
LOOM_FN bool loom_indexed_offset(const i64* ip, void* const* bufs, i64 e, i64 wrap, i64 code, void* error, i64* offset) {
  const int R = (int)ip[1], k = (int)ip[2];
  const i64* sizes = ip + 3; const i64* base = sizes + R;
  i64 o = 0;
  for (int t = -1; t < k; ++t) {
    const i64* strides = t < 0 ? base : base + R + t * (R + 3);
    i64 rest = e, at = 0;
    for (int d = R - 1; d >= 0; --d) { const i64 c = rest % sizes[d]; rest /= sizes[d]; at += c * strides[d]; }
    if (t < 0) { o += at; continue; }
    i64 i = loom_read_index(bufs[1 + t], at, strides[R + 2]);
    const i64 size = strides[R + 1];
    if (wrap && i < 0) i += size;
    if (i < 0 || i >= size) { loom_report(error, code); return false; }
    o += i * strides[R];
  }
  *offset = o;
  return true;
}

LOOM_KERNEL loom_index(const i64* ip, const i64* sp, void* const* bufs) {
  const int R = (int)ip[1], k = (int)ip[2];
  const i64* tail = ip + 3 + 2 * R + k * (R + 3);
  const i64 wrap = tail[0], itemsize = tail[1], code = tail[2];
  LOOM_FOR_EACH(e, ip[0]) {
    i64 xo;
    if (!loom_indexed_offset(ip, bufs, e, wrap, code, bufs[k + 2], &xo)) continue;
    loom_copy_item(bufs[k + 1], e, bufs[0], xo, itemsize);
  }
}

LOOM_KERNEL loom_index_put(const i64* ip, const i64* sp, void* const* bufs) {
  const int R = (int)ip[1], k = (int)ip[2];
  const i64* sizes = ip + 3;
  const i64* vs = ip + 3 + 2 * R + k * (R + 3);
  const i64 has_values = vs[R], accumulate = vs[R + 1], type = vs[R + 2], value_type = vs[R + 3], code = vs[R + 4];
  LOOM_FOR_EACH(e, ip[0]) {
    i64 oo;
    if (!loom_indexed_offset(ip, bufs, e, 1, code, bufs[k + 2], &oo)) continue;
    loom_value v;
    if (has_values) {
      i64 rest = e, at = 0;
      for (int d = R - 1; d >= 0; --d) { const i64 c = rest % sizes[d]; rest /= sizes[d]; at += c * vs[d]; }
      // As the CPU: the value converted to the tensor's dtype first, then added or stored.
      i64 rounded = 0;
      loom_store(&rounded, 0, (int)type, loom_load(bufs[0], at, (int)value_type));
      v = loom_load(&rounded, 0, (int)type);
    } else {
      v = loom_load(sp, 0, (int)type);
    }
    if (accumulate) loom_atomic_add(bufs[k + 1], oo, (int)type, v);
    else loom_store(bufs[k + 1], oo, (int)type, v);
  }
}

// One thread per line along dim; sums in double for floating dtypes, in int64 otherwise.
LOOM_KERNEL loom_cumsum(const i64* ip, const i64* sp, void* const* bufs) {
  const int r = (int)ip[1];
  const i64* sizes = ip + 2; const i64* xs = sizes + r; const i64* os = xs + r;
  const i64 dim = os[r], xt = os[r + 1], ot = os[r + 2];
  LOOM_FOR_EACH(line, ip[0]) {
    i64 rest = line, xo = 0, oo = 0;
    for (int d = r - 1; d >= 0; --d) {
      if (d == dim) continue;
      const i64 c = rest % sizes[d]; rest /= sizes[d];
      xo += c * xs[d]; oo += c * os[d];
    }
    const i64 n = r > 0 ? sizes[dim] : 1, xstep = r > 0 ? xs[dim] : 0, ostep = r > 0 ? os[dim] : 0;
    double fsum = 0.0;
    i64 isum = 0;
    for (i64 j = 0; j < n; ++j) {
      const loom_value v = loom_load(bufs[0], xo + j * xstep, (int)xt);
      if (v.is_float) { fsum += v.d; loom_store(bufs[1], oo + j * ostep, (int)ot, loom_float(fsum)); }
      else { isum += v.i; loom_store(bufs[1], oo + j * ostep, (int)ot, loom_int(isum)); }
    }
  }
}

// Python's floor division and remainder on integers, in the result dtype T.
template <class T> LOOM_FN T loom_divmod(T a, T b, bool remainder) {
  const T q = (T)(a / b), r = (T)(a % b);
  if (remainder) return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? (T)(r + b) : r;
  return (r != T(0) && ((a < T(0)) != (b < T(0)))) ? (T)(q - T(1)) : q;
}

LOOM_KERNEL loom_int_divmod(const i64* ip, const i64* sp, void* const* bufs) {
  const int r = (int)ip[1];
  const i64* t = ip + 2 + 3 * r;
  const bool remainder = t[0] != 0;
  const int at = (int)t[1], bt = (int)t[2], ot = (int)t[3];
  const bool a_scalar = t[4] != 0, b_scalar = t[5] != 0;
  const i64 code = t[6];
  const i64* sizes = ip + 2; const i64* as = sizes + r; const i64* bs = as + r;
  LOOM_FOR_EACH(e, ip[0]) {
    i64 rest = e, ao = 0, bo = 0;
    for (int d = r - 1; d >= 0; --d) { const i64 c = rest % sizes[d]; rest /= sizes[d]; ao += c * as[d]; bo += c * bs[d]; }
    const i64 a = a_scalar ? sp[0] : loom_load(bufs[0], ao, at).i;
    const i64 b = b_scalar ? sp[1] : loom_load(bufs[1], bo, bt).i;
    i64 q;
    if (ot == 1) { const u8 x = (u8)a, y = (u8)b; if (y == 0) { loom_report(bufs[3], code); continue; } q = loom_divmod<u8>(x, y, remainder); }
    else if (ot == 8) { const i8 x = (i8)a, y = (i8)b; if (y == 0) { loom_report(bufs[3], code); continue; } q = loom_divmod<i8>(x, y, remainder); }
    else if (ot == 9) { const i16 x = (i16)a, y = (i16)b; if (y == 0) { loom_report(bufs[3], code); continue; } q = loom_divmod<i16>(x, y, remainder); }
    else if (ot == 2) { const int x = (int)a, y = (int)b; if (y == 0) { loom_report(bufs[3], code); continue; } q = loom_divmod<int>(x, y, remainder); }
    else { if (b == 0) { loom_report(bufs[3], code); continue; } q = loom_divmod<i64>(a, b, remainder); }
    loom_store(bufs[2], e, ot, loom_int(q));
  }
}

// One thread per element of every product; sums in int64 as the CPU's loops.
LOOM_KERNEL loom_int_matmul(const i64* ip, const i64* sp, void* const* bufs) {
  const i64 batches = ip[0], m = ip[1], n = ip[2], k = ip[3];
  const i64 ars = ip[4], acs = ip[5], brs = ip[6], bcs = ip[7], crs = ip[8];
  const int type = (int)ip[9];
  const char* const* A = (const char* const*)bufs[0];
  const char* const* B = (const char* const*)bufs[1];
  char* const* C = (char* const*)bufs[2];
  LOOM_FOR_EACH(e, batches * m * n) {
    const i64 b = e / (m * n), i = e / n % m, j = e % n;
    i64 acc = 0;
    for (i64 p = 0; p < k; ++p) acc += loom_load(A[b], i * ars + p * acs, type).i * loom_load(B[b], p * brs + j * bcs, type).i;
    loom_store(C[b], i * crs + j, type, loom_int(acc));
  }
}
)";

}  // namespace

const char* cuda_library_kernels() { return kKernels; }

const std::string& cuda_library_source() {
  static const std::string source =
      "// loom's library kernels (graph/cuda_library_source.cpp).\n" + cuda::device_helpers() + kKernels;
  return source;
}

}  // namespace loom::graph
