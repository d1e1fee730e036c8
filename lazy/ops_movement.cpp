// The data-movement family (lazy/ops_movement.h): composites of the primitives, with PyTorch's
// checks and messages.
#include "lazy/ops_movement.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "lazy/autograd.h"
#include "lazy/sync.h"
#include "runtime/error.h"

namespace loom::ops {
namespace {

// A tensor made on the host from values computed there, placed as `where` says.
Tensor from_host(Array a, Placement where) {
  DType dtype = a.dtype;
  return to(make_tensor(std::move(a)), dtype, where.device, where.lazy);
}

Tensor int64_tensor(const std::vector<int64_t>& values, IntSpan shape, Placement where) {
  Array a = empty(shape, DType::Int64, kCPU);
  if (!values.empty()) std::memcpy(a.data(), values.data(), values.size() * sizeof(int64_t));
  return from_host(std::move(a), where);
}

Tensor indices_like(int64_t n, const Tensor& like) {
  return arange(n, Scalar(int64_t{0}), Scalar(int64_t{1}), DType::Int64, placement_of(like));
}

Tensor zeros_of(IntSpan shape, DType dtype, const Tensor& like) {
  return full(shape, Scalar(int64_t{0}), dtype, placement_of(like));
}

// x as a 1-d tensor if it is 0-d (for ops that treat a number as a vector of one).
Tensor as_1d(const Tensor& x) { return x->ndim() == 0 ? reshape(x, Dims{1}) : x; }

// An index of int64 (or int32) dtype, else `kind` with op and message, which names the dtype given
// when it ends with a space.
void require_index(const Tensor& index, const char* op, bool int32_ok, ErrorKind kind, std::string_view message) {
  bool ok = index->dtype() == DType::Int64 || (int32_ok && index->dtype() == DType::Int32);
  if (ok) return;
  const char* given = message.ends_with(' ') ? dtype_info(index->dtype()).scalar_type_name : "";
  detail::throw_error(kind, detail::concat(op, message, given));
}

void require_vector_index(const Tensor& index, const char* op) {
  LOOM_CHECK(index->ndim() <= 1, Index, op, "(): Index is supposed to be a vector, but got dim: ", index->ndim(),
             " with type: ", dtype_info(index->dtype()).scalar_type_name, " and size: ", format_dims(index->sizes()));
}

// x with `values` placed at `index` along dim (IndexPut with the index at dim): x[..., index, ...].
Tensor put_along(const Tensor& x, int64_t dim, const Tensor& index, const Arg& values, bool accumulate, bool select) {
  std::vector<Arg> args{Arg(x), values, Arg(index->ndim() == 0 ? reshape(index, Dims{1}) : index)};
  Attrs attrs;
  attrs.push_back(dim);
  attrs.push_back(accumulate);
  attrs.push_back(select);
  return apply(OpId::IndexPut, std::span<const Arg>(args.data(), args.size()), std::move(attrs));
}

}  // namespace

// ---- data-dependent sizes ----

// Note [Syncs for data-dependent sizes]: every op whose result size depends on values reads them
// here, so loom.metrics() counts each as a sync caused by a data-dependent shape.
Array values_for_shape(const Tensor& t, [[maybe_unused]] const char* cause) {
  sync_for(SyncCause::DataDependentShape, *t);
  const Array& a = t->array();
  return a.device().is_cpu() ? a : copy_to(a, a.dtype, kCPU);
}

namespace {

// The coordinates of x's nonzero elements, row-major, as [count, ndim] on the host (a 0-d x
// counts as 1-d when `one_d_scalars`).
Array nonzero_coordinates(const Tensor& x, const char* cause, bool one_d_scalars) {
  Array host = copy_to(values_for_shape(x, cause), DType::Bool, kCPU);
  Dims sizes(host.sizes());
  if (sizes.empty() && one_d_scalars) sizes.push_back(1);
  auto nd = static_cast<int64_t>(sizes.size());
  const bool* p = static_cast<const bool*>(host.data());
  std::vector<int64_t> coords;
  Dims pos(sizes.size(), 0);
  int64_t count = 0;
  for (int64_t e = 0; e < host.numel(); ++e) {
    if (p[e]) {
      coords.insert(coords.end(), pos.begin(), pos.end());
      ++count;
    }
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++pos[d] < sizes[d]) break;
      pos[d] = 0;
    }
  }
  Array out = empty(Dims{count, nd}, DType::Int64, kCPU);
  if (!coords.empty()) std::memcpy(out.data(), coords.data(), coords.size() * sizeof(int64_t));
  return out;
}

}  // namespace

Tensor nonzero(const Tensor& x) { return from_host(nonzero_coordinates(x, "nonzero", false), placement_of(x)); }

std::vector<Tensor> nonzero_tuple(const Tensor& x, const char* cause) {
  Array coords = nonzero_coordinates(x, cause, true);
  std::vector<Tensor> out;
  for (int64_t d = 0; d < coords.sizes()[1]; ++d)
    out.push_back(from_host(contiguous(coords.view_as(loom::select(coords.layout, 1, d))), placement_of(x)));
  return out;
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  LOOM_CHECK(mask->dtype() == DType::Bool || mask->dtype() == DType::UInt8, Runtime,
             "masked_select: expected BoolTensor or ByteTensor for mask");
  Dims shape = broadcast_shapes(x->sizes(), mask->sizes());
  if (shape.empty()) shape.push_back(1);
  Tensor m = expand(as_1d(mask), shape);
  Tensor values = expand(as_1d(x), shape);
  return index(values, 0, nonzero_tuple(m, "masked_select"));
}

// ---- views ----

Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  int64_t n = x->ndim();
  int64_t d1 = wrap_dim(dim1, n), d2 = wrap_dim(dim2, n);
  LOOM_CHECK(d1 != d2, Runtime, "diagonal dimensions cannot be identical ", dim1, ", ", dim2);
  auto layout_of = [=](const Layout& l) -> std::optional<Layout> {
    int64_t s1 = l.sizes[d1], s2 = l.sizes[d2];
    int64_t length = std::max<int64_t>(offset >= 0 ? std::min(s1, s2 - offset) : std::min(s1 + offset, s2), 0);
    Layout out;
    out.offset = l.offset;
    if (length > 0) out.offset += offset >= 0 ? offset * l.strides[d2] : -offset * l.strides[d1];
    for (int64_t d = 0; d < n; ++d)
      if (d != d1 && d != d2) {
        out.sizes.push_back(l.sizes[d]);
        out.strides.push_back(l.strides[d]);
      }
    out.sizes.push_back(length);
    out.strides.push_back(l.strides[d1] + l.strides[d2]);
    return out;
  };
  return strided_view(x, layout_of, "DiagonalBackward0", region_backward(x, *layout_of(Layout::contiguous(x->sizes()))));
}

Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step) {
  int64_t n = x->ndim();
  int64_t d = wrap_dim(dim, std::max<int64_t>(n, 1));
  int64_t length = n == 0 ? 1 : x->sizes()[d];
  LOOM_CHECK(size <= length, Runtime, "maximum size for tensor at dimension ", d, " is ", length, " but size is ", size);
  LOOM_CHECK(size >= 0, Runtime, "size is ", size, " but must be >= 0");
  LOOM_CHECK(step > 0, Runtime, "step is ", step, " but must be > 0");
  int64_t windows = (length - size) / step + 1;
  auto layout_of = [=](const Layout& l) -> std::optional<Layout> {
    Layout out = l;
    if (n == 0) return Layout{Dims{size}, Dims{1}, l.offset};
    out.sizes[d] = windows;
    out.strides[d] = l.strides[d] * step;
    out.sizes.push_back(size);
    out.strides.push_back(l.strides[d]);
    return out;
  };
  // Windows may overlap: the gradient adds up the windows' gradients at every position.
  Dims shape(x->sizes());
  DType dtype = x->dtype();
  auto backward = [=](const Tensor& g) -> Tensor {
    if (n == 0) return reshape(sum(g), Dims{});
    Tensor starts = mul(unsqueeze(indices_like(windows, g), 1), Scalar(step));
    Tensor positions = add(starts, unsqueeze(indices_like(size, g), 0));  // [windows, size]
    return put_along(zeros_of(shape, dtype, g), d, positions, Arg(movedim(g, Dims{n}, Dims{d + 1})), true, false);
  };
  return strided_view(x, layout_of, "UnfoldBackward0", backward);
}

Tensor movedim(const Tensor& x, IntSpan source, IntSpan destination) {
  int64_t n = x->ndim();
  LOOM_CHECK(source.size() == destination.size(), Runtime, "movedim: Invalid source or destination dims: source (",
             format_dims(source), " dims) should contain the same number of dims as destination (",
             format_dims(destination), " dims)");
  Dims order(static_cast<size_t>(n), -1);
  std::vector<bool> moved(static_cast<size_t>(n), false);
  for (size_t i = 0; i < source.size(); ++i) {
    int64_t s = wrap_dim(source[i], std::max<int64_t>(n, 1)), t = wrap_dim(destination[i], std::max<int64_t>(n, 1));
    if (n == 0) continue;
    LOOM_CHECK(!moved[s], Runtime, "movedim: repeated dim in `source` (", format_dims(source), ")");
    LOOM_CHECK(order[t] == -1, Runtime, "movedim: repeated dim in `destination` (", format_dims(destination), ")");
    moved[s] = true;
    order[t] = s;
  }
  int64_t next = 0;
  for (int64_t& o : order) {
    if (o != -1) continue;
    while (moved[next]) ++next;
    o = next++;
  }
  return n == 0 ? alias(x) : permute(x, order);
}

Tensor view_dtype(const Tensor& x, DType dtype) {
  DType from = x->dtype();
  auto from_size = static_cast<int64_t>(itemsize(from)), to_size = static_cast<int64_t>(itemsize(dtype));
  const char* from_name = dtype_info(from).scalar_type_name;
  const char* to_name = dtype_info(dtype).scalar_type_name;
  // What the checks read of a pending tensor: its layout where known, else the dense one it is
  // produced with.
  const Layout* known = x->known_layout();
  Layout l = known ? *known : Layout::contiguous(x->sizes());
  if (from_size != to_size) {
    LOOM_CHECK(l.ndim() > 0, Runtime, "self.dim() cannot be 0 to view ", from_name, " as ", to_name,
               " (different element sizes)");
    LOOM_CHECK(l.strides.back() == 1 || l.sizes.back() == 1, Runtime, "self.stride(-1) must be 1 to view ",
               from_name, " as ", to_name, " (different element sizes), but got ", l.strides.back());
    if (to_size > from_size) {
      int64_t ratio = to_size / from_size;
      LOOM_CHECK(l.sizes.back() % ratio == 0, Runtime, "self.size(-1) must be divisible by ", ratio, " to view ",
                 from_name, " as ", to_name, " (different element sizes), but got ", l.sizes.back());
      LOOM_CHECK(l.offset % ratio == 0, Runtime, "self.storage_offset() must be divisible by ", ratio, " to view ",
                 from_name, " as ", to_name, " (different element sizes), but got ", l.offset);
      for (int64_t d = 0; d + 1 < l.ndim(); ++d)
        LOOM_CHECK(l.strides[d] % ratio == 0, Runtime, "self.stride(", d, ") must be divisible by ", ratio,
                   " to view ", from_name, " as ", to_name, " (different element sizes), but got ", l.strides[d]);
    }
  }
  auto reinterpreted = [&](Layout v) {
    if (from_size == to_size) return v;
    v.offset = v.offset * from_size / to_size;
    for (int64_t d = 0; d + 1 < v.ndim(); ++d) v.strides[d] = v.strides[d] * from_size / to_size;
    v.sizes.back() = v.sizes.back() * from_size / to_size;
    v.strides.back() = 1;
    return v;
  };
  if (!x->is_pending()) {
    x->check_usable();
    const Array& a = x->array();
    Tensor v = make_tensor(Array{a.storage, reinterpreted(a.layout), dtype}, x->is_lazy());
    v->mark_view_of(*x);
    return v;
  }
  Attrs attrs;
  attrs.push_back(static_cast<int64_t>(dtype));
  return apply(OpId::ViewDtype, {Arg(x)}, std::move(attrs));
}

// ---- copies ----

Tensor narrow_copy(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  return clone(narrow(x, dim, start, length));
}

Tensor diag(const Tensor& x, int64_t d) {
  LOOM_CHECK(x->ndim() == 1 || x->ndim() == 2, Runtime, "matrix or a vector expected");
  if (x->ndim() == 1) return diag_embed(x, d, 0, 1);
  return clone(diagonal(x, d, 0, 1));
}

// Built from index comparisons (as tril and triu): out[..., r, c] is x[..., r] (or x[..., c] below
// the main diagonal) where c - r == offset, so it fuses and differentiates as a `where`.
Tensor diag_embed(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  int64_t n = x->ndim() + 1;
  int64_t d1 = wrap_dim(dim1, n), d2 = wrap_dim(dim2, n);
  LOOM_CHECK(d1 != d2, Runtime, "diagonal dimensions cannot be identical ", dim1, ", ", dim2);
  Tensor v = as_1d(x);
  int64_t shift = offset >= 0 ? offset : -offset;
  int64_t m = v->sizes()[v->ndim() - 1] + shift;
  if (shift > 0) v = pad(v, Dims{0, shift}, 0);
  Tensor r = unsqueeze(indices_like(m, x), 1), c = unsqueeze(indices_like(m, x), 0);
  Tensor on = binary(OpId::Eq, sub(c, r), Scalar(offset));
  Tensor values = offset >= 0 ? unsqueeze(v, -1) : unsqueeze(v, -2);
  Tensor plane = cast(where(on, values, Scalar(int64_t{0})), x->dtype());  // [..., m, m]
  // The plane's dims go to (d1, d2), the others keep their order; the result is dense, as PyTorch's.
  if (d1 == n - 2 && d2 == n - 1) return plane;
  return contiguous(movedim(plane, Dims{n - 2, n - 1}, Dims{d1, d2}));
}

Tensor trace(const Tensor& x) {
  LOOM_CHECK(x->ndim() == 2, Runtime, "trace: expected a matrix, but got tensor with dim ", x->ndim());
  LOOM_CHECK(x->dtype() != DType::Bool, Runtime, "\"trace\" not implemented for 'Bool'");
  return sum(diagonal(x, 0, 0, 1));
}

Tensor roll(const Tensor& x, IntSpan shifts, IntSpan dims) {
  LOOM_CHECK(!shifts.empty(), Runtime, "`shifts` required");
  if (dims.empty() && shifts.size() == 1) return view(roll(reshape(x, Dims{-1}), shifts, Dims{0}), x->sizes());
  LOOM_CHECK(shifts.size() == dims.size(), Runtime, "shifts and dimensions must align. shifts: ", shifts.size(),
             ", dims:", dims.size());
  Tensor out = x;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], x->ndim());
    int64_t size = out->sizes()[d];
    if (size == 0) continue;
    int64_t k = (shifts[i] % size + size) % size;
    if (k == 0) continue;
    out = cat({narrow(out, d, size - k, k), narrow(out, d, 0, size - k)}, d);
  }
  return out.get() == x.get() ? clone(x) : out;
}

Tensor rot90(const Tensor& x, int64_t k, IntSpan dims) {
  LOOM_CHECK(dims.size() == 2, Runtime, "expected total rotation dims == 2, but got dims = ", dims.size());
  LOOM_CHECK(x->ndim() >= 2, Runtime, "expected total dims >= 2, but got total dims = ", x->ndim());
  int64_t d0 = wrap_dim(dims[0], x->ndim()), d1 = wrap_dim(dims[1], x->ndim());
  LOOM_CHECK(d0 != d1, Runtime, "expected rotation dims to be different, but got dim0 = ", d0, " and dim1 = ", d1);
  switch ((k % 4 + 4) % 4) {
    case 1: return transpose(flip(x, Dims{d1}), d0, d1);
    case 2: return flip(x, Dims{d0, d1});
    case 3: return transpose(flip(x, Dims{d0}), d0, d1);
    default: return clone(x);
  }
}

namespace {

void check_output_size(std::optional<int64_t> output_size, int64_t total) {
  LOOM_CHECK(!output_size || *output_size == total, Runtime, "allocated size does not match required size");
}

// Index i repeated counts[i] times, on the host.
std::vector<int64_t> repeated_indices(const Array& counts) {
  Array c = copy_to(counts, DType::Int64, kCPU);
  const auto* p = static_cast<const int64_t*>(c.data());
  std::vector<int64_t> out;
  for (int64_t i = 0; i < c.numel(); ++i) {
    LOOM_CHECK(p[i] >= 0, Runtime, "repeats can not be negative");
    out.insert(out.end(), static_cast<size_t>(p[i]), i);
  }
  return out;
}

void require_integer_repeats(const Tensor& repeats) {
  LOOM_CHECK(repeats->dtype() == DType::Int64 || repeats->dtype() == DType::Int32, Runtime,
             "\"repeat_interleave\" not implemented for '", dtype_info(repeats->dtype()).scalar_type_name, "'");
}

}  // namespace

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim, std::optional<int64_t> output_size) {
  LOOM_CHECK(repeats >= 0, Runtime, "repeats can not be negative");
  Tensor src = dim ? as_1d(x) : reshape(x, Dims{-1});
  int64_t d = dim ? wrap_dim(*dim, src->ndim()) : 0;
  check_output_size(output_size, src->sizes()[d] * repeats);
  Dims expanded(src->sizes());
  expanded.insert(static_cast<size_t>(d + 1), repeats);
  Dims merged(src->sizes());
  merged[d] *= repeats;
  return reshape(expand(unsqueeze(src, d + 1), expanded), merged);
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim,
                         std::optional<int64_t> output_size) {
  LOOM_CHECK(repeats->ndim() <= 1, Runtime, "repeats must be 0-dim or 1-dim tensor");
  require_integer_repeats(repeats);
  Tensor src = dim ? as_1d(x) : reshape(x, Dims{-1});
  int64_t d = dim ? wrap_dim(*dim, src->ndim()) : 0;
  Array counts = values_for_shape(repeats, "repeat_interleave");
  if (counts.numel() == 1 && src->sizes()[d] != 1) {
    return repeat_interleave(x, item(counts).as_int(), dim, output_size);
  }
  LOOM_CHECK(counts.numel() == src->sizes()[d], Runtime, "repeats must have the same size as input along dim");
  std::vector<int64_t> idx = repeated_indices(counts);
  check_output_size(output_size, static_cast<int64_t>(idx.size()));
  return index_select(src, d, int64_tensor(idx, Dims{static_cast<int64_t>(idx.size())}, placement_of(x)));
}

Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> output_size) {
  LOOM_CHECK(repeats->ndim() == 1, Runtime, "repeat_interleave only accept 1D vector as repeat");
  require_integer_repeats(repeats);
  std::vector<int64_t> idx = repeated_indices(values_for_shape(repeats, "repeat_interleave"));
  check_output_size(output_size, static_cast<int64_t>(idx.size()));
  return cast(int64_tensor(idx, Dims{static_cast<int64_t>(idx.size())}, placement_of(repeats)), repeats->dtype());
}

std::vector<Tensor> meshgrid(const std::vector<Tensor>& xs, std::string_view indexing) {
  LOOM_CHECK(!xs.empty(), Runtime, "meshgrid expects a non-empty TensorList");
  LOOM_CHECK(indexing == "ij" || indexing == "xy", Runtime,
             "torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: ", indexing);
  for (const Tensor& t : xs) {
    LOOM_CHECK(t->ndim() <= 1, Runtime, "torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got a tensor "
               "of shape ", format_dims(t->sizes()));
    LOOM_CHECK(t->dtype() == xs[0]->dtype(), Runtime, "meshgrid expects all tensors to have the same dtype");
    LOOM_CHECK(t->device() == xs[0]->device() && t->is_lazy() == xs[0]->is_lazy(), Runtime,
               "meshgrid expects all tensors to have the same device");
  }
  // "xy" swaps the roles of the first two inputs: the first varies along the columns.
  bool swap = indexing == "xy" && xs.size() >= 2;
  auto position = [&](size_t i) { return swap && i < 2 ? 1 - i : i; };
  Dims shape(xs.size(), 1);
  for (size_t i = 0; i < xs.size(); ++i) shape[position(i)] = xs[i]->numel();
  std::vector<Tensor> out;
  for (size_t i = 0; i < xs.size(); ++i) {
    Dims view_shape(xs.size(), 1);
    view_shape[position(i)] = xs[i]->numel();
    out.push_back(expand(reshape(xs[i], view_shape), shape));
  }
  return out;
}

Tensor cartesian_prod(const std::vector<Tensor>& xs) {
  for (const Tensor& t : xs)
    LOOM_CHECK(t->ndim() == 1, Runtime, "Expect a 1D vector, but got shape ", format_dims(t->sizes()));
  if (xs.size() == 1) return xs[0];
  std::vector<Tensor> columns;
  for (const Tensor& g : meshgrid(xs, "ij")) columns.push_back(reshape(g, Dims{-1}));
  return stack(columns, 1);
}

Tensor combinations(const Tensor& x, int64_t r, bool with_replacement) {
  LOOM_CHECK(x->ndim() == 1, Runtime, "Expect a 1D vector, but got shape ", format_dims(x->sizes()));
  LOOM_CHECK(r >= 0, Runtime, "Expect a non-negative number, but got ", r);
  if (r == 0) return full(Dims{0}, Scalar(int64_t{0}), x->dtype(), placement_of(x));
  int64_t n = x->sizes()[0];
  // The tuples are listed on the host (PyTorch's op is for small inputs too): refuse what would
  // not fit rather than run for hours.
  double tuples = 1;
  for (int64_t k = 0; k < r; ++k) tuples = tuples * static_cast<double>(with_replacement ? n + k : n - k) / (k + 1);
  LOOM_CHECK(tuples <= 1e8, Runtime, "combinations: ", n, " elements taken ", r, " at a time make about ", tuples,
             " tuples, more than loom lists (1e8)");
  // Every non-decreasing (with replacement) or increasing tuple of indices, in lexicographic order,
  // stepped iteratively (r may be large when the tuples are few).
  std::vector<int64_t> picks;
  if (with_replacement ? n > 0 : r <= n) {
    std::vector<int64_t> current(static_cast<size_t>(r));
    for (int64_t p = 0; p < r; ++p) current[p] = with_replacement ? 0 : p;
    auto last_at = [&](int64_t p) { return with_replacement ? n - 1 : n - r + p; };
    for (;;) {
      picks.insert(picks.end(), current.begin(), current.end());
      int64_t p = r - 1;
      while (p >= 0 && current[p] == last_at(p)) --p;
      if (p < 0) break;
      ++current[p];
      for (int64_t q = p + 1; q < r; ++q) current[q] = with_replacement ? current[p] : current[q - 1] + 1;
    }
  }
  auto count = static_cast<int64_t>(picks.size()) / r;
  if (count == 0) {  // no tuples: PyTorch's empty result still stacks (and differentiates) x
    Tensor none = full(Dims{0, r}, Scalar(int64_t{0}), x->dtype(), placement_of(x));
    record_zero_derivative("StackBackward0", {x.get()}, *none);
    return none;
  }
  Tensor idx = int64_tensor(picks, Dims{count * r}, placement_of(x));
  return reshape(index_select(x, 0, idx), Dims{count, r});
}

Tensor block_diag(const std::vector<Tensor>& xs) {
  if (xs.empty()) return full(Dims{1, 0}, Scalar(int64_t{0}), default_float_dtype(), Placement{kCPU, false});
  ResultType type;
  std::vector<Tensor> blocks;
  int64_t cols = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& t = xs[i];
    LOOM_CHECK(t->ndim() <= 2, Runtime, "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input ", i,
               " has ", t->ndim(), " dimensions");
    type.add_tensor(t->dtype(), 1);
    blocks.push_back(t->ndim() == 2 ? t : reshape(t, Dims{1, t->numel()}));
    cols += blocks.back()->sizes()[1];
  }
  DType dtype = type.get();
  std::vector<Tensor> rows;
  int64_t at = 0;
  for (const Tensor& b : blocks) {
    int64_t width = b->sizes()[1];
    rows.push_back(pad(cast(b, dtype), Dims{at, cols - at - width}, 0));
    at += width;
  }
  return cat(rows, 0);
}

Tensor tri_indices(int64_t row, int64_t col, int64_t offset, bool lower, DType dtype, Placement where) {
  const char* name = lower ? "tril_indices" : "triu_indices";
  LOOM_CHECK(row >= 0, Runtime, "row must be non-negative, got", row);
  LOOM_CHECK(col >= 0, Runtime, "col must be non-negative, got", col);
  LOOM_CHECK(dtype == DType::Int64 || dtype == DType::Int32, Runtime, "\"", name, "\" not implemented for '",
             dtype_info(dtype).scalar_type_name, "'");
  // Row r's columns are one range: [0, r + offset] (lower) or [r + offset, col) (upper), clipped
  // to [0, col). Only the rows whose range is not empty are visited, each adds at least one
  // index, and the total is bounded before anything is built: 5 x 2^62 visited every pair, for
  // years. (__int128: offset may be any int64, and r + offset must not wrap.)
  using Wide = __int128;
  constexpr int64_t kMaxIndices = int64_t{1} << 31;
  Wide first = lower ? std::max<Wide>(0, -Wide{offset}) : 0;
  Wide last = col == 0 ? first : lower ? Wide{row} : std::min<Wide>(row, std::max<Wide>(0, Wide{col} - offset));
  auto range_of = [&](Wide r) {
    Wide lo = lower ? 0 : std::max<Wide>(0, r + offset), hi = lower ? std::min<Wide>(col, r + offset + 1) : col;
    return std::pair{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
  };
  int64_t total = 0;
  for (Wide r = first; r < last; ++r) {
    auto [lo, hi] = range_of(r);
    total += hi - lo;
    LOOM_CHECK(total <= kMaxIndices, Runtime, name, "(", row, ", ", col, ", ", offset, ") gives more than 2^31 "
               "indices (", 2 * kMaxIndices * 8, " bytes and more)");
  }
  std::vector<int64_t> rows, cols;
  rows.reserve(2 * static_cast<size_t>(total));
  cols.reserve(static_cast<size_t>(total));
  for (Wide r = first; r < last; ++r) {
    auto [lo, hi] = range_of(r);
    for (int64_t c = lo; c < hi; ++c) {
      rows.push_back(static_cast<int64_t>(r));
      cols.push_back(c);
    }
  }
  rows.insert(rows.end(), cols.begin(), cols.end());
  auto count = static_cast<int64_t>(cols.size());
  return cast(int64_tensor(rows, Dims{2, count}, where), dtype);
}

// ---- splitting, stacking, shape helpers ----

std::vector<Tensor> tensor_split(const Tensor& x, int64_t sections, int64_t dim) {
  LOOM_CHECK(x->ndim() > 0, Runtime, "tensor_split expected at least a 1-dimensional tensor, but got a tensor with ",
             x->ndim(), " dims");
  LOOM_CHECK(sections > 0, Runtime, "number of sections must be larger than 0, got ", sections);
  int64_t d = wrap_dim(dim, x->ndim());
  check_piece_count(sections, "tensor_split");
  int64_t size = x->sizes()[d];
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t i = 0; i < sections; ++i) {
    int64_t length = size / sections + (i < size % sections ? 1 : 0);
    out.push_back(narrow(x, d, start, length));
    start += length;
  }
  return out;
}

std::vector<Tensor> tensor_split_at(const Tensor& x, IntSpan indices, int64_t dim) {
  LOOM_CHECK(x->ndim() > 0, Runtime, "tensor_split expected at least a 1-dimensional tensor, but got a tensor with ",
             x->ndim(), " dims");
  int64_t d = wrap_dim(dim, x->ndim());
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t stop : indices) {
    out.push_back(slice(x, d, start, stop));
    start = stop;
  }
  out.push_back(slice(x, d, start, std::nullopt));
  return out;
}

std::vector<Tensor> directional_split(const Tensor& x, const char* name, int64_t min_dims, int64_t dim,
                                      std::optional<int64_t> sections, IntSpan indices) {
  LOOM_CHECK(x->ndim() >= min_dims, Runtime, "torch.", name, " requires a tensor with at least ", min_dims,
             " dimension, but got a tensor with ", x->ndim(), " dimensions!");
  if (!sections) return tensor_split_at(x, indices, dim);
  int64_t size = x->sizes()[dim];
  LOOM_CHECK(*sections != 0 && size % *sections == 0, Runtime, "torch.", name, " attempted to split along dimension ",
             dim, ", but the size of the dimension ", size, " is not divisible by the split_size ", *sections, "!");
  return tensor_split(x, *sections, dim);
}

Tensor atleast(const Tensor& x, int64_t ndim) {
  int64_t n = x->ndim();
  if (n >= ndim) return x;
  if (n == 0) return reshape(x, Dims(static_cast<size_t>(ndim), 1));
  if (n == 1) return ndim == 2 ? unsqueeze(x, 0) : reshape(x, Dims{1, x->sizes()[0], 1});
  return unsqueeze(x, -1);  // 2-d to 3-d
}

namespace {

std::vector<Tensor> all_atleast(const std::vector<Tensor>& xs, int64_t ndim, const char* name) {
  LOOM_CHECK(!xs.empty(), Runtime, name, " expects a non-empty TensorList");
  std::vector<Tensor> out;
  for (const Tensor& t : xs) out.push_back(atleast(t, ndim));
  return out;
}

}  // namespace

Tensor hstack(const std::vector<Tensor>& xs) {
  std::vector<Tensor> parts = all_atleast(xs, 1, "hstack");
  return cat(parts, parts[0]->ndim() == 1 ? 0 : 1);
}

Tensor vstack(const std::vector<Tensor>& xs) { return cat(all_atleast(xs, 2, "vstack"), 0); }

Tensor dstack(const std::vector<Tensor>& xs) { return cat(all_atleast(xs, 3, "dstack"), 2); }

Tensor column_stack(const std::vector<Tensor>& xs) {
  LOOM_CHECK(!xs.empty(), Runtime, "column_stack expects a non-empty TensorList");
  std::vector<Tensor> columns;
  for (const Tensor& t : xs) columns.push_back(t->ndim() <= 1 ? reshape(t, Dims{t->numel(), 1}) : t);
  return cat(columns, 1);
}

// ---- scatters and index updates ----

namespace {

Tensor scatter_primitive(OpId op, const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                         Attrs extra = {}) {
  Attrs attrs;
  attrs.push_back(wrap_dim(dim, std::max<int64_t>(x->ndim(), 1)));
  for (int64_t a : extra) attrs.push_back(a);
  return apply(op, {Arg(x), Arg(index), Arg(src)}, std::move(attrs));
}

// A number scattered as a tensor of index's shape in x's dtype (converted as PyTorch converts it).
Tensor scattered_value(const Tensor& x, const Tensor& index, const Arg& src) {
  if (src.is_tensor()) return src.tensor;
  return full(index->sizes(), src.scalar.stored_as(x->dtype()), x->dtype(), placement_of(x));
}

// scatter's dtype checks, for the forms that run as a ScatterAdd (whose own words differ).
void check_scatter_operands(const Tensor& x, const Tensor& index, const Tensor& src) {
  LOOM_CHECK(index->dtype() == DType::Int64, Runtime, "scatter(): Expected dtype int64 for index");
  LOOM_CHECK(src->dtype() == x->dtype(), Runtime, "scatter(): Expected self.dtype to be equal to src.dtype");
}

// x with the positions index addresses along dim set to 0 (include_self=False).
Tensor cleared_at(const Tensor& x, int64_t dim, const Tensor& index) {
  return scatter_primitive(OpId::Scatter, x, dim, index, zeros_of(index->sizes(), x->dtype(), x));
}

}  // namespace

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Arg& src, std::string_view reduce) {
  Tensor values = scattered_value(x, index, src);
  if (reduce.empty()) return scatter_primitive(OpId::Scatter, x, dim, index, values);
  if (reduce == "add") {
    check_scatter_operands(x, index, values);
    return scatter_add(x, dim, index, values);
  }
  LOOM_CHECK(reduce == "multiply", Runtime, "reduce argument must be either add or multiply.");
  return scatter_primitive(OpId::ScatterReduce, x, dim, index, values, {kScatterProd, 1});
}

Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                      bool include_self) {
  if (reduce == "prod" || reduce == "amax" || reduce == "amin") {
    int64_t kind = reduce == "prod" ? kScatterProd : reduce == "amax" ? kScatterAmax : kScatterAmin;
    return scatter_primitive(OpId::ScatterReduce, x, dim, index, src, {kind, include_self});
  }
  LOOM_CHECK(reduce == "sum" || reduce == "mean", Runtime,
             "reduce argument must be either sum, prod, mean, amax or amin.");
  check_scatter_operands(x, index, src);
  Tensor total = scatter_add(include_self ? x : cleared_at(x, dim, index), dim, index, src);
  if (reduce == "sum") return total;
  // mean: the sum over the elements combined at each position (x's counts as one unless
  // include_self is false; a position nothing reaches keeps x's value).
  Tensor ones = full(index->sizes(), Scalar(int64_t{1}), x->dtype(), placement_of(x));
  Tensor count = scatter_add(zeros_of(x->sizes(), x->dtype(), x), dim, index, ones);
  if (include_self) count = add(count, Scalar(int64_t{1}));
  count = where(binary(OpId::Eq, count, Scalar(int64_t{0})), Scalar(int64_t{1}), count);
  return cast(div(total, count, is_floating(x->dtype()) ? "" : "floor"), x->dtype());
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha) {
  require_index(index, "index_add_", true, ErrorKind::Runtime, "(): Expected dtype int32/int64 for index but got: ");
  require_vector_index(index, "index_add_");
  LOOM_CHECK(source->dtype() == x->dtype(), Runtime, "index_add_(): self (", dtype_info(x->dtype()).scalar_type_name,
             ") and source (", dtype_info(source->dtype()).scalar_type_name, ") must have the same scalar type");
  int64_t d = wrap_dim(dim, std::max<int64_t>(x->ndim(), 1));
  LOOM_CHECK(is_floating(x->dtype()) || !alpha.is_float(), Runtime,
             "For integral input tensors, argument alpha must not be a floating point number.");
  int64_t along = source->ndim() ? source->sizes()[std::min(d, source->ndim() - 1)] : 1;
  LOOM_CHECK(index->numel() == along, Runtime, "index_add_(): Number of indices (", index->numel(),
             ") should be equal to source.size(dim): (", along, "), for dim: ", d);
  Tensor values = alpha.kind() == ScalarKind::Int && alpha.as_int() == 1 ? source : mul(source, alpha);
  if (x->ndim() == 0) return reshape(put_along(as_1d(x), 0, index, Arg(reshape(values, Dims{-1})), true, true), Dims{});
  return put_along(x, d, index, Arg(cast(values, x->dtype())), true, true);
}

Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  require_index(index, "index_copy_", false, ErrorKind::Runtime, "(): Expected a long tensor for index, but got ");
  LOOM_CHECK(source->dtype() == x->dtype(), Runtime, "index_copy_(): self and source expected to have the same dtype, "
             "but got (self) ", dtype_info(x->dtype()).scalar_type_name, " and (source) ",
             dtype_info(source->dtype()).scalar_type_name);
  require_vector_index(index, "index_copy_");
  int64_t d = wrap_dim(dim, std::max<int64_t>(x->ndim(), 1));
  bool same_slices = source->ndim() == x->ndim();
  for (int64_t i = 0; same_slices && i < x->ndim(); ++i) same_slices = i == d || source->sizes()[i] == x->sizes()[i];
  LOOM_CHECK(same_slices || x->ndim() == 0, Runtime, "index_copy_(): Source/destination tensor must have same slice "
             "shapes. Destination shape: ", format_dims(x->sizes()), " and source shape: ", format_dims(source->sizes()),
             " apart from dimension ", d);
  int64_t along = source->ndim() ? source->sizes()[d] : 1;
  LOOM_CHECK(index->numel() == along, Index, "index_copy_(): Number of indices (", index->numel(),
             ") should be equal to source.size(dim) (", along, ")");
  if (x->ndim() == 0) return reshape(put_along(as_1d(x), 0, index, Arg(reshape(source, Dims{-1})), false, true), Dims{});
  return put_along(x, d, index, Arg(source), false, true);
}

Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Arg& value) {
  require_index(index, "index_fill_", false, ErrorKind::Index, "(): Expected dtype int64 for index.");
  require_vector_index(index, "index_fill_");
  Arg v = value;
  if (value.is_tensor()) {
    LOOM_CHECK(value.tensor->ndim() == 0, Runtime, "index_fill_ only supports a 0-dimensional value tensor, but got "
               "tensor with ", value.tensor->ndim(), " dimension(s).");
    v = Arg(cast(value.tensor, x->dtype()));
  } else {
    v = Arg(value.scalar.stored_as(x->dtype()));
  }
  if (x->ndim() == 0) return reshape(put_along(as_1d(x), 0, index, v, false, false), Dims{});
  return put_along(x, wrap_dim(dim, x->ndim()), index, v, false, false);
}

Tensor take(const Tensor& x, const Tensor& idx) {
  require_index(idx, "take", false, ErrorKind::Runtime, "(): Expected a long tensor for index, but got ");
  return index(reshape(x, Dims{-1}), 0, {idx});
}

Tensor put(const Tensor& x, const Tensor& index, const Tensor& source, bool accumulate) {
  require_index(index, "put_", false, ErrorKind::Runtime, "(): Expected a long tensor for index, but got ");
  LOOM_CHECK(source->dtype() == x->dtype(), Runtime, "put_(): self and source expected to have the same dtype, but "
             "got self.dtype = ", dtype_info(x->dtype()).scalar_type_name, " and source.dtype = ",
             dtype_info(source->dtype()).scalar_type_name);
  LOOM_CHECK(source->numel() == index->numel(), Index, "put_(): Expected source and index to have the same number of "
             "elements, but got source.numel() = ", source->numel(), ", index.numel() = ", index->numel());
  Tensor flat = reshape(x, Dims{-1});
  Tensor out = put_along(flat, 0, reshape(index, Dims{-1}), Arg(reshape(source, Dims{-1})), accumulate, false);
  return view(out, x->sizes());
}

}  // namespace loom::ops
