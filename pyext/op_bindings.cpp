// The op library as Python: loom.<op>(input, ...) functions and Tensor.<op>(...) methods.
//
// Each binding is written once, as a function whose args[0] is the input tensor; the tables at
// the bottom expose it as a module function, a method (self becomes args[0]) or both, with
// PyTorch's names, argument names and defaults. Operators (+, *, ...) are in tensor_operators.cpp.
#include <string>

#include "pyext/args.h"
#include "pyext/objects.h"
#include "pyext/op_args.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

using FastArgs = PyObject* const*;
using Impl = PyObject* (*)(FastArgs, Py_ssize_t, PyObject*);

// A string usable as a template argument (C++20), for per-op parser names.
template <size_t N>
struct Name {
  char s[N];
  constexpr Name(const char (&str)[N]) {
    for (size_t i = 0; i < N; ++i) s[i] = str[i];
  }
};

#define BINDING(fn) PyObject* fn(FastArgs args, Py_ssize_t nargs, PyObject* kwnames)
#define PARSE(N, fname, positional, ...)                              \
  static ArgParser parser(fname, {__VA_ARGS__}, positional);            \
  Args<N> a;                                                          \
  parser.parse(args, nargs, kwnames, a.v)
#define REQUIRE(i, fname, argname) \
  LOOM_CHECK(a[i], Type, fname, "() missing required argument '", argname, "'")

PyObject* out(Tensor t) { return wrap(std::move(t)); }

// ---- elementwise ----

template <Name name, OpId op>
BINDING(b_unary) {
  LOOM_PY_BEGIN
  PARSE(1, name.s, 1, "input");
  REQUIRE(0, name.s, "input");
  return out(ops::unary(op, tensor_arg(a[0], "input")));
  LOOM_PY_END(nullptr)
}

BINDING(b_square) {
  LOOM_PY_BEGIN
  PARSE(1, "square", 1, "input");
  REQUIRE(0, "square", "input");
  return out(ops::square(tensor_arg(a[0], "input")));
  LOOM_PY_END(nullptr)
}

template <Name name, OpId op>
BINDING(b_binary) {
  LOOM_PY_BEGIN
  PARSE(2, name.s, 2, "input", "other");
  REQUIRE(0, name.s, "input");
  REQUIRE(1, name.s, "other");
  return out(ops::binary(op, arg_of(a[0], "input"), arg_of(a[1], "other")));
  LOOM_PY_END(nullptr)
}

// A Number argument (alpha, value, beta, ...), `fallback` when not given; anything else (None
// included) is a TypeError worded as PyTorch's argument parser words it.
Scalar number_arg(PyObject* obj, const char* fname, const char* argname, Scalar fallback = Scalar(int64_t{1})) {
  if (!obj) return fallback;
  auto s = scalar_of(obj);
  LOOM_CHECK(s, Type, fname, "(): argument '", argname, "' must be Number, not ", type_name(obj));
  return *s;
}

// A str argument (given), or TypeError.
std::string string_arg(PyObject* obj, const char* fname, const char* argname) {
  LOOM_CHECK(PyUnicode_Check(obj), Type, fname, "(): argument '", argname, "' must be str, not ", type_name(obj));
  Py_ssize_t len = 0;
  const char* s = PyUnicode_AsUTF8AndSize(obj, &len);
  if (!s) throw PythonError{};
  return std::string(s, static_cast<size_t>(len));
}

template <Name name, bool subtract>
BINDING(b_add) {
  LOOM_PY_BEGIN
  PARSE(3, name.s, 2, "input", "other", "alpha");
  REQUIRE(0, name.s, "input");
  REQUIRE(1, name.s, "other");
  Arg x = arg_of(a[0], "input"), y = arg_of(a[1], "other");
  Scalar alpha = number_arg(a[2], name.s, "alpha");
  return out(subtract ? ops::sub(x, y, alpha) : ops::add(x, y, alpha));
  LOOM_PY_END(nullptr)
}

template <Name name>
BINDING(b_div) {
  LOOM_PY_BEGIN
  PARSE(3, name.s, 2, "input", "other", "rounding_mode");
  REQUIRE(0, name.s, "input");
  REQUIRE(1, name.s, "other");
  std::string mode = a.has(2) ? string_arg(a[2], name.s, "rounding_mode") : "";
  return out(ops::div(arg_of(a[0], "input"), arg_of(a[1], "other"), mode));
  LOOM_PY_END(nullptr)
}

BINDING(b_pow) {
  LOOM_PY_BEGIN
  PARSE(2, "pow", 2, "input", "exponent");
  REQUIRE(0, "pow", "input");
  REQUIRE(1, "pow", "exponent");
  return out(ops::pow(arg_of(a[0], "input"), arg_of(a[1], "exponent")));
  LOOM_PY_END(nullptr)
}

BINDING(b_where) {
  LOOM_PY_BEGIN
  PARSE(3, "where", 3, "condition", "input", "other");
  REQUIRE(0, "where", "condition");
  REQUIRE(1, "where", "input");
  REQUIRE(2, "where", "other");
  return out(ops::where(tensor_arg(a[0], "condition"), arg_of(a[1], "input"), arg_of(a[2], "other")));
  LOOM_PY_END(nullptr)
}

// Tensor.where(condition, other): self is the value where the condition holds.
BINDING(b_where_method) {
  LOOM_PY_BEGIN
  PARSE(3, "where", 3, "self", "condition", "other");
  REQUIRE(1, "where", "condition");
  REQUIRE(2, "where", "other");
  return out(ops::where(tensor_arg(a[1], "condition"), arg_of(a[0], "self"), arg_of(a[2], "other")));
  LOOM_PY_END(nullptr)
}

std::optional<Arg> optional_arg(PyObject* obj, const char* what) {
  if (!obj || obj == Py_None) return std::nullopt;
  return arg_of(obj, what);
}

template <Name name>
BINDING(b_clamp) {
  LOOM_PY_BEGIN
  PARSE(3, name.s, 3, "input", "min", "max");
  REQUIRE(0, name.s, "input");
  return out(ops::clamp(tensor_arg(a[0], "input"), optional_arg(a[1], "min"), optional_arg(a[2], "max")));
  LOOM_PY_END(nullptr)
}

BINDING(b_gelu) {
  LOOM_PY_BEGIN
  PARSE(2, "gelu", 1, "input", "approximate");
  REQUIRE(0, "gelu", "input");
  std::string approx = a[1] ? string_arg(a[1], "gelu", "approximate") : "none";
  return out(ops::gelu(tensor_arg(a[0], "input"), approx));
  LOOM_PY_END(nullptr)
}

BINDING(b_softplus) {
  LOOM_PY_BEGIN
  PARSE(3, "softplus", 3, "input", "beta", "threshold");
  REQUIRE(0, "softplus", "input");
  Scalar beta = number_arg(a[1], "softplus", "beta");
  Scalar threshold = number_arg(a[2], "softplus", "threshold", Scalar(int64_t{20}));
  return out(ops::softplus(tensor_arg(a[0], "input"), beta, threshold));
  LOOM_PY_END(nullptr)
}

std::optional<double> optional_double(PyObject* obj, const char* what) {
  if (!obj || obj == Py_None) return std::nullopt;
  return to_double(obj, what);
}

BINDING(b_nan_to_num) {
  LOOM_PY_BEGIN
  PARSE(4, "nan_to_num", 4, "input", "nan", "posinf", "neginf");
  REQUIRE(0, "nan_to_num", "input");
  return out(ops::nan_to_num(tensor_arg(a[0], "input"), optional_double(a[1], "nan"), optional_double(a[2], "posinf"),
                             optional_double(a[3], "neginf")));
  LOOM_PY_END(nullptr)
}

BINDING(b_lerp) {
  LOOM_PY_BEGIN
  PARSE(3, "lerp", 3, "input", "end", "weight");
  REQUIRE(0, "lerp", "input");
  REQUIRE(1, "lerp", "end");
  REQUIRE(2, "lerp", "weight");
  return out(ops::lerp(tensor_arg(a[0], "input"), tensor_arg(a[1], "end"), arg_of(a[2], "weight")));
  LOOM_PY_END(nullptr)
}

template <Name name, bool divide>
BINDING(b_addc) {
  LOOM_PY_BEGIN
  PARSE(4, name.s, 3, "input", "tensor1", "tensor2", "value");
  REQUIRE(0, name.s, "input");
  REQUIRE(1, name.s, "tensor1");
  REQUIRE(2, name.s, "tensor2");
  Scalar value = number_arg(a[3], name.s, "value");
  Tensor x = tensor_arg(a[0], "input"), t1 = tensor_arg(a[1], "tensor1"), t2 = tensor_arg(a[2], "tensor2");
  return out(divide ? ops::addcdiv(x, t1, t2, value) : ops::addcmul(x, t1, t2, value));
  LOOM_PY_END(nullptr)
}

BINDING(b_logical_xor) {
  LOOM_PY_BEGIN
  PARSE(2, "logical_xor", 2, "input", "other");
  REQUIRE(0, "logical_xor", "input");
  REQUIRE(1, "logical_xor", "other");
  return out(ops::logical_xor(arg_of(a[0], "input"), arg_of(a[1], "other")));
  LOOM_PY_END(nullptr)
}

BINDING(b_round) {
  LOOM_PY_BEGIN
  PARSE(2, "round", 1, "input", "decimals");
  REQUIRE(0, "round", "input");
  return out(ops::round(tensor_arg(a[0], "input"), optional_int(a[1], "decimals")));
  LOOM_PY_END(nullptr)
}

// ---- reductions ----

template <Name name, bool is_mean>
BINDING(b_sum) {
  LOOM_PY_BEGIN
  PARSE(4, name.s, 3, "input", "dim", "keepdim", "dtype");
  REQUIRE(0, name.s, "input");
  Tensor x = tensor_arg(a[0], "input");
  bool keepdim = a.has(2) && to_bool(a[2], "keepdim");
  std::optional<DType> dtype = optional_dtype(a[3]);
  ops::DimList dims = dims_of(a[1], "dim");
  return out(is_mean ? ops::mean(x, dims, keepdim, dtype) : ops::sum(x, dims, keepdim, dtype));
  LOOM_PY_END(nullptr)
}

BINDING(b_prod) {
  LOOM_PY_BEGIN
  PARSE(4, "prod", 3, "input", "dim", "keepdim", "dtype");
  REQUIRE(0, "prod", "input");
  return out(ops::prod(tensor_arg(a[0], "input"), optional_int(a[1], "dim"), a.has(2) && to_bool(a[2], "keepdim"),
                       optional_dtype(a[3])));
  LOOM_PY_END(nullptr)
}

template <Name name, bool is_max>
BINDING(b_extreme) {
  LOOM_PY_BEGIN
  PARSE(3, name.s, 3, "input", "dim", "keepdim");
  REQUIRE(0, name.s, "input");
  Tensor x = tensor_arg(a[0], "input");
  ops::DimList dims = dims_of(a[1], "dim");
  bool keepdim = a.has(2) && to_bool(a[2], "keepdim");
  return out(is_max ? ops::amax(x, dims, keepdim) : ops::amin(x, dims, keepdim));
  LOOM_PY_END(nullptr)
}

template <Name name, bool is_max>
BINDING(b_arg_extreme) {
  LOOM_PY_BEGIN
  PARSE(3, name.s, 3, "input", "dim", "keepdim");
  REQUIRE(0, name.s, "input");
  Tensor x = tensor_arg(a[0], "input");
  std::optional<int64_t> dim = optional_int(a[1], "dim");
  bool keepdim = a.has(2) && to_bool(a[2], "keepdim");
  return out(is_max ? ops::argmax(x, dim, keepdim) : ops::argmin(x, dim, keepdim));
  LOOM_PY_END(nullptr)
}

// The (values, indices) result of max(dim) / min(dim), like torch.return_types.max.
PyTypeObject* min_max_type() {
  static PyTypeObject* type = [] {
    static PyStructSequence_Field fields[] = {{"values", nullptr}, {"indices", nullptr}, {nullptr, nullptr}};
    static PyStructSequence_Desc desc = {"loom.return_types.min_max", "(values, indices) of max(dim) / min(dim)",
                                         fields, 2};
    return PyStructSequence_NewType(&desc);
  }();
  return check(reinterpret_cast<PyObject*>(type)) ? type : nullptr;
}

// max(): the largest element; max(dim, keepdim=False): (values, indices); max(other) (other
// positional or by keyword): maximum.
template <Name name, bool is_max>
BINDING(b_max) {
  LOOM_PY_BEGIN
  PARSE(4, name.s, 3, "input", "dim", "keepdim", "other");
  REQUIRE(0, name.s, "input");
  Tensor x = tensor_arg(a[0], "input");
  PyObject* other = a[3] ? a[3] : a.has(1) && is_tensor(a[1]) ? a[1] : nullptr;
  if (other) {
    LOOM_CHECK(!a[2] && (!a[3] || !a[1]), Type, name.s, "() received an invalid combination of arguments: other "
               "cannot be given with dim or keepdim");
    return out(ops::binary(is_max ? OpId::Maximum : OpId::Minimum, x, tensor_arg(other, "other")));
  }
  if (!a.has(1)) {
    LOOM_CHECK(!a[2], Type, name.s, "() received an invalid combination of arguments: keepdim needs dim");
    return out(is_max ? ops::max(x) : ops::min(x));
  }
  int64_t dim = to_int64(a[1], "dim");
  auto [values, indices] = is_max ? ops::max_dim(x, dim, a.has(2) && to_bool(a[2], "keepdim"))
                                  : ops::min_dim(x, dim, a.has(2) && to_bool(a[2], "keepdim"));
  PyRef result = PyRef::checked(PyStructSequence_New(min_max_type()));
  PyStructSequence_SET_ITEM(result.get(), 0, wrap(values));
  PyStructSequence_SET_ITEM(result.get(), 1, wrap(indices));
  return result.release();
  LOOM_PY_END(nullptr)
}

// var / std(input, dim=None, unbiased=True, keepdim=False, *, correction=None).
template <Name name, bool is_std>
BINDING(b_var) {
  LOOM_PY_BEGIN
  PARSE(5, name.s, 4, "input", "dim", "unbiased", "keepdim", "correction");
  REQUIRE(0, name.s, "input");
  Tensor x = tensor_arg(a[0], "input");
  PyObject* dim = a[1];
  PyObject* unbiased = a[2];
  // var(x, True): the second positional is `unbiased` when it is a bool.
  if (dim && PyBool_Check(dim) && !unbiased) std::swap(dim, unbiased);
  double correction = unbiased && !to_bool(unbiased, "unbiased") ? 0.0 : 1.0;
  if (a.has(4)) correction = to_double(a[4], "correction");
  bool keepdim = a.has(3) && to_bool(a[3], "keepdim");
  ops::DimList dims = dims_of(dim, "dim");
  return out(is_std ? ops::std(x, dims, correction, keepdim) : ops::var(x, dims, correction, keepdim));
  LOOM_PY_END(nullptr)
}

BINDING(b_logsumexp) {
  LOOM_PY_BEGIN
  PARSE(3, "logsumexp", 3, "input", "dim", "keepdim");
  REQUIRE(0, "logsumexp", "input");
  REQUIRE(1, "logsumexp", "dim");
  return out(ops::logsumexp(tensor_arg(a[0], "input"), dims_of(a[1], "dim"), a.has(2) && to_bool(a[2], "keepdim")));
  LOOM_PY_END(nullptr)
}

template <Name name, bool is_all>
BINDING(b_all) {
  LOOM_PY_BEGIN
  PARSE(3, name.s, 3, "input", "dim", "keepdim");
  REQUIRE(0, name.s, "input");
  Tensor x = tensor_arg(a[0], "input");
  ops::DimList dims = dims_of(a[1], "dim");
  bool keepdim = a.has(2) && to_bool(a[2], "keepdim");
  return out(is_all ? ops::all(x, dims, keepdim) : ops::any(x, dims, keepdim));
  LOOM_PY_END(nullptr)
}

BINDING(b_norm) {
  LOOM_PY_BEGIN
  PARSE(5, "norm", 4, "input", "p", "dim", "keepdim", "dtype");
  REQUIRE(0, "norm", "input");
  Tensor x = tensor_arg(a[0], "input");
  if (a.has(4)) x = ops::cast(x, dtype_from_py(a[4]));
  double p = 2;
  if (a.has(1)) {
    if (PyUnicode_Check(a[1])) {
      LOOM_CHECK(PyUnicode_CompareWithASCIIString(a[1], "fro") == 0, Runtime, "norm: only p='fro' is supported as a string");
    } else {
      p = to_double(a[1], "p");
    }
  }
  return out(ops::norm(x, p, dims_of(a[2], "dim"), a.has(3) && to_bool(a[3], "keepdim")));
  LOOM_PY_END(nullptr)
}

template <Name name, int kind>  // 0 softmax, 1 log_softmax, 2 cumsum
BINDING(b_along_dim) {
  LOOM_PY_BEGIN
  PARSE(3, name.s, 2, "input", "dim", "dtype");
  REQUIRE(0, name.s, "input");
  REQUIRE(1, name.s, "dim");
  Tensor x = tensor_arg(a[0], "input");
  int64_t dim = to_int64(a[1], "dim");
  std::optional<DType> dtype = optional_dtype(a[2]);
  if (kind == 0) return out(ops::softmax(x, dim, dtype));
  if (kind == 1) return out(ops::log_softmax(x, dim, dtype));
  return out(ops::cumsum(x, dim, dtype));
  LOOM_PY_END(nullptr)
}

// ---- matrix products ----

template <Name name, int kind>  // 0 matmul, 1 mm, 2 bmm
BINDING(b_matmul) {
  LOOM_PY_BEGIN
  PARSE(2, name.s, 2, "input", "other");
  REQUIRE(0, name.s, "input");
  REQUIRE(1, name.s, "other");
  Tensor x = tensor_arg(a[0], "input"), y = tensor_arg(a[1], "other");
  return out(kind == 0 ? ops::matmul(x, y) : kind == 1 ? ops::mm(x, y) : ops::bmm(x, y));
  LOOM_PY_END(nullptr)
}

BINDING(b_addmm) {
  LOOM_PY_BEGIN
  PARSE(5, "addmm", 3, "input", "mat1", "mat2", "beta", "alpha");
  REQUIRE(0, "addmm", "input");
  REQUIRE(1, "addmm", "mat1");
  REQUIRE(2, "addmm", "mat2");
  return out(ops::addmm(tensor_arg(a[0], "input"), tensor_arg(a[1], "mat1"), tensor_arg(a[2], "mat2"),
                        number_arg(a[3], "addmm", "beta"), number_arg(a[4], "addmm", "alpha")));
  LOOM_PY_END(nullptr)
}

BINDING(b_linear) {
  LOOM_PY_BEGIN
  PARSE(3, "linear", 3, "input", "weight", "bias");
  REQUIRE(0, "linear", "input");
  REQUIRE(1, "linear", "weight");
  Tensor bias;
  if (a.has(2)) bias = tensor_arg(a[2], "bias");
  return out(ops::linear(tensor_arg(a[0], "input"), tensor_arg(a[1], "weight"), bias ? &bias : nullptr));
  LOOM_PY_END(nullptr)
}

// ---- data movement ----

BINDING(b_cat) {
  LOOM_PY_BEGIN
  PARSE(2, "cat", 2, "tensors", "dim");
  REQUIRE(0, "cat", "tensors");
  return out(ops::cat(tensor_list(a[0], "tensors"), a.has(1) ? to_int64(a[1], "dim") : 0));
  LOOM_PY_END(nullptr)
}

BINDING(b_stack) {
  LOOM_PY_BEGIN
  PARSE(2, "stack", 2, "tensors", "dim");
  REQUIRE(0, "stack", "tensors");
  return out(ops::stack(tensor_list(a[0], "tensors"), a.has(1) ? to_int64(a[1], "dim") : 0));
  LOOM_PY_END(nullptr)
}

BINDING(b_split) {
  LOOM_PY_BEGIN
  PARSE(3, "split", 3, "tensor", "split_size_or_sections", "dim");
  REQUIRE(0, "split", "tensor");
  REQUIRE(1, "split", "split_size_or_sections");
  Tensor x = tensor_arg(a[0], "tensor");
  int64_t dim = a.has(2) ? to_int64(a[2], "dim") : 0;
  if (is_index_like(a[1])) return tensor_tuple(ops::split(x, to_int64(a[1], "split_size"), dim));
  return tensor_tuple(ops::split_sections(x, to_dims(a[1], "split_sizes"), dim));
  LOOM_PY_END(nullptr)
}

BINDING(b_chunk) {
  LOOM_PY_BEGIN
  PARSE(3, "chunk", 3, "input", "chunks", "dim");
  REQUIRE(0, "chunk", "input");
  REQUIRE(1, "chunk", "chunks");
  return tensor_tuple(ops::chunk(tensor_arg(a[0], "input"), to_int64(a[1], "chunks"), a.has(2) ? to_int64(a[2], "dim") : 0));
  LOOM_PY_END(nullptr)
}

BINDING(b_unbind) {
  LOOM_PY_BEGIN
  PARSE(2, "unbind", 2, "input", "dim");
  REQUIRE(0, "unbind", "input");
  return tensor_tuple(ops::unbind(tensor_arg(a[0], "input"), a.has(1) ? to_int64(a[1], "dim") : 0));
  LOOM_PY_END(nullptr)
}

BINDING(b_index_select) {
  LOOM_PY_BEGIN
  PARSE(3, "index_select", 3, "input", "dim", "index");
  REQUIRE(0, "index_select", "input");
  REQUIRE(1, "index_select", "dim");
  REQUIRE(2, "index_select", "index");
  return out(ops::index_select(tensor_arg(a[0], "input"), to_int64(a[1], "dim"), tensor_arg(a[2], "index")));
  LOOM_PY_END(nullptr)
}

BINDING(b_flip) {
  LOOM_PY_BEGIN
  PARSE(2, "flip", 2, "input", "dims");
  REQUIRE(0, "flip", "input");
  REQUIRE(1, "flip", "dims");
  return out(ops::flip(tensor_arg(a[0], "input"), to_dims(a[1], "flip(): argument 'dims'")));
  LOOM_PY_END(nullptr)
}

BINDING(b_gather) {
  LOOM_PY_BEGIN
  PARSE(3, "gather", 3, "input", "dim", "index");
  REQUIRE(0, "gather", "input");
  REQUIRE(1, "gather", "dim");
  REQUIRE(2, "gather", "index");
  return out(ops::gather(tensor_arg(a[0], "input"), to_int64(a[1], "dim"), tensor_arg(a[2], "index")));
  LOOM_PY_END(nullptr)
}

BINDING(b_take_along_dim) {
  LOOM_PY_BEGIN
  PARSE(3, "take_along_dim", 3, "input", "indices", "dim");
  REQUIRE(0, "take_along_dim", "input");
  REQUIRE(1, "take_along_dim", "indices");
  return out(ops::take_along_dim(tensor_arg(a[0], "input"), tensor_arg(a[1], "indices"), optional_int(a[2], "dim")));
  LOOM_PY_END(nullptr)
}

BINDING(b_scatter_add) {
  LOOM_PY_BEGIN
  PARSE(4, "scatter_add", 4, "input", "dim", "index", "src");
  REQUIRE(0, "scatter_add", "input");
  REQUIRE(1, "scatter_add", "dim");
  REQUIRE(2, "scatter_add", "index");
  REQUIRE(3, "scatter_add", "src");
  return out(ops::scatter_add(tensor_arg(a[0], "input"), to_int64(a[1], "dim"), tensor_arg(a[2], "index"),
                              tensor_arg(a[3], "src")));
  LOOM_PY_END(nullptr)
}

template <Name name, bool lower>
BINDING(b_triangle) {
  LOOM_PY_BEGIN
  PARSE(2, name.s, 2, "input", "diagonal");
  REQUIRE(0, name.s, "input");
  Tensor x = tensor_arg(a[0], "input");
  int64_t diagonal = a.has(1) ? to_int64(a[1], "diagonal") : 0;
  return out(lower ? ops::tril(x, diagonal) : ops::triu(x, diagonal));
  LOOM_PY_END(nullptr)
}

BINDING(b_masked_fill) {
  LOOM_PY_BEGIN
  PARSE(3, "masked_fill", 3, "input", "mask", "value");
  REQUIRE(0, "masked_fill", "input");
  REQUIRE(1, "masked_fill", "mask");
  REQUIRE(2, "masked_fill", "value");
  return out(ops::masked_fill(tensor_arg(a[0], "input"), tensor_arg(a[1], "mask"), arg_of(a[2], "value")));
  LOOM_PY_END(nullptr)
}

BINDING(b_one_hot) {
  LOOM_PY_BEGIN
  PARSE(2, "one_hot", 2, "tensor", "num_classes");
  REQUIRE(0, "one_hot", "tensor");
  return out(ops::one_hot(tensor_arg(a[0], "tensor"), a.has(1) ? to_int64(a[1], "num_classes") : -1));
  LOOM_PY_END(nullptr)
}

BINDING(b_pad) {
  LOOM_PY_BEGIN
  PARSE(4, "pad", 4, "input", "pad", "mode", "value");
  REQUIRE(0, "pad", "input");
  REQUIRE(1, "pad", "pad");
  if (a.has(2))
    LOOM_CHECK(PyUnicode_Check(a[2]) && PyUnicode_CompareWithASCIIString(a[2], "constant") == 0, NotImplemented,
               "pad: only mode='constant' is supported");
  return out(ops::pad(tensor_arg(a[0], "input"), to_dims(a[1], "pad"), a.has(3) ? to_double(a[3], "value") : 0.0));
  LOOM_PY_END(nullptr)
}

BINDING(b_fill_) {
  LOOM_PY_BEGIN
  PARSE(2, "fill_", 2, "self", "value");
  REQUIRE(1, "fill_", "value");
  ops::fill_(impl_of(a[0]), arg_of(a[1], "value"));
  return Py_NewRef(a[0]);
  LOOM_PY_END(nullptr)
}

BINDING(b_zero_) {
  LOOM_PY_BEGIN
  PARSE(1, "zero_", 1, "self");
  ops::zero_(impl_of(a[0]));
  return Py_NewRef(a[0]);
  LOOM_PY_END(nullptr)
}

BINDING(b_copy_) {
  LOOM_PY_BEGIN
  PARSE(3, "copy_", 3, "self", "src", "non_blocking");
  REQUIRE(1, "copy_", "src");
  ops::copy_(impl_of(a[0]), tensor_arg(a[1], "src"));
  return Py_NewRef(a[0]);
  LOOM_PY_END(nullptr)
}

#undef BINDING
#undef PARSE
#undef REQUIRE

// ---- the tables ----

template <Impl F>
PyObject* as_function(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  return F(args, nargs, kwnames);
}

// A method call t.f(a, b, k=v): the binding sees (t, a, b, v) with the same kwnames.
template <Impl F>
PyObject* as_method(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
  PyObject* stack[16];
  if (total + 1 > 16) {
    PyErr_SetString(PyExc_TypeError, "too many arguments");
    return nullptr;
  }
  stack[0] = self;
  for (Py_ssize_t i = 0; i < total; ++i) stack[i + 1] = args[i];
  return F(stack, nargs + 1, kwnames);
}

// An in-place method t.f_(...): computes t.f(...) and writes it into t, which keeps its identity
// and (eager, or lazy once materialized) its storage. `selective` methods write chosen elements
// (masked_fill_, tril_, triu_): PyTorch allows those on tensors with internal overlap.
template <Impl F, bool selective = false>
PyObject* as_inplace_method(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  if constexpr (!selective) {
    LOOM_PY_BEGIN
    check_no_internal_overlap(impl_of(self));
    LOOM_PY_END(nullptr)
  }
  LOOM_PY_BEGIN
  update(impl_of(self), [&] { return tensor_of(PyRef::checked(as_method<F>(self, args, nargs, kwnames)).get()); });
  return Py_NewRef(self);
  LOOM_PY_END(nullptr)
}

enum Where { kFunction = 1, kMethod = 2, kBoth = 3 };

struct Entry {
  const char* name;
  PyCFunction function;
  PyCFunction method;
  int where;
  const char* doc;
};

#define FN(f) reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&as_function<f>))
#define MT(f) reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&as_method<f>))
#define BOTH(name, f, doc) {name, FN(f), MT(f), kBoth, doc}
#define FUNC(name, f, doc) {name, FN(f), nullptr, kFunction, doc}
#define METH(name, f, doc) {name, nullptr, MT(f), kMethod, doc}
#define INPLACE(name, f, doc) {name, nullptr, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&as_inplace_method<f>)), kMethod, doc}
#define INPLACE_SELECTIVE(name, f, doc) \
  {name, nullptr, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&as_inplace_method<f, true>)), kMethod, doc}
#define UNARY(name, op) BOTH(#name, (b_unary<#name, OpId::op>), #name "(input)"), \
    INPLACE(#name "_", (b_unary<#name, OpId::op>), "in-place " #name "()")
#define BINARY(name, op) BOTH(#name, (b_binary<#name, OpId::op>), #name "(input, other)")

const Entry kEntries[] = {
    UNARY(abs, Abs), UNARY(neg, Neg), UNARY(negative, Neg), UNARY(exp, Exp), UNARY(exp2, Exp2), UNARY(log, Log),
    UNARY(log2, Log2), UNARY(log1p, Log1p), UNARY(expm1, Expm1), UNARY(sqrt, Sqrt), UNARY(rsqrt, Rsqrt),
    UNARY(sin, Sin), UNARY(cos, Cos), UNARY(tan, Tan), UNARY(tanh, Tanh), UNARY(sigmoid, Sigmoid), UNARY(relu, Relu),
    UNARY(silu, Silu), UNARY(erf, Erf), UNARY(floor, Floor), UNARY(ceil, Ceil), UNARY(sign, Sign),
    UNARY(reciprocal, Reciprocal), UNARY(logical_not, LogicalNot), UNARY(isnan, IsNan),
    UNARY(isinf, IsInf), UNARY(bitwise_not, BitwiseNot),
    BOTH("square", b_square, "square(input)"), INPLACE("square_", b_square, "in-place square()"),
    BOTH("round", b_round, "round(input, decimals=0): round half to even"),
    BOTH("gelu", b_gelu, "gelu(input, approximate='none')"),
    BOTH("softplus", b_softplus, "softplus(input, beta=1, threshold=20)"),
    BOTH("nan_to_num", b_nan_to_num, "nan_to_num(input, nan=0.0, posinf=None, neginf=None)"),
    BOTH("add", (b_add<"add", false>), "add(input, other, alpha=1)"),
    BOTH("sub", (b_add<"sub", true>), "sub(input, other, alpha=1)"),
    BOTH("subtract", (b_add<"subtract", true>), "subtract(input, other, alpha=1)"),
    INPLACE("add_", (b_add<"add_", false>), "add_(other, alpha=1)"),
    INPLACE("sub_", (b_add<"sub_", true>), "sub_(other, alpha=1)"),
    INPLACE("mul_", (b_binary<"mul_", OpId::Mul>), "mul_(other)"),
    INPLACE("div_", b_div<"div_">, "div_(other, rounding_mode=None)"),
    INPLACE("pow_", b_pow, "pow_(exponent)"),
    INPLACE("floor_divide_", (b_binary<"floor_divide_", OpId::FloorDiv>), "floor_divide_(other)"),
    INPLACE("remainder_", (b_binary<"remainder_", OpId::Remainder>), "remainder_(other)"),
    INPLACE("clamp_", b_clamp<"clamp_">, "clamp_(min=None, max=None)"),
    INPLACE("clip_", b_clamp<"clip_">, "clip_(min=None, max=None)"),
    INPLACE("lerp_", b_lerp, "lerp_(end, weight)"),
    INPLACE("addcmul_", (b_addc<"addcmul_", false>), "addcmul_(tensor1, tensor2, value=1)"),
    INPLACE("addcdiv_", (b_addc<"addcdiv_", true>), "addcdiv_(tensor1, tensor2, value=1)"),
    INPLACE_SELECTIVE("masked_fill_", b_masked_fill, "masked_fill_(mask, value)"),
    INPLACE("nan_to_num_", b_nan_to_num, "nan_to_num_(nan=0.0, posinf=None, neginf=None)"),
    INPLACE("round_", b_round, "round_(decimals=0)"),
    INPLACE_SELECTIVE("tril_", (b_triangle<"tril_", true>), "tril_(diagonal=0)"),
    INPLACE_SELECTIVE("triu_", (b_triangle<"triu_", false>), "triu_(diagonal=0)"),
    METH("fill_", b_fill_, "fill_(value): every element becomes value"),
    METH("zero_", b_zero_, "zero_(): every element becomes 0"),
    METH("copy_", b_copy_, "copy_(src): copy src's values (broadcast, converted) into self"),
    BINARY(mul, Mul), BINARY(multiply, Mul),
    BOTH("div", b_div<"div">, "div(input, other, rounding_mode=None)"),
    BOTH("divide", b_div<"divide">, "divide(input, other, rounding_mode=None)"),
    BINARY(true_divide, Div), BINARY(floor_divide, FloorDiv), BINARY(remainder, Remainder),
    BOTH("pow", b_pow, "pow(input, exponent)"),
    BINARY(maximum, Maximum), BINARY(minimum, Minimum), BINARY(eq, Eq), BINARY(ne, Ne), BINARY(lt, Lt), BINARY(le, Le),
    BINARY(gt, Gt), BINARY(ge, Ge), BINARY(logical_and, LogicalAnd), BINARY(logical_or, LogicalOr),
    BOTH("logical_xor", b_logical_xor, "logical_xor(input, other)"),
    BINARY(bitwise_and, BitwiseAnd), BINARY(bitwise_or, BitwiseOr), BINARY(bitwise_xor, BitwiseXor),
    INPLACE("bitwise_and_", (b_binary<"bitwise_and_", OpId::BitwiseAnd>), "bitwise_and_(other)"),
    INPLACE("bitwise_or_", (b_binary<"bitwise_or_", OpId::BitwiseOr>), "bitwise_or_(other)"),
    INPLACE("bitwise_xor_", (b_binary<"bitwise_xor_", OpId::BitwiseXor>), "bitwise_xor_(other)"),
    FUNC("where", b_where, "where(condition, input, other)"),
    METH("where", b_where_method, "where(condition, other): self where condition holds, else other"),
    BOTH("clamp", b_clamp<"clamp">, "clamp(input, min=None, max=None)"),
    BOTH("clip", b_clamp<"clip">, "clip(input, min=None, max=None)"),
    BOTH("lerp", b_lerp, "lerp(input, end, weight)"),
    BOTH("addcmul", (b_addc<"addcmul", false>), "addcmul(input, tensor1, tensor2, value=1)"),
    BOTH("addcdiv", (b_addc<"addcdiv", true>), "addcdiv(input, tensor1, tensor2, value=1)"),
    BOTH("sum", (b_sum<"sum", false>), "sum(input, dim=None, keepdim=False, dtype=None)"),
    BOTH("mean", (b_sum<"mean", true>), "mean(input, dim=None, keepdim=False, dtype=None)"),
    BOTH("prod", b_prod, "prod(input, dim=None, keepdim=False, dtype=None)"),
    BOTH("amax", (b_extreme<"amax", true>), "amax(input, dim=(), keepdim=False)"),
    BOTH("amin", (b_extreme<"amin", false>), "amin(input, dim=(), keepdim=False)"),
    BOTH("argmax", (b_arg_extreme<"argmax", true>), "argmax(input, dim=None, keepdim=False)"),
    BOTH("argmin", (b_arg_extreme<"argmin", false>), "argmin(input, dim=None, keepdim=False)"),
    BOTH("max", (b_max<"max", true>), "max(input) / max(input, dim, keepdim=False) / max(input, other)"),
    BOTH("min", (b_max<"min", false>), "min(input) / min(input, dim, keepdim=False) / min(input, other)"),
    BOTH("var", (b_var<"var", false>), "var(input, dim=None, unbiased=True, keepdim=False, *, correction=None)"),
    BOTH("std", (b_var<"std", true>), "std(input, dim=None, unbiased=True, keepdim=False, *, correction=None)"),
    BOTH("logsumexp", b_logsumexp, "logsumexp(input, dim, keepdim=False)"),
    BOTH("all", (b_all<"all", true>), "all(input, dim=None, keepdim=False)"),
    BOTH("any", (b_all<"any", false>), "any(input, dim=None, keepdim=False)"),
    BOTH("norm", b_norm, "norm(input, p='fro', dim=None, keepdim=False, dtype=None)"),
    BOTH("softmax", (b_along_dim<"softmax", 0>), "softmax(input, dim, dtype=None)"),
    BOTH("log_softmax", (b_along_dim<"log_softmax", 1>), "log_softmax(input, dim, dtype=None)"),
    BOTH("cumsum", (b_along_dim<"cumsum", 2>), "cumsum(input, dim, dtype=None)"),
    BOTH("matmul", (b_matmul<"matmul", 0>), "matmul(input, other)"),
    BOTH("mm", (b_matmul<"mm", 1>), "mm(input, mat2)"),
    BOTH("bmm", (b_matmul<"bmm", 2>), "bmm(input, mat2)"),
    BOTH("addmm", b_addmm, "addmm(input, mat1, mat2, beta=1, alpha=1)"),
    FUNC("linear", b_linear, "linear(input, weight, bias=None)"),
    FUNC("cat", b_cat, "cat(tensors, dim=0)"), FUNC("concat", b_cat, "concat(tensors, dim=0)"),
    FUNC("stack", b_stack, "stack(tensors, dim=0)"),
    BOTH("split", b_split, "split(tensor, split_size_or_sections, dim=0)"),
    BOTH("chunk", b_chunk, "chunk(input, chunks, dim=0)"),
    BOTH("unbind", b_unbind, "unbind(input, dim=0)"),
    BOTH("index_select", b_index_select, "index_select(input, dim, index)"),
    FUNC("flip", b_flip, "flip(input, dims): the elements in reverse order along dims (a copy)"),
    BOTH("gather", b_gather, "gather(input, dim, index)"),
    BOTH("take_along_dim", b_take_along_dim, "take_along_dim(input, indices, dim=None)"),
    BOTH("scatter_add", b_scatter_add, "scatter_add(input, dim, index, src)"),
    BOTH("tril", (b_triangle<"tril", true>), "tril(input, diagonal=0)"),
    BOTH("triu", (b_triangle<"triu", false>), "triu(input, diagonal=0)"),
    BOTH("masked_fill", b_masked_fill, "masked_fill(input, mask, value)"),
    FUNC("one_hot", b_one_hot, "one_hot(tensor, num_classes=-1)"),
    FUNC("pad", b_pad, "pad(input, pad, mode='constant', value=0)"),
};

std::vector<PyMethodDef> table(int where) {
  std::vector<PyMethodDef> defs;
  for (const Entry& e : kEntries)
    if (e.where & where)
      defs.push_back({e.name, where == kMethod ? e.method : e.function, METH_FASTCALL | METH_KEYWORDS, e.doc});
  return defs;
}

}  // namespace

std::vector<PyMethodDef> op_functions() { return table(kFunction); }
std::vector<PyMethodDef> op_methods() { return table(kMethod); }

}  // namespace loom::py
