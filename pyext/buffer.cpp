// The buffer protocol on loom.Tensor, and numpy interop built on it.
//
// A CPU tensor exports its memory as a PEP 3118 buffer with its real strides, so
// numpy.asarray(t), memoryview(t) and Tensor.numpy() share memory with the tensor instead of
// copying. bfloat16 has no buffer format (numpy has no bfloat16), as in PyTorch.
//
// Note [Exports own their storage]: an exported buffer holds a reference to the STORAGE it
// points into, not only to the tensor object. The tensor may later hold other data (`.data =`,
// Module.double() / .to(), a lazy sync that gives it a new storage); the buffer, and every numpy
// array made from it, keeps the old memory alive and keeps reading and writing it alone, as a
// DLPack capsule does (dlpack.cpp). Without this the allocator would hand the freed block to the
// next tensor of its size, and writes through the array would land in that unrelated tensor.
// (Tensor.data_ptr() is an address, not an export: as in PyTorch, it keeps nothing alive.)
#include "pyext/args.h"
#include "pyext/tensor_object.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

// What one exported view owns until the consumer releases it: its shape and strides (in bytes)
// and the storage it points into (Note [Exports own their storage]).
struct ExportedView {
  Ref<Storage> storage;
  Py_ssize_t shape[64];
  Py_ssize_t strides[64];
};

// All dims reversed: a Fortran-ordered layout becomes a C-ordered one.
Layout transpose_all(const Layout& l) {
  Dims order;
  for (int64_t d = l.ndim() - 1; d >= 0; --d) order.push_back(d);
  return permute(l, order);
}

void require_cpu(const Array& a, const char* what) {
  LOOM_CHECK(a.device().is_cpu(), Type, "can't convert ", a.device().str(), " device type tensor to ", what,
             ". Use Tensor.cpu() to copy the tensor to host memory first.");
}

int tensor_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  LOOM_PY_BEGIN
  const Array& a = array_of(self);
  require_cpu(a, "a buffer");
  const char* format = dtype_info(a.dtype).buffer_format;
  LOOM_CHECK(format, Type, "Got unsupported ScalarType ", dtype_name(a.dtype),
             " (it has no buffer format; convert with .float() first)");
  LOOM_CHECK(a.ndim() <= 64, Value, "tensors with more than 64 dims cannot be exported as buffers");
  // Honour the consumer's contiguity demands (PEP 3118): C order is the only dense order a
  // loom tensor is checked for; a Fortran-order request is met only by 1-d or size-1 layouts.
  bool c_contiguous = a.is_contiguous();
  bool f_contiguous = a.view_as(transpose_all(a.layout)).is_contiguous();
  bool wants_c = (flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS;
  bool wants_f = (flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS;
  bool wants_any = (flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS;
  bool wants_strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES;
  if ((wants_c && !c_contiguous) || (wants_f && !f_contiguous) || (wants_any && !c_contiguous && !f_contiguous) ||
      (!wants_strides && !c_contiguous)) {
    PyErr_SetString(PyExc_BufferError, "the tensor's layout is not the contiguous layout the consumer requested");
    return -1;
  }
  auto* exported = new ExportedView;
  exported->storage = a.storage;
  size_t item = itemsize(a.dtype);
  for (int64_t d = 0; d < a.ndim(); ++d) {
    exported->shape[d] = static_cast<Py_ssize_t>(a.sizes()[d]);
    exported->strides[d] = static_cast<Py_ssize_t>(a.strides()[d] * static_cast<int64_t>(item));
  }
  view->buf = a.data();
  view->obj = Py_NewRef(self);
  view->len = static_cast<Py_ssize_t>(a.numel()) * static_cast<Py_ssize_t>(item);
  view->readonly = 0;
  view->itemsize = static_cast<Py_ssize_t>(item);
  view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(format) : nullptr;
  view->ndim = static_cast<int>(a.ndim());
  view->shape = (flags & PyBUF_ND) ? exported->shape : nullptr;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? exported->strides : nullptr;
  view->suboffsets = nullptr;
  view->internal = exported;
  return 0;
  LOOM_PY_END(-1)
}

void tensor_releasebuffer(PyObject*, Py_buffer* view) { delete static_cast<ExportedView*>(view->internal); }

// numpy.asarray(memoryview(t)): an ndarray whose base keeps the tensor alive.
PyObject* shared_ndarray(PyObject* self, PyObject* dtype) {
  PyRef view = PyRef::checked(PyMemoryView_FromObject(self));
  PyRef asarray = PyRef::checked(PyObject_GetAttrString(numpy_module(), "asarray"));
  if (dtype && dtype != Py_None) return PyObject_CallFunctionObjArgs(asarray.get(), view.get(), dtype, nullptr);
  return PyObject_CallOneArg(asarray.get(), view.get());
}

}  // namespace

PyBufferProcs tensor_buffer_procs = {tensor_getbuffer, tensor_releasebuffer};

PyObject* tensor_numpy(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("numpy", {"force"}, 1);
  Args<1> a;
  parser.parse(args, nargs, kwnames, a.v);
  const Array& arr = array_of(self);
  // force=True copies to the host (and bfloat16 to float32) when sharing is impossible.
  if (a.has(0) && to_bool(a[0], "force") && (!arr.device().is_cpu() || arr.dtype == DType::BFloat16)) {
    DType dtype = arr.dtype == DType::BFloat16 ? DType::Float32 : arr.dtype;
    PyRef host = PyRef::checked(wrap(copy_to(arr, dtype, kCPU, MemoryFormat::Preserve)));
    return shared_ndarray(host.get(), nullptr);
  }
  require_cpu(arr, "numpy");
  return shared_ndarray(self, nullptr);
  LOOM_PY_END(nullptr)
}

PyObject* tensor_array(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("__array__", {"dtype", "copy"}, 2);
  Args<2> a;
  parser.parse(args, nargs, kwnames, a.v);
  const Array& arr = array_of(self);
  require_cpu(arr, "numpy");
  if (arr.dtype == DType::BFloat16) {
    PyRef host = PyRef::checked(wrap(copy_to(arr, DType::Float32, kCPU)));
    return shared_ndarray(host.get(), a[0]);
  }
  PyRef out = PyRef::checked(shared_ndarray(self, a[0]));
  if (a.has(1) && check_truth(a[1])) return PyObject_CallMethod(out.get(), "copy", nullptr);
  return out.release();
  LOOM_PY_END(nullptr)
}

}  // namespace loom::py
