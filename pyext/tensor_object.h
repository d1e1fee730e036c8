// loom.Tensor: the Python object that owns a reference to a TensorImpl.
//
// The type's slots are spread over files by concern: tensor_object.cpp (lifetime, conversions
// to Python numbers, repr, iteration), tensor_methods.cpp (the method table), indexing.cpp
// (__getitem__ / __setitem__), buffer.cpp (buffer protocol, numpy), dlpack.cpp (DLPack).
#pragma once

#include <vector>

#include "lazy/tensor.h"
#include "pyext/common.h"
#include "runtime/metrics.h"

namespace loom::py {

struct PyTensor {
  PyObject_HEAD
  TensorImpl* impl;  // owned reference; never null after construction
  PyObject* weakrefs;
};

extern PyTypeObject TensorType;

inline bool is_tensor(PyObject* obj) noexcept { return PyObject_TypeCheck(obj, &TensorType); }
inline TensorImpl& impl_of(PyObject* obj) noexcept { return *reinterpret_cast<PyTensor*>(obj)->impl; }
// The value of a tensor, materializing it first if it is pending (a sync point, counted for
// `cause`: lazy/sync.h SyncReason).
const Array& array_of(PyObject* obj, SyncCause cause = SyncCause::Host);
inline Tensor tensor_of(PyObject* obj) noexcept { return Tensor(&impl_of(obj)); }

// New references to new Python tensors (of type `type`, loom.Tensor by default).
PyObject* wrap(Tensor t, PyTypeObject* type = &TensorType);
inline PyObject* wrap(Array a) { return wrap(make_tensor(std::move(a))); }

// The tensor argument `what` of a call, or TypeError.
const Array& array_arg(PyObject* obj, const char* what);

// module_name.function(first, args, kwargs) for type slots and methods written in Python (the
// legacy constructors of loom/_legacy_tensor.py: tp_new with first = the type, Tensor.new with
// first = self). A new reference, or null (raised).
PyObject* call_python_with(const char* module_name, const char* function, PyObject* first, PyObject* args,
                           PyObject* kwargs);
// module_name.function(self, *args, **kwargs): a Tensor method written in Python. A new
// reference, or null (raised).
PyObject* call_python_method(const char* module_name, const char* function, PyObject* self, PyObject* args,
                             PyObject* kwargs);

// Slots implemented in other files.
extern PyMethodDef tensor_methods[];
extern PyGetSetDef tensor_getset[];
extern PyMethodDef autograd_methods[];  // autograd_bindings.cpp
extern PyGetSetDef autograd_getset[];
extern PyMethodDef serialization_methods[];  // tensor_serialization.cpp
extern PyBufferProcs tensor_buffer_procs;
// `self.data = value` (tensor_methods.cpp): self holds value's data from now on, keeping its
// autograd state. 0, or -1 with a Python error set.
int set_tensor_data(PyObject* self, PyObject* value);
PyObject* tensor_getitem(PyObject* self, PyObject* index);
int tensor_setitem(PyObject* self, PyObject* index, PyObject* value);
PyObject* tensor_richcompare(PyObject* a, PyObject* b, int op);
void fill_number_methods(PyNumberMethods& methods);  // the operators: + - * / ...
std::vector<PyMethodDef> op_methods();               // Tensor.<op>(...) bindings
std::vector<PyMethodDef> op_functions();             // loom.<op>(...) bindings

void register_tensor_type(PyObject* module);

}  // namespace loom::py
