// DLPack exchange: Tensor.__dlpack__ / __dlpack_device__ and loom.from_dlpack.
//
// Both directions share memory. Exporting hands out a reference to the tensor's storage that
// the consumer releases through the deleter; importing wraps the producer's memory in a Storage
// whose release calls the producer's deleter. Every export keeps the storage it exposes alive,
// whatever the tensor holds later (Note [Exports own their storage], buffer.cpp).
#include "pyext/dlpack.h"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <vector>

#include "pyext/args.h"
#include "pyext/python_data.h"
#include "pyext/tensor_object.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

constexpr const char* kCapsule = "dltensor";
constexpr const char* kUsedCapsule = "used_dltensor";
constexpr const char* kVersionedCapsule = "dltensor_versioned";
constexpr const char* kUsedVersionedCapsule = "used_dltensor_versioned";

dlpack::DataType to_dl(DType d) {
  uint8_t bits = static_cast<uint8_t>(itemsize(d) * 8);
  switch (d) {
    case DType::Bool: return {dlpack::kDLBool, 8, 1};
    case DType::UInt8: return {dlpack::kDLUInt, bits, 1};
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64: return {dlpack::kDLInt, bits, 1};
    case DType::BFloat16: return {dlpack::kDLBfloat, bits, 1};
    default: return {dlpack::kDLFloat, bits, 1};
  }
}

DType from_dl(dlpack::DataType t) {
  LOOM_CHECK(t.lanes == 1, Type, "from_dlpack: vector types (lanes=", t.lanes, ") are not supported");
  switch (t.code) {
    case dlpack::kDLBool:
      if (t.bits == 8) return DType::Bool;
      break;
    case dlpack::kDLUInt:
      if (t.bits == 8) return DType::UInt8;
      break;
    case dlpack::kDLInt:
      if (t.bits == 8) return DType::Int8;
      if (t.bits == 16) return DType::Int16;
      if (t.bits == 32) return DType::Int32;
      if (t.bits == 64) return DType::Int64;
      break;
    case dlpack::kDLFloat:
      if (t.bits == 16) return DType::Float16;
      if (t.bits == 32) return DType::Float32;
      if (t.bits == 64) return DType::Float64;
      break;
    case dlpack::kDLBfloat:
      if (t.bits == 16) return DType::BFloat16;
      break;
    default: break;
  }
  LOOM_FAIL(Type, "from_dlpack: unsupported DLPack dtype (code ", int(t.code), ", ", int(t.bits),
            " bits); loom supports bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32 and float64");
}

dlpack::Device to_dl(Device d) {
  return {d.is_cpu() ? dlpack::kDLCPU : dlpack::kDLCUDA, d.is_cpu() ? 0 : d.index};
}

// What an exported tensor keeps alive: the array (its storage) and the shape/stride arrays the
// DLTensor points to.
template <typename Managed>
struct Export {
  Managed managed{};
  Array array;
  Dims shape, strides;

  static void deleter(Managed* m) { delete static_cast<Export*>(m->manager_ctx); }
};

template <typename Managed>
Managed* export_array(const Array& a) {
  auto* e = new Export<Managed>();
  e->array = a;
  e->shape = Dims(a.sizes());
  e->strides = Dims(a.strides());
  dlpack::Tensor& t = e->managed.dl_tensor;
  // The first element, with byte_offset 0: PyTorch 1.x consumers ignore byte_offset, and
  // PyTorch, CuPy and numpy all export this way.
  t.data = a.data();
  t.byte_offset = 0;
  t.device = to_dl(a.device());
  t.ndim = static_cast<int32_t>(a.ndim());
  t.dtype = to_dl(a.dtype);
  t.shape = e->shape.data();
  t.strides = e->strides.data();
  e->managed.manager_ctx = e;
  e->managed.deleter = Export<Managed>::deleter;
  return &e->managed;
}

// A capsule nobody consumed still owns its tensor.
void unconsumed_capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kCapsule)) {
    auto* m = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsule));
    if (m->deleter) m->deleter(m);
  } else if (PyCapsule_IsValid(capsule, kVersionedCapsule)) {
    auto* m = static_cast<dlpack::ManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, kVersionedCapsule));
    if (m->deleter) m->deleter(m);
  }
}

// Storage release for imported memory: runs the producer's deleter.
template <typename Managed>
void release_imported(void* context) noexcept {
  auto* m = static_cast<Managed*>(context);
  if (m->deleter) m->deleter(m);
}

Device from_dl(dlpack::Device d) {
  if (d.device_type == dlpack::kDLCPU) return kCPU;
  if (d.device_type == dlpack::kDLCUDA) {
    LOOM_CHECK(d.device_id >= 0 && d.device_id <= INT16_MAX, Value, "from_dlpack: bad CUDA device id ", d.device_id);
    Device dev(DeviceType::CUDA, static_cast<int16_t>(d.device_id));
    cuda::require(dev);
    return dev;
  }
  LOOM_FAIL(Type, "from_dlpack: unsupported device type ", d.device_type, " (loom supports CPU and CUDA memory)");
}

template <typename Managed>
Array import_managed(Managed* m) {
  const dlpack::Tensor& t = m->dl_tensor;
  // Validate everything before taking ownership, so a rejected capsule stays with its producer.
  DType dtype = from_dl(t.dtype);
  Device device = from_dl(t.device);
  LOOM_CHECK(t.ndim >= 0, Value, "from_dlpack: negative ndim");
  size_t item = itemsize(dtype);
  LOOM_CHECK(t.byte_offset % item == 0, Value, "from_dlpack: byte_offset ", t.byte_offset,
             " is not a multiple of the element size");
  Layout layout;
  for (int32_t d = 0; d < t.ndim; ++d) layout.sizes.push_back(t.shape[d]);
  check_sizes(layout.sizes);
  if (t.strides) {
    for (int32_t d = 0; d < t.ndim; ++d) {
      LOOM_CHECK(t.strides[d] >= 0 || layout.sizes[d] <= 1, Value,
                 "from_dlpack: negative strides are not supported");
      layout.strides.push_back(std::max<int64_t>(t.strides[d], 0));
    }
  } else {
    layout.strides = contiguous_strides(layout.sizes);
  }
  char* base = static_cast<char*>(t.data) + t.byte_offset;
  size_t nbytes = static_cast<size_t>(layout.storage_end()) * item;
  Ref<Storage> storage = Storage::wrap(base, nbytes, device, release_imported<Managed>, m);
  return Array{std::move(storage), std::move(layout), dtype};
}

PyObject* dlpack_capsule_of(PyObject* obj, bool& versioned) {
  if (PyCapsule_CheckExact(obj)) {
    versioned = PyCapsule_IsValid(obj, kVersionedCapsule);
    return Py_NewRef(obj);
  }
  PyRef method = PyRef::steal(PyObject_GetAttrString(obj, "__dlpack__"));
  if (!method) {
    PyErr_Clear();
    LOOM_FAIL(Type, "from_dlpack: ", type_name(obj), " does not support the DLPack protocol (no __dlpack__)");
  }
  // Ask for a versioned capsule; producers that predate DLPack 1.0 reject the keyword.
  PyRef kwargs = PyRef::checked(Py_BuildValue("{s:(ii)}", "max_version", dlpack::kVersion.major,
                                              dlpack::kVersion.minor));
  PyRef empty = PyRef::checked(PyTuple_New(0));
  PyObject* capsule = PyObject_Call(method.get(), empty.get(), kwargs.get());
  if (!capsule && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();
    capsule = PyObject_CallNoArgs(method.get());
  }
  check(capsule);
  versioned = PyCapsule_IsValid(capsule, kVersionedCapsule);
  return capsule;
}

// __cuda_array_interface__ hands out a bare address, and its consumers (CuPy, Numba, PyTorch)
// keep the tensor OBJECT alive, not loom's storage: the object may hold other data by the time
// they read (`.data =`, Module.to()). So the storage is pinned to the object until the object
// is collected (a weak reference's callback drops the pins), whatever it holds by then. Each
// storage is pinned once per object. Only touched with the GIL held.
struct Pins {
  PyRef weakref;  // to the object; its callback erases this entry
  std::vector<Ref<Storage>> storages;
};

std::unordered_map<PyObject*, Pins>& pins_by_object() {
  static auto* pins = new std::unordered_map<PyObject*, Pins>();  // never destroyed (atexit order)
  return *pins;
}

PyObject* unpin(PyObject* object_address, PyObject* /*weakref*/) {
  void* object = PyLong_AsVoidPtr(object_address);
  // Moved out first: dropping the pins may free storage, which must not run inside erase().
  auto it = pins_by_object().find(static_cast<PyObject*>(object));
  if (it != pins_by_object().end()) {
    Pins dropped = std::move(it->second);
    pins_by_object().erase(it);
  }
  Py_RETURN_NONE;
}

PyMethodDef unpin_def = {"_loom_unpin_exported_storage", unpin, METH_O, nullptr};

void pin_storage_to(PyObject* object, const Ref<Storage>& storage) {
  auto& pins = pins_by_object();
  auto it = pins.find(object);
  if (it == pins.end()) {
    PyRef address = PyRef::checked(PyLong_FromVoidPtr(object));
    PyRef callback = PyRef::checked(PyCFunction_New(&unpin_def, address.get()));
    PyRef weakref = PyRef::checked(PyWeakref_NewRef(object, callback.get()));
    it = pins.emplace(object, Pins{std::move(weakref), {}}).first;
  }
  std::vector<Ref<Storage>>& held = it->second.storages;
  if (std::none_of(held.begin(), held.end(), [&](const Ref<Storage>& s) { return s.get() == storage.get(); }))
    held.push_back(storage);
}

}  // namespace

PyObject* tensor_dlpack(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("__dlpack__", {"stream", "max_version", "dl_device", "copy"}, 1);
  Args<4> a;
  parser.parse(args, nargs, kwnames, a.v);
  const Array& arr = array_of(self);
  if (a.has(2)) {
    dlpack::Device here = to_dl(arr.device());
    int type = 0, id = 0;
    if (!PyArg_ParseTuple(a[2], "ii:dl_device", &type, &id)) throw PythonError{};
    if (type != here.device_type || id != here.device_id) {
      PyErr_Format(PyExc_BufferError, "__dlpack__: cannot export a %s tensor to DLPack device (%d, %d) without a copy",
                   arr.device().str().c_str(), type, id);
      throw PythonError{};
    }
  }
  if (a.has(3) && check_truth(a[3])) {
    LOOM_FAIL(Value, "__dlpack__(copy=True) is not supported: export shares memory; clone() the tensor first");
  }
  // loom's GPU work is queued on its own stream: finish it, so the consumer may read the memory
  // on any stream (the simplest way to honour the `stream` the consumer names).
  if (arr.device().is_cuda()) cuda::synchronize(arr.device());
  // Versioned capsules go to consumers that say they understand DLPack 1.x.
  bool versioned = false;
  if (a.has(1)) {
    LOOM_CHECK(PyTuple_Check(a[1]) && PyTuple_GET_SIZE(a[1]) == 2, Type, "max_version must be a tuple (major, minor)");
    versioned = to_int64(PyTuple_GET_ITEM(a[1], 0), "max_version") >= 1;
  }
  if (versioned) {
    auto* m = export_array<dlpack::ManagedTensorVersioned>(arr);
    m->version = dlpack::kVersion;
    m->flags = 0;
    PyObject* capsule = PyCapsule_New(m, kVersionedCapsule, unconsumed_capsule_destructor);
    if (!capsule) m->deleter(m);
    return capsule;
  }
  auto* m = export_array<dlpack::ManagedTensor>(arr);
  PyObject* capsule = PyCapsule_New(m, kCapsule, unconsumed_capsule_destructor);
  if (!capsule) m->deleter(m);
  return capsule;
  LOOM_PY_END(nullptr)
}

PyObject* tensor_dlpack_device(PyObject* self, PyObject*) {
  dlpack::Device d = to_dl(array_of(self).device());
  return Py_BuildValue("(ii)", d.device_type, d.device_id);
}

SharedBuffer import_dlpack(PyObject* obj, bool allow_readonly) {
  bool versioned = false;
  PyRef capsule = PyRef::checked(dlpack_capsule_of(obj, versioned));
  const char* name = versioned ? kVersionedCapsule : kCapsule;
  void* ptr = PyCapsule_GetPointer(capsule.get(), name);
  if (!ptr) {
    PyErr_Clear();
    LOOM_FAIL(Value, "from_dlpack: expected an unconsumed DLPack capsule ('dltensor' or 'dltensor_versioned')");
  }
  SharedBuffer out{Array{}, false};
  if (versioned) {
    auto* m = static_cast<dlpack::ManagedTensorVersioned*>(ptr);
    LOOM_CHECK(m->version.major == 1, Type, "from_dlpack: unsupported DLPack major version ", m->version.major);
    out.readonly = (m->flags & dlpack::kFlagReadOnly) != 0;
    LOOM_CHECK(allow_readonly || !out.readonly, Type,
               "from_dlpack: the producer marked this tensor read-only, and loom tensors are writable; copy it "
               "first (for numpy: array.copy())");
    out.array = import_managed(m);
  } else {
    out.array = import_managed(static_cast<dlpack::ManagedTensor*>(ptr));
  }
  // loom owns the tensor now: renaming marks the capsule consumed, so its destructor (which checks
  // the name, as the protocol requires) leaves the tensor alone.
  check_status(PyCapsule_SetName(capsule.get(), versioned ? kUsedVersionedCapsule : kUsedCapsule));
  // The producer may still be writing it on a stream of its own, which loom's does not wait for.
  if (out.array.device().is_cuda()) cuda::device_synchronize(out.array.device());
  return out;
}

PyObject* tensor_cuda_array_interface(PyObject* self, void*) {
  LOOM_PY_BEGIN
  const Array& a = array_of(self);
  if (!a.device().is_cuda()) {
    PyErr_Format(PyExc_AttributeError, "can't get __cuda_array_interface__ on a %s tensor; use .cuda()",
                 a.device().str().c_str());
    return nullptr;
  }
  // numpy's typestr of each dtype; bfloat16 has none.
  static const char* const kTypestr[] = {"|b1", "|u1", "<i4", "<i8", "<f2", nullptr, "<f4", "<f8"};
  const char* typestr = kTypestr[static_cast<int>(a.dtype)];
  LOOM_CHECK(typestr, Type, "bfloat16 has no typestr in the CUDA array interface; convert with .float() first");
  cuda::synchronize(a.device());  // the data is complete, on any stream: no "stream" to wait for
  pin_storage_to(self, a.storage);
  PyRef shape = PyRef::checked(PyTuple_New(a.ndim()));
  PyRef strides = PyRef::checked(PyTuple_New(a.ndim()));
  for (int64_t d = 0; d < a.ndim(); ++d) {
    PyTuple_SET_ITEM(shape.get(), d, PyLong_FromLongLong(a.sizes()[d]));
    PyTuple_SET_ITEM(strides.get(), d, PyLong_FromLongLong(a.strides()[d] * static_cast<int64_t>(itemsize(a.dtype))));
  }
  // An empty tensor's pointer is 0 by the interface's rule.
  auto ptr = a.numel() == 0 ? 0 : reinterpret_cast<uintptr_t>(a.data());
  return Py_BuildValue("{s:O,s:s,s:(KO),s:i,s:O,s:O}", "shape", shape.get(), "typestr", typestr, "data",
                       static_cast<unsigned long long>(ptr), Py_False, "version", 3, "strides", strides.get(), "stream",
                       Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* from_dlpack(PyObject*, PyObject* obj) {
  LOOM_PY_BEGIN
  return wrap(import_dlpack(obj, false).array);
  LOOM_PY_END(nullptr)
}

}  // namespace loom::py
