#include "runtime/cpu/kernels.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "runtime/cpu/strided_loop.h"
#include "runtime/error.h"

namespace loom::cpu {
namespace {

// Calls gen(i, T{}) -> T for every element of dst, i being its row-major index whatever dst's
// strides: random fills of arrays made like a permuted tensor (rand_like) must give each element
// the value it would have in a contiguous result.
template <typename Gen>
void generate(const Array& dst, Gen&& gen) {
  visit_dtype(dst.dtype, [&](auto tag) {
    using T = decltype(tag);
    int64_t i = 0;
    for_each_row<1>(dst.sizes(), {static_cast<char*>(dst.data())}, {byte_strides(dst.layout, sizeof(T))},
                    [&](const Row<1>& r) {
                      char* p = r.ptr[0];
                      for (int64_t k = 0; k < r.size; ++k, p += r.stride[0]) *reinterpret_cast<T*>(p) = gen(i++, tag);
                    });
  });
}

void require_contiguous(const Array& a, const char* what) {
  LOOM_CHECK(a.is_contiguous(), Runtime, what, ": output must be contiguous");
}

}  // namespace

void copy(const Array& dst, const Array& src) {
  size_t dsize = itemsize(dst.dtype), ssize = itemsize(src.dtype);
  if (dst.dtype == src.dtype && same_dense_order(dst.layout, src.layout)) {
    std::memmove(dst.data(), src.data(), static_cast<size_t>(dst.numel()) * dsize);
    return;
  }
  std::array<char*, 2> base = {static_cast<char*>(dst.data()), static_cast<char*>(src.data())};
  std::array<Dims, 2> strides = {byte_strides(dst.layout, dsize), byte_strides(src.layout, ssize)};
  visit_dtype(dst.dtype, [&](auto dtag) {
    visit_dtype(src.dtype, [&](auto stag) {
      using D = decltype(dtag);
      using S = decltype(stag);
      for_each_row<2>(dst.sizes(), base, strides, [](const Row<2>& r) {
        char* d = r.ptr[0];
        const char* s = r.ptr[1];
        // Rows dense on both sides (a permuted copy's) move as one block each: the element loop
        // with byte strides took twice as long on rows of 16 floats (eager cat of three permuted
        // (16, 4, 32, 16) float32 pieces, one thread: 70 -> 35 us).
        if constexpr (std::is_same_v<D, S>) {
          if (r.stride[0] == sizeof(D) && r.stride[1] == sizeof(S)) {
            std::memmove(d, s, static_cast<size_t>(r.size) * sizeof(D));
            return;
          }
        }
        for (int64_t i = 0; i < r.size; ++i, d += r.stride[0], s += r.stride[1])
          *reinterpret_cast<D*>(d) = convert<D>(*reinterpret_cast<const S*>(s));
      });
    });
  });
}

void fill(const Array& dst, Scalar value) {
  visit_dtype(dst.dtype, [&](auto tag) {
    using T = decltype(tag);
    T v = value.to<T>();
    for_each_row<1>(dst.sizes(), {static_cast<char*>(dst.data())}, {byte_strides(dst.layout, sizeof(T))},
                    [v](const Row<1>& r) {
                      char* p = r.ptr[0];
                      for (int64_t i = 0; i < r.size; ++i, p += r.stride[0]) *reinterpret_cast<T*>(p) = v;
                    });
  });
}

void arange(const Array& dst, Scalar start, Scalar step) {
  require_contiguous(dst, "arange");
  // Integer results are computed in integers, exact beyond 2^53 where doubles are not.
  bool integral = is_integral(dst.dtype) && !start.is_float() && !step.is_float();
  int64_t istart = start.as_int(), istep = step.as_int();
  double fstart = start.as_double(), fstep = step.as_double();
  generate(dst, [=](int64_t i, auto tag) {
    using T = decltype(tag);
    return integral ? convert<T>(istart + i * istep) : convert<T>(fstart + static_cast<double>(i) * fstep);
  });
}

void linspace(const Array& dst, double start, double end) {
  require_contiguous(dst, "linspace");
  int64_t n = dst.numel();
  // Like PyTorch, the first half counts up from start and the second half down from end, so
  // both endpoints are exact (a single point is start).
  int64_t half = n == 1 ? 1 : n / 2;
  visit_dtype(dst.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr bool integral = std::is_integral_v<T>;
    // An integer result takes integer endpoints, as PyTorch converts its Scalars to the dtype.
    double first = integral ? static_cast<double>(convert<T>(start)) : start;
    double last = integral ? static_cast<double>(convert<T>(end)) : end;
    double step = n > 1 ? (last - first) / static_cast<double>(n - 1) : 0.0;
    // Multiply-adds rounded once, as PyTorch's kernels are compiled (with FMA contraction on
    // AVX2 and CUDA): an integer result can depend on that last bit (5 - 0.4 * 10 truncates to 0).
    // Within a vector, PyTorch's arange rounds the product and the sum apart.
    auto value = [&](int64_t i) {
      return i < half ? std::fma(step, static_cast<double>(i), first)
                      : std::fma(-step, static_cast<double>(n - 1 - i), last);
    };
    // PyTorch's CPU kernel (1.13, AVX2) fills two 32-byte vectors at a time: each starts from
    // its first element's value truncated to the dtype and counts on by step, truncating again;
    // the elements left over (fewer than two vectors) are computed one by one. For an integer
    // dtype those chunk boundaries change the rounding (linspace(5, -5, 20, dtype=int32): 6 of
    // 20 elements), so they are reproduced here; PyTorch's CUDA kernel truncates each value on
    // its own, as loom's does. Past 32768 elements PyTorch splits the loop between its threads,
    // which moves the boundaries with its thread count; loom keeps one loop.
    constexpr int64_t lanes = 32 / static_cast<int64_t>(sizeof(T));
    int64_t vectorized = integral ? n - n % (2 * lanes) : 0;
    T* out = static_cast<T*>(dst.data());
    for (int64_t i = 0; i < n; ++i) {
      if (i < vectorized) {
        int64_t base = i - i % lanes;
        double from = static_cast<double>(convert<T>(value(base)));
        volatile double offset = static_cast<double>(i - base) * step;  // Vectorized::arange: not fused
        out[i] = convert<T>(from + offset);
      } else {
        out[i] = convert<T>(value(i));
      }
    }
  });
}

void uniform(const Array& dst, double low, double high, PhiloxState state) {
  int digits = dtype_info(dst.dtype).mantissa_digits;
  generate(dst, [=](int64_t i, auto tag) {
    using T = decltype(tag);
    double u = random_unit(random_u64(random_block(state, static_cast<uint64_t>(i)), 0), digits);
    return convert<T>(low + (high - low) * u);
  });
}

void normal(const Array& dst, double mean, double std, PhiloxState state) {
  generate(dst, [=](int64_t i, auto tag) {
    using T = decltype(tag);
    return convert<T>(mean + std * random_normal(random_block(state, static_cast<uint64_t>(i))));
  });
}

void random_int(const Array& dst, int64_t low, int64_t high, PhiloxState state) {
  uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  generate(dst, [=](int64_t i, auto tag) {
    using T = decltype(tag);
    uint64_t r = random_u64(random_block(state, static_cast<uint64_t>(i)), 0) % range;
    return convert<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + r));
  });
}

}  // namespace loom::cpu
