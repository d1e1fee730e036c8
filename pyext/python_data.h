// Conversions between tensors and Python data: nested lists and scalars, objects exporting the
// buffer protocol (numpy arrays, array.array, memoryview), and back.
#pragma once

#include <optional>

#include "pyext/common.h"
#include "runtime/array.h"

namespace loom::py {

// loom.tensor(data): a new array holding a copy of data. Without a dtype, it is inferred as
// PyTorch does: Python bools, ints and floats ask for bool, int64 and the default float dtype,
// numpy scalars and arrays and 0-d tensors for their own, and nested data promotes them. Lists
// may hold numpy arrays (read as nested sequences); tensors in them must be 0-d, as in torch.
Array array_from_data(PyObject* data, std::optional<DType> dtype, Device device);

// An array over the memory of a buffer-protocol object (zero-copy), keeping the object alive
// for as long as the storage lives. Raises TypeError for formats loom has no dtype for and
// ValueError for negative strides. `readonly` says the exporter refused write access: such
// memory may be copied from but must not be handed out as a writable tensor silently.
struct SharedBuffer {
  Array array;
  bool readonly;
};
SharedBuffer array_from_buffer(PyObject* obj);
// The memory of a DLPack producer (an object with __dlpack__, or an unconsumed capsule) as an
// array, zero-copy (dlpack.cpp). Memory the producer marked read-only raises TypeError unless
// allow_readonly. When the producer's __dlpack__ raises, its exception propagates (PythonError).
SharedBuffer import_dlpack(PyObject* obj, bool allow_readonly);
// The array data already is, zero-copy: an array exporting the buffer protocol (numpy scalars,
// being numbers, excluded), or another library's tensor through DLPack (device-aware, bfloat16
// included) or, where its producer refuses DLPack (torch has no bool in DLPack), numpy's
// __array__. nullopt for nested data and numbers.
std::optional<SharedBuffer> shared_array(PyObject* data);

// A number argument (full's fill_value, t[i] = value): a bool, an int (RuntimeError beyond int64),
// a one-element tensor's value, or anything else as a float through __float__.
Scalar scalar_from_py(PyObject* value, const char* what);
// Python scalars: bool, int or float, as the dtype's category says.
PyObject* scalar_to_py(Scalar value);
// Tensor.tolist(): nested lists of Python scalars (a scalar for a 0-d array).
PyObject* array_to_list(const Array& a);

}  // namespace loom::py
