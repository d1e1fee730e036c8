#include "lazy/statistics.h"

#include <cmath>
#include <limits>

#include "lazy/autograd.h"
#include "lazy/sorting.h"
#include "runtime/error.h"

namespace loom::ops {
namespace {

Tensor apply_along(OpId op, const Tensor& x, int64_t dim) {
  Attrs attrs;
  attrs.push_back(x->ndim() == 0 ? 0 : wrap_dim(dim, x->ndim()));
  return apply(op, {Arg(x)}, std::move(attrs));
}

Tensor isnan(const Tensor& x) { return unary(OpId::IsNan, x); }

void require_nonempty_dim(const char* name, const Tensor& x, int64_t d) {
  LOOM_CHECK(x->sizes()[d] > 0, Index, name, "(): Expected reduction dim ", d, " to have non-zero size.");
}

std::pair<Tensor, Tensor> keep_or_squeeze(Tensor values, Tensor indices, int64_t d, bool keepdim) {
  if (keepdim) return {std::move(values), std::move(indices)};
  return {squeeze(values, DimList{d}), squeeze(indices, DimList{d})};
}

// 0, 1, ..., n - 1 along dim d of a rank-`ndim` shape (1 elsewhere), to broadcast.
Tensor positions(int64_t n, int64_t d, int64_t ndim, const Tensor& like) {
  Dims shape(static_cast<size_t>(ndim), 1);
  shape[static_cast<size_t>(d)] = n;
  Tensor i = arange(n, Scalar(int64_t{0}), Scalar(int64_t{1}), DType::Int64, {like->device(), like->is_lazy()});
  return reshape(i, shape);
}

}  // namespace

// ---- reductions ----

std::pair<Tensor, Tensor> var_mean(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  LOOM_CHECK(is_floating(x->dtype()), Runtime, "var_mean only support floating point and complex dtypes");
  return {var(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

std::pair<Tensor, Tensor> std_mean(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  LOOM_CHECK(is_floating(x->dtype()), Runtime, "std_mean only support floating point and complex dtypes");
  return {std(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

std::pair<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  DimList dims;
  if (dim) {
    int64_t d = wrap_dim(*dim, x->ndim());
    LOOM_CHECK(x->ndim() == 0 || x->sizes()[d] > 0, Index, "aminmax: Expected reduction dim ", d,
               " to have non-zero size.");
    dims.push_back(d);
  } else {
    LOOM_CHECK(x->numel() > 0, Runtime,
               "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
  }
  return {reduce(OpId::Amin, x, dims, keepdim), reduce(OpId::Amax, x, dims, keepdim)};
}

Tensor nansum(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  // PyTorch's kernel takes floats to floats and integers to integers, never a float to an integer.
  LOOM_CHECK(!dtype || is_floating(*dtype) || !is_floating(x->dtype()), Runtime, "\"nansum_cpu\" not implemented for '",
             dtype_info(*dtype).scalar_type_name, "'");
  Tensor v = dtype ? cast(x, *dtype) : x;
  if (is_floating(v->dtype())) v = where(isnan(v), Scalar(int64_t{0}), v);
  // The requested dtype is the result's too: a plain sum would widen an integer dtype to int64.
  return sum(v, dims, keepdim, dtype);
}

Tensor nanmean(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  LOOM_CHECK(is_floating(x->dtype()), Runtime, "nanmean(): expected input to have floating point dtype but got ",
             dtype_info(x->dtype()).scalar_type_name);
  Tensor total = nansum(x, dims, keepdim, dtype);
  Tensor present = cast(unary(OpId::LogicalNot, isnan(x)), total->dtype());
  return div(total, sum(present, dims, keepdim));
}

Tensor count_nonzero(const Tensor& x, const DimList& dims) {
  return sum(binary(OpId::Ne, x, Scalar(int64_t{0})), dims, false);
}

// ---- scans ----

// PyTorch range-checks cumprod's and logcumsumexp's dim even for a 0-d input ([-1, 0]), as
// cumsum's (apply_along itself takes any dim of a 0-d input).
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  (void)wrap_dim(dim, x->ndim());
  Tensor v = dtype ? cast(x, *dtype) : x;
  Tensor out = apply_along(OpId::Cumprod, v, dim);
  return dtype ? cast(out, *dtype) : out;  // integer products run in int64: the same modulo 2^bits
}

Tensor logcumsumexp(const Tensor& x, int64_t dim) {
  (void)wrap_dim(dim, x->ndim());
  return apply_along(OpId::Logcumsumexp, x, dim);
}

// The values are gathered at the indices: the gradient reaches the selected elements, as
// PyTorch's cummax backward (a scatter of the gradient to the indices) sends it.
std::pair<Tensor, Tensor> cummax(const Tensor& x, int64_t dim) {
  Tensor indices = apply_along(OpId::CumArgmax, x, dim);
  return {gather(x, dim, indices), indices};
}

std::pair<Tensor, Tensor> cummin(const Tensor& x, int64_t dim) {
  Tensor indices = apply_along(OpId::CumArgmin, x, dim);
  return {gather(x, dim, indices), indices};
}

// ---- order statistics ----

std::pair<Tensor, Tensor> median_dim(const Tensor& x, int64_t dim, bool keepdim, bool ignore_nan) {
  return detail::along(x, dim, [&](const Tensor& v, int64_t d) {
    require_nonempty_dim(ignore_nan ? "nanmedian" : "median", v, d);
    int64_t n = v->sizes()[d];
    Tensor order = argsort(v, d);
    Tensor at;  // the median's place in each line's order (keepdim shape)
    if (is_floating(v->dtype())) {
      Tensor nans = sum(isnan(v), DimList{d}, true);
      Tensor place;
      if (ignore_nan) {
        // Of the non-NaN elements, which sort first; all NaN: the first one.
        place = div(sub(Scalar(n - 1), nans), Scalar(int64_t{2}), "floor");
        place = where(binary(OpId::Lt, place, Scalar(int64_t{0})), Scalar(int64_t{0}), place);
      } else {
        // A line with a NaN has it as its median: the first NaN, which sorts right after the numbers.
        place = where(binary(OpId::Gt, nans, Scalar(int64_t{0})), sub(Scalar(n), nans), Scalar((n - 1) / 2));
      }
      at = gather(order, d, place);
    } else {
      at = narrow(order, d, (n - 1) / 2, 1);
    }
    return keep_or_squeeze(gather(v, d, at), at, d, keepdim);
  });
}

Tensor median(const Tensor& x, bool ignore_nan) {
  const char* name = ignore_nan ? "nanmedian" : "median";
  if (x->numel() == 0) {
    LOOM_CHECK(is_floating(x->dtype()), Runtime, name, "(): input tensor is empty");
    return full(Dims{}, Scalar(std::numeric_limits<double>::quiet_NaN()), x->dtype(), {x->device(), x->is_lazy()});
  }
  Tensor value;
  {
    GradModeGuard no_grad(false);
    value = clone(reshape(median_dim(reshape(x, Dims{-1}), 0, false, ignore_nan).first, Dims{}));
  }
  // The gradient is shared evenly by the elements equal to the median (all NaN elements when it
  // is NaN), as PyTorch's evenly_distribute_backward.
  record_function(ignore_nan ? "NanmedianBackward0" : "MedianBackward0", *x, *value,
                  [x, v = detach(value)](const Tensor& g) {
                    Tensor hit = where(isnan(v), isnan(x), binary(OpId::Eq, x, v));
                    Tensor share = cast(hit, g->dtype());
                    return mul(share, div(g, sum(share)));
                  });
  return value;
}

std::pair<Tensor, Tensor> mode(const Tensor& x, int64_t dim, bool keepdim) {
  return detail::along(x, dim, [&](const Tensor& v, int64_t d) {
    require_nonempty_dim("mode", v, d);
    int64_t n = v->sizes()[d], ndim = v->ndim();
    Tensor order = argsort(v, d);
    Tensor best;  // the end of the first longest run of equal values in each line's order
    {
      GradModeGuard no_grad(false);
      Tensor s = gather(v, d, order);
      Tensor starts;  // where a run of equal values begins
      Dims first_shape(v->sizes());
      first_shape[static_cast<size_t>(d)] = 1;
      Tensor first = full(first_shape, Scalar(true), DType::Bool, {v->device(), v->is_lazy()});
      starts = n == 1 ? first
                      : cat({first, binary(OpId::Ne, narrow(s, d, 1, n - 1), narrow(s, d, 0, n - 1))}, d);
      Tensor pos = positions(n, d, ndim, v);
      // How far into its run each element is: largest at the end of the longest run.
      Tensor run_start = cummax(where(starts, pos, Scalar(int64_t{0})), d).first;
      Tensor into_run = sub(pos, run_start);
      best = argmax(into_run, d, true);  // the first maximum: the smallest of the most frequent values
    }
    Tensor at = gather(order, d, best);  // the last occurrence (the sort is stable)
    return keep_or_squeeze(gather(v, d, at), at, d, keepdim);
  });
}

Tensor quantile(const Tensor& x, const Arg& q, std::optional<int64_t> dim, bool keepdim, std::string_view interpolation,
                bool ignore_nan) {
  DType dtype = x->dtype();
  LOOM_CHECK(dtype == DType::Float32 || dtype == DType::Float64, Runtime,
             "quantile() input tensor must be either float or double dtype");
  LOOM_CHECK(interpolation == "linear" || interpolation == "lower" || interpolation == "higher" ||
                 interpolation == "midpoint" || interpolation == "nearest",
             Runtime, "quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, but got ",
             interpolation);
  bool listed = false;  // q is a 1-d tensor: its dim leads the result
  Tensor qt;
  if (q.is_tensor()) {
    qt = q.tensor;
    LOOM_CHECK(qt->ndim() <= 1, Runtime, "quantile() q must be a scalar or 1D tensor");
    LOOM_CHECK(qt->dtype() == dtype, Runtime, "quantile() q tensor must be same dtype as the input tensor");
    listed = qt->ndim() == 1;
    // PyTorch reads q to check it. A q still pending is not synced for that: a q out of range
    // then fails the sync, as the gather of a position outside the line.
    if (!qt->is_pending()) {
      Array values = copy_to(qt->array(), DType::Float64, kCPU);
      const double* p = static_cast<const double*>(values.data());
      for (int64_t i = 0; i < values.numel(); ++i)
        LOOM_CHECK(p[i] >= 0 && p[i] <= 1, Runtime, "quantile() q values must be in the range [0, 1]");
    }
  } else {
    double v = q.scalar.as_double();
    LOOM_CHECK(v >= 0 && v <= 1, Runtime, "quantile() q must be in the range [0, 1] but got ", v);
    qt = full(Dims{}, q.scalar, dtype, {x->device(), x->is_lazy()});
  }
  LOOM_CHECK(x->numel() > 0, Runtime, "quantile() input tensor must be non-empty");

  // The reduced dim last, the others in their order.
  Tensor v = dim ? x : reshape(x, Dims{-1});
  if (v->ndim() == 0) v = reshape(v, Dims{1});
  int64_t d = dim ? wrap_dim(*dim, v->ndim()) : 0;
  Dims order;
  for (int64_t k = 0; k < v->ndim(); ++k)
    if (k != d) order.push_back(k);
  order.push_back(d);
  Tensor sorted = permute(sort(v, d).first, order);  // (*rest, n)
  int64_t n = sorted->sizes().back(), rank = sorted->ndim();
  Dims q_shape{listed ? qt->numel() : 1};
  for (int64_t k = 0; k < rank; ++k) q_shape.push_back(1);
  Tensor qb = listed ? reshape(qt, q_shape) : reshape(qt, Dims{});  // (Q, 1, ..., 1) or 0-d

  // Each line's rank of the quantile: over its non-NaN elements, or n - 1 (a NaN) for a line with one.
  Tensor ranks;
  if (ignore_nan) {
    Tensor valid = sum(unary(OpId::LogicalNot, isnan(sorted)), DimList{-1}, true);
    ranks = mul(qb, sub(valid, Scalar(int64_t{1})));
    ranks = where(binary(OpId::Lt, ranks, Scalar(int64_t{0})), Scalar(int64_t{0}), ranks);
  } else {
    ranks = where(any(isnan(sorted), DimList{-1}, true), Scalar(static_cast<double>(n - 1)),
                  mul(qb, Scalar(static_cast<double>(n - 1))));
  }
  if (interpolation == "lower") ranks = unary(OpId::Floor, ranks);
  else if (interpolation == "higher") ranks = unary(OpId::Ceil, ranks);
  else if (interpolation == "nearest") ranks = round(ranks);  // half to even, as PyTorch
  Dims full_shape(ranks->sizes());  // ranks broadcast to (Q, *rest, 1) or (*rest, 1)
  Tensor source = sorted;
  if (listed) {
    Dims expanded{qt->numel()};
    for (int64_t s : sorted->sizes()) expanded.push_back(s);
    source = expand(unsqueeze(sorted, 0), expanded);
  }
  Dims index_shape(source->sizes());
  index_shape.back() = 1;
  ranks = expand(ranks, index_shape);
  Tensor below = cast(ranks, DType::Int64);  // ranks are >= 0: a cast floors
  Tensor result = gather(source, -1, below);
  if (interpolation == "linear" || interpolation == "midpoint") {
    Tensor above = cast(unary(OpId::Ceil, ranks), DType::Int64);
    Tensor weight = interpolation == "midpoint" ? full(index_shape, Scalar(0.5), dtype, {x->device(), x->is_lazy()})
                                                : sub(ranks, cast(below, dtype));
    result = lerp(result, gather(source, -1, above), Arg(weight));
  }
  result = squeeze(result, DimList{-1});  // (Q, *rest) or (*rest)
  if (!keepdim) return result;
  if (!dim) {
    Dims ones(static_cast<size_t>(x->ndim()), 1);
    if (listed) ones.insert(0, qt->numel());
    return reshape(result, ones);
  }
  return x->ndim() == 0 ? result : unsqueeze(result, d + (listed ? 1 : 0));
}

}  // namespace loom::ops
