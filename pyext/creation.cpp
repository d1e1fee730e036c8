// Module functions that create tensors: loom.tensor, zeros, ones, full, arange, rand, ..., and
// the random seed and default dtype controls.
#include <cmath>

#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "pyext/args.h"
#include "pyext/op_args.h"
#include "pyext/objects.h"
#include "pyext/python_data.h"
#include "pyext/tensor_object.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

using FastArgs = PyObject* const*;


// A new array created on a placement's device becomes a tensor in its mode: an eager tensor, or
// a materialized lazy tensor (a leaf of the traces that read it).
Tensor made(Array a, Placement where) { return make_tensor(std::move(a), where.lazy); }

// The result of a creation function, a leaf that requires grad when its requires_grad= keyword
// was True (PyTorch's creation functions raise their own message for integer and bool dtypes).
PyObject* created(Tensor t, PyObject* requires_grad) {
  if (requires_grad && requires_grad != Py_None && to_bool(requires_grad, "requires_grad")) {
    LOOM_CHECK(is_floating(t->dtype()), Runtime,
               "Only Tensors of floating point and complex dtype can require gradients");
    set_requires_grad(*t, true);
  }
  return wrap(std::move(t));
}

// Creation functions taking sizes as varargs: zeros(2, 3, dtype=...) or zeros((2, 3)) or
// zeros(size=(2, 3)). Each function's parser, named after it, lists "size", "dtype", "device",
// "requires_grad".
struct SizedArgs {
  Dims sizes;
  std::optional<DType> dtype;
  Placement where;
  PyObject* requires_grad = nullptr;
};

SizedArgs parse_sized(const ArgParser& parser, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  const char* fname = parser.name();
  Args<4> a;
  parser.parse(args + nargs, 0, kwnames, a.v);
  SizedArgs out;
  if (a.has(0)) {
    LOOM_CHECK(nargs == 0, Type, fname, "() got multiple values for argument 'size'");
    out.sizes = to_dims(a[0], "size");
  } else {
    if (nargs == 0) LOOM_FAIL(Type, fname, "() missing required argument 'size'");
    out.sizes = sizes_from_args(args, nargs, fname);
  }
  check_sizes(out.sizes);
  out.dtype = optional_dtype(a[1]);
  out.where = placement_from_py(a[2]);
  out.requires_grad = a[3];
  return out;
}

DType floating_dtype(std::optional<DType> requested, const char* fname) {
  DType d = requested.value_or(default_float_dtype());
  LOOM_CHECK(is_floating(d), Type, fname, "(): expected a floating-point dtype, got ", dtype_name(d));
  return d;
}

// The dtype of full(size, value) without an explicit dtype: as loom.tensor(value) would infer.
DType dtype_of_value(PyObject* value) {
  if (PyBool_Check(value)) return DType::Bool;
  if (is_tensor(value)) return impl_of(value).dtype();
  if (is_index_like(value)) return DType::Int64;
  return default_float_dtype();
}

PyObject* f_zeros(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("zeros", {"size", "dtype", "device", "requires_grad"}, 0);
  SizedArgs s = parse_sized(parser, args, nargs, kwnames);
  return created(ops::full(s.sizes, Scalar(int64_t{0}), s.dtype.value_or(default_float_dtype()), s.where),
                 s.requires_grad);
  LOOM_PY_END(nullptr)
}

PyObject* f_ones(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("ones", {"size", "dtype", "device", "requires_grad"}, 0);
  SizedArgs s = parse_sized(parser, args, nargs, kwnames);
  return created(ops::full(s.sizes, Scalar(int64_t{1}), s.dtype.value_or(default_float_dtype()), s.where),
                 s.requires_grad);
  LOOM_PY_END(nullptr)
}

PyObject* f_empty(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("empty", {"size", "dtype", "device", "requires_grad"}, 0);
  SizedArgs s = parse_sized(parser, args, nargs, kwnames);
  return created(made(empty(s.sizes, s.dtype.value_or(default_float_dtype()), s.where.device), s.where),
                 s.requires_grad);
  LOOM_PY_END(nullptr)
}

PyObject* f_rand(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("rand", {"size", "dtype", "device", "requires_grad"}, 0);
  SizedArgs s = parse_sized(parser, args, nargs, kwnames);
  return created(ops::rand(s.sizes, floating_dtype(s.dtype, "rand"), s.where), s.requires_grad);
  LOOM_PY_END(nullptr)
}

PyObject* f_randn(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("randn", {"size", "dtype", "device", "requires_grad"}, 0);
  SizedArgs s = parse_sized(parser, args, nargs, kwnames);
  return created(ops::randn(s.sizes, floating_dtype(s.dtype, "randn"), s.where), s.requires_grad);
  LOOM_PY_END(nullptr)
}

PyObject* f_full(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("full", {"size", "fill_value", "dtype", "device", "requires_grad"}, 2);
  Args<5> a;
  parser.parse(args, nargs, kwnames, a.v);
  LOOM_CHECK(a[0] && a[1], Type, "full() missing required arguments 'size' and 'fill_value'");
  Dims sizes = to_dims(a[0], "size");
  Scalar value = scalar_from_py(a[1], "fill_value");
  DType dtype = a.has(2) ? dtype_from_py(a[2]) : dtype_of_value(a[1]);
  value.check_fits(dtype);
  return created(ops::full(sizes, value, dtype, placement_from_py(a[3])), a[4]);
  LOOM_PY_END(nullptr)
}

PyObject* f_arange(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("arange", {"start", "end", "step", "dtype", "device", "requires_grad"}, 3);
  Args<6> a;
  parser.parse(args, nargs, kwnames, a.v);
  // arange(end) or arange(start, end[, step]).
  PyObject* start = a[0];
  PyObject* end = a[1];
  if (!end) {
    LOOM_CHECK(start, Type, "arange() missing required argument 'end'");
    end = start;
    start = nullptr;
  }
  PyObject* step = a[2];
  bool all_int = (!start || is_index_like(start)) && is_index_like(end) && (!step || is_index_like(step));
  double s0 = start ? to_double(start, "start") : 0.0;
  double s1 = to_double(end, "end");
  double st = step ? to_double(step, "step") : 1.0;
  LOOM_CHECK(st != 0.0, Runtime, "step must be nonzero");
  LOOM_CHECK(std::isfinite(s0) && std::isfinite(s1), Runtime, "unsupported range: ", s0, " -> ", s1);
  LOOM_CHECK((st > 0 && s1 >= s0) || (st < 0 && s1 <= s0), Runtime,
             "upper bound and larger bound inconsistent with step sign");
  int64_t n;
  if (all_int) {
    // Integer ranges are sized in integers: doubles lose exactness beyond 2^53.
    int64_t i0 = start ? to_int64(start, "start") : 0, i1 = to_int64(end, "end"), is = step ? to_int64(step, "step") : 1;
    n = is > 0 ? (i1 - i0 + is - 1) / is : (i0 - i1 - is - 1) / -is;
  } else {
    n = static_cast<int64_t>(std::ceil((s1 - s0) / st));
  }
  DType dtype = a.has(3) ? dtype_from_py(a[3]) : all_int ? DType::Int64 : default_float_dtype();
  Placement where = placement_from_py(a[4]);
  if (all_int)
    return created(ops::arange(n, Scalar(start ? to_int64(start, "start") : 0),
                               Scalar(step ? to_int64(step, "step") : 1), dtype, where),
                   a[5]);
  return created(ops::arange(n, Scalar(s0), Scalar(st), dtype, where), a[5]);
  LOOM_PY_END(nullptr)
}

PyObject* f_linspace(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("linspace", {"start", "end", "steps", "dtype", "device", "requires_grad"}, 3);
  Args<6> a;
  parser.parse(args, nargs, kwnames, a.v);
  LOOM_CHECK(a[0] && a[1] && a[2], Type, "linspace() missing required arguments 'start', 'end' and 'steps'");
  int64_t steps = to_int64(a[2], "steps");
  LOOM_CHECK(steps >= 0, Runtime, "number of steps must be non-negative");
  DType dtype = a.has(3) ? dtype_from_py(a[3]) : default_float_dtype();
  Placement where = placement_from_py(a[4]);
  Array out = empty(Dims{steps}, dtype, where.device);
  linspace_(out, to_double(a[0], "start"), to_double(a[1], "end"));
  return created(made(std::move(out), where), a[5]);
  LOOM_PY_END(nullptr)
}

PyObject* f_eye(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("eye", {"n", "m", "dtype", "device", "requires_grad"}, 2);
  Args<5> a;
  parser.parse(args, nargs, kwnames, a.v);
  LOOM_CHECK(a[0], Type, "eye() missing required argument 'n'");
  int64_t n = to_int64(a[0], "n");
  int64_t m = a.has(1) ? to_int64(a[1], "m") : n;
  LOOM_CHECK(n >= 0 && m >= 0, Runtime, "eye(): n and m must be non-negative, got n=", n, ", m=", m);
  Placement where = placement_from_py(a[3]);
  Array out = empty(Dims{n, m}, a.has(2) ? dtype_from_py(a[2]) : default_float_dtype(), where.device);
  fill_(out, Scalar(int64_t{0}));
  // The diagonal is a view with stride m + 1.
  Layout diagonal{Dims{std::min(n, m)}, Dims{m + 1}, 0};
  fill_(out.view_as(diagonal), Scalar(int64_t{1}));
  return created(made(std::move(out), where), a[4]);
  LOOM_PY_END(nullptr)
}

PyObject* f_randint(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("randint", {"", "", "", "low", "high", "size", "dtype", "device", "requires_grad"}, 3);
  Args<9> a;
  parser.parse(args, nargs, kwnames, a.v);
  // randint(high, size), randint(low, high, size), or any of them by keyword.
  PyObject *low = a[3], *high = a[4], *size = a[5];
  if (nargs == 3) {
    low = a[0];
    high = a[1];
    size = a[2];
  } else if (nargs == 2) {
    high = a[0];
    size = a[1];
  } else if (nargs == 1) {
    high = a[0];
  }
  LOOM_CHECK(high && size, Type, "randint() missing required arguments 'high' and 'size'");
  int64_t lo = low ? to_int64(low, "low") : 0;
  int64_t hi = to_int64(high, "high");
  return created(ops::randint(to_dims(size, "size"), lo, hi, a.has(6) ? dtype_from_py(a[6]) : DType::Int64,
                              placement_from_py(a[7])),
                 a[8]);
  LOOM_PY_END(nullptr)
}

// *_like(input, <extra>, dtype=None, device=None, requires_grad=False): input's shape and dim
// order (PyTorch's preserve_format), and by default its dtype and device. Each function's parser
// lists "input", its extra arguments, then "dtype", "device" and "requires_grad".
struct LikeArgs {
  Tensor input;
  DType dtype;
  Placement where;
  PyObject* extra[2];
  PyObject* requires_grad = nullptr;
};

LikeArgs parse_like(const ArgParser& parser, size_t n_extra, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  Args<6> a;
  parser.parse(args, nargs, kwnames, a.v);
  LOOM_CHECK(a[0], Type, "missing required argument 'input'");
  LikeArgs out;
  out.input = tensor_arg(a[0], "input");
  out.extra[0] = n_extra > 0 ? a[1] : nullptr;
  out.extra[1] = n_extra > 1 ? a[2] : nullptr;
  out.dtype = a.has(1 + n_extra) ? dtype_from_py(a[1 + n_extra]) : out.input->dtype();
  out.where = a.has(2 + n_extra) ? placement_from_py(a[2 + n_extra]) : Placement{out.input->device(), out.input->is_lazy()};
  out.requires_grad = a[3 + n_extra];
  return out;
}

// Uninitialized memory shaped like the input: in its dim order when it is materialized.
Array empty_shaped_like(const LikeArgs& l) {
  if (!l.input->is_pending()) return empty_like(l.input->array(), l.dtype, l.where.device);
  return empty(l.input->sizes(), l.dtype, l.where.device);
}

PyObject* filled_like(const LikeArgs& l, Scalar value) {
  value.check_fits(l.dtype);
  if (l.where.lazy) return created(ops::full(l.input->sizes(), value, l.dtype, l.where), l.requires_grad);
  Array a = empty_shaped_like(l);
  fill_(a, value);
  return created(make_tensor(std::move(a)), l.requires_grad);
}

PyObject* f_zeros_like(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("zeros_like", {"input", "dtype", "device", "requires_grad"}, 1);
  return filled_like(parse_like(parser, 0, args, nargs, kwnames), Scalar(int64_t{0}));
  LOOM_PY_END(nullptr)
}

PyObject* f_ones_like(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("ones_like", {"input", "dtype", "device", "requires_grad"}, 1);
  return filled_like(parse_like(parser, 0, args, nargs, kwnames), Scalar(int64_t{1}));
  LOOM_PY_END(nullptr)
}

PyObject* f_full_like(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("full_like", {"input", "fill_value", "dtype", "device", "requires_grad"}, 2);
  LikeArgs l = parse_like(parser, 1, args, nargs, kwnames);
  LOOM_CHECK(l.extra[0], Type, "full_like() missing required argument 'fill_value'");
  return filled_like(l, scalar_from_py(l.extra[0], "fill_value"));
  LOOM_PY_END(nullptr)
}

PyObject* f_empty_like(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("empty_like", {"input", "dtype", "device", "requires_grad"}, 1);
  LikeArgs l = parse_like(parser, 0, args, nargs, kwnames);
  return created(made(empty_shaped_like(l), l.where), l.requires_grad);
  LOOM_PY_END(nullptr)
}

PyObject* f_rand_like(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("rand_like", {"input", "dtype", "device", "requires_grad"}, 1);
  LikeArgs l = parse_like(parser, 0, args, nargs, kwnames);
  if (l.where.lazy)
    return created(ops::rand(l.input->sizes(), floating_dtype(l.dtype, "rand_like"), l.where), l.requires_grad);
  l.dtype = floating_dtype(l.dtype, "rand_like");
  Array a = empty_shaped_like(l);
  uniform_(a, 0.0, 1.0, default_generator(l.where.device));
  return created(make_tensor(std::move(a)), l.requires_grad);
  LOOM_PY_END(nullptr)
}

PyObject* f_randn_like(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("randn_like", {"input", "dtype", "device", "requires_grad"}, 1);
  LikeArgs l = parse_like(parser, 0, args, nargs, kwnames);
  if (l.where.lazy)
    return created(ops::randn(l.input->sizes(), floating_dtype(l.dtype, "randn_like"), l.where), l.requires_grad);
  l.dtype = floating_dtype(l.dtype, "randn_like");
  Array a = empty_shaped_like(l);
  normal_(a, 0.0, 1.0, default_generator(l.where.device));
  return created(make_tensor(std::move(a)), l.requires_grad);
  LOOM_PY_END(nullptr)
}

PyObject* f_randint_like(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("randint_like", {"input", "low", "high", "dtype", "device", "requires_grad"}, 3);
  LikeArgs l = parse_like(parser, 2, args, nargs, kwnames);
  // randint_like(input, high) or randint_like(input, low, high): a lone second positional is high.
  PyObject* low = l.extra[0];
  PyObject* high = l.extra[1];
  if (!high && nargs == 2) std::swap(low, high);
  LOOM_CHECK(high, Type, "randint_like() missing required argument 'high'");
  int64_t lo = low ? to_int64(low, "low") : 0, hi = to_int64(high, "high");
  if (l.where.lazy) return created(ops::randint(l.input->sizes(), lo, hi, l.dtype, l.where), l.requires_grad);
  Array a = empty_shaped_like(l);
  random_int_(a, lo, hi, default_generator(l.where.device));
  return created(make_tensor(std::move(a)), l.requires_grad);
  LOOM_PY_END(nullptr)
}

// loom.tensor(data, dtype=None, device=None, requires_grad=False): always copies.
PyObject* f_tensor(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("tensor", {"data", "dtype", "device", "requires_grad"}, 1);
  Args<4> a;
  parser.parse(args, nargs, kwnames, a.v);
  LOOM_CHECK(a[0], Type, "tensor() missing required argument 'data'");
  Placement where = placement_from_py(a[2]);
  return created(made(array_from_data(a[0], optional_dtype(a[1]), where.device), where), a[3]);
  LOOM_PY_END(nullptr)
}

// loom.as_tensor(data, dtype=None, device=None): shares memory with tensors, buffers and other
// libraries' tensors (shared_array) when dtype and device already match, else copies.
PyObject* f_as_tensor(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("as_tensor", {"data", "dtype", "device"}, 3);
  Args<3> a;
  parser.parse(args, nargs, kwnames, a.v);
  LOOM_CHECK(a[0], Type, "as_tensor() missing required argument 'data'");
  std::optional<DType> dtype = optional_dtype(a[1]);
  if (is_tensor(a[0])) {
    // A loom tensor: itself when dtype and placement match, else converted (lazy or not).
    const TensorImpl& t = impl_of(a[0]);
    Placement where = a.has(2) ? placement_from_py(a[2]) : Placement{t.device(), t.is_lazy()};
    Tensor r = ops::to(tensor_of(a[0]), dtype.value_or(t.dtype()), where.device, where.lazy);
    if (r.get() == &t) return Py_NewRef(a[0]);
    return wrap(std::move(r));
  }
  std::optional<Placement> where;
  if (a.has(2)) where = placement_from_py(a[2]);
  bool lazy = where && where->lazy;
  if (auto shared = shared_array(a[0])) {
    const Array& arr = shared->array;
    bool same = (!dtype || *dtype == arr.dtype) && (!where || where->device == arr.device());
    // Read-only memory (bytes, read-only arrays) is copied: a writable alias would let tensor
    // writes corrupt objects Python assumes immutable. Lazy tensors own their values: copied too.
    if (same && !shared->readonly && !lazy) return wrap(arr);
    Array copy = copy_to(arr, dtype.value_or(arr.dtype), where ? where->device : arr.device(), MemoryFormat::Preserve);
    return wrap(made(std::move(copy), where.value_or(Placement{arr.device(), false})));
  }
  Placement p = where.value_or(Placement{kCPU, false});
  return wrap(made(array_from_data(a[0], dtype, p.device), p));
  LOOM_PY_END(nullptr)
}

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

PyObject* from_dlpack(PyObject*, PyObject* obj);  // dlpack.cpp

PyMethodDef creation_functions[] = {
    {"tensor", LOOM_FASTCALL(f_tensor), "tensor(data, dtype=None, device=None, requires_grad=False): a new tensor holding a copy of data"},
    {"as_tensor", LOOM_FASTCALL(f_as_tensor), "as_tensor(data, dtype=None, device=None): shares memory when it can"},
    {"from_numpy", f_from_numpy, METH_O, "from_numpy(array): a CPU tensor sharing the numpy array's memory"},
    {"from_dlpack", from_dlpack, METH_O, "from_dlpack(obj): a tensor sharing the memory of a DLPack producer"},
    {"zeros", LOOM_FASTCALL(f_zeros), "zeros(*size, dtype=None, device=None, requires_grad=False)"},
    {"ones", LOOM_FASTCALL(f_ones), "ones(*size, dtype=None, device=None, requires_grad=False)"},
    {"empty", LOOM_FASTCALL(f_empty), "empty(*size, dtype=None, device=None, requires_grad=False): uninitialized memory"},
    {"full", LOOM_FASTCALL(f_full), "full(size, fill_value, dtype=None, device=None, requires_grad=False)"},
    {"rand", LOOM_FASTCALL(f_rand), "rand(*size, dtype=None, device=None, requires_grad=False): uniform on [0, 1)"},
    {"randn", LOOM_FASTCALL(f_randn), "randn(*size, dtype=None, device=None, requires_grad=False): standard normal"},
    {"randint", LOOM_FASTCALL(f_randint), "randint(low=0, high, size, dtype=loom.int64, device=None, requires_grad=False): uniform integers in [low, high)"},
    {"arange", LOOM_FASTCALL(f_arange), "arange(start=0, end, step=1, dtype=None, device=None, requires_grad=False)"},
    {"linspace", LOOM_FASTCALL(f_linspace), "linspace(start, end, steps, dtype=None, device=None, requires_grad=False)"},
    {"eye", LOOM_FASTCALL(f_eye), "eye(n, m=None, dtype=None, device=None, requires_grad=False)"},
    {"zeros_like", LOOM_FASTCALL(f_zeros_like), "zeros_like(input, dtype=None, device=None, requires_grad=False)"},
    {"ones_like", LOOM_FASTCALL(f_ones_like), "ones_like(input, dtype=None, device=None, requires_grad=False)"},
    {"full_like", LOOM_FASTCALL(f_full_like), "full_like(input, fill_value, dtype=None, device=None, requires_grad=False)"},
    {"empty_like", LOOM_FASTCALL(f_empty_like), "empty_like(input, dtype=None, device=None, requires_grad=False)"},
    {"rand_like", LOOM_FASTCALL(f_rand_like), "rand_like(input, dtype=None, device=None, requires_grad=False)"},
    {"randn_like", LOOM_FASTCALL(f_randn_like), "randn_like(input, dtype=None, device=None, requires_grad=False)"},
    {"randint_like", LOOM_FASTCALL(f_randint_like), "randint_like(input, low=0, high, dtype=None, device=None, requires_grad=False)"},
    {"manual_seed", f_manual_seed, METH_O, "manual_seed(seed): reseed the generators of every device"},
    {"initial_seed", f_initial_seed, METH_NOARGS, "the seed of the CPU generator"},
    {"get_default_dtype", f_get_default_dtype, METH_NOARGS, "the dtype of Python floats and float creation ops"},
    {"set_default_dtype", f_set_default_dtype, METH_O, "set_default_dtype(d): d must be a floating dtype"},
    {"is_tensor", f_is_tensor, METH_O, "True if obj is a loom.Tensor"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace loom::py
