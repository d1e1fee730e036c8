#include "pyext/op_args.h"

#include "pyext/objects.h"
#include "runtime/error.h"

namespace loom::py {

std::optional<Scalar> scalar_of(PyObject* obj) {
  if (PyBool_Check(obj)) return Scalar(obj == Py_True);
  if (PyFloat_Check(obj)) return Scalar(PyFloat_AS_DOUBLE(obj));
  if (PyLong_Check(obj)) return Scalar(to_int64(obj, "value"));
  if (is_tensor(obj)) return std::nullopt;
  if (is_index_like(obj)) return Scalar(to_int64(obj, "value"));  // numpy integers
  if (PyNumber_Check(obj) && !PyUnicode_Check(obj) && PyObject_HasAttrString(obj, "__float__"))
    return Scalar(to_double(obj, "value"));  // numpy floats
  return std::nullopt;
}

Arg arg_of(PyObject* obj, const char* what) {
  if (is_tensor(obj)) return Arg(&impl_of(obj));
  if (auto s = scalar_of(obj)) return Arg(*s);
  LOOM_FAIL(Type, what, " must be a Tensor or a number, not ", type_name(obj));
}

Tensor tensor_arg(PyObject* obj, const char* what) {
  if (!is_tensor(obj)) LOOM_FAIL(Type, what, " must be a Tensor, not ", type_name(obj));
  return tensor_of(obj);
}

ops::DimList dims_of(PyObject* obj, const char* what) {
  ops::DimList out;
  if (!obj || obj == Py_None) return out;
  if (is_index_like(obj)) {
    out.push_back(to_int64(obj, what));
    return out;
  }
  for (int64_t d : to_dims(obj, what)) out.push_back(d);
  return out;
}

std::optional<int64_t> optional_int(PyObject* obj, const char* what) {
  if (!obj || obj == Py_None) return std::nullopt;
  return to_int64(obj, what);
}

std::optional<DType> optional_dtype(PyObject* obj) {
  if (!obj || obj == Py_None) return std::nullopt;
  return dtype_from_py(obj);
}

std::vector<Tensor> tensor_list(PyObject* obj, const char* what) {
  LOOM_CHECK(PyTuple_Check(obj) || PyList_Check(obj), Type, what, " must be a tuple or list of Tensors, not ",
             type_name(obj));
  PyRef items = PyRef::checked(PySequence_Tuple(obj));
  std::vector<Tensor> out;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items.get()); ++i)
    out.push_back(tensor_arg(PyTuple_GET_ITEM(items.get(), i), what));
  return out;
}

PyObject* tensor_tuple(const std::vector<Tensor>& ts) {
  PyRef t = PyRef::checked(PyTuple_New(static_cast<Py_ssize_t>(ts.size())));
  for (size_t i = 0; i < ts.size(); ++i) PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), wrap(ts[i]));
  return t.release();
}

}  // namespace loom::py
