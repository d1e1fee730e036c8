#include "pyext/common.h"

#include <new>

#include "pyext/embedding.h"
#include "pyext/tensor_object.h"
#include "runtime/error.h"

namespace loom::py {

void set_python_error() noexcept {
  try {
    throw;
  } catch (const PythonError&) {
    // Already set by the C API call that failed.
  } catch (const Error& e) {
    PyObject* type = PyExc_RuntimeError;
    switch (e.kind()) {
      case ErrorKind::Runtime: type = PyExc_RuntimeError; break;
      case ErrorKind::Value: type = PyExc_ValueError; break;
      case ErrorKind::Type: type = PyExc_TypeError; break;
      case ErrorKind::Index: type = PyExc_IndexError; break;
      case ErrorKind::NotImplemented: type = PyExc_NotImplementedError; break;
      case ErrorKind::OutOfMemory: type = PyExc_MemoryError; break;
      case ErrorKind::Distributed: type = DistBackendError ? DistBackendError : PyExc_RuntimeError; break;
      case ErrorKind::Interrupted: raise_interrupt(e.what()); return;
      case ErrorKind::LinAlg: type = LinAlgError ? LinAlgError : PyExc_RuntimeError; break;
    }
    PyErr_SetString(type, e.what());
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception in loom");
  }
}

const char* type_name(PyObject* obj) noexcept { return Py_TYPE(obj)->tp_name; }

PyObject* numpy_module() {
  static PyObject* numpy = nullptr;
  if (!numpy) numpy = check(PyImport_ImportModule("numpy"));
  return numpy;
}

bool is_index_like(PyObject* obj) noexcept {
  if (PyLong_CheckExact(obj)) return true;
  if (PyBool_Check(obj) || PyFloat_Check(obj) || is_tensor(obj)) return false;
  return PyIndex_Check(obj);
}

int64_t to_int64(PyObject* obj, const char* what) {
  if (!is_index_like(obj)) {
    LOOM_FAIL(Type, what, " must be an int, not ", type_name(obj));
  }
  int overflow = 0;
  long long v;
  if (PyLong_CheckExact(obj)) {
    v = PyLong_AsLongLongAndOverflow(obj, &overflow);
  } else {
    PyRef index = PyRef::checked(PyNumber_Index(obj));
    v = PyLong_AsLongLongAndOverflow(index.get(), &overflow);
  }
  if (v == -1 && PyErr_Occurred()) throw PythonError{};
  LOOM_CHECK(!overflow, Runtime, "Overflow when unpacking long: ", what, " is too large for a 64-bit integer");
  return v;
}

thread_local std::vector<PyObject*>* floats_read_by_value = nullptr;

double to_double(PyObject* obj, const char* what) {
  if (PyFloat_CheckExact(obj)) return PyFloat_AS_DOUBLE(obj);
  if (floats_read_by_value && PyFloat_Check(obj)) [[unlikely]] floats_read_by_value->push_back(obj);
  if (!PyNumber_Check(obj)) LOOM_FAIL(Type, what, " must be a number, not ", type_name(obj));
  double v = PyFloat_AsDouble(obj);
  if (v == -1.0 && PyErr_Occurred()) throw PythonError{};
  return v;
}

bool to_bool(PyObject* obj, const char* what) {
  if (obj == Py_True) return true;
  if (obj == Py_False) return false;
  LOOM_FAIL(Type, what, " must be a bool, not ", type_name(obj));
}

Dims to_dims(PyObject* obj, const char* what) {
  if (!PyTuple_Check(obj) && !PyList_Check(obj)) {
    LOOM_FAIL(Type, what, " must be a tuple of ints, not ", type_name(obj));
  }
  // A tuple snapshot: an item's __index__ could otherwise mutate a list under our feet.
  PyRef items = PyRef::checked(PySequence_Tuple(obj));
  Py_ssize_t n = PyTuple_GET_SIZE(items.get());
  Dims out;
  out.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) out.push_back(to_int64(PyTuple_GET_ITEM(items.get(), i), what));
  return out;
}

}  // namespace loom::py
