// loom._C's CUDA functions: synchronize, the matmul precision switch, and what the tests need to
// check the CUDA backend on machines without a GPU (kernel sources, NVRTC targets, the driver's
// status). loom/cuda.py and loom/backends.py present them PyTorch-style.
#include "graph/cuda_library_source.h"
#include "pyext/objects.h"
#include "rtc/nvrtc.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/kernel_source.h"
#include "runtime/random.h"
#include "runtime/determinism.h"
#include "runtime/matmul_precision.h"

namespace loom::py {
namespace {

PyObject* f_cuda_synchronize(PyObject*, PyObject* device) {
  LOOM_PY_BEGIN
  cuda::synchronize(device_from_py(device));
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// (name, major, minor, total_memory, multi_processor_count) of a GPU, for loom.cuda.get_device_properties.
PyObject* f_cuda_device_properties(PyObject*, PyObject* device) {
  LOOM_PY_BEGIN
  Device d = device_from_py(device);
  LOOM_CHECK(d.is_cuda(), Value, "Expected a cuda device, but got: ", d.str());
  cuda::DeviceProperties p = cuda::properties(d.index);
  return Py_BuildValue("(siini)", p.name.c_str(), p.major, p.minor, static_cast<Py_ssize_t>(p.total_memory),
                       p.multi_processor_count);
  LOOM_PY_END(nullptr)
}

// The GPU "cuda" means on this thread (loom.cuda.current_device / set_device).
PyObject* f_cuda_current_device(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  LOOM_PY_BEGIN
  LOOM_CHECK(nargs <= 1, Type, "_cuda_current_device() takes at most 1 argument (", nargs, " given)");
  if (nargs == 1) {
    Device d = device_from_py(args[0]);
    LOOM_CHECK(d.is_cuda(), Value, "Expected a cuda device, but got: ", d.str());
    cuda::require(d);
    set_current_cuda_device(d.index);
  }
  return PyLong_FromLong(current_cuda_device());
  LOOM_PY_END(nullptr)
}

PyObject* f_cuda_kernel_sources(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  return Py_BuildValue("{s:s,s:s}", "runtime", cuda::runtime_kernel_source().c_str(), "library",
                       graph::cuda_library_source().c_str());
  LOOM_PY_END(nullptr)
}

PyObject* f_cuda_driver_status(PyObject*, PyObject*) {
  return PyUnicode_FromString(cuda::driver_unavailable_reason().c_str());
}

PyObject* f_cuda_target(PyObject*, PyObject* capability) {
  LOOM_PY_BEGIN
  long cap = PyLong_AsLong(capability);
  if (cap == -1 && PyErr_Occurred()) return nullptr;
  auto [arch, ptx] = rtc::cuda_target(static_cast<int>(cap));
  return Py_BuildValue("(iO)", arch, ptx ? Py_True : Py_False);
  LOOM_PY_END(nullptr)
}

PyObject* f_allow_tf32(PyObject*, PyObject* args) {
  LOOM_PY_BEGIN
  PyObject* value = nullptr;
  if (!PyArg_ParseTuple(args, "|O:_cuda_allow_tf32", &value)) return nullptr;
  if (value) {
    int on = PyObject_IsTrue(value);
    if (on < 0) return nullptr;
    set_matmul_allow_tf32(on != 0);
  }
  return PyBool_FromLong(matmul_allow_tf32());
  LOOM_PY_END(nullptr)
}

// _deterministic_algorithms() -> (enabled, warn_only); with arguments, sets them first.
PyObject* f_deterministic(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  LOOM_PY_BEGIN
  if (nargs == 2) set_deterministic_algorithms({check_truth(args[0]), check_truth(args[1])});
  else LOOM_CHECK(nargs == 0, Type, "_deterministic_algorithms() or _deterministic_algorithms(mode, warn_only)");
  DeterministicMode m = deterministic_algorithms();
  return Py_BuildValue("(OO)", m.enabled ? Py_True : Py_False, m.warn_only ? Py_True : Py_False);
  LOOM_PY_END(nullptr)
}

PyObject* f_manual_seed_device(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  LOOM_PY_BEGIN
  LOOM_CHECK(nargs == 2, Type, "_manual_seed_device(device, seed)");
  PyRef index = PyRef::checked(PyNumber_Index(args[1]));
  unsigned long long s = PyLong_AsUnsignedLongLongMask(index.get());  // modulo 2^64, as manual_seed
  if (PyErr_Occurred()) throw PythonError{};
  default_generator(device_from_py(args[0])).manual_seed(s);
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

}  // namespace

PyMethodDef cuda_functions[] = {
    {"_deterministic_algorithms", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f_deterministic)),
     METH_FASTCALL, "_deterministic_algorithms([mode, warn_only]) -> (enabled, warn_only)"},
    {"_manual_seed_device", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f_manual_seed_device)),
     METH_FASTCALL, "_manual_seed_device(device, seed): reseeds one device's generator (loom.cuda.manual_seed)"},
    {"_cuda_synchronize", f_cuda_synchronize, METH_O, "_cuda_synchronize(device): wait for the GPU's work"},
    {"_cuda_device_properties", f_cuda_device_properties, METH_O,
     "_cuda_device_properties(device): (name, major, minor, total_memory, multi_processor_count)"},
    {"_cuda_current_device", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f_cuda_current_device)),
     METH_FASTCALL, "_cuda_current_device([device]): the GPU 'cuda' means on this thread; sets it when given"},
    {"_cuda_kernel_sources", f_cuda_kernel_sources, METH_NOARGS,
     "_cuda_kernel_sources(): {'runtime': source, 'library': source}, the CUDA modules loom compiles besides fused ones"},
    {"_cuda_driver_status", f_cuda_driver_status, METH_NOARGS,
     "_cuda_driver_status(): why the CUDA driver entry points cannot be had ('' when they can)"},
    {"_cuda_target", f_cuda_target, METH_O,
     "_cuda_target(capability): (arch, is_ptx) that NVRTC compiles for a GPU of that compute capability (10*major+minor)"},
    {"_cuda_allow_tf32", f_allow_tf32, METH_VARARGS,
     "_cuda_allow_tf32([value]): whether float32 matrix products on GPUs may use tensor-float-32; sets it when given"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace loom::py
