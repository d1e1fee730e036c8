// The op library, continued (lazy/ops.h): sorting and selection, written in the ordering
// primitives Sort and SearchSorted (lazy/ops_sort.cpp). Values are gathers at Sort's indices, so
// they differentiate as PyTorch's do (the gradient goes to the selected elements), on every
// backend, eagerly or recorded lazily.
//
// Order, as PyTorch's: NaN is greater than every number, -0.0 equals 0.0, and sort is always
// stable (equal elements keep their order), so `stable=False` gives the stable order too, and
// topk / kthvalue / median / mode pick among equal elements by that order.
//
// unique and unique_consecutive have a result whose size depends on the values: on the lazy
// device they are sync points (SyncCause::DataDependentShape, lazy/sync.h), computed on the host
// from the materialized input; their results are materialized tensors of the input's device and
// mode. They are not differentiable (as in PyTorch).
#pragma once

#include <optional>
#include <utility>

#include "lazy/ops.h"

namespace loom::ops {

// (values, indices) of x sorted along dim.
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
// Sorted along dim 0 (the values).
Tensor msort(const Tensor& x);
// The k largest (or smallest) along dim, in order; `sorted` is accepted and always honoured.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);
// The k-th smallest (k from 1) along dim.
std::pair<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim = -1, bool keepdim = false);

// The index at which each value would be inserted into its row of `sorted` (1-d, or with the
// values' leading dims) to keep it sorted: before equal elements, or after them when `right`.
// `sorter` (int64, sorted's shape) sorts the rows when given.
Tensor searchsorted(const Tensor& sorted, const Arg& values, bool out_int32 = false, bool right = false,
                    const Tensor* sorter = nullptr);
// The bucket of each element of input among 1-d boundaries (searchsorted with the roles swapped).
Tensor bucketize(const Arg& input, const Tensor& boundaries, bool out_int32 = false, bool right = false);

// unique: the distinct elements (or slices along dim) in ascending order, the index of each
// element's value among them (inverse, the input's shape, or dim's size along dim) and how
// often each occurs. unique_consecutive: the same for runs of equal neighbours, in order.
struct Unique {
  Tensor values, inverse, counts;
};
Unique unique(const Tensor& x, std::optional<int64_t> dim = {});
Unique unique_consecutive(const Tensor& x, std::optional<int64_t> dim = {});

namespace detail {
// f(x viewed as at least 1-d, wrapped dim) -> (values, indices), viewed back as 0-d for a 0-d x,
// as PyTorch's selections treat a 0-d tensor as one element along dim 0 or -1 (the selections
// here and the order statistics of lazy/statistics.h).
template <typename F>
std::pair<Tensor, Tensor> along(const Tensor& x, int64_t dim, F&& f) {
  int64_t d = wrap_dim(dim, x->ndim());
  if (x->ndim() > 0) return f(x, d);
  auto [values, indices] = f(reshape(x, Dims{1}), int64_t{0});
  return {reshape(values, Dims{}), reshape(indices, Dims{})};
}
}  // namespace detail

}  // namespace loom::ops
