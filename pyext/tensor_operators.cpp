// Python operators on loom.Tensor: + - * / // % ** @, unary - + abs ~, & | ^ (bitwise: logical
// on bool tensors), << >> (shifts of integers), comparisons, and the in-place forms (+= ...) and in-place methods (add_, mul_, clamp_, ...),
// with PyTorch's semantics. An operand that is neither a tensor nor a number makes the operator
// return NotImplemented, so Python can try the other operand.
#include <utility>

#include "pyext/autocast.h"
#include "pyext/op_args.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

// The operand as an op argument, or nullopt for NotImplemented.
std::optional<Arg> operand(PyObject* obj) {
  if (is_tensor(obj)) return Arg(&impl_of(obj));
  if (auto s = scalar_of(obj)) return Arg(*s);
  return std::nullopt;
}

template <typename Fn>
PyObject* binary_operator(PyObject* a, PyObject* b, Fn&& fn) {
  LOOM_PY_BEGIN
  std::optional<Arg> x = operand(a), y = operand(b);
  if (!x || !y) Py_RETURN_NOTIMPLEMENTED;
  return wrap(fn(*x, *y));
  LOOM_PY_END(nullptr)
}

template <OpId op>
PyObject* op_binary(PyObject* a, PyObject* b) {
  return binary_operator(a, b, [](const Arg& x, const Arg& y) { return ops::binary(op, x, y); });
}

// 2 + x and 2 * x are x.__radd__(2) and x.__rmul__(2): as in PyTorch the tensor comes first, so
// it is the first input of the backward graph (grad_fn.next_functions). Both ops commute exactly.
PyObject* op_add(PyObject* a, PyObject* b) {
  if (!is_tensor(a)) std::swap(a, b);
  return binary_operator(a, b, [](const auto& x, const auto& y) { return ops::add(x, y); });
}
PyObject* op_mul(PyObject* a, PyObject* b) {
  if (!is_tensor(a)) std::swap(a, b);
  return binary_operator(a, b, [](const Arg& x, const Arg& y) { return ops::mul(x, y); });
}
PyObject* op_sub(PyObject* a, PyObject* b) { return binary_operator(a, b, [](const auto& x, const auto& y) { return ops::sub(x, y); }); }
PyObject* op_div(PyObject* a, PyObject* b) { return binary_operator(a, b, [](const auto& x, const auto& y) { return ops::div(x, y); }); }

// `**` and `@` are pow and matmul to autocast (pyext/autocast.h): inside a region their
// operands are cast by those ops' policies first. `keep` owns the cast operands.
bool autocast_operands(const char* name, PyObject*& a, PyObject*& b, std::vector<PyRef>& keep) {
  if (!autocast_active()) [[likely]] return true;
  PyObject* slots[2] = {a, b};
  LOOM_PY_BEGIN
  autocast_arguments(autocast_policy(name), name, slots, 2, -1, keep);
  a = slots[0];
  b = slots[1];
  return true;
  LOOM_PY_END(false)
}

PyObject* op_pow(PyObject* a, PyObject* b, PyObject* mod) {
  if (mod != Py_None) {
    PyErr_SetString(PyExc_TypeError, "pow() 3rd argument not allowed for tensors");
    return nullptr;
  }
  std::vector<PyRef> keep;
  if (!autocast_operands("pow", a, b, keep)) return nullptr;
  return binary_operator(a, b, [](const auto& x, const auto& y) { return ops::pow(x, y); });
}

PyObject* op_matmul(PyObject* a, PyObject* b) {
  LOOM_PY_BEGIN
  if (!is_tensor(a) || !is_tensor(b)) Py_RETURN_NOTIMPLEMENTED;
  std::vector<PyRef> keep;
  if (!autocast_operands("matmul", a, b, keep)) return nullptr;
  return wrap(ops::matmul(tensor_of(a), tensor_of(b)));
  LOOM_PY_END(nullptr)
}

template <OpId op>
PyObject* op_unary(PyObject* a) {
  LOOM_PY_BEGIN
  return wrap(ops::unary(op, tensor_of(a)));
  LOOM_PY_END(nullptr)
}

// +x is x itself, except on bool tensors, which PyTorch rejects.
PyObject* op_positive(PyObject* a) {
  LOOM_PY_BEGIN
  static_cast<void>(ops::positive(tensor_of(a)));
  return Py_NewRef(a);
  LOOM_PY_END(nullptr)
}

// ~ is bitwise_not, but PyTorch rejects it on floating tensors with a TypeError of its own.
PyObject* op_invert(PyObject* a) {
  LOOM_PY_BEGIN
  LOOM_CHECK(!is_floating(impl_of(a).dtype()), Type,
             "~ (operator.invert) is only implemented on integer and Boolean-type tensors");
  return wrap(ops::unary(OpId::BitwiseNot, tensor_of(a)));
  LOOM_PY_END(nullptr)
}

// a op= b: computes op(a, b) and writes it into a (which keeps its identity and storage).
template <typename Fn>
PyObject* inplace_operator(PyObject* a, PyObject* b, Fn&& fn) {
  LOOM_PY_BEGIN
  std::optional<Arg> y = operand(b);
  if (!is_tensor(a) || !y) Py_RETURN_NOTIMPLEMENTED;
  // A reference of our own: update() may sync and release the GIL, and another thread may then
  // give `a` other data (tensor.data = ...), dropping the impl `a` held.
  Tensor self = tensor_of(a);
  check_no_internal_overlap(*self);
  update(*self, [&] { return fn(Arg(self.get()), *y); });
  return Py_NewRef(a);
  LOOM_PY_END(nullptr)
}

template <OpId op>
PyObject* op_inplace(PyObject* a, PyObject* b) {
  return inplace_operator(a, b, [](const Arg& x, const Arg& y) { return ops::binary(op, x, y); });
}
PyObject* op_iadd(PyObject* a, PyObject* b) { return inplace_operator(a, b, [](const auto& x, const auto& y) { return ops::add(x, y); }); }
PyObject* op_isub(PyObject* a, PyObject* b) { return inplace_operator(a, b, [](const auto& x, const auto& y) { return ops::sub(x, y); }); }
PyObject* op_idiv(PyObject* a, PyObject* b) { return inplace_operator(a, b, [](const auto& x, const auto& y) { return ops::div(x, y); }); }
PyObject* op_ipow(PyObject* a, PyObject* b, PyObject*) {
  return inplace_operator(a, b, [](const auto& x, const auto& y) { return ops::pow(x, y); });
}

}  // namespace

PyObject* tensor_richcompare(PyObject* a, PyObject* b, int cmp) {
  static constexpr OpId kOps[] = {OpId::Lt, OpId::Le, OpId::Eq, OpId::Ne, OpId::Gt, OpId::Ge};
  return binary_operator(a, b, [cmp](const Arg& x, const Arg& y) { return ops::binary(kOps[cmp], x, y); });
}

void fill_number_methods(PyNumberMethods& n) {
  n.nb_add = op_add;
  n.nb_subtract = op_sub;
  n.nb_multiply = op_mul;
  n.nb_true_divide = op_div;
  n.nb_floor_divide = op_binary<OpId::FloorDiv>;
  n.nb_remainder = op_binary<OpId::Remainder>;
  n.nb_power = op_pow;
  n.nb_matrix_multiply = op_matmul;
  n.nb_negative = op_unary<OpId::Neg>;
  n.nb_positive = op_positive;
  n.nb_absolute = op_unary<OpId::Abs>;
  n.nb_invert = op_invert;
  n.nb_and = op_binary<OpId::BitwiseAnd>;
  n.nb_or = op_binary<OpId::BitwiseOr>;
  n.nb_xor = op_binary<OpId::BitwiseXor>;
  n.nb_lshift = op_binary<OpId::Lshift>;
  n.nb_rshift = op_binary<OpId::Rshift>;
  n.nb_inplace_add = op_iadd;
  n.nb_inplace_subtract = op_isub;
  n.nb_inplace_multiply = op_inplace<OpId::Mul>;
  n.nb_inplace_true_divide = op_idiv;
  n.nb_inplace_floor_divide = op_inplace<OpId::FloorDiv>;
  n.nb_inplace_remainder = op_inplace<OpId::Remainder>;
  n.nb_inplace_power = op_ipow;
  n.nb_inplace_and = op_inplace<OpId::BitwiseAnd>;
  n.nb_inplace_or = op_inplace<OpId::BitwiseOr>;
  n.nb_inplace_xor = op_inplace<OpId::BitwiseXor>;
  n.nb_inplace_lshift = op_inplace<OpId::Lshift>;
  n.nb_inplace_rshift = op_inplace<OpId::Rshift>;
}

}  // namespace loom::py
