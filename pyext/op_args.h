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
// While loom.compile records a step, a float passed to the step comes with its tag.
std::optional<Scalar> scalar_of(PyObject* obj);

// loom.compile (lazy/capture.h, Note [Where a step's numbers come from]): while a step is
// recorded, the Python floats passed to it and the tags of their sources; scalar_of tags the
// Scalar it makes of one of these very objects. Null otherwise.
extern thread_local const std::vector<std::pair<PyObject*, uint32_t>>* float_argument_tags;
// A loom tensor, or TypeError.
Tensor tensor_arg(PyObject* obj, const char* what);
PyObject* tensor_tuple(const std::vector<Tensor>& ts);

}  // namespace loom::py
