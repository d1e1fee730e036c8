// loom.Size: the type of Tensor.shape, a tuple of ints like torch.Size.
#include "pyext/objects.h"

namespace loom::py {
namespace {

PyObject* size_repr(PyObject* self) {
  PyObject* list = PySequence_List(self);
  if (!list) return nullptr;
  PyObject* out = PyUnicode_FromFormat("loom.Size(%R)", list);
  Py_DECREF(list);
  return out;
}

PyObject* new_size(PyTypeObject* type, IntSpan dims) {
  PyRef out = PyRef::checked(type->tp_alloc(type, static_cast<Py_ssize_t>(dims.size())));
  for (size_t i = 0; i < dims.size(); ++i)
    PyTuple_SET_ITEM(out.get(), static_cast<Py_ssize_t>(i), check(PyLong_FromLongLong(dims[i])));
  return out.release();
}

PyObject* size_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  LOOM_PY_BEGIN
  PyObject* iterable = nullptr;
  static const char* kwlist[] = {"sizes", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:Size", const_cast<char**>(kwlist), &iterable)) return nullptr;
  PyRef items = PyRef::checked(iterable ? PySequence_Tuple(iterable) : PyTuple_New(0));
  return new_size(type, to_dims(items.get(), "Size"));
  LOOM_PY_END(nullptr)
}

// Slicing, concatenation and repetition run tuple's own slots, then make the tuple they return a
// loom.Size, as torch.Size does (its items must still be ints: Size + (1.5,) is a TypeError).
PyObject* as_size(PyObject* result) {
  LOOM_PY_BEGIN
  PyRef owned = PyRef::checked(result);
  if (!PyTuple_CheckExact(owned.get())) return owned.release();  // s[i] is an int
  return new_size(&SizeType, to_dims(owned.get(), "Size"));
  LOOM_PY_END(nullptr)
}

PyObject* size_subscript(PyObject* self, PyObject* key) {
  return as_size(PyTuple_Type.tp_as_mapping->mp_subscript(self, key));
}
PyObject* size_concat(PyObject* self, PyObject* other) {
  return as_size(PyTuple_Type.tp_as_sequence->sq_concat(self, other));
}
PyObject* size_repeat(PyObject* self, Py_ssize_t n) {
  return as_size(PyTuple_Type.tp_as_sequence->sq_repeat(self, n));
}

// The other slots are inherited from tuple (PyType_Ready copies the ones left null).
PySequenceMethods size_as_sequence = [] {
  PySequenceMethods m{};
  m.sq_concat = size_concat;
  m.sq_repeat = size_repeat;
  return m;
}();
PyMappingMethods size_as_mapping = [] {
  PyMappingMethods m{};
  m.mp_subscript = size_subscript;
  return m;
}();

PyObject* size_numel(PyObject* self, PyObject*) {
  long long n = 1;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self); ++i) n *= PyLong_AsLongLong(PyTuple_GET_ITEM(self, i));
  return PyLong_FromLongLong(n);
}

PyMethodDef size_methods[] = {
    {"numel", size_numel, METH_NOARGS, "the number of elements a tensor of this size holds"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

PyTypeObject SizeType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "loom.Size";
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_TUPLE_SUBCLASS;
  t.tp_doc = "The shape of a tensor: a tuple of ints.";
  t.tp_repr = size_repr;
  t.tp_methods = size_methods;
  t.tp_new = size_new;
  t.tp_as_sequence = &size_as_sequence;
  t.tp_as_mapping = &size_as_mapping;
  return t;
}();

PyObject* size_object(IntSpan sizes) { return new_size(&SizeType, sizes); }

void register_size_type(PyObject* module) {
  SizeType.tp_base = &PyTuple_Type;
  check_status(PyType_Ready(&SizeType));
  Py_INCREF(&SizeType);
  check_status(PyModule_AddObject(module, "Size", reinterpret_cast<PyObject*>(&SizeType)));
}

}  // namespace loom::py
