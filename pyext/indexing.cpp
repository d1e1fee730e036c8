// Tensor indexing: t[0], t[:, 1:5:2], t[..., None], t[idx_tensor], t[mask], and assignment.
//
// Basic items are views (DESIGN decision 4): ints select, slices narrow with a step, None inserts
// a size-1 dim, Ellipsis stands for as many full slices as needed. Advanced items (integer
// tensors, lists, bool masks) gather into a copy, with NumPy's and PyTorch's placement rules.
// Assignment writes through the view (basic) or scatters (advanced), eager or lazy.
#include <algorithm>

#include "lazy/ops.h"
#include "lazy/ops_movement.h"
#include "lazy/sync.h"
#include "pyext/python_data.h"
#include "pyext/tensor_object.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

enum class ItemKind { Int, Slice, None, Ellipsis, Tensor };

// An array of one or more dims behind the buffer protocol (a numpy index array: cleanrl's PPO picks
// its minibatch with b_obs[mb_inds], mb_inds a numpy slice of a shuffled arange). numpy arrays
// also have __index__ (which fails unless they are 0-d), so this is asked before is_index_like;
// numpy's scalars and 0-d arrays export 0-d buffers and stay integers, as in PyTorch.
bool is_array_buffer(PyObject* item) {
  if (!PyObject_CheckBuffer(item)) return false;
  Py_buffer view;
  if (PyObject_GetBuffer(item, &view, PyBUF_FULL_RO) != 0) {
    PyErr_Clear();
    return false;
  }
  int ndim = view.ndim;
  PyBuffer_Release(&view);
  return ndim > 0;
}

// Lists, tuples, Python bools and arrays in an index are tensors (as in NumPy and PyTorch:
// x[(0, 1), :] picks rows 0 and 1).
ItemKind classify(PyObject* item) {
  if (item == Py_None) return ItemKind::None;
  if (item == Py_Ellipsis) return ItemKind::Ellipsis;
  if (PySlice_Check(item)) return ItemKind::Slice;
  if (is_tensor(item) || PyList_Check(item) || PyTuple_Check(item) || PyBool_Check(item)) return ItemKind::Tensor;
  if (!PyLong_CheckExact(item) && is_array_buffer(item)) return ItemKind::Tensor;
  if (is_index_like(item)) return ItemKind::Int;
  if (PyObject_CheckBuffer(item)) return ItemKind::Tensor;  // other buffers (0-d arrays of no integer)
  // Other sequences (a range: mnist_forward_forward's x_[range(x.shape[0]), y] = x.max()), as in
  // PyTorch, which reads any sequence as an index tensor.
  if (PySequence_Check(item) && !PyUnicode_Check(item)) return ItemKind::Tensor;
  LOOM_FAIL(Index, "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid "
                   "indices (got ", type_name(item), ")");
}

// A slice's start, stop or step read as PySlice_Unpack reads them: any object with __index__,
// clamped to the int64 range, so t[:2**64] is all of t as it is for lists and numpy arrays.
int64_t slice_index(PyObject* v) {
  static_assert(sizeof(Py_ssize_t) == sizeof(int64_t));
  if (!PyIndex_Check(v)) LOOM_FAIL(Type, "slice indices must be integers or None or have an __index__ method");
  PyRef index = PyRef::checked(PyNumber_Index(v));
  Py_ssize_t i = PyNumber_AsSsize_t(index.get(), nullptr);  // no exception type: clamp on overflow
  if (i == -1 && PyErr_Occurred()) throw PythonError{};
  return i;
}

std::optional<int64_t> slice_bound(PyObject* v) {
  if (v == Py_None) return std::nullopt;
  return slice_index(v);
}

// An index tensor: loom tensors as they are, lists, bools and arrays converted in self's mode.
Tensor index_tensor(PyObject* item, const TensorImpl& self) {
  if (is_tensor(item)) return tensor_of(item);
  Array a = PyBool_Check(item) ? array_from_data(item, DType::Bool, kCPU) : array_from_data(item, std::nullopt, kCPU);
  if (a.numel() == 0 && !PyBool_Check(item)) a = copy_to(a, DType::Int64, kCPU);  // [] indexes nothing
  return ops::to(make_tensor(std::move(a)), a.dtype, self.device(), self.is_lazy());
}

// The coordinates of the true elements of a bool mask: one int64 tensor per mask dim. The count
// depends on the data: a sync point for a lazy mask (lazy/ops_movement.h).
std::vector<Tensor> nonzero(const Tensor& mask) { return ops::nonzero_tuple(mask, "boolean mask indexing"); }

// NumPy's and PyTorch's reading of an index that is a list: a short list holding a sequence, a
// slice, a tensor, an Ellipsis or None is a tuple of indices (x[[0, slice(None)]] is x[0, :]);
// any other list is one index tensor (x[[0, 1]] picks two rows).
bool list_is_tuple(PyObject* index) {
  if (!PyList_Check(index) || PyList_GET_SIZE(index) >= 32) return false;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(index); ++i) {
    PyObject* item = PyList_GET_ITEM(index, i);
    if (is_tensor(item) || PyList_Check(item) || PyTuple_Check(item) || PySlice_Check(item) || item == Py_Ellipsis ||
        item == Py_None || (!PyLong_CheckExact(item) && is_array_buffer(item)))
      return true;
  }
  return false;
}

// An index applied to a tensor: the view its basic items (ints, slices, None, Ellipsis) select,
// and the advanced items (integer tensors, after bool masks became coordinates) with the view dim
// each applies to.
struct Indexed {
  Tensor view;
  std::vector<Tensor> tensors;
  std::vector<int64_t> dims;
};

Indexed apply_index(const Tensor& self, PyObject* index) {
  PyRef items = PyRef::checked(PyTuple_Check(index)    ? Py_NewRef(index)
                               : list_is_tuple(index) ? PyList_AsTuple(index)
                                                      : PyTuple_Pack(1, index));
  Py_ssize_t n = PyTuple_GET_SIZE(items.get());
  std::vector<ItemKind> kinds;
  std::vector<Tensor> tensors(static_cast<size_t>(n));
  // How many dims the index consumes, to know how wide an Ellipsis is.
  int64_t consumed = 0;
  bool seen_ellipsis = false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(items.get(), i);
    ItemKind k = classify(item);
    kinds.push_back(k);
    if (k == ItemKind::Int || k == ItemKind::Slice) ++consumed;
    if (k == ItemKind::Tensor) {
      tensors[i] = index_tensor(item, *self);
      consumed += tensors[i]->dtype() == DType::Bool ? tensors[i]->ndim() : 1;
    }
    if (k == ItemKind::Ellipsis) {
      LOOM_CHECK(!seen_ellipsis, Index, "an index can only have a single ellipsis ('...')");
      seen_ellipsis = true;
    }
  }
  int64_t ndim = self->ndim();
  // PyTorch applies a lone int or slice (not in a tuple) directly, so on a 0-d tensor it reports
  // what that index cannot do rather than "too many indices".
  bool lone = !PyTuple_Check(index) && !list_is_tuple(index);
  LOOM_CHECK(consumed <= ndim || (lone && kinds[0] != ItemKind::Tensor), Index, "too many indices for tensor of dimension ",
             ndim);
  Indexed out{self, {}, {}};
  int64_t dim = 0;  // the view dim the next item applies to
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(items.get(), i);
    switch (kinds[i]) {
      case ItemKind::Int: {
        int64_t idx = to_int64(item, "index");
        if (out.view->ndim() == 0) {  // a lone int on a 0-d tensor; PyTorch's messages for it
          LOOM_CHECK(idx != 0, Index, "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                                      "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number");
          LOOM_FAIL(Index, "index ", idx, " is out of bounds for dimension 0 with size 0");
        }
        out.view = ops::select(out.view, dim, idx);
        break;
      }
      case ItemKind::Slice: {
        auto* s = reinterpret_cast<PySliceObject*>(item);
        int64_t step = s->step == Py_None ? 1 : slice_index(s->step);
        if (out.view->ndim() == 0) LOOM_FAIL(Index, "slice() cannot be applied to a 0-dim tensor.");
        out.view = ops::slice(out.view, dim, slice_bound(s->start), slice_bound(s->stop), step);
        ++dim;
        break;
      }
      case ItemKind::None: out.view = ops::unsqueeze(out.view, dim++); break;
      case ItemKind::Ellipsis: dim += ndim - consumed; break;
      case ItemKind::Tensor: {
        const Tensor& t = tensors[i];
        if (t->dtype() == DType::Bool) {
          // A mask over the next t.ndim dims (a 0-d mask adds a dim: True keeps, False empties).
          if (t->ndim() == 0) {
            out.view = ops::unsqueeze(out.view, dim);
            Tensor keep = nonzero(ops::reshape(t, Dims{1}))[0];
            out.tensors.push_back(keep);
            out.dims.push_back(dim++);
            break;
          }
          for (int64_t d = 0; d < t->ndim(); ++d)
            LOOM_CHECK(t->sizes()[d] == out.view->sizes()[dim + d], Index, "The shape of the mask ",
                       format_dims(t->sizes()), " at index ", d, " does not match the shape of the indexed tensor ",
                       format_dims(out.view->sizes()), " at index ", dim + d);
          for (Tensor& c : nonzero(t)) {
            out.tensors.push_back(std::move(c));
            out.dims.push_back(dim++);
          }
          break;
        }
        LOOM_CHECK(is_integral(t->dtype()), Index, "tensors used as indices must be long, int, byte or bool tensors");
        out.tensors.push_back(t);
        out.dims.push_back(dim++);
        break;
      }
    }
  }
  return out;
}

// The advanced part of an index: gathers with the index tensors. When they are not on adjacent
// dims, PyTorch puts the broadcast index dims first: permute them to the front.
Tensor gather_advanced(const Indexed& ix, int64_t& first) {
  bool adjacent = true;
  for (size_t k = 1; k < ix.dims.size(); ++k) adjacent = adjacent && ix.dims[k] == ix.dims[k - 1] + 1;
  if (adjacent) {
    first = ix.dims[0];
    return ix.view;
  }
  Dims order(ix.dims.begin(), ix.dims.end());
  for (int64_t d = 0; d < ix.view->ndim(); ++d)
    if (std::find(ix.dims.begin(), ix.dims.end(), d) == ix.dims.end()) order.push_back(d);
  first = 0;
  return ops::permute(ix.view, order);
}

// The value of an assignment: a tensor (its leading size-1 dims dropped, as PyTorch does) or a
// tensor made from nested data in the target's dtype and mode.
Tensor assigned_value(PyObject* value, const TensorImpl& target, int64_t target_ndim) {
  Tensor v = is_tensor(value)
                 ? tensor_of(value)
                 : ops::to(make_tensor(array_from_data(value, target.dtype(), kCPU)), target.dtype(), target.device(),
                           target.is_lazy());
  while (v->ndim() > target_ndim && v->sizes()[0] == 1) v = ops::squeeze(v, ops::DimList{0});
  return v;
}

bool is_number(PyObject* v) { return PyBool_Check(v) || PyLong_Check(v) || PyFloat_Check(v); }

}  // namespace

PyObject* tensor_getitem(PyObject* self, PyObject* index) {
  LOOM_PY_BEGIN
  Indexed ix = apply_index(tensor_of(self), index);
  if (ix.tensors.empty()) return wrap(ix.view);
  int64_t first = 0;
  Tensor base = gather_advanced(ix, first);
  return wrap(ops::index(base, first, ix.tensors));
  LOOM_PY_END(nullptr)
}

// Tensor.index_put: a copy of x written as x[indices] = values (or +=) writes x in place.
Tensor index_put_python(const Tensor& x, PyObject* indices, const Tensor& values, bool accumulate) {
  LOOM_CHECK(PyTuple_Check(indices) || PyList_Check(indices), Type,
             "index_put(): argument 'indices' must be tuple of Tensors, not ", type_name(indices));
  LOOM_CHECK(values->dtype() == x->dtype(), Runtime, "Index put requires the source and destination dtypes match, "
             "got ", dtype_info(x->dtype()).scalar_type_name, " for the destination and ",
             dtype_info(values->dtype()).scalar_type_name, " for the source.");
  PyRef tuple = PyRef::checked(PySequence_Tuple(indices));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple.get()); ++i) {
    PyObject* item = PyTuple_GET_ITEM(tuple.get(), i);
    LOOM_CHECK(is_tensor(item), Type, "expected Tensor as element ", i, " in argument 1, but got ", type_name(item));
  }
  Tensor out = ops::clone(x);
  Indexed ix = apply_index(out, tuple.get());
  if (ix.tensors.empty()) {
    TensorImpl& target = *ix.view;
    if (accumulate) update(target, [&] { return ops::add(ix.view, values); });
    else overwrite(target, values, "CopyBackwards");
    return out;
  }
  int64_t first = 0;
  Tensor base = gather_advanced(ix, first);
  update(*base, [&] { return ops::index_put(base, first, ix.tensors, Arg(values), accumulate); });
  return out;
}

int tensor_setitem(PyObject* self, PyObject* index, PyObject* value) {
  LOOM_PY_BEGIN
  LOOM_CHECK(value, Type, "loom tensors do not support deleting elements");
  Indexed ix = apply_index(tensor_of(self), index);
  TensorImpl& target = *ix.view;
  if (ix.tensors.empty()) {
    // Like PyTorch, a Python number is a fill, whose value must fit the dtype (t[0] = 300 raises
    // for uint8), where nested data converts as tensor() does.
    if (is_number(value)) {
      ops::fill_as_copy_(target, scalar_from_py(value, "value"));
      return 0;
    }
    overwrite(target, ops::cast(assigned_value(value, target, target.ndim()), target.dtype()), "CopyBackwards");
    return 0;
  }
  int64_t first = 0;
  Tensor base = gather_advanced(ix, first);
  Arg v = is_number(value) ? Arg(scalar_from_py(value, "value")) : Arg(assigned_value(value, target, 64));
  // Write the updated (possibly permuted) view back through to self.
  update(*base, [&] { return ops::index_put(base, first, ix.tensors, v); });
  return 0;
  LOOM_PY_END(-1)
}

}  // namespace loom::py
