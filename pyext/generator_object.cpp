// loom.Generator: a random number generator a random op can be given (`generator=`), as
// torch.Generator. Each is a Philox (seed, offset) pair of its own (runtime/random.h), so its
// stream does not depend on the global one, nor the global one on it; loom.default_generator
// is an object on the CPU's default generator (the one loom.manual_seed reseeds).
//
// Its state (get_state / set_state) is a uint8 CPU tensor of 16 bytes: the seed, then the offset
// (the number of random ops drawn since it was seeded), both little-endian. It is not PyTorch's
// state (a Mersenne Twister's 5056 bytes): states move between loom generators only.
#include <cstring>
#include <memory>
#include <random>

#include "pyext/args.h"
#include "pyext/objects.h"
#include "pyext/tensor_object.h"
#include "runtime/error.h"
#include "runtime/random.h"

namespace loom::py {
namespace {

constexpr int64_t kStateBytes = 16;

struct PyGenerator {
  PyObject_HEAD
  loom::Generator* generator;                // owned unless it is a device's default one
  std::unique_ptr<loom::Generator> owned;
  DeviceName device;
};

PyGenerator* as_generator(PyObject* self) { return reinterpret_cast<PyGenerator*>(self); }

PyGenerator* allocate(PyTypeObject* type, const DeviceName& device) {
  auto* g = reinterpret_cast<PyGenerator*>(type->tp_alloc(type, 0));
  if (!g) throw PythonError{};
  new (&g->owned) std::unique_ptr<loom::Generator>();
  new (&g->device) DeviceName(device);
  g->generator = nullptr;
  return g;
}

// Generator(device='cpu'): a new generator seeded with the default seed, as PyTorch's.
PyObject* generator_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  LOOM_PY_BEGIN
  static const char* names[] = {"device", nullptr};
  PyObject* device = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:Generator", const_cast<char**>(names), &device))
    return nullptr;
  DeviceName name = device && device != Py_None ? device_name_from_py(device) : DeviceName{};
  name.placement();  // a device that does not exist ("cuda:7") raises here
  PyGenerator* g = allocate(type, name);
  g->owned = std::make_unique<loom::Generator>();
  g->generator = g->owned.get();
  return reinterpret_cast<PyObject*>(g);
  LOOM_PY_END(nullptr)
}

void generator_dealloc(PyObject* self) {
  PyGenerator* g = as_generator(self);
  g->owned.~unique_ptr();
  g->device.~DeviceName();
  Py_TYPE(self)->tp_free(self);
}

// A seed as PyTorch takes it: an int in [-2^63, 2^64); a negative one is taken modulo 2^64.
uint64_t seed_from_py(PyObject* seed) {
  if (!PyLong_Check(seed)) LOOM_FAIL(Runtime, "manual_seed expected a long, but got ", type_name(seed));
  int overflow = 0;
  long long value = PyLong_AsLongLongAndOverflow(seed, &overflow);
  if (overflow == 0) {
    if (value == -1 && PyErr_Occurred()) throw PythonError{};
    return static_cast<uint64_t>(value);
  }
  unsigned long long u = PyLong_AsUnsignedLongLong(seed);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    LOOM_FAIL(Runtime, "Overflow when unpacking long");
  }
  return u;
}

PyObject* generator_manual_seed(PyObject* self, PyObject* seed) {
  LOOM_PY_BEGIN
  as_generator(self)->generator->manual_seed(seed_from_py(seed));
  return Py_NewRef(self);
  LOOM_PY_END(nullptr)
}

// seed(): reseeds from the operating system's entropy and returns the seed.
PyObject* generator_seed(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  std::random_device entropy;
  uint64_t seed = (static_cast<uint64_t>(entropy()) << 32) | entropy();
  as_generator(self)->generator->manual_seed(seed);
  return PyLong_FromUnsignedLongLong(seed);
  LOOM_PY_END(nullptr)
}

PyObject* generator_initial_seed(PyObject* self, PyObject*) {
  return PyLong_FromUnsignedLongLong(as_generator(self)->generator->seed());
}

PyObject* generator_get_state(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  const loom::Generator& g = *as_generator(self)->generator;
  uint64_t words[2] = {g.seed(), g.offset()};
  Array state = empty(Dims{kStateBytes}, DType::UInt8, kCPU);
  for (int w = 0; w < 2; ++w)
    for (int b = 0; b < 8; ++b) static_cast<uint8_t*>(state.data())[8 * w + b] = static_cast<uint8_t>(words[w] >> (8 * b));
  return wrap(std::move(state));
  LOOM_PY_END(nullptr)
}

PyObject* generator_set_state(PyObject* self, PyObject* state) {
  LOOM_PY_BEGIN
  if (!is_tensor(state)) LOOM_FAIL(Type, "expected a torch.ByteTensor, but got ", type_name(state));
  LOOM_CHECK(impl_of(state).dtype() == DType::UInt8, Type, "RNG state must be a torch.ByteTensor");
  LOOM_CHECK(impl_of(state).numel() == kStateBytes, Runtime,
             "Expected a loom generator state of size 16 (its seed and offset) but found the input RNG state size "
             "to be ", impl_of(state).numel());
  PyRef host = PyRef::checked(PyObject_CallMethod(state, "contiguous", nullptr));
  host = PyRef::checked(PyObject_CallMethod(host.get(), "cpu", nullptr));
  const auto* bytes = static_cast<const uint8_t*>(array_of(host.get()).data());
  uint64_t words[2] = {0, 0};
  for (int w = 0; w < 2; ++w)
    for (int b = 0; b < 8; ++b) words[w] |= static_cast<uint64_t>(bytes[8 * w + b]) << (8 * b);
  as_generator(self)->generator->set_state({words[0], words[1]});
  return Py_NewRef(self);
  LOOM_PY_END(nullptr)
}

PyObject* generator_device(PyObject* self, void*) {
  LOOM_PY_BEGIN
  return device_object(as_generator(self)->device);
  LOOM_PY_END(nullptr)
}

PyMethodDef generator_methods[] = {
    {"manual_seed", generator_manual_seed, METH_O, "manual_seed(seed): reseeds this generator; returns it"},
    {"seed", generator_seed, METH_NOARGS, "seed(): reseeds from the system's entropy; returns the seed"},
    {"initial_seed", generator_initial_seed, METH_NOARGS, "the seed this generator was last seeded with"},
    {"get_state", generator_get_state, METH_NOARGS,
     "get_state(): a uint8 tensor of 16 bytes (seed, then offset), for set_state"},
    {"set_state", generator_set_state, METH_O, "set_state(state): continues from a get_state() result; returns self"},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef generator_getset[] = {
    {"device", generator_device, nullptr, "the device whose random ops this generator may serve", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

PyTypeObject GeneratorType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "loom.Generator";
  t.tp_basicsize = sizeof(PyGenerator);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "Generator(device='cpu'): a random number generator of its own, for random ops' generator= argument";
  t.tp_new = generator_new;
  t.tp_dealloc = generator_dealloc;
  t.tp_methods = generator_methods;
  t.tp_getset = generator_getset;
  return t;
}();

GeneratorScope generator_scope(PyObject* obj) {
  if (!obj || obj == Py_None) return GeneratorScope(nullptr, kCPU);
  if (!PyObject_TypeCheck(obj, &GeneratorType))
    LOOM_FAIL(Type, "argument 'generator' must be loom.Generator, not ", type_name(obj));
  PyGenerator* g = as_generator(obj);
  return GeneratorScope(g->generator, g->device.placement().device);
}

namespace {

// A loom.Generator object on a device's default generator (it does not own it).
PyObject* default_generator_object(const DeviceName& device) {
  PyGenerator* g = allocate(&GeneratorType, device);
  g->generator = &default_generator(device.placement().device);
  return reinterpret_cast<PyObject*>(g);
}

PyObject* f_default_generator(PyObject*, PyObject* device) {
  LOOM_PY_BEGIN
  return default_generator_object(device_name_from_py(device));
  LOOM_PY_END(nullptr)
}

PyMethodDef generator_functions[] = {
    {"_default_generator", f_default_generator, METH_O,
     "_default_generator(device): a loom.Generator on that device's default generator"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

void register_generator_type(PyObject* module) {
  check_status(PyType_Ready(&GeneratorType));
  check_status(PyModule_AddObjectRef(module, "Generator", reinterpret_cast<PyObject*>(&GeneratorType)));
  check_status(PyModule_AddFunctions(module, generator_functions));
  // loom.default_generator: the CPU's default generator (loom.manual_seed returns it).
  PyRef object = PyRef::steal(default_generator_object(DeviceName{}));
  check_status(PyModule_AddObjectRef(module, "default_generator", object.get()));
}

}  // namespace loom::py
