// Definitions of the data-movement primitives: views, concatenation, cumulative sums, gathers,
// scatters and reinterpretations of bytes. All but View are fusion barriers (DESIGN decision 6); their CPU kernels move
// elements as raw bytes, so one kernel serves every dtype.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "lazy/op.h"
#include "lazy/ops_movement.h"
#include "runtime/error.h"

namespace loom {
namespace {

using ops::kScatterAmax;
using ops::kScatterAmin;
using ops::kScatterProd;

// Offsets (in elements) of every index of a strided sub-space, in row-major order.
std::vector<int64_t> element_offsets(IntSpan sizes, IntSpan strides) {
  std::vector<int64_t> out(static_cast<size_t>(numel_of(sizes)));
  Dims index(sizes.size(), 0);
  int64_t offset = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = offset;
    for (size_t d = sizes.size(); d-- > 0;) {
      offset += strides[d];
      if (++index[d] < sizes[d]) break;
      offset -= strides[d] * sizes[d];
      index[d] = 0;
    }
  }
  return out;
}

// An integer index tensor as int64 values, broadcast to `shape`, every index checked against
// `size` (the indexed dim's size). Indexing (x[i]) wraps negative indices; index_select (`select`)
// does not, and words its error as PyTorch's.
std::vector<int64_t> index_values(const Array& index, IntSpan shape, int64_t size, int64_t dim, bool select) {
  Array flat = copy_to(index.view_as(expand(index.layout, shape)), DType::Int64, kCPU);
  const int64_t* p = static_cast<const int64_t*>(flat.data());
  std::vector<int64_t> out(p, p + flat.numel());
  for (int64_t& i : out) {
    if (select) {
      LOOM_CHECK(i >= 0 && i < size, Index, "index out of range in self");
      continue;
    }
    LOOM_CHECK(i >= -size && i < size, Index, "index ", i, " is out of bounds for dimension ", dim, " with size ",
               size);
    if (i < 0) i += size;
  }
  return out;
}

void require_index_dtype(const InputMeta& m, const char* what) {
  LOOM_CHECK(!m.is_scalar && (m.dtype == DType::Int64 || m.dtype == DType::Int32), Index, what,
             "(): Expected dtype int64 or int32 for index, got ", m.is_scalar ? "a scalar" : dtype_name(m.dtype));
}

// gather and scatter_add take int64 indices only, as in PyTorch (RuntimeError, not IndexError).
void require_int64_index(const InputMeta& m, const char* what) {
  LOOM_CHECK(!m.is_scalar && m.dtype == DType::Int64, Runtime, what, "(): Expected dtype int64 for index");
}

// ---- Leaves and View: no kernels (the executor binds their values) ----

OutputMeta infer_none(std::span<const InputMeta>, const Attrs&) {
  LOOM_FAIL(Runtime, "internal: leaves and views are not made through apply()");
}

// A View's value as a dense copy: its layout (attrs: offset, strides; sizes are the output's) is
// relative to its input's elements in row-major order.
void run_view(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  Array base = contiguous(*in[0].array);
  Layout l{Dims(out.sizes()), Dims(attrs.begin() + 1, attrs.end()), base.layout.offset + attrs[0]};
  copy_(out, base.view_as(std::move(l)));
}

// ---- Cat: attrs[0] = dim ----
// Like PyTorch, cat skips legacy empty tensors (1-d, size 0) next to tensors of other shapes: they
// add no elements and need not match, but still take part in the result dtype.

bool legacy_empty(IntSpan shape) { return shape.size() == 1 && shape[0] == 0; }

OutputMeta infer_cat(std::span<const InputMeta> in, const Attrs& attrs) {
  LOOM_CHECK(!in.empty(), Runtime, "torch.cat(): expected a non-empty list of Tensors");
  int64_t dim = attrs[0];
  ResultType r;
  for (size_t i = 0; i < in.size(); ++i) {
    LOOM_CHECK(!in[i].shape.empty(), Runtime, "zero-dimensional tensor (at position ", i, ") cannot be concatenated");
    r.add_tensor(in[i].dtype, 1);
  }
  size_t k = 0;
  while (k < in.size() && legacy_empty(in[k].shape)) ++k;
  if (k == in.size()) return {r.get(), Dims{0}};  // nothing but legacy empty tensors
  IntSpan first = in[k].shape;
  Dims shape(first);
  shape[dim] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    IntSpan s = in[i].shape;
    if (legacy_empty(s)) continue;
    LOOM_CHECK(s.size() == first.size(), Runtime, "Tensors must have same number of dimensions: got ", first.size(),
               " and ", s.size());
    for (size_t d = 0; d < s.size(); ++d)
      LOOM_CHECK(static_cast<int64_t>(d) == dim || s[d] == first[d], Runtime,
                 "Sizes of tensors must match except in dimension ", dim, ". Expected size ", first[d], " but got size ",
                 s[d], " for tensor number ", i, " in the list.");
    shape[dim] += s[dim];
  }
  return {r.get(), std::move(shape)};
}

void run_cat(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  int64_t dim = attrs[0];
  int64_t start = 0;
  for (const Operand& op : in) {
    if (legacy_empty(op.array->sizes())) continue;
    int64_t len = op.array->sizes()[dim];
    copy_(out.view_as(narrow(out.layout, dim, start, len)), *op.array);
    start += len;
  }
}

// ---- Cumsum: attrs[0] = dim ----

OutputMeta infer_cumsum(std::span<const InputMeta> in, const Attrs&) {
  DType d = is_floating(in[0].dtype) ? in[0].dtype : DType::Int64;
  return {d, Dims(in[0].shape)};
}

void run_cumsum(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  const Array& x = *in[0].array;
  bool floating = is_floating(out.dtype);
  Array src = copy_to(x, floating ? DType::Float64 : DType::Int64, kCPU);
  Array acc = empty(x.sizes(), src.dtype, kCPU);
  if (x.ndim() == 0) {
    copy_(out, src);
    return;
  }
  int64_t dim = attrs[0];
  int64_t n = x.sizes()[dim];
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < x.ndim(); ++d) inner *= x.sizes()[d];
  int64_t outer = x.numel() / std::max<int64_t>(n * inner, 1);
  auto scan = [&](auto* s, auto* a) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        std::remove_cvref_t<decltype(*s)> running{};  // zero (s[0] * 0 would be NaN after a NaN)
        for (int64_t k = 0; k < n; ++k) {
          int64_t at = (o * n + k) * inner + i;
          running += s[at];
          a[at] = running;
        }
      }
  };
  if (floating) scan(static_cast<double*>(src.data()), static_cast<double*>(acc.data()));
  else scan(static_cast<int64_t*>(src.data()), static_cast<int64_t*>(acc.data()));
  copy_(out, acc);
}

// ---- Index: x[..., i_0, ..., i_{k-1}, ...] with integer index tensors at consecutive dims
// starting at attrs[0]; the indices broadcast together. attrs[1] (optional) is 1 for
// index_select's rule: negative indices are out of range. ----

OutputMeta infer_index(std::span<const InputMeta> in, const Attrs& attrs) {
  int64_t first = attrs[0];
  IntSpan x = in[0].shape;
  size_t k = in.size() - 1;
  LOOM_CHECK(static_cast<size_t>(first) + k <= x.size(), Index, "too many indices for tensor of dimension ", x.size());
  Dims b;
  for (size_t j = 1; j < in.size(); ++j) {
    require_index_dtype(in[j], "index");
    b = broadcast_shapes(b, in[j].shape);
  }
  Dims shape(x.first(static_cast<size_t>(first)));
  for (int64_t s : b) shape.push_back(s);
  for (size_t d = static_cast<size_t>(first) + k; d < x.size(); ++d) shape.push_back(x[d]);
  return {in[0].dtype, std::move(shape)};
}

// Shared by Index and IndexPut: for every output position (pre, b, post), the element offset in x.
struct IndexPlan {
  std::vector<int64_t> pre, post, picked;  // offsets; picked[b] is the offset of the indexed dims
  int64_t nb = 0;
};

IndexPlan plan_index(const Array& x, std::span<const Operand> indices, int64_t first, bool select = false) {
  size_t k = indices.size();
  Dims b;
  for (const Operand& i : indices) b = broadcast_shapes(b, i.array->sizes());
  IndexPlan plan;
  plan.nb = numel_of(b);
  auto f = static_cast<size_t>(first);
  plan.pre = element_offsets(x.sizes().first(f), x.strides().first(f));
  plan.post = element_offsets(x.sizes().subspan(f + k), x.strides().subspan(f + k));
  plan.picked.assign(static_cast<size_t>(plan.nb), 0);
  for (size_t j = 0; j < k; ++j) {
    int64_t d = first + static_cast<int64_t>(j);
    std::vector<int64_t> v = index_values(*indices[j].array, b, x.sizes()[d], d, select);
    for (size_t e = 0; e < v.size(); ++e) plan.picked[e] += v[e] * x.strides()[d];
  }
  return plan;
}

void run_index(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  const Array& x = *in[0].array;
  Array x_host = x.device().is_cpu() ? x : copy_to(x, x.dtype, kCPU);
  IndexPlan plan = plan_index(x_host, in.subspan(1), attrs[0], attrs.size() > 1 && attrs[1] != 0);
  size_t item = itemsize(x.dtype);
  const char* src = static_cast<const char*>(x_host.data());
  char* dst = static_cast<char*>(out.data());
  for (int64_t p : plan.pre)
    for (int64_t b : plan.picked)
      for (int64_t q : plan.post) {
        std::memcpy(dst, src + (p + b + q) * static_cast<int64_t>(item), item);
        dst += item;
      }
}

// ---- IndexPut: x with x[..., i_0, ..., i_{k-1}, ...] = values (or += when attrs[1]).
// Inputs: x, values, indices. attrs[2] (optional) is 1 for index_select's rule, as Index's
// attrs[1]: negative indices are out of range (index_add, index_copy). ----

OutputMeta infer_index_put(std::span<const InputMeta> in, const Attrs& attrs) {
  SmallVec<InputMeta, 4> gather;
  gather.push_back(in[0]);
  for (size_t j = 2; j < in.size(); ++j) gather.push_back(in[j]);
  OutputMeta region = infer_index({gather.data(), gather.size()}, attrs);
  if (in[1].is_scalar) {
    in[1].value.check_fits(in[0].dtype);  // as PyTorch converts the number to x's dtype
  } else {
    LOOM_CHECK(broadcast_shapes(region.shape, in[1].shape) == region.shape, Runtime, "shape mismatch: value tensor of shape ",
               format_dims(in[1].shape), " cannot be broadcast to indexing result of shape ", format_dims(region.shape));
  }
  return {in[0].dtype, Dims(in[0].shape)};
}

void run_index_put(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  copy_(out, *in[0].array);
  IndexPlan plan = plan_index(out, in.subspan(2), attrs[0], attrs.size() > 2 && attrs[2] != 0);
  bool accumulate = attrs[1] != 0;
  // The values, broadcast to the indexed region and converted to out's dtype, in row-major order.
  Dims region_shape;
  {
    auto f = static_cast<size_t>(attrs[0]);
    size_t k = in.size() - 2;
    Dims b;
    for (const Operand& i : in.subspan(2)) b = broadcast_shapes(b, i.array->sizes());
    region_shape = Dims(out.sizes().first(f));
    for (int64_t s : b) region_shape.push_back(s);
    for (size_t d = f + k; d < static_cast<size_t>(out.ndim()); ++d) region_shape.push_back(out.sizes()[d]);
  }
  Array values = empty(region_shape, out.dtype, kCPU);
  if (in[1].is_array()) copy_(values, *in[1].array);
  else fill_(values, in[1].scalar);
  size_t item = itemsize(out.dtype);
  char* dst = static_cast<char*>(out.data());
  const char* v = static_cast<const char*>(values.data());
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t p : plan.pre)
      for (int64_t b : plan.picked)
        for (int64_t q : plan.post) {
          T* target = reinterpret_cast<T*>(dst + (p + b + q) * static_cast<int64_t>(item));
          T value = *reinterpret_cast<const T*>(v);
          if (accumulate) *target = convert<T>(convert<double>(*target) + convert<double>(value));
          else *target = value;
          v += item;
        }
  });
}

// ---- Gather: out[i][j] = x[i][index[i][j]] along attrs[0] ----

OutputMeta infer_gather(std::span<const InputMeta> in, const Attrs& attrs) {
  require_int64_index(in[1], "gather");
  int64_t dim = attrs[0];
  IntSpan x = in[0].shape, idx = in[1].shape;
  LOOM_CHECK(x.size() == idx.size() || (x.empty() && idx.size() <= 1), Runtime,
             "Index tensor must have the same number of dimensions as input tensor");
  for (size_t d = 0; d < idx.size(); ++d)
    LOOM_CHECK(static_cast<int64_t>(d) == dim || idx[d] <= x[d], Runtime, "Size does not match at dimension ", d,
               " expected index ", format_dims(idx), " to be smaller than self ", format_dims(x),
               " apart from dimension ", dim);
  return {in[0].dtype, Dims(idx)};
}

// Calls fn(x_offset, position) for every element of `index`, where x_offset addresses x at the
// element's index with dim replaced by the index value, and position counts index's elements in
// row-major order. Negative indices are out of range: gather and scatter_add do not wrap them, as
// in PyTorch. An int64 index on the CPU is read in place, at its strides, and both offsets move
// by a stride per element rather than being summed over every dim again (a gather of one value
// from each of 512 rows took 14 us converting the index and recomputing offsets).
template <typename Fn>
void for_each_gathered(const Array& x, const Array& index, int64_t dim, Fn&& fn) {
  // (Copied when it shares memory with x: the scatters write x while they read the index.)
  bool in_place = index.dtype == DType::Int64 && index.device().is_cpu() && !may_overlap(index, x);
  Array idx = in_place ? index : copy_to(index, DType::Int64, kCPU);
  const int64_t* iv = static_cast<const int64_t*>(idx.data());
  int64_t n = idx.numel(), nd = idx.ndim();
  if (n == 0) return;
  int64_t size = x.ndim() ? x.sizes()[dim] : 1;
  int64_t along = x.ndim() ? x.strides()[dim] : 0;
  // x's stride for index dim d (none along dim: the index value chooses the position there).
  Dims x_strides(nd, 0);
  for (int64_t d = 0; d < nd && d < x.ndim(); ++d) x_strides[d] = d == dim ? 0 : x.strides()[d];
  Dims pos(nd, 0);
  int64_t at = 0, offset = x.layout.offset;  // index element's offset in iv, x offset without dim
  for (int64_t e = 0; e < n; ++e) {
    int64_t i = iv[at];
    LOOM_CHECK(i >= 0 && i < size, Runtime, "index ", i, " is out of bounds for dimension ", dim, " with size ", size);
    fn(offset + i * along, e);
    for (int64_t d = nd; d-- > 0;) {
      int64_t last = idx.sizes()[d] - 1;
      if (pos[d] < last) {
        ++pos[d], at += idx.strides()[d], offset += x_strides[d];
        break;
      }
      pos[d] = 0, at -= last * idx.strides()[d], offset -= last * x_strides[d];
    }
  }
}

void run_gather(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  const Array& x = *in[0].array;
  size_t item = itemsize(x.dtype);
  const char* src = static_cast<const char*>(x.storage->data());
  char* dst = static_cast<char*>(out.data());
  for_each_gathered(x, *in[1].array, attrs[0], [&](int64_t offset, int64_t e) {
    std::memcpy(dst + e * static_cast<int64_t>(item), src + offset * static_cast<int64_t>(item), item);
  });
}

// ---- ScatterAdd: x with out[i][index[i][j]] += src[i][j] along attrs[0]. Inputs: x, index, src.

OutputMeta infer_scatter_add(std::span<const InputMeta> in, const Attrs& attrs) {
  require_int64_index(in[1], "scatter");
  LOOM_CHECK(!in[2].is_scalar && in[2].dtype == in[0].dtype, Runtime, "scatter_add(): Expected self.dtype to be equal to src.dtype");
  IntSpan x = in[0].shape, idx = in[1].shape, src = in[2].shape;
  LOOM_CHECK(x.size() == idx.size() && src.size() == idx.size(), Runtime,
             "Index tensor must have the same number of dimensions as self tensor");
  for (size_t d = 0; d < idx.size(); ++d) {
    LOOM_CHECK(idx[d] <= src[d], Runtime, "Expected index ", format_dims(idx), " to be smaller than src ",
               format_dims(src), " apart from dimension ", attrs[0]);
    LOOM_CHECK(static_cast<int64_t>(d) == attrs[0] || idx[d] <= x[d], Runtime, "Expected index ", format_dims(idx),
               " to be smaller than self ", format_dims(x), " apart from dimension ", attrs[0]);
  }
  return {in[0].dtype, Dims(x)};
}

// The elements of src at the positions of index (src may be larger), dense: what a scatter reads.
Array src_at_index(const Array& src, const Array& index) {
  return contiguous(src.view_as(Layout{Dims(index.sizes()), Dims(src.strides()), src.layout.offset}));
}

void run_scatter_add(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  copy_(out, *in[0].array);
  const Array& index = *in[1].array;
  Array src = src_at_index(*in[2].array, index);
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.storage->data());
    const T* s = static_cast<const T*>(src.data());
    for_each_gathered(out, index, attrs[0], [&](int64_t offset, int64_t e) {
      o[offset] = convert<T>(convert<double>(o[offset]) + convert<double>(s[e]));
    });
  });
}

// ---- Scatter and ScatterReduce: x with src's elements written (Scatter) or combined
// (ScatterReduce) at out[i][index[i][j]] along attrs[0]. Inputs: x, index, src (x's dtype, read at
// index's positions). ScatterReduce's attrs[1] is the ScatterKind, attrs[2] include_self: without
// it, the positions written start from the reduction's identity instead of x's values. Primitives
// because no other op writes at indices by anything but a sum (ScatterAdd): scatter's replace
// has a derivative of its own, and products, maxima and minima need their combining kernel.
// Duplicate indices: Scatter's last write wins here (on a GPU any one does, as in PyTorch). ----

OutputMeta infer_scatter(std::span<const InputMeta> in, const Attrs& attrs) {
  require_int64_index(in[1], "scatter");
  LOOM_CHECK(!in[2].is_scalar && in[2].dtype == in[0].dtype, Runtime,
             "scatter(): Expected self.dtype to be equal to src.dtype");
  IntSpan x = in[0].shape, idx = in[1].shape, src = in[2].shape;
  LOOM_CHECK(x.size() == idx.size(), Runtime, "Index tensor must have the same number of dimensions as self tensor");
  LOOM_CHECK(src.size() == idx.size(), Runtime, "Index tensor must have the same number of dimensions as src tensor");
  int64_t dim = attrs[0];
  for (size_t d = 0; d < idx.size(); ++d)
    LOOM_CHECK(idx[d] <= src[d] && (static_cast<int64_t>(d) == dim || idx[d] <= x[d]), Runtime, "Expected index ",
               format_dims(idx), " to be smaller than self ", format_dims(x), " apart from dimension ", dim,
               " and to be smaller size than src ", format_dims(src));
  return {in[0].dtype, Dims(x)};
}

void run_scatter(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  copy_(out, *in[0].array);
  const Array& index = *in[1].array;
  Array src = src_at_index(*in[2].array, index);
  auto item = static_cast<int64_t>(itemsize(out.dtype));
  char* o = static_cast<char*>(out.storage->data());
  const char* s = static_cast<const char*>(src.data());
  for_each_gathered(out, index, attrs[0], [&](int64_t offset, int64_t e) {
    std::memcpy(o + offset * item, s + e * item, static_cast<size_t>(item));
  });
}

// The start of a reduction (what include_self=False puts where src is scattered), and one step
// of it, in T: integers wrap, floating products round once (through a double), maxima and minima
// propagate NaN as PyTorch's do.
template <typename T>
T scatter_identity(int64_t kind) {
  if constexpr (std::is_same_v<T, bool>) return kind == kScatterAmin || kind == kScatterProd;
  else if constexpr (std::is_integral_v<T>)
    return kind == kScatterProd ? T{1} : kind == kScatterAmax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  else
    return convert<T>(kind == kScatterProd ? 1.0 : kind == kScatterAmax ? -HUGE_VAL : HUGE_VAL);
}

template <typename T>
T scatter_combine(int64_t kind, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return kind == kScatterAmax ? (a || b) : (a && b);
  } else if constexpr (std::is_integral_v<T>) {
    if (kind == kScatterProd) return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    return kind == kScatterAmax ? std::max(a, b) : std::min(a, b);
  } else {
    double x = convert<double>(a), y = convert<double>(b);
    if (kind == kScatterProd) return convert<T>(x * y);
    if (std::isnan(x) || std::isnan(y)) return convert<T>(std::numeric_limits<double>::quiet_NaN());
    return convert<T>(kind == kScatterAmax ? std::max(x, y) : std::min(x, y));
  }
}

OutputMeta infer_scatter_reduce(std::span<const InputMeta> in, const Attrs& attrs) {
  LOOM_CHECK(attrs[1] >= kScatterProd && attrs[1] <= kScatterAmin, Runtime, "internal: ScatterReduce of kind ", attrs[1]);
  return infer_scatter(in, attrs);
}

void run_scatter_reduce(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  copy_(out, *in[0].array);
  const Array& index = *in[1].array;
  Array src = src_at_index(*in[2].array, index);
  int64_t kind = attrs[1];
  bool include_self = attrs[2] != 0;
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.storage->data());
    const T* s = static_cast<const T*>(src.data());
    if (!include_self)
      for_each_gathered(out, index, attrs[0], [&](int64_t offset, int64_t) { o[offset] = scatter_identity<T>(kind); });
    for_each_gathered(out, index, attrs[0],
                      [&](int64_t offset, int64_t e) { o[offset] = scatter_combine<T>(kind, o[offset], s[e]); });
  });
}

// ---- ViewDtype: x's bytes read as dtype attrs[0] (Tensor.view(dtype) of a pending tensor, whose
// bytes exist only once it runs: lazy/ops_movement.cpp). The last dim scales by the ratio of the
// item sizes; the composite has checked that it divides. ----

OutputMeta infer_view_dtype(std::span<const InputMeta> in, const Attrs& attrs) {
  auto to = static_cast<DType>(attrs[0]);
  Dims shape(in[0].shape);
  auto from_size = static_cast<int64_t>(itemsize(in[0].dtype)), to_size = static_cast<int64_t>(itemsize(to));
  if (from_size != to_size) {
    LOOM_CHECK(!shape.empty() && shape.back() * from_size % to_size == 0, Runtime,
               "internal: ViewDtype of a shape whose last dim does not divide");
    shape.back() = shape.back() * from_size / to_size;
  }
  return {to, std::move(shape)};
}

void run_view_dtype(std::span<const Operand> in, const Attrs&, const Array& out) {
  Array src = contiguous(*in[0].array);
  std::memcpy(out.data(), src.data(), static_cast<size_t>(src.numel()) * itemsize(src.dtype));
}

// ---- ViewScatter: base with the region addressed by a view (attrs: offset, strides; sizes are
// src's shape) replaced by src. How in-place writes through views of pending tensors land. ----

OutputMeta infer_view_scatter(std::span<const InputMeta> in, const Attrs&) {
  return {in[0].dtype, Dims(in[0].shape)};
}

void run_view_scatter(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  copy_(out, *in[0].array);
  Layout region{Dims(in[1].array->sizes()), Dims(attrs.begin() + 1, attrs.end()), out.layout.offset + attrs[0]};
  copy_(out.view_as(std::move(region)), *in[1].array);
}

const bool registered = [] {
  for (OpId leaf : {OpId::Input, OpId::Scalar, OpId::Constant})
    define_op(leaf, OpDef{op_def(leaf).name, OpClass::Leaf, infer_none, nullptr});
  define_op(OpId::View, OpDef{.name = "View", .cls = OpClass::View, .infer = infer_none, .run_cpu = run_view, .data_safe = true});
  define_op(OpId::Cat, OpDef{.name = "Cat", .cls = OpClass::Other, .infer = infer_cat, .run_cpu = run_cat, .data_safe = true});
  define_op(OpId::Cumsum, OpDef{.name = "Cumsum", .cls = OpClass::Other, .infer = infer_cumsum, .run_cpu = run_cumsum, .data_safe = true});
  define_op(OpId::Index, OpDef{"Index", OpClass::Other, infer_index, run_index});
  define_op(OpId::IndexPut, OpDef{"IndexPut", OpClass::Other, infer_index_put, run_index_put});
  define_op(OpId::Gather, OpDef{"Gather", OpClass::Other, infer_gather, run_gather});
  define_op(OpId::ScatterAdd, OpDef{"ScatterAdd", OpClass::Other, infer_scatter_add, run_scatter_add});
  define_op(OpId::Scatter, OpDef{"Scatter", OpClass::Other, infer_scatter, run_scatter});
  define_op(OpId::ScatterReduce, OpDef{"ScatterReduce", OpClass::Other, infer_scatter_reduce, run_scatter_reduce});
  define_op(OpId::ViewDtype, OpDef{.name = "ViewDtype", .cls = OpClass::Other, .infer = infer_view_dtype, .run_cpu = run_view_dtype, .data_safe = true});
  define_op(OpId::ViewScatter, OpDef{.name = "ViewScatter", .cls = OpClass::Other, .infer = infer_view_scatter, .run_cpu = run_view_scatter, .data_safe = true});
  return true;
}();

}  // namespace
}  // namespace loom
