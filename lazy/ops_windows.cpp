// Sliding windows: Tensor.unfold over several dims at once (with dilation), as a view, and the
// inverse direction, the sum of windows back into place (col2im). Convolution (ops_conv.cpp),
// pooling (ops_pool.cpp), F.unfold and F.fold are written on them.
//
// A window view is a strided layout over its input (overlapping when stride < size), so it costs
// no copy: a fused kernel reads it with index arithmetic, a reduction over its window dims is one
// row kernel (max and average pooling), and only a matrix product's operand gets gathered into a
// column matrix. Its gradient adds each window element's gradient to the element it read: one
// scatter-add, with the positions computed from aranges (a small fused kernel in lazy mode).
#include "lazy/autograd.h"
#include "lazy/ops.h"

namespace loom::ops {
namespace {

Placement where_of(const Tensor& t) { return {t->device(), t->is_lazy()}; }

// A view of x with a hand-written backward, recorded as ops.cpp's make_view records views (what
// autograd needs of a view: made in no_grad mode or not, its history's version). h/ops-data
// makes that helper public as ops::strided_view: use it here once both branches are merged.
template <typename Transform>
Tensor view_with_backward(const Tensor& x, Transform&& transform, const char* name,
                          std::function<Tensor(const Tensor&)> backward) {
  Tensor out = view_of(x, transform);
  if (out->is_view() && is_floating(out->dtype())) {
    if (!grad_enabled()) out->mark_made_in_no_grad_mode();
    else if (requires_grad(*x)) record_view(*out);
  }
  record_function(name, *x, *out, std::move(backward));
  return out;
}

Dims dims_of(IntSpan s) { return Dims(s.begin(), s.end()); }

void check_window_params(size_t k, IntSpan stride, IntSpan dilation) {
  LOOM_CHECK(stride.size() == k && dilation.size() == k, Runtime, "internal: window parameters of ", k,
             " dims expected");
}

}  // namespace

Tensor window_positions(IntSpan plane, IntSpan counts, IntSpan size, IntSpan stride, IntSpan dilation,
                        IntSpan offset, Placement where) {
  size_t k = plane.size();
  Dims plane_strides = contiguous_strides(plane);
  Tensor positions;
  auto along = [&](size_t axis, int64_t n, int64_t start, int64_t step) {
    Dims shape(2 * k, 1);
    shape[axis] = n;
    Tensor t = reshape(arange(n, Scalar(start), Scalar(step), DType::Int64, where), shape);
    positions = positions ? add(positions, t) : t;
  };
  for (size_t i = 0; i < k; ++i) {
    along(i, counts[i], (offset.empty() ? 0 : offset[i]) * plane_strides[i], stride[i] * plane_strides[i]);
    along(k + i, size[i], 0, dilation[i] * plane_strides[i]);
  }
  return positions;
}

Tensor sliding_windows(const Tensor& x, int64_t first, IntSpan size, IntSpan stride, IntSpan dilation) {
  size_t k = size.size();
  check_window_params(k, stride, dilation);
  LOOM_CHECK(first >= 0 && first + static_cast<int64_t>(k) <= x->ndim(), Runtime, "internal: windows over dims ",
             first, "..", first + static_cast<int64_t>(k), " of a ", x->ndim(), "-d tensor");
  Dims counts;
  for (size_t i = 0; i < k; ++i) {
    int64_t d = first + static_cast<int64_t>(i);
    int64_t extent = x->sizes()[d];
    int64_t span = dilation[i] * (size[i] - 1) + 1;
    LOOM_CHECK(stride[i] > 0, Runtime, "step is ", stride[i], " but must be > 0");
    LOOM_CHECK(size[i] >= 0 && span <= extent, Runtime, "maximum size for tensor at dimension ", d, " is ", extent,
               " but size is ", span);
    counts.push_back((extent - span) / stride[i] + 1);
  }
  Dims shape(x->sizes()), sz = dims_of(size), st = dims_of(stride), dl = dims_of(dilation);
  auto transform = [&](const Layout& l) -> std::optional<Layout> {
    Layout w = l;
    for (size_t i = 0; i < k; ++i) {
      size_t d = static_cast<size_t>(first) + i;
      w.sizes[d] = counts[i];
      w.strides[d] = l.strides[d] * st[i];
      w.sizes.push_back(sz[i]);
      w.strides.push_back(l.strides[d] * dl[i]);
    }
    return w;
  };
  return view_with_backward(x, transform, "UnfoldBackward0", [shape, first, sz, st, dl](const Tensor& g) {
    return windows_sum(g, shape, first, sz, st, dl);
  });
}

Tensor windows_sum(const Tensor& windows, IntSpan shape, int64_t first, IntSpan size, IntSpan stride,
                   IntSpan dilation) {
  size_t k = size.size();
  auto n = static_cast<int64_t>(shape.size());
  check_window_params(k, stride, dilation);
  LOOM_CHECK(first >= 0 && first + static_cast<int64_t>(k) <= n && windows->ndim() == n + static_cast<int64_t>(k),
             Runtime, "internal: windows of ", format_dims(windows->sizes()), " for a tensor of ", format_dims(shape));
  Dims counts(windows->sizes().subspan(static_cast<size_t>(first), k));
  IntSpan plane = shape.subspan(static_cast<size_t>(first), k);
  int64_t before = numel_of(shape.first(static_cast<size_t>(first)));
  int64_t after = numel_of(shape.subspan(static_cast<size_t>(first) + k));
  int64_t per_plane = numel_of(counts) * numel_of(size);
  Dims sz = dims_of(size), st = dims_of(stride), dl = dims_of(dilation), out_shape = dims_of(shape);
  Tensor out;
  {
    // The scatter's own derivative (a gather) would be right too; the view below is cheaper.
    GradModeGuard no_grad(false);
    // (before..., counts..., after..., size...) -> (before..., counts..., size..., after...), as (B, L * K, R)
    Dims order;
    for (int64_t d = 0; d < first + static_cast<int64_t>(k); ++d) order.push_back(d);
    for (size_t i = 0; i < k; ++i) order.push_back(n + static_cast<int64_t>(i));
    for (int64_t d = first + static_cast<int64_t>(k); d < n; ++d) order.push_back(d);
    Tensor values = reshape(permute(windows, order), Dims{before, per_plane, after});
    Tensor index = window_positions(plane, counts, size, stride, dilation, {}, where_of(windows));
    index = expand(reshape(index, Dims{1, per_plane, 1}), Dims{before, per_plane, after});
    Tensor zeros = full(Dims{before, numel_of(plane), after}, Scalar(int64_t{0}), windows->dtype(), where_of(windows));
    out = reshape(scatter_add(zeros, 1, index, values), out_shape);
  }
  record_function("Col2ImBackward0", *windows, *out, [first, sz, st, dl](const Tensor& g) {
    return contiguous(sliding_windows(g, first, sz, st, dl));
  });
  return out;
}

}  // namespace loom::ops
