// loom._C: the extension module. Registers the types and the function tables of the other files.
#include "graph/interpreter.h"
#include "pyext/embedding.h"
#include "pyext/objects.h"
#include "pyext/tensor_object.h"
#include "runtime/blas.h"
#include "runtime/thread_pool.h"
#include "runtime/warning.h"

namespace loom::py {

extern PyMethodDef creation_functions[];
extern PyMethodDef memory_functions[];
extern PyMethodDef cuda_functions[];
extern PyMethodDef lazy_functions[];
extern PyMethodDef default_device_functions[];
extern PyMethodDef autograd_functions[];
extern PyMethodDef optim_functions[];
extern PyMethodDef compile_functions[];
extern PyMethodDef profiler_functions[];
extern PyMethodDef distributed_functions[];
extern PyMethodDef autocast_functions[];
extern PyMethodDef backward_hook_functions[];
void register_autograd_types(PyObject* module);
void register_compile_type(PyObject* module);
void register_distributed_types(PyObject* module);
void register_linalg_types(PyObject* module);

namespace {

// The engine's warnings (runtime/warning.h) as Python RuntimeWarnings. They may come from a
// thread without the GIL, deep inside a compile or a sync, where nothing may throw: a warning a
// filter turns into an error is printed as an unraisable exception instead of raised.
void python_warning(const std::string& message) {
  PyGILState_STATE gil = PyGILState_Ensure();
  if (PyErr_WarnEx(PyExc_RuntimeWarning, message.c_str(), 1) < 0) PyErr_WriteUnraisable(nullptr);
  PyGILState_Release(gil);
}

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "loom._C", "The C++ core of loom: tensors, devices and the runtime.", -1,
    nullptr, nullptr, nullptr, nullptr, nullptr,
};

PyObject* init() {
  LOOM_PY_BEGIN
  configured_threads();  // a bad LOOM_NUM_THREADS fails the import, not a later kernel
  PyRef module = PyRef::checked(PyModule_Create(&module_def));
  register_dtype_type(module.get());
  register_device_type(module.get());
  register_size_type(module.get());
  register_tensor_type(module.get());
  register_generator_type(module.get());
  check_status(PyModule_AddFunctions(module.get(), creation_functions));
  check_status(PyModule_AddFunctions(module.get(), memory_functions));
  check_status(PyModule_AddFunctions(module.get(), cuda_functions));
  check_status(PyModule_AddFunctions(module.get(), lazy_functions));
  check_status(PyModule_AddFunctions(module.get(), default_device_functions));
  check_status(PyModule_AddFunctions(module.get(), autograd_functions));
  check_status(PyModule_AddFunctions(module.get(), optim_functions));
  check_status(PyModule_AddFunctions(module.get(), compile_functions));
  check_status(PyModule_AddFunctions(module.get(), profiler_functions));
  check_status(PyModule_AddFunctions(module.get(), distributed_functions));
  check_status(PyModule_AddFunctions(module.get(), autocast_functions));
  check_status(PyModule_AddFunctions(module.get(), backward_hook_functions));
  register_autograd_types(module.get());
  register_compile_type(module.get());
  register_distributed_types(module.get());
  register_linalg_types(module.get());
  set_warning_handler(&python_warning);
  static std::vector<PyMethodDef> ops = [] {
    std::vector<PyMethodDef> defs = op_functions();
    defs.push_back({nullptr, nullptr, 0, nullptr});
    return defs;
  }();
  check_status(PyModule_AddFunctions(module.get(), ops.data()));
  graph::install_default_executor();
  install_embedding();
  blas::choose_kernels();
  return module.release();
  LOOM_PY_END(nullptr)
}

}  // namespace
}  // namespace loom::py

PyMODINIT_FUNC PyInit__C() { return loom::py::init(); }
