// loom.device objects.
#include <string>

#include "pyext/args.h"
#include "pyext/objects.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

struct PyDevice {
  PyObject_HEAD
  DeviceSpec spec;
};

DeviceSpec spec_of(PyObject* self) { return reinterpret_cast<PyDevice*>(self)->spec; }

const char* type_string(DeviceType t) { return t == DeviceType::CPU ? "cpu" : "cuda"; }

std::string spec_string(DeviceSpec s) {
  std::string out = type_string(s.type);
  if (s.index >= 0) out += ":" + std::to_string(s.index);
  return out;
}

PyObject* device_new(PyTypeObject*, PyObject* args, PyObject* kwargs) {
  LOOM_PY_BEGIN
  static const char* kwlist[] = {"type", "index", nullptr};
  PyObject* type = nullptr;
  PyObject* index = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:device", const_cast<char**>(kwlist), &type, &index))
    return nullptr;
  if (Py_TYPE(type) == &DeviceType_ && index == Py_None) return Py_NewRef(type);
  DeviceSpec spec = device_spec_from_py(type);
  if (index != Py_None) {
    LOOM_CHECK(spec.index < 0, Runtime, "type (string) must not include an index because index was passed explicitly: ",
               spec_string(spec));
    int64_t i = to_int64(index, "device index");
    LOOM_CHECK(i >= 0 && i <= INT16_MAX, Runtime, "Device index must be in [0, 32767], got ", i);
    LOOM_CHECK(spec.type != DeviceType::CPU || i == 0, Runtime, "CPU device index must be 0, got ", i);
    spec.index = static_cast<int>(i);
  }
  return device_object(spec);
  LOOM_PY_END(nullptr)
}

PyObject* device_repr(PyObject* self) {
  DeviceSpec s = spec_of(self);
  if (s.index < 0) return PyUnicode_FromFormat("device(type='%s')", type_string(s.type));
  return PyUnicode_FromFormat("device(type='%s', index=%d)", type_string(s.type), s.index);
}

PyObject* device_str(PyObject* self) { return PyUnicode_FromString(spec_string(spec_of(self)).c_str()); }

Py_hash_t device_hash(PyObject* self) {
  DeviceSpec s = spec_of(self);
  Py_hash_t h = static_cast<Py_hash_t>(s.type) * 1000003 + s.index + 2;
  return h == -1 ? -2 : h;
}

PyObject* device_richcompare(PyObject* a, PyObject* b, int op) {
  if ((op != Py_EQ && op != Py_NE) || Py_TYPE(b) != &DeviceType_) Py_RETURN_NOTIMPLEMENTED;
  DeviceSpec x = spec_of(a), y = spec_of(b);
  bool equal = x.type == y.type && x.index == y.index;
  return PyBool_FromLong(equal == (op == Py_EQ));
}

PyObject* device_type(PyObject* self, void*) { return PyUnicode_FromString(type_string(spec_of(self).type)); }
PyObject* device_index(PyObject* self, void*) {
  int i = spec_of(self).index;
  if (i < 0) Py_RETURN_NONE;
  return PyLong_FromLong(i);
}
PyObject* device_reduce(PyObject* self, PyObject*) {
  return Py_BuildValue("(O(s))", reinterpret_cast<PyObject*>(&DeviceType_), spec_string(spec_of(self)).c_str());
}

PyGetSetDef device_getset[] = {
    {"type", device_type, nullptr, "'cpu' or 'cuda'", nullptr},
    {"index", device_index, nullptr, "the device ordinal, or None", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef device_methods[] = {
    {"__reduce__", device_reduce, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

PyTypeObject DeviceType_ = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "loom.device";
  t.tp_basicsize = sizeof(PyDevice);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "device(type, index=None): where a tensor's memory lives, e.g. loom.device('cuda:0')";
  t.tp_new = device_new;
  t.tp_repr = device_repr;
  t.tp_str = device_str;
  t.tp_hash = device_hash;
  t.tp_richcompare = device_richcompare;
  t.tp_getset = device_getset;
  t.tp_methods = device_methods;
  return t;
}();

PyObject* device_object(DeviceSpec spec) {
  auto* d = PyObject_New(PyDevice, &DeviceType_);
  if (!d) throw PythonError{};
  d->spec = spec;
  return reinterpret_cast<PyObject*>(d);
}

PyObject* device_object(Device device) {
  return device_object(DeviceSpec{device.type, device.is_cpu() ? -1 : device.index});
}

DeviceSpec device_spec_from_py(PyObject* obj) {
  if (Py_TYPE(obj) == &DeviceType_) return spec_of(obj);
  if (PyUnicode_Check(obj)) {
    Py_ssize_t len = 0;
    const char* s = PyUnicode_AsUTF8AndSize(obj, &len);
    if (!s) throw PythonError{};
    return parse_device(std::string_view(s, static_cast<size_t>(len)));
  }
  if (is_index_like(obj)) {
    int64_t i = to_int64(obj, "device");
    LOOM_CHECK(i >= 0 && i <= INT16_MAX, Runtime, "Device index must be in [0, 32767], got ", i);
    return DeviceSpec{DeviceType::CUDA, static_cast<int>(i)};
  }
  LOOM_FAIL(Type, "device must be a loom.device, a string such as 'cpu' or 'cuda:0', or an int, not ",
            type_name(obj));
}

void register_device_type(PyObject* module) {
  check_status(PyType_Ready(&DeviceType_));
  Py_INCREF(&DeviceType_);
  check_status(PyModule_AddObject(module, "device", reinterpret_cast<PyObject*>(&DeviceType_)));
}

}  // namespace loom::py
