// The hand-written methods and attributes of loom.Tensor: metadata, views with PyTorch's varargs
// shapes, copies and conversions. Metadata never syncs a lazy tensor; strides, addresses and
// values do. The op library's methods are in op_bindings.cpp.
#include <algorithm>
#include <utility>

#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "pyext/args.h"
#include "pyext/op_args.h"
#include "pyext/objects.h"
#include "pyext/python_data.h"
#include "pyext/tensor_object.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

using FastArgs = PyObject* const*;

PyObject* out(Tensor t) { return wrap(std::move(t)); }

// ---- metadata (no sync: a pending tensor knows its shape and dtype) ----

PyObject* get_shape(PyObject* self, void*) {
  LOOM_PY_BEGIN
  return size_object(impl_of(self).sizes());
  LOOM_PY_END(nullptr)
}
PyObject* get_dtype(PyObject* self, void*) { return Py_NewRef(dtype_object(impl_of(self).dtype())); }
PyObject* get_device(PyObject* self, void*) {
  LOOM_PY_BEGIN
  return device_object(impl_of(self).device(), impl_of(self).is_lazy());
  LOOM_PY_END(nullptr)
}
PyObject* get_ndim(PyObject* self, void*) { return PyLong_FromLongLong(impl_of(self).ndim()); }
PyObject* get_is_cuda(PyObject* self, void*) { return PyBool_FromLong(impl_of(self).device().is_cuda()); }
PyObject* get_is_cpu(PyObject* self, void*) {
  return PyBool_FromLong(impl_of(self).device().is_cpu() && !impl_of(self).is_lazy());
}
PyObject* get_is_lazy(PyObject* self, void*) { return PyBool_FromLong(impl_of(self).is_lazy()); }
PyObject* get_itemsize(PyObject* self, void*) { return PyLong_FromSize_t(itemsize(impl_of(self).dtype())); }
PyObject* get_nbytes(PyObject* self, void*) {
  const TensorImpl& t = impl_of(self);
  return PyLong_FromLongLong(t.numel() * static_cast<int64_t>(itemsize(t.dtype())));
}

// .T reverses all dims (PyTorch deprecates it beyond 2-d but still does this); .mT swaps the last two.
PyObject* get_T(PyObject* self, void*) {
  LOOM_PY_BEGIN
  Dims dims;
  for (int64_t d = impl_of(self).ndim() - 1; d >= 0; --d) dims.push_back(d);
  return out(ops::permute(tensor_of(self), dims));
  LOOM_PY_END(nullptr)
}
PyObject* get_mT(PyObject* self, void*) {
  LOOM_PY_BEGIN
  int64_t n = impl_of(self).ndim();
  LOOM_CHECK(n >= 2, Runtime, "tensor.mT is only supported on matrices or batches of matrices. Got ", n, "-D tensor.");
  return out(ops::transpose(tensor_of(self), -2, -1));
  LOOM_PY_END(nullptr)
}

// A dim argument that must name an existing dim (size(d), stride(d)): a 0-d tensor has none.
int64_t dim_of(int64_t ndim, PyObject* dim) {
  int64_t d = to_int64(dim, "dim");
  LOOM_CHECK(ndim > 0, Index, "Dimension specified as ", d, " but tensor has no dimensions");
  return wrap_dim(d, ndim);
}

PyObject* m_size(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("size", {"dim"}, 1);
  Args<1> a;
  parser.parse(args, nargs, kwnames, a.v);
  const TensorImpl& t = impl_of(self);
  if (!a.has(0)) return size_object(t.sizes());
  return PyLong_FromLongLong(t.sizes()[dim_of(t.ndim(), a[0])]);
  LOOM_PY_END(nullptr)
}

// Strides, offsets and addresses describe memory: a pending tensor is materialized first.
PyObject* m_stride(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("stride", {"dim"}, 1);
  Args<1> a;
  parser.parse(args, nargs, kwnames, a.v);
  const Array& arr = array_of(self);
  if (!a.has(0)) {
    PyRef t = PyRef::checked(PyTuple_New(arr.ndim()));
    for (int64_t i = 0; i < arr.ndim(); ++i) PyTuple_SET_ITEM(t.get(), i, check(PyLong_FromLongLong(arr.strides()[i])));
    return t.release();
  }
  return PyLong_FromLongLong(arr.strides()[dim_of(arr.ndim(), a[0])]);
  LOOM_PY_END(nullptr)
}

PyObject* m_dim(PyObject* self, PyObject*) { return PyLong_FromLongLong(impl_of(self).ndim()); }
PyObject* m_numel(PyObject* self, PyObject*) { return PyLong_FromLongLong(impl_of(self).numel()); }
PyObject* m_element_size(PyObject* self, PyObject*) { return PyLong_FromSize_t(itemsize(impl_of(self).dtype())); }
PyObject* m_is_floating_point(PyObject* self, PyObject*) { return PyBool_FromLong(is_floating(impl_of(self).dtype())); }
PyObject* m_storage_offset(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  return PyLong_FromLongLong(array_of(self).layout.offset);
  LOOM_PY_END(nullptr)
}
PyObject* m_is_contiguous(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  const TensorImpl& t = impl_of(self);
  if (t.is_pending() && !t.view_info()) Py_RETURN_TRUE;  // produced dense
  return PyBool_FromLong(array_of(self).is_contiguous());
  LOOM_PY_END(nullptr)
}
PyObject* m_data_ptr(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  return PyLong_FromVoidPtr(array_of(self).data());
  LOOM_PY_END(nullptr)
}

PyObject* m_tolist(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  return array_to_list(array_of(self));
  LOOM_PY_END(nullptr)
}

PyObject* m_item(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  LOOM_CHECK(impl_of(self).numel() == 1, Value, "only one element tensors can be converted to Python scalars");
  return scalar_to_py(item(array_of(self)));
  LOOM_PY_END(nullptr)
}

// f"{loss:.3f}" formats the value of a one-element tensor, as PyTorch does.
PyObject* m_format(PyObject* self, PyObject* spec) {
  LOOM_PY_BEGIN
  if (impl_of(self).ndim() == 0) {
    PyRef value = PyRef::checked(scalar_to_py(item(array_of(self))));
    return PyObject_Format(value.get(), spec);
  }
  PyRef text = PyRef::checked(PyObject_Str(self));
  return PyObject_Format(text.get(), spec);
  LOOM_PY_END(nullptr)
}

// ---- views ----

// Shape arguments come as varargs (view(2, 3)) or one sequence (view((2, 3))).
Dims shape_args(FastArgs args, Py_ssize_t nargs, PyObject* kwnames, const char* fname, const char* kwname) {
  if (nargs == 0 && kwnames && PyTuple_GET_SIZE(kwnames) == 1) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, 0);
    if (PyUnicode_CompareWithASCIIString(key, kwname) == 0) return to_dims(args[0], kwname);
  }
  if (kwnames && PyTuple_GET_SIZE(kwnames) > 0) {
    PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname, PyTuple_GET_ITEM(kwnames, 0));
    throw PythonError{};
  }
  return sizes_from_args(args, nargs, fname);
}

PyObject* m_view(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  return out(ops::view(tensor_of(self), shape_args(args, nargs, kwnames, "view", "size")));
  LOOM_PY_END(nullptr)
}

PyObject* m_reshape(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  return out(ops::reshape(tensor_of(self), shape_args(args, nargs, kwnames, "reshape", "shape")));
  LOOM_PY_END(nullptr)
}

PyObject* m_view_as(PyObject* self, PyObject* other) {
  LOOM_PY_BEGIN
  return out(ops::view(tensor_of(self), Dims(tensor_arg(other, "other")->sizes())));
  LOOM_PY_END(nullptr)
}

PyObject* m_reshape_as(PyObject* self, PyObject* other) {
  LOOM_PY_BEGIN
  return out(ops::reshape(tensor_of(self), Dims(tensor_arg(other, "other")->sizes())));
  LOOM_PY_END(nullptr)
}

PyObject* m_permute(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  return out(ops::permute(tensor_of(self), shape_args(args, nargs, kwnames, "permute", "dims")));
  LOOM_PY_END(nullptr)
}

PyObject* m_flip(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  return out(ops::flip(tensor_of(self), shape_args(args, nargs, kwnames, "flip", "dims")));
  LOOM_PY_END(nullptr)
}

PyObject* m_transpose(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("transpose", {"dim0", "dim1"}, 2);
  Args<2> a;
  parser.parse(args, nargs, kwnames, a.v);
  LOOM_CHECK(a.has(0) && a.has(1), Type, "transpose() missing required arguments 'dim0' and 'dim1'");
  return out(ops::transpose(tensor_of(self), to_int64(a[0], "dim0"), to_int64(a[1], "dim1")));
  LOOM_PY_END(nullptr)
}

PyObject* m_t(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  return out(ops::t(tensor_of(self)));
  LOOM_PY_END(nullptr)
}

PyObject* m_expand(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  return out(ops::expand(tensor_of(self), shape_args(args, nargs, kwnames, "expand", "size")));
  LOOM_PY_END(nullptr)
}

PyObject* m_expand_as(PyObject* self, PyObject* other) {
  LOOM_PY_BEGIN
  return out(ops::expand(tensor_of(self), Dims(tensor_arg(other, "other")->sizes())));
  LOOM_PY_END(nullptr)
}

PyObject* m_broadcast_to(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  return out(ops::expand(tensor_of(self), shape_args(args, nargs, kwnames, "broadcast_to", "size")));
  LOOM_PY_END(nullptr)
}

PyObject* m_squeeze(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("squeeze", {"dim"}, 1);
  Args<1> a;
  parser.parse(args, nargs, kwnames, a.v);
  if (!a.has(0)) return out(ops::squeeze(tensor_of(self)));
  return out(ops::squeeze(tensor_of(self), dims_of(a[0], "dim")));
  LOOM_PY_END(nullptr)
}

PyObject* m_unsqueeze(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("unsqueeze", {"dim"}, 1);
  Args<1> a;
  parser.parse(args, nargs, kwnames, a.v);
  LOOM_CHECK(a.has(0), Type, "unsqueeze() missing required argument 'dim'");
  return out(ops::unsqueeze(tensor_of(self), to_int64(a[0], "dim")));
  LOOM_PY_END(nullptr)
}

PyObject* m_flatten(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("flatten", {"start_dim", "end_dim"}, 2);
  Args<2> a;
  parser.parse(args, nargs, kwnames, a.v);
  int64_t start = a.has(0) ? to_int64(a[0], "start_dim") : 0;
  int64_t end = a.has(1) ? to_int64(a[1], "end_dim") : -1;
  Tensor t = tensor_of(self);
  Tensor r = ops::flatten(t, start, end);
  if (r == t) return Py_NewRef(self);  // flatten(d, d) is the tensor itself, as in PyTorch
  return out(std::move(r));
  LOOM_PY_END(nullptr)
}

PyObject* m_unflatten(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("unflatten", {"dim", "sizes"}, 2);
  Args<2> a;
  parser.parse(args, nargs, kwnames, a.v);
  LOOM_CHECK(a.has(0) && a.has(1), Type, "unflatten() missing required arguments 'dim' and 'sizes'");
  return out(ops::unflatten(tensor_of(self), to_int64(a[0], "dim"), to_dims(a[1], "sizes")));
  LOOM_PY_END(nullptr)
}

PyObject* m_narrow(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("narrow", {"dim", "start", "length"}, 3);
  Args<3> a;
  parser.parse(args, nargs, kwnames, a.v);
  LOOM_CHECK(a.has(0) && a.has(1) && a.has(2), Type, "narrow() missing required arguments 'dim', 'start', 'length'");
  return out(ops::narrow(tensor_of(self), to_int64(a[0], "dim"), to_int64(a[1], "start"), to_int64(a[2], "length")));
  LOOM_PY_END(nullptr)
}

PyObject* m_select(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("select", {"dim", "index"}, 2);
  Args<2> a;
  parser.parse(args, nargs, kwnames, a.v);
  LOOM_CHECK(a.has(0) && a.has(1), Type, "select() missing required arguments 'dim' and 'index'");
  return out(ops::select(tensor_of(self), to_int64(a[0], "dim"), to_int64(a[1], "index")));
  LOOM_PY_END(nullptr)
}

PyObject* m_repeat(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  return out(ops::repeat(tensor_of(self), shape_args(args, nargs, kwnames, "repeat", "repeats")));
  LOOM_PY_END(nullptr)
}

// ---- copies and conversions ----

PyObject* m_contiguous(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  Tensor t = tensor_of(self);
  Tensor c = ops::contiguous(t);
  if (c == t) return Py_NewRef(self);
  return out(std::move(c));
  LOOM_PY_END(nullptr)
}

PyObject* m_clone(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  return out(ops::clone(tensor_of(self)));
  LOOM_PY_END(nullptr)
}

// A new tensor sharing this one's value (and storage), without autograd history.
PyObject* m_detach(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  return out(ops::detach(tensor_of(self)));
  LOOM_PY_END(nullptr)
}

// Tensor.to(...): like PyTorch, returns self when nothing changes unless copy=True.
PyObject* converted(PyObject* self, DType dtype, Placement where, bool copy) {
  Tensor t = tensor_of(self);
  Tensor r = ops::to(t, dtype, where.device, where.lazy, copy);
  if (r == t) return Py_NewRef(self);
  return out(std::move(r));
}

Placement placement_of(const TensorImpl& t) { return {t.device(), t.is_lazy()}; }

PyObject* m_to(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("to", {"", "", "dtype", "device", "copy", "non_blocking"}, 2);
  Args<6> a;
  parser.parse(args, nargs, kwnames, a.v);
  const TensorImpl& t = impl_of(self);
  DType dtype = t.dtype();
  Placement where = placement_of(t);
  for (int i = 0; i < 2; ++i) {
    PyObject* p = a[i];
    if (!p) continue;
    if (is_tensor(p)) {
      dtype = impl_of(p).dtype();
      where = placement_of(impl_of(p));
    } else if (Py_TYPE(p) == &DTypeType) {
      dtype = dtype_from_py(p);
    } else {
      where = placement_from_py(p);
    }
  }
  if (a.has(2)) dtype = dtype_from_py(a[2]);
  if (a.has(3)) where = placement_from_py(a[3]);
  bool copy = a.has(4) && to_bool(a[4], "copy");
  return converted(self, dtype, where, copy);
  LOOM_PY_END(nullptr)
}

PyObject* m_cpu(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  return converted(self, impl_of(self).dtype(), {kCPU, false}, false);
  LOOM_PY_END(nullptr)
}

PyObject* m_cuda(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("cuda", {"device", "non_blocking"}, 2);
  Args<2> a;
  parser.parse(args, nargs, kwnames, a.v);
  Device device(DeviceType::CUDA, 0);
  if (a.has(0)) device = device_from_py(a[0]);
  LOOM_CHECK(device.is_cuda(), Runtime, "Invalid device, must be cuda device");
  return converted(self, impl_of(self).dtype(), {device, false}, false);
  LOOM_PY_END(nullptr)
}

template <DType D>
PyObject* m_as(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  return converted(self, D, placement_of(impl_of(self)), false);
  LOOM_PY_END(nullptr)
}

PyObject* m_type_as(PyObject* self, PyObject* other) {
  LOOM_PY_BEGIN
  return converted(self, tensor_arg(other, "other")->dtype(), placement_of(impl_of(self)), false);
  LOOM_PY_END(nullptr)
}

// Python subclasses (nn.Parameter) are made from an existing tensor, sharing its value.
PyObject* m_make_subclass(PyObject*, PyObject* args) {
  LOOM_PY_BEGIN
  PyObject* cls = nullptr;
  PyObject* data = nullptr;
  if (!PyArg_ParseTuple(args, "OO:_make_subclass", &cls, &data)) return nullptr;
  LOOM_CHECK(PyType_Check(cls) && PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), &TensorType), Type,
             "_make_subclass: cls must be a subclass of loom.Tensor");
  return wrap(ops::detach(tensor_arg(data, "data")), reinterpret_cast<PyTypeObject*>(cls));
  LOOM_PY_END(nullptr)
}

// Tensor._set_data(value): from now on this Python tensor holds `value`'s data (shared, as detach()
// shares it; dtype, device and mode may change), keeping its autograd state (requires_grad,
// grad_fn, grad): PyTorch's `tensor.data = value`. Module.to() moves Parameters with it, so the
// Parameter objects an optimizer holds stay the module's. Views taken and values saved before
// keep the old data.
PyObject* m_set_data(PyObject* self, PyObject* arg) {
  LOOM_PY_BEGIN
  Tensor fresh = ops::detach(tensor_arg(arg, "data"));
  auto* obj = reinterpret_cast<PyTensor*>(self);
  if (const AutogradMeta* old = obj->impl->autograd_meta()) {
    if (old->requires_grad && !old->grad_fn) set_requires_grad(*fresh, true);  // raises for integer dtypes
    AutogradMeta& m = autograd(*fresh);
    m.requires_grad = old->requires_grad;
    m.retains_grad = old->retains_grad;
    m.grad_fn = old->grad_fn;
    m.grad = old->grad;
  }
  Tensor::adopt(std::exchange(obj->impl, fresh.leak())).reset();
  Py_RETURN_NONE;
  LOOM_PY_END(nullptr)
}

}  // namespace

// Defined in buffer.cpp and dlpack.cpp.
PyObject* tensor_numpy(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* tensor_array(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* tensor_dlpack(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* tensor_dlpack_device(PyObject* self, PyObject*);
PyObject* tensor_cuda_array_interface(PyObject* self, void*);

PyMethodDef tensor_methods[] = {
    {"size", LOOM_FASTCALL(m_size), "size(dim=None): the shape, or the size of one dimension"},
    {"stride", LOOM_FASTCALL(m_stride), "stride(dim=None): strides in elements"},
    {"dim", m_dim, METH_NOARGS, "the number of dimensions"},
    {"ndimension", m_dim, METH_NOARGS, "the number of dimensions"},
    {"numel", m_numel, METH_NOARGS, "the number of elements"},
    {"nelement", m_numel, METH_NOARGS, "the number of elements"},
    {"storage_offset", m_storage_offset, METH_NOARGS, "offset of the first element in the storage, in elements"},
    {"is_contiguous", m_is_contiguous, METH_NOARGS, "True if the elements are dense in row-major order"},
    {"element_size", m_element_size, METH_NOARGS, "bytes per element"},
    {"is_floating_point", m_is_floating_point, METH_NOARGS, "True for floating-point dtypes"},
    {"data_ptr", m_data_ptr, METH_NOARGS, "address of the first element"},
    {"tolist", m_tolist, METH_NOARGS, "the values as nested Python lists"},
    {"item", m_item, METH_NOARGS, "the value of a one-element tensor as a Python number"},
    {"__format__", m_format, METH_O, nullptr},
    {"view", LOOM_FASTCALL(m_view), "view(*shape): the same storage seen with another shape (no copy)"},
    {"reshape", LOOM_FASTCALL(m_reshape), "reshape(*shape): a view when possible, else a copy"},
    {"view_as", m_view_as, METH_O, "view(other.shape)"},
    {"reshape_as", m_reshape_as, METH_O, "reshape(other.shape)"},
    {"permute", LOOM_FASTCALL(m_permute), "permute(*dims): reorder dimensions (a view)"},
    {"flip", LOOM_FASTCALL(m_flip), "flip(*dims): the elements in reverse order along dims (a copy)"},
    {"transpose", LOOM_FASTCALL(m_transpose), "transpose(dim0, dim1): swap two dimensions (a view)"},
    {"t", m_t, METH_NOARGS, "transpose of a tensor with at most 2 dimensions"},
    {"expand", LOOM_FASTCALL(m_expand), "expand(*sizes): broadcast size-1 dimensions (a view, stride 0)"},
    {"expand_as", m_expand_as, METH_O, "expand(other.shape)"},
    {"squeeze", LOOM_FASTCALL(m_squeeze), "squeeze(dim=None): drop size-1 dimensions (a view)"},
    {"unsqueeze", LOOM_FASTCALL(m_unsqueeze), "unsqueeze(dim): insert a size-1 dimension (a view)"},
    {"flatten", LOOM_FASTCALL(m_flatten), "flatten(start_dim=0, end_dim=-1)"},
    {"unflatten", LOOM_FASTCALL(m_unflatten), "unflatten(dim, sizes)"},
    {"broadcast_to", LOOM_FASTCALL(m_broadcast_to), "broadcast_to(*sizes): expand to a broadcast shape (a view)"},
    {"repeat", LOOM_FASTCALL(m_repeat), "repeat(*repeats): tile the tensor (a copy)"},
    {"narrow", LOOM_FASTCALL(m_narrow), "narrow(dim, start, length) (a view)"},
    {"select", LOOM_FASTCALL(m_select), "select(dim, index) (a view without that dimension)"},
    {"contiguous", m_contiguous, METH_NOARGS, "self if contiguous, else a contiguous copy"},
    {"clone", m_clone, METH_NOARGS, "a copy with its own storage, in this tensor's dim order"},
    {"detach", m_detach, METH_NOARGS, "a new tensor sharing this one's storage"},
    {"to", LOOM_FASTCALL(m_to), "to(device=None, dtype=None, copy=False)"},
    {"cpu", m_cpu, METH_NOARGS, "this tensor in host memory"},
    {"cuda", LOOM_FASTCALL(m_cuda), "cuda(device=None): this tensor in GPU memory"},
    {"float", m_as<DType::Float32>, METH_NOARGS, "to(loom.float32)"},
    {"double", m_as<DType::Float64>, METH_NOARGS, "to(loom.float64)"},
    {"half", m_as<DType::Float16>, METH_NOARGS, "to(loom.float16)"},
    {"bfloat16", m_as<DType::BFloat16>, METH_NOARGS, "to(loom.bfloat16)"},
    {"long", m_as<DType::Int64>, METH_NOARGS, "to(loom.int64)"},
    {"int", m_as<DType::Int32>, METH_NOARGS, "to(loom.int32)"},
    {"byte", m_as<DType::UInt8>, METH_NOARGS, "to(loom.uint8)"},
    {"bool", m_as<DType::Bool>, METH_NOARGS, "to(loom.bool)"},
    {"type_as", m_type_as, METH_O, "to(other.dtype)"},
    {"numpy", LOOM_FASTCALL(tensor_numpy), "numpy(force=False): a numpy array sharing this tensor's memory (CPU)"},
    {"__array__", LOOM_FASTCALL(tensor_array), nullptr},
    {"__dlpack__", LOOM_FASTCALL(tensor_dlpack), "export as a DLPack capsule (zero-copy)"},
    {"__dlpack_device__", tensor_dlpack_device, METH_NOARGS, "(device_type, device_id) for DLPack"},
    {"_make_subclass", m_make_subclass, METH_VARARGS | METH_STATIC, nullptr},
    {"_set_data", m_set_data, METH_O, "_set_data(value): hold value's data, keeping this tensor's autograd state"},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef tensor_getset[] = {
    {"shape", get_shape, nullptr, "the sizes, as a loom.Size", nullptr},
    {"dtype", get_dtype, nullptr, "the element type", nullptr},
    {"device", get_device, nullptr, "where the memory lives", nullptr},
    {"ndim", get_ndim, nullptr, "the number of dimensions", nullptr},
    {"T", get_T, nullptr, "all dimensions reversed (a view)", nullptr},
    {"mT", get_mT, nullptr, "the last two dimensions swapped (a view)", nullptr},
    {"is_cuda", get_is_cuda, nullptr, "True when the tensor is in GPU memory", nullptr},
    {"is_cpu", get_is_cpu, nullptr, "True when the tensor is in host memory", nullptr},
    {"itemsize", get_itemsize, nullptr, "bytes per element", nullptr},
    {"nbytes", get_nbytes, nullptr, "bytes of the elements (numel * itemsize)", nullptr},
    {"is_lazy", get_is_lazy, nullptr, "True for lazy tensors (device 'lazy:...'); not in PyTorch", nullptr},
    {"__cuda_array_interface__", tensor_cuda_array_interface, nullptr,
     "the CUDA array interface (version 3) of a GPU tensor, shared without a copy (CuPy, Numba, PyTorch)", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

}  // namespace loom::py
