// Shared plumbing of the CPython extension: owned references, exception translation and
// conversions of Python arguments. No binding library: this is the raw C API.
//
// Error convention: C++ code below the extension throws loom::Error; glue code that calls the
// C API throws PythonError when a call failed and already set a Python exception. Every function
// Python calls wraps its body in LOOM_PY_BEGIN / LOOM_PY_END, which turns either into a Python
// exception and returns the error value.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/layout.h"

namespace loom::py {

// A Python exception is already set; unwind to the boundary.
struct PythonError {};

// Throws PythonError when obj is null (a failed C API call), else returns it.
inline PyObject* check(PyObject* obj) {
  if (!obj) throw PythonError{};
  return obj;
}

// Throws PythonError when a C API call that returns a status failed (returned -1).
inline void check_status(int status) {
  if (status < 0) throw PythonError{};
}

// Python truthiness, throwing PythonError when __bool__ raised.
inline bool check_truth(PyObject* obj) {
  int t = PyObject_IsTrue(obj);
  check_status(t);
  return t != 0;
}

// An owned (strong) reference.
class PyRef {
 public:
  PyRef() = default;
  static PyRef steal(PyObject* o) { return PyRef(o); }
  static PyRef borrow(PyObject* o) {
    Py_XINCREF(o);
    return PyRef(o);
  }
  // Steals a new reference from a C API call, throwing PythonError if it failed.
  static PyRef checked(PyObject* o) { return PyRef(check(o)); }
  PyRef(PyRef&& o) noexcept : obj_(std::exchange(o.obj_, nullptr)) {}
  PyRef& operator=(PyRef&& o) noexcept {
    std::swap(obj_, o.obj_);
    return *this;
  }
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  ~PyRef() { Py_XDECREF(obj_); }

  PyObject* get() const noexcept { return obj_; }
  PyObject* release() noexcept { return std::exchange(obj_, nullptr); }
  explicit operator bool() const noexcept { return obj_ != nullptr; }

 private:
  explicit PyRef(PyObject* o) : obj_(o) {}
  PyObject* obj_ = nullptr;
};

// Sets the Python exception for the C++ exception being handled. Call only inside a catch block.
void set_python_error() noexcept;
// The exception type of ErrorKind::Distributed (pyext/distributed_bindings.cpp), once registered.
extern PyObject* DistBackendError;
// The exception type of ErrorKind::LinAlg (pyext/op_rows_linalg.cpp): loom.linalg.LinAlgError.
extern PyObject* LinAlgError;

// Python ints and objects with __index__ (numpy integers), but not bools, floats or tensors
// (a tensor has __index__ too, yet torch treats loom.tensor(2) as data, not as a size).
bool is_index_like(PyObject* obj) noexcept;
int64_t to_int64(PyObject* obj, const char* what);
double to_double(PyObject* obj, const char* what);
// While loom.compile records a step, the float subclasses to_double read (the float arguments it
// tracks, Note [Float arguments] in pyext/compile_bindings.cpp); null otherwise.
extern thread_local std::vector<PyObject*>* floats_read_by_value;
bool to_bool(PyObject* obj, const char* what);
// A sequence of ints: tuple, list or loom.Size.
Dims to_dims(PyObject* obj, const char* what);

// A Python type name for messages: "list", "str".
const char* type_name(PyObject* obj) noexcept;

// The numpy module, imported on first use and kept for the process (borrowed).
PyObject* numpy_module();

}  // namespace loom::py

// A PyMethodDef's function and flags for a METH_FASTCALL | METH_KEYWORDS function.
#define LOOM_FASTCALL(f) \
  reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f)), METH_FASTCALL | METH_KEYWORDS

#define LOOM_PY_BEGIN try {
#define LOOM_PY_END(error_value)   \
  }                                \
  catch (...) {                    \
    ::loom::py::set_python_error(); \
    return error_value;            \
  }
