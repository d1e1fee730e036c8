// Definitions of the ordering primitives: Sort (the stable argsort along a dim) and SearchSorted
// (binary search of values in sorted rows). They are primitives because neither can be written in
// loom's other ops; everything else of the family is composed of them in lazy/sorting.cpp and
// lazy/statistics.cpp (sort's values, topk, kthvalue, median, mode, quantile are gathers at
// Sort's indices, so their gradients are gather's, as PyTorch's are scatters to the indices).
//
// Order: PyTorch's comparisons. NaN is greater than every number (last ascending, first
// descending), -0.0 equals 0.0, and equal elements keep their order (stable). The CUDA kernels
// (graph/cuda_library_source.cpp: loom_sort, loom_searchsorted) follow the same rules.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "lazy/op.h"
#include "runtime/error.h"

namespace loom {
namespace {

// A value as the comparisons see it: exact for every dtype (integers stay integers).
template <typename T>
bool before(T a, T b, bool descending) {
  if constexpr (std::is_floating_point_v<T>) {
    if (descending) return (std::isnan(a) && !std::isnan(b)) || a > b;
    return (!std::isnan(a) && std::isnan(b)) || a < b;
  } else {
    return descending ? a > b : a < b;
  }
}

// Visits a contiguous host copy of x as double (floats) or int64 (integers and bools).
template <typename F>
void with_host_values(const Array& x, F&& f) {
  bool floating = is_floating(x.dtype);
  Array host = copy_to(x, floating ? DType::Float64 : DType::Int64, kCPU);
  if (floating) f(static_cast<const double*>(host.data()), host);
  else f(static_cast<const int64_t*>(host.data()), host);
}

// ---- Sort: attrs = [dim (wrapped; 0 for a 0-d input), descending]; the int64 indices that sort
// each line along dim ----

OutputMeta infer_sort(std::span<const InputMeta> in, const Attrs&) { return {DType::Int64, Dims(in[0].shape)}; }

void run_sort(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  const Array& x = *in[0].array;
  if (x.numel() == 0) return;
  int64_t dim = attrs[0];
  bool descending = attrs[1] != 0;
  int64_t n = x.ndim() == 0 ? 1 : x.sizes()[dim];
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < x.ndim(); ++d) inner *= x.sizes()[d];
  int64_t outer = x.numel() / (n * inner);
  Array result = empty(x.sizes(), DType::Int64, kCPU);
  int64_t* r = static_cast<int64_t*>(result.data());
  with_host_values(x, [&](const auto* v, const Array&) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const auto* line = v + o * n * inner + i;
        std::iota(order.begin(), order.end(), int64_t{0});
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return before(line[a * inner], line[b * inner], descending); });
        for (int64_t k = 0; k < n; ++k) r[(o * n + k) * inner + i] = order[static_cast<size_t>(k)];
      }
  });
  copy_(out, result);
}

// ---- SearchSorted: inputs (sorted, values[, sorter]), attrs = [right, out_int32]. For each
// value, the index of the first element of its row of `sorted` that is >= it (> it when right),
// reading the row through sorter when given. `sorted` is 1-d (one row for every value) or has
// the values' leading dims (one row per leading index). ----

OutputMeta infer_searchsorted(std::span<const InputMeta> in, const Attrs& attrs) {
  const InputMeta& sorted = in[0];
  const InputMeta& values = in[1];
  LOOM_CHECK(!sorted.shape.empty(), Runtime,
             "torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension");
  bool leading_match = sorted.shape.size() == values.shape.size() &&
                       std::equal(sorted.shape.begin(), sorted.shape.end() - 1, values.shape.begin());
  LOOM_CHECK(values.shape.size() != 0 || sorted.shape.size() == 1, Runtime,
             "torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension is 1, but we got "
             "boundaries tensor dim(", sorted.shape.size(), ") and input value's dim(0) numel(1)");
  LOOM_CHECK(sorted.shape.size() == 1 || leading_match, Runtime,
             "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
             "tensor and input value tensor must match, but we got boundaries tensor ", format_dims(sorted.shape),
             " and input value tensor ", format_dims(values.shape));
  LOOM_CHECK(sorted.dtype != DType::Bool && values.dtype != DType::Bool, Runtime,
             "\"searchsorted_out_cpu\" not implemented for 'Bool'");
  if (in.size() > 2) {
    const InputMeta& sorter = in[2];
    LOOM_CHECK(std::equal(sorter.shape.begin(), sorter.shape.end(), sorted.shape.begin(), sorted.shape.end()),
               Runtime, "torch.searchsorted(): boundary and sorter must have the same size, but got boundary tensor ",
               format_dims(sorted.shape), " and got sorter tensor ", format_dims(sorter.shape));
    LOOM_CHECK(sorter.dtype == DType::Int64, Runtime,
               "torch.searchsorted(): sorter must be a tensor of long dtype but got dtype ",
               dtype_info(sorter.dtype).scalar_type_name);
  }
  return {attrs[1] ? DType::Int32 : DType::Int64, Dims(values.shape)};
}

// PyTorch's bounds, with its comparisons (a NaN value is past every element). The sorter's
// entries are checked as the search reads them, as the CUDA kernel does.
template <typename T>
int64_t search(const T* row, const int64_t* sorter, int64_t len, T value, bool right) {
  int64_t start = 0, end = len;
  while (start < end) {
    int64_t mid = start + ((end - start) >> 1);
    int64_t at = mid;
    if (sorter) {
      at = sorter[mid];
      LOOM_CHECK(at >= 0 && at < len, Runtime, "torch.searchsorted(): sorter index out of range");
    }
    T m = row[at];
    bool go_right = right ? !(m > value) : !(m >= value);
    if (go_right) start = mid + 1;
    else end = mid;
  }
  return start;
}

void run_searchsorted(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  const Array& sorted = *in[0].array;
  const Array& values = *in[1].array;
  bool right = attrs[0] != 0;
  int64_t len = sorted.sizes().back();
  int64_t rows = sorted.numel() / std::max<int64_t>(len, 1);
  int64_t per_row = sorted.ndim() == 1 ? values.numel() : (values.ndim() ? values.sizes().back() : 1);
  Array sorter;
  if (in.size() > 2) sorter = copy_to(*in[2].array, DType::Int64, kCPU);
  // Both in the common dtype, as PyTorch promotes them.
  DType common = promote_types(sorted.dtype, values.dtype);
  bool floating = is_floating(common);
  DType host = floating ? DType::Float64 : DType::Int64;
  Array b = copy_to(sorted, host, kCPU), v = copy_to(values, host, kCPU);
  Array result = empty(values.sizes(), DType::Int64, kCPU);
  int64_t* r = static_cast<int64_t*>(result.data());
  auto run = [&](const auto* bp, const auto* vp) {
    for (int64_t i = 0; i < values.numel(); ++i) {
      int64_t row = rows == 1 ? 0 : i / per_row;
      const int64_t* srt = sorter.storage ? static_cast<const int64_t*>(sorter.data()) + row * len : nullptr;
      r[i] = search(bp + row * len, srt, len, vp[i], right);
    }
  };
  if (floating) run(static_cast<const double*>(b.data()), static_cast<const double*>(v.data()));
  else run(static_cast<const int64_t*>(b.data()), static_cast<const int64_t*>(v.data()));
  copy_(out, result);
}

const bool registered = [] {
  define_op(OpId::Sort, OpDef{.name = "Sort", .cls = OpClass::Other, .infer = infer_sort, .run_cpu = run_sort,
                              .data_safe = true});
  define_op(OpId::SearchSorted, OpDef{.name = "SearchSorted", .cls = OpClass::Other, .infer = infer_searchsorted,
                                      .run_cpu = run_searchsorted});  // the sorter's indices are checked
  return true;
}();

}  // namespace
}  // namespace loom
