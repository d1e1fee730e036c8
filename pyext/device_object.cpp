// loom.device objects: physical devices and lazy mode on them.
#include <string>

#include "pyext/args.h"
#include "pyext/objects.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

struct PyDevice {
  PyObject_HEAD
  DeviceName name;
};

const DeviceName& name_of(PyObject* self) { return reinterpret_cast<PyDevice*>(self)->name; }

const char* type_string(DeviceType t) { return t == DeviceType::CPU ? "cpu" : "cuda"; }

std::string spec_string(DeviceSpec s) {
  std::string out = type_string(s.type);
  if (s.index >= 0) out += ":" + std::to_string(s.index);
  return out;
}

DeviceName parse(std::string_view text) {
  DeviceName name;
  if (text == "lazy") {
    name.lazy = true;
    name.backend_given = false;
    return name;
  }
  if (text.starts_with("lazy:")) {
    name.lazy = true;
    text.remove_prefix(5);
  }
  name.backend = parse_device(text);
  return name;
}

PyObject* device_new(PyTypeObject*, PyObject* args, PyObject* kwargs) {
  LOOM_PY_BEGIN
  static const char* kwlist[] = {"type", "index", nullptr};
  PyObject* type = nullptr;
  PyObject* index = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:device", const_cast<char**>(kwlist), &type, &index))
    return nullptr;
  if (Py_TYPE(type) == &DeviceType_ && index == Py_None) return Py_NewRef(type);
  DeviceName name = device_name_from_py(type);
  if (index != Py_None) {
    LOOM_CHECK(name.backend_given && name.backend.index < 0, Runtime,
               "type (string) must not include an index because index was passed explicitly: ", name.str());
    int64_t i = to_int64(index, "device index");
    LOOM_CHECK(i >= 0 && i <= INT16_MAX, Runtime, "Device index must be in [0, 32767], got ", i);
    LOOM_CHECK(name.backend.type != DeviceType::CPU || i == 0, Runtime, "CPU device index must be 0, got ", i);
    name.backend.index = static_cast<int>(i);
  }
  return device_object(name);
  LOOM_PY_END(nullptr)
}

PyObject* device_repr(PyObject* self) {
  const DeviceName& n = name_of(self);
  if (n.lazy) {
    if (!n.backend_given) return PyUnicode_FromString("device(type='lazy')");
    return PyUnicode_FromFormat("device(type='lazy', backend='%s')", spec_string(n.backend).c_str());
  }
  if (n.backend.index < 0) return PyUnicode_FromFormat("device(type='%s')", type_string(n.backend.type));
  return PyUnicode_FromFormat("device(type='%s', index=%d)", type_string(n.backend.type), n.backend.index);
}

PyObject* device_str(PyObject* self) { return PyUnicode_FromString(name_of(self).str().c_str()); }

Py_hash_t device_hash(PyObject* self) {
  const DeviceName& n = name_of(self);
  Py_hash_t h = (static_cast<Py_hash_t>(n.backend.type) * 1000003 + n.backend.index + 2) * 4 + n.lazy * 2 + n.backend_given;
  return h == -1 ? -2 : h;
}

PyObject* device_richcompare(PyObject* a, PyObject* b, int op) {
  if ((op != Py_EQ && op != Py_NE) || Py_TYPE(b) != &DeviceType_) Py_RETURN_NOTIMPLEMENTED;
  const DeviceName &x = name_of(a), &y = name_of(b);
  bool equal = x.lazy == y.lazy && x.backend_given == y.backend_given && x.backend.type == y.backend.type &&
               x.backend.index == y.backend.index;
  return PyBool_FromLong(equal == (op == Py_EQ));
}

PyObject* device_type(PyObject* self, void*) {
  const DeviceName& n = name_of(self);
  return PyUnicode_FromString(n.lazy ? "lazy" : type_string(n.backend.type));
}
PyObject* device_index(PyObject* self, void*) {
  const DeviceName& n = name_of(self);
  if (n.lazy || n.backend.index < 0) Py_RETURN_NONE;
  return PyLong_FromLong(n.backend.index);
}
// Not in PyTorch: the physical device a lazy device runs on ("cpu", "cuda:0"), None for plain "lazy".
PyObject* device_backend(PyObject* self, void*) {
  const DeviceName& n = name_of(self);
  if (!n.backend_given) Py_RETURN_NONE;
  return PyUnicode_FromString(spec_string(n.backend).c_str());
}
PyObject* device_reduce(PyObject* self, PyObject*) {
  return Py_BuildValue("(O(s))", reinterpret_cast<PyObject*>(&DeviceType_), name_of(self).str().c_str());
}

PyGetSetDef device_getset[] = {
    {"type", device_type, nullptr, "'cpu', 'cuda' or 'lazy'", nullptr},
    {"index", device_index, nullptr, "the device ordinal, or None", nullptr},
    {"backend", device_backend, nullptr, "for lazy devices: the device they run on", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

// `with loom.device("lazy"):` makes it the default device of creation ops inside the block.
PyObject* device_enter(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  enter_device_block(name_of(self));
  return Py_NewRef(self);
  LOOM_PY_END(nullptr)
}
PyObject* device_exit(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  exit_device_block();
  Py_RETURN_FALSE;
  LOOM_PY_END(nullptr)
}

PyMethodDef device_methods[] = {
    {"__reduce__", device_reduce, METH_NOARGS, nullptr},
    {"__enter__", device_enter, METH_NOARGS, nullptr},
    {"__exit__", device_exit, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

Placement DeviceName::placement() const {
  if (!backend_given) {
    // Plain "lazy": the first GPU when there is one, else the CPU (DESIGN: devices and modes).
    return {cuda::device_count() > 0 ? Device(DeviceType::CUDA, 0) : kCPU, true};
  }
  return {backend.resolve(), lazy};
}

std::string DeviceName::str() const {
  if (!backend_given) return "lazy";
  return (lazy ? "lazy:" : "") + spec_string(backend);
}

PyTypeObject DeviceType_ = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "loom.device";
  t.tp_basicsize = sizeof(PyDevice);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "device(type, index=None): where a tensor lives: 'cpu', 'cuda:0', or lazy mode on one ('lazy', "
             "'lazy:cpu', 'lazy:cuda:0')";
  t.tp_new = device_new;
  t.tp_repr = device_repr;
  t.tp_str = device_str;
  t.tp_hash = device_hash;
  t.tp_richcompare = device_richcompare;
  t.tp_getset = device_getset;
  t.tp_methods = device_methods;
  return t;
}();

PyObject* device_object(const DeviceName& name) {
  auto* d = PyObject_New(PyDevice, &DeviceType_);
  if (!d) throw PythonError{};
  new (&d->name) DeviceName(name);
  return reinterpret_cast<PyObject*>(d);
}

PyObject* device_object(Device device, bool lazy) {
  DeviceName n;
  n.lazy = lazy;
  n.backend = DeviceSpec{device.type, device.is_cpu() && !lazy ? -1 : device.index};
  if (lazy && device.is_cpu()) n.backend.index = -1;
  return device_object(n);
}

DeviceName device_name_from_py(PyObject* obj) {
  if (Py_TYPE(obj) == &DeviceType_) return name_of(obj);
  if (PyUnicode_Check(obj)) {
    Py_ssize_t len = 0;
    const char* s = PyUnicode_AsUTF8AndSize(obj, &len);
    if (!s) throw PythonError{};
    return parse(std::string_view(s, static_cast<size_t>(len)));
  }
  if (is_index_like(obj)) {
    int64_t i = to_int64(obj, "device");
    LOOM_CHECK(i >= 0 && i <= INT16_MAX, Runtime, "Device index must be in [0, 32767], got ", i);
    DeviceName n;
    n.backend = DeviceSpec{DeviceType::CUDA, static_cast<int>(i)};
    return n;
  }
  LOOM_FAIL(Type, "device must be a loom.device, a string such as 'cpu', 'cuda:0' or 'lazy', or an int, not ",
            type_name(obj));
}

Placement placement_from_py(PyObject* obj) {
  if (!obj || obj == Py_None) return default_placement().value_or(Placement{kCPU, false});
  Placement p = device_name_from_py(obj).placement();
  // A lazy tensor on a GPU that cannot be used would only fail at its sync: fail here instead,
  // at the line that asked for it (DESIGN decision 2), as eager tensors do when they allocate.
  cuda::require(p.device);
  return p;
}

void register_device_type(PyObject* module) {
  check_status(PyType_Ready(&DeviceType_));
  Py_INCREF(&DeviceType_);
  check_status(PyModule_AddObject(module, "device", reinterpret_cast<PyObject*>(&DeviceType_)));
}

}  // namespace loom::py
