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

// Element e of a scatter's index: its offsets in the index (io), the source (so) and the
// destination without the scattered dim (oo), which the index value then supplies.
LOOM_FN void loom_scatter_offsets(i64 e, int r, const i64* sizes, const i64* os, const i64* is, const i64* ss, i64 dim,
                                  i64* oo, i64* io, i64* so) {
  i64 rest = e;
  *oo = *io = *so = 0;
  for (int d = r - 1; d >= 0; --d) {
    const i64 c = rest % sizes[d]; rest /= sizes[d];
    *io += c * is[d];
    *so += c * ss[d];
    if (d != dim) *oo += c * os[d];
  }
}
LOOM_KERNEL loom_scatter_add(const i64* ip, const i64* sp, void* const* bufs) {
  const int r = (int)ip[1];
  const i64* sizes = ip + 2; const i64* os = sizes + r; const i64* is = os + r; const i64* ss = is + r;
  const i64 dim = ss[r], dim_size = ss[r + 1], type = ss[r + 2], code = ss[r + 3];
  LOOM_FOR_EACH(e, ip[0]) {
    i64 oo, io, so;
    loom_scatter_offsets(e, r, sizes, os, is, ss, dim, &oo, &io, &so);
    const i64 i = ((const i64*)bufs[0])[io];
    if (i < 0 || i >= dim_size) { loom_report(bufs[3], code); continue; }
    if (r > 0) oo += i * os[dim];
    loom_atomic_add(bufs[2], oo, (int)type, loom_load(bufs[1], so, (int)type));
  }
}

// Scatter and ScatterReduce (lazy/ops_data.cpp): src's element e combined into out at index e's
// target along dim, by `kind`: 0 replaces, 1 multiplies, 2 keeps the larger, 3 the smaller (NaN
// wins, as on the CPU). The pass of an include_self=False reduction first sets every target to the
// reduction's identity (`reset`). Any element of the word holding the target is updated with
// compare-and-swap, so 8- and 16-bit types work as the others.
LOOM_FN loom_value loom_scatter_identity(int type, i64 kind) {
  if (kind == 1) return type >= 4 ? loom_float(1.0) : loom_int(1);
  const bool larger = kind == 2;  // amax starts from the lowest value, amin from the highest
  switch (type) {
    case 0: return loom_int(larger ? 0 : 1);
    case 1: return loom_int(larger ? 0 : 255);
    case 8: return loom_int(larger ? -128 : 127);
    case 9: return loom_int(larger ? -32768 : 32767);
    case 2: return loom_int(larger ? -2147483647ll - 1 : 2147483647ll);
    case 3: return loom_int(larger ? (i64)(1ull << 63) : (i64)((1ull << 63) - 1));
    default: return loom_float(larger ? -loom_inf() : loom_inf());
  }
}
LOOM_FN loom_value loom_scatter_combine(i64 kind, loom_value a, loom_value b) {
  if (a.is_float) {
    const double x = a.d, y = b.is_float ? b.d : (double)b.i;
    if (kind == 1) return loom_float(x * y);
    if (x != x) return a;
    if (y != y) return loom_float(y);
    return loom_float(kind == 2 ? (x > y ? x : y) : (x < y ? x : y));
  }
  const i64 x = a.i, y = b.is_float ? (i64)b.d : b.i;
  if (kind == 1) return loom_int((i64)((u64)x * (u64)y));
  return loom_int(kind == 2 ? (x > y ? x : y) : (x < y ? x : y));
}
static __device__ __noinline__ void loom_atomic_combine(void* base, i64 at, int type, i64 kind, loom_value v) {
  const int size = (type <= 1 || type == 8) ? 1 : (type == 4 || type == 5 || type == 9) ? 2 : (type == 2 || type == 6) ? 4 : 8;
  if (size == 8) {
    unsigned long long* word = (unsigned long long*)base + at;
    unsigned long long old = *word, assumed;
    do {
      assumed = old;
      unsigned long long next = assumed;
      loom_store(&next, 0, type, loom_scatter_combine(kind, loom_load(&assumed, 0, type), v));
      old = atomicCAS(word, assumed, next);
    } while (old != assumed);
    return;
  }
  char* p = (char*)base + at * size;
  unsigned int* word = (unsigned int*)((unsigned long long)p & ~3ull);
  const int byte = (int)((unsigned long long)p & 3ull);
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    unsigned int next = assumed;
    loom_store((char*)&next + byte, 0, type, loom_scatter_combine(kind, loom_load((char*)&assumed + byte, 0, type), v));
    old = atomicCAS(word, assumed, next);
  } while (old != assumed);
}
LOOM_KERNEL loom_scatter_reduce(const i64* ip, const i64* sp, void* const* bufs) {
  const int r = (int)ip[1];
  const i64* sizes = ip + 2; const i64* os = sizes + r; const i64* is = os + r; const i64* ss = is + r;
  const i64 dim = ss[r], dim_size = ss[r + 1], type = ss[r + 2], kind = ss[r + 3], reset = ss[r + 4], code = ss[r + 5];
  LOOM_FOR_EACH(e, ip[0]) {
    i64 oo, io, so;
    loom_scatter_offsets(e, r, sizes, os, is, ss, dim, &oo, &io, &so);
    const i64 i = ((const i64*)bufs[0])[io];
    if (i < 0 || i >= dim_size) { loom_report(bufs[3], code); continue; }
    if (r > 0) oo += i * os[dim];
    if (reset) loom_store(bufs[2], oo, (int)type, loom_scatter_identity((int)type, kind));
    else if (kind == 0) loom_store(bufs[2], oo, (int)type, loom_load(bufs[1], so, (int)type));
    else loom_atomic_combine(bufs[2], oo, (int)type, kind, loom_load(bufs[1], so, (int)type));
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
  const i64 has_values = vs[R], accumulate = vs[R + 1], type = vs[R + 2], value_type = vs[R + 3], wrap = vs[R + 4];
  const i64 code = vs[R + 5];
  LOOM_FOR_EACH(e, ip[0]) {
    i64 oo;
    if (!loom_indexed_offset(ip, bufs, e, wrap, code, bufs[k + 2], &oo)) continue;
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

// Col2Im (lazy/ops_windows.cpp): out[b, x..., r] sums in[b, j..., o..., r] over the window
// elements j (row-major) whose window o lands it on x; one thread per output element, no
// atomics, in the CPU's order and precision (double, int64 for integers).
LOOM_KERNEL loom_col2im(const i64* ip, const i64* sp, void* const* bufs) {
  const int k = (int)ip[1];
  const i64 rest_size = ip[3];
  const i64* extent = ip + 4; const i64* size = extent + k; const i64* count = size + k;
  const i64* stride = count + k; const i64* dilation = stride + k; const i64* st = dilation + k;
  const int type = (int)st[2 * k + 2];
  i64 taps = 1;
  for (int i = 0; i < k; ++i) taps *= size[i];
  LOOM_FOR_EACH(e, ip[0]) {
    const i64 r = e % rest_size, plane = e / rest_size;  // plane: b and x... (row-major)
    i64 b = plane;
    for (int i = k - 1; i >= 0; --i) b /= extent[i];
    const i64 base = b * st[0] + r * st[2 * k + 1];
    double fsum = 0.0;
    i64 isum = 0;
    bool is_float = false;  // no element lands: a zero of any type
    for (i64 t = 0; t < taps; ++t) {
      i64 left = t, at = base, rest = plane;  // x_i re-derived per tap: no per-thread array, any k
      bool lands = true;
      for (int i = k - 1; i >= 0; --i) {
        const i64 x = rest % extent[i]; rest /= extent[i];
        const i64 j = left % size[i]; left /= size[i];
        const i64 p = x - j * dilation[i];
        if (p < 0 || p % stride[i] != 0 || p / stride[i] >= count[i]) { lands = false; break; }
        at += j * st[1 + i] + (p / stride[i]) * st[1 + k + i];
      }
      if (!lands) continue;
      const loom_value v = loom_load(bufs[0], at, type);
      is_float = v.is_float;
      if (v.is_float) fsum += v.d; else isum += v.i;
    }
    loom_store(bufs[1], e, type, is_float ? loom_float(fsum) : loom_int(isum));
  }
}

// The kernels over lines along a dim (cumsum, the scans, sort) read the ip cuda_lowering.cpp's
// lines_ip writes: lines, r, sizes, x's strides, out's strides, then the tail: dim, x's dtype,
// out's dtype and the kernel's own words. A line: where it starts in x and out, its length and
// its steps along dim.
struct loom_line { i64 xo, oo, n, xstep, ostep; };
LOOM_FN const i64* loom_line_tail(const i64* ip) { return ip + 2 + 3 * ip[1]; }
static __device__ __noinline__ loom_line loom_line_at(const i64* ip, i64 line) {
  const int r = (int)ip[1];
  const i64* sizes = ip + 2; const i64* xs = sizes + r; const i64* os = xs + r;
  const i64 dim = os[r];
  loom_line l = {0, 0, r > 0 ? sizes[dim] : 1, r > 0 ? xs[dim] : 0, r > 0 ? os[dim] : 0};
  i64 rest = line;
  for (int d = r - 1; d >= 0; --d) {
    if (d == dim) continue;
    const i64 c = rest % sizes[d]; rest /= sizes[d];
    l.xo += c * xs[d]; l.oo += c * os[d];
  }
  return l;
}

// One thread per line along dim; sums in double for floating dtypes, in int64 otherwise.
LOOM_KERNEL loom_cumsum(const i64* ip, const i64* sp, void* const* bufs) {
  const i64 xt = loom_line_tail(ip)[1], ot = loom_line_tail(ip)[2];
  LOOM_FOR_EACH(line, ip[0]) {
    const loom_line l = loom_line_at(ip, line);
    const i64 n = l.n, xo = l.xo, oo = l.oo, xstep = l.xstep, ostep = l.ostep;
    double fsum = 0.0;
    i64 isum = 0;
    for (i64 j = 0; j < n; ++j) {
      const loom_value v = loom_load(bufs[0], xo + j * xstep, (int)xt);
      if (v.is_float) { fsum += v.d; loom_store(bufs[1], oo + j * ostep, (int)ot, loom_float(fsum)); }
      else { isum += v.i; loom_store(bufs[1], oo + j * ostep, (int)ot, loom_int(isum)); }
    }
  }
}

// ---- scans, sorting and sampling (lazy/ops_scan.cpp, ops_sort.cpp, ops_random.cpp) ----

// log(exp(running) + exp(x)), exact at infinities, as lazy/ops_scan.cpp's log_add_exp.
LOOM_FN double loom_log_add_exp(double running, double x) {
  const double lo = x != x ? x : (x < running ? x : running);
  const double hi = x != x ? x : (running < x ? x : running);
  if (lo != hi || (lo == lo && !loom_isinf(lo))) return hi + log1p(exp(lo - hi));
  return running;
}
// Whether x becomes the running extreme: a NaN always does, ties move to the later element.
LOOM_FN bool loom_takes_over(loom_value x, loom_value best, bool is_max) {
  if (x.is_float) {
    if (x.d != x.d) return true;
    if (best.d != best.d) return false;
    return is_max ? x.d >= best.d : x.d <= best.d;
  }
  return is_max ? x.i >= best.i : x.i <= best.i;
}

// One thread per line along dim (a lines ip whose tail ends with the kind): 0 cumprod (in double for
// floats, wrapping int64 otherwise), 1 logcumsumexp (double), 2 / 3 the index of the running
// max / min.
LOOM_KERNEL loom_scan(const i64* ip, const i64* sp, void* const* bufs) {
  const i64* tail = loom_line_tail(ip);
  const i64 xt = tail[1], ot = tail[2], kind = tail[3];
  LOOM_FOR_EACH(line, ip[0]) {
    const loom_line l = loom_line_at(ip, line);
    const i64 n = l.n, xo = l.xo, oo = l.oo, xstep = l.xstep, ostep = l.ostep;
    double f = kind == 1 ? -loom_inf() : 1.0;
    u64 product = 1;
    loom_value best = loom_load(bufs[0], xo, (int)xt);
    i64 at = 0;
    for (i64 j = 0; j < n; ++j) {
      const loom_value v = loom_load(bufs[0], xo + j * xstep, (int)xt);
      loom_value out;
      if (kind == 0 && v.is_float) { f *= v.d; out = loom_float(f); }
      else if (kind == 0) { product *= (u64)v.i; out = loom_int((i64)product); }
      else if (kind == 1) { f = loom_log_add_exp(f, v.d); out = loom_float(f); }
      else {
        if (loom_takes_over(v, best, kind == 2)) { best = v; at = j; }
        out = loom_int(at);
      }
      loom_store(bufs[1], oo + j * ostep, (int)ot, out);
    }
  }
}

// A sort key whose unsigned order is the elements' order: NaN after every number (before, when
// descending), -0.0 equal to 0.0. Ties are broken by index, so the sort is stable.
LOOM_FN u64 loom_sort_key(loom_value v, bool descending) {
  u64 key;
  if (v.is_float && v.d != v.d) return descending ? 0ull : ~0ull;
  if (v.is_float) {
    union { double d; u64 u; } bits;
    bits.d = v.d == 0.0 ? 0.0 : v.d;
    key = (bits.u >> 63) ? ~bits.u : bits.u | 0x8000000000000000ull;
  } else {
    key = (u64)v.i ^ 0x8000000000000000ull;
  }
  return descending ? ~key : key;
}

// One block per line (a lines ip whose tail ends with descending and the line's length padded
// to a power of two): a bitonic sort of (key, index) pairs, in shared memory up to LOOM_SORT_SHARED
// elements, else in bufs[2] and bufs[3] (scratch, `padded` words per line); writes the indices.
#define LOOM_SORT_SHARED 2048
LOOM_KERNEL loom_sort(const i64* ip, const i64* sp, void* const* bufs) {
  __shared__ u64 shared_keys[LOOM_SORT_SHARED];
  __shared__ int shared_at[LOOM_SORT_SHARED];
  const i64* tail = loom_line_tail(ip);
  const i64 xt = tail[1], descending = tail[3], padded = tail[4];
  for (i64 line = blockIdx.x; line < ip[0]; line += gridDim.x) {
    const loom_line l = loom_line_at(ip, line);
    const i64 n = l.n, xo = l.xo, oo = l.oo, xstep = l.xstep, ostep = l.ostep;
    const bool shared = padded <= LOOM_SORT_SHARED;
    u64* keys = shared ? shared_keys : (u64*)bufs[2] + line * padded;
    int* at = shared ? shared_at : (int*)bufs[3] + line * padded;
    for (i64 i = threadIdx.x; i < padded; i += blockDim.x) {
      keys[i] = i < n ? loom_sort_key(loom_load(bufs[0], xo + i * xstep, (int)xt), descending != 0) : ~0ull;
      at[i] = (int)i;
    }
    __syncthreads();
    for (i64 size = 2; size <= padded; size <<= 1) {
      for (i64 stride = size >> 1; stride > 0; stride >>= 1) {
        for (i64 i = threadIdx.x; i < padded; i += blockDim.x) {
          const i64 j = i ^ stride;
          if (j <= i) continue;
          const bool after = keys[i] > keys[j] || (keys[i] == keys[j] && at[i] > at[j]);
          if (after == ((i & size) == 0)) {
            const u64 k = keys[i]; keys[i] = keys[j]; keys[j] = k;
            const int a = at[i]; at[i] = at[j]; at[j] = a;
          }
        }
        __syncthreads();
      }
    }
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) ((i64*)bufs[1])[oo + i * ostep] = at[i];
    __syncthreads();
  }
}

// One thread per value: its bound in its row of the sorted tensor (bufs[0]), read through the
// sorter (bufs[2]) when there is one, compared in double when either dtype is floating. ip: n, r,
// the values' sizes and strides, the sorted tensor's and the sorter's row strides over them, the
// result's strides, then len, the sorted and sorter strides along a row, right, the three dtypes,
// has_sorter, floating, code.
LOOM_KERNEL loom_searchsorted(const i64* ip, const i64* sp, void* const* bufs) {
  const int r = (int)ip[1];
  const i64* sizes = ip + 2; const i64* vs = sizes + r; const i64* bs = vs + r; const i64* ss = bs + r;
  const i64* os = ss + r; const i64* t = os + r;
  const i64 len = t[0], bstep = t[1], sstep = t[2], right = t[3], bt = t[4], vt = t[5], ot = t[6];
  const i64 has_sorter = t[7], floating = t[8], code = t[9];
  LOOM_FOR_EACH(e, ip[0]) {
    i64 rest = e, vo = 0, bo = 0, so = 0, oo = 0;
    for (int d = r - 1; d >= 0; --d) {
      const i64 c = rest % sizes[d]; rest /= sizes[d];
      vo += c * vs[d]; bo += c * bs[d]; so += c * ss[d]; oo += c * os[d];
    }
    const loom_value v = loom_load(bufs[1], vo, (int)vt);
    const double vd = v.is_float ? v.d : (double)v.i;
    i64 start = 0, end = len;
    bool bad = false;
    while (start < end) {
      const i64 mid = start + ((end - start) >> 1);
      i64 k = mid;
      if (has_sorter) {
        k = ((const i64*)bufs[2])[so + mid * sstep];
        if (k < 0 || k >= len) { bad = true; break; }
      }
      const loom_value m = loom_load(bufs[0], bo + k * bstep, (int)bt);
      bool go_right;
      if (floating) {
        const double md = m.is_float ? m.d : (double)m.i;
        go_right = right ? !(md > vd) : !(md >= vd);
      } else {
        go_right = right ? !(m.i > v.i) : !(m.i >= v.i);
      }
      if (go_right) start = mid + 1; else end = mid;
    }
    if (bad) { loom_report(bufs[4], code); continue; }
    loom_store(bufs[3], oo, (int)ot, loom_int(start));
  }
}

// runtime/random.h random_poisson, step for step: draw j of an element is the Philox block of
// counter j keyed by the element's own block.
static __device__ __noinline__ double loom_random_poisson(const loom_block& b, double rate) {
  if (rate == 0) return 0;
  const u64 seed = ((u64)b.x[1] << 32) | b.x[0], offset = ((u64)b.x[3] << 32) | b.x[2];
  u64 draw = 0;
  if (rate < 10) {
    const double limit = exp(-rate);
    double product = 1, count = 0;
    for (;;) {
      const loom_block d = loom_philox(draw++, seed, offset);
      for (int pair = 0; pair < 2; ++pair) {
        product *= loom_random_unit(loom_random_u64(d, pair), 53);
        if (product <= limit) return count;
        count += 1;
      }
    }
  }
  const double root = sqrt(rate), log_rate = log(rate);
  const double spread = 0.931 + 2.53 * root, shift = -0.059 + 0.02483 * spread;
  const double inv_alpha = 1.1239 + 1.1328 / (spread - 3.4), v_accept = 0.9277 - 3.6224 / (spread - 2);
  for (;;) {
    const loom_block d = loom_philox(draw++, seed, offset);
    const double u = loom_random_unit(loom_random_u64(d, 0), 53) - 0.5, v = loom_random_unit(loom_random_u64(d, 1), 53);
    const double us = 0.5 - fabs(u);
    const double k = floor((2 * shift / us + spread) * u + rate + 0.43);
    if (us >= 0.07 && v <= v_accept) return k;
    if (k < 0 || (us < 0.013 && v > us)) continue;
    const double lhs = log(v) + log(inv_alpha) - log(shift / (us * us) + spread);
    if (lhs <= -rate + k * log_rate - lgamma(k + 1)) return k;
  }
}

// ip: loom_offset2's (n, r, sizes, the result's strides, the rates' strides), then the rates' and
// the result's dtypes and the error code; sp: seed, offset.
LOOM_KERNEL loom_poisson(const i64* ip, const i64* sp, void* const* bufs) {
  const i64* t = ip + 2 + 3 * ip[1];
  const int rt = (int)t[0], ot = (int)t[1];
  const i64 code = t[2];
  LOOM_FOR_EACH(i, ip[0]) {
    i64 o, x;
    loom_offset2(ip, i, &o, &x);
    const double rate = loom_load(bufs[0], x, rt).d;
    if (!(rate >= 0)) { loom_report(bufs[2], code); continue; }
    const double k = loom_isinf(rate) ? rate : loom_random_poisson(loom_philox((u64)i, (u64)sp[0], (u64)sp[1]), rate);
    loom_store(bufs[1], o, ot, loom_float(k));
  }
}

// Python's floor division and remainder on integers, in the result dtype T.
template <class T> LOOM_FN T loom_divmod(T a, T b, bool remainder) {
  if (T(-1) < T(0) && b == T(-1)) return remainder ? T(0) : T(u64(0) - u64(a));  // lazy/math.h int_div
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
