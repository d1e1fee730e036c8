// loom.dtype objects.
#include <array>
#include <string>

#include "pyext/objects.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

struct PyDType {
  PyObject_HEAD
  DType dtype;
};

std::array<PyDType*, kNumDTypes> instances{};

DType of(PyObject* self) { return reinterpret_cast<PyDType*>(self)->dtype; }

PyObject* dtype_repr(PyObject* self) { return PyUnicode_FromFormat("loom.%s", dtype_name(of(self))); }

PyObject* dtype_is_floating_point(PyObject* self, void*) { return PyBool_FromLong(is_floating(of(self))); }
PyObject* dtype_is_signed(PyObject* self, void*) {
  DType d = of(self);
  return PyBool_FromLong(d != DType::Bool && d != DType::UInt8);
}
PyObject* dtype_itemsize(PyObject* self, void*) { return PyLong_FromSize_t(itemsize(of(self))); }
// Pickles as the global loom.<name>, so unpickling gives back the singleton.
PyObject* dtype_reduce(PyObject* self, PyObject*) { return PyUnicode_FromString(dtype_name(of(self))); }

PyGetSetDef dtype_getset[] = {
    {"is_floating_point", dtype_is_floating_point, nullptr, "True for float16, bfloat16, float32, float64", nullptr},
    {"is_signed", dtype_is_signed, nullptr, "True unless the type is bool or uint8", nullptr},
    {"itemsize", dtype_itemsize, nullptr, "bytes per element", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef dtype_methods[] = {
    {"__reduce__", dtype_reduce, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

std::optional<DType> from_name_object(PyObject* name) {
  if (!PyUnicode_Check(name)) return std::nullopt;
  Py_ssize_t len = 0;
  const char* s = PyUnicode_AsUTF8AndSize(name, &len);
  if (!s) throw PythonError{};
  return dtype_from_name(std::string_view(s, static_cast<size_t>(len)));
}

bool from_numpy(PyObject* obj) {
  PyObject* type = PyType_Check(obj) ? obj : reinterpret_cast<PyObject*>(Py_TYPE(obj));
  PyRef module = PyRef::steal(PyObject_GetAttrString(type, "__module__"));
  if (!module) {
    PyErr_Clear();
    return false;
  }
  return PyUnicode_Check(module.get()) && PyUnicode_CompareWithASCIIString(module.get(), "numpy") == 0;
}

}  // namespace

PyTypeObject DTypeType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "loom.dtype";
  t.tp_basicsize = sizeof(PyDType);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "The element type of a tensor: loom.float32, loom.int64, ...";
  t.tp_repr = dtype_repr;
  t.tp_getset = dtype_getset;
  t.tp_methods = dtype_methods;
  return t;
}();

PyObject* dtype_object(DType dtype) { return reinterpret_cast<PyObject*>(instances[static_cast<int>(dtype)]); }

DType dtype_from_py(PyObject* obj) {
  if (Py_TYPE(obj) == &DTypeType) return of(obj);
  if (obj == reinterpret_cast<PyObject*>(&PyFloat_Type)) return default_float_dtype();
  if (obj == reinterpret_cast<PyObject*>(&PyLong_Type)) return DType::Int64;
  if (obj == reinterpret_cast<PyObject*>(&PyBool_Type)) return DType::Bool;
  if (PyUnicode_Check(obj)) {
    if (auto d = from_name_object(obj)) return *d;
    PyErr_Format(PyExc_TypeError,
                 "unknown dtype %R: expected one of bool, uint8, int8, int16, int32, int64, float16, bfloat16, "
                 "float32, float64 (or float, double, half, long, int, short, byte)",
                 obj);
    throw PythonError{};
  }
  if (from_numpy(obj)) {
    // numpy.dtype(obj).name is the canonical name for every spelling: dtype objects, scalar types
    // (np.bool_, whose __name__ is "bool_") and aliases (np.longlong, np.intc).
    PyRef np_dtype = PyRef::checked(PyObject_GetAttrString(numpy_module(), "dtype"));
    PyRef normalized = PyRef::steal(PyObject_CallOneArg(np_dtype.get(), obj));
    PyRef name = normalized ? PyRef::steal(PyObject_GetAttrString(normalized.get(), "name")) : PyRef();
    if (!name) PyErr_Clear();
    if (name) {
      if (auto d = from_name_object(name.get())) return *d;
    }
    PyErr_Format(PyExc_TypeError, "numpy dtype %R has no loom equivalent", obj);
    throw PythonError{};
  }
  PyErr_Format(PyExc_TypeError, "dtype must be a loom.dtype (e.g. loom.float32), not %s", type_name(obj));
  throw PythonError{};
}

void register_dtype_type(PyObject* module) {
  check_status(PyType_Ready(&DTypeType));
  for (int i = 0; i < kNumDTypes; ++i) {
    auto* d = PyObject_New(PyDType, &DTypeType);
    check(reinterpret_cast<PyObject*>(d));
    d->dtype = static_cast<DType>(i);
    instances[i] = d;  // immortal: the module keeps one reference forever
    Py_INCREF(d);
    check_status(PyModule_AddObject(module, dtype_name(d->dtype), reinterpret_cast<PyObject*>(d)));
  }
  Py_INCREF(&DTypeType);
  check_status(PyModule_AddObject(module, "dtype", reinterpret_cast<PyObject*>(&DTypeType)));
}

}  // namespace loom::py
