// Conversions from Python arguments to the op library's argument types (lazy/ops.h), shared by
// the operator slots, the op table (pyext/signature.h) and the other bindings.
#pragma once

#include <optional>
#include <vector>

#include "lazy/ops.h"
#include "pyext/common.h"
#include "pyext/tensor_object.h"

namespace loom::py {

// A Python number (bool, int, float, numpy scalar) as a Scalar; nullopt if obj is none of them.
std::optional<Scalar> scalar_of(PyObject* obj);
// A loom tensor, or TypeError.
Tensor tensor_arg(PyObject* obj, const char* what);
PyObject* tensor_tuple(const std::vector<Tensor>& ts);

}  // namespace loom::py
