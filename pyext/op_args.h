// Conversions from Python arguments to the op library's argument types (lazy/ops.h), shared by
// the operator slots and the method/function bindings.
#pragma once

#include <optional>
#include <vector>

#include "lazy/ops.h"
#include "pyext/common.h"
#include "pyext/tensor_object.h"

namespace loom::py {

// A Python number (bool, int, float, numpy scalar) as a Scalar; nullopt if obj is none of them.
std::optional<Scalar> scalar_of(PyObject* obj);
// A loom tensor (borrowed: the Python object keeps it alive during the call) or a number.
// TypeError naming `what` otherwise.
Arg arg_of(PyObject* obj, const char* what);
// A loom tensor, or TypeError.
Tensor tensor_arg(PyObject* obj, const char* what);
// An int or a sequence of ints (None or absent: empty, meaning all dims).
ops::DimList dims_of(PyObject* obj, const char* what);
std::optional<int64_t> optional_int(PyObject* obj, const char* what);
std::optional<DType> optional_dtype(PyObject* obj);
std::vector<Tensor> tensor_list(PyObject* obj, const char* what);
PyObject* tensor_tuple(const std::vector<Tensor>& ts);

}  // namespace loom::py
