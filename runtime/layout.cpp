#include "runtime/layout.h"

#include <algorithm>

#include "runtime/error.h"

namespace loom {

std::string format_dims(IntSpan dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

int64_t numel_of(IntSpan sizes) noexcept {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

Dims contiguous_strides(IntSpan sizes) {
  Dims strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

void check_sizes(IntSpan sizes) {
  LOOM_CHECK(sizes.size() <= kMaxDims, Runtime, "a tensor has at most ", kMaxDims, " dimensions, but ",
             sizes.size(), " were requested");
  int64_t numel = 1;
  for (int64_t s : sizes) {
    LOOM_CHECK(s >= 0, Runtime, "Trying to create tensor with negative dimension ", s, ": ", format_dims(sizes));
    LOOM_CHECK(!__builtin_mul_overflow(numel, s, &numel), Runtime, "Storage size calculation overflowed with sizes=",
               format_dims(sizes));
  }
}

int64_t wrap_dim(int64_t dim, int64_t ndim) {
  int64_t n = std::max<int64_t>(ndim, 1);
  LOOM_CHECK(dim >= -n && dim < n, Index, "Dimension out of range (expected to be in range of [", -n, ", ",
             n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

Dims infer_size(IntSpan shape, int64_t numel) {
  LOOM_CHECK(shape.size() <= kMaxDims, Runtime, "a tensor has at most ", kMaxDims, " dimensions, but shape has ",
             shape.size());
  Dims out(shape);
  int64_t known = 1;
  std::optional<size_t> infer;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      LOOM_CHECK(!infer, Runtime, "only one dimension can be inferred");
      infer = i;
    } else {
      LOOM_CHECK(out[i] >= 0, Runtime, "invalid shape dimension ", out[i]);
      known *= out[i];
    }
  }
  if (infer) {
    // A -1 next to a 0 is ambiguous: any size would do.
    LOOM_CHECK(known != 0 && numel % known == 0, Runtime, "shape '", format_dims(shape),
               "' is invalid for input of size ", numel);
    out[*infer] = numel / known;
  } else {
    LOOM_CHECK(known == numel, Runtime, "shape '", format_dims(shape), "' is invalid for input of size ", numel);
  }
  return out;
}

Dims broadcast_shapes(IntSpan a, IntSpan b) {
  size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    // Align from the right: dim i of the result meets dim i - (n - size) of each input.
    int64_t da = i + a.size() >= n ? a[i + a.size() - n] : 1;
    int64_t db = i + b.size() >= n ? b[i + b.size() - n] : 1;
    LOOM_CHECK(da == db || da == 1 || db == 1, Runtime, "The size of tensor a (", da,
               ") must match the size of tensor b (", db, ") at non-singleton dimension ", i);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Layout Layout::contiguous(IntSpan sizes, int64_t offset) {
  return Layout{Dims(sizes), contiguous_strides(sizes), offset};
}

bool Layout::is_contiguous() const noexcept {
  // Any size-0 dim makes the tensor empty, whatever the strides of the dims after it (as in PyTorch).
  if (std::ranges::find(sizes, 0) != sizes.end()) return true;
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

bool Layout::is_non_overlapping_and_dense() const noexcept {
  if (is_contiguous()) return true;
  // Visit the dims of size >= 2 from the smallest stride up: each must step over exactly the
  // block the previous ones span. Size-0/1 dims address nothing extra, so sort them last.
  Dims order(sizes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::sort(order.begin(), order.end(), [this](int64_t a, int64_t b) {
    if (sizes[a] < 2) return false;
    if (sizes[b] < 2) return true;
    return strides[a] < strides[b];
  });
  int64_t expected = 1;
  for (int64_t d : order) {
    if (sizes[d] < 2) break;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

bool Layout::has_internal_overlap() const noexcept {
  for (size_t d = 0; d < sizes.size(); ++d)
    if (strides[d] == 0 && sizes[d] > 1) return true;
  return false;
}

int64_t Layout::storage_end() const noexcept {
  int64_t end = offset + 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return offset;
    end += (sizes[i] - 1) * strides[i];
  }
  return end;
}

bool same_dense_order(const Layout& a, const Layout& b) noexcept {
  return (a.is_contiguous() && b.is_contiguous()) || (a.strides == b.strides && a.is_non_overlapping_and_dense());
}

Dims preserved_strides(const Layout& l) {
  if (l.is_non_overlapping_and_dense()) return l.strides;
  // PyTorch's infer_dense_strides, which orders dims as TensorIterator does so every op agrees on
  // output layouts: a stable insertion sort of the dims, innermost first, by stride (equal
  // strides: the smaller size inner). A stride-0 dim compares equal to everything, so broadcast
  // dims stay where a contiguous layout has them.
  int64_t n = l.ndim();
  Dims perm(static_cast<size_t>(n));  // perm[0] is the innermost dim
  for (int64_t i = 0; i < n; ++i) perm[i] = n - 1 - i;
  auto should_swap = [&l](int64_t d0, int64_t d1) {
    int64_t s0 = l.strides[d0], s1 = l.strides[d1];
    if (s0 == 0 || s1 == 0) return 0;
    if (s0 != s1) return s0 < s1 ? -1 : 1;
    return l.sizes[d0] > l.sizes[d1] ? 1 : 0;
  };
  for (int64_t i = 1; i < n; ++i) {
    int64_t d1 = i;
    for (int64_t d0 = i - 1; d0 >= 0; --d0) {
      int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  Dims strides(static_cast<size_t>(n));
  int64_t stride = 1;
  for (int64_t d : perm) {
    strides[d] = stride;
    stride *= std::max<int64_t>(l.sizes[d], 1);
  }
  return strides;
}

Layout permute(const Layout& l, IntSpan dims) {
  int64_t n = l.ndim();
  LOOM_CHECK(static_cast<int64_t>(dims.size()) == n, Runtime,
             "permute(): number of dims don't match in permute: the tensor has ", n,
             " dimensions but the permutation has ", dims.size());
  Layout out{Dims(n), Dims(n), l.offset};
  SmallVec<bool, 8> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n);
    LOOM_CHECK(!seen[d], Runtime, "permute(): duplicate dims are not allowed.");
    seen[d] = true;
    out.sizes[i] = l.sizes[d];
    out.strides[i] = l.strides[d];
  }
  return out;
}

Layout transpose(const Layout& l, int64_t dim0, int64_t dim1) {
  int64_t n = l.ndim();
  Layout out = l;
  if (n == 0) {
    wrap_dim(dim0, 0);
    wrap_dim(dim1, 0);
    return out;
  }
  int64_t a = wrap_dim(dim0, n), b = wrap_dim(dim1, n);
  std::swap(out.sizes[a], out.sizes[b]);
  std::swap(out.strides[a], out.strides[b]);
  return out;
}

Layout expand(const Layout& l, IntSpan sizes) {
  int64_t n = static_cast<int64_t>(sizes.size());
  int64_t old = l.ndim();
  LOOM_CHECK(n >= old, Runtime, "expand(", format_dims(l.sizes), ", size=", format_dims(sizes),
             "): the number of sizes provided (", n,
             ") must be greater or equal to the number of dimensions in the tensor (", old, ")");
  Layout out{Dims(n), Dims(n), l.offset};
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t j = i - (n - old);  // matching dim of the input, < 0 for new leading dims
    int64_t target = sizes[i];
    if (j < 0) {
      LOOM_CHECK(target >= 0, Runtime, "The expanded size of the tensor (", target,
                 ") isn't allowed in a leading, non-existing dimension ", i);
      out.sizes[i] = target;
      // A new size-1 dim gets the stride a contiguous layout would give it (size * stride of the
      // dim after it), as PyTorch's inferExpandGeometry does, so expand(1, n) of a contiguous
      // tensor has contiguous strides; PyTorch gives every dim of an expanded 0-d tensor stride 0.
      out.strides[i] = target == 1 && old > 0 ? out.sizes[i + 1] * out.strides[i + 1] : 0;
      continue;
    }
    int64_t have = l.sizes[j];
    if (target == -1) target = have;
    LOOM_CHECK(target >= 0, Runtime, "The expanded size of the tensor (", target, ") is not allowed");
    if (have == target) {
      out.sizes[i] = have;
      out.strides[i] = l.strides[j];
    } else {
      LOOM_CHECK(have == 1, Runtime, "The expanded size of the tensor (", target,
                 ") must match the existing size (", have, ") at non-singleton dimension ", i,
                 ".  Target sizes: ", format_dims(sizes), ".  Tensor sizes: ", format_dims(l.sizes));
      out.sizes[i] = target;
      out.strides[i] = 0;
    }
  }
  // Stride 0 makes any size cheap, so nothing else bounds the element count: expand(2, 2^62) made
  // a view whose numel() wrapped to -2^63 (and its reductions ran for ever).
  int64_t numel = 1;
  for (int64_t s : out.sizes)
    LOOM_CHECK(!__builtin_mul_overflow(numel, s, &numel), Runtime, "numel: integer multiplication overflow: expand(",
               format_dims(l.sizes), ", size=", format_dims(sizes), ") would have more than 2^63 - 1 elements");
  return out;
}

Layout squeeze(const Layout& l) {
  Layout out{{}, {}, l.offset};
  for (size_t i = 0; i < l.sizes.size(); ++i) {
    if (l.sizes[i] == 1) continue;
    out.sizes.push_back(l.sizes[i]);
    out.strides.push_back(l.strides[i]);
  }
  return out;
}

Layout squeeze(const Layout& l, int64_t dim) {
  int64_t d = wrap_dim(dim, l.ndim());
  Layout out = l;
  if (l.ndim() == 0 || l.sizes[d] != 1) return out;
  out.sizes.erase(d);
  out.strides.erase(d);
  return out;
}

Layout unsqueeze(const Layout& l, int64_t dim) {
  int64_t d = wrap_dim(dim, l.ndim() + 1);
  Layout out = l;
  // The stride of a size-1 dim is never used to address; PyTorch picks size*stride of the next
  // dim so the result stays contiguous when the input was.
  int64_t stride = d < l.ndim() ? l.sizes[d] * l.strides[d] : 1;
  out.sizes.insert(d, 1);
  out.strides.insert(d, stride);
  return out;
}

Layout slice(const Layout& l, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop,
             int64_t step) {
  LOOM_CHECK(l.ndim() > 0, Index, "slice() cannot be applied to a 0-dim tensor.");
  LOOM_CHECK(step > 0, Value, "step must be greater than zero");
  int64_t d = wrap_dim(dim, l.ndim());
  int64_t size = l.sizes[d];
  auto clamp = [size](int64_t v) {
    if (v < 0) v += size;
    return std::clamp<int64_t>(v, 0, size);
  };
  int64_t begin = start ? clamp(*start) : 0;
  int64_t end = stop ? clamp(*stop) : size;
  end = std::max(end, begin);
  Layout out = l;
  out.sizes[d] = end == begin ? 0 : (end - begin - 1) / step + 1;  // no overflow for huge steps
  out.offset += begin * l.strides[d];
  // Strides must stay countable in bytes (itemsizes are at most 8) for kernels and exporters. Only
  // a step past the end of the dim breaks that, and it leaves at most one element, which any
  // stride addresses: keep the dim's own stride then.
  constexpr int64_t kMaxStride = INT64_MAX / 8;
  if (__builtin_mul_overflow(l.strides[d], step, &out.strides[d]) || out.strides[d] > kMaxStride)
    out.strides[d] = l.strides[d];
  return out;
}

Layout narrow(const Layout& l, int64_t dim, int64_t start, int64_t length) {
  LOOM_CHECK(l.ndim() > 0, Runtime, "narrow() cannot be applied to a 0-dim tensor.");
  int64_t d = wrap_dim(dim, l.ndim());
  int64_t size = l.sizes[d];
  LOOM_CHECK(start >= -size && start <= size, Index, "start out of range (expected to be in range of [", -size,
             ", ", size, "], but got ", start, ")");
  if (start < 0) start += size;
  LOOM_CHECK(length >= 0 && length <= size - start, Runtime, "start (", start, ") + length (", length,
             ") exceeds dimension size (", size, ").");
  Layout out = l;
  out.sizes[d] = length;
  out.offset += start * l.strides[d];
  return out;
}

Layout select(const Layout& l, int64_t dim, int64_t index) {
  LOOM_CHECK(l.ndim() > 0, Index, "select() cannot be applied to a 0-dim tensor.");
  int64_t d = wrap_dim(dim, l.ndim());
  int64_t size = l.sizes[d];
  LOOM_CHECK(index >= -size && index < size, Index, "index ", index, " is out of bounds for dimension ", d,
             " with size ", size);
  if (index < 0) index += size;
  Layout out = l;
  out.offset += index * l.strides[d];
  out.sizes.erase(d);
  out.strides.erase(d);
  return out;
}

std::optional<Layout> view(const Layout& l, IntSpan sizes) {
  Layout out{Dims(sizes), Dims(sizes.size()), l.offset};
  int64_t numel = l.numel();
  if (numel == 0 && l.sizes == out.sizes) {
    // Any strides would do for an empty tensor; PyTorch (like numpy) keeps them when the shape
    // does not change.
    out.strides = l.strides;
    return out;
  }
  if (numel == 0 || l.ndim() == 0) {
    // Nothing to address, or one element: any strides work; contiguous ones are canonical.
    out.strides = contiguous_strides(sizes);
    return out;
  }
  // Walk the input's dims from the innermost, in chunks that are contiguous among themselves;
  // the requested dims must tile each chunk exactly, or the view would need a copy.
  int64_t view_d = static_cast<int64_t>(sizes.size()) - 1;
  int64_t chunk_base_stride = l.strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = l.ndim() - 1; d >= 0; --d) {
    tensor_numel *= l.sizes[d];
    bool chunk_ends = d == 0 || (l.sizes[d - 1] != 1 && l.strides[d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
      out.strides[view_d] = view_numel * chunk_base_stride;
      view_numel *= sizes[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_base_stride = l.strides[d - 1];
      tensor_numel = view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

std::optional<Layout> region_within(const Layout& base, const Layout& view) {
  Layout region{view.sizes, Dims(view.sizes.size(), 0), 0};
  if (view.numel() == 0) return region;  // no element to place
  if (base.numel() == 0) return std::nullopt;
  // base's dims of size > 1, each with its stride and its row-major stride; neighbours that are
  // also neighbours in storage (a contiguous run, whatever view() may merge) become one dim.
  struct Dim {
    int64_t size, stride, row_major;
  };
  SmallVec<Dim, 6> dims;
  int64_t row_major = 1;
  for (int64_t d = base.ndim() - 1; d >= 0; row_major *= base.sizes[d], --d) {
    if (base.sizes[d] == 1) continue;
    if (!dims.empty() && base.strides[d] == dims.back().stride * dims.back().size) dims.back().size *= base.sizes[d];
    else dims.push_back({base.sizes[d], base.strides[d], row_major});
  }
  // From the largest stride down, each must span the dims after it: then a storage position is a
  // unique mixed-radix number of base indices.
  std::sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) { return a.stride > b.stride; });
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i].stride <= 0 || (i + 1 < dims.size() && dims[i].stride < dims[i + 1].stride * dims[i + 1].size))
      return std::nullopt;
  // The first element: the base indices of its storage position.
  int64_t delta = view.offset - base.offset;
  if (delta < 0) return std::nullopt;
  SmallVec<int64_t, 6> reach(dims.size(), 0);  // the last index each base dim reaches
  for (size_t i = 0; i < dims.size(); ++i) {
    reach[i] = delta / dims[i].stride;
    delta -= reach[i] * dims[i].stride;
    region.offset += reach[i] * dims[i].row_major;
  }
  if (delta != 0) return std::nullopt;
  // Each view dim steps along one base dim: the largest stride that is not larger than its own,
  // which must divide it.
  for (size_t k = 0; k < view.sizes.size(); ++k) {
    int64_t t = view.strides[k], n = view.sizes[k];
    if (n == 1 || t == 0) continue;
    size_t i = 0;
    while (i < dims.size() && dims[i].stride > t) ++i;
    if (t < 0 || i == dims.size() || t % dims[i].stride != 0) return std::nullopt;
    int64_t steps = t / dims[i].stride;
    reach[i] += steps * (n - 1);
    region.strides[k] = steps * dims[i].row_major;
  }
  for (size_t i = 0; i < dims.size(); ++i)
    if (reach[i] >= dims[i].size) return std::nullopt;
  return region;
}

std::optional<StepsInBase> steps_in_base(IntSpan base_sizes, const Layout& relative) {
  auto n = static_cast<int64_t>(base_sizes.size());
  Dims rowmajor = contiguous_strides(base_sizes);
  StepsInBase out{Dims(static_cast<size_t>(n), 0), Dims(relative.strides.size(), -1), Dims(relative.strides.size(), 0)};
  // The first element: relative's offset as an index into each base dim.
  int64_t check = 0;
  for (int64_t t = 0; t < n; ++t) {
    out.start[t] = relative.offset / rowmajor[t] % std::max<int64_t>(base_sizes[t], 1);
    check += out.start[t] * rowmajor[t];
  }
  if (check != relative.offset) return std::nullopt;
  // Each dim with a real extent steps along exactly one base dim, within its bounds.
  Dims reach = out.start;  // the largest index reached in each base dim
  for (int64_t k = 0; k < relative.ndim(); ++k) {
    int64_t size = relative.sizes[k], stride = relative.strides[k];
    if (size <= 1 || stride == 0) continue;
    int64_t target = -1;
    for (int64_t t = n - 1; t >= 0 && target < 0; --t)
      if (stride % rowmajor[t] == 0 && stride < rowmajor[t] * base_sizes[t]) target = t;
    if (target < 0) return std::nullopt;
    out.along[k] = target;
    out.step[k] = stride / rowmajor[target];
    reach[target] += out.step[k] * (size - 1);
  }
  for (int64_t t = 0; t < n; ++t)
    if (reach[t] >= std::max<int64_t>(base_sizes[t], 1)) return std::nullopt;
  return out;
}

std::optional<Layout> place_within(const Layout& base, const Layout& relative) {
  if (base.is_contiguous()) {  // base's row-major order is storage order
    Layout out = relative;
    out.offset += base.offset;
    return out;
  }
  std::optional<StepsInBase> steps = steps_in_base(base.sizes, relative);
  if (!steps) return std::nullopt;
  Layout out{relative.sizes, Dims(relative.strides.size(), 0), base.offset};
  for (int64_t t = 0; t < base.ndim(); ++t) out.offset += steps->start[t] * base.strides[t];
  for (int64_t k = 0; k < relative.ndim(); ++k)
    if (steps->along[k] >= 0) out.strides[k] = steps->step[k] * base.strides[steps->along[k]];
  return out;
}

}  // namespace loom
