// The Python object types of loom._C besides Tensor: loom.dtype, loom.device and loom.Size, and
// conversions between them and the runtime's values.
#pragma once

#include "pyext/common.h"
#include "runtime/device.h"
#include "runtime/dtype.h"

namespace loom::py {

// loom.dtype: one immortal instance per DType (loom.float32 is loom.float).
extern PyTypeObject DTypeType;
PyObject* dtype_object(DType dtype);  // borrowed
// Accepts loom.dtype, its names as strings ("float32", "float"), the Python types bool/int/float,
// and numpy dtypes and scalar types. Raises TypeError naming the unknown value.
DType dtype_from_py(PyObject* obj);

// loom.device: a device type and an optional index.
extern PyTypeObject DeviceType_;
PyObject* device_object(DeviceSpec spec);  // new reference
PyObject* device_object(Device device);     // new reference; CPU devices have index None
// Accepts loom.device, "cpu" / "cuda" / "cuda:1", and an int (a CUDA ordinal), as PyTorch does.
DeviceSpec device_spec_from_py(PyObject* obj);
inline Device device_from_py(PyObject* obj) { return device_spec_from_py(obj).resolve(); }

// loom.Size: a tuple subclass, as torch.Size.
extern PyTypeObject SizeType;
PyObject* size_object(IntSpan sizes);  // new reference

// Each readies its type and adds it (and, for dtypes, the instances) to the module.
void register_dtype_type(PyObject* module);
void register_device_type(PyObject* module);
void register_size_type(PyObject* module);

}  // namespace loom::py
