// Definitions of the scan primitives beyond Cumsum (lazy/ops_data.cpp): running products,
// running log-sum-exp, and the index of the running maximum / minimum along one dim. They are
// primitives because a scan cannot be written in loom's other ops (cumprod as exp(cumsum(log))
// is wrong for zeros and negatives, and inexact); cummax / cummin values are gathered at the
// indices (lazy/statistics.cpp), so their gradient is gather's, as PyTorch's.
//
// attrs[0] = the dim (wrapped; 0 for a 0-d input). Floats accumulate in double and integers in
// int64, as PyTorch's CPU kernels; the CUDA kernel is loom_scan (graph/cuda_library_source.cpp).
#include <cmath>
#include <limits>

#include "lazy/op.h"
#include "runtime/error.h"

namespace loom {
namespace {

// running = log(exp(running) + exp(x)), exact at infinities (PyTorch's rule: two equal
// infinities give that infinity; a NaN propagates).
double log_add_exp(double running, double x) {
  double lo = std::isnan(x) ? x : std::min(running, x);
  double hi = std::isnan(x) ? x : std::max(running, x);
  if (lo != hi || std::isfinite(lo)) return hi + std::log1p(std::exp(lo - hi));
  return running;
}

// The running extreme's index: a NaN always takes over (and stays until the next NaN), ties
// move to the later element, as PyTorch's cummax / cummin.
template <bool Max, typename T>
bool takes_over(T x, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x)) return true;
    if (std::isnan(best)) return false;
  }
  return Max ? x >= best : x <= best;
}

enum class Scan { Prod, LogSumExp, ArgMax, ArgMin };

OutputMeta infer_scan(Scan kind, const InputMeta& x) {
  switch (kind) {
    case Scan::Prod: return {is_floating(x.dtype) ? x.dtype : DType::Int64, Dims(x.shape)};
    case Scan::LogSumExp:
      LOOM_CHECK(is_floating(x.dtype), Runtime, "\"logcumsumexp_out_cpu\" not implemented for '",
                 dtype_info(x.dtype).scalar_type_name, "'");
      return {x.dtype, Dims(x.shape)};
    default: return {DType::Int64, Dims(x.shape)};
  }
}

// Runs `scan(values, results, n, stride)` over every line along dim of a contiguous copy of x in
// the accumulation type A (double or int64), then writes the results (type R) into out.
template <typename A, typename R, typename Line>
void for_each_line(const Array& x, int64_t dim, const Array& out, Line&& line) {
  Array src = copy_to(x, std::is_floating_point_v<A> ? DType::Float64 : DType::Int64, kCPU);
  Array acc = empty(x.sizes(), std::is_same_v<R, double> ? DType::Float64 : DType::Int64, kCPU);
  int64_t n = x.ndim() == 0 ? 1 : x.sizes()[dim];
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < x.ndim(); ++d) inner *= x.sizes()[d];
  int64_t outer = x.numel() / std::max<int64_t>(n * inner, 1);
  const A* s = static_cast<const A*>(src.data());
  R* a = static_cast<R*>(acc.data());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) line(s + o * n * inner + i, a + o * n * inner + i, n, inner);
  copy_(out, acc);
}

template <Scan kind>
void run_scan(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  const Array& x = *in[0].array;
  int64_t dim = attrs[0];
  if (x.numel() == 0) return;
  bool floating = is_floating(x.dtype);
  if constexpr (kind == Scan::Prod) {
    if (floating) {
      for_each_line<double, double>(x, dim, out, [](const double* s, double* a, int64_t n, int64_t step) {
        double running = 1;
        for (int64_t k = 0; k < n; ++k) a[k * step] = running *= s[k * step];
      });
    } else {
      // Unsigned arithmetic: an overflow wraps (as PyTorch's int64 products do) instead of being UB.
      for_each_line<int64_t, int64_t>(x, dim, out, [](const int64_t* s, int64_t* a, int64_t n, int64_t step) {
        uint64_t running = 1;
        for (int64_t k = 0; k < n; ++k) {
          running *= static_cast<uint64_t>(s[k * step]);
          a[k * step] = static_cast<int64_t>(running);
        }
      });
    }
  } else if constexpr (kind == Scan::LogSumExp) {
    for_each_line<double, double>(x, dim, out, [](const double* s, double* a, int64_t n, int64_t step) {
      double running = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < n; ++k) a[k * step] = running = log_add_exp(running, s[k * step]);
    });
  } else {
    constexpr bool kMax = kind == Scan::ArgMax;
    auto indices = [](const auto* s, int64_t* a, int64_t n, int64_t step) {
      auto best = s[0];
      int64_t at = 0;
      for (int64_t k = 0; k < n; ++k) {
        if (takes_over<kMax>(s[k * step], best)) {
          best = s[k * step];
          at = k;
        }
        a[k * step] = at;
      }
    };
    if (floating) for_each_line<double, int64_t>(x, dim, out, indices);
    else for_each_line<int64_t, int64_t>(x, dim, out, indices);
  }
}

template <Scan kind>
OutputMeta infer(std::span<const InputMeta> in, const Attrs&) {
  return infer_scan(kind, in[0]);
}

template <Scan kind>
void define(OpId id, const char* name) {
  define_op(id, OpDef{.name = name, .cls = OpClass::Other, .infer = infer<kind>, .run_cpu = run_scan<kind>,
                      .data_safe = true});
}

const bool registered = [] {
  define<Scan::Prod>(OpId::Cumprod, "Cumprod");
  define<Scan::LogSumExp>(OpId::Logcumsumexp, "Logcumsumexp");
  define<Scan::ArgMax>(OpId::CumArgmax, "CumArgmax");
  define<Scan::ArgMin>(OpId::CumArgmin, "CumArgmin");
  return true;
}();

}  // namespace
}  // namespace loom
