// The Python object types of loom._C besides Tensor: loom.dtype, loom.device and loom.Size, and
// conversions between them and the runtime's values.
#pragma once

#include <optional>
#include <string>

#include "lazy/dispatch.h"
#include "pyext/common.h"
#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/random.h"

namespace loom::py {

// loom.dtype: one immortal instance per DType (loom.float32 is loom.float).
extern PyTypeObject DTypeType;
PyObject* dtype_object(DType dtype);  // borrowed
// Accepts loom.dtype, its names as strings ("float32", "float"), the Python types bool/int/float,
// and numpy dtypes and scalar types. Raises TypeError naming the unknown value.
DType dtype_from_py(PyObject* obj);

// loom.device: a physical device ("cpu", "cuda:1"), or lazy mode on one ("lazy:cpu",
// "lazy:cuda:0"; plain "lazy" means the first GPU if there is one, else the CPU).
struct DeviceName {
  bool lazy = false;
  bool backend_given = true;  // false for plain "lazy"
  DeviceSpec backend{DeviceType::CPU, -1};
  Placement placement() const;  // defaults resolved
  std::string str() const;
};

extern PyTypeObject DeviceType_;
PyObject* device_object(const DeviceName& name);  // new reference
PyObject* device_object(Device device, bool lazy = false);  // of a tensor; CPU has index None
// Accepts loom.device, strings ("cpu", "cuda:1", "lazy", "lazy:cuda"), and an int (a CUDA
// ordinal), as PyTorch does. Raises RuntimeError naming a string that does not parse.
DeviceName device_name_from_py(PyObject* obj);
// Where a creation op or .to() puts its result; None (or nullptr: not given) means the default
// device (pyext/default_device.cpp: the CPU, eager, unless set).
Placement placement_from_py(PyObject* obj);
// The default device of creation ops when one was set (loom.set_default_device, `with
// loom.device(...)`); nullopt while it is the CPU, eager.
std::optional<Placement> default_placement();
// `with device:` sets the default device for the block (device.__enter__ / __exit__).
void enter_device_block(const DeviceName& name);
void exit_device_block();
// The physical device named (the backend of a lazy device).
inline Device device_from_py(PyObject* obj) { return device_name_from_py(obj).placement().device; }

// loom.Size: a tuple subclass, as torch.Size.
extern PyTypeObject SizeType;
PyObject* size_object(IntSpan sizes);  // new reference

// loom.Generator (pyext/generator_object.cpp) and loom.default_generator.
extern PyTypeObject GeneratorType;
// A random op's `generator=` argument: while the result lives, the op's draws come from that
// generator; None (or nullptr) leaves the device's default one. Raises TypeError for another type.
GeneratorScope generator_scope(PyObject* obj);

// Each readies its type and adds it (and, for dtypes, the instances) to the module.
void register_dtype_type(PyObject* module);
void register_device_type(PyObject* module);
void register_size_type(PyObject* module);
void register_generator_type(PyObject* module);

}  // namespace loom::py
