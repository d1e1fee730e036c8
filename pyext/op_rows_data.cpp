// The data-movement family as Python: the op table's rows (pyext/op_table.h) of lazy/ops_movement.h
// with PyTorch's names, signatures and defaults. The varargs forms PyTorch writes in Python
// (meshgrid(*tensors), atleast_1d(*tensors), block_diag, cartesian_prod) wrap these rows in
// pyext/loom/_functional.py.
#include <algorithm>

#include "lazy/dispatch.h"
#include "lazy/ops_movement.h"
#include "pyext/objects.h"
#include "pyext/op_table.h"
#include "runtime/error.h"
#include "runtime/layout.h"

namespace loom::py {

// indexing.cpp: x with x[indices] = values (or += with accumulate), indices read as a Python
// index (a tuple of tensors, None, slices ...), as Tensor.index_put reads its list.
Tensor index_put_python(const Tensor& x, PyObject* indices, const Tensor& values, bool accumulate);

// The positions offset + sum_k i_k * stride_k for every index (i_0, ..., i_n-1) of `size`, an int64
// tensor of that shape placed as `like`.
static Tensor strided_positions(IntSpan size, IntSpan stride, int64_t offset, const Tensor& like) {
  Placement where = placement_of(like);
  Tensor positions = ops::full(Dims{}, Scalar(offset), DType::Int64, where);
  for (size_t k = 0; k < size.size(); ++k) {
    Dims shape(size.size(), 1);
    shape[k] = size[k];
    Tensor along = ops::arange(size[k], Scalar(int64_t{0}), Scalar(stride[k]), DType::Int64, where);
    positions = ops::add(positions, ops::reshape(along, shape));
  }
  return ops::expand(positions, size);
}

// as_strided: a view of x whose element i_0, ..., i_n-1 is x's storage element storage_offset +
// sum_k i_k * stride_k (storage_offset None: x's own). PyTorch reads any of the storage's
// elements; loom reads x's own only, so x must be contiguous (its storage order is then its element
// order) and the view must stay within them. Elements may repeat (overlapping windows): the
// gradient adds up at each element. Also the view Tensor.as_strided_ makes self (tensor_methods.cpp).
Tensor as_strided(const Parsed& p) {
  Tensor x = p.tensor(0);
  Dims size = p.int_list(1), stride = p.int_list(2);
  LOOM_CHECK(size.size() == stride.size(), Runtime, "mismatch in length of strides and shape: size ",
             format_dims(size), ", stride ", format_dims(stride));
  check_sizes(size);
  for (int64_t s : stride)
    LOOM_CHECK(s >= 0, Runtime, "as_strided: Negative strides are not supported at the moment, got strides: ",
               format_dims(stride));
  const Layout* own = x->known_layout();
  LOOM_CHECK(!own || own->is_contiguous(), Runtime, "loom's as_strided takes a contiguous input (of shape ",
             format_dims(x->sizes()), " here it is not): call .contiguous() first");
  int64_t base = own ? own->offset : 0;
  int64_t relative = p.optional_int64(3).value_or(base) - base;
  int64_t last = relative;
  for (size_t k = 0; k < size.size(); ++k) last += (size[k] - 1) * stride[k];
  bool empty = numel_of(size) == 0;
  LOOM_CHECK(relative >= 0 && (empty || last < x->numel()), Runtime, "as_strided: size ", format_dims(size),
             ", stride ", format_dims(stride), " and storage offset ", relative + base, " reach storage elements ",
             relative + base, " to ", last + base, ", but loom's as_strided reads only the input's own ",
             x->numel(), " elements (", base, " to ", base + x->numel() - 1, ")");
  auto layout_of = [size, stride, relative](const Layout& l) -> std::optional<Layout> {
    return Layout{size, stride, l.offset + relative};
  };
  Dims shape(x->sizes());
  int64_t numel = x->numel();
  DType dtype = x->dtype();
  auto backward = [=](const Tensor& g) -> Tensor {
    Tensor positions = ops::flatten(strided_positions(size, stride, relative, g));
    Tensor flat = ops::full(Dims{numel}, Scalar(0.0), dtype, placement_of(g));
    return ops::reshape(ops::index_add(flat, 0, positions, ops::flatten(g)), shape);
  };
  return ops::strided_view(x, layout_of, "AsStridedBackward0", backward);
}

namespace {


Result tensor_split(const Parsed& p) {
  Tensor x = p.tensor(0);
  if (p.index == 0) return ops::tensor_split(x, p.int64(1), p.int64(2));
  if (p.index == 1) return ops::tensor_split_at(x, p.int_list(1), p.int64(2));
  // A tensor of sections (0-d) or of indices (1-d), as PyTorch reads it: its values on the host.
  Tensor t = p.tensor(1);
  LOOM_CHECK(t->dtype() == DType::Int64, Runtime, "tensor_split expected tensor_indices_or_sections to have dtype of "
             "long, but got ", dtype_info(t->dtype()).scalar_type_name);
  LOOM_CHECK(t->ndim() <= 1, Runtime, "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
             "one-dimensional tensor, but got a tensor with ", t->ndim(), " dims");
  Array values = copy_to(ops::values_for_shape(t, "tensor_split"), DType::Int64, kCPU);
  const auto* v = static_cast<const int64_t*>(values.data());
  if (t->ndim() == 0) return ops::tensor_split(x, v[0], p.int64(2));
  return ops::tensor_split_at(x, Dims(v, v + values.numel()), p.int64(2));
}

// diff: the n-th forward difference along dim (for bool, whether neighbours differ), with
// prepend and append joined to the ends first.
Result diff(const Parsed& p) {
  Tensor x = p.tensor(0);
  int64_t n = p.int64(1), dim = p.int64(2);
  LOOM_CHECK(x->ndim() >= 1, Runtime, "diff expects input to be at least one-dimensional");
  LOOM_CHECK(n >= 0, Runtime, "order must be non-negative but got ", n);
  dim = wrap_dim(dim, x->ndim());
  std::vector<Tensor> parts;
  if (Tensor before = p.tensor(3)) parts.push_back(before);
  parts.push_back(x);
  if (Tensor after = p.tensor(4)) parts.push_back(after);
  if (parts.size() > 1) x = ops::cat(parts, dim);
  for (int64_t k = 0; k < n && x->sizes()[dim] > 0; ++k) {
    int64_t m = x->sizes()[dim] - 1;
    Tensor next = ops::narrow(x, dim, 1, m), previous = ops::narrow(x, dim, 0, m);
    x = x->dtype() == DType::Bool ? ops::binary(OpId::Ne, next, previous) : ops::sub(next, previous);
  }
  return x;
}

// select_scatter / slice_scatter / diagonal_scatter: input with the region `view_of` selects
// replaced by src (of the region's shape), as a new tensor: a clone with src copied into that
// view of it, so input's gradient is the rest's and src's the region's.
template <typename ViewOf>
Tensor scatter_into(const Tensor& x, const Tensor& src, ViewOf view_of) {
  Tensor region = view_of(x);
  LOOM_CHECK(std::ranges::equal(region->sizes(), src->sizes()), Runtime,
             "expected src to have a size equal to the slice of self. src size = ", format_dims(src->sizes()),
             ", slice size = ", format_dims(region->sizes()));
  Tensor out = ops::clone(x);
  ops::copy_(*view_of(out), src);
  return out;
}

Result slice_scatter(const Parsed& p) {
  int64_t dim = p.int64(2), step = p.int64(5);
  std::optional<int64_t> start = p.optional_int64(3), end = p.optional_int64(4);
  return scatter_into(p.tensor(0), p.tensor(1), [&](const Tensor& t) { return ops::slice(t, dim, start, end, step); });
}

// masked_scatter: input with the positions where mask (broadcast to input's shape) is true
// filled, in row-major order, with source's leading elements. The k-th true position takes
// source's element k: a running count of the mask picks it, so nothing is read on the host unless
// source might be too short (fewer elements than the mask), which must then be checked.
Result masked_scatter(const Parsed& p) {
  Tensor x = p.tensor(0), mask = p.tensor(1), source = p.tensor(2);
  LOOM_CHECK(mask->dtype() == DType::Bool, Runtime,
             "masked_scatter_ only supports boolean masks, but got mask with dtype ",
             dtype_info(mask->dtype()).scalar_type_name);
  LOOM_CHECK(source->dtype() == x->dtype(), Runtime,
             "masked_scatter: expected self and source to have same dtypes but got ",
             dtype_info(x->dtype()).scalar_type_name, " and ", dtype_info(source->dtype()).scalar_type_name);
  Tensor m = ops::expand(mask, x->sizes());
  if (source->numel() < m->numel()) {
    Tensor ones = ops::sum(ops::cast(m, DType::Int64));
    Array count = copy_to(ops::values_for_shape(ones, "masked_scatter"), DType::Int64, kCPU);
    LOOM_CHECK(*static_cast<const int64_t*>(count.data()) <= source->numel(), Runtime,
               "Number of elements of source < number of ones in mask (source has ", source->numel(), ", mask ",
               *static_cast<const int64_t*>(count.data()), ")");
  }
  if (source->numel() == 0) return ops::clone(x);
  Tensor rank = ops::sub(ops::cumsum(ops::flatten(ops::cast(m, DType::Int64)), 0), Scalar(int64_t{1}));
  rank = ops::clamp(rank, Arg(Scalar(int64_t{0})), Arg(Scalar(source->numel() - 1)));
  Tensor picked = ops::reshape(ops::index_select(ops::flatten(source), 0, rank), x->sizes());
  return ops::where(m, picked, x);
}

// hsplit / vsplit / dsplit: (sections) or (indices).
template <int which>
Result directional_split(const Parsed& p) {
  static constexpr const char* names[] = {"hsplit", "vsplit", "dsplit"};
  Tensor x = p.tensor(0);
  int64_t min_dims = which == 0 ? 1 : which + 1;
  int64_t dim = which == 0 ? (x->ndim() == 1 ? 0 : 1) : which == 1 ? 0 : 2;
  Dims indices = p.index == 1 ? p.int_list(1) : Dims{};
  std::optional<int64_t> sections = p.index == 0 ? std::optional<int64_t>(p.int64(1)) : std::nullopt;
  return ops::directional_split(x, names[which], min_dims, dim, sections, indices);
}

Result repeat_interleave(const Parsed& p) {
  std::optional<int64_t> dim = p.index < 2 ? p.optional_int64(2) : std::nullopt;
  if (p.index == 0) return ops::repeat_interleave(p.tensor(0), p.tensor(1), dim, p.optional_int64(3));
  if (p.index == 1) return ops::repeat_interleave(p.tensor(0), p.int64(1), dim, p.optional_int64(3));
  return ops::repeat_interleave(p.tensor(0), p.optional_int64(1));
}

Result scatter(const Parsed& p) {
  Arg src = p.index == 0 ? Arg(p.tensor(3)) : Arg(p.scalar(3));
  return ops::scatter(p.tensor(0), p.int64(1), p.tensor(2), src, p.has(4) ? p.string(4) : "");
}

Result nonzero(const Parsed& p) {
  if (p.signature->params().size() > 1 && p.boolean(1)) return ops::nonzero_tuple(p.tensor(0));
  return ops::nonzero(p.tensor(0));
}

// Tensor.type(): PyTorch's legacy type names.
const char* legacy_type_name(DType d) {
  switch (d) {
    case DType::Bool: return "BoolTensor";
    case DType::UInt8: return "ByteTensor";
    case DType::Int8: return "CharTensor";
    case DType::Int16: return "ShortTensor";
    case DType::Int32: return "IntTensor";
    case DType::Int64: return "LongTensor";
    case DType::Float16: return "HalfTensor";
    case DType::BFloat16: return "BFloat16Tensor";
    case DType::Float32: return "FloatTensor";
    case DType::Float64: return "DoubleTensor";
  }
  return "Tensor";
}

// type(): "torch.FloatTensor" (torch.cuda.FloatTensor on a GPU); type(dtype or such a name):
// this tensor converted, itself when nothing changes.
Result tensor_type(const Parsed& p) {
  const TensorImpl& self = impl_of(p.self);
  if (!p.has(1)) {
    std::string name = std::string(self.device().is_cuda() ? "torch.cuda." : "torch.") + legacy_type_name(self.dtype());
    return check(PyUnicode_FromString(name.c_str()));
  }
  PyObject* arg = p.object(1);
  DType dtype = self.dtype();
  Device device = self.device();
  // A legacy class (loom.FloatTensor, loom.cuda.FloatTensor: loom/_legacy_tensor.py) by its name.
  std::string name;
  if (PyType_Check(arg) && PyObject_HasAttrString(arg, "is_cuda")) {
    PyRef is_cuda = PyRef::checked(PyObject_GetAttrString(arg, "is_cuda"));
    name = std::string(PyObject_IsTrue(is_cuda.get()) ? "torch.cuda." : "torch.") +
           reinterpret_cast<PyTypeObject*>(arg)->tp_name;
  } else if (PyUnicode_Check(arg)) {
    name = p.string(1);
  }
  if (!name.empty()) {
    bool cuda = name.rfind("torch.cuda.", 0) == 0;
    std::string base = cuda ? name.substr(11) : name.rfind("torch.", 0) == 0 ? name.substr(6) : "";
    bool found = false;
    for (int d = 0; d < kNumDTypes && !found; ++d)
      if (base == legacy_type_name(static_cast<DType>(d))) {
        dtype = static_cast<DType>(d);
        found = true;
      }
    LOOM_CHECK(found, Value, "invalid type: '", name, "'");
    if (cuda && !device.is_cuda()) device = Device(DeviceType::CUDA, 0);
    if (!cuda && device.is_cuda()) device = kCPU;
  } else {
    dtype = dtype_from_py(arg);
  }
  Tensor r = ops::to(tensor_of(p.self), dtype, device, self.is_lazy());
  if (r.get() == &self) return Py_NewRef(p.self);
  return r;
}

Result flip_side(const Parsed& p, int64_t dim, const char* need) {
  Tensor x = p.tensor(0);
  LOOM_CHECK(x->ndim() > dim, Runtime, "Input must be >= ", need, "-d.");
  return ops::flip(x, Dims{dim});
}

const Row kRows[] = {
    // ---- views ----
    {{"diagonal(Tensor input, int offset=0, int dim1=0, int dim2=1)"}, kBoth,
     LOOM_BODY(ops::diagonal(p.tensor(0), p.int64(1), p.int64(2), p.int64(3))), "A view of a diagonal, as the last dim."},
    {{"unfold(Tensor input, int dimension, int size, int step)"}, kMethod,
     LOOM_BODY(ops::unfold(p.tensor(0), p.int64(1), p.int64(2), p.int64(3))),
     "A view of the windows of `size` elements every `step` along a dim, as a new last dim."},
    {{"movedim(Tensor input, int[1] source, int[1] destination)"}, kBoth,
     LOOM_BODY(ops::movedim(p.tensor(0), p.int_list(1), p.int_list(2)))},
    {{"moveaxis(Tensor input, int[1] source, int[1] destination)"}, kBoth,
     LOOM_BODY(ops::movedim(p.tensor(0), p.int_list(1), p.int_list(2)))},
    {{"swapaxes(Tensor input, int axis0, int axis1)"}, kBoth,
     LOOM_BODY(ops::transpose(p.tensor(0), p.int64(1), p.int64(2)))},
    {{"swapdims(Tensor input, int dim0, int dim1)"}, kBoth,
     LOOM_BODY(ops::transpose(p.tensor(0), p.int64(1), p.int64(2)))},
    {{"type(Tensor input, PyObject* dtype=None, bool non_blocking=False)"}, kMethod, tensor_type,
     "The legacy type name ('torch.FloatTensor'), or this tensor converted to a dtype or such a name."},

    // ---- copies ----
    {{"narrow_copy(Tensor input, int dim, SymInt start, SymInt length)"}, kBoth,
     LOOM_BODY(ops::narrow_copy(p.tensor(0), p.int64(1), p.int64(2), p.int64(3)))},
    {{"diag(Tensor input, int diagonal=0)"}, kBoth, LOOM_BODY(ops::diag(p.tensor(0), p.int64(1)))},
    {{"diag_embed(Tensor input, int offset=0, int dim1=-2, int dim2=-1)"}, kBoth,
     LOOM_BODY(ops::diag_embed(p.tensor(0), p.int64(1), p.int64(2), p.int64(3)))},
    {{"trace(Tensor input)"}, kBoth, LOOM_BODY(ops::trace(p.tensor(0)))},
    {{"diff(Tensor input, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None)"}, kBoth, diff},
    {{"diagflat(Tensor input, int offset=0)"}, kBoth, LOOM_BODY(ops::diag(ops::flatten(p.tensor(0)), p.int64(1))),
     "A 2-d tensor with the flattened input on diagonal `offset`."},
    {{"select_scatter(Tensor input, Tensor src, int dim, int index)"}, kBoth, [](const Parsed& p) -> Result {
       int64_t dim = p.int64(2), index = p.int64(3);
       return scatter_into(p.tensor(0), p.tensor(1), [&](const Tensor& t) { return ops::select(t, dim, index); });
     }},
    {{"slice_scatter(Tensor input, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1)"}, kBoth,
     slice_scatter},
    {{"diagonal_scatter(Tensor input, Tensor src, int offset=0, int dim1=0, int dim2=1)"}, kBoth,
     [](const Parsed& p) -> Result {
       int64_t offset = p.int64(2), dim1 = p.int64(3), dim2 = p.int64(4);
       return scatter_into(p.tensor(0), p.tensor(1),
                           [&](const Tensor& t) { return ops::diagonal(t, offset, dim1, dim2); });
     }},
    {{"as_strided(Tensor input, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None)"}, kBoth,
     LOOM_BODY(as_strided(p)), "A view; the input must be contiguous and the view stay within its elements (PyTorch reads the whole "
     "storage)."},
    {{"masked_scatter(Tensor input, Tensor mask, Tensor source)"}, kAll, masked_scatter,
     "Reads the mask's count on the host (a sync on the lazy device) only when source has fewer elements than the "
     "mask."},
    // PyTorch's "unsafe" splits skip its view tracking; loom's splits are the plain ones.
    {{"split_with_sizes(Tensor input, int[] split_sizes, int dim=0)"}, kBoth,
     LOOM_BODY(ops::split_sections(p.tensor(0), p.int_list(1), p.int64(2)))},
    {{"unsafe_split_with_sizes(Tensor input, int[] split_sizes, int dim=0)"}, kBoth,
     LOOM_BODY(ops::split_sections(p.tensor(0), p.int_list(1), p.int64(2)))},
    {{"unsafe_split(Tensor input, int split_size, int dim=0)"}, kBoth,
     LOOM_BODY(ops::split(p.tensor(0), p.int64(1), p.int64(2)))},
    {{"unsafe_chunk(Tensor input, int chunks, int dim=0)"}, kBoth,
     LOOM_BODY(ops::chunk(p.tensor(0), p.int64(1), p.int64(2)))},
    {{"roll(Tensor input, int[1] shifts, int[1] dims=[])"}, kBoth,
     LOOM_BODY(ops::roll(p.tensor(0), p.int_list(1), p.int_list(2)))},
    {{"rot90(Tensor input, int k=1, int[] dims=[0,1])"}, kBoth,
     LOOM_BODY(ops::rot90(p.tensor(0), p.int64(1), p.int_list(2)))},
    {{"fliplr(Tensor input)"}, kBoth, LOOM_BODY(flip_side(p, 1, "2"))},
    {{"flipud(Tensor input)"}, kBoth, LOOM_BODY(flip_side(p, 0, "1"))},
    // The form of repeats alone is a function only: Tensor.repeat_interleave() needs repeats.
    {{"repeat_interleave(Tensor input, Tensor repeats, int? dim=None, *, int? output_size=None)",
      "repeat_interleave(Tensor input, int repeats, int? dim=None, *, int? output_size=None)",
      "repeat_interleave(Tensor repeats, *, int? output_size=None)"},
     kFunction, repeat_interleave, "With a tensor of repeats, a sync point on the lazy device (the size depends on them)."},
    {{"repeat_interleave(Tensor input, Tensor repeats, int? dim=None, *, int? output_size=None)",
      "repeat_interleave(Tensor input, int repeats, int? dim=None, *, int? output_size=None)"},
     kMethod, repeat_interleave, "With a tensor of repeats, a sync point on the lazy device (the size depends on them)."},
    {{"meshgrid(Tensor[] tensors)", "meshgrid(Tensor[] tensors, *, str indexing)"}, kFunction,
     LOOM_BODY(ops::meshgrid(p.tensors(0), p.index ? p.string(1) : "ij"))},
    {{"cartesian_prod(Tensor[] tensors)"}, kFunction, LOOM_BODY(ops::cartesian_prod(p.tensors(0)))},
    {{"combinations(Tensor input, int r=2, bool with_replacement=False)"}, kFunction,
     LOOM_BODY(ops::combinations(p.tensor(0), p.int64(1), p.boolean(2)))},
    {{"block_diag(Tensor[] tensors)"}, kFunction, LOOM_BODY(ops::block_diag(p.tensors(0)))},

    // ---- splitting and stacking ----
    {{"tensor_split(Tensor input, int sections, int dim=0) -> Tensor[]",
      "tensor_split(Tensor input, int[] indices, int dim=0) -> Tensor[]",
      "tensor_split(Tensor input, Tensor tensor_indices_or_sections, int dim=0) -> Tensor[]"},
     kBoth, tensor_split},
    {{"hsplit(Tensor input, int sections) -> Tensor[]", "hsplit(Tensor input, int[] indices) -> Tensor[]"}, kBoth,
     directional_split<0>},
    {{"vsplit(Tensor input, int sections) -> Tensor[]", "vsplit(Tensor input, int[] indices) -> Tensor[]"}, kBoth,
     directional_split<1>},
    {{"dsplit(Tensor input, int sections) -> Tensor[]", "dsplit(Tensor input, int[] indices) -> Tensor[]"}, kBoth,
     directional_split<2>},
    {{"hstack(Tensor[] tensors)"}, kFunction, LOOM_BODY(ops::hstack(p.tensors(0)))},
    {{"vstack(Tensor[] tensors)"}, kFunction, LOOM_BODY(ops::vstack(p.tensors(0)))},
    {{"row_stack(Tensor[] tensors)"}, kFunction, LOOM_BODY(ops::vstack(p.tensors(0)))},
    {{"dstack(Tensor[] tensors)"}, kFunction, LOOM_BODY(ops::dstack(p.tensors(0)))},
    {{"column_stack(Tensor[] tensors)"}, kFunction, LOOM_BODY(ops::column_stack(p.tensors(0)))},
    {{"atleast_1d(Tensor input)"}, kFunction, LOOM_BODY(ops::atleast(p.tensor(0), 1))},
    {{"atleast_2d(Tensor input)"}, kFunction, LOOM_BODY(ops::atleast(p.tensor(0), 2))},
    {{"atleast_3d(Tensor input)"}, kFunction, LOOM_BODY(ops::atleast(p.tensor(0), 3))},

    // ---- scatters and index updates ----
    {{"scatter(Tensor input, int dim, Tensor index, Tensor src, *, str? reduce=None)",
      "scatter(Tensor input, int dim, Tensor index, Scalar value, *, str? reduce=None)"},
     kAll, scatter, "reduce: None (replace), 'add' or 'multiply'."},
    {{"scatter_reduce(Tensor input, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True)"}, kAll,
     LOOM_BODY(ops::scatter_reduce(p.tensor(0), p.int64(1), p.tensor(2), p.tensor(3), p.string(4), p.boolean(5))),
     "reduce: 'sum', 'prod', 'mean', 'amax' or 'amin'."},
    {{"index_add(Tensor input, int dim, Tensor index, Tensor source, *, Scalar alpha=1)"}, kAll,
     LOOM_BODY(ops::index_add(p.tensor(0), p.int64(1), p.tensor(2), p.tensor(3), p.scalar(4)))},
    {{"index_copy(Tensor input, int dim, Tensor index, Tensor source)"}, kAll,
     LOOM_BODY(ops::index_copy(p.tensor(0), p.int64(1), p.tensor(2), p.tensor(3)))},
    {{"index_fill(Tensor input, int dim, Tensor index, Arg value)"}, kAll | kWritesSome,
     LOOM_BODY(ops::index_fill(p.tensor(0), p.int64(1), p.tensor(2), p.arg(3)))},
    {{"index_put(Tensor input, PyObject* indices, Tensor values, bool accumulate=False)"}, kAll | kWritesSome | kInplaceFunction,
     LOOM_BODY(index_put_python(p.tensor(0), p.object(1), p.tensor(2), p.boolean(3))),
     "indices: a tuple of index tensors (bool masks: a sync point on the lazy device), one per leading dim."},
    {{"take(Tensor input, Tensor index)"}, kBoth, LOOM_BODY(ops::take(p.tensor(0), p.tensor(1)))},
    {{"put(Tensor input, Tensor index, Tensor source, bool accumulate=False)"}, kAll,
     LOOM_BODY(ops::put(p.tensor(0), p.tensor(1), p.tensor(2), p.boolean(3)))},

    // ---- sizes that depend on the data: sync points on the lazy device ----
    // PyTorch's function has one signature, its method two (their errors differ so).
    {{"nonzero(Tensor input, *, bool as_tuple=False)"}, kFunction, nonzero,
     "A sync point on the lazy device: the result's size depends on the values."},
    {{"nonzero(Tensor input)", "nonzero(Tensor input, *, bool as_tuple)"}, kMethod, nonzero,
     "A sync point on the lazy device: the result's size depends on the values."},
    {{"argwhere(Tensor input)"}, kBoth, LOOM_BODY(ops::nonzero(p.tensor(0))),
     "A sync point on the lazy device: the result's size depends on the values."},
    {{"masked_select(Tensor input, Tensor mask)"}, kBoth, LOOM_BODY(ops::masked_select(p.tensor(0), p.tensor(1))),
     "A sync point on the lazy device: the result's size depends on the mask."},
};

}  // namespace

void add_data_rows(MethodDefs& defs) { add_rows(kRows, defs); }

}  // namespace loom::py
