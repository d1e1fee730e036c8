// The op library, continued (lazy/ops.h): reductions and scans beyond sum / mean / var, written
// in primitives: the reductions of lazy/ops_reduce.cpp (so nansum, nanmean, count_nonzero,
// aminmax, var_mean and std_mean fuse with the elementwise work around them into row kernels),
// the scans of lazy/ops_scan.cpp, and Sort (lazy/ops_sort.cpp) for the order statistics
// (median, mode, quantile), whose values are gathers at the selected indices so they
// differentiate as PyTorch's do.
#pragma once

#include <optional>
#include <string_view>
#include <utility>

#include "lazy/ops.h"

namespace loom::ops {

// (var or std, mean) over dims, with var's correction.
std::pair<Tensor, Tensor> var_mean(const Tensor& x, const DimList& dims = {}, double correction = 1,
                                   bool keepdim = false);
std::pair<Tensor, Tensor> std_mean(const Tensor& x, const DimList& dims = {}, double correction = 1,
                                   bool keepdim = false);
// (min, max) over dim, or over every element.
std::pair<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
// sum / mean treating NaN as absent (nanmean of nothing but NaN is NaN).
Tensor nansum(const Tensor& x, const DimList& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor nanmean(const Tensor& x, const DimList& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor count_nonzero(const Tensor& x, const DimList& dims = {});

// Scans along dim.
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor logcumsumexp(const Tensor& x, int64_t dim);
// (running max or min, index of its element): a NaN takes over, ties move to the later element.
std::pair<Tensor, Tensor> cummax(const Tensor& x, int64_t dim);
std::pair<Tensor, Tensor> cummin(const Tensor& x, int64_t dim);

// The lower median of every element (NaN if one is NaN; nanmedian: of the others). Its gradient
// is shared evenly by the elements equal to it, as PyTorch's.
Tensor median(const Tensor& x, bool ignore_nan = false);
// (values, indices) along dim: the element at position (n - 1) / 2 of the stable ascending
// order, or the first NaN (nanmedian: the median of the non-NaN elements).
std::pair<Tensor, Tensor> median_dim(const Tensor& x, int64_t dim, bool keepdim = false, bool ignore_nan = false);
// (the most frequent value along dim, the index of its last occurrence); ties: the smallest value.
std::pair<Tensor, Tensor> mode(const Tensor& x, int64_t dim = -1, bool keepdim = false);
// The q-quantiles (q a number, or a 0-d or 1-d tensor of x's dtype whose dim leads the result)
// along dim or of every element; interpolation: linear, lower, higher, midpoint or nearest.
// nanquantile (ignore_nan): of the non-NaN elements.
Tensor quantile(const Tensor& x, const Arg& q, std::optional<int64_t> dim = {}, bool keepdim = false,
                std::string_view interpolation = "linear", bool ignore_nan = false);

}  // namespace loom::ops
