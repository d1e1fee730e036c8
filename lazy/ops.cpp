#include "lazy/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "lazy/autograd.h"
#include "lazy/capture.h"
#include "lazy/sync.h"
#include "runtime/error.h"

namespace loom::ops {
namespace {

Tensor apply1(OpId op, const Tensor& x, Attrs attrs = {}) {
  BorrowedArgs<1> args(x);
  return apply(op, args.span(), std::move(attrs));
}

bool is_one(const Scalar& s) { return s.as_double() == 1.0; }

// Bit mask of reduced dims; no dims means all. Raises on duplicates and out-of-range dims.
uint64_t dim_mask(int64_t ndim, const DimList& dims) {
  LOOM_CHECK(ndim <= 64, Runtime, "reductions support at most 64 dims, got ", ndim);
  if (dims.empty()) return ndim == 0 ? 0 : (ndim == 64 ? ~uint64_t{0} : (uint64_t{1} << ndim) - 1);
  uint64_t mask = 0;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim);
    LOOM_CHECK(!(mask >> w & 1), Runtime, "dim ", w, " appears multiple times in the list of dims");
    if (ndim > 0) mask |= uint64_t{1} << w;
  }
  return mask;
}

void require_floating(const Tensor& x, const char* what) {
  LOOM_CHECK(is_floating(x->dtype()), Runtime, what, "(): input dtype should be floating point, but got ",
             dtype_name(x->dtype()));
}

// Removes the reduced dims a keepdim=True result kept as size 1.
Tensor squeeze_dims(const Tensor& x, int64_t ndim, const DimList& dims) {
  uint64_t mask = dim_mask(ndim, dims);
  Tensor out = x;
  for (int64_t d = ndim - 1; d >= 0; --d)
    if (mask >> d & 1) out = squeeze(out, DimList{d});
  return out;
}

Tensor int_tensor_like(int64_t n, const Tensor& like) {
  return arange(n, Scalar(int64_t{0}), Scalar(int64_t{1}), DType::Int64, placement_of(like));
}

// A result that is not a view (a copy) with its backward recorded (only primitive ops are
// recorded by dispatch).
Tensor viewed(const Tensor& x, Tensor out, const char* name, std::function<Tensor(const Tensor&)> backward) {
  record_function(name, *x, *out, std::move(backward));
  return out;
}

// A view of x: view_of(x, transform) (dispatch.h) with its backward recorded, and what autograd
// needs to know of views (lazy/autograd_inplace.cpp): whether it was made in no_grad mode, and the
// version its history is of when it has one. `not_a_view` is the error to raise where the
// transform cannot express the result without a copy (nullptr: copy, as reshape does). A copy is
// not a view: only its backward is recorded.
template <typename Transform>
Tensor make_view(const Tensor& x, Transform&& transform, const char* name, std::function<Tensor(const Tensor&)> backward,
                 const char* not_a_view = nullptr) {
  Tensor out = view_of(x, [&](const Layout& l) {
    std::optional<Layout> v = transform(l);
    LOOM_CHECK(v || !not_a_view, Runtime, not_a_view);
    return v;
  });
  // Integer and bool views never take part in autograd (their writes cannot carry gradients).
  if (out->is_view() && is_floating(out->dtype())) {
    if (!grad_enabled()) out->mark_made_in_no_grad_mode();
    else if (requires_grad(*x)) record_view(*out);
  }
  return viewed(x, std::move(out), name, std::move(backward));
}

std::function<Tensor(const Tensor&)> reshape_backward(const Tensor& x) {
  Dims shape(x->sizes());
  return [shape](const Tensor& g) { return reshape(g, shape); };
}

// A Python-number argument converted to dtype as PyTorch converts its Scalar arguments (alpha,
// value, a clamp bound): raises when it does not fit, then wraps (-1 is 255 in uint8).
Scalar checked_in(DType dtype, Scalar s) {
  s.check_fits(dtype);
  return s.stored_as(dtype);
}

// x * y as a kernel computing in dtype multiplies them: both converted to dtype, integers
// wrapping, floats rounded once to dtype (the product of two float32s is exact in a double).
Scalar product_in(DType dtype, Scalar x, Scalar y) {
  Scalar a = x.stored_as(dtype), b = y.stored_as(dtype);
  if (dtype == DType::Bool) return Scalar(a.as_int() != 0 && b.as_int() != 0);
  if (is_floating(dtype)) return Scalar(a.as_double() * b.as_double()).stored_as(dtype);
  return Scalar(static_cast<int64_t>(static_cast<uint64_t>(a.as_int()) * static_cast<uint64_t>(b.as_int())))
      .stored_as(dtype);
}

// a + alpha * b or a - alpha * b, as PyTorch's add and sub: alpha is a number of the result dtype
// of (a, b), so b is scaled in that dtype (not in its own), and alpha must be representable in it.
Tensor add_scaled(OpId op, const Arg& a, const Arg& b, Scalar alpha) {
  // The default alpha (the integer 1) passes every check and scales nothing: the common case
  // skips computing the result type (a + b is the hottest op of all).
  if (alpha.kind() == ScalarKind::Int && alpha.as_int() == 1) return binary(op, a, b);
  DType r = result_type({a, b});
  LOOM_CHECK(alpha.kind() != ScalarKind::Bool || r == DType::Bool, Runtime,
             "Boolean alpha only supported for Boolean results.");
  LOOM_CHECK(is_floating(r) || !alpha.is_float(), Runtime,
             "For integral input tensors, argument alpha must not be a floating point number.");
  Scalar k = checked_in(r, alpha);
  if (is_one(k)) return binary(op, a, b);
  Arg scaled = b.is_tensor() ? Arg(binary(OpId::Mul, cast(Tensor(b.tensor), r), k)) : Arg(product_in(r, b.scalar, k));
  return binary(op, a, scaled);
}

bool is_bool(const Arg& a) {
  return a.is_tensor() ? a.tensor->dtype() == DType::Bool : a.scalar.kind() == ScalarKind::Bool;
}

}  // namespace

// The backward of a view that selects a region of its input: the gradient lands in that region
// of zeros of the input's shape.
std::function<Tensor(const Tensor&)> region_backward(const Tensor& x, const Layout& region) {
  Dims shape(x->sizes());
  DType dtype = x->dtype();
  return [shape, dtype, region](const Tensor& g) {
    return view_scatter(full(shape, Scalar(int64_t{0}), dtype, {g->device(), g->is_lazy()}), region, g);
  };
}

namespace {

// A view selecting a region of x without overlap (slice, narrow, select): its backward places
// the gradient at that region of zeros, marked so that autograd assembles the gradients of
// several views of x at once (lazy/region_gradients.h).
template <typename Transform>
Tensor region_view(const Tensor& x, Transform&& transform, const char* name) {
  Layout region = *transform(Layout::contiguous(x->sizes()));
  Tensor out = make_view(x, transform, name, region_backward(x, region));
  mark_region_view(*out, region);
  return out;
}

}  // namespace

Tensor strided_view(const Tensor& x, const std::function<std::optional<Layout>(const Layout&)>& layout_of,
                    const char* name, std::function<Tensor(const Tensor&)> backward) {
  return make_view(x, layout_of, name, std::move(backward));
}

Tensor sum_to(const Tensor& grad, IntSpan shape) {
  Tensor g = grad;
  auto extra = g->ndim() - static_cast<int64_t>(shape.size());
  DimList dims;
  for (int64_t d = 0; d < g->ndim(); ++d)
    if (d < extra || (shape[d - extra] == 1 && g->sizes()[d] != 1)) dims.push_back(d);
  if (!dims.empty()) g = sum(g, dims, true);
  if (Dims(g->sizes()) != Dims(shape)) g = reshape(g, shape);
  return g;
}

Tensor detach(const Tensor& x, bool share_version_counter) {
  GradModeGuard no_grad(false);  // restored also when x is an errored lazy tensor and alias raises
  Tensor out = alias(x);
  out->unmark_view(share_version_counter);  // the same data, but not a view: not x's history
  return out;
}

int64_t reduced_count(IntSpan shape, const DimList& dims) {
  uint64_t mask = dim_mask(static_cast<int64_t>(shape.size()), dims);
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    if (mask >> d & 1) n *= shape[d];
  return n;
}

// ---- elementwise ----

Tensor unary(OpId op, const Tensor& x) { return apply1(op, x); }
Tensor binary(OpId op, const Arg& a, const Arg& b) {
  BorrowedArgs<2> args(a, b);
  return apply(op, args.span());
}

// PyTorch's square is pow(x, 2): a bool input promotes with the int exponent to int64.
Tensor square(const Tensor& x) { return unary(OpId::Square, x->dtype() == DType::Bool ? cast(x, DType::Int64) : x); }

Tensor add(const Arg& a, const Arg& b, Scalar alpha) { return add_scaled(OpId::Add, a, b, alpha); }

// PyTorch rejects subtraction with any bool operand (a bool tensor or a Python bool), before
// alpha is looked at: a - b on masks is almost always meant as a logical op.
Tensor sub(const Arg& a, const Arg& b, Scalar alpha) {
  LOOM_CHECK(!is_bool(a) || !is_bool(b), Runtime, "Subtraction, the `-` operator, with two bool tensors is not "
             "supported. Use the `^` or `logical_xor()` operator instead.");
  LOOM_CHECK(!is_bool(a) && !is_bool(b), Runtime, "Subtraction, the `-` operator, with a bool tensor is not "
             "supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  return add_scaled(OpId::Sub, a, b, alpha);
}

Tensor mul(const Arg& a, const Arg& b) { return binary(OpId::Mul, a, b); }

Tensor div(const Arg& a, const Arg& b, std::string_view rounding_mode) {
  if (rounding_mode.empty()) return binary(OpId::Div, a, b);
  if (rounding_mode == "floor") return binary(OpId::FloorDiv, a, b);
  LOOM_CHECK(rounding_mode == "trunc", Runtime, "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
             rounding_mode, "'");
  // Written with floor division below; an error must still name the op the user called.
  LOOM_CHECK(!is_bool(a) || !is_bool(b), Runtime, "\"div_trunc\" not implemented for 'Bool'");
  Tensor floored = binary(OpId::FloorDiv, a, b);
  if (is_floating(floored->dtype())) {
    Tensor q = binary(OpId::Div, a, b);
    return where(binary(OpId::Lt, q, Scalar(int64_t{0})), unary(OpId::Ceil, q), unary(OpId::Floor, q));
  }
  // Integers: C's truncation is floor division plus one when the signs differ and it is inexact.
  // A Python-number operand's sign is the one it has in the result dtype (-7 is 249 in uint8).
  DType r = floored->dtype();
  auto negative = [r](const Arg& x) -> Arg {
    if (x.is_tensor()) return Arg(binary(OpId::Lt, x, Scalar(int64_t{0})));
    return Arg(Scalar(x.scalar.stored_as(r).as_int() < 0));
  };
  Tensor inexact = binary(OpId::Ne, binary(OpId::Remainder, a, b), Scalar(int64_t{0}));
  Tensor signs_differ = binary(OpId::Ne, negative(a), negative(b));
  return binary(OpId::Add, floored, cast(binary(OpId::LogicalAnd, inexact, signs_differ), r));
}

Tensor pow(const Arg& a, const Arg& b) {
  if (a.is_tensor() && !b.is_tensor() && is_integral(a.tensor->dtype(), true) && !b.scalar.is_float()) {
    LOOM_CHECK(b.scalar.as_int() >= 0, Runtime, "Integers to negative integer powers are not allowed.");
  }
  // PyTorch's pow kernels for integers and float16 take a number operand in the result dtype,
  // with an overflow check (float32 and float64 ones take it as a double).
  DType r = result_type({a, b});
  if (is_integral(r, true) || r == DType::Float16) {
    for (const Arg* x : {&a, &b})
      if (!x->is_tensor()) x->scalar.check_fits(r);
  }
  // A float32 power takes its number exponent as a double in PyTorch; loom's kernel takes it as a
  // float32, where a nonzero exponent below float32's range (-1e-320) rounds to 0 and 0 ** it gave
  // 1, not inf. The least float32 of the same sign gives the double's result for every base:
  // x ** tiny is 1 for finite nonzero x either way, 0 / inf at 0 and inf, nan for x < 0.
  if (a.is_tensor() && !b.is_tensor() && b.scalar.is_float() && r == DType::Float32) {
    double e = b.scalar.as_double();
    if (e != 0.0 && static_cast<float>(e) == 0.0f)
      return binary(OpId::Pow, a, Scalar(std::copysign(static_cast<double>(std::numeric_limits<float>::denorm_min()), e)));
  }
  return binary(OpId::Pow, a, b);
}

Tensor where(const Tensor& cond, const Arg& a, const Arg& b) { return apply(OpId::Where, {Arg(cond), a, b}); }

// clamp's value, without a gradient of its own: max(x, min), then min(., max).
static Tensor clamped(const Tensor& x, const std::optional<Arg>& min, const std::optional<Arg>& max) {
  Tensor out = x;
  if (min) out = binary(OpId::Maximum, out, *min);
  if (max) out = binary(OpId::Minimum, out, *max);
  return out;
}

Tensor clamp(const Tensor& x, const std::optional<Arg>& min, const std::optional<Arg>& max) {
  LOOM_CHECK(min || max, Runtime, "torch.clamp: At least one of 'min' or 'max' must not be None");
  // A number bound is converted to the result dtype with an overflow check, as in PyTorch, whose
  // kernels for number bounds have no bool version.
  for (const std::optional<Arg>& bound : {min, max}) {
    if (!bound || bound->is_tensor()) continue;
    DType r = result_type({x, *bound});
    LOOM_CHECK(r != DType::Bool, Runtime, "\"clamp\" not implemented for 'Bool'");
    bound->scalar.check_fits(r);
  }
  auto tracked = [](const std::optional<Arg>& a) { return a && a->is_tensor() && requires_grad(*a->tensor); };
  if (!grad_enabled() || !(requires_grad(*x) || tracked(min) || tracked(max))) return clamped(x, min, max);
  // With autograd, PyTorch's gradient rather than maximum / minimum's (which split it where x
  // equals a bound): x gets it where min <= x <= max, boundaries included; a tensor min where
  // x < min < max; a tensor max where x > max or max < min. Each case selects the tensor whose
  // value clamp returns there, so the value is clamp's; the rest (nan) is clamp's value, detached.
  Tensor value;
  {
    GradModeGuard no_grad(false);
    value = clamped(x, min, max);
  }
  Tensor out = value;
  if (tracked(max)) {
    Tensor above = binary(OpId::Gt, x, *max);
    if (min) above = binary(OpId::LogicalOr, above, binary(OpId::Lt, *max, *min));
    out = where(binary(OpId::LogicalAnd, above, binary(OpId::Eq, value, *max)), *max, out);
  }
  if (tracked(min)) {
    Tensor below = binary(OpId::Lt, x, *min);
    if (max) below = binary(OpId::LogicalAnd, below, binary(OpId::Lt, *min, *max));
    out = where(below, *min, out);
  }
  Tensor inside;
  if (min) inside = binary(OpId::Ge, x, *min);
  if (max) {
    Tensor under_max = binary(OpId::Le, x, *max);
    inside = inside ? binary(OpId::LogicalAnd, inside, under_max) : under_max;
  }
  return where(inside, x, out);
}

namespace {

// Phi(x), the standard normal CDF, as the Gelu primitive computes it: (erf(x / sqrt 2) + 1) / 2.
Tensor normal_cdf(const Tensor& x) {
  return mul(add(unary(OpId::Erf, mul(x, Scalar(0.7071067811865476))), Scalar(int64_t{1})), Scalar(0.5));
}

}  // namespace

// With autograd, exact GELU is x * Phi(x) as a composite that keeps Phi(x) for its derivative
// Phi(x) + x phi(x): the primitive's derivative computed erf again, which was half of the
// backward kernel's time in gpt's MLP (the partitioner stores Phi from the forward kernel:
// recomputing an erf costs more than reading the value back, fusion/partition.cpp). The same
// values as the primitive's: x * ((e + 1) * 0.5) rounds as (0.5 * x) * (e + 1), both halvings
// exact. float16 and bfloat16 keep the primitive, which computes in float32 and rounds once.
Tensor gelu(const Tensor& x, std::string_view approximate) {
  if (approximate == "none") {
    bool composite = grad_enabled() && requires_grad(*x) &&
                     (x->dtype() == DType::Float32 || x->dtype() == DType::Float64);
    if (!composite) return unary(OpId::Gelu, x);
    Tensor cdf, y;
    {
      GradModeGuard unrecorded(false);
      cdf = normal_cdf(x);
      y = mul(x, cdf);
    }
    record_composite({"GeluBackward0", {x.get()}, 0b1u, false, {cdf}}, *y,
                     [](const Tensor& g, const CompositeSaved& s) -> std::vector<Tensor> {
                       const Tensor& v = s.inputs[0];
                       Tensor phi = s.recompute() ? normal_cdf(v) : s.extras[0];
                       Tensor pdf = mul(unary(OpId::Exp, mul(mul(v, v), Scalar(-0.5))), Scalar(0.3989422804014327));
                       return {mul(g, add(phi, mul(v, pdf)))};
                     });
    return y;
  }
  LOOM_CHECK(approximate == "tanh", Runtime, "approximate argument must be either none or tanh.");
  return unary(OpId::GeluTanh, x);
}

Tensor softplus(const Tensor& x, Scalar beta, Scalar threshold) {
  return apply(OpId::Softplus, {Arg(x), Arg(beta), Arg(threshold)});
}

Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  // Integers and bools have no NaN or infinity: PyTorch returns a copy, ignoring the replacements.
  if (!is_floating(x->dtype())) return clone(x);
  double big = 0;
  switch (x->dtype()) {
    case DType::Float16: big = 65504.0; break;
    case DType::BFloat16: big = 3.3895313892515355e+38; break;
    case DType::Float32: big = std::numeric_limits<float>::max(); break;
    default: big = std::numeric_limits<double>::max(); break;
  }
  return apply(OpId::NanToNum, {Arg(x), Arg(Scalar(nan.value_or(0.0))), Arg(Scalar(posinf.value_or(big))),
                                Arg(Scalar(neginf.value_or(-big)))});
}

// PyTorch's two-sided formula: exact at both ends (weight 0 gives start, 1 gives end). Like its
// kernel, it takes floating tensors of one dtype, and a number weight must fit that dtype.
Tensor lerp(const Tensor& start, const Tensor& end, const Arg& weight) {
  DType d = start->dtype();
  LOOM_CHECK(is_floating(d), Runtime, "\"lerp\" not implemented for '", dtype_info(d).scalar_type_name, "'");
  LOOM_CHECK(end->dtype() == d, Runtime, "expected dtype ", dtype_name(d), " for `end` but got dtype ",
             dtype_name(end->dtype()));
  if (weight.is_tensor())
    LOOM_CHECK(weight.tensor->dtype() == d, Runtime, "expected dtype ", dtype_name(d), " for `weight` but got dtype ",
               dtype_name(weight.tensor->dtype()));
  else
    weight.scalar.check_fits(d);
  Tensor diff = sub(end, start);
  if (!weight.is_tensor()) {
    double w = weight.scalar.as_double();
    if (std::abs(w) < 0.5) return add(start, mul(weight, diff));
    return sub(end, mul(diff, Scalar(1.0 - w)));
  }
  Tensor low = add(start, mul(weight, diff));
  Tensor high = sub(end, mul(diff, sub(Scalar(int64_t{1}), weight)));
  return where(binary(OpId::Lt, unary(OpId::Abs, Tensor(weight.tensor)), Scalar(0.5)), low, high);
}

// addcmul and addcdiv compute input + value * tensor1 (* or /) tensor2 as PyTorch's kernels do:
// everything in the result dtype of the three tensors (value converted to it, unchecked for
// floats in integers: 0.5 becomes 0), multiplying value into tensor1 first.
Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value) {
  DType r = result_type({x, t1, t2});
  LOOM_CHECK(r != DType::Bool, Runtime, "\"addcmul\" not implemented for 'Bool'");
  Scalar v = checked_in(r, value);
  Tensor scaled = is_one(v) ? cast(t1, r) : mul(cast(t1, r), v);
  return binary(OpId::Add, x, mul(scaled, cast(t2, r)));
}

Tensor addcdiv(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value) {
  LOOM_CHECK(!(is_integral(t1->dtype(), true) && is_integral(t2->dtype(), true)), Runtime,
             "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform a "
             "true division of tensor1 and tensor2.");
  DType r = result_type({x, t1, t2});  // floating: tensor1 or tensor2 is
  Scalar v = checked_in(r, value);
  Tensor scaled = is_one(v) ? cast(t1, r) : mul(cast(t1, r), v);
  return binary(OpId::Add, x, div(scaled, cast(t2, r)));
}

Tensor logical_xor(const Arg& a, const Arg& b) {
  auto as_bool = [](const Arg& x) -> Arg {
    if (x.is_tensor()) return Arg(cast(Tensor(x.tensor), DType::Bool));
    return Arg(Scalar(x.scalar.as_double() != 0.0));
  };
  return binary(OpId::Ne, as_bool(a), as_bool(b));
}

Tensor round(const Tensor& x, std::optional<int64_t> decimals) {
  if (!decimals) return unary(OpId::Round, x);  // the identity on integers, as in PyTorch
  // PyTorch's round with decimals (even 0) has floating kernels only.
  LOOM_CHECK(is_floating(x->dtype()), Runtime, "\"round\" not implemented for '",
             dtype_info(x->dtype()).scalar_type_name, "'");
  if (*decimals == 0) return unary(OpId::Round, x);
  double scale = std::pow(10.0, static_cast<double>(*decimals));
  return div(unary(OpId::Round, mul(x, Scalar(scale))), Scalar(scale));
}

// ---- reductions ----

// A reduced dim of stride 0 (an expand) holds one value many times. Over a hostile expand of 2^62
// elements the reduction would run for years (PyTorch's too), so past kRepeatedShortcut elements
// the repeats are read once: an extreme (amax / amin, and all / any, which reduce bools with
// them) of one copy is the extreme of all, a sum is one copy's sum times the repeat count (exact
// modulo 2^64 for integers; one rounding for floats, closer than adding 2^62 terms), a product its
// power. Below that size nothing changes, so ordinary expands keep PyTorch's rounding.
static constexpr int64_t kRepeatedShortcut = int64_t{1} << 32;

static std::optional<Tensor> reduce_repeats_once(OpId op, const Tensor& x, uint64_t mask, bool keepdim) {
  if (x->is_pending() || (op != OpId::Amax && op != OpId::Amin && op != OpId::Sum && op != OpId::Prod)) return {};
  const Array& a = x->array();
  if (a.sizes().size() != static_cast<size_t>(x->ndim())) return {};  // an errored tensor: its own error
  Tensor once = x;
  int64_t repeats = 1;
  for (int64_t d = 0; d < x->ndim(); ++d)
    if ((mask >> d & 1) && a.strides()[d] == 0 && a.sizes()[d] > 1) {
      repeats *= a.sizes()[d];  // at most numel, which fits int64
      once = narrow(once, d, 0, 1);
    }
  if (repeats == 1) return {};
  Attrs attrs{static_cast<int64_t>(mask), keepdim};
  Tensor r = apply1(op, once, std::move(attrs));
  if (op == OpId::Sum) return mul(r, Scalar(repeats));
  if (op == OpId::Prod) return pow(r, Scalar(repeats));
  return r;
}

Tensor reduce(OpId op, const Tensor& x, const DimList& dims, bool keepdim) {
  uint64_t mask = dim_mask(x->ndim(), dims);
  if (x->numel() > kRepeatedShortcut)
    if (auto r = reduce_repeats_once(op, x, mask, keepdim)) return *r;
  Attrs attrs;
  attrs.push_back(static_cast<int64_t>(mask));
  attrs.push_back(keepdim);
  return apply1(op, x, std::move(attrs));
}

// sum / prod with dtype=: the input converted to dtype, reduced (integers accumulate in int64,
// which wraps to the same result modulo 2^bits), the result in dtype (a bool sum is any(), a bool
// prod all()).
Tensor sum(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  if (!dtype) return reduce(OpId::Sum, x, dims, keepdim);
  return cast(reduce(OpId::Sum, cast(x, *dtype), dims, keepdim), *dtype);
}

Tensor mean(const Tensor& x0, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  Tensor x = dtype ? cast(x0, *dtype) : x0;
  LOOM_CHECK(is_floating(x->dtype()), Runtime, "mean(): could not infer output dtype. ", dtype ? "Optional" : "Input",
             " dtype must be either a floating point or complex dtype. Got: ", dtype_name(x->dtype()));
  int64_t n = reduced_count(x->sizes(), dims);
  // float16 / bfloat16 divide in float32: an elementwise op rounds a Python number to its own
  // dtype first (as PyTorch's CPU kernels do), and a count past 65504 is inf in float16, which
  // made every mean over that many elements 0 (PyTorch 1.13's CPU mean too; its CUDA one divides
  // in float, as here).
  if (x->dtype() == DType::Float16 || x->dtype() == DType::BFloat16)
    return cast(div(cast(reduce(OpId::Sum, x, dims, keepdim), DType::Float32), Scalar(static_cast<double>(n))),
                x->dtype());
  return div(reduce(OpId::Sum, x, dims, keepdim), Scalar(static_cast<double>(n)));
}

Tensor prod(const Tensor& x, std::optional<int64_t> dim, bool keepdim, std::optional<DType> dtype) {
  DimList dims;
  if (dim) dims.push_back(*dim);
  if (!dtype) return reduce(OpId::Prod, x, dims, dim ? keepdim : false);
  return cast(reduce(OpId::Prod, cast(x, *dtype), dims, dim ? keepdim : false), *dtype);
}

// amax / amin / max / min of every element of an empty tensor have no value: PyTorch asks for a
// dim (RuntimeError), where a given empty dim is an IndexError (the reduction's own check).
static void require_elements(const char* name, const Tensor& x, const DimList& dims) {
  LOOM_CHECK(!dims.empty() || x->numel() > 0, Runtime, name, "(): Expected reduction dim to be specified for "
             "input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
}

Tensor amax(const Tensor& x, const DimList& dims, bool keepdim) {
  require_elements("amax", x, dims);
  return reduce(OpId::Amax, x, dims, keepdim);
}
Tensor amin(const Tensor& x, const DimList& dims, bool keepdim) {
  require_elements("amin", x, dims);
  return reduce(OpId::Amin, x, dims, keepdim);
}
Tensor max(const Tensor& x) {
  require_elements("max", x, {});
  return reduce(OpId::Amax, x, {}, false);
}
Tensor min(const Tensor& x) {
  require_elements("min", x, {});
  return reduce(OpId::Amin, x, {}, false);
}

// argmax / argmin of a huge expand (reduce_repeats_once's case): the first extreme has index 0
// along every stride-0 dim, so one copy (those dims narrowed to 1) is searched; its index is then
// the full tensor's (along dim: broadcast back over the result; flat: re-raveled in x's shape).
// argmax() of a 2^62-element expand ran for years.
static std::optional<Tensor> arg_repeats_once(OpId op, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  if (x->numel() <= kRepeatedShortcut || x->is_pending()) return {};
  const Array& a = x->array();
  int64_t ndim = x->ndim();
  if (a.sizes().size() != static_cast<size_t>(ndim)) return {};  // an errored tensor: its own error
  Tensor once = x;
  for (int64_t d = 0; d < ndim; ++d)
    if (a.strides()[d] == 0 && a.sizes()[d] > 1) once = narrow(once, d, 0, 1);
  if (once.get() == x.get()) return {};
  if (dim) {
    int64_t d = wrap_dim(*dim, ndim);
    Attrs attrs{static_cast<int64_t>(uint64_t{1} << d), keepdim};
    Tensor r = apply1(op, once, std::move(attrs));
    Dims sizes(a.sizes());
    if (keepdim) sizes[static_cast<size_t>(d)] = 1;
    else sizes.erase(static_cast<size_t>(d));
    return contiguous(expand(r, sizes));
  }
  Attrs attrs{int64_t{1}, false};
  Tensor index = apply1(op, reshape(once, Dims{-1}), std::move(attrs));  // row-major in once's shape
  const Dims& once_sizes = once->sizes();
  Tensor total = full(Dims{}, Scalar(int64_t{0}), DType::Int64, placement_of(x));
  int64_t once_step = 1, full_step = 1;
  for (int64_t d = ndim - 1; d >= 0; --d) {
    Tensor along = binary(OpId::Remainder, binary(OpId::FloorDiv, index, Scalar(once_step)), Scalar(once_sizes[d]));
    total = add(total, mul(along, Scalar(full_step)), Scalar(int64_t{1}));
    once_step *= once_sizes[d];
    full_step *= a.sizes()[d];  // at most numel, which fits int64
  }
  return keepdim ? reshape(total, Dims(static_cast<size_t>(ndim), 1)) : total;
}

// Over every element (no dim), keepdim keeps every dim as 1, as PyTorch's.
static Tensor arg_extreme(OpId op, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  if (auto r = arg_repeats_once(op, x, dim, keepdim)) return *r;
  if (dim) return reduce(op, x, DimList{*dim}, keepdim);
  Tensor flat = reduce(op, reshape(x, Dims{-1}), DimList{0}, false);
  return keepdim ? reshape(flat, Dims(static_cast<size_t>(x->ndim()), 1)) : flat;
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(OpId::Argmax, x, dim, keepdim);
}

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(OpId::Argmin, x, dim, keepdim);
}

// max(dim) / min(dim). With autograd, the values are gathered at the returned indices: PyTorch
// sends their gradient to that one element, where amax / amin share it between tied extremes.
static std::pair<Tensor, Tensor> extreme_dim(OpId value_op, OpId index_op, const Tensor& x, int64_t dim,
                                             bool keepdim) {
  Tensor values = reduce(value_op, x, DimList{dim}, keepdim);  // raises the reduction's errors
  if (!grad_enabled() || !requires_grad(*x) || x->ndim() == 0)
    return {values, reduce(index_op, x, DimList{dim}, keepdim)};
  Tensor indices = reduce(index_op, x, DimList{dim}, true);
  values = gather(x, dim, indices);
  if (keepdim) return {values, indices};
  return {squeeze(values, DimList{dim}), squeeze(indices, DimList{dim})};
}

std::pair<Tensor, Tensor> max_dim(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(OpId::Amax, OpId::Argmax, x, dim, keepdim);
}

std::pair<Tensor, Tensor> min_dim(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(OpId::Amin, OpId::Argmin, x, dim, keepdim);
}

Tensor var(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  require_floating(x, "var");
  int64_t n = reduced_count(x->sizes(), dims);
  Tensor centered = sub(x, mean(x, dims, true));
  Tensor ss = reduce(OpId::Sum, mul(centered, centered), dims, keepdim);
  return div(ss, Scalar(std::max(0.0, static_cast<double>(n) - correction)));
}

// sum ** (1 / p) for the p-norm. With autograd its gradient is 0 where the sum is 0 (an all-zero
// slice), as PyTorch's norm backward: the root's derivative there is infinite, and inf times the
// sum's zero gradient nan. The where()s keep the value exact (the root of 0 is 0).
static Tensor root_of_sum(const Tensor& sum, double p) {
  auto root = [p](const Tensor& v) { return p == 2 ? unary(OpId::Sqrt, v) : pow(v, Scalar(1.0 / p)); };
  if (!grad_enabled() || !requires_grad(*sum)) return root(sum);
  Tensor zero = binary(OpId::Eq, sum, Scalar(int64_t{0}));
  return where(zero, Scalar(int64_t{0}), root(where(zero, Scalar(int64_t{1}), sum)));
}

// Where the variance is 0, PyTorch's std_backward gives 0, not sqrt's infinite slope times 0.
Tensor std(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  return root_of_sum(var(x, dims, correction, keepdim), 2);
}

Tensor logsumexp(const Tensor& x0, const DimList& dims, bool keepdim) {
  Tensor x = is_floating(x0->dtype()) ? x0 : cast(x0, default_float_dtype());
  // Over nothing: the log of an empty sum, -inf (there is no max to shift by).
  if (reduced_count(x->sizes(), dims) == 0)
    return unary(OpId::Log, reduce(OpId::Sum, unary(OpId::Exp, x), dims, keepdim));
  Tensor m = amax(x, dims, true);
  // An infinite max would turn x - m into nan; shifting by 0 instead is exact there.
  m = where(binary(OpId::Eq, unary(OpId::Abs, m), Scalar(INFINITY)), Scalar(0.0), m);
  Tensor s = unary(OpId::Log, reduce(OpId::Sum, unary(OpId::Exp, sub(x, m)), dims, keepdim));
  return add(s, keepdim ? m : squeeze_dims(m, x->ndim(), dims));
}

// all / any: bool results, except uint8 for uint8 input (PyTorch's documented legacy behaviour).
Tensor all(const Tensor& x, const DimList& dims, bool keepdim) {
  DType out = x->dtype() == DType::UInt8 ? DType::UInt8 : DType::Bool;
  if (reduced_count(x->sizes(), dims) == 0)  // all() of nothing is true
    return full(reduce(OpId::Sum, x, dims, keepdim)->sizes(), Scalar(true), out, placement_of(x));
  return cast(reduce(OpId::Amin, cast(x, DType::Bool), dims, keepdim), out);
}

Tensor any(const Tensor& x, const DimList& dims, bool keepdim) {
  DType out = x->dtype() == DType::UInt8 ? DType::UInt8 : DType::Bool;
  if (reduced_count(x->sizes(), dims) == 0)
    return full(reduce(OpId::Sum, x, dims, keepdim)->sizes(), Scalar(false), out, placement_of(x));
  return cast(reduce(OpId::Amax, cast(x, DType::Bool), dims, keepdim), out);
}


// The p-norm of any other order, with PyTorch's derivative sgn(x) |x|^(p-1) g / norm^(p-1), which
// is 0 where the norm is 0 and, for p < 1 (where |x|^(p-1) is infinite), where x is 0: the
// subgradient PyTorch documents. The chain of pow's and the root's derivatives gives inf * 0 =
// NaN at both points (a negative order's norm is 0 as soon as one element is).
static Tensor general_norm(const Tensor& x, double p, const DimList& dims, bool keepdim) {
  auto computed = [p, dims](const Tensor& v, bool keep) {
    return root_of_sum(reduce(OpId::Sum, pow(unary(OpId::Abs, v), Scalar(p)), dims, keep), p);
  };
  if (!grad_enabled() || !requires_grad(*x)) return computed(x, keepdim);
  Tensor out;
  {
    GradModeGuard unrecorded(false);
    out = computed(x, keepdim);
  }
  Dims kept_shape(x->sizes());  // the norm's shape with the reduced dims kept, to broadcast against x
  uint64_t reduced = dim_mask(x->ndim(), dims);
  for (int64_t d = 0; d < x->ndim(); ++d)
    if (reduced >> d & 1) kept_shape[static_cast<size_t>(d)] = 1;
  record_composite({"LinalgVectorNormBackward0", {x.get()}, 0b1u, true, {}}, *out,
                   [p, computed, kept_shape](const Tensor& g, const CompositeSaved& s) -> std::vector<Tensor> {
                     const Tensor& v = s.inputs[0];
                     Tensor n = s.recompute() ? computed(v, true) : reshape(s.result, kept_shape);
                     Tensor scaled = mul(unary(OpId::Sign, v), pow(unary(OpId::Abs, v), Scalar(p - 1)));
                     if (p < 1) scaled = where(binary(OpId::Eq, v, Scalar(int64_t{0})), Scalar(int64_t{0}), scaled);
                     Tensor scale = where(binary(OpId::Eq, n, Scalar(int64_t{0})), Scalar(int64_t{0}),
                                          div(reshape(g, kept_shape), pow(n, Scalar(p - 1))));
                     return {mul(scaled, scale)};
                   });
  return out;
}

Tensor norm(const Tensor& x, double p, const DimList& dims, bool keepdim) {
  require_floating(x, "linalg.vector_norm");
  Tensor a = unary(OpId::Abs, x);
  // Over no elements every norm is 0, as PyTorch's norm and dist give (linalg.vector_norm refuses
  // the orders without an identity first): amax would raise, and a root of the empty sum 0 is inf
  // for p < 0 and nan for a nan p.
  if (reduced_count(x->sizes(), dims) == 0) return reduce(OpId::Sum, a, dims, keepdim);
  if (p == 2) return root_of_sum(reduce(OpId::Sum, mul(x, x), dims, keepdim), 2);
  if (p == 1) return reduce(OpId::Sum, a, dims, keepdim);
  // An order past float32's range is an infinite order: PyTorch's kernel holds p as a float32 (for
  // float64 input too: dist(a, b, 1e308) is the largest difference), and it is the norm's limit,
  // where |x| ** 1e308 overflows and the float32 root 1 / p rounded to 0 (the norm was 1).
  if (std::isinf(static_cast<float>(p)))
    return reduce(p > 0 ? OpId::Amax : OpId::Amin, a, dims, keepdim);
  // Likewise a nonzero order below float32's range (-1e-320) is the order 0 PyTorch's float32 holds
  // (loom gave 0 or inf: |x| ** 1e-320 is 1, its root 1 / 1e-320 infinite).
  if (p == 0 || static_cast<float>(p) == 0.0f) {  // the count of nonzeros: piecewise constant, a zero gradient
    Tensor count = reduce(OpId::Sum, cast(binary(OpId::Ne, x, Scalar(int64_t{0})), x->dtype()), dims, keepdim);
    record_zero_derivative("LinalgVectorNormBackward0", {x.get()}, *count);
    return count;
  }
  return general_norm(x, p, dims, keepdim);
}

// x minus its max along dim, for numerically stable exponentials; x itself along an empty dim
// (whose result is empty: there is nothing to shift, and no max).
static Tensor shifted_by_max(const Tensor& x, int64_t dim) {
  if (reduced_count(x->sizes(), DimList{dim}) == 0) return x;
  return sub(x, amax(x, DimList{dim}, true));
}

// softmax and log_softmax are composites with derivatives of their own (PyTorch's formulas,
// reading the result): the chain of their primitives' derivatives would cost three row
// reductions in backward (the sum's, the shift's, and amax's count of tied maxima, whose
// gradient is zero anyway) and exp evaluated again at each; these cost one reduction, and fuse
// into one row kernel. The forward runs unrecorded; the cast of `dtype` is recorded as usual.

Tensor softmax(const Tensor& x0, int64_t dim, std::optional<DType> dtype) {
  Tensor x = dtype ? cast(x0, *dtype) : x0;
  require_floating(x, "softmax");
  Tensor y;
  {
    GradModeGuard unrecorded(false);
    Tensor e = unary(OpId::Exp, shifted_by_max(x, dim));
    y = div(e, reduce(OpId::Sum, e, DimList{dim}, true));
  }
  // d softmax: y * (g - sum(g * y)) along dim.
  record_composite("SoftmaxBackward0", *x, *y, [dim](const Tensor& g, const Tensor& y) {
    return mul(y, sub(g, reduce(OpId::Sum, mul(g, y), DimList{dim}, true)));
  });
  return y;
}

Tensor log_softmax(const Tensor& x0, int64_t dim, std::optional<DType> dtype) {
  Tensor x = dtype ? cast(x0, *dtype) : x0;
  require_floating(x, "log_softmax");
  Tensor y;
  {
    GradModeGuard unrecorded(false);
    Tensor shifted = shifted_by_max(x, dim);
    y = sub(shifted, unary(OpId::Log, reduce(OpId::Sum, unary(OpId::Exp, shifted), DimList{dim}, true)));
  }
  // d log_softmax: g - exp(y) * sum(g) along dim (exp(y) is the softmax).
  record_composite("LogSoftmaxBackward0", *x, *y, [dim](const Tensor& g, const Tensor& y) {
    return sub(g, mul(unary(OpId::Exp, y), reduce(OpId::Sum, g, DimList{dim}, true)));
  });
  return y;
}

Tensor cumsum(const Tensor& x0, int64_t dim, std::optional<DType> dtype) {
  LOOM_CHECK(dtype != DType::Bool, Runtime, "\"cumsum\" not implemented for 'Bool'");
  Tensor x = dtype ? cast(x0, *dtype) : x0;
  Attrs attrs;
  attrs.push_back(wrap_dim(dim, x->ndim()));
  Tensor out = apply1(OpId::Cumsum, x, std::move(attrs));
  return dtype ? cast(out, *dtype) : out;  // integer sums run in int64: the same modulo 2^bits
}

// ---- matrix products ----

Tensor matmul(const Tensor& a, const Tensor& b) {
  int64_t da = a->ndim(), db = b->ndim();
  LOOM_CHECK(da >= 1 && db >= 1, Runtime, "both arguments to matmul need to be at least 1D, but they are ", da, "D and ",
             db, "D");
  if (da == 1 && db == 1) {
    LOOM_CHECK(a->sizes()[0] == b->sizes()[0], Runtime, "inconsistent tensor size, expected tensor [", a->sizes()[0],
               "] and src [", b->sizes()[0], "] to have the same number of elements, but got ", a->sizes()[0], " and ",
               b->sizes()[0], " elements respectively");
  }
  // PyTorch runs a matrix times a vector as mv, with a message of its own.
  LOOM_CHECK(da != 2 || db != 1 || a->sizes()[1] == b->sizes()[0], Runtime, "size mismatch, got input (",
             a->sizes()[0], "), mat (", a->sizes()[0], "x", a->sizes()[1], "), vec (", b->sizes()[0], ")");
  Tensor x = da == 1 ? unsqueeze(a, 0) : a;
  Tensor y = db == 1 ? unsqueeze(b, 1) : b;
  if (da >= 3 && db <= 2) {
    // A batch of matrices times one matrix is one product with the batch folded into the rows
    // (as PyTorch does): one large GEMM instead of one per batch element, and in backward the
    // weight's gradient is one GEMM over all rows instead of a product per batch plus a sum.
    int64_t k = x->sizes()[da - 1];
    Dims shape(x->sizes().first(da - 1));
    int64_t rows = numel_of(shape);
    shape.push_back(y->sizes()[1]);
    Tensor out = reshape(apply(OpId::MatMul, {Arg(reshape(x, Dims{rows, k})), Arg(y)}), shape);
    return db == 1 ? squeeze(out, DimList{-1}) : out;
  }
  if (da >= 3 && db >= 3 && x->sizes()[da - 1] != y->sizes()[db - 2]) {
    // PyTorch runs batches times batches as one bmm over the broadcast batch dims (whose mismatch
    // it reports first): its message names the batch size and the inner sizes.
    int64_t batch = numel_of(broadcast_shapes(x->sizes().first(da - 2), y->sizes().first(db - 2)));
    LOOM_FAIL(Runtime, "Expected size for first two dimensions of batch2 tensor to be: [", batch, ", ",
              x->sizes()[da - 1], "] but got: [", batch, ", ", y->sizes()[db - 2], "].");
  }
  Tensor out = apply(OpId::MatMul, {Arg(x), Arg(y)});
  if (db == 1) out = squeeze(out, DimList{-1});
  if (da == 1) out = squeeze(out, DimList{db == 1 ? -1 : -2});
  return out;
}

Tensor mm(const Tensor& a, const Tensor& b) {
  LOOM_CHECK(a->ndim() == 2, Runtime, "self must be a matrix");
  LOOM_CHECK(b->ndim() == 2, Runtime, "mat2 must be a matrix");
  return apply(OpId::MatMul, {Arg(a), Arg(b)});
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  LOOM_CHECK(a->ndim() == 3, Runtime, "batch1 must be a 3D tensor");
  LOOM_CHECK(b->ndim() == 3, Runtime, "batch2 must be a 3D tensor");
  LOOM_CHECK(a->sizes()[0] == b->sizes()[0] && a->sizes()[2] == b->sizes()[1], Runtime,
             "Expected size for first two dimensions of batch2 tensor to be: [", a->sizes()[0], ", ", a->sizes()[2],
             "] but got: [", b->sizes()[0], ", ", b->sizes()[1], "].");
  return apply(OpId::MatMul, {Arg(a), Arg(b)});
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor* bias) {
  Tensor out = matmul(x, weight->ndim() == 2 ? t(weight) : weight);
  return bias ? add(out, *bias) : out;
}

// ---- views ----

Tensor view(const Tensor& x, IntSpan shape0) {
  Dims shape = infer_size(shape0, x->numel());
  return make_view(x, [&](const Layout& l) { return loom::view(l, shape); }, "ViewBackward0", reshape_backward(x),
                   "view size is not compatible with input tensor's size and stride (at least one dimension spans "
                   "across two contiguous subspaces). Use .reshape(...) instead.");
}

Tensor reshape(const Tensor& x, IntSpan shape0) {
  Dims shape = infer_size(shape0, x->numel());
  return make_view(x, [&](const Layout& l) { return loom::view(l, shape); }, "ReshapeAliasBackward0",
                   reshape_backward(x));
}

Tensor permute(const Tensor& x, IntSpan dims) {
  Dims inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[static_cast<size_t>(wrap_dim(dims[i], x->ndim()))] = static_cast<int64_t>(i);
  return make_view(x, [&](const Layout& l) -> std::optional<Layout> { return loom::permute(l, dims); },
                   "PermuteBackward0", [inverse](const Tensor& g) { return permute(g, inverse); });
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  return make_view(x, [&](const Layout& l) -> std::optional<Layout> { return loom::transpose(l, dim0, dim1); },
                   "TransposeBackward0", [dim0, dim1](const Tensor& g) { return transpose(g, dim0, dim1); });
}

Tensor t(const Tensor& x) {
  LOOM_CHECK(x->ndim() <= 2, Runtime, "t() expects a tensor with <= 2 dimensions, but self is ", x->ndim(), "D");
  if (x->ndim() < 2) return alias(x);
  return make_view(x, [](const Layout& l) -> std::optional<Layout> { return loom::transpose(l, 0, 1); }, "TBackward0",
                   [](const Tensor& g) { return t(g); });
}

Tensor expand(const Tensor& x, IntSpan sizes) {
  Dims shape(x->sizes());
  return make_view(x, [&](const Layout& l) -> std::optional<Layout> { return loom::expand(l, sizes); },
                   "ExpandBackward0", [shape](const Tensor& g) { return sum_to(g, shape); });
}

Tensor squeeze(const Tensor& x, std::optional<DimList> dims) {
  if (!dims)
    return make_view(x, [](const Layout& l) -> std::optional<Layout> { return loom::squeeze(l); }, "SqueezeBackward0",
                     reshape_backward(x));
  // Several dims: squeeze from the highest so lower indices stay valid.
  Dims wrapped;
  for (int64_t d : *dims) wrapped.push_back(wrap_dim(d, x->ndim()));
  std::sort(wrapped.begin(), wrapped.end());
  auto f = [&](const Layout& l) -> std::optional<Layout> {
    Layout r = l;
    for (size_t i = wrapped.size(); i-- > 0;)
      if (i + 1 == wrapped.size() || wrapped[i] != wrapped[i + 1]) r = loom::squeeze(r, wrapped[i]);
    return r;
  };
  return make_view(x, f, "SqueezeBackward1", reshape_backward(x));
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  return make_view(x, [&](const Layout& l) -> std::optional<Layout> { return loom::unsqueeze(l, dim); },
                   "UnsqueezeBackward0", reshape_backward(x));
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  int64_t n = x->ndim();
  if (n == 0) return reshape(x, Dims{1});
  int64_t start = wrap_dim(start_dim, n), end = wrap_dim(end_dim, n);
  LOOM_CHECK(start <= end, Runtime, "flatten() has invalid args: start_dim cannot come after end_dim");
  if (start == end) return x;
  Dims shape;
  IntSpan s = x->sizes();
  for (int64_t d = 0; d < start; ++d) shape.push_back(s[d]);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= s[d];
  shape.push_back(merged);
  for (int64_t d = end + 1; d < n; ++d) shape.push_back(s[d]);
  return reshape(x, shape);
}

Tensor unflatten(const Tensor& x, int64_t dim, IntSpan sizes) {
  LOOM_CHECK(x->ndim() > 0, Runtime, "unflatten: Dimension size must be non-zero; cannot unflatten a 0-d tensor");
  int64_t d = wrap_dim(dim, x->ndim());
  IntSpan s = x->sizes();
  Dims inner = infer_size(sizes, s[d]);
  Dims shape(s.first(static_cast<size_t>(d)));
  for (int64_t v : inner) shape.push_back(v);
  for (int64_t i = d + 1; i < x->ndim(); ++i) shape.push_back(s[i]);
  return reshape(x, shape);
}

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
  auto f = [&](const Layout& l) -> std::optional<Layout> { return loom::slice(l, dim, start, stop, step); };
  return region_view(x, f, "SliceBackward0");
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  auto f = [&](const Layout& l) -> std::optional<Layout> { return loom::narrow(l, dim, start, length); };
  return region_view(x, f, "NarrowBackward0");
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  auto f = [&](const Layout& l) -> std::optional<Layout> { return loom::select(l, dim, index); };
  return region_view(x, f, "SelectBackward0");
}

Tensor alias(const Tensor& x) {
  return make_view(x, [](const Layout& l) -> std::optional<Layout> { return l; }, "AliasBackward0",
                   [](const Tensor& g) { return g; });
}

Tensor view_scatter(const Tensor& base, const Layout& region, const Tensor& src) {
  Attrs attrs;
  attrs.push_back(region.offset);
  for (int64_t s : region.strides) attrs.push_back(s);
  return apply(OpId::ViewScatter, {Arg(base), Arg(contiguous(src))}, std::move(attrs));
}

Tensor region_of(const Tensor& x, const Layout& region) {
  Tensor dense = contiguous(x);
  // Over a row-major layout the region is an offset away; over any other (the region of a
  // non-contiguous view of dense in its base) it is not a strided region.
  Tensor out = make_view(
      dense,
      [&](const Layout& l) -> std::optional<Layout> {
        if (!l.is_contiguous()) return std::nullopt;
        Layout r = region;
        r.offset += l.offset;
        return r;
      },
      "AsStridedBackward0", region_backward(dense, region));
  mark_region_view(*out, region);
  return out;
}

void check_piece_count(int64_t pieces, const char* op) {
  LOOM_CHECK(pieces <= kMaxPieces, Runtime, op, ": ", pieces, " pieces requested; at most 2^24 (", kMaxPieces,
             ") tensors can be returned");
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  LOOM_CHECK(x->ndim() > 0, Runtime, "split expects at least a 1-dimensional tensor");
  LOOM_CHECK(split_size >= 0, Runtime, "split expects split_size be non-negative, but got split_size=", split_size);
  int64_t d = wrap_dim(dim, x->ndim());
  int64_t size = x->sizes()[d];
  LOOM_CHECK(split_size > 0 || size == 0, Runtime, "split_size can only be 0 if dimension size is 0, but got dimension size of ", size);
  std::vector<Tensor> out;
  if (size == 0) return {alias(x)};
  check_piece_count(size / split_size + (size % split_size != 0), "split");
  for (int64_t start = 0; start < size; start += split_size)
    out.push_back(narrow(x, d, start, std::min(split_size, size - start)));
  return out;
}

std::vector<Tensor> split_sections(const Tensor& x, IntSpan sizes, int64_t dim) {
  int64_t d = wrap_dim(dim, x->ndim());
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  LOOM_CHECK(total == x->sizes()[d], Runtime, "split_with_sizes expects split_sizes to sum exactly to ", x->sizes()[d],
             " (input tensor's size at dimension ", d, "), but got split_sizes=", format_dims(sizes));
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(x, d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  LOOM_CHECK(x->ndim() > 0, Runtime, "chunk expects at least a 1-dimensional tensor");
  LOOM_CHECK(chunks > 0, Runtime, "chunk expects `chunks` to be greater than 0, got: ", chunks);
  int64_t d = wrap_dim(dim, x->ndim());
  int64_t size = x->sizes()[d];
  if (size == 0) {
    // An empty dim still gives `chunks` (empty) pieces, as PyTorch's chunk does; split would give
    // one.
    check_piece_count(chunks, "chunk");
    std::vector<Tensor> out;
    out.reserve(static_cast<size_t>(chunks));
    for (int64_t i = 0; i < chunks; ++i) out.push_back(narrow(x, d, 0, 0));
    return out;
  }
  return split(x, (size + chunks - 1) / chunks, d);
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  LOOM_CHECK(x->ndim() > 0, Index, "Dimension specified as ", dim, " but tensor has no dimensions");
  int64_t d = wrap_dim(dim, x->ndim());
  check_piece_count(x->sizes()[d], "unbind");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x->sizes()[d]; ++i) out.push_back(select(x, d, i));
  return out;
}

// ---- copies and data movement ----

Tensor cast(const Tensor& x, DType dtype) {
  if (x->dtype() == dtype) return x;
  Attrs attrs;
  attrs.push_back(static_cast<int64_t>(dtype));
  return apply1(OpId::Cast, x, std::move(attrs));
}

// Written as index selections with descending indices: both modes, the derivative (a scatter of
// the gradient back) and fusion come with them.
Tensor flip(const Tensor& x, IntSpan dims) {
  uint64_t seen = 0;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, x->ndim());
    LOOM_CHECK(!(seen >> w & 1), Runtime, "dim ", w, " appears multiple times in the list of dims");
    seen |= uint64_t{1} << w;
  }
  Tensor out = x;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, x->ndim());
    int64_t n = x->ndim() == 0 ? 1 : x->sizes()[w];
    if (n <= 1) continue;
    out = index_select(out, w, arange(n, Scalar(n - 1), Scalar(int64_t{-1}), DType::Int64, placement_of(x)));
  }
  return out.get() == x.get() ? clone(x) : out;
}

Tensor clone(const Tensor& x) {
  // Eager copies keep the source's dim order (PyTorch's preserve_format); lazy results are dense.
  if (!x->is_lazy())
    return viewed(x, make_tensor(copy_to(x->array(), x->dtype(), x->device(), MemoryFormat::Preserve)),
                  "CloneBackward0", [](const Tensor& g) { return g; });
  Attrs attrs;
  attrs.push_back(static_cast<int64_t>(x->dtype()));
  return apply1(OpId::Cast, x, std::move(attrs));
}

Tensor contiguous(const Tensor& x) {
  if (x->is_pending()) return x->view_info() ? clone(x) : x;  // pending non-views are produced dense
  if (x->array().is_contiguous()) return x;
  if (!x->is_lazy())
    return viewed(x, make_tensor(loom::contiguous(x->array())), "CloneBackward0", [](const Tensor& g) { return g; });
  return clone(x);
}

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  LOOM_CHECK(!xs.empty(), Runtime, "torch.cat(): expected a non-empty list of Tensors");
  std::vector<Arg> list;
  for (const Tensor& t : xs) list.emplace_back(t);
  // dim counts in the first tensor that is not a legacy empty one (Cat skips those); with only
  // those, the result is one of them whatever dim says.
  auto shaped = std::find_if(xs.begin(), xs.end(), [](const Tensor& t) { return !(t->ndim() == 1 && t->numel() == 0); });
  Attrs attrs;
  attrs.push_back(shaped == xs.end() ? 0 : wrap_dim(dim, (*shaped)->ndim()));
  return apply(OpId::Cat, std::span<const Arg>(list.data(), list.size()), std::move(attrs));
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  LOOM_CHECK(!xs.empty(), Runtime, "stack expects a non-empty TensorList");
  for (size_t i = 1; i < xs.size(); ++i)
    LOOM_CHECK(Dims(xs[i]->sizes()) == Dims(xs[0]->sizes()), Runtime, "stack expects each tensor to be equal size, but got ",
               format_dims(xs[0]->sizes()), " at entry 0 and ", format_dims(xs[i]->sizes()), " at entry ", i);
  int64_t d = wrap_dim(dim, xs[0]->ndim() + 1);
  std::vector<Tensor> parts;
  for (const Tensor& t : xs) parts.push_back(unsqueeze(t, d));
  return cat(parts, d);
}

Tensor index(const Tensor& x, int64_t first, const std::vector<Tensor>& indices) {
  std::vector<Arg> args{Arg(x)};
  for (const Tensor& i : indices) args.emplace_back(i);
  Attrs attrs;
  attrs.push_back(first);
  return apply(OpId::Index, std::span<const Arg>(args.data(), args.size()), std::move(attrs));
}

Tensor index_put(const Tensor& x, int64_t first, const std::vector<Tensor>& indices, const Arg& values, bool accumulate) {
  std::vector<Arg> args{Arg(x), values};
  for (const Tensor& i : indices) args.emplace_back(i);
  Attrs attrs;
  attrs.push_back(first);
  attrs.push_back(accumulate);
  return apply(OpId::IndexPut, std::span<const Arg>(args.data(), args.size()), std::move(attrs));
}

// An Index with index_select's rules: int32 or int64 indices (else RuntimeError), a negative one
// out of range (IndexError "index out of range in self"), as in PyTorch.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx) {
  LOOM_CHECK(idx->dtype() == DType::Int64 || idx->dtype() == DType::Int32, Runtime,
             "index_select(): Expected dtype int32 or int64 for index");
  LOOM_CHECK(idx->ndim() <= 1, Index, "index_select(): Index is supposed to be a vector");
  int64_t d = wrap_dim(dim, x->ndim());
  Tensor src = x->ndim() == 0 ? unsqueeze(x, 0) : x;
  Attrs attrs;
  attrs.push_back(x->ndim() == 0 ? 0 : d);
  attrs.push_back(1);
  Tensor r = apply(OpId::Index, {Arg(src), Arg(idx->ndim() == 0 ? reshape(idx, Dims{1}) : idx)}, std::move(attrs));
  // a 0-d input gives a 0-d result (its one index picks its one element), as in PyTorch
  return x->ndim() == 0 ? reshape(r, Dims{}) : r;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx) {
  Attrs attrs;
  attrs.push_back(wrap_dim(dim, x->ndim()));
  return apply(OpId::Gather, {Arg(x), Arg(idx)}, std::move(attrs));
}

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  if (!dim) return gather(reshape(x, Dims{-1}), 0, reshape(indices, Dims{-1}));
  LOOM_CHECK(x->ndim() == indices->ndim(), Runtime, "torch.take_along_dim(): input and indices should have the same "
             "number of dimensions, but got ", x->ndim(), " dimensions for input, and got ", indices->ndim(),
             " dimensions for indices");
  int64_t d = wrap_dim(*dim, x->ndim());
  // Broadcast every dim but `dim`, then gather along it.
  Dims xs(x->sizes()), is(indices->sizes());
  Dims xb = xs, ib = is;
  xb[d] = 1;
  ib[d] = 1;
  Dims b = broadcast_shapes(xb, ib);
  Dims xt = b, it = b;
  xt[d] = xs[d];
  it[d] = is[d];
  return gather(expand(x, xt), d, expand(indices, it));
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& src) {
  Attrs attrs;
  attrs.push_back(wrap_dim(dim, x->ndim()));
  return apply(OpId::ScatterAdd, {Arg(x), Arg(idx), Arg(src)}, std::move(attrs));
}

// tril / triu: keep elements on one side of a diagonal, built from index comparisons so they fuse.
static Tensor triangle(const Tensor& x, int64_t diagonal, bool lower) {
  LOOM_CHECK(x->ndim() >= 2, Runtime, lower ? "tril" : "triu", ": input tensor must have at least 2 dimensions");
  int64_t rows = x->sizes()[x->ndim() - 2], cols = x->sizes()[x->ndim() - 1];
  Tensor r = unsqueeze(int_tensor_like(rows, x), 1);
  Tensor c = unsqueeze(int_tensor_like(cols, x), 0);
  Tensor offset = sub(c, r);  // column - row: 0 on the main diagonal
  Tensor keep = binary(lower ? OpId::Le : OpId::Ge, offset, Scalar(diagonal));
  return where(keep, x, Scalar(int64_t{0}));
}

Tensor tril(const Tensor& x, int64_t diagonal) { return cast(triangle(x, diagonal, true), x->dtype()); }
Tensor triu(const Tensor& x, int64_t diagonal) { return cast(triangle(x, diagonal, false), x->dtype()); }

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Arg& value) {
  LOOM_CHECK(mask->dtype() == DType::Bool, Runtime, "masked_fill_ only supports boolean masks, but got mask with dtype ",
             dtype_name(mask->dtype()));
  if (value.is_tensor())
    LOOM_CHECK(value.tensor->ndim() == 0, Runtime, "masked_fill_ only supports a 0-dimensional value tensor, but got "
               "tensor with ", value.tensor->ndim(), " dimension(s).");
  else
    value.scalar.check_fits(x->dtype());  // the number is converted to x's dtype, as in PyTorch
  Tensor out = where(mask, value, x);
  Dims target = broadcast_shapes(x->sizes(), mask->sizes());
  LOOM_CHECK(target == Dims(x->sizes()), Runtime, "masked_fill: the mask of shape ", format_dims(mask->sizes()),
             " does not broadcast to the input's shape ", format_dims(x->sizes()));
  return cast(out, x->dtype());
}

Tensor one_hot(const Tensor& idx, int64_t num_classes) {
  LOOM_CHECK(idx->dtype() == DType::Int64, Runtime, "one_hot is only applicable to index tensor.");
  if (idx->numel() == 0) {
    LOOM_CHECK(num_classes != -1, Runtime, "Can not infer total number of classes from empty tensor.");
  } else {
    // Like PyTorch on the CPU, read the range of the classes to check it (and, for -1, to count
    // them): a sync point in lazy mode, where both extremes come from one trace.
    Tensor lo = amin(idx), hi = amax(idx);
    materialize(*lo);
    materialize(*hi);
    LOOM_CHECK(item(lo->array()).as_int() >= 0, Runtime, "Class values must be non-negative.");
    int64_t top = item(hi->array()).as_int();
    if (num_classes == -1) num_classes = top + 1;
    else LOOM_CHECK(num_classes > top, Runtime, "Class values must be smaller than num_classes.");
  }
  Tensor classes = int_tensor_like(num_classes, idx);
  return cast(binary(OpId::Eq, unsqueeze(idx, -1), classes), DType::Int64);
}

Tensor pad(const Tensor& x, IntSpan pads, double value) {
  LOOM_CHECK(pads.size() % 2 == 0, Runtime, "Padding length must be divisible by 2");
  LOOM_CHECK(static_cast<int64_t>(pads.size() / 2) <= x->ndim(), Runtime,
             "Padding length should be less than or equal to two times the input dimension but got padding length ",
             pads.size(), " and input of dimension ", x->ndim());
  Tensor out = x;
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    int64_t d = x->ndim() - 1 - static_cast<int64_t>(i);
    int64_t before = pads[2 * i], after = pads[2 * i + 1];
    // Negative padding crops.
    if (before < 0) out = narrow(out, d, -before, out->sizes()[d] + before);
    if (after < 0) out = narrow(out, d, 0, out->sizes()[d] + after);
    std::vector<Tensor> parts;
    auto filler = [&](int64_t n) {
      Dims s(out->sizes());
      s[d] = n;
      return full(s, Scalar(value), out->dtype(), placement_of(out));
    };
    if (before > 0) parts.push_back(filler(before));
    parts.push_back(out);
    if (after > 0) parts.push_back(filler(after));
    if (parts.size() > 1) out = cat(parts, d);
  }
  return out;
}

Tensor repeat(const Tensor& x, IntSpan repeats) {
  LOOM_CHECK(static_cast<int64_t>(repeats.size()) >= x->ndim(), Runtime,
             "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  size_t n = repeats.size();
  // View x as [1, s0, 1, s1, ...] (leading dims of size 1), expand to [r0, s0, r1, s1, ...], merge pairs.
  Dims padded(n - static_cast<size_t>(x->ndim()), 1);
  for (int64_t s : x->sizes()) padded.push_back(s);
  Dims interleaved, expanded, merged;
  for (size_t i = 0; i < n; ++i) {
    interleaved.push_back(1);
    interleaved.push_back(padded[i]);
    expanded.push_back(repeats[i]);
    expanded.push_back(padded[i]);
    merged.push_back(repeats[i] * padded[i]);
  }
  return clone(reshape(expand(reshape(x, interleaved), expanded), merged));
}

Tensor to(const Tensor& x, DType dtype, Device device, bool lazy, bool copy) {
  bool same_place = x->device() == device && x->is_lazy() == lazy;
  if (same_place && x->dtype() == dtype && !copy) return x;
  if (same_place && lazy) return x->dtype() == dtype ? clone(x) : cast(x, dtype);
  // Leaving or entering lazy mode, or changing device: materialize, then copy.
  sync_for(SyncCause::Host, *x);
  Tensor out = make_tensor(copy_to(x->array(), dtype, device, MemoryFormat::Preserve), lazy);
  DType from = x->dtype();
  Device from_device = x->device();
  bool from_lazy = x->is_lazy();
  return viewed(x, std::move(out), "ToCopyBackward0",
                [from, from_device, from_lazy](const Tensor& g) { return to(g, from, from_device, from_lazy); });
}

// ---- creation ----

namespace {

Attrs creation_attrs(DType dtype, IntSpan sizes) {
  Attrs attrs;
  attrs.push_back(static_cast<int64_t>(dtype));
  for (int64_t s : sizes) attrs.push_back(s);
  return attrs;
}

Tensor creation(OpId op, std::span<const Arg> args, DType dtype, IntSpan sizes, Placement where) {
  return apply(op, args, creation_attrs(dtype, sizes), where);
}

void require_floating_dtype(DType dtype, const char* what) {
  LOOM_CHECK(is_floating(dtype), Type, what, "(): expected a floating-point dtype, got ", dtype_name(dtype));
}

}  // namespace

Tensor full(IntSpan sizes, Scalar value, DType dtype, Placement where) {
  check_sizes(sizes);
  value.check_fits(dtype);  // at the call in both modes (a lazy Full runs only at the sync)
  if (!where.lazy) {
    Array a = empty(sizes, dtype, where.device);
    loom::fill_(a, value);
    return make_tensor(std::move(a));
  }
  Arg v(value);
  return creation(OpId::Full, {&v, 1}, dtype, sizes, where);
}

Tensor arange(int64_t n, Scalar start, Scalar step, DType dtype, Placement where) {
  Dims sizes{n};
  if (!where.lazy) {
    Array a = empty(sizes, dtype, where.device);
    arange_(a, start, step);
    return make_tensor(std::move(a));
  }
  Arg args[] = {Arg(start), Arg(step)};
  return creation(OpId::Arange, args, dtype, sizes, where);
}

Tensor rand(IntSpan sizes, DType dtype, Placement where, double low, double high) {
  require_floating_dtype(dtype, "rand");
  check_sizes(sizes);
  Generator& gen = generator_for_draw(where.device, where.lazy);
  if (!where.lazy) {
    Array a = empty(sizes, dtype, where.device);
    uniform_(a, low, high, gen);
    return make_tensor(std::move(a));
  }
  PhiloxState s = gen.draw();
  Arg args[] = {Arg::param(Scalar(static_cast<int64_t>(s.seed))), Arg::param(Scalar(static_cast<int64_t>(s.offset))),
                Arg(Scalar(low)), Arg(Scalar(high))};
  return creation(OpId::RandUniform, args, dtype, sizes, where);
}

Tensor randn(IntSpan sizes, DType dtype, Placement where, double mean, double std) {
  require_floating_dtype(dtype, "randn");
  check_sizes(sizes);
  Generator& gen = generator_for_draw(where.device, where.lazy);
  if (!where.lazy) {
    Array a = empty(sizes, dtype, where.device);
    normal_(a, mean, std, gen);
    return make_tensor(std::move(a));
  }
  PhiloxState s = gen.draw();
  Arg args[] = {Arg::param(Scalar(static_cast<int64_t>(s.seed))), Arg::param(Scalar(static_cast<int64_t>(s.offset))),
                Arg(Scalar(mean)), Arg(Scalar(std))};
  return creation(OpId::RandNormal, args, dtype, sizes, where);
}

Tensor randint(IntSpan sizes, int64_t low, int64_t high, DType dtype, Placement where) {
  LOOM_CHECK(low < high, Runtime, "random_ expects 'from' to be less than 'to', but got from=", low, " >= to=", high);
  check_sizes(sizes);
  Generator& gen = generator_for_draw(where.device, where.lazy);
  if (!where.lazy) {
    Array a = empty(sizes, dtype, where.device);
    random_int_(a, low, high, gen);
    return make_tensor(std::move(a));
  }
  PhiloxState s = gen.draw();
  Arg args[] = {Arg::param(Scalar(static_cast<int64_t>(s.seed))), Arg::param(Scalar(static_cast<int64_t>(s.offset))),
                Arg::param(Scalar(low)), Arg::param(Scalar(high))};
  return creation(OpId::RandInt, args, dtype, sizes, where);
}

// ---- in-place ----

void add_(TensorImpl& self, const Arg& other, Scalar alpha) {
  check_no_internal_overlap(self);
  update(self, [&] { return add(Arg(&self), other, alpha); });
}
void sub_(TensorImpl& self, const Arg& other, Scalar alpha) {
  check_no_internal_overlap(self);
  update(self, [&] { return sub(Arg(&self), other, alpha); });
}
void mul_(TensorImpl& self, const Arg& other) {
  check_no_internal_overlap(self);
  update(self, [&] { return mul(Arg(&self), other); });
}
void div_(TensorImpl& self, const Arg& other) {
  check_no_internal_overlap(self);
  update(self, [&] { return div(Arg(&self), other); });
}

namespace {

// fill_, zero_ and t[i] = number, whose backward functions PyTorch names differently (and lists
// the number in next_functions only for the last, a copy_ of the number).
void fill_as(TensorImpl& self, const Arg& value, InplaceWrite::Kind kind) {
  if (value.is_tensor())
    LOOM_CHECK(value.tensor->ndim() == 0, Runtime, "fill_ only supports 0-dimension value tensor but got tensor with ",
               value.tensor->ndim(), " dimensions.");
  if (!self.is_lazy() && !InplaceWrite(self, value.tensor, kind).tracked()) {
    // Eager and nothing for autograd to record: fill the memory directly.
    self.check_usable();
    Scalar v = value.is_tensor() ? (materialize(*value.tensor), item(value.tensor->array())) : value.scalar;
    loom::fill_(self.array(), v);
    self.bump_version();
    return;
  }
  // A tensor value is broadcast by the write; cast first, as fill_ converts any dtype.
  Tensor filled = value.is_tensor() ? cast(Tensor(value.tensor), self.dtype())
                                    : full(self.sizes(), value.scalar, self.dtype(), {self.device(), self.is_lazy()});
  write_into(self, filled, kind);
}

}  // namespace

void fill_(TensorImpl& self, const Arg& value) {
  fill_as(self, value, {.overwrite = value.is_tensor() ? "FillBackward3" : "FillBackward2", .lists_value = value.is_tensor()});
}

void fill_as_copy_(TensorImpl& self, Scalar value) { fill_as(self, Arg(value), {.overwrite = "CopyBackwards"}); }

void zero_(TensorImpl& self) { fill_as(self, Arg(Scalar(int64_t{0})), {.overwrite = "ZeroBackward0", .lists_value = false}); }

void copy_(TensorImpl& self, const Tensor& src) {
  check_no_internal_overlap(self);
  Tensor value = src->is_lazy() == self.is_lazy() && src->device() == self.device()
                     ? cast(src, self.dtype())
                     : to(src, self.dtype(), self.device(), self.is_lazy());
  overwrite(self, value, "CopyBackwards");
}

}  // namespace loom::ops
