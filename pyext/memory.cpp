// Memory and device introspection for Python: allocator statistics per device, empty_cache,
// and whether CUDA is usable. loom/__init__.py and loom/cuda.py present these PyTorch-style.
#include "pyext/objects.h"
#include "runtime/allocator.h"
#include "runtime/cuda/cuda_device.h"

namespace loom::py {
namespace {

PyObject* stats_dict(const MemoryStats& s) {
  return Py_BuildValue(
      "{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L}", "allocated_bytes", s.allocated_bytes, "requested_bytes",
      s.requested_bytes, "reserved_bytes", s.reserved_bytes, "peak_allocated_bytes", s.peak_allocated_bytes,
      "peak_reserved_bytes", s.peak_reserved_bytes, "active_blocks", s.active_blocks, "num_allocations",
      s.num_allocations, "num_cache_hits", s.num_cache_hits, "num_system_allocations", s.num_system_allocations,
      "num_system_frees", s.num_system_frees);
}

PyObject* f_memory_stats(PyObject*, PyObject* device) {
  LOOM_PY_BEGIN
  return stats_dict(allocator_for(device_from_py(device)).stats());
  LOOM_PY_END(nullptr)
}

PyObject* f_empty_cache(PyObject*, PyObject* device) {
  LOOM_PY_BEGIN
  allocator_for(device_from_py(device)).empty_cache();
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_reset_peak_memory_stats(PyObject*, PyObject* device) {
  LOOM_PY_BEGIN
  allocator_for(device_from_py(device)).reset_peak_stats();
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_cuda_compiled(PyObject*, PyObject*) { return PyBool_FromLong(cuda::compiled()); }
PyObject* f_cuda_device_count(PyObject*, PyObject*) { return PyLong_FromLong(cuda::device_count()); }
PyObject* f_cuda_unavailable_reason(PyObject*, PyObject*) {
  return PyUnicode_FromString(cuda::unavailable_reason().c_str());
}

}  // namespace

PyMethodDef memory_functions[] = {
    {"_memory_stats", f_memory_stats, METH_O, "_memory_stats(device): the caching allocator's statistics"},
    {"_empty_cache", f_empty_cache, METH_O, "_empty_cache(device): return cached free blocks to the system"},
    {"_reset_peak_memory_stats", f_reset_peak_memory_stats, METH_O, nullptr},
    {"_cuda_compiled", f_cuda_compiled, METH_NOARGS, "True when loom was built with the CUDA backend"},
    {"_cuda_device_count", f_cuda_device_count, METH_NOARGS, "usable GPUs (0 without a driver)"},
    {"_cuda_unavailable_reason", f_cuda_unavailable_reason, METH_NOARGS, "why there is no usable GPU"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace loom::py
