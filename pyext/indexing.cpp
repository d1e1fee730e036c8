// Tensor indexing with ints, slices, None and Ellipsis: t[0], t[:, 1:5:2], t[..., None].
//
// Every such index is a view (DESIGN decision 4): ints select, slices narrow with a step, None
// inserts a size-1 dim, Ellipsis stands for as many full slices as needed. Assignment
// (t[idx] = value) writes through that view. Indexing with tensors, lists and bool masks
// ("advanced indexing") copies, and arrives with the op library.
#include "pyext/python_data.h"
#include "pyext/tensor_object.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

enum class ItemKind { Int, Slice, None, Ellipsis };

ItemKind classify(PyObject* item) {
  if (item == Py_None) return ItemKind::None;
  if (item == Py_Ellipsis) return ItemKind::Ellipsis;
  if (PySlice_Check(item)) return ItemKind::Slice;
  if (is_index_like(item) && !is_tensor(item)) return ItemKind::Int;
  LOOM_FAIL(Index,
            "only integers, slices (`:`), ellipsis (`...`) and None are valid indices for now (got ",
            type_name(item), "); indexing with tensors, lists and bool masks is not supported yet");
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

Layout apply_index(const Layout& base, PyObject* index) {
  PyRef items = PyRef::checked(PyTuple_Check(index) ? Py_NewRef(index) : PyTuple_Pack(1, index));
  Py_ssize_t n = PyTuple_GET_SIZE(items.get());
  // How many dims the index consumes, to know how wide an Ellipsis is.
  int64_t consumed = 0;
  bool seen_ellipsis = false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    ItemKind k = classify(PyTuple_GET_ITEM(items.get(), i));
    if (k == ItemKind::Int || k == ItemKind::Slice) ++consumed;
    if (k == ItemKind::Ellipsis) {
      LOOM_CHECK(!seen_ellipsis, Index, "an index can only have a single ellipsis ('...')");
      seen_ellipsis = true;
    }
  }
  // PyTorch applies a lone int or slice (not in a tuple) directly, so on a 0-d tensor it reports
  // what that index cannot do rather than "too many indices".
  bool lone = !PyTuple_Check(index);
  LOOM_CHECK(consumed <= base.ndim() || lone, Index, "too many indices for tensor of dimension ", base.ndim());
  Layout out = base;
  int64_t dim = 0;  // the output dim the next item applies to
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(items.get(), i);
    switch (classify(item)) {
      case ItemKind::Int: {
        int64_t index = to_int64(item, "index");
        if (out.ndim() == 0) {  // a lone int on a 0-d tensor; PyTorch's messages for it
          LOOM_CHECK(index != 0, Index, "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                                        "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number");
          LOOM_FAIL(Index, "index ", index, " is out of bounds for dimension 0 with size 0");
        }
        out = select(out, dim, index);
        break;
      }
      case ItemKind::Slice: {
        auto* s = reinterpret_cast<PySliceObject*>(item);
        int64_t step = s->step == Py_None ? 1 : slice_index(s->step);
        out = slice(out, dim, slice_bound(s->start), slice_bound(s->stop), step);
        ++dim;
        break;
      }
      case ItemKind::None: out = unsqueeze(out, dim++); break;
      case ItemKind::Ellipsis: dim += base.ndim() - consumed; break;
    }
  }
  return out;
}

}  // namespace

PyObject* tensor_getitem(PyObject* self, PyObject* index) {
  LOOM_PY_BEGIN
  const Array& a = array_of(self);
  return wrap(a.view_as(apply_index(a.layout, index)));
  LOOM_PY_END(nullptr)
}

int tensor_setitem(PyObject* self, PyObject* index, PyObject* value) {
  LOOM_PY_BEGIN
  LOOM_CHECK(value, Type, "loom tensors do not support deleting elements");
  const Array& a = array_of(self);
  Array target = a.view_as(apply_index(a.layout, index));
  // Like PyTorch, a Python number is a fill, whose value must fit the dtype (t[0] = 300 raises
  // for uint8) where nested data converts as tensor() does.
  if (PyBool_Check(value) || PyLong_Check(value) || PyFloat_Check(value)) {
    fill_(target, scalar_from_py(value, "value"));
    a.storage->bump_version();
    return 0;
  }
  Array src = is_tensor(value) ? array_of(value) : array_from_data(value, target.dtype, kCPU);
  // Reading and writing overlapping memory element by element would read values already
  // overwritten: read from a snapshot instead.
  if (may_overlap(src, target)) src = copy_to(src, src.dtype, src.device());
  // Like PyTorch, leading size-1 dims of the value are dropped: t[0] = ones(1, 4) is fine.
  Layout l = src.layout;
  while (l.ndim() > target.ndim() && l.sizes[0] == 1) l = squeeze(l, 0);
  src = src.view_as(std::move(l));
  // Broadcasting the value to the target's shape validates it before anything is written.
  expand(src.layout, target.sizes());
  copy_(target, src);
  a.storage->bump_version();
  return 0;
  LOOM_PY_END(-1)
}

}  // namespace loom::py
