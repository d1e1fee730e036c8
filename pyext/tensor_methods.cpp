// The hand-written methods and attributes of loom.Tensor: metadata, views with PyTorch's varargs
// shapes, copies and conversions. Metadata never syncs a lazy tensor; strides, addresses and
// values do. The op library's methods are in op_bindings.cpp.
#include <algorithm>
#include <cstring>
#include <utility>

#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "lazy/ops_movement.h"
#include "pyext/op_table.h"
#include "pyext/objects.h"
#include "pyext/python_data.h"
#include "pyext/tensor_object.h"
#include "runtime/error.h"

namespace loom::py {

// op_rows_data.cpp: as_strided's view, which as_strided_ makes self.
Tensor as_strided(const Parsed& p);

namespace {

using FastArgs = PyObject* const*;

// ---- metadata (no sync: a pending tensor knows its shape and dtype) ----

PyObject* get_shape(PyObject* self, void*) {
  LOOM_PY_BEGIN
  return size_object(impl_of(self).sizes());
  LOOM_PY_END(nullptr)
}
PyObject* get_dtype(PyObject* self, void*) { return Py_NewRef(dtype_object(impl_of(self).dtype())); }
PyObject* get_device(PyObject* self, void*) {
  LOOM_PY_BEGIN
  return device_object(impl_of(self).device(), impl_of(self).is_lazy());
  LOOM_PY_END(nullptr)
}
PyObject* get_ndim(PyObject* self, void*) { return PyLong_FromLongLong(impl_of(self).ndim()); }
PyObject* get_is_cuda(PyObject* self, void*) { return PyBool_FromLong(impl_of(self).device().is_cuda()); }
// The backends and layouts loom has not (sparse, quantized, meta, XPU, MPS, ...): PyTorch's
// attributes asking for them are False, so programs that test for them run.
PyObject* get_false(PyObject*, void*) { Py_RETURN_FALSE; }

PyObject* get_is_cpu(PyObject* self, void*) {
  return PyBool_FromLong(impl_of(self).device().is_cpu() && !impl_of(self).is_lazy());
}
PyObject* get_is_lazy(PyObject* self, void*) { return PyBool_FromLong(impl_of(self).is_lazy()); }
PyObject* get_itemsize(PyObject* self, void*) { return PyLong_FromSize_t(itemsize(impl_of(self).dtype())); }
PyObject* get_nbytes(PyObject* self, void*) {
  const TensorImpl& t = impl_of(self);
  return PyLong_FromLongLong(t.numel() * static_cast<int64_t>(itemsize(t.dtype())));
}

// .T reverses all dims (PyTorch deprecates it beyond 2-d but still does this); .mT swaps the last two.
PyObject* get_T(PyObject* self, void*) {
  LOOM_PY_BEGIN
  Dims dims;
  for (int64_t d = impl_of(self).ndim() - 1; d >= 0; --d) dims.push_back(d);
  return wrap(ops::permute(tensor_of(self), dims));
  LOOM_PY_END(nullptr)
}
PyObject* get_mT(PyObject* self, void*) {
  LOOM_PY_BEGIN
  int64_t n = impl_of(self).ndim();
  LOOM_CHECK(n >= 2, Runtime, "tensor.mT is only supported on matrices or batches of matrices. Got ", n, "-D tensor.");
  return wrap(ops::transpose(tensor_of(self), -2, -1));
  LOOM_PY_END(nullptr)
}

// .mH and .H: the conjugate transposes, which for loom's real dtypes are .mT and .T (PyTorch
// allows .H on 0-d and 2-d tensors only).
PyObject* get_H(PyObject* self, void*) {
  LOOM_PY_BEGIN
  int64_t n = impl_of(self).ndim();
  LOOM_CHECK(n == 0 || n == 2, Runtime, "tensor.H is only supported on matrices (2-D tensors). Got ", n, "-D tensor.");
  return n == 0 ? Py_NewRef(self) : wrap(ops::transpose(tensor_of(self), 0, 1));
  LOOM_PY_END(nullptr)
}
PyObject* get_mH(PyObject* self, void*) {
  LOOM_PY_BEGIN
  int64_t n = impl_of(self).ndim();
  LOOM_CHECK(n >= 2, Runtime, "tensor.mH is only supported on matrices or batches of matrices. Got ", n, "-D tensor.");
  return wrap(ops::transpose(tensor_of(self), -2, -1));
  LOOM_PY_END(nullptr)
}

// A dim argument that must name an existing dim (size(d), stride(d)): a 0-d tensor has none.
int64_t dim_of(int64_t ndim, int64_t d) {
  LOOM_CHECK(ndim > 0, Index, "Dimension specified as ", d, " but tensor has no dimensions");
  return wrap_dim(d, ndim);
}

// Tensor.new(...): the legacy constructor in self's dtype and device.
PyObject* m_legacy_new(PyObject* self, PyObject* args, PyObject* kwargs) {
  return call_python_with("loom._legacy_tensor", "new_like", self, args, kwargs);
}

// Tensor.new_empty_strided(size, stride, ...) (loom/_creation.py).
PyObject* m_new_empty_strided(PyObject* self, PyObject* args, PyObject* kwargs) {
  return call_python_with("loom._creation", "new_empty_strided_method", self, args, kwargs);
}

// Methods written in Python (loom/_tensor_methods.py): the function `Name` there, called as
// Name(self, *args, **kwargs).
template <const char* Name>
PyObject* m_in_python(PyObject* self, PyObject* args, PyObject* kwargs) {
  return call_python_method("loom._tensor_methods", Name, self, args, kwargs);
}
constexpr char kFillDiagonal[] = "fill_diagonal_";
constexpr char kSumToSize[] = "sum_to_size";
constexpr char kMatrixPower[] = "matrix_power";
constexpr char kMvlgamma[] = "mvlgamma";
constexpr char kMvlgammaInplace[] = "mvlgamma_";
constexpr char kPolygamma[] = "polygamma";
constexpr char kPolygammaInplace[] = "polygamma_";
constexpr char kShareMemory[] = "share_memory_";
constexpr char kIsShared[] = "is_shared";
constexpr char kResize[] = "resize_";
constexpr char kResizeAs[] = "resize_as_";

PyObject* m_dim(PyObject* self, PyObject*) { return PyLong_FromLongLong(impl_of(self).ndim()); }
PyObject* m_numel(PyObject* self, PyObject*) { return PyLong_FromLongLong(impl_of(self).numel()); }
PyObject* m_element_size(PyObject* self, PyObject*) { return PyLong_FromSize_t(itemsize(impl_of(self).dtype())); }
// Strides, offsets and addresses describe memory: a pending tensor is materialized first.
PyObject* m_storage_offset(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  return PyLong_FromLongLong(array_of(self).layout.offset);
  LOOM_PY_END(nullptr)
}
PyObject* m_is_contiguous(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  const TensorImpl& t = impl_of(self);
  if (t.is_pending() && !t.view_info()) Py_RETURN_TRUE;  // produced dense
  return PyBool_FromLong(array_of(self).is_contiguous());
  LOOM_PY_END(nullptr)
}
PyObject* m_data_ptr(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  return PyLong_FromVoidPtr(array_of(self).data());
  LOOM_PY_END(nullptr)
}

PyObject* m_tolist(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  return array_to_list(array_of(self));
  LOOM_PY_END(nullptr)
}

PyObject* m_item(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  LOOM_CHECK(impl_of(self).numel() == 1, Value, "only one element tensors can be converted to Python scalars");
  return scalar_to_py(item(array_of(self, SyncCause::Item)));
  LOOM_PY_END(nullptr)
}

// f"{loss:.3f}" formats the value of a one-element tensor, as PyTorch does.
PyObject* m_format(PyObject* self, PyObject* spec) {
  LOOM_PY_BEGIN
  if (impl_of(self).ndim() == 0) {
    PyRef value = PyRef::checked(scalar_to_py(item(array_of(self, SyncCause::Item))));
    return PyObject_Format(value.get(), spec);
  }
  PyRef text = PyRef::checked(PyObject_Str(self));
  return PyObject_Format(text.get(), spec);
  LOOM_PY_END(nullptr)
}

// Python subclasses (nn.Parameter) are made from an existing tensor, sharing its value.
PyObject* m_make_subclass(PyObject*, PyObject* args) {
  LOOM_PY_BEGIN
  PyObject* cls = nullptr;
  PyObject* data = nullptr;
  if (!PyArg_ParseTuple(args, "OO:_make_subclass", &cls, &data)) return nullptr;
  LOOM_CHECK(PyType_Check(cls) && PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), &TensorType), Type,
             "_make_subclass: cls must be a subclass of loom.Tensor");
  return wrap(ops::detach(tensor_arg(data, "data")), reinterpret_cast<PyTypeObject*>(cls));
  LOOM_PY_END(nullptr)
}

// Tensor._set_data(value): Tensor.data = value (set_tensor_data, below).
PyObject* m_set_data(PyObject* self, PyObject* arg) {
  if (set_tensor_data(self, arg) < 0) return nullptr;
  Py_RETURN_NONE;
}


// ---- methods with arguments: rows of the op table (pyext/op_table.h) ----

// flatten(), contiguous() and to() return self (the input of the function form) when nothing
// changes, as PyTorch does.
PyObject* self_or(const Parsed& p, Tensor r) {
  if (r.get() == &impl_of(p.object(0))) return Py_NewRef(p.object(0));
  return wrap(std::move(r));
}

PyObject* converted(const Parsed& p, DType dtype, Placement where, bool copy = false) {
  return self_or(p, ops::to(p.tensor(0), dtype, where.device, where.lazy, copy));
}

void check_memory_format(const Parsed& p);

// float() / double() / ... take memory_format= as to() does (PyTorch's OpInfo samples pass
// torch.preserve_format / channels_last); loom keeps one layout, so it is only checked.
template <DType D>
Result as_dtype(const Parsed& p) {
  check_memory_format(p);
  return converted(p, D, placement_of(impl_of(p.self)));
}

// memory_format= of to / contiguous / clone: a loom.memory_format (loom/_memory_format.py),
// accepted and checked; loom keeps one (row-major) layout, so every format gives the same tensor.
void check_memory_format(const Parsed& p) {
  const Param* params = p.params;
  for (size_t i = 0; i < p.signature->params().size(); ++i) {
    if (params[i].name != "memory_format" || !p.has(static_cast<int>(i))) continue;
    PyObject* f = p.object(static_cast<int>(i));
    LOOM_CHECK(std::string_view(Py_TYPE(f)->tp_name) == "memory_format", Type, p.signature->name(),
               "(): argument 'memory_format' must be torch.memory_format, not ", Py_TYPE(f)->tp_name);
  }
}

Result to(const Parsed& p) {
  check_memory_format(p);
  const TensorImpl& t = impl_of(p.self);
  if (p.index == 0) {
    Placement where = p.has(1) ? p.placement(1) : placement_of(t);
    return converted(p, p.optional_dtype(2).value_or(t.dtype()), where, p.boolean(4));
  }
  if (p.index == 1) return converted(p, *p.optional_dtype(1), placement_of(t), p.boolean(3));
  const TensorImpl& other = impl_of(p.object(1));
  return converted(p, other.dtype(), placement_of(other), p.boolean(3));
}

PyObject* boolean(bool b) { return Py_NewRef(b ? Py_True : Py_False); }

// Tensor.get_device(): the GPU's index, -1 for host memory (a lazy:cpu tensor too).
int64_t device_index(const TensorImpl& t) { return t.device().is_cuda() ? t.device().index : -1; }

// The truth of a one-element tensor (a sync point in lazy mode, as bool(t)).
Result is_nonzero(const Parsed& p) {
  const TensorImpl& t = impl_of(p.object(0));
  LOOM_CHECK(t.numel() != 0, Runtime, "Boolean value of Tensor with no values is ambiguous");
  LOOM_CHECK(t.numel() == 1, Runtime, "Boolean value of Tensor with more than one value is ambiguous");
  int truth = PyObject_IsTrue(p.object(0));
  if (truth < 0) throw PythonError{};
  return boolean(truth);
}

// The in-place views (t_, transpose_, squeeze_, unsqueeze_, swapaxes_): self becomes the view of
// itself (the same storage, the new shape and strides). Autograd would have to record a view
// of a view in place: for a tensor that requires grad loom asks for the out-of-place form.
Result become_view(const Parsed& p, const char* name, Tensor (*view)(const Parsed&)) {
  PyObject* self = p.object(0);
  LOOM_CHECK(!requires_grad(impl_of(self)), Runtime, name, "() on a tensor that requires grad is not supported by loom: "
             "use the out-of-place ", std::string(name, std::strlen(name) - 1), "()");
  PyRef value = PyRef::checked(wrap(view(p)));
  PyRef done = PyRef::checked(PyObject_CallMethod(self, "_set_data", "O", value.get()));
  return Py_NewRef(self);
}
Tensor transposed(const Parsed& p) { return ops::transpose(p.tensor(0), p.int64(1), p.int64(2)); }
Tensor strided(const Parsed& p) { return as_strided(p); }
Tensor t_view(const Parsed& p) { return ops::t(p.tensor(0)); }
Tensor squeezed(const Parsed& p) { return p.index ? ops::squeeze(p.tensor(0), p.dims(1)) : ops::squeeze(p.tensor(0)); }
Tensor unsqueezed(const Parsed& p) { return ops::unsqueeze(p.tensor(0), p.int64(1)); }

// detach_: self leaves the graph (a leaf that does not require grad). A view cannot: its base
// still carries the history, as PyTorch says.
Result detach_(const Parsed& p) {
  TensorImpl& t = impl_of(p.object(0));
  LOOM_CHECK(!(t.is_view() && requires_grad(t)), Runtime, "Can't detach views in-place. Use detach() instead.");
  if (t.autograd_meta()) {
    AutogradMeta& m = autograd(t);
    m.grad_fn.reset();
    m.requires_grad = false;
    m.retains_grad = false;
  }
  return Py_NewRef(p.object(0));
}

// tile: repeat with the dims padded with leading 1s to the tensor's rank.
Result tile(const Parsed& p) {
  Tensor x = p.tensor(0);
  Dims reps = p.int_list(1);
  Dims padded;
  for (int64_t i = static_cast<int64_t>(reps.size()); i < x->ndim(); ++i) padded.push_back(1);
  for (int64_t r : reps) padded.push_back(r);
  return ops::repeat(x, padded);
}

const Row kRows[] = {
    // ---- queries (no sync, except is_nonzero) ----
    {{"numel(Tensor input) -> int"}, kBoth, LOOM_BODY(check(PyLong_FromLongLong(impl_of(p.object(0)).numel()))),
     "The number of elements."},
    {{"is_floating_point(Tensor input) -> bool"}, kBoth, LOOM_BODY(boolean(is_floating(impl_of(p.object(0)).dtype())))},
    {{"is_complex(Tensor input) -> bool"}, kBoth, LOOM_BODY(boolean(false)), "False: loom has no complex dtypes."},
    {{"is_conj(Tensor input) -> bool"}, kBoth, LOOM_BODY(boolean(false)), "False: loom has no complex dtypes."},
    {{"is_neg(Tensor input) -> bool"}, kBoth, LOOM_BODY(boolean(false)), "False: loom has no negative views."},
    {{"is_signed(Tensor input) -> bool"}, kBoth, LOOM_BODY(boolean([](DType d) {
       return d != DType::Bool && d != DType::UInt8;
     }(impl_of(p.object(0)).dtype())))},
    {{"is_nonzero(Tensor input) -> bool"}, kBoth, is_nonzero, "A sync point on the lazy device."},
    {{"is_same_size(Tensor input, Tensor other) -> bool"}, kBoth,
     LOOM_BODY(boolean(Dims(impl_of(p.object(0)).sizes()) == Dims(impl_of(p.object(1)).sizes())))},
    {{"is_inference(Tensor input) -> bool"}, kBoth, LOOM_BODY(boolean(false)),
     "False: loom's inference_mode makes ordinary tensors."},
    {{"get_device(Tensor input) -> int"}, kBoth, LOOM_BODY(check(PyLong_FromLongLong(device_index(impl_of(p.object(0)))))),
     "The GPU's index; -1 for host memory."},
    // Real dtypes only: the conjugates are the tensor itself.
    {{"conj(Tensor input)"}, kBoth, LOOM_BODY(Py_NewRef(p.object(0))), "The tensor itself (loom's dtypes are real)."},
    {{"resolve_conj(Tensor input)"}, kBoth, LOOM_BODY(Py_NewRef(p.object(0))), "The tensor itself."},
    {{"resolve_neg(Tensor input)"}, kBoth, LOOM_BODY(Py_NewRef(p.object(0))), "The tensor itself."},
    {{"adjoint(Tensor input)"}, kBoth, LOOM_BODY(ops::transpose(p.tensor(0), -2, -1)),
     "The last two dimensions swapped (a view; loom's dtypes are real)."},

    {{"size(Tensor input)", "size(Tensor input, int dim)"}, kMethod, [](const Parsed& p) -> Result {
       const TensorImpl& t = impl_of(p.self);
       if (p.index == 0) return size_object(t.sizes());
       return check(PyLong_FromLongLong(t.sizes()[dim_of(t.ndim(), p.int64(1))]));
     },
     "The shape, or the size of one dimension."},
    // Strides, offsets and addresses describe memory: a pending tensor is materialized first.
    {{"stride(Tensor input)", "stride(Tensor input, int dim)"}, kMethod, [](const Parsed& p) -> Result {
       const Array& arr = array_of(p.self);
       if (p.index == 1) return check(PyLong_FromLongLong(arr.strides()[dim_of(arr.ndim(), p.int64(1))]));
       PyRef t = PyRef::checked(PyTuple_New(arr.ndim()));
       for (int64_t i = 0; i < arr.ndim(); ++i)
         PyTuple_SET_ITEM(t.get(), i, check(PyLong_FromLongLong(arr.strides()[i])));
       return t.release();
     },
     "Strides in elements."},
    {{"view(Tensor input, SymInt[] size)", "view(Tensor input, ScalarType dtype)"}, kMethod,
     LOOM_BODY(p.index ? ops::view_dtype(p.tensor(0), *p.optional_dtype(1)) : ops::view(p.tensor(0), p.int_list(1))),
     "The same storage seen with another shape (no copy), or its bytes as another dtype (of a pending lazy "
     "tensor: a copy of them)."},
    {{"reshape(Tensor input, SymInt[] shape)"}, kMethod | kFunction, LOOM_BODY(ops::reshape(p.tensor(0), p.int_list(1))),
     "A view when possible, else a copy."},
    {{"view_as(Tensor input, Tensor other)"}, kMethod, LOOM_BODY(ops::view(p.tensor(0), Dims(p.tensor(1)->sizes())))},
    {{"reshape_as(Tensor input, Tensor other)"}, kMethod,
     LOOM_BODY(ops::reshape(p.tensor(0), Dims(p.tensor(1)->sizes())))},
    {{"expand(Tensor input, SymInt[] size)"}, kMethod, LOOM_BODY(ops::expand(p.tensor(0), p.int_list(1))),
     "Broadcasts size-1 dimensions (a view, stride 0)."},
    {{"expand_as(Tensor input, Tensor other)"}, kMethod,
     LOOM_BODY(ops::expand(p.tensor(0), Dims(p.tensor(1)->sizes())))},
    {{"broadcast_to(Tensor input, int[] size)"}, kMethod | kFunction, LOOM_BODY(ops::expand(p.tensor(0), p.int_list(1)))},
    {{"permute(Tensor input, int[] dims)"}, kMethod | kFunction,
     LOOM_BODY(ops::permute(p.tensor(0), p.int_list(1))), "Reorders dimensions (a view)."},
    {{"transpose(Tensor input, int dim0, int dim1)"}, kMethod | kFunction,
     LOOM_BODY(ops::transpose(p.tensor(0), p.int64(1), p.int64(2))),
     "Swaps two dimensions (a view)."},
    {{"squeeze(Tensor input)", "squeeze(Tensor input, int[1] dim)"}, kMethod | kFunction,
     LOOM_BODY(p.index ? ops::squeeze(p.tensor(0), p.dims(1)) : ops::squeeze(p.tensor(0))),
     "Drops size-1 dimensions (a view)."},
    {{"unsqueeze(Tensor input, int dim)"}, kMethod | kFunction, LOOM_BODY(ops::unsqueeze(p.tensor(0), p.int64(1))),
     "Inserts a size-1 dimension (a view)."},
    {{"flatten(Tensor input, int start_dim=0, int end_dim=-1)"}, kMethod | kFunction,
     LOOM_BODY(self_or(p, ops::flatten(p.tensor(0), p.int64(1), p.int64(2))))},
    {{"unflatten(Tensor input, int dim, int[] sizes)"}, kMethod | kFunction,
     LOOM_BODY(ops::unflatten(p.tensor(0), p.int64(1), p.int_list(2)))},
    {{"narrow(Tensor input, int dim, int start, int length)",
      "narrow(Tensor input, int dim, Tensor start, int length)"},
     kMethod | kFunction, [](const Parsed& p) -> Result {
       // start may be a 0-d integer tensor (PyTorch's second overload): its value (a sync on lazy)
       int64_t start = 0;
       if (p.index == 1) {
         const TensorImpl& s = impl_of(p.object(2));
         LOOM_CHECK(s.ndim() == 0 && !is_floating(s.dtype()) && s.dtype() != DType::Bool, Runtime,
                    "start must be an 0-dim integral Tensor.");
         Py_ssize_t v = PyNumber_AsSsize_t(p.object(2), PyExc_IndexError);
         if (v == -1 && PyErr_Occurred()) throw PythonError{};
         start = v;
       } else {
         start = p.int64(2);
       }
       return wrap(ops::narrow(p.tensor(0), p.int64(1), start, p.int64(3)));
     }},
    {{"select(Tensor input, int dim, int index)"}, kMethod | kFunction, LOOM_BODY(ops::select(p.tensor(0), p.int64(1), p.int64(2))),
     "A view without that dimension."},
    {{"repeat(Tensor input, SymInt[] repeats)"}, kMethod,
     LOOM_BODY(ops::repeat(p.tensor(0), p.int_list(1))), "Tiles the tensor (a copy)."},
    {{"t_(Tensor input)"}, kMethod, LOOM_BODY(become_view(p, "t_", t_view))},
    {{"as_strided_(Tensor input, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None)"},
     kMethod | kFunction, LOOM_BODY(become_view(p, "as_strided_", strided))},
    {{"transpose_(Tensor input, int dim0, int dim1)"}, kMethod, LOOM_BODY(become_view(p, "transpose_", transposed))},
    {{"swapaxes_(Tensor input, int axis0, int axis1)"}, kMethod, LOOM_BODY(become_view(p, "swapaxes_", transposed))},
    {{"swapdims_(Tensor input, int dim0, int dim1)"}, kMethod, LOOM_BODY(become_view(p, "swapdims_", transposed))},
    {{"squeeze_(Tensor input)", "squeeze_(Tensor input, int[1] dim)"}, kMethod,
     LOOM_BODY(become_view(p, "squeeze_", squeezed))},
    {{"unsqueeze_(Tensor input, int dim)"}, kMethod, LOOM_BODY(become_view(p, "unsqueeze_", unsqueezed))},
    {{"detach_(Tensor input)"}, kBoth, detach_, "Makes this tensor a leaf that does not require grad."},
    {{"tile(Tensor input, int[] dims)"}, kBoth, tile, "repeat() with dims padded by leading 1s to the tensor's rank."},
    {{"ravel(Tensor input)"}, kBoth, LOOM_BODY(ops::reshape(p.tensor(0), Dims{-1})),
     "The elements in one dimension: a view when possible, else a copy."},
    {{"to(Tensor input, Device? device=None, ScalarType? dtype=None, bool non_blocking=False, bool copy=False, *, "
      "PyObject*? memory_format=None)",
      "to(Tensor input, ScalarType dtype, bool non_blocking=False, bool copy=False, *, PyObject*? memory_format=None)",
      "to(Tensor input, Tensor other, bool non_blocking=False, bool copy=False, *, PyObject*? memory_format=None)"},
     kMethod, to, "Returns self when nothing changes, unless copy=True."},
    {{"cuda(Tensor input, Device? device=None, bool non_blocking=False)"}, kMethod, [](const Parsed& p) -> Result {
       Device device = p.has(1) ? device_from_py(p.object(1)) : Device(DeviceType::CUDA, 0);
       LOOM_CHECK(device.is_cuda(), Runtime, "Invalid device, must be cuda device");
       return converted(p, impl_of(p.self).dtype(), {device, false}, false);
     },
     "This tensor in GPU memory."},
    {{"t(Tensor input)"}, kMethod | kFunction, LOOM_BODY(ops::t(p.tensor(0))), "The transpose of a tensor of at most 2 dims."},
    {{"contiguous(Tensor input, *, PyObject*? memory_format=None)"}, kMethod,
     LOOM_BODY((check_memory_format(p), self_or(p, ops::contiguous(p.tensor(0))))),
     "Self if contiguous, else a contiguous copy."},
    {{"clone(Tensor input, *, PyObject*? memory_format=None)"}, kMethod | kFunction,
     LOOM_BODY((check_memory_format(p), ops::clone(p.tensor(0)))),
     "A copy with its own storage, in this tensor's dim order."},
    {{"detach(Tensor input)"}, kMethod | kFunction, LOOM_BODY(ops::detach(p.tensor(0))),
     "A new tensor sharing this one's value (and storage), without autograd history."},
    {{"cpu(Tensor input)"}, kMethod, LOOM_BODY(converted(p, impl_of(p.self).dtype(), {kCPU, false})),
     "This tensor in host memory."},
    {{"float(Tensor input, *, PyObject*? memory_format=None)"}, kMethod, as_dtype<DType::Float32>, "to(loom.float32)"},
    {{"double(Tensor input, *, PyObject*? memory_format=None)"}, kMethod, as_dtype<DType::Float64>, "to(loom.float64)"},
    {{"half(Tensor input, *, PyObject*? memory_format=None)"}, kMethod, as_dtype<DType::Float16>, "to(loom.float16)"},
    {{"bfloat16(Tensor input, *, PyObject*? memory_format=None)"}, kMethod, as_dtype<DType::BFloat16>, "to(loom.bfloat16)"},
    {{"long(Tensor input, *, PyObject*? memory_format=None)"}, kMethod, as_dtype<DType::Int64>, "to(loom.int64)"},
    {{"int(Tensor input, *, PyObject*? memory_format=None)"}, kMethod, as_dtype<DType::Int32>, "to(loom.int32)"},
    {{"short(Tensor input, *, PyObject*? memory_format=None)"}, kMethod, as_dtype<DType::Int16>, "to(loom.int16)"},
    {{"char(Tensor input, *, PyObject*? memory_format=None)"}, kMethod, as_dtype<DType::Int8>, "to(loom.int8)"},
    {{"byte(Tensor input, *, PyObject*? memory_format=None)"}, kMethod, as_dtype<DType::UInt8>, "to(loom.uint8)"},
    {{"bool(Tensor input, *, PyObject*? memory_format=None)"}, kMethod, as_dtype<DType::Bool>, "to(loom.bool)"},
    // PyTorch's type_as is self.to(other.options()): other's dtype and device (a CPU tensor
    // type_as a lazy one becomes lazy, as it becomes CUDA there).
    {{"type_as(Tensor input, Tensor other)"}, kMethod,
     LOOM_BODY(converted(p, p.tensor(1)->dtype(), placement_of(p.tensor(1)), false))},
};

}  // namespace

// Tensor.data = value, and Tensor._set_data(value): from now on this Python tensor holds `value`'s
// data (shared, as detach() shares it; dtype, device and mode may change), keeping its autograd
// state (requires_grad, grad_fn, grad). Module.to() moves Parameters with it, so the Parameter
// objects an optimizer holds stay the module's. Views taken and values saved before keep the old
// data.
int set_tensor_data(PyObject* self, PyObject* value) {
  LOOM_PY_BEGIN
  LOOM_CHECK(value != nullptr, Type, "cannot delete the data of a Tensor");
  LOOM_CHECK(is_tensor(value), Type, "Variable data has to be a tensor, but got ", type_name(value));
  Tensor fresh = ops::detach(tensor_arg(value, "data"));
  auto* obj = reinterpret_cast<PyTensor*>(self);
  if (const AutogradMeta* old = obj->impl->autograd_meta()) {
    if (old->requires_grad && !old->grad_fn) set_requires_grad(*fresh, true);  // raises for integer dtypes
    AutogradMeta& m = autograd(*fresh);
    m.requires_grad = old->requires_grad;
    m.retains_grad = old->retains_grad;
    m.grad_fn = old->grad_fn;
    m.grad = old->grad;
  }
  Tensor::adopt(std::exchange(obj->impl, fresh.leak())).reset();
  return 0;
  LOOM_PY_END(-1)
}

void add_tensor_rows(MethodDefs& defs) { add_rows(kRows, defs); }

// Defined in buffer.cpp and dlpack.cpp.
PyObject* tensor_numpy(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* tensor_array(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* tensor_dlpack(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* tensor_dlpack_device(PyObject* self, PyObject*);
PyObject* tensor_cuda_array_interface(PyObject* self, void*);

PyMethodDef tensor_methods[] = {
    {"new", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(m_legacy_new)), METH_VARARGS | METH_KEYWORDS,
     "new(*sizes), new(data), new(other): the legacy constructor, in this tensor's dtype and device"},
    {"new_empty_strided", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(m_new_empty_strided)),
     METH_VARARGS | METH_KEYWORDS, "new_empty_strided(size, stride, *, dtype=None, device=None, requires_grad=False)"},
#define LOOM_IN_PYTHON(name) reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(m_in_python<name>)), \
                            METH_VARARGS | METH_KEYWORDS
    {"fill_diagonal_", LOOM_IN_PYTHON(kFillDiagonal), "fill_diagonal_(fill_value, wrap=False): the main diagonal set"},
    {"sum_to_size", LOOM_IN_PYTHON(kSumToSize), "sum_to_size(*size): summed down to a size it broadcasts to"},
    {"matrix_power", LOOM_IN_PYTHON(kMatrixPower), "matrix_power(n): the n-th power of a square matrix, n >= 0"},
    {"mvlgamma", LOOM_IN_PYTHON(kMvlgamma), "mvlgamma(p): the log multivariate gamma function"},
    {"mvlgamma_", LOOM_IN_PYTHON(kMvlgammaInplace), "mvlgamma_(p): mvlgamma in place"},
    {"polygamma", LOOM_IN_PYTHON(kPolygamma), "polygamma(n): the n-th derivative of digamma"},
    {"polygamma_", LOOM_IN_PYTHON(kPolygammaInplace), "polygamma_(n): polygamma in place"},
    {"share_memory_", LOOM_IN_PYTHON(kShareMemory), "share_memory_(): the elements moved into memory shared between "
     "processes (loom.multiprocessing)"},
    {"is_shared", LOOM_IN_PYTHON(kIsShared), "is_shared(): whether the elements are in memory shared between processes"},
    {"resize_", LOOM_IN_PYTHON(kResize), "resize_(*sizes): self given these sizes in place, its leading elements "
     "kept (out= resizes its tensor so)"},
    {"resize_as_", LOOM_IN_PYTHON(kResizeAs), "resize_as_(other): resize_(other.shape)"},
#undef LOOM_IN_PYTHON
    {"dim", m_dim, METH_NOARGS, "the number of dimensions"},
    {"ndimension", m_dim, METH_NOARGS, "the number of dimensions"},
    {"nelement", m_numel, METH_NOARGS, "the number of elements"},
    {"storage_offset", m_storage_offset, METH_NOARGS, "offset of the first element in the storage, in elements"},
    {"is_contiguous", m_is_contiguous, METH_NOARGS, "True if the elements are dense in row-major order"},
    {"element_size", m_element_size, METH_NOARGS, "bytes per element"},
    {"data_ptr", m_data_ptr, METH_NOARGS, "address of the first element"},
    {"tolist", m_tolist, METH_NOARGS, "the values as nested Python lists"},
    {"item", m_item, METH_NOARGS, "the value of a one-element tensor as a Python number"},
    {"__format__", m_format, METH_O, nullptr},
    {"numpy", LOOM_FASTCALL(tensor_numpy), "numpy(force=False): a numpy array sharing this tensor's memory (CPU)"},
    {"__array__", LOOM_FASTCALL(tensor_array), nullptr},
    {"__dlpack__", LOOM_FASTCALL(tensor_dlpack), "export as a DLPack capsule (zero-copy)"},
    {"__dlpack_device__", tensor_dlpack_device, METH_NOARGS, "(device_type, device_id) for DLPack"},
    {"_make_subclass", m_make_subclass, METH_VARARGS | METH_STATIC, nullptr},
    {"_set_data", m_set_data, METH_O, "_set_data(value): hold value's data, keeping this tensor's autograd state"},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef tensor_getset[] = {
    {"shape", get_shape, nullptr, "the sizes, as a loom.Size", nullptr},
    {"dtype", get_dtype, nullptr, "the element type", nullptr},
    {"device", get_device, nullptr, "where the memory lives", nullptr},
    {"ndim", get_ndim, nullptr, "the number of dimensions", nullptr},
    {"T", get_T, nullptr, "all dimensions reversed (a view)", nullptr},
    {"mT", get_mT, nullptr, "the last two dimensions swapped (a view)", nullptr},
    {"mH", get_mH, nullptr, "the conjugate transpose of the last two dimensions: .mT (loom's dtypes are real)", nullptr},
    {"H", get_H, nullptr, "the conjugate transpose of a matrix: .T (loom's dtypes are real)", nullptr},
    {"is_cuda", get_is_cuda, nullptr, "True when the tensor is in GPU memory", nullptr},
    {"is_cpu", get_is_cpu, nullptr, "True when the tensor is in host memory", nullptr},
    {"is_sparse", get_false, nullptr, "False: loom tensors are strided", nullptr},
    {"is_sparse_csr", get_false, nullptr, "False: loom tensors are strided", nullptr},
    {"is_mkldnn", get_false, nullptr, "False: loom tensors are strided", nullptr},
    {"is_nested", get_false, nullptr, "False: loom has no nested tensors", nullptr},
    {"is_quantized", get_false, nullptr, "False: loom has no quantized tensors", nullptr},
    {"is_meta", get_false, nullptr, "False: loom has no meta device", nullptr},
    {"is_xpu", get_false, nullptr, "False: loom has no XPU backend", nullptr},
    {"is_mps", get_false, nullptr, "False: loom has no MPS backend", nullptr},
    {"is_ipu", get_false, nullptr, "False: loom has no IPU backend", nullptr},
    {"is_hpu", get_false, nullptr, "False: loom has no HPU backend", nullptr},
    {"is_vulkan", get_false, nullptr, "False: loom has no Vulkan backend", nullptr},
    {"is_ort", get_false, nullptr, "False: loom has no ORT backend", nullptr},
    {"itemsize", get_itemsize, nullptr, "bytes per element", nullptr},
    {"nbytes", get_nbytes, nullptr, "bytes of the elements (numel * itemsize)", nullptr},
    {"is_lazy", get_is_lazy, nullptr, "True for lazy tensors (device 'lazy:...'); not in PyTorch", nullptr},
    {"__cuda_array_interface__", tensor_cuda_array_interface, nullptr,
     "the CUDA array interface (version 3) of a GPU tensor, shared without a copy (CuPy, Numba, PyTorch)", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

}  // namespace loom::py
