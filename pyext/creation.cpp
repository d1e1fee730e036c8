// Module functions that create tensors: loom.tensor, zeros, ones, full, arange, rand, ..., and
// the random seed and default dtype controls.
#include <cmath>

#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "lazy/ops_movement.h"
#include "pyext/op_table.h"
#include "pyext/objects.h"
#include "pyext/python_data.h"
#include "pyext/tensor_object.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

// A new array created on a placement's device becomes a tensor in its mode: an eager tensor, or
// a materialized lazy tensor (a leaf of the traces that read it).
Tensor made(Array a, Placement where) { return make_tensor(std::move(a), where.lazy); }

// The result of a creation function, a leaf that requires grad when its requires_grad= keyword
// was True (PyTorch's creation functions raise their own message for integer and bool dtypes).
PyObject* created(Tensor t, bool requires_grad) {
  if (requires_grad) {
    LOOM_CHECK(is_floating(t->dtype()), Runtime,
               "Only Tensors of floating point and complex dtype can require gradients");
    set_requires_grad(*t, true);
  }
  return wrap(std::move(t));
}

// The options every creation function ends with: (*, ScalarType? dtype=None, Device? device=None,
// bool? requires_grad=False), from parameter `first` on.
struct Options { std::optional<DType> dtype; Placement where; bool requires_grad; };

Options options_of(const Parsed& p, int first) {
  return {p.optional_dtype(first), p.placement(first + 1), p.boolean(first + 2)};
}

DType floating_dtype(std::optional<DType> requested, const char* fname) {
  DType d = requested.value_or(default_float_dtype());
  LOOM_CHECK(is_floating(d), Type, fname, "(): expected a floating-point dtype, got ", dtype_name(d));
  return d;
}

// PyTorch has no bool ranges: arange and linspace refuse the dtype, as its kernels do.
void check_not_bool(DType dtype, Placement where, const char* op) {
  LOOM_CHECK(dtype != DType::Bool, Runtime, "\"", op, where.device.is_cuda() ? "_cuda" : "_cpu",
             "\" not implemented for 'Bool'");
}

// The dtype of full(size, value) without an explicit dtype: as loom.tensor(value) would infer.
DType dtype_of_value(PyObject* value) {
  if (PyBool_Check(value)) return DType::Bool;
  if (is_tensor(value)) return impl_of(value).dtype();
  if (is_index_like(value)) return DType::Int64;
  return default_float_dtype();
}

// Sizes as creation functions take them: zeros(2, 3), zeros((2, 3)) or zeros(size=(2, 3)).
Dims sizes_of_param(const Parsed& p, int i) {
  Dims sizes = p.int_list(i);
  check_sizes(sizes);
  return sizes;
}
Dims sizes_of(const Parsed& p) { return sizes_of_param(p, 0); }

template <int64_t value>
Result filled(const Parsed& p) {
  Options o = options_of(p, 1);
  return created(ops::full(sizes_of(p), Scalar(value), o.dtype.value_or(default_float_dtype()), o.where),
                 o.requires_grad);
}

template <bool normal>  // rand / randn
Result random(const Parsed& p) {
  GeneratorScope generator = generator_scope(p.object(1));
  Options o = options_of(p, 2);
  DType dtype = floating_dtype(o.dtype, normal ? "randn" : "rand");
  return created(normal ? ops::randn(sizes_of(p), dtype, o.where) : ops::rand(sizes_of(p), dtype, o.where),
                 o.requires_grad);
}

Result arange(const Parsed& p) {
  // arange(end) or arange(start, end, step=1).
  PyObject* start = p.index == 0 ? nullptr : p.object(0);
  PyObject* end = p.object(p.index == 0 ? 0 : 1);
  PyObject* step = p.index == 0 ? nullptr : p.object(2);
  Options o = options_of(p, p.index == 0 ? 1 : 3);
  bool all_int = (!start || is_index_like(start)) && is_index_like(end) && (!step || is_index_like(step));
  double s0 = start ? to_double(start, "start") : 0.0;
  double s1 = to_double(end, "end");
  double st = step ? to_double(step, "step") : 1.0;
  LOOM_CHECK(st != 0.0, Runtime, "step must be nonzero");
  LOOM_CHECK(std::isfinite(s0) && std::isfinite(s1), Runtime, "unsupported range: ", s0, " -> ", s1);
  LOOM_CHECK((st > 0 && s1 >= s0) || (st < 0 && s1 <= s0), Runtime,
             "upper bound and larger bound inconsistent with step sign");
  DType dtype = o.dtype.value_or(all_int ? DType::Int64 : default_float_dtype());
  check_not_bool(dtype, o.where, "arange");
  if (all_int) {
    // Integer ranges are sized in integers: doubles lose exactness beyond 2^53.
    int64_t i0 = start ? to_int64(start, "start") : 0, i1 = to_int64(end, "end"), is = step ? to_int64(step, "step") : 1;
    int64_t n = is > 0 ? (i1 - i0 + is - 1) / is : (i0 - i1 - is - 1) / -is;
    return created(ops::arange(n, Scalar(i0), Scalar(is), dtype, o.where), o.requires_grad);
  }
  int64_t n = static_cast<int64_t>(std::ceil((s1 - s0) / st));
  return created(ops::arange(n, Scalar(s0), Scalar(st), dtype, o.where), o.requires_grad);
}

Result linspace(const Parsed& p) {
  int64_t steps = p.int64(2);
  LOOM_CHECK(steps >= 0, Runtime, "number of steps must be non-negative");
  Options o = options_of(p, 3);
  check_not_bool(o.dtype.value_or(default_float_dtype()), o.where, "linspace");
  Array out = empty(Dims{steps}, o.dtype.value_or(default_float_dtype()), o.where.device);
  linspace_(out, p.real(0), p.real(1));
  return created(made(std::move(out), o.where), o.requires_grad);
}

Result eye(const Parsed& p) {
  int64_t n = p.int64(0);
  int64_t m = p.index ? p.int64(1) : n;  // eye(n) or eye(n, m)
  LOOM_CHECK(n >= 0 && m >= 0, Runtime, "eye(): n and m must be non-negative, got n=", n, ", m=", m);
  Options o = options_of(p, 1 + p.index);
  Array out = empty(Dims{n, m}, o.dtype.value_or(default_float_dtype()), o.where.device);
  fill_(out, Scalar(int64_t{0}));
  // The diagonal is a view with stride m + 1.
  Layout diagonal{Dims{std::min(n, m)}, Dims{m + 1}, 0};
  fill_(out.view_as(diagonal), Scalar(int64_t{1}));
  return created(made(std::move(out), o.where), o.requires_grad);
}

Result randint(const Parsed& p) {
  // randint(high, size) or randint(low, high, size).
  int k = p.index;  // the parameters after `low`
  GeneratorScope generator = generator_scope(p.object(2 + k));
  Options o = options_of(p, 3 + k);
  return created(ops::randint(p.int_list(1 + k), k ? p.int64(0) : 0, p.int64(k), o.dtype.value_or(DType::Int64),
                              o.where),
                 o.requires_grad);
}

// *_like(input, <extra>, *, dtype=None, device=None, requires_grad=False): input's shape and dim
// order (PyTorch's preserve_format), and by default its dtype and device.
struct Like { Tensor input; DType dtype; Placement where; bool requires_grad; };

Like like_of(const Parsed& p, int first_option) {
  Options o = options_of(p, first_option);
  Tensor input = p.tensor(0);
  Placement where = p.has(first_option + 1) ? o.where : Placement{input->device(), input->is_lazy()};
  return {input, o.dtype.value_or(input->dtype()), where, o.requires_grad};
}

// Uninitialized memory shaped like the input: in its dim order when it is materialized.
Array empty_shaped_like(const Like& l) {
  if (!l.input->is_pending()) return empty_like(l.input->array(), l.dtype, l.where.device);
  return empty(l.input->sizes(), l.dtype, l.where.device);
}

PyObject* filled_like(const Like& l, Scalar value) {
  value.check_fits(l.dtype);
  if (l.where.lazy) return created(ops::full(l.input->sizes(), value, l.dtype, l.where), l.requires_grad);
  Array a = empty_shaped_like(l);
  fill_(a, value);
  return created(make_tensor(std::move(a)), l.requires_grad);
}

// rand_like / randn_like: lazy ones are random ops of the trace; eager ones fill new memory.
template <bool normal>
Result random_like(const Parsed& p) {
  Like l = like_of(p, 1);
  const char* fname = normal ? "randn_like" : "rand_like";
  l.dtype = floating_dtype(l.dtype, fname);
  if (l.where.lazy) {
    Tensor t = normal ? ops::randn(l.input->sizes(), l.dtype, l.where) : ops::rand(l.input->sizes(), l.dtype, l.where);
    return created(t, l.requires_grad);
  }
  Array a = empty_shaped_like(l);
  if (normal) normal_(a, 0.0, 1.0, default_generator(l.where.device));
  else uniform_(a, 0.0, 1.0, default_generator(l.where.device));
  return created(make_tensor(std::move(a)), l.requires_grad);
}

Result randint_like(const Parsed& p) {
  // randint_like(input, high) or randint_like(input, low, high).
  int k = p.index;
  Like l = like_of(p, 2 + k);
  int64_t lo = k ? p.int64(1) : 0, hi = p.int64(1 + k);
  if (l.where.lazy) return created(ops::randint(l.input->sizes(), lo, hi, l.dtype, l.where), l.requires_grad);
  Array a = empty_shaped_like(l);
  random_int_(a, lo, hi, default_generator(l.where.device));
  return created(make_tensor(std::move(a)), l.requires_grad);
}

// loom.as_tensor(data, *, dtype=None, device=None): shares memory with tensors, buffers and other
// libraries' tensors (shared_array) when dtype and device already match, else copies.
Result as_tensor(const Parsed& p) {
  PyObject* data = p.object(0);
  std::optional<DType> dtype = p.optional_dtype(1);
  if (is_tensor(data)) {
    // A loom tensor: itself when dtype and placement match, else converted (lazy or not).
    const TensorImpl& t = impl_of(data);
    Placement where = p.has(2) ? p.placement(2) : Placement{t.device(), t.is_lazy()};
    Tensor r = ops::to(tensor_of(data), dtype.value_or(t.dtype()), where.device, where.lazy);
    if (r.get() == &t) return Py_NewRef(data);
    return r;
  }
  std::optional<Placement> where = p.has(2) ? p.placement(2) : default_placement();
  bool lazy = where && where->lazy;
  if (auto shared = shared_array(data)) {
    const Array& arr = shared->array;
    bool same = (!dtype || *dtype == arr.dtype) && (!where || where->device == arr.device());
    // Read-only memory (bytes, read-only arrays) is copied: a writable alias would let tensor
    // writes corrupt objects Python assumes immutable. Lazy tensors own their values: copied too.
    if (same && !shared->readonly && !lazy) return wrap(arr);
    Array copy = copy_to(arr, dtype.value_or(arr.dtype), where ? where->device : arr.device(), MemoryFormat::Preserve);
    return made(std::move(copy), where.value_or(Placement{arr.device(), false}));
  }
  Placement at = where.value_or(Placement{kCPU, false});
  return made(array_from_data(data, dtype, at.device), at);
}

// Tensor.new_*(..., *, dtype=None, device=None, requires_grad=False): self's dtype and device
// unless given.
Options new_options(const Parsed& p, int first) {
  Options o = options_of(p, first);
  const TensorImpl& self = impl_of(p.self);
  if (!o.dtype) o.dtype = self.dtype();
  if (!p.has(first + 1)) o.where = {self.device(), self.is_lazy()};
  return o;
}

template <int64_t value>
Result new_filled(const Parsed& p) {
  Options o = new_options(p, 2);
  return created(ops::full(sizes_of_param(p, 1), Scalar(value), *o.dtype, o.where), o.requires_grad);
}

// tril_indices / triu_indices(row, col, offset=0, *, dtype=long, device=None).
template <bool lower>
Result tri_indices(const Parsed& p) {
  Options o = options_of(p, 3);
  return created(ops::tri_indices(p.int64(0), p.int64(1), p.int64(2), lower, o.dtype.value_or(DType::Int64), o.where),
                 o.requires_grad);
}

#define LOOM_OPTIONS "*, ScalarType? dtype=None, Device? device=None, bool? requires_grad=False"
#define LOOM_RANDOM_OPTIONS "*, PyObject* generator=None, ScalarType? dtype=None, Device? device=None, bool? requires_grad=False"

const Row kRows[] = {
    {{"tensor(PyObject* data, " LOOM_OPTIONS ")"}, kFunction, [](const Parsed& p) -> Result {
       Options o = options_of(p, 1);
       return created(made(array_from_data(p.object(0), o.dtype, o.where.device), o.where), o.requires_grad);
     },
     "A new tensor holding a copy of data."},
    {{"as_tensor(PyObject* data, *, ScalarType? dtype=None, Device? device=None)"}, kFunction, as_tensor,
     "Shares memory with data when dtype and device match, else copies."},
    {{"zeros(SymInt[] size, " LOOM_OPTIONS ")"}, kFunction, filled<0>},
    {{"ones(SymInt[] size, " LOOM_OPTIONS ")"}, kFunction, filled<1>},
    {{"empty(SymInt[] size, " LOOM_OPTIONS ")"}, kFunction, [](const Parsed& p) -> Result {
       Options o = options_of(p, 1);
       Dims sizes = sizes_of(p);
       return created(made(empty(sizes, o.dtype.value_or(default_float_dtype()), o.where.device), o.where),
                      o.requires_grad);
     },
     "Uninitialized memory."},
    {{"full(SymInt[] size, Scalar fill_value, " LOOM_OPTIONS ")"}, kFunction, [](const Parsed& p) -> Result {
       Options o = options_of(p, 2);
       Scalar value = scalar_from_py(p.object(1), "fill_value");
       DType dtype = o.dtype.value_or(dtype_of_value(p.object(1)));
       value.check_fits(dtype);
       return created(ops::full(p.int_list(0), value, dtype, o.where), o.requires_grad);
     }},
    {{"rand(int[] size, " LOOM_RANDOM_OPTIONS ")"}, kFunction, random<false>, "Uniform on [0, 1)."},
    {{"randn(int[] size, " LOOM_RANDOM_OPTIONS ")"}, kFunction, random<true>, "Standard normal."},
    {{"randint(int high, int[] size, " LOOM_RANDOM_OPTIONS ")",
      "randint(int low, int high, int[] size, " LOOM_RANDOM_OPTIONS ")"},
     kFunction, randint, "Uniform integers in [low, high) (int64 unless dtype says otherwise)."},
    {{"arange(Scalar end, " LOOM_OPTIONS ")", "arange(Scalar start, Scalar end, Scalar step=1, " LOOM_OPTIONS ")"},
     kFunction, arange},
    {{"linspace(Scalar start, Scalar end, int steps, " LOOM_OPTIONS ")"}, kFunction, linspace},
    {{"eye(int n, " LOOM_OPTIONS ")", "eye(int n, int m, " LOOM_OPTIONS ")"}, kFunction, eye},
    {{"zeros_like(Tensor input, " LOOM_OPTIONS ")"}, kFunction,
     LOOM_BODY(filled_like(like_of(p, 1), Scalar(int64_t{0})))},
    {{"ones_like(Tensor input, " LOOM_OPTIONS ")"}, kFunction,
     LOOM_BODY(filled_like(like_of(p, 1), Scalar(int64_t{1})))},
    {{"full_like(Tensor input, Scalar fill_value, " LOOM_OPTIONS ")"}, kFunction,
     LOOM_BODY(filled_like(like_of(p, 2), scalar_from_py(p.object(1), "fill_value")))},
    {{"empty_like(Tensor input, " LOOM_OPTIONS ")"}, kFunction, [](const Parsed& p) -> Result {
       Like l = like_of(p, 1);
       return created(made(empty_shaped_like(l), l.where), l.requires_grad);
     }},
    {{"rand_like(Tensor input, " LOOM_OPTIONS ")"}, kFunction, random_like<false>},
    {{"randn_like(Tensor input, " LOOM_OPTIONS ")"}, kFunction, random_like<true>},
    {{"randint_like(Tensor input, int high, " LOOM_OPTIONS ")",
      "randint_like(Tensor input, int low, int high, " LOOM_OPTIONS ")"},
     kFunction, randint_like},

    // ---- Tensor.new_*: self's dtype and device by default; the triangle indices ----
    {{"new_zeros(Tensor input, SymInt[] size, " LOOM_OPTIONS ")"}, kMethod, new_filled<0>},
    {{"new_ones(Tensor input, SymInt[] size, " LOOM_OPTIONS ")"}, kMethod, new_filled<1>},
    {{"new_empty(Tensor input, SymInt[] size, " LOOM_OPTIONS ")"}, kMethod, [](const Parsed& p) -> Result {
       Options o = new_options(p, 2);
       return created(made(empty(sizes_of_param(p, 1), *o.dtype, o.where.device), o.where), o.requires_grad);
     },
     "Uninitialized memory."},
    {{"new_full(Tensor input, SymInt[] size, Scalar fill_value, " LOOM_OPTIONS ")"}, kMethod,
     [](const Parsed& p) -> Result {
       Options o = new_options(p, 3);
       return created(ops::full(sizes_of_param(p, 1), p.scalar(2), *o.dtype, o.where), o.requires_grad);
     }},
    {{"new_tensor(Tensor input, PyObject* data, " LOOM_OPTIONS ")"}, kMethod, [](const Parsed& p) -> Result {
       Options o = new_options(p, 2);
       return created(made(array_from_data(p.object(1), o.dtype, o.where.device), o.where), o.requires_grad);
     },
     "A new tensor holding a copy of data, in this tensor's dtype and device unless given."},
    {{"tril_indices(int row, int col, int offset=0, " LOOM_OPTIONS ")"}, kFunction, tri_indices<true>},
    {{"triu_indices(int row, int col, int offset=0, " LOOM_OPTIONS ")"}, kFunction, tri_indices<false>},
};

#undef LOOM_OPTIONS
#undef LOOM_RANDOM_OPTIONS

// loom.from_numpy(array): a CPU tensor sharing the array's memory. Like PyTorch, a read-only
// array is shared anyway, with a warning: writing through the tensor is then undefined.
PyObject* f_from_numpy(PyObject*, PyObject* array) {
  LOOM_PY_BEGIN
  LOOM_CHECK(PyObject_CheckBuffer(array), Type, "from_numpy() expects an np.ndarray, got ", type_name(array));
  SharedBuffer shared = array_from_buffer(array);
  if (shared.readonly) {
    check_status(PyErr_WarnEx(PyExc_UserWarning,
                              "The given array is not writable, and loom does not support non-writable tensors: "
                              "writing to the tensor is undefined behaviour. Copy the array first (array.copy()) "
                              "to silence this warning.",
                              1));
  }
  return wrap(std::move(shared.array));
  LOOM_PY_END(nullptr)
}

PyObject* f_manual_seed(PyObject*, PyObject* seed) {
  LOOM_PY_BEGIN
  // Seeds are taken modulo 2^64, so negative seeds work as in PyTorch.
  PyRef index = PyRef::checked(PyNumber_Index(seed));
  unsigned long long s = PyLong_AsUnsignedLongLongMask(index.get());
  if (PyErr_Occurred()) throw PythonError{};
  manual_seed_all(s);
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_initial_seed(PyObject*, PyObject*) {
  return PyLong_FromUnsignedLongLong(default_generator(kCPU).seed());
}

PyObject* f_get_default_dtype(PyObject*, PyObject*) { return Py_NewRef(dtype_object(default_float_dtype())); }

PyObject* f_set_default_dtype(PyObject*, PyObject* d) {
  LOOM_PY_BEGIN
  set_default_float_dtype(dtype_from_py(d));
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_is_tensor(PyObject*, PyObject* obj) { return PyBool_FromLong(is_tensor(obj)); }

}  // namespace

void add_creation_rows(MethodDefs& defs) { add_rows(kRows, defs); }

PyObject* from_dlpack(PyObject*, PyObject* obj);  // dlpack.cpp

PyMethodDef creation_functions[] = {
    {"from_numpy", f_from_numpy, METH_O, "from_numpy(array): a CPU tensor sharing the numpy array's memory"},
    {"from_dlpack", from_dlpack, METH_O, "from_dlpack(obj): a tensor sharing the memory of a DLPack producer"},
    {"manual_seed", f_manual_seed, METH_O, "manual_seed(seed): reseed the generators of every device"},
    {"initial_seed", f_initial_seed, METH_NOARGS, "the seed of the CPU generator"},
    {"get_default_dtype", f_get_default_dtype, METH_NOARGS, "the dtype of Python floats and float creation ops"},
    {"set_default_dtype", f_set_default_dtype, METH_O, "set_default_dtype(d): d must be a floating dtype"},
    {"is_tensor", f_is_tensor, METH_O, "True if obj is a loom.Tensor"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace loom::py
