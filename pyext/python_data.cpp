#include "pyext/python_data.h"

#include <memory>
#include <string>
#include <vector>

#include "pyext/tensor_object.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

// Lists and tuples, and any other sequence that is no string, buffer or array (a collections.deque:
// pytorch/examples' REINFORCE gathers its returns in one; a range): torch.tensor reads them all.
// Arrays of other libraries (__array__, __dlpack__) are read whole, by shared_array.
bool is_nested_sequence(PyObject* obj) {
  if (PyList_Check(obj) || PyTuple_Check(obj)) return true;
  if (!PySequence_Check(obj) || PyUnicode_Check(obj) || PyObject_CheckBuffer(obj) || is_tensor(obj)) return false;
  return !PyObject_HasAttrString(obj, "__array__") && !PyObject_HasAttrString(obj, "__dlpack__");
}

// Buffers in nested data (numpy arrays and scalars) are read as arrays. Tensors export buffers
// too, but torch.tensor takes tensors in nested data as numbers.
bool is_nested_buffer(PyObject* obj) { return PyObject_CheckBuffer(obj) && !is_tensor(obj); }

// One number of nested data, and the dtype it asks the tensor for.
struct Leaf {
  Scalar value;
  DType dtype;
};

// A Python int. One beyond int64 is kept as the nearest double: float and bool tensors take it,
// as in PyTorch, and integer tensors report the overflow when it is stored.
Scalar int_value(PyObject* obj) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
  if (v == -1 && PyErr_Occurred()) throw PythonError{};
  if (!overflow) return Scalar(static_cast<int64_t>(v));
  double d = PyLong_AsDouble(obj);
  if (d == -1.0 && PyErr_Occurred()) throw PythonError{};
  return Scalar(d);
}

// Reads a leaf as torch.tensor infers it: Python bools, ints and floats ask for bool, int64 and
// the default float dtype, 0-d tensors for their own. (numpy scalars are buffers, read before.)
Leaf read_leaf(PyObject* leaf) {
  if (PyBool_Check(leaf)) return {Scalar(leaf == Py_True), DType::Bool};
  if (PyFloat_CheckExact(leaf)) return {Scalar(PyFloat_AS_DOUBLE(leaf)), default_float_dtype()};
  if (PyLong_CheckExact(leaf)) return {int_value(leaf), DType::Int64};
  // Tensors, loom's or another library's, are numbers in nested data, so only 0-d ones fit.
  if (auto shared = shared_array(leaf)) {
    const Array& a = shared->array;
    LOOM_CHECK(a.ndim() == 0, Value, "only 0-d tensors can be elements of nested data, got a tensor of shape ",
               format_dims(a.sizes()));
    return {item(a), a.dtype};
  }
  if (is_index_like(leaf)) return {int_value(PyRef::checked(PyNumber_Index(leaf)).get()), DType::Int64};
  // Other numbers (float subclasses, Fractions...) convert through __float__.
  if (PyNumber_Check(leaf) && !PyUnicode_Check(leaf)) return {Scalar(to_double(leaf, "value")), default_float_dtype()};
  LOOM_FAIL(Type, "new(): invalid data type '", type_name(leaf), "'");
}

// The dims torch.tensor finds in a nested array: it walks first elements, so it stops at a size-0
// dim ([np.zeros((2, 0, 3))] has shape (1, 2, 0)).
Dims walked_dims(const Array& a) {
  Dims dims;
  for (int64_t s : a.sizes()) {
    dims.push_back(s);
    if (s == 0) break;
  }
  return dims;
}

// Walks the first element at every depth to find the shape the data claims to have.
Dims infer_shape(PyObject* data) {
  Dims shape;
  PyRef obj = PyRef::borrow(data);
  while (is_nested_sequence(obj.get())) {
    // PyTorch's ValueError; the walks below recurse once per dimension.
    LOOM_CHECK(shape.size() < kMaxDims, Value, "too many dimensions '", type_name(obj.get()), "' (a tensor has at most ",
               kMaxDims, ")");
    Py_ssize_t n = PySequence_Size(obj.get());
    check_status(static_cast<int>(n < 0 ? -1 : 0));
    shape.push_back(n);
    if (n == 0) return shape;
    obj = PyRef::checked(PySequence_GetItem(obj.get(), 0));
  }
  if (is_nested_buffer(obj.get()))
    for (int64_t s : walked_dims(array_from_buffer(obj.get()).array)) shape.push_back(s);
  return shape;
}

void promote_into(std::optional<DType>& acc, DType dtype) { acc = acc ? promote_types(*acc, dtype) : dtype; }

// A buffer nested in the data: torch.tensor reads numpy arrays as sequences and numpy scalars as
// numbers (loom reads array.array and memoryview the same way), each asking for its own dtype.
void collect_buffer(const Array& a, IntSpan shape, size_t depth, std::vector<Scalar>& values,
                    std::optional<DType>& dtype) {
  Dims dims = walked_dims(a);
  for (size_t i = 0; i <= dims.size(); ++i) {
    size_t d = depth + i;
    if (i == dims.size()) {
      LOOM_CHECK(d == shape.size(), Value, "expected sequence of length ", shape[d], " at dim ", d, " (got a number)");
    } else {
      LOOM_CHECK(d < shape.size(), Value, "expected a number at dim ", d, " but got a sequence of length ", dims[i]);
      LOOM_CHECK(dims[i] == shape[d], Value, "expected sequence of length ", shape[d], " at dim ", d, " (got ",
                 dims[i], ")");
    }
  }
  promote_into(dtype, a.dtype);
  Array dense = contiguous(a);
  const char* p = static_cast<const char*>(dense.data());
  size_t item = itemsize(a.dtype);
  for (int64_t i = 0; i < dense.numel(); ++i, p += item) values.push_back(Scalar::load(p, a.dtype));
}

// Checks that data has exactly `shape`, collecting its values in row-major order and promoting
// the dtypes they ask for, as PyTorch does (promote_types: [np.uint8(1), 300] is int64). Each
// level is read through a tuple snapshot, so a leaf's __float__ or __index__ that mutates a list
// cannot make the walk read past what it checked.
void collect_leaves(PyObject* obj, IntSpan shape, size_t depth, std::vector<Scalar>& values,
                    std::optional<DType>& dtype) {
  if (is_nested_sequence(obj)) {
    if (depth == shape.size()) {
      LOOM_FAIL(Value, "expected a number at dim ", depth, " but got a sequence of length ", PySequence_Size(obj));
    }
    PyRef items = PyRef::checked(PySequence_Tuple(obj));
    Py_ssize_t n = PyTuple_GET_SIZE(items.get());
    LOOM_CHECK(n == shape[depth], Value, "expected sequence of length ", shape[depth], " at dim ", depth, " (got ",
               n, ")");
    // An empty sequence asks for the default dtype, as in PyTorch: [np.array([], np.int64), []] is float.
    if (n == 0) promote_into(dtype, default_float_dtype());
    for (Py_ssize_t i = 0; i < n; ++i) collect_leaves(PyTuple_GET_ITEM(items.get(), i), shape, depth + 1, values, dtype);
    return;
  }
  // Buffers before numbers: np.float64 is a float, and np.bool_ has an __index__.
  if (is_nested_buffer(obj)) return collect_buffer(array_from_buffer(obj).array, shape, depth, values, dtype);
  if (depth < shape.size()) {
    LOOM_FAIL(Value, "expected sequence of length ", shape[depth], " at dim ", depth, " (got ", type_name(obj), ")");
  }
  Leaf leaf = read_leaf(obj);
  promote_into(dtype, leaf.dtype);
  values.push_back(leaf.value);
}

// A value stored in a T tensor as torch.tensor stores nested data (its store_scalar): integer
// types check the range (a negative int then wraps into uint8 as a cast does), floating types
// take the value through a double without a check (1e40 is inf in float32), bool takes truthiness.
template <typename T>
T stored(const Scalar& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v.to<bool>();
  } else if constexpr (!std::is_integral_v<T>) {
    return convert<T>(v.as_double());
  } else {
    v.check_fits(dtype_of<T>);
    return v.to<T>();
  }
}

// Holds an exported buffer; releasing it needs the GIL.
struct BufferOwner {
  Py_buffer view{};
  bool held = false;
  ~BufferOwner() {
    if (held) PyBuffer_Release(&view);
  }
};

void release_buffer(void* context) noexcept {
  PyGILState_STATE gil = PyGILState_Ensure();  // storage may be freed on a thread without the GIL
  delete static_cast<BufferOwner*>(context);
  PyGILState_Release(gil);
}

}  // namespace

SharedBuffer array_from_buffer(PyObject* obj) {
  auto owner = std::make_unique<BufferOwner>();
  // Writable if the exporter allows it, read-only otherwise: the caller decides what a read-only
  // buffer may be used for.
  bool readonly = false;
  if (PyObject_GetBuffer(obj, &owner->view, PyBUF_RECORDS) < 0) {
    PyErr_Clear();
    check_status(PyObject_GetBuffer(obj, &owner->view, PyBUF_RECORDS_RO));
    readonly = true;
  }
  owner->held = true;
  const Py_buffer& v = owner->view;
  std::string format = v.format ? v.format : "B";
  std::optional<DType> dtype = dtype_from_buffer_format(format);
  LOOM_CHECK(dtype && static_cast<size_t>(v.itemsize) == itemsize(*dtype), Type, "can't convert a buffer of format '",
             format, "': the supported element types are float64, float32, float16, int64, int32, int16, int8, uint8 and bool");
  int64_t item = static_cast<int64_t>(itemsize(*dtype));
  Layout layout;
  for (int d = 0; d < v.ndim; ++d) {
    int64_t stride = v.strides ? v.strides[d] : 0;
    LOOM_CHECK(stride >= 0, Value,
               "At least one stride in the given array is negative, and tensors with negative strides are not "
               "supported. (You can probably work around this by making a copy of your array with array.copy().)");
    LOOM_CHECK(stride % item == 0, Value, "array strides must be multiples of the element size (", item,
               " bytes), got ", stride);
    layout.sizes.push_back(v.shape[d]);
    layout.strides.push_back(stride / item);
  }
  // numpy exports a C-contiguous array with strides recomputed through its sizes, so an empty one
  // claims stride 0 left of its size-0 dim ((0, 12, 4) for shape (2, 0, 3)); copies made in the
  // buffer's memory format would keep that. The canonical contiguous strides are what a
  // reshaped numpy array really has.
  if (PyBuffer_IsContiguous(&v, 'C')) layout.strides = contiguous_strides(layout.sizes);
  size_t nbytes = static_cast<size_t>(layout.storage_end()) * static_cast<size_t>(item);
  Ref<Storage> storage = Storage::wrap(v.buf, nbytes, kCPU, release_buffer, owner.get());
  owner.release();  // the storage owns it now
  return {Array{std::move(storage), std::move(layout), *dtype}, readonly};
}

namespace {

SharedBuffer via_array_method(PyObject* data) {
  PyRef arr = PyRef::checked(PyObject_CallMethod(data, "__array__", nullptr));
  LOOM_CHECK(PyObject_CheckBuffer(arr.get()), Type, type_name(data), ".__array__() returned ", type_name(arr.get()),
             ", not an array");
  return array_from_buffer(arr.get());
}

}  // namespace

std::optional<SharedBuffer> shared_array(PyObject* data) {
  if (is_tensor(data)) return SharedBuffer{array_of(data), false};
  if (PyObject_CheckBuffer(data)) {
    if (!PySequence_Check(data)) return std::nullopt;  // a numpy scalar: a number
    return array_from_buffer(data);
  }
  if (is_nested_sequence(data) || PyLong_Check(data) || PyFloat_Check(data)) return std::nullopt;
  bool has_array = PyObject_HasAttrString(data, "__array__");
  if (PyObject_HasAttrString(data, "__dlpack__")) {
    try {
      return import_dlpack(data, true);
    } catch (const PythonError&) {
      if (!has_array) throw;
      // Should __array__ fail as well, the producer's DLPack error is the one to report.
      PyObject *type, *value, *traceback;
      PyErr_Fetch(&type, &value, &traceback);
      PyRef saved[] = {PyRef::steal(type), PyRef::steal(value), PyRef::steal(traceback)};
      try {
        return via_array_method(data);
      } catch (const PythonError&) {
        PyErr_Restore(saved[0].release(), saved[1].release(), saved[2].release());
        throw;
      }
    }
  }
  if (has_array) return via_array_method(data);
  return std::nullopt;
}

Array array_from_data(PyObject* data, std::optional<DType> dtype, Device device) {
  // Copies keep the source's memory format, as torch.tensor(x) is x.to(copy=True) for arrays.
  if (auto shared = shared_array(data)) {
    const Array& a = shared->array;
    return copy_to(a, dtype.value_or(a.dtype), device, MemoryFormat::Preserve);
  }
  Dims shape = infer_shape(data);
  std::vector<Scalar> values;
  std::optional<DType> inferred;
  collect_leaves(data, shape, 0, values, inferred);
  DType out_dtype = dtype ? *dtype : inferred.value_or(default_float_dtype());
  Array host = empty(shape, out_dtype, kCPU);
  visit_dtype(out_dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(host.data());
    for (const Scalar& v : values) *out++ = stored<T>(v);
  });
  return device.is_cpu() ? host : copy_to(host, out_dtype, device);
}

Scalar scalar_from_py(PyObject* value, const char* what) {
  if (PyBool_Check(value)) return Scalar(value == Py_True);
  if (is_tensor(value)) return item(array_of(value, SyncCause::Item));
  if (is_index_like(value)) return Scalar(to_int64(value, what));
  return Scalar(to_double(value, what));
}

PyObject* scalar_to_py(Scalar value) {
  switch (value.kind()) {
    case ScalarKind::Bool: return PyBool_FromLong(value.to<bool>());
    case ScalarKind::Int: return PyLong_FromLongLong(value.as_int());
    case ScalarKind::Float: return PyFloat_FromDouble(value.as_double());
  }
  __builtin_unreachable();
}

namespace {

PyObject* list_at(const char* base, const Array& a, size_t depth) {
  if (depth == static_cast<size_t>(a.ndim())) return scalar_to_py(Scalar::load(base, a.dtype));
  int64_t n = a.sizes()[depth];
  int64_t step = a.strides()[depth] * static_cast<int64_t>(itemsize(a.dtype));
  PyRef list = PyRef::checked(PyList_New(n));
  for (int64_t i = 0; i < n; ++i) PyList_SET_ITEM(list.get(), i, check(list_at(base + i * step, a, depth + 1)));
  return list.release();
}

}  // namespace

PyObject* array_to_list(const Array& a) {
  Array host = a.device().is_cpu() ? a : copy_to(a, a.dtype, kCPU);
  return list_at(static_cast<const char*>(host.data()), host, 0);
}

}  // namespace loom::py
