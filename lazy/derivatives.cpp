// The derivatives of the primitive ops, written once in loom ops: each runs eagerly on eager
// tensors and records lazily on lazy ones, so in lazy mode the backward pass joins the trace.
// Gradients are returned at the output's shape; autograd sums them back to each input's shape
// (undoing broadcasting) and casts them to its dtype.
//
// Each derivative is registered with the values it reads (SavedValues, lazy/op.h): only those
// are saved. They are the values PyTorch's formulas read (the result for exp, tanh, sqrt, relu,
// ...; the input elsewhere), so that an in-place write after the op breaks its gradient exactly
// where it breaks PyTorch's.
#include <cmath>
#include <limits>
#include <string>

#include "lazy/collectives.h"
#include "lazy/derivatives.h"
#include "lazy/ops_movement.h"
#include "lazy/statistics.h"

namespace loom {
namespace {

using namespace derivative;
using collectives::ReduceOp;
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

DERIVATIVE(Neg) { g[0] = unary(OpId::Neg, c.grad); }
DERIVATIVE(Abs) { g[0] = mul(c.grad, unary(OpId::Sign, x(c))); }
DERIVATIVE(Exp) { g[0] = mul(c.grad, result(c)); }
DERIVATIVE(Exp2) { g[0] = mul(c.grad, mul(result(c), Scalar(kLn2))); }
DERIVATIVE(Log) { g[0] = div(c.grad, x(c)); }
DERIVATIVE(Log2) { g[0] = div(c.grad, mul(x(c), Scalar(kLn2))); }
DERIVATIVE(Log1p) { g[0] = div(c.grad, add(x(c), Scalar(int64_t{1}))); }
DERIVATIVE(Expm1) { g[0] = mul(c.grad, add(result(c), Scalar(int64_t{1}))); }
DERIVATIVE(Sqrt) { g[0] = div(c.grad, mul(result(c), Scalar(int64_t{2}))); }
DERIVATIVE(Rsqrt) { g[0] = mul(c.grad, mul(ops::pow(result(c), Scalar(int64_t{3})), Scalar(-0.5))); }
DERIVATIVE(Sin) { g[0] = mul(c.grad, unary(OpId::Cos, x(c))); }
DERIVATIVE(Cos) { g[0] = mul(c.grad, unary(OpId::Neg, unary(OpId::Sin, x(c)))); }
DERIVATIVE(Tan) {
  const Tensor& t = result(c);
  g[0] = mul(c.grad, add(mul(t, t), Scalar(int64_t{1})));
}
DERIVATIVE(Tanh) {
  const Tensor& t = result(c);
  g[0] = mul(c.grad, sub(Scalar(int64_t{1}), mul(t, t)));
}
DERIVATIVE(Sigmoid) {
  const Tensor& s = result(c);
  g[0] = mul(c.grad, mul(s, sub(Scalar(int64_t{1}), s)));
}
DERIVATIVE(Relu) { g[0] = mask(binary(OpId::Gt, result(c), Scalar(int64_t{0})), c.grad); }
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
// floor division (div(rounding_mode='floor'), floor_divide, //) is piecewise constant in both
// operands: PyTorch's result still requires grad and every gradient is zero (a loss that goes
// through it can be differentiated); the engine reduces each one to its input's shape.
DERIVATIVE(ZeroBinary) {
  g[0] = zeros(c.out_shape, c.out_dtype, c.grad);
  if (c.needs_grad.size() > 1 && c.needs_grad[1]) g[1] = g[0];
}
DERIVATIVE(Reciprocal) {
  const Tensor& r = result(c);
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
// d/da a^b = b a^(b-1) (0 where b = 0, even at a = 0 where the formula is 0 * inf, as PyTorch);
// d/db a^b = a^b ln a (0 where a = 0 and b >= 0, as PyTorch).
DERIVATIVE(Pow) {
  Arg a = in(c, 0), b = in(c, 1);
  if (c.needs_grad[0]) {
    if (!b.is_tensor() && b.scalar.as_double() == 0.0) g[0] = zeros(c.out_shape, c.out_dtype, c.grad);
    else g[0] = mul(c.grad, mul(b, ops::pow(a, b.is_tensor() ? Arg(sub(b, Scalar(int64_t{1})))
                                                             : Arg(Scalar(b.scalar.as_double() - 1.0)))));
    if (b.is_tensor()) g[0] = ops::where(binary(OpId::Eq, b, Scalar(int64_t{0})), Scalar(int64_t{0}), g[0]);
  }
  if (c.needs_grad[1]) {
    Tensor value = mul(result(c), a.is_tensor() ? Arg(unary(OpId::Log, Tensor(a.tensor)))
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
  const Tensor& cond = saved(c, 0);
  if (c.needs_grad[1]) g[1] = mask(cond, c.grad);
  if (c.needs_grad[2]) g[2] = ops::where(cond, Scalar(int64_t{0}), c.grad);
}

DERIVATIVE(Sum) { g[0] = expand_reduced(c.grad, c, c.shapes[0]); }
// d/dx_i prod(x) is the product of the other elements of x_i's slice: result / x_i without zeros
// in the slice (PyTorch's formula there, which reads the result); with one zero, the product of
// the nonzero elements at the zero and 0 elsewhere; with more, 0 everywhere (as PyTorch's
// prod_backward). The case is chosen per slice by counting its zeros, not by a branch on the
// data, which a lazy trace cannot have.
DERIVATIVE(Prod) {
  const Tensor& v = x(c);
  ops::DimList dims = reduced_dims(c, v->ndim());
  Tensor is_zero = binary(OpId::Eq, v, Scalar(int64_t{0}));
  Tensor nonzero = ops::where(is_zero, Scalar(int64_t{1}), v);
  Tensor p = ops::reduce(OpId::Prod, nonzero, dims, true);  // of the nonzero elements
  Tensor zeros = ops::reduce(OpId::Sum, ops::cast(is_zero, DType::Int64), dims, true);
  Tensor lone_zero = binary(OpId::LogicalAnd, binary(OpId::Eq, zeros, Scalar(int64_t{1})), is_zero);
  Tensor others = ops::where(binary(OpId::Eq, zeros, Scalar(int64_t{0})),
                             div(expand_reduced(result(c), c, v->sizes()), nonzero),
                             ops::where(lone_zero, p, Scalar(int64_t{0})));
  g[0] = mul(expand_reduced(c.grad, c, v->sizes()), others);
}
// The gradient is shared evenly between equal extreme values, as PyTorch's amax / amin.
void amax_grad(const BackwardContext& c, Grads& g) {
  ops::DimList dims = reduced_dims(c, x(c)->ndim());
  Tensor extreme = expand_reduced(result(c), c, x(c)->sizes());
  Tensor hit = ops::cast(binary(OpId::Eq, x(c), extreme), x(c)->dtype());
  Tensor count = ops::sum(hit, dims, true);
  g[0] = div(mul(expand_reduced(c.grad, c, x(c)->sizes()), hit), count);
}
DERIVATIVE(Amax) { amax_grad(c, g); }
DERIVATIVE(Amin) { amax_grad(c, g); }
// The reverse cumulative sum: total - cumsum + g.
DERIVATIVE(Cumsum) {
  int64_t dim = c.attrs[0];
  Tensor total = ops::sum(c.grad, ops::DimList{dim}, true);
  g[0] = add(sub(total, ops::cumsum(c.grad, dim)), c.grad);
}
// d out_j / d x_i = out_j / x_i for i <= j while no element up to j is 0 (PyTorch's formula:
// the reversed cumulative sum of grad * out, over x). Past a slice's first zero every later
// product is 0, so only the zero itself gets a gradient: the reversed cumulative sum of grad times
// the products with that zero replaced by 1. Later elements get 0. Chosen per element with
// where()s (a lazy trace has no branches on data).
DERIVATIVE(Cumprod) {
  int64_t dim = c.attrs[0];
  const Tensor& v = x(c);
  if (v->ndim() == 0) {
    g[0] = c.grad;
    return;
  }
  auto reversed_cumsum = [dim](const Tensor& t) {
    return ops::flip(ops::cumsum(ops::flip(t, Dims{dim}), dim), Dims{dim});
  };
  Tensor zero = binary(OpId::Eq, v, Scalar(int64_t{0}));
  Tensor zeros_so_far = ops::cumsum(ops::cast(zero, DType::Int64), dim);
  Tensor before = binary(OpId::Eq, zeros_so_far, Scalar(int64_t{0}));
  Tensor first_zero = binary(OpId::LogicalAnd, zero, binary(OpId::Eq, zeros_so_far, Scalar(int64_t{1})));
  Tensor upto_zero = div(reversed_cumsum(mul(c.grad, result(c))), ops::where(zero, Scalar(int64_t{1}), v));
  Tensor skipping = ops::cumprod(ops::where(first_zero, Scalar(int64_t{1}), v), dim);
  Tensor at_zero = reversed_cumsum(mul(c.grad, skipping));
  g[0] = ops::where(before, upto_zero, ops::where(first_zero, at_zero, Scalar(int64_t{0})));
}
// d out_j / d x_i = exp(x_i - out_j) for i <= j: the gradient is exp(x_i) times a reversed sum of
// grad_j exp(-out_j), summed in log space (a reversed logcumsumexp) separately for the positive
// and negative parts of grad, so nothing overflows. The dtype's lowest number stands for log(0)
// (-inf would make -inf - -inf = nan where out is -inf).
DERIVATIVE(Logcumsumexp) {
  int64_t dim = c.attrs[0];
  const Tensor& v = x(c);
  if (v->ndim() == 0) {
    g[0] = c.grad;
    return;
  }
  auto reversed = [dim](const Tensor& t) {
    return ops::flip(ops::logcumsumexp(ops::flip(t, Dims{dim}), dim), Dims{dim});
  };
  Scalar lowest(c.grad->dtype() == DType::Float64 ? std::numeric_limits<double>::lowest()
                                                   : static_cast<double>(std::numeric_limits<float>::lowest()));
  if (c.grad->dtype() == DType::Float16) lowest = Scalar(-65504.0);
  if (c.grad->dtype() == DType::BFloat16) lowest = Scalar(-3.3895313892515355e38);
  Tensor log_abs = unary(OpId::Log, unary(OpId::Abs, c.grad));
  auto part = [&](OpId sign) {
    Tensor log_part = ops::where(binary(sign, c.grad, Scalar(int64_t{0})), log_abs, lowest);
    return unary(OpId::Exp, add(reversed(sub(log_part, result(c))), v));
  };
  g[0] = sub(part(OpId::Gt), part(OpId::Lt));
}
// The gradient of a column-major operand is computed as the transpose of a row-major product
// (grad @ b^T = (b @ grad^T)^T), so it reaches the tensor the operand is a transpose of in that
// tensor's own row-major order: the kernels that consume a weight's gradient (its accumulation,
// the optimizer step) then read it with unit strides instead of transposing it element by element.
DERIVATIVE(MatMul) {
  auto t = [](const Tensor& m) { return ops::transpose(m, -2, -1); };
  bool a_column_major = c.column_major & 1, b_column_major = c.column_major & 2;
  if (c.needs_grad[0]) g[0] = a_column_major ? t(ops::matmul(saved(c, 1), t(c.grad))) : ops::matmul(c.grad, t(saved(c, 1)));
  if (c.needs_grad[1]) g[1] = b_column_major ? t(ops::matmul(t(c.grad), saved(c, 0))) : ops::matmul(t(saved(c, 0)), c.grad);
}
DERIVATIVE(Cat) {
  int64_t dim = c.attrs[0], start = 0;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    int64_t len = c.shapes[i][dim];
    if (c.needs_grad[i]) g[i] = ops::narrow(c.grad, dim, start, len);
    start += len;
  }
}
std::vector<Tensor> index_tensors(const BackwardContext& c, size_t first) {
  std::vector<Tensor> out;
  for (size_t i = first; i < c.inputs.size(); ++i) out.push_back(saved(c, i));
  return out;
}
DERIVATIVE(Index) {
  g[0] = ops::index_put(zeros(c.shapes[0], c.dtypes[0], c.grad), c.attrs[0], index_tensors(c, 1), Arg(c.grad), true);
}
DERIVATIVE(IndexPut) {
  std::vector<Tensor> idx = index_tensors(c, 2);
  bool accumulate = c.attrs[1] != 0;
  if (c.needs_grad[0]) g[0] = accumulate ? c.grad : ops::index_put(c.grad, c.attrs[0], idx, Arg(Scalar(int64_t{0})));
  if (c.needs_grad[1]) g[1] = ops::index(c.grad, c.attrs[0], idx);
}
DERIVATIVE(Gather) {
  g[0] = ops::scatter_add(zeros(c.shapes[0], c.dtypes[0], c.grad), c.attrs[0], saved(c, 1), c.grad);
}
// The gradient of a scatter's src (input 2), which may be larger than its index: `at_index` (the
// index's shape) at the index's positions, 0 elsewhere.
Tensor src_gradient(const BackwardContext& c, const Tensor& at_index) {
  IntSpan src = c.shapes[2];
  if (Dims(at_index->sizes()) == Dims(src)) return at_index;
  Layout corner{Dims(at_index->sizes()), contiguous_strides(src), 0};
  return ops::view_scatter(zeros(src, c.dtypes[2], c.grad), corner, at_index);
}
DERIVATIVE(ScatterAdd) {
  g[0] = c.grad;
  if (c.needs_grad[2]) g[2] = src_gradient(c, ops::gather(c.grad, c.attrs[0], saved(c, 1)));
}
// base with a region replaced by src: the region's gradient goes to src, the rest to base.
DERIVATIVE(ViewScatter) {
  Layout region{c.shapes[1], Dims(c.attrs.begin() + 1, c.attrs.end()), c.attrs[0]};
  Tensor dense = ops::contiguous(c.grad);
  if (c.needs_grad[0])
    g[0] = apply(OpId::ViewScatter, {Arg(dense), Arg(zeros(c.shapes[1], c.dtypes[1], c.grad))}, c.attrs);
  if (c.needs_grad[1]) g[1] = view_of(dense, [&](const Layout& l) -> std::optional<Layout> {
      Layout r = region;
      r.offset += l.offset;
      return r;
    });
}

// Collectives (lazy/collectives.h): every rank runs the same backward, so the collectives of
// the backward pass match across ranks as those of the forward pass do. Only sums (and means) are
// differentiable, as in torch.distributed.nn.
ReduceOp differentiable(const BackwardContext& c, const char* what) {
  auto op = static_cast<ReduceOp>(c.attrs[1]);
  LOOM_CHECK(op == ReduceOp::Sum || op == ReduceOp::Avg, Runtime, what, " with ReduceOp.", distributed::reduce_op_name(op),
             " is not differentiable (only SUM and AVG are)");
  return op;
}
DERIVATIVE(AllReduce) { g[0] = collectives::all_reduce(c.grad, c.attrs[0], differentiable(c, "all_reduce")); }
DERIVATIVE(Broadcast) {
  // Every rank's gradient flows to the source's input.
  Tensor sum = collectives::all_reduce(c.grad, c.attrs[0], ReduceOp::Sum);
  g[0] = distributed::group(c.attrs[0])->rank() == c.attrs[1] ? sum : zeros(c.shapes[0], c.grad->dtype(), c.grad);
}
DERIVATIVE(AllGather) {
  g[0] = ops::reshape(collectives::reduce_scatter(c.grad, c.attrs[0], ReduceOp::Sum), c.shapes[0]);
}
DERIVATIVE(ReduceScatter) {
  Tensor all = collectives::all_gather(c.grad, c.attrs[0]);
  if (differentiable(c, "reduce_scatter") == ReduceOp::Avg)
    all = div(all, Scalar(static_cast<int64_t>(distributed::group(c.attrs[0])->size())));
  g[0] = ops::reshape(all, c.shapes[0]);
}
// ---- scatters by replacement and by reduction (lazy/ops_movement.h), PyTorch's formulas ----
// Scatter: the written positions take nothing back to x; src gets the gradient at its targets.
DERIVATIVE(Scatter) {
  const Tensor& index = saved(c, 1);
  if (c.needs_grad[0]) g[0] = ops::scatter(c.grad, c.attrs[0], index, Arg(Scalar(int64_t{0})));
  if (c.needs_grad[2]) g[2] = src_gradient(c, ops::gather(c.grad, c.attrs[0], index));
}
// ScatterReduce: amax / amin share the gradient evenly among the elements equal to the result;
// prod divides the result by each factor, with the zeros handled apart (the product of the
// others, computed with the zero replaced by 1).
DERIVATIVE(ScatterReduce) {
  int64_t dim = c.attrs[0], kind = c.attrs[1];
  bool include_self = c.attrs[2] != 0;
  const Tensor &self = x(c), &index = saved(c, 1), &src = saved(c, 2), &out = result(c);
  DType dtype = c.dtypes[0];
  auto reduce_again = [&](const Tensor& s, const Tensor& t) {
    return ops::scatter_reduce(s, dim, index, t, kind == ops::kScatterProd ? "prod" : kind == ops::kScatterAmax ? "amax" : "amin",
                               include_self);
  };
  Tensor grad_self, grad_src;
  if (kind == ops::kScatterProd) {
    Tensor self_zero = binary(OpId::Eq, self, Scalar(int64_t{0}));
    Tensor masked_self = ops::where(self_zero, Scalar(int64_t{1}), self);
    grad_self = div(mul(c.grad, reduce_again(masked_self, src)), masked_self);
    Tensor src_zero = binary(OpId::Eq, src, Scalar(int64_t{0}));
    Tensor zeros_at = ops::gather(ops::scatter_add(zeros(c.shapes[0], dtype, c.grad), dim, index, ops::cast(src_zero, dtype)),
                                  dim, index);
    Tensor single_zero = binary(OpId::LogicalAnd, src_zero, binary(OpId::Eq, zeros_at, Scalar(int64_t{1})));
    Tensor masked_src = ops::where(single_zero, Scalar(int64_t{1}), src);
    Tensor others = ops::gather(mul(c.grad, reduce_again(self, masked_src)), dim, index);
    Tensor divided = div(ops::gather(mul(c.grad, out), dim, index), ops::where(src_zero, Scalar(int64_t{1}), src));
    grad_src = ops::where(single_zero, others, divided);
  } else {
    Tensor value = ops::gather(out, dim, index);
    Tensor self_is = binary(OpId::Eq, self, out), src_is = binary(OpId::Eq, src, value);
    Tensor count = ops::scatter_add(ops::cast(self_is, dtype), dim, index, ops::cast(src_is, dtype));
    Tensor share = div(c.grad, count);
    grad_self = mask(self_is, share);
    grad_src = mask(src_is, ops::gather(share, dim, index));
  }
  if (!include_self) grad_self = ops::scatter(grad_self, dim, index, Arg(Scalar(int64_t{0})));
  if (c.needs_grad[0]) g[0] = grad_self;
  if (c.needs_grad[2]) g[2] = src_gradient(c, grad_src);
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

bool is_column_major(const TensorImpl& t) noexcept {
  if (t.ndim() < 2) return false;
  const Layout* l = t.known_layout();
  if (!l) return false;
  int64_t n = l->ndim();
  return l->sizes[n - 2] > 1 && l->sizes[n - 1] > 1 && l->strides[n - 2] == 1 && l->strides[n - 1] == l->sizes[n - 2];
}

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
    case OpId::Copysign: return second_tensor ? "CopysignBackward0" : "CopysignBackward1";
    case OpId::Fmod: return second_tensor ? "FmodBackward1" : "FmodBackward0";
    // xlogy(Tensor, Tensor) 0, xlogy(Scalar, Tensor) 1, xlogy(Tensor, Scalar) 2.
    case OpId::Xlogy: return "XlogyBackward" + std::string(!first_tensor ? "1" : second_tensor ? "0" : "2");
    // the special functions: PyTorch's names (torch.special's ops are special_*)
    case OpId::I0e: return "SpecialI0EBackward0";
    case OpId::I1: return "SpecialI1Backward0";
    case OpId::I1e: return "SpecialI1EBackward0";
    case OpId::Erfcx: return "SpecialErfcxBackward0";
    // zeta(Tensor, Tensor) 0, zeta(Scalar, Tensor) 1, zeta(Tensor, Scalar) 2.
    case OpId::Zeta: return "SpecialZetaBackward" + std::string(!first_tensor ? "1" : second_tensor ? "0" : "2");
    // matmul's primitive is PyTorch's mm for matrices and bmm for batches.
    case OpId::MatMul: return input_shape.size() == 2 ? "MmBackward0" : "BmmBackward0";
    // the LAPACK steps (lazy/ops_lapack.cpp): one primitive behind several PyTorch functions
    case OpId::LinalgCholeskyEx: return attrs[1] == 1 ? "CholeskyBackward0" : "LinalgCholeskyExBackward0";
    case OpId::LinalgSolveEx: return attrs[1] ? "LinalgInvExBackward0" : "LinalgSolveExBackward0";
    case OpId::LinalgSolveTriangular: return attrs[2] ? "TriangularSolveBackward0" : "LinalgSolveTriangularBackward0";
    case OpId::LinalgDet: return attrs[0] ? "LinalgSlogdetBackward0" : "LinalgDetBackward0";
    case OpId::LinalgEigh: return "LinalgEighBackward0";
    case OpId::LinalgLu: return attrs[0] ? "LinalgLuBackward0" : "LinalgLuFactorExBackward0";
    default: return std::string(op_name(op)) + "Backward0";
  }
}

namespace {
// The derivatives with the values each one reads (lazy/op.h SavedValues).
const bool registered = [] {
  struct Entry {
    OpId op;
    void (*fn)(const BackwardContext&, Grads&);
    SavedValues saves;
  };
  const Entry entries[] = {
      {OpId::Neg, d_Neg, kNothing}, {OpId::Abs, d_Abs, kSelf}, {OpId::Exp, d_Exp, kResult},
      {OpId::Exp2, d_Exp2, kResult}, {OpId::Log, d_Log, kSelf}, {OpId::Log2, d_Log2, kSelf},
      {OpId::Log1p, d_Log1p, kSelf}, {OpId::Expm1, d_Expm1, kResult}, {OpId::Sqrt, d_Sqrt, kResult},
      {OpId::Rsqrt, d_Rsqrt, kResult}, {OpId::Sin, d_Sin, kSelf}, {OpId::Cos, d_Cos, kSelf},
      {OpId::Tan, d_Tan, kResult}, {OpId::Tanh, d_Tanh, kResult}, {OpId::Sigmoid, d_Sigmoid, kResult},
      {OpId::Relu, d_Relu, kResult}, {OpId::Gelu, d_Gelu, kSelf}, {OpId::GeluTanh, d_GeluTanh, kSelf},
      {OpId::Silu, d_Silu, kSelf}, {OpId::Softplus, d_Softplus, kSelf}, {OpId::Erf, d_Erf, kSelf},
      // floor, ceil, round and sign have a zero gradient: output shape and dtype are enough
      {OpId::Floor, d_Zero, kNothing}, {OpId::Ceil, d_Zero, kNothing}, {OpId::Round, d_Zero, kNothing},
      {OpId::Sign, d_Zero, kNothing}, {OpId::FloorDiv, d_ZeroBinary, kNothing}, {OpId::Reciprocal, d_Reciprocal, kResult}, {OpId::Square, d_Square, kSelf},
      {OpId::NanToNum, d_NanToNum, kSelf}, {OpId::Cast, d_Cast, kNothing}, {OpId::Add, d_Add, kNothing},
      {OpId::Sub, d_Sub, kNothing},
      {OpId::Mul, d_Mul, {.inputs_for = {kIn1, kIn0}}},
      {OpId::Div, d_Div, {.inputs_for = {kIn1, kIn0 | kIn1}}},
      // the exponent's gradient reads the result: a^b ln a
      {OpId::Pow, d_Pow, {.inputs_for = {kIn0 | kIn1, kIn0 | kIn1}, .result_for = 2}},
      {OpId::Maximum, d_Maximum, kBoth}, {OpId::Minimum, d_Minimum, kBoth},
      {OpId::Remainder, d_Remainder, {.inputs_for = {0, kIn0 | kIn1}}},
      {OpId::Where, d_Where, {.inputs_for = {0, kIn0, kIn0}}},  // the condition
      {OpId::Sum, d_Sum, kNothing}, {OpId::Prod, d_Prod, {.inputs_for = {kIn0}, .result_for = 1}},
      {OpId::Amax, d_Amax, {.inputs_for = {kIn0}, .result_for = 1}},
      {OpId::Amin, d_Amin, {.inputs_for = {kIn0}, .result_for = 1}}, {OpId::Cumsum, d_Cumsum, kNothing},
      {OpId::Cumprod, d_Cumprod, {.inputs_for = {kIn0}, .result_for = 1}},
      {OpId::Logcumsumexp, d_Logcumsumexp, {.inputs_for = {kIn0}, .result_for = 1}},
      {OpId::MatMul, d_MatMul, {.inputs_for = {kIn1, kIn0}, .operand_layouts = true}},
      {OpId::Cat, d_Cat, kNothing},
      {OpId::Index, d_Index, {.inputs_for = {inputs_from(1)}}},                         // the indices
      {OpId::IndexPut, d_IndexPut, {.inputs_for = {inputs_from(2), inputs_from(2)}}},  // the indices
      {OpId::Gather, d_Gather, {.inputs_for = {kIn1}}},                                 // the index
      {OpId::ScatterAdd, d_ScatterAdd, {.inputs_for = {0, 0, kIn1}}},                   // the index
      {OpId::ViewScatter, d_ViewScatter, kNothing},
      {OpId::AllReduce, d_AllReduce, kNothing}, {OpId::Broadcast, d_Broadcast, kNothing},
      {OpId::AllGather, d_AllGather, kNothing}, {OpId::ReduceScatter, d_ReduceScatter, kNothing},
      // scatters by replacement and by reduction
      {OpId::Scatter, d_Scatter, {.inputs_for = {kIn1, 0, kIn1}}},  // the index
      {OpId::ScatterReduce, d_ScatterReduce,
       {.inputs_for = {kIn0 | kIn1 | input_bit(2), 0, kIn0 | kIn1 | input_bit(2)}, .result_for = 1 | 4}},
  };
  for (const Entry& e : entries) define_backward(e.op, e.fn, e.saves);
  return true;
}();

}  // namespace
}  // namespace loom
