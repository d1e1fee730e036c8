// The derivatives of the primitive ops, written once in loom ops: each runs eagerly on eager
// tensors and records lazily on lazy ones, so in lazy mode the backward pass joins the trace.
// Gradients are returned at the output's shape; autograd sums them back to each input's shape
// (undoing broadcasting) and casts them to its dtype.
//
// Where PyTorch saves an op's output, these recompute it from the inputs (exp(x) for Exp): in
// lazy mode the recomputation fuses into the backward kernel for free.
#include <cmath>
#include <string>

#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "runtime/error.h"

namespace loom {
namespace {

using Grads = std::vector<Tensor>;
using ops::add;
using ops::binary;
using ops::div;
using ops::mul;
using ops::sub;
using ops::unary;

constexpr double kLn2 = 0.6931471805599453;
constexpr double kTwoOverSqrtPi = 1.1283791670955126;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

Arg in(const BackwardContext& c, size_t i) {
  return c.inputs[i] ? Arg(c.inputs[i]) : Arg(c.scalars[i]);
}
const Tensor& x(const BackwardContext& c) { return c.inputs[0]; }

Tensor zeros(IntSpan shape, DType dtype, const Tensor& like) {
  return ops::full(shape, Scalar(int64_t{0}), dtype, {like->device(), like->is_lazy()});
}

Tensor mask(const Tensor& cond, const Tensor& g) { return ops::where(cond, g, Scalar(int64_t{0})); }

// The gradient of a reduction, expanded back over the reduced dims.
Tensor expand_reduced(const Tensor& g, const BackwardContext& c, IntSpan input_shape) {
  auto reduced = static_cast<uint64_t>(c.attrs[0]);
  bool keepdim = c.attrs[1] != 0;
  Tensor out = g;
  if (!keepdim)
    for (int64_t d = 0; d < static_cast<int64_t>(input_shape.size()); ++d)
      if (reduced >> d & 1) out = ops::unsqueeze(out, d);
  return ops::expand(out, input_shape);
}

ops::DimList reduced_dims(const BackwardContext& c, int64_t ndim) {
  ops::DimList dims;
  for (int64_t d = 0; d < ndim; ++d)
    if (static_cast<uint64_t>(c.attrs[0]) >> d & 1) dims.push_back(d);
  return dims;
}

#define DERIVATIVE(Op) void d_##Op(const BackwardContext& c, Grads& g)

DERIVATIVE(Neg) { g[0] = unary(OpId::Neg, c.grad); }
DERIVATIVE(Abs) { g[0] = mul(c.grad, unary(OpId::Sign, x(c))); }
DERIVATIVE(Exp) { g[0] = mul(c.grad, unary(OpId::Exp, x(c))); }
DERIVATIVE(Exp2) { g[0] = mul(c.grad, mul(unary(OpId::Exp2, x(c)), Scalar(kLn2))); }
DERIVATIVE(Log) { g[0] = div(c.grad, x(c)); }
DERIVATIVE(Log2) { g[0] = div(c.grad, mul(x(c), Scalar(kLn2))); }
DERIVATIVE(Log1p) { g[0] = div(c.grad, add(x(c), Scalar(int64_t{1}))); }
DERIVATIVE(Expm1) { g[0] = mul(c.grad, unary(OpId::Exp, x(c))); }
DERIVATIVE(Sqrt) { g[0] = div(c.grad, mul(unary(OpId::Sqrt, x(c)), Scalar(int64_t{2}))); }
DERIVATIVE(Rsqrt) { g[0] = mul(c.grad, mul(ops::pow(x(c), Scalar(-1.5)), Scalar(-0.5))); }
DERIVATIVE(Sin) { g[0] = mul(c.grad, unary(OpId::Cos, x(c))); }
DERIVATIVE(Cos) { g[0] = mul(c.grad, unary(OpId::Neg, unary(OpId::Sin, x(c)))); }
DERIVATIVE(Tan) {
  Tensor t = unary(OpId::Tan, x(c));
  g[0] = mul(c.grad, add(mul(t, t), Scalar(int64_t{1})));
}
DERIVATIVE(Tanh) {
  Tensor t = unary(OpId::Tanh, x(c));
  g[0] = mul(c.grad, sub(Scalar(int64_t{1}), mul(t, t)));
}
DERIVATIVE(Sigmoid) {
  Tensor s = unary(OpId::Sigmoid, x(c));
  g[0] = mul(c.grad, mul(s, sub(Scalar(int64_t{1}), s)));
}
DERIVATIVE(Relu) { g[0] = mask(binary(OpId::Gt, x(c), Scalar(int64_t{0})), c.grad); }
// d/dx x * Phi(x) = Phi(x) + x * phi(x).
DERIVATIVE(Gelu) {
  const Tensor& v = x(c);
  Tensor cdf = mul(add(unary(OpId::Erf, mul(v, Scalar(kInvSqrt2))), Scalar(int64_t{1})), Scalar(0.5));
  Tensor pdf = mul(unary(OpId::Exp, mul(mul(v, v), Scalar(-0.5))), Scalar(kInvSqrt2Pi));
  g[0] = mul(c.grad, add(cdf, mul(v, pdf)));
}
// PyTorch's tanh-approximation derivative, term by term.
DERIVATIVE(GeluTanh) {
  const Tensor& v = x(c);
  constexpr double kBeta = 0.7978845608028654, kKappa = 0.044715;
  Tensor inner = mul(add(v, mul(mul(mul(v, v), v), Scalar(kKappa))), Scalar(kBeta));
  Tensor t = unary(OpId::Tanh, inner);
  Tensor left = mul(v, Scalar(0.5));
  Tensor left_derivative = mul(add(t, Scalar(int64_t{1})), Scalar(0.5));
  Tensor inner_derivative = mul(add(mul(mul(v, v), Scalar(3 * kKappa)), Scalar(int64_t{1})), Scalar(kBeta));
  Tensor right_derivative = mul(mul(left, sub(Scalar(int64_t{1}), mul(t, t))), inner_derivative);
  g[0] = mul(c.grad, add(left_derivative, right_derivative));
}
DERIVATIVE(Silu) {
  const Tensor& v = x(c);
  Tensor s = unary(OpId::Sigmoid, v);
  g[0] = mul(c.grad, mul(s, add(mul(v, sub(Scalar(int64_t{1}), s)), Scalar(int64_t{1}))));
}
DERIVATIVE(Softplus) {
  Tensor scaled = mul(x(c), in(c, 1));
  Tensor z = unary(OpId::Exp, scaled);
  Tensor soft = mul(c.grad, div(z, add(z, Scalar(int64_t{1}))));
  g[0] = ops::where(binary(OpId::Gt, scaled, in(c, 2)), c.grad, soft);
}
DERIVATIVE(Erf) {
  const Tensor& v = x(c);
  g[0] = mul(c.grad, mul(unary(OpId::Exp, unary(OpId::Neg, mul(v, v))), Scalar(kTwoOverSqrtPi)));
}
DERIVATIVE(Zero) { g[0] = zeros(c.out_shape, c.out_dtype, c.grad); }
DERIVATIVE(Reciprocal) {
  Tensor r = unary(OpId::Reciprocal, x(c));
  g[0] = mul(unary(OpId::Neg, c.grad), mul(r, r));
}
DERIVATIVE(Square) { g[0] = mul(c.grad, mul(x(c), Scalar(int64_t{2}))); }
DERIVATIVE(NanToNum) {
  Tensor finite = ops::logical_xor(unary(OpId::IsNan, x(c)), unary(OpId::IsInf, x(c)));
  g[0] = mask(unary(OpId::LogicalNot, finite), c.grad);
}
DERIVATIVE(Cast) { g[0] = c.grad; }
DERIVATIVE(Add) { g[0] = g[1] = c.grad; }
DERIVATIVE(Sub) {
  g[0] = c.grad;
  if (c.needs_grad[1]) g[1] = unary(OpId::Neg, c.grad);
}
DERIVATIVE(Mul) {
  if (c.needs_grad[0]) g[0] = mul(c.grad, in(c, 1));
  if (c.needs_grad[1]) g[1] = mul(c.grad, in(c, 0));
}
DERIVATIVE(Div) {
  if (c.needs_grad[0]) g[0] = div(c.grad, in(c, 1));
  if (c.needs_grad[1]) g[1] = unary(OpId::Neg, div(mul(c.grad, in(c, 0)), mul(in(c, 1), in(c, 1))));
}
// d/da a^b = b a^(b-1); d/db a^b = a^b ln a (0 where a = 0 and b >= 0, as PyTorch).
DERIVATIVE(Pow) {
  Arg a = in(c, 0), b = in(c, 1);
  if (c.needs_grad[0]) {
    if (!b.is_tensor() && b.scalar.as_double() == 0.0) g[0] = zeros(c.out_shape, c.out_dtype, c.grad);
    else g[0] = mul(c.grad, mul(b, ops::pow(a, b.is_tensor() ? Arg(sub(b, Scalar(int64_t{1})))
                                                             : Arg(Scalar(b.scalar.as_double() - 1.0)))));
  }
  if (c.needs_grad[1]) {
    Tensor value = mul(ops::pow(a, b), a.is_tensor() ? Arg(unary(OpId::Log, Tensor(a.tensor)))
                                                      : Arg(Scalar(std::log(a.scalar.as_double()))));
    // A zero base, a tensor element or a number: value would be 0 * -inf = nan for b > 0.
    if (a.is_tensor() || a.scalar.as_double() == 0.0) {
      Tensor zero_base = binary(OpId::Ge, b, Scalar(int64_t{0}));
      if (a.is_tensor()) zero_base = binary(OpId::LogicalAnd, binary(OpId::Eq, a, Scalar(int64_t{0})), zero_base);
      value = ops::where(zero_base, Scalar(int64_t{0}), value);
    }
    g[1] = mul(c.grad, value);
  }
}
// Ties share the gradient, as PyTorch's maximum / minimum.
void extreme_grads(const BackwardContext& c, Grads& g, OpId loses) {
  Arg a = in(c, 0), b = in(c, 1);
  Tensor tie = binary(OpId::Eq, a, b);
  Tensor shared = ops::where(tie, div(c.grad, Scalar(int64_t{2})), c.grad);
  if (c.needs_grad[0]) g[0] = ops::where(binary(loses, a, b), Scalar(int64_t{0}), shared);
  if (c.needs_grad[1]) g[1] = ops::where(binary(loses, b, a), Scalar(int64_t{0}), shared);
}
DERIVATIVE(Maximum) { extreme_grads(c, g, OpId::Lt); }
DERIVATIVE(Minimum) { extreme_grads(c, g, OpId::Gt); }
DERIVATIVE(Remainder) {
  g[0] = c.grad;
  if (c.needs_grad[1]) g[1] = mul(unary(OpId::Neg, c.grad), binary(OpId::FloorDiv, in(c, 0), in(c, 1)));
}
DERIVATIVE(Where) {
  const Tensor& cond = c.inputs[0];
  if (c.needs_grad[1]) g[1] = mask(cond, c.grad);
  if (c.needs_grad[2]) g[2] = ops::where(cond, Scalar(int64_t{0}), c.grad);
}

DERIVATIVE(Sum) { g[0] = expand_reduced(c.grad, c, x(c)->sizes()); }
// d/dx_i prod(x) is the product of the other elements of x_i's slice: prod / x_i without zeros
// in the slice (PyTorch's formula there); with one zero, the product of the nonzero elements at
// the zero and 0 elsewhere; with more, 0 everywhere (as PyTorch's prod_backward). The case is
// chosen per slice by counting its zeros, not by a branch on the data, which a lazy trace
// cannot have.
DERIVATIVE(Prod) {
  const Tensor& v = x(c);
  ops::DimList dims = reduced_dims(c, v->ndim());
  Tensor is_zero = binary(OpId::Eq, v, Scalar(int64_t{0}));
  Tensor nonzero = ops::where(is_zero, Scalar(int64_t{1}), v);
  Tensor p = ops::reduce(OpId::Prod, nonzero, dims, true);  // of the nonzero elements
  Tensor zeros = ops::reduce(OpId::Sum, ops::cast(is_zero, DType::Int64), dims, true);
  Tensor lone_zero = binary(OpId::LogicalAnd, binary(OpId::Eq, zeros, Scalar(int64_t{1})), is_zero);
  Tensor others = ops::where(binary(OpId::Eq, zeros, Scalar(int64_t{0})), div(p, nonzero),
                             ops::where(lone_zero, p, Scalar(int64_t{0})));
  g[0] = mul(expand_reduced(c.grad, c, v->sizes()), others);
}
// The gradient is shared evenly between equal extreme values, as PyTorch's amax / amin.
void amax_grad(const BackwardContext& c, Grads& g, OpId op) {
  ops::DimList dims = reduced_dims(c, x(c)->ndim());
  Tensor extreme = ops::reduce(op, x(c), dims, true);
  Tensor hit = ops::cast(binary(OpId::Eq, x(c), extreme), x(c)->dtype());
  Tensor count = ops::sum(hit, dims, true);
  g[0] = div(mul(expand_reduced(c.grad, c, x(c)->sizes()), hit), count);
}
DERIVATIVE(Amax) { amax_grad(c, g, OpId::Amax); }
DERIVATIVE(Amin) { amax_grad(c, g, OpId::Amin); }
// The reverse cumulative sum: total - cumsum + g.
DERIVATIVE(Cumsum) {
  int64_t dim = c.attrs[0];
  Tensor total = ops::sum(c.grad, ops::DimList{dim}, true);
  g[0] = add(sub(total, ops::cumsum(c.grad, dim)), c.grad);
}
// Whether a matrix operand is laid out column-major: a transpose of a row-major matrix, as the
// weight.t() of linear is.
bool column_major(const Tensor& t) {
  if (t->ndim() < 2) return false;
  const Layout* l = !t->is_pending() ? &t->array().layout : t->view_info() ? &t->view_info()->relative : nullptr;
  if (!l) return false;
  int64_t n = l->ndim();
  return l->sizes[n - 2] > 1 && l->sizes[n - 1] > 1 && l->strides[n - 2] == 1 && l->strides[n - 1] == l->sizes[n - 2];
}
// The gradient of a column-major operand is computed as the transpose of a row-major product
// (grad @ b^T = (b @ grad^T)^T), so it reaches the tensor the operand is a transpose of in that
// tensor's own row-major order: the kernels that consume a weight's gradient (its accumulation,
// the optimizer step) then read it with unit strides instead of transposing it element by element.
DERIVATIVE(MatMul) {
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  auto t = [](const Tensor& m) { return ops::transpose(m, -2, -1); };
  if (c.needs_grad[0]) g[0] = column_major(a) ? t(ops::matmul(b, t(c.grad))) : ops::matmul(c.grad, t(b));
  if (c.needs_grad[1]) g[1] = column_major(b) ? t(ops::matmul(t(c.grad), a)) : ops::matmul(t(a), c.grad);
}
DERIVATIVE(Cat) {
  int64_t dim = c.attrs[0], start = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    int64_t len = c.inputs[i]->sizes()[dim];
    if (c.needs_grad[i]) g[i] = ops::narrow(c.grad, dim, start, len);
    start += len;
  }
}
std::vector<Tensor> index_tensors(const BackwardContext& c, size_t first) {
  return {c.inputs.begin() + static_cast<std::ptrdiff_t>(first), c.inputs.end()};
}
DERIVATIVE(Index) {
  g[0] = ops::index_put(zeros(x(c)->sizes(), x(c)->dtype(), c.grad), c.attrs[0], index_tensors(c, 1), Arg(c.grad),
                        true);
}
DERIVATIVE(IndexPut) {
  std::vector<Tensor> idx = index_tensors(c, 2);
  bool accumulate = c.attrs[1] != 0;
  if (c.needs_grad[0]) g[0] = accumulate ? c.grad : ops::index_put(c.grad, c.attrs[0], idx, Arg(Scalar(int64_t{0})));
  if (c.needs_grad[1]) g[1] = ops::index(c.grad, c.attrs[0], idx);
}
DERIVATIVE(Gather) {
  g[0] = ops::scatter_add(zeros(x(c)->sizes(), x(c)->dtype(), c.grad), c.attrs[0], c.inputs[1], c.grad);
}
DERIVATIVE(ScatterAdd) {
  g[0] = c.grad;
  if (c.needs_grad[2]) g[2] = ops::gather(c.grad, c.attrs[0], c.inputs[1]);
}
// base with a region replaced by src: the region's gradient goes to src, the rest to base.
DERIVATIVE(ViewScatter) {
  const Tensor& src = c.inputs[1];
  Layout region{Dims(src->sizes()), Dims(c.attrs.begin() + 1, c.attrs.end()), c.attrs[0]};
  Tensor dense = ops::contiguous(c.grad);
  if (c.needs_grad[0])
    g[0] = apply(OpId::ViewScatter, {Arg(dense), Arg(zeros(src->sizes(), src->dtype(), c.grad))}, c.attrs);
  if (c.needs_grad[1]) g[1] = view_of(dense, [&](const Layout& l) -> std::optional<Layout> {
      Layout r = region;
      r.offset += l.offset;
      return r;
    });
}

#undef DERIVATIVE

// A reduction over every dim without keepdim is PyTorch's overload 0 (x.sum()); over listed dims
// overload 1 (x.sum(1)). A 1-d x.sum(0) cannot be told from x.sum() here: it is named as x.sum().
int reduction_overload(const Attrs& attrs, IntSpan input_shape) {
  uint64_t all = input_shape.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << input_shape.size()) - 1;
  bool every_dim = (static_cast<uint64_t>(attrs[0]) & all) == all;
  return every_dim && attrs[1] == 0 ? 0 : 1;
}

}  // namespace

std::string backward_name(OpId op, const Attrs& attrs, uint64_t tensor_args, IntSpan input_shape, DType input_dtype,
                          DType out_dtype) {
  bool first_tensor = tensor_args & 1, second_tensor = tensor_args & 2;
  switch (op) {
    case OpId::Log1p: return "Log1PBackward0";
    case OpId::GeluTanh: return "GeluBackward0";  // gelu(approximate="tanh"): the same PyTorch op
    case OpId::Square: return "PowBackward0";     // PyTorch's square is pow(x, 2)
    case OpId::Cast: return input_dtype == out_dtype ? "CloneBackward0" : "ToCopyBackward0";
    case OpId::Sum: return "SumBackward" + std::to_string(reduction_overload(attrs, input_shape));
    case OpId::Prod: return "ProdBackward" + std::to_string(reduction_overload(attrs, input_shape));
    // pow(Tensor, Scalar) 0, pow(Tensor, Tensor) 1, pow(Scalar, Tensor) 2.
    case OpId::Pow: return "PowBackward" + std::string(!first_tensor ? "2" : second_tensor ? "1" : "0");
    case OpId::Remainder: return first_tensor && second_tensor ? "RemainderBackward1" : "RemainderBackward0";
    default: return std::string(op_name(op)) + "Backward0";
  }
}

namespace {

const bool registered = [] {
  struct Entry {
    OpId op;
    void (*fn)(const BackwardContext&, Grads&);
  };
  const Entry entries[] = {
      {OpId::Neg, d_Neg}, {OpId::Abs, d_Abs}, {OpId::Exp, d_Exp}, {OpId::Exp2, d_Exp2}, {OpId::Log, d_Log},
      {OpId::Log2, d_Log2}, {OpId::Log1p, d_Log1p}, {OpId::Expm1, d_Expm1}, {OpId::Sqrt, d_Sqrt},
      {OpId::Rsqrt, d_Rsqrt}, {OpId::Sin, d_Sin}, {OpId::Cos, d_Cos}, {OpId::Tan, d_Tan}, {OpId::Tanh, d_Tanh},
      {OpId::Sigmoid, d_Sigmoid}, {OpId::Relu, d_Relu}, {OpId::Gelu, d_Gelu}, {OpId::GeluTanh, d_GeluTanh},
      {OpId::Silu, d_Silu}, {OpId::Softplus, d_Softplus}, {OpId::Erf, d_Erf}, {OpId::Floor, d_Zero},
      {OpId::Ceil, d_Zero}, {OpId::Round, d_Zero}, {OpId::Sign, d_Zero}, {OpId::Reciprocal, d_Reciprocal},
      {OpId::Square, d_Square}, {OpId::NanToNum, d_NanToNum}, {OpId::Cast, d_Cast}, {OpId::Add, d_Add},
      {OpId::Sub, d_Sub}, {OpId::Mul, d_Mul}, {OpId::Div, d_Div}, {OpId::Pow, d_Pow}, {OpId::Maximum, d_Maximum},
      {OpId::Minimum, d_Minimum}, {OpId::Remainder, d_Remainder}, {OpId::Where, d_Where}, {OpId::Sum, d_Sum},
      {OpId::Prod, d_Prod}, {OpId::Amax, d_Amax}, {OpId::Amin, d_Amin}, {OpId::Cumsum, d_Cumsum},
      {OpId::MatMul, d_MatMul}, {OpId::Cat, d_Cat}, {OpId::Index, d_Index}, {OpId::IndexPut, d_IndexPut},
      {OpId::Gather, d_Gather}, {OpId::ScatterAdd, d_ScatterAdd}, {OpId::ViewScatter, d_ViewScatter},
  };
  for (const Entry& e : entries) define_backward(e.op, e.fn);
  return true;
}();

}  // namespace
}  // namespace loom
