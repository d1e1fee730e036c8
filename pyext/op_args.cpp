#include "pyext/op_args.h"

#include "pyext/objects.h"
#include "runtime/error.h"

namespace loom::py {

thread_local const std::vector<std::pair<PyObject*, uint32_t>>* float_argument_tags = nullptr;

std::optional<Scalar> scalar_of(PyObject* obj) {
  if (PyBool_Check(obj)) return Scalar(obj == Py_True);
  if (PyFloat_Check(obj)) {
    Scalar s(PyFloat_AS_DOUBLE(obj));
    if (float_argument_tags) [[unlikely]]
      for (const auto& [argument, tag] : *float_argument_tags)
        if (argument == obj) return s.with_source(tag);
    return s;
  }
  if (PyLong_Check(obj)) return Scalar(to_int64(obj, "value"));
  if (is_tensor(obj)) return std::nullopt;
  if (is_index_like(obj)) return Scalar(to_int64(obj, "value"));  // numpy integers
  if (PyNumber_Check(obj) && !PyUnicode_Check(obj) && PyObject_HasAttrString(obj, "__float__"))
    return Scalar(to_double(obj, "value"));  // numpy floats
  return std::nullopt;
}

Tensor tensor_arg(PyObject* obj, const char* what) {
  if (!is_tensor(obj)) LOOM_FAIL(Type, what, " must be a Tensor, not ", type_name(obj));
  return tensor_of(obj);
}

PyObject* tensor_tuple(const std::vector<Tensor>& ts) {
  PyRef t = PyRef::checked(PyTuple_New(static_cast<Py_ssize_t>(ts.size())));
  for (size_t i = 0; i < ts.size(); ++i) PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), wrap(ts[i]));
  return t.release();
}

}  // namespace loom::py
