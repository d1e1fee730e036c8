// The C side of pickling, copy.deepcopy and checkpoints (loom/_tensor.py, loom/serialization/).
//
// loom.Tensor is a static type, whose methods Python cannot set, so the two methods written in
// Python (pickling and deepcopy, inherited by subclasses such as Parameter) are entries here that
// call loom._tensor. _as_strided is the one view the view algebra cannot spell: it rebuilds the
// tensors of a saved storage (tied weights, views with offsets and strides) as views of one loom
// storage, as torch.load does.
#include "lazy/autograd.h"
#include "pyext/common.h"
#include "pyext/tensor_object.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

// Calls loom._tensor.<name>(self, arg).
PyObject* call_python(const char* name, PyObject* self, PyObject* arg) {
  PyRef module = PyRef::steal(PyImport_ImportModule("loom._tensor"));
  if (!module) return nullptr;
  PyRef fn = PyRef::steal(PyObject_GetAttrString(module.get(), name));
  if (!fn) return nullptr;
  PyObject* args[] = {self, arg};
  return PyObject_Vectorcall(fn.get(), args, 2, nullptr);
}

PyObject* m_reduce_ex(PyObject* self, PyObject* protocol) { return call_python("reduce_ex", self, protocol); }
PyObject* m_deepcopy(PyObject* self, PyObject* memo) { return call_python("deepcopy", self, memo); }

// Tensor._as_strided(size, stride, storage_offset): a view of self's storage (not of self's
// elements) with that layout, as PyTorch's as_strided; it materializes self and records no
// autograd. Every element it addresses must lie inside the storage.
PyObject* m_as_strided(PyObject* self, PyObject* args) {
  LOOM_PY_BEGIN
  PyObject* size_obj = nullptr;
  PyObject* stride_obj = nullptr;
  PyObject* offset_obj = nullptr;
  if (!PyArg_ParseTuple(args, "OOO:_as_strided", &size_obj, &stride_obj, &offset_obj)) return nullptr;
  Dims sizes = to_dims(size_obj, "size");
  Dims strides = to_dims(stride_obj, "stride");
  int64_t offset = to_int64(offset_obj, "storage_offset");
  Tensor t = tensor_of(self);
  LOOM_CHECK(!requires_grad(*t), Runtime, "_as_strided records no autograd: call it on a tensor that does not "
             "require grad");
  LOOM_CHECK(sizes.size() == strides.size(), Runtime, "mismatch in length of strides and shape");
  check_sizes(sizes);
  for (int64_t s : strides)
    LOOM_CHECK(s >= 0, Runtime, "as_strided: Negative strides are not supported at the moment, got strides: ",
               format_dims(strides));
  LOOM_CHECK(offset >= 0, Runtime, "Tensor: invalid storage offset ", offset);
  const Array& a = array_of(self);
  // One past the last element addressed, in 128 bits: hostile sizes and strides cannot wrap.
  __int128 end = offset + 1;
  bool empty = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    empty = empty || sizes[i] == 0;
    if (sizes[i] > 0) end += static_cast<__int128>(sizes[i] - 1) * strides[i];
  }
  int64_t size = static_cast<int64_t>(a.storage->nbytes() / itemsize(a.dtype));
  LOOM_CHECK(empty ? offset <= size : end <= size, Runtime, "as_strided: sizes ", format_dims(sizes), ", strides ",
             format_dims(strides), " and storage offset ", offset, " reach past the end of a storage of ", size,
             " elements");
  Tensor view = make_tensor(a.view_as(Layout{sizes, strides, offset}), t->is_lazy());
  view->mark_view_of(*t);
  return wrap(std::move(view));
  LOOM_PY_END(nullptr)
}

}  // namespace

PyMethodDef serialization_methods[] = {
    {"__reduce_ex__", m_reduce_ex, METH_O, "pickles the tensor by value (loom/_tensor.py)"},
    {"__deepcopy__", m_deepcopy, METH_O, "a copy with its own storage, as PyTorch's (loom/_tensor.py)"},
    {"_as_strided", m_as_strided, METH_VARARGS,
     "_as_strided(size, stride, storage_offset): a view of the storage with that layout (no autograd)"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace loom::py
