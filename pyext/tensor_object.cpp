// The loom.Tensor type: lifetime, Python number conversions, len/iter, repr.
#include "pyext/tensor_object.h"

#include "lazy/ops.h"
#include "lazy/sync.h"
#include "pyext/objects.h"
#include "pyext/python_data.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

void tensor_dealloc(PyObject* self) {
  auto* t = reinterpret_cast<PyTensor*>(self);
  if (t->weakrefs) PyObject_ClearWeakRefs(self);
  if (t->impl) Tensor::adopt(t->impl).reset();
  Py_TYPE(self)->tp_free(self);
}

PyObject* tensor_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  return call_python_with("loom._legacy_tensor", "tensor_new", reinterpret_cast<PyObject*>(type), args, kwargs);
}

// Python's conversions of a one-element tensor: bool(t), float(t), int(t), operator.index(t).
Scalar single_value(PyObject* self, const char* what) {
  int64_t n = impl_of(self).numel();
  if (n != 1) {
    if (std::string_view(what) == "bool") {
      LOOM_FAIL(Runtime, "Boolean value of Tensor with ", n == 0 ? "no values" : "more than one value",
                " is ambiguous");
    }
    LOOM_FAIL(Value, "only one element tensors can be converted to Python scalars");
  }
  return item(array_of(self, SyncCause::Item));
}

int tensor_bool(PyObject* self) {
  LOOM_PY_BEGIN
  return single_value(self, "bool").to<bool>() ? 1 : 0;
  LOOM_PY_END(-1)
}

PyObject* tensor_float(PyObject* self) {
  LOOM_PY_BEGIN
  return PyFloat_FromDouble(single_value(self, "float").as_double());
  LOOM_PY_END(nullptr)
}

PyObject* tensor_int(PyObject* self) {
  LOOM_PY_BEGIN
  Scalar v = single_value(self, "int");
  // Through Python's float -> int: exact for large values, ValueError / OverflowError for nan / inf.
  if (v.is_float()) return PyLong_FromDouble(v.as_double());
  return PyLong_FromLongLong(v.as_int());
  LOOM_PY_END(nullptr)
}

PyObject* tensor_index(PyObject* self) {
  LOOM_PY_BEGIN
  const TensorImpl& t = impl_of(self);
  LOOM_CHECK(is_integral(t.dtype(), true) && t.numel() == 1, Type,
             "only integer tensors of a single element can be converted to an index");
  return PyLong_FromLongLong(item(array_of(self, SyncCause::Item)).as_int());
  LOOM_PY_END(nullptr)
}

Py_ssize_t tensor_len(PyObject* self) {
  LOOM_PY_BEGIN
  const TensorImpl& t = impl_of(self);
  LOOM_CHECK(t.ndim() > 0, Type, "len() of a 0-d tensor");
  return static_cast<Py_ssize_t>(t.sizes()[0]);
  LOOM_PY_END(-1)
}

// Iterates over the first dimension, each step a view, as PyTorch's unbind(0).
PyObject* tensor_iter(PyObject* self) {
  LOOM_PY_BEGIN
  LOOM_CHECK(impl_of(self).ndim() > 0, Type, "iteration over a 0-d tensor");
  std::vector<Tensor> rows = ops::unbind(tensor_of(self), 0);
  PyRef items = PyRef::checked(PyTuple_New(static_cast<Py_ssize_t>(rows.size())));
  for (size_t i = 0; i < rows.size(); ++i) PyTuple_SET_ITEM(items.get(), static_cast<Py_ssize_t>(i), wrap(rows[i]));
  return PyObject_GetIter(items.get());
  LOOM_PY_END(nullptr)
}

// repr and str are written in Python (loom/_tensor_str.py), like PyTorch's: formatting is not
// a hot path, and it is far easier to read there.
PyObject* tensor_repr(PyObject* self) {
  static PyObject* format = nullptr;
  if (!format) {
    PyRef module = PyRef::steal(PyImport_ImportModule("loom._tensor_str"));
    if (!module) return nullptr;
    format = PyObject_GetAttrString(module.get(), "tensor_repr");
    if (!format) return nullptr;
  }
  SyncReason reason(SyncCause::Repr);  // the item() and tolist() calls of the formatting
  return PyObject_CallOneArg(format, self);
}

PyNumberMethods tensor_number = [] {
  PyNumberMethods n{};
  fill_number_methods(n);
  n.nb_bool = tensor_bool;
  n.nb_int = tensor_int;
  n.nb_float = tensor_float;
  n.nb_index = tensor_index;
  return n;
}();

PyMappingMethods tensor_mapping = {tensor_len, tensor_getitem, tensor_setitem};

}  // namespace

namespace {

// module_name.function, or null (raised).
PyRef python_function(const char* module_name, const char* function) {
  PyRef module = PyRef::steal(PyImport_ImportModule(module_name));
  if (!module) return PyRef();
  return PyRef::steal(PyObject_GetAttrString(module.get(), function));
}

}  // namespace

PyObject* call_python_with(const char* module_name, const char* function, PyObject* first, PyObject* args,
                           PyObject* kwargs) {
  PyRef fn = python_function(module_name, function);
  if (!fn) return nullptr;
  PyRef keywords = PyRef::steal(kwargs ? Py_NewRef(kwargs) : PyDict_New());
  if (!keywords) return nullptr;
  return PyObject_CallFunctionObjArgs(fn.get(), first, args, keywords.get(), nullptr);
}

PyObject* call_python_method(const char* module_name, const char* function, PyObject* self, PyObject* args,
                             PyObject* kwargs) {
  PyRef fn = python_function(module_name, function);
  if (!fn) return nullptr;
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  PyRef all = PyRef::steal(PyTuple_New(n + 1));
  if (!all) return nullptr;
  PyTuple_SET_ITEM(all.get(), 0, Py_NewRef(self));
  for (Py_ssize_t i = 0; i < n; ++i) PyTuple_SET_ITEM(all.get(), i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
  return PyObject_Call(fn.get(), all.get(), kwargs);
}

PyTypeObject TensorType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "loom.Tensor";
  t.tp_basicsize = sizeof(PyTensor);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  t.tp_doc = "A multi-dimensional array on a device, with PyTorch's semantics.";
  t.tp_dealloc = tensor_dealloc;
  t.tp_new = tensor_new;
  t.tp_repr = tensor_repr;
  // No tp_str: object's str() goes through the type's repr, so a subclass's __repr__ (Parameter's
  // "Parameter containing:") is what print() shows, as in PyTorch.
  t.tp_as_number = &tensor_number;
  t.tp_as_mapping = &tensor_mapping;
  t.tp_as_buffer = &tensor_buffer_procs;
  t.tp_iter = tensor_iter;
  t.tp_weaklistoffset = offsetof(PyTensor, weakrefs);
  t.tp_richcompare = tensor_richcompare;
  // == builds a tensor, so hashing is by identity, as in PyTorch (tensors in sets and dicts).
  t.tp_hash = [](PyObject* self) { return PyBaseObject_Type.tp_hash(self); };
  t.tp_methods = tensor_methods;
  t.tp_getset = tensor_getset;
  return t;
}();

PyObject* wrap(Tensor tensor, PyTypeObject* type) {
  PyObject* obj = type->tp_alloc(type, 0);
  if (!obj) throw PythonError{};
  reinterpret_cast<PyTensor*>(obj)->impl = tensor.leak();
  return obj;
}

const Array& array_of(PyObject* obj, SyncCause cause) {
  // A sync releases the GIL: another thread may give obj other data meanwhile (_set_data), so
  // the array returned is that of obj's tensor once one is found up to date.
  SyncReason reason(cause);
  for (;;) {
    TensorImpl* t = &impl_of(obj);
    materialize(*t);
    if (t == &impl_of(obj) && !t->is_pending()) return t->array();
  }
}

const Array& array_arg(PyObject* obj, const char* what) {
  if (!is_tensor(obj)) LOOM_FAIL(Type, what, " must be a Tensor, not ", type_name(obj));
  return array_of(obj);
}

void register_tensor_type(PyObject* module) {
  // The method table: the hand-written methods, then the op library's (never freed: the type
  // lives as long as the process).
  static std::vector<PyMethodDef> methods = [] {
    std::vector<PyMethodDef> all;
    for (PyMethodDef* m = tensor_methods; m->ml_name; ++m) all.push_back(*m);
    for (PyMethodDef* m = autograd_methods; m->ml_name; ++m) all.push_back(*m);
    for (PyMethodDef* m = serialization_methods; m->ml_name; ++m) all.push_back(*m);
    for (const PyMethodDef& m : op_methods()) all.push_back(m);
    all.push_back({nullptr, nullptr, 0, nullptr});
    return all;
  }();
  static std::vector<PyGetSetDef> getset = [] {
    std::vector<PyGetSetDef> all;
    for (PyGetSetDef* g = tensor_getset; g->name; ++g) all.push_back(*g);
    for (PyGetSetDef* g = autograd_getset; g->name; ++g) all.push_back(*g);
    all.push_back({nullptr, nullptr, nullptr, nullptr, nullptr});
    return all;
  }();
  TensorType.tp_methods = methods.data();
  TensorType.tp_getset = getset.data();
  check_status(PyType_Ready(&TensorType));
  Py_INCREF(&TensorType);
  check_status(PyModule_AddObject(module, "Tensor", reinterpret_cast<PyObject*>(&TensorType)));
}

}  // namespace loom::py
