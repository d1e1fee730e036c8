// The default device of creation ops: loom.set_default_device(), loom.get_default_device() and
// `with loom.device(...):`, as PyTorch 2's.
//
// A creation op given no device (zeros, tensor, as_tensor, randn, arange, ..., and so a module's
// parameters, made by them) puts its result on the default device: the CPU, eager, unless set.
// That is how a script written for one device runs on another unchanged: set "lazy" once, or
// build the model inside `with loom.device("lazy"):`. Ops that take their device from an input
// (the *_like ops, Tensor.new_*, from_numpy) are not creation ops in this sense and ignore it.
//
// Per thread, as PyTorch's (a new thread starts on the CPU). `with device:` saves the default it
// replaces on a per-thread stack and restores it at exit, so blocks nest.
#include <vector>

#include "pyext/objects.h"
#include "runtime/cuda/cuda_device.h"

namespace loom::py {
namespace {

thread_local DeviceName current{};                   // the CPU, eager
thread_local std::vector<DeviceName> saved_by_with;  // what each open `with device:` replaced

bool is_plain_cpu(const DeviceName& n) noexcept { return !n.lazy && n.backend.type == DeviceType::CPU; }

// Checked once, where the default is set: a GPU that cannot be used fails at that line.
DeviceName checked(const DeviceName& name) {
  cuda::require(name.placement().device);
  return name;
}

PyObject* f_set_default_device(PyObject*, PyObject* device) {
  LOOM_PY_BEGIN
  current = device == Py_None ? DeviceName{} : checked(device_name_from_py(device));
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_get_default_device(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  return device_object(current);
  LOOM_PY_END(nullptr)
}

}  // namespace

std::optional<Placement> default_placement() {
  if (is_plain_cpu(current)) return std::nullopt;
  return current.placement();
}

void enter_device_block(const DeviceName& name) {
  DeviceName next = checked(name);
  saved_by_with.push_back(current);
  current = next;
}

void exit_device_block() {
  LOOM_CHECK(!saved_by_with.empty(), Runtime, "device.__exit__() without a matching __enter__()");
  current = saved_by_with.back();
  saved_by_with.pop_back();
}

PyMethodDef default_device_functions[] = {
    {"set_default_device", f_set_default_device, METH_O,
     "set_default_device(device): where creation ops put tensors when given no device (None: the CPU); per "
     "thread, as PyTorch's"},
    {"get_default_device", f_get_default_device, METH_NOARGS,
     "get_default_device(): the device creation ops use when given none"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace loom::py
