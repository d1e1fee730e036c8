// Memory and device introspection for Python: allocator statistics per device, empty_cache,
// the plan cache (clear, limits), and whether CUDA is usable. loom/__init__.py and loom/cuda.py
// present these PyTorch-style.
#include "graph/plan_cache.h"
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

PyObject* f_clear_plan_cache(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  graph::plan_cache().clear();
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// _plan_cache_limits(bytes_per_device=None, entries=None): sets the bounds given, returns the
// bounds as they were.
PyObject* f_plan_cache_limits(PyObject*, PyObject* args) {
  LOOM_PY_BEGIN
  PyObject* bytes = Py_None;
  PyObject* entries = Py_None;
  if (!PyArg_ParseTuple(args, "|OO:_plan_cache_limits", &bytes, &entries)) return nullptr;
  graph::PlanCache& cache = graph::plan_cache();
  graph::PlanCache::Limits old = cache.limits(), limits = old;
  if (bytes != Py_None && (limits.bytes_per_device = PyLong_AsLongLong(bytes)) == -1 && PyErr_Occurred()) return nullptr;
  if (entries != Py_None && (limits.entries = PyLong_AsLongLong(entries)) == -1 && PyErr_Occurred()) return nullptr;
  cache.set_limits(limits);
  return Py_BuildValue("(LL)", static_cast<long long>(old.bytes_per_device), static_cast<long long>(old.entries));
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
    {"_clear_plan_cache", f_clear_plan_cache, METH_NOARGS, "_clear_plan_cache(): drop every cached plan"},
    {"_plan_cache_limits", f_plan_cache_limits, METH_VARARGS,
     "_plan_cache_limits(bytes_per_device=None, entries=None): set the plan cache's bounds (evicting at once), "
     "return the old (bytes_per_device, entries)"},
    {"_cuda_compiled", f_cuda_compiled, METH_NOARGS, "True when loom was built with the CUDA backend"},
    {"_cuda_device_count", f_cuda_device_count, METH_NOARGS, "usable GPUs (0 without a driver)"},
    {"_cuda_unavailable_reason", f_cuda_unavailable_reason, METH_NOARGS, "why there is no usable GPU"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace loom::py
