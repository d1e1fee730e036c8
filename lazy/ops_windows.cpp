// Sliding windows: Tensor.unfold over several dims at once (with dilation), as a view, and the
// inverse direction, the sum of windows back into place (col2im). Convolution (ops_conv.cpp),
// pooling (ops_pool.cpp), F.unfold and F.fold are written on them.
//
// A window view is a strided layout over its input (overlapping when stride < size), so it costs
// no copy: a fused kernel reads it with index arithmetic, a reduction over its window dims is one
// row kernel (max and average pooling), and only a matrix product's operand gets gathered into a
// column matrix. Its gradient adds each window element's gradient to the element it read: the
// Col2Im primitive, defined here (a primitive for speed: a scatter-add with computed positions
// did the same in 5x the time on the CPU, and needs atomics on a GPU), whose own derivative is
// the window view again.
#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "runtime/checked_int.h"

namespace loom::ops {
namespace {

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
    CheckedInt span_checked = CheckedInt(dilation[i]) * (size[i] - 1) + 1;  // runtime/checked_int.h
    LOOM_CHECK(stride[i] > 0, Runtime, "step is ", stride[i], " but must be > 0");
    LOOM_CHECK(span_checked.ok(), Runtime, "maximum size for tensor at dimension ", d, " is ", extent,
               " but a window of size ", size[i], " and dilation ", dilation[i], " spans more than int64 holds");
    int64_t span = span_checked.value();
    LOOM_CHECK(size[i] >= 0 && span <= extent, Runtime, "maximum size for tensor at dimension ", d, " is ", extent,
               " but size is ", span);
    counts.push_back((extent - span) / stride[i] + 1);
  }
  Dims shape(x->sizes()), sz = dims_of(size), st = dims_of(stride), dl = dims_of(dilation);
  auto transform = [&](const Layout& l) -> std::optional<Layout> {
    Layout w = l;
    for (size_t i = 0; i < k; ++i) {
      size_t d = static_cast<size_t>(first) + i;
      // A step or dilation past the extent leaves that dim at most 1 long, and any stride then
      // addresses it: the product may not fit int64 (or be countable in bytes, as slice() keeps
      // strides), so the dim's own stride is kept there.
      constexpr int64_t kMaxStride = INT64_MAX / 8;
      auto times = [&](int64_t factor) {
        CheckedInt v = CheckedInt(l.strides[d]) * factor;
        return v.ok() && v.value() <= kMaxStride && v.value() >= -kMaxStride ? v.value() : l.strides[d];
      };
      w.sizes[d] = counts[i];
      w.strides[d] = times(st[i]);
      w.sizes.push_back(sz[i]);
      w.strides.push_back(times(dl[i]));
    }
    return w;
  };
  return strided_view(x, transform, "UnfoldBackward0", [shape, first, sz, st, dl](const Tensor& g) {
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
  // (before..., counts..., after..., size...) -> (B, size..., counts..., R): window element before
  // position, the order of im2col's columns, so the gradient of a convolution's columns (or
  // F.fold's input) is read in place, not copied.
  Dims order, canonical{before};
  for (int64_t d = 0; d < first; ++d) order.push_back(d);
  for (size_t i = 0; i < k; ++i) {
    order.push_back(n + static_cast<int64_t>(i));
    canonical.push_back(size[i]);
  }
  for (size_t i = 0; i < k; ++i) {
    order.push_back(first + static_cast<int64_t>(i));
    canonical.push_back(counts[i]);
  }
  for (int64_t d = first + static_cast<int64_t>(k); d < n; ++d) order.push_back(d);
  canonical.push_back(after);
  Attrs attrs;
  attrs.push_back(static_cast<int64_t>(k));
  for (IntSpan part : {plane, size, stride, dilation})
    for (int64_t v : part) attrs.push_back(v);
  Tensor out = apply(OpId::Col2Im, {Arg(reshape(permute(windows, order), canonical))}, std::move(attrs));
  Dims out_shape(shape);
  return reshape(out, out_shape);
}

// ---- Col2Im: out[b, x..., r] = sum over the window elements j... that land on x (x_i = o_i *
// stride_i + j_i * dilation_i for a window o inside the input) of in[b, j..., o..., r]. Input
// (B, size..., counts..., R), output (B, extent..., R); attrs: k, extent[k], size[k],
// stride[k], dilation[k]. Each output element sums its window elements in row-major order of
// j, in double (int64 for integers), so the CPU and the CUDA kernel (graph/cuda_library_source.cpp
// loom_col2im) agree bit for bit. ----

namespace {

struct Col2ImAttrs {
  size_t k;
  IntSpan extent, size, stride, dilation;
  explicit Col2ImAttrs(const Attrs& a)
      : k(static_cast<size_t>(a[0])),
        extent(a.data() + 1, k),
        size(a.data() + 1 + k, k),
        stride(a.data() + 1 + 2 * k, k),
        dilation(a.data() + 1 + 3 * k, k) {}
};

OutputMeta infer_col2im(std::span<const InputMeta> in, const Attrs& attrs) {
  Col2ImAttrs a(attrs);
  IntSpan s = in[0].shape;
  LOOM_CHECK(s.size() == 2 * a.k + 2, Runtime, "internal: Col2Im of a ", s.size(), "-d input with ", a.k, " window dims");
  Dims out{s[0]};
  for (size_t i = 0; i < a.k; ++i) {
    int64_t count = s[1 + a.k + i];
    LOOM_CHECK(s[1 + i] == a.size[i] && (count == 0 || (count - 1) * a.stride[i] + (a.size[i] - 1) * a.dilation[i] <
                                                                 a.extent[i]),
               Runtime, "internal: Col2Im windows ", format_dims(s), " do not fit ", format_dims(a.extent));
    out.push_back(a.extent[i]);
  }
  out.push_back(s.back());
  LOOM_CHECK(in[0].dtype != DType::Bool, Runtime, "\"col2im_out_cpu\" not implemented for 'Bool'");
  return {in[0].dtype, std::move(out)};
}

// For each dim, and each output coordinate x along it, the window elements (j, o) that land on x.
struct Taps {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> at;  // per coordinate x: (j, o), j rising
};

template <typename T, typename Acc>
void col2im_typed(const Array& x, const Col2ImAttrs& a, const Array& out) {
  size_t k = a.k;
  IntSpan s = x.sizes();
  IntSpan st = x.strides();
  std::vector<Taps> taps(k);
  for (size_t i = 0; i < k; ++i) {
    int64_t count = s[1 + k + i];
    taps[i].at.resize(static_cast<size_t>(a.extent[i]));
    for (int64_t j = 0; j < a.size[i]; ++j)
      for (int64_t o = 0; o < count; ++o) taps[i].at[static_cast<size_t>(o * a.stride[i] + j * a.dilation[i])].push_back({j, o});
  }
  const T* in = static_cast<const T*>(x.data());
  T* dst = static_cast<T*>(out.data());
  int64_t batch = s[0], rest = s.back();
  Dims coord(k, 0);
  int64_t e = 0;
  // Adds the taps of dims i.. at `coord`, from element offset `at`, to acc: one running sum in
  // row-major order of j, as the CUDA kernel adds them (so both round alike).
  auto add = [&](auto&& self, size_t i, int64_t at, Acc& acc) -> void {
    if (i == k) {
      acc += static_cast<Acc>(convert<double>(in[at]));
      return;
    }
    for (auto [j, o] : taps[i].at[static_cast<size_t>(coord[i])])
      self(self, i + 1, at + j * st[1 + i] + o * st[1 + k + i], acc);
  };
  for (int64_t b = 0; b < batch; ++b) {
    std::fill(coord.begin(), coord.end(), 0);
    for (int64_t p = 0, plane = numel_of(a.extent); p < plane; ++p) {
      for (int64_t r = 0; r < rest; ++r) {
        Acc acc = 0;
        add(add, 0, b * st[0] + r * st[2 * k + 1], acc);
        dst[e++] = convert<T>(acc);
      }
      for (size_t i = k; i-- > 0;) {
        if (++coord[i] < a.extent[i]) break;
        coord[i] = 0;
      }
    }
  }
}

void run_col2im(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  Col2ImAttrs a(attrs);
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      LOOM_FAIL(Runtime, "internal: Col2Im of bool");
    } else {
      using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
      col2im_typed<T, Acc>(*in[0].array, a, out);
    }
  });
}

// The derivative: each window element's gradient is the output gradient where it landed, the
// window view of the gradient (laid out as the input: size before counts).
void d_col2im(const BackwardContext& c, std::vector<Ref<TensorImpl>>& g) {
  Col2ImAttrs a(c.attrs);
  size_t k = a.k;
  IntSpan in_shape = c.shapes[0];
  Tensor w = sliding_windows(c.grad, 1, a.size, a.stride, a.dilation);  // (B, O'..., R, size...)
  for (size_t i = 0; i < k; ++i)  // the view may hold more windows than were summed (output_padding)
    if (w->sizes()[1 + i] != in_shape[1 + k + i]) w = narrow(w, 1 + static_cast<int64_t>(i), 0, in_shape[1 + k + i]);
  Dims order{0};
  for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(k + 2 + i));
  for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(1 + i));
  order.push_back(static_cast<int64_t>(k + 1));
  g[0] = contiguous(permute(w, order));
}

const bool registered = [] {
  define_op(OpId::Col2Im, OpDef{.name = "Col2Im", .cls = OpClass::Other, .infer = infer_col2im,
                                .run_cpu = run_col2im, .data_safe = true});
  define_backward(OpId::Col2Im, d_col2im, SavedValues{});
  return true;
}();

}  // namespace

}  // namespace loom::ops
