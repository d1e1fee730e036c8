// The op library as Python: the op table's rows (pyext/op_table.h) for loom.<op>(...),
// Tensor.<op>(...) and Tensor.<op>_(...), with PyTorch's names, signatures and defaults.
// Operators (+, *, ...) are in tensor_operators.cpp.
#include "lazy/ops_linalg.h"
#include "lazy/ops_movement.h"
#include "pyext/objects.h"
#include "pyext/op_table.h"
#include "runtime/error.h"

namespace loom::py {
namespace {


template <OpId op>
Result unary(const Parsed& p) {
  return ops::unary(op, p.tensor(0));
}

template <OpId op>
Result binary(const Parsed& p) {
  return ops::binary(op, p.arg(0), p.arg(1));
}

template <auto fn>  // a reduction over dims: fn(x, dims, keepdim), or over all (an overload without dim)
Result over_dims(const Parsed& p) {
  return p.signature->params().size() == 1 ? fn(p.tensor(0), {}, false) : fn(p.tensor(0), p.dims(1), p.boolean(2));
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

// max(input) / max(input, other) / max(input, dim, keepdim): the three overloads of the row.
template <bool is_max>
Result extreme(const Parsed& p) {
  Tensor x = p.tensor(0);
  if (p.index == 0) return is_max ? ops::max(x) : ops::min(x);
  if (p.index == 1) return ops::binary(is_max ? OpId::Maximum : OpId::Minimum, x, p.tensor(1));
  auto [values, indices] = (is_max ? ops::max_dim : ops::min_dim)(x, p.int64(1), p.boolean(2));
  PyRef result = PyRef::checked(PyStructSequence_New(min_max_type()));
  PyStructSequence_SET_ITEM(result.get(), 0, wrap(values));
  PyStructSequence_SET_ITEM(result.get(), 1, wrap(indices));
  return result.release();
}

// var / std: (dim, unbiased, keepdim), (dim, *, correction, keepdim) or (unbiased), as PyTorch's.
template <auto fn>
Result variance(const Parsed& p) {
  if (p.index == 0) return fn(p.tensor(0), p.dims(1), p.boolean(2) ? 1.0 : 0.0, p.boolean(3));
  if (p.index == 1) return fn(p.tensor(0), p.dims(1), p.optional_real(2).value_or(1.0), p.boolean(3));
  return fn(p.tensor(0), {}, p.boolean(1) ? 1.0 : 0.0, false);
}

Result norm(const Parsed& p) {
  Tensor x = p.tensor(0);
  if (auto dtype = p.optional_dtype(4)) x = ops::cast(x, *dtype);
  double order = 2;
  if (p.index == 1 && p.string(1) == "nuc") {
    // the nuclear norm (the sum of singular values) of the matrices over dim (default the last two),
    // as torch.norm(p='nuc') gives: linalg.matrix_norm's
    Dims dims = p.has(2) ? p.int_list(2) : Dims{-2, -1};
    LOOM_CHECK(dims.size() == 2, Runtime, "norm: p='nuc' needs a 2-tuple dim, got ", dims.size(), " dims");
    return ops::matrix_norm(x, "nuc", 0.0, dims, p.boolean(3), std::nullopt);
  }
  if (p.index == 1) LOOM_CHECK(p.string(1) == "fro", Runtime, "norm: p must be 'fro' or 'nuc' as a string");
  else if (p.has(1)) order = p.scalar(1).as_double();
  return ops::norm(x, order, p.dims(2), p.boolean(3));
}

// equal: the same sizes and the same values (a sync point on the lazy device, as item()).
Result equal(const Parsed& p) {
  Tensor a = p.tensor(0), b = p.tensor(1);
  if (Dims(a->sizes()) != Dims(b->sizes())) return Py_NewRef(Py_False);
  PyRef same = PyRef::checked(wrap(ops::all(ops::binary(OpId::Eq, a, b))));
  int truth = PyObject_IsTrue(same.get());
  if (truth < 0) throw PythonError{};
  return Py_NewRef(truth ? Py_True : Py_False);
}

Result pad(const Parsed& p) {
  return ops::pad(p.tensor(0), p.int_list(1), p.string(2), p.optional_real(3));
}

Result split(const Parsed& p) {
  if (p.index == 0) return ops::split(p.tensor(0), p.int64(1), p.int64(2));
  return ops::split_sections(p.tensor(0), p.int_list(1), p.int64(2));
}

const Row kRows[] = {
    // ---- elementwise ----
    {{"abs(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Abs>}, {{"neg(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Neg>},
    {{"negative(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Neg>}, {{"exp(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Exp>},
    {{"exp2(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Exp2>}, {{"log(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Log>},
    {{"log2(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Log2>}, {{"log1p(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Log1p>},
    {{"expm1(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Expm1>}, {{"sqrt(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Sqrt>},
    {{"rsqrt(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Rsqrt>}, {{"sin(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Sin>},
    {{"cos(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Cos>}, {{"tan(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Tan>},
    {{"tanh(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Tanh>}, {{"sigmoid(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Sigmoid>},
    {{"relu(Tensor input)"}, kAll, unary<OpId::Relu>}, {{"silu(Tensor input)"}, kAll, unary<OpId::Silu>},
    {{"erf(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Erf>}, {{"floor(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Floor>},
    {{"ceil(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Ceil>}, {{"sign(Tensor input)"}, kAll, unary<OpId::Sign>},
    {{"reciprocal(Tensor input)"}, kAll | kInplaceFunction, unary<OpId::Reciprocal>},
    {{"logical_not(Tensor input)"}, kAll, unary<OpId::LogicalNot>}, {{"isnan(Tensor input)"}, kAll, unary<OpId::IsNan>},
    {{"isinf(Tensor input)"}, kAll, unary<OpId::IsInf>}, {{"bitwise_not(Tensor input)"}, kAll, unary<OpId::BitwiseNot>},
    {{"square(Tensor input)"}, kAll | kInplaceFunction, LOOM_BODY(ops::square(p.tensor(0)))},
    {{"round(Tensor input)", "round(Tensor input, *, int decimals)"}, kAll | kInplaceFunction,
     LOOM_BODY(ops::round(p.tensor(0), p.index ? p.optional_int64(1) : std::nullopt)),
     "Rounds half to even."},
    {{"gelu(Tensor input, *, str approximate='none')"}, kBoth, LOOM_BODY(ops::gelu(p.tensor(0), p.string(1)))},
    {{"softplus(Tensor input, Scalar beta=1, Scalar threshold=20)"}, kBoth,
     LOOM_BODY(ops::softplus(p.tensor(0), p.scalar(1), p.scalar(2)))},
    {{"nan_to_num(Tensor input, float? nan=None, float? posinf=None, float? neginf=None)"}, kAll | kInplaceFunction,
     LOOM_BODY(ops::nan_to_num(p.tensor(0), p.optional_real(1), p.optional_real(2), p.optional_real(3)))},
    {{"add(Arg input, Arg other, *, Scalar alpha=1)"}, kAll, LOOM_BODY(ops::add(p.arg(0), p.arg(1), p.scalar(2)))},
    {{"sub(Arg input, Arg other, *, Scalar alpha=1)"}, kAll, LOOM_BODY(ops::sub(p.arg(0), p.arg(1), p.scalar(2)))},
    {{"subtract(Arg input, Arg other, *, Scalar alpha=1)"}, kBoth | kInplace,
     LOOM_BODY(ops::sub(p.arg(0), p.arg(1), p.scalar(2)))},
    {{"mul(Arg input, Arg other)"}, kAll, binary<OpId::Mul>},
    {{"multiply(Arg input, Arg other)"}, kBoth | kInplace, binary<OpId::Mul>},
    {{"div(Arg input, Arg other, *, str? rounding_mode=None)"}, kAll,
     LOOM_BODY(ops::div(p.arg(0), p.arg(1), p.string(2)))},
    {{"divide(Arg input, Arg other, *, str? rounding_mode=None)"}, kBoth | kInplace,
     LOOM_BODY(ops::div(p.arg(0), p.arg(1), p.string(2)))},
    {{"true_divide(Arg input, Arg other)"}, kBoth | kInplace, binary<OpId::Div>},
    {{"floor_divide(Arg input, Arg other)"}, kAll, binary<OpId::FloorDiv>},
    {{"remainder(Arg input, Arg other)"}, kAll, binary<OpId::Remainder>},
    {{"pow(Arg input, Arg exponent)"}, kAll, LOOM_BODY(ops::pow(p.arg(0), p.arg(1)))},
    {{"maximum(Tensor input, Arg other)"}, kBoth, binary<OpId::Maximum>},
    {{"minimum(Tensor input, Arg other)"}, kBoth, binary<OpId::Minimum>},
    {{"eq(Tensor input, Arg other)"}, kBoth | kInplace, binary<OpId::Eq>},
    {{"ne(Tensor input, Arg other)"}, kBoth | kInplace, binary<OpId::Ne>},
    {{"lt(Tensor input, Arg other)"}, kBoth | kInplace, binary<OpId::Lt>},
    {{"le(Tensor input, Arg other)"}, kBoth | kInplace, binary<OpId::Le>},
    {{"gt(Tensor input, Arg other)"}, kBoth | kInplace, binary<OpId::Gt>},
    {{"ge(Tensor input, Arg other)"}, kBoth | kInplace, binary<OpId::Ge>},
    // numpy's names of the comparisons (PyTorch's aliases)
    {{"not_equal(Tensor input, Arg other)"}, kAll, binary<OpId::Ne>},
    {{"less(Tensor input, Arg other)"}, kAll, binary<OpId::Lt>},
    {{"less_equal(Tensor input, Arg other)"}, kAll, binary<OpId::Le>},
    {{"greater(Tensor input, Arg other)"}, kAll, binary<OpId::Gt>},
    {{"greater_equal(Tensor input, Arg other)"}, kAll, binary<OpId::Ge>},
    {{"equal(Tensor input, Tensor other) -> bool"}, kBoth, equal,
     "True when both have the same sizes and values: a sync point on the lazy device."},
    {{"logical_and(Tensor input, Arg other)"}, kBoth | kInplace, binary<OpId::LogicalAnd>},
    {{"logical_or(Tensor input, Arg other)"}, kBoth | kInplace, binary<OpId::LogicalOr>},
    {{"logical_xor(Tensor input, Arg other)"}, kBoth | kInplace, LOOM_BODY(ops::logical_xor(p.arg(0), p.arg(1)))},
    {{"bitwise_and(Arg input, Arg other)"}, kAll, binary<OpId::BitwiseAnd>},
    {{"bitwise_or(Arg input, Arg other)"}, kAll, binary<OpId::BitwiseOr>},
    {{"bitwise_xor(Arg input, Arg other)"}, kAll, binary<OpId::BitwiseXor>},
    {{"where(Tensor condition, Arg input, Arg other)", "where(Tensor condition)"}, kFunction,
     LOOM_BODY(p.index ? Result(ops::nonzero_tuple(p.tensor(0), "where"))
                       : Result(ops::where(p.tensor(0), p.arg(1), p.arg(2)))),
     "where(condition) is nonzero(condition, as_tuple=True): a sync point on the lazy device."},
    {{"where(Tensor condition, Arg input, Arg other)"}, kMethod, LOOM_BODY(ops::where(p.tensor(0), p.arg(1), p.arg(2)))},
    {{"clamp(Tensor input, Arg? min=None, Arg? max=None)"}, kAll | kInplaceFunction,
     LOOM_BODY(ops::clamp(p.tensor(0), p.optional_arg(1), p.optional_arg(2)))},
    {{"clip(Tensor input, Arg? min=None, Arg? max=None)"}, kAll | kInplaceFunction,
     LOOM_BODY(ops::clamp(p.tensor(0), p.optional_arg(1), p.optional_arg(2)))},
    {{"lerp(Tensor input, Tensor end, Arg weight)"}, kAll, LOOM_BODY(ops::lerp(p.tensor(0), p.tensor(1), p.arg(2)))},
    {{"addcmul(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1)"}, kAll,
     LOOM_BODY(ops::addcmul(p.tensor(0), p.tensor(1), p.tensor(2), p.scalar(3)))},
    {{"addcdiv(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1)"}, kAll,
     LOOM_BODY(ops::addcdiv(p.tensor(0), p.tensor(1), p.tensor(2), p.scalar(3)))},

    // ---- reductions ----
    {{"sum(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)"}, kBoth,
     LOOM_BODY(ops::sum(p.tensor(0), p.dims(1), p.boolean(2), p.optional_dtype(3)))},
    {{"mean(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)"}, kBoth,
     LOOM_BODY(ops::mean(p.tensor(0), p.dims(1), p.boolean(2), p.optional_dtype(3)))},
    {{"prod(Tensor input, *, ScalarType? dtype=None)",
      "prod(Tensor input, int dim, bool keepdim=False, *, ScalarType? dtype=None)"}, kBoth,
     LOOM_BODY(p.index ? ops::prod(p.tensor(0), p.int64(1), p.boolean(2), p.optional_dtype(3))
                       : ops::prod(p.tensor(0), std::nullopt, false, p.optional_dtype(1)))},
    {{"amax(Tensor input, int[1]? dim=[], bool keepdim=False)"}, kBoth, over_dims<ops::amax>},
    {{"amin(Tensor input, int[1]? dim=[], bool keepdim=False)"}, kBoth, over_dims<ops::amin>},
    {{"argmax(Tensor input, int? dim=None, bool keepdim=False)"}, kBoth,
     LOOM_BODY(ops::argmax(p.tensor(0), p.optional_int64(1), p.boolean(2)))},
    {{"argmin(Tensor input, int? dim=None, bool keepdim=False)"}, kBoth,
     LOOM_BODY(ops::argmin(p.tensor(0), p.optional_int64(1), p.boolean(2)))},
    {{"max(Tensor input)", "max(Tensor input, Tensor other)", "max(Tensor input, int dim, bool keepdim=False)"},
     kBoth, extreme<true>, "max(input, dim) returns (values, indices)."},
    {{"min(Tensor input)", "min(Tensor input, Tensor other)", "min(Tensor input, int dim, bool keepdim=False)"},
     kBoth, extreme<false>, "min(input, dim) returns (values, indices)."},
    {{"var(Tensor input, int[1]? dim, bool unbiased=True, bool keepdim=False)",
      "var(Tensor input, int[1]? dim=None, *, float? correction=None, bool keepdim=False)",
      "var(Tensor input, bool unbiased=True)"},
     kBoth, variance<ops::var>},
    {{"std(Tensor input, int[1]? dim, bool unbiased=True, bool keepdim=False)",
      "std(Tensor input, int[1]? dim=None, *, float? correction=None, bool keepdim=False)",
      "std(Tensor input, bool unbiased=True)"},
     kBoth, variance<ops::std>},
    {{"logsumexp(Tensor input, int[1] dim, bool keepdim=False)"}, kBoth, over_dims<ops::logsumexp>},
    {{"all(Tensor input)", "all(Tensor input, int[1] dim, bool keepdim=False)"}, kBoth, over_dims<ops::all>},
    {{"any(Tensor input)", "any(Tensor input, int[1] dim, bool keepdim=False)"}, kBoth, over_dims<ops::any>},
    {{"norm(Tensor input, Scalar? p=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)",
      "norm(Tensor input, str p, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)"},
     kBoth, norm, "p='fro' is the 2-norm."},
    {{"dist(Tensor input, Tensor other, Scalar p=2)"}, kBoth,
     LOOM_BODY(ops::norm(ops::sub(p.tensor(0), p.tensor(1)), p.scalar(2).as_double())),
     "The p-norm of input - other."},
    {{"softmax(Tensor input, int dim, ScalarType? dtype=None)"}, kBoth,
     LOOM_BODY(ops::softmax(p.tensor(0), p.int64(1), p.optional_dtype(2)))},
    {{"log_softmax(Tensor input, int dim, ScalarType? dtype=None)"}, kBoth,
     LOOM_BODY(ops::log_softmax(p.tensor(0), p.int64(1), p.optional_dtype(2)))},
    {{"cumsum(Tensor input, int dim, *, ScalarType? dtype=None)"}, kBoth | kInplace,
     LOOM_BODY(ops::cumsum(p.tensor(0), p.int64(1), p.optional_dtype(2)))},

    // ---- matrix products ----
    {{"matmul(Tensor input, Tensor other)"}, kBoth, LOOM_BODY(ops::matmul(p.tensor(0), p.tensor(1)))},
    {{"mm(Tensor input, Tensor mat2)"}, kBoth, LOOM_BODY(ops::mm(p.tensor(0), p.tensor(1)))},
    {{"bmm(Tensor input, Tensor mat2)"}, kBoth, LOOM_BODY(ops::bmm(p.tensor(0), p.tensor(1)))},
    {{"addmm(Tensor input, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1)"}, kAll,
     LOOM_BODY(ops::addmm(p.tensor(0), p.tensor(1), p.tensor(2), p.scalar(3), p.scalar(4)))},
    {{"linear(Tensor input, Tensor weight, Tensor? bias=None)"}, kFunction, [](const Parsed& p) -> Result {
       Tensor bias = p.tensor(2);
       return ops::linear(p.tensor(0), p.tensor(1), bias ? &bias : nullptr);
     }},

    // ---- data movement ----
    {{"cat(Tensor[] tensors, int dim=0)"}, kFunction, LOOM_BODY(ops::cat(p.tensors(0), p.int64(1)))},
    {{"concat(Tensor[] tensors, int dim=0)"}, kFunction, LOOM_BODY(ops::cat(p.tensors(0), p.int64(1)))},
    {{"stack(Tensor[] tensors, int dim=0)"}, kFunction, LOOM_BODY(ops::stack(p.tensors(0), p.int64(1)))},
    {{"split(Tensor tensor, int split_size_or_sections, int dim=0) -> Tensor[]",
      "split(Tensor tensor, int[] split_size_or_sections, int dim=0) -> Tensor[]"},
     kBoth, split},
    {{"chunk(Tensor input, int chunks, int dim=0) -> Tensor[]"}, kBoth,
     LOOM_BODY(ops::chunk(p.tensor(0), p.int64(1), p.int64(2)))},
    {{"unbind(Tensor input, int dim=0) -> Tensor[]"}, kBoth, LOOM_BODY(ops::unbind(p.tensor(0), p.int64(1)))},
    {{"index_select(Tensor input, int dim, Tensor index)"}, kBoth,
     LOOM_BODY(ops::index_select(p.tensor(0), p.int64(1), p.tensor(2)))},
    {{"flip(Tensor input, int[] dims)"}, kBoth, LOOM_BODY(ops::flip(p.tensor(0), p.int_list(1))),
     "The elements in reverse order along dims (a copy)."},
    {{"gather(Tensor input, int dim, Tensor index)"}, kBoth,
     LOOM_BODY(ops::gather(p.tensor(0), p.int64(1), p.tensor(2)))},
    {{"take_along_dim(Tensor input, Tensor indices, int? dim=None)"}, kBoth,
     LOOM_BODY(ops::take_along_dim(p.tensor(0), p.tensor(1), p.optional_int64(2)))},
    {{"scatter_add(Tensor input, int dim, Tensor index, Tensor src)"}, kAll,
     LOOM_BODY(ops::scatter_add(p.tensor(0), p.int64(1), p.tensor(2), p.tensor(3)))},
    {{"tril(Tensor input, int diagonal=0)"}, kAll | kWritesSome, LOOM_BODY(ops::tril(p.tensor(0), p.int64(1)))},
    {{"triu(Tensor input, int diagonal=0)"}, kAll | kWritesSome, LOOM_BODY(ops::triu(p.tensor(0), p.int64(1)))},
    {{"masked_fill(Tensor input, Tensor mask, Arg value)"}, kAll | kWritesSome,
     LOOM_BODY(ops::masked_fill(p.tensor(0), p.tensor(1), p.arg(2)))},
    {{"one_hot(Tensor input, int num_classes=-1)"}, kFunction, LOOM_BODY(ops::one_hot(p.tensor(0), p.int64(1)))},
    {{"pad(Tensor input, int[] pad, str mode='constant', float? value=None)"}, kFunction, pad},

    // ---- writes: they return self (the tensor written) ----
    {{"fill_(Tensor input, Arg value)"}, kMethod | kFunction, LOOM_BODY((ops::fill_(impl_of(p.object(0)), p.arg(1)), Py_NewRef(p.object(0)))),
     "Every element becomes value."},
    {{"zero_(Tensor input)"}, kMethod | kFunction, LOOM_BODY((ops::zero_(impl_of(p.object(0))), Py_NewRef(p.object(0)))),
     "Every element becomes 0."},
    {{"copy_(Tensor input, Tensor other, bool non_blocking=False)"}, kMethod,
     LOOM_BODY((ops::copy_(impl_of(p.self), p.tensor(1)), Py_NewRef(p.self))),
     "Copies other's values (broadcast, converted) into self."},
};

}  // namespace

void add_op_rows(MethodDefs& defs) { add_rows(kRows, defs); }

}  // namespace loom::py
