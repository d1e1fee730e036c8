"""The gradient of every differentiable op of the library.

Each case is checked three ways, on both devices:
  * against PyTorch autograd: the same float64 inputs, the same random output gradients
    (loom.autograd.backward with grad_tensors), and the .grad of every leaf compared; leaves come
    contiguous, transposed, strided (sliced with steps) and, for ops without ties or kinks,
    expanded (stride 0). Broadcasting is covered by cases whose inputs have different shapes;
  * with loom.autograd.gradcheck (central finite differences, float64, tiny shapes);
  * in lazy mode, the gradients also equal the eager ones.

The lazy cases run on the interpreter (see _ops_helpers.device); test_compiled_backward runs a
small set of backward programs through the compiled executor as well.
"""

import itertools
import math
import zlib

import numpy as np
import pytest

import loom
from _ops_helpers import SubChecks, device, make, release_pending, torch  # noqa: F401

F = torch.nn.functional
LF = loom.nn.functional

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RTOL, ATOL = 1e-9, 1e-11


# ---- inputs ----

class C:
    """A constant (non-differentiable) tensor input: indices, masks, targets, conditions."""

    def __init__(self, array):
        self.array = np.asarray(array)


def _rng(name, k):
    return np.random.default_rng(zlib.crc32(f"{name}/{k}".encode()))


_counter = itertools.count()


def N(*shape, scale=1.0):
    """Standard normal float64 values (a fresh seed per call, deterministic across runs)."""
    return _rng("N", next(_counter)).standard_normal(shape) * scale


def U(lo, hi, *shape):
    return _rng("U", next(_counter)).uniform(lo, hi, shape)


def away(a, points=(0.0,), margin=0.15):
    """Values moved at least `margin` away from the kinks in `points`."""
    a = np.array(a, dtype=np.float64)
    for p in points:
        close = np.abs(a - p) < margin
        a[close] = p + np.where(a[close] >= p, margin, -margin) * 1.5
    return a


def distinct(*shape, gap=0.3):
    """Values whose pairwise differences are at least `gap` (no ties for max / min / sort)."""
    n = int(np.prod(shape)) if shape else 1
    v = (np.arange(n) - n / 2) * gap
    return _rng("D", next(_counter)).permutation(v).reshape(shape) + 0.01


# ---- the cases ----

class Case:
    def __init__(self, name, fn, inputs, torch_fn=None, gradcheck=True, layouts=("contiguous", "transposed",
                 "strided"), expand=False, xfail=None, rtol=RTOL, atol=ATOL):
        self.name, self.fn, self.inputs, self.torch_fn = name, fn, inputs, torch_fn
        self.gradcheck, self.layouts, self.xfail = gradcheck, list(layouts), xfail
        if expand:
            self.layouts.append("expanded")
        self.rtol, self.atol = rtol, atol

    def run(self, lib, *args):
        if lib is torch and self.torch_fn is not None:
            return self.torch_fn(torch, *args)
        return self.fn(lib, *args)


CASES = []


def case(*args, **kwargs):
    CASES.append(Case(*args, **kwargs))


def f(name):
    """The function `name` of F (loom.nn.functional or torch.nn.functional)."""
    return lambda m, *a, **k: getattr(m.nn.functional, name)(*a, **k)


# elementwise unary ops
case("neg", lambda m, x: -x, [N(3, 4)], expand=True)
case("abs", lambda m, x: x.abs(), [away(N(3, 4))], expand=True)
case("exp", lambda m, x: x.exp(), [N(3, 4)], expand=True)
case("exp2", lambda m, x: x.exp2(), [N(3, 4)], expand=True)
case("log", lambda m, x: x.log(), [U(0.3, 3, 3, 4)], expand=True)
case("log2", lambda m, x: x.log2(), [U(0.3, 3, 3, 4)])
case("log1p", lambda m, x: x.log1p(), [U(-0.6, 3, 3, 4)])
case("expm1", lambda m, x: x.expm1(), [N(3, 4)])
case("sqrt", lambda m, x: x.sqrt(), [U(0.3, 3, 3, 4)], expand=True)
case("rsqrt", lambda m, x: x.rsqrt(), [U(0.3, 3, 3, 4)])
case("sin", lambda m, x: x.sin(), [N(3, 4)])
case("cos", lambda m, x: x.cos(), [N(3, 4)])
case("tan", lambda m, x: x.tan(), [U(-1.2, 1.2, 3, 4)])
case("tanh", lambda m, x: x.tanh(), [N(3, 4)], expand=True)
case("sigmoid", lambda m, x: x.sigmoid(), [N(3, 4, scale=2)], expand=True)
case("relu", lambda m, x: x.relu(), [away(N(3, 4))], expand=True)
case("relu_function", lambda m, x: m.relu(x), [away(N(3, 4))])
case("gelu", lambda m, x: m.nn.functional.gelu(x), [N(3, 4, scale=2)], expand=True)
case("gelu_tanh", lambda m, x: m.nn.functional.gelu(x, approximate="tanh"), [N(3, 4, scale=2)], expand=True)
case("silu", lambda m, x: m.nn.functional.silu(x), [N(3, 4, scale=2)])
case("softplus", lambda m, x: m.nn.functional.softplus(x), [N(3, 4, scale=3)])
# beta scales the input; values past threshold / beta follow the identity (gradient 1).
case("softplus_beta_threshold", lambda m, x: m.nn.functional.softplus(x, beta=2.0, threshold=1.5),
     [away(N(4, 5, scale=2), points=(0.75,))])
case("erf", lambda m, x: x.erf(), [N(3, 4)])
case("reciprocal", lambda m, x: x.reciprocal(), [away(N(3, 4), margin=0.3)])
case("square", lambda m, x: x.square(), [N(3, 4)])
case("floor", lambda m, x: x.floor(), [away(N(3, 4, scale=3), points=range(-9, 10))])
case("ceil", lambda m, x: x.ceil(), [away(N(3, 4, scale=3), points=range(-9, 10))])
case("round", lambda m, x: x.round(), [away(N(3, 4, scale=3), points=np.arange(-9.5, 10))])
case("round_decimals", lambda m, x: x.round(decimals=1), [away(N(3, 4), points=np.arange(-4.95, 5, 0.1), margin=0.02)])
case("sign", lambda m, x: x.sign(), [away(N(3, 4))])
case("nan_to_num", lambda m, x: x.nan_to_num(), [np.array([[1.5, np.nan, -2.0], [np.inf, 0.25, -np.inf]])],
     layouts=("contiguous", "transposed"))
case("nan_to_num_values", lambda m, x, w: m.nan_to_num(x, nan=0.5, posinf=3.0, neginf=-3.0) * w,
     [np.array([[np.nan, 1.0, np.inf], [-np.inf, -0.5, 2.0]]), C(N(2, 3))], layouts=("contiguous",))
case("float32_cast", lambda m, x: x.float() * 2, [N(3, 4)], rtol=1e-6, atol=1e-6, gradcheck=False)
case("to_dtype", lambda m, x: x.to(m.float32).double().exp(), [N(3, 4)], rtol=1e-6, atol=1e-6, gradcheck=False)
case("clone", lambda m, x: x.clone() * x, [N(3, 4)])
case("contiguous", lambda m, x: x.contiguous() * 2, [N(3, 4)])

# elementwise binary ops, with broadcasting and Python numbers
case("add", lambda m, a, b: a + b, [N(3, 4), N(3, 4)], expand=True)
case("add_broadcast", lambda m, a, b: a + b, [N(3, 1), N(1, 4)])
case("add_rank_broadcast", lambda m, a, b: a + b, [N(2, 3, 4), N(4)])
case("add_alpha", lambda m, a, b: m.add(a, b, alpha=2.5), [N(3, 4), N(4)])
case("add_scalar", lambda m, a: 2.0 + a, [N(3, 4)])
case("sub", lambda m, a, b: a - b, [N(3, 4), N(3, 1)], expand=True)
case("sub_alpha", lambda m, a, b: m.sub(a, b, alpha=-1.5), [N(3, 4), N(3, 4)])
case("rsub_scalar", lambda m, a: 1.0 - a, [N(3, 4)])
case("mul", lambda m, a, b: a * b, [N(3, 4), N(3, 4)], expand=True)
case("mul_broadcast", lambda m, a, b: a * b, [N(2, 1, 4), N(3, 1)])
case("mul_self", lambda m, a: a * a, [N(3, 4)])
case("mul_scalar", lambda m, a: a * 3.5, [N(3, 4)])
case("div", lambda m, a, b: a / b, [N(3, 4), away(N(3, 4), margin=0.4)], expand=True)
case("div_broadcast", lambda m, a, b: a / b, [N(3, 4), U(0.5, 2, 4)])
case("rdiv_scalar", lambda m, a: 2.0 / a, [away(N(3, 4), margin=0.4)])
case("pow_tensor_tensor", lambda m, a, b: a ** b, [U(0.4, 2, 3, 4), N(3, 4)], expand=True)
case("pow_broadcast", lambda m, a, b: m.pow(a, b), [U(0.4, 2, 3, 1), N(4)])
case("pow_scalar_2", lambda m, a: a ** 2, [N(3, 4)])
case("pow_scalar_3", lambda m, a: a.pow(3), [N(3, 4)])
case("pow_scalar_half", lambda m, a: a ** 0.5, [U(0.3, 2, 3, 4)])
case("pow_scalar_negative", lambda m, a: a ** -1.5, [U(0.3, 2, 3, 4)])
case("pow_scalar_zero", lambda m, a: a ** 0 + a, [N(3, 4)])
case("pow_scalar_base", lambda m, b: 2.0 ** b, [N(3, 4)])
case("pow_scalar_base_fraction", lambda m, b: m.pow(0.7, b), [N(3, 4)])
# d/db a^b at a = 0 is 0 for b >= 0 (PyTorch's special case), not 0 * log(0) = nan.
case("pow_zero_base_tensor", lambda m, a, b: a.detach() ** b, [N(2, 3), U(0.5, 2, 2, 3)],
     gradcheck=False)
case("pow_zero_base_tensor_values", lambda m, b, c: c ** b, [U(0.5, 2, 2, 3), C([[0.0, 1.5, 0.0], [2.0, 0.0, 0.5]])],
     gradcheck=False)
case("pow_zero_base_scalar", lambda m, b: 0.0 ** b, [U(0.5, 2, 2, 3)], gradcheck=False)
# d/da a^b at b = 0 is 0, also at a = 0 (PyTorch), not 0 * 0^-1 = nan.
case("pow_zero_exponent_tensor", lambda m, a, b: a ** b,
     [np.array([[0.0, 2.0, 0.0], [0.0, 1.5, 3.0]]), np.array([[0.0, 0.0, 1.5], [2.0, 0.0, 0.0]])], gradcheck=False)
case("pow_zero_base_scalar_negative_exponent", lambda m, b: 0.0 ** b, [np.array([[0.5, -1.0, 0.0], [2.0, -0.5, 1.0]])],
     gradcheck=False)
case("maximum", lambda m, a, b: m.maximum(a, b), [distinct(3, 4), distinct(3, 4) + 0.05], expand=True)
case("minimum", lambda m, a, b: m.minimum(a, b), [distinct(3, 4), distinct(3, 4) + 0.05], expand=True)
case("maximum_broadcast", lambda m, a, b: m.maximum(a, b), [distinct(3, 4), distinct(4) + 0.05])
# ties split the gradient evenly between both inputs, as PyTorch's maximum / minimum
case("maximum_ties", lambda m, a, b: m.maximum(a, b),
     [np.array([[1.0, 2.0, 3.0], [4.0, -1.0, 0.5]]), np.array([[1.0, 0.0, 3.0], [5.0, -1.0, 0.25]])],
     gradcheck=False, layouts=("contiguous", "transposed"))
case("minimum_ties", lambda m, a, b: m.minimum(a, b),
     [np.array([[1.0, 2.0, 3.0], [4.0, -1.0, 0.5]]), np.array([[1.0, 0.0, 3.0], [5.0, -1.0, 0.25]])],
     gradcheck=False, layouts=("contiguous", "transposed"))
case("remainder", lambda m, a, b: m.remainder(a, b),
     [np.array([[5.3, -2.6, 7.1], [-4.4, 3.7, 0.6]]), np.array([[2.0, 1.5, -3.0], [2.5, -2.2, 1.3]])],
     layouts=("contiguous", "transposed"))
case("remainder_scalar", lambda m, a: a % 1.5, [np.array([[5.3, -2.6, 7.1], [-4.4, 3.7, 0.6]])])
case("where", lambda m, c, a, b: m.where(c, a, b), [C(N(3, 4) > 0), N(3, 4), N(3, 4)])
case("where_broadcast", lambda m, c, a, b: m.where(c, a, b), [C(N(3, 1) > 0), N(1, 4), N(3, 4)])
case("where_scalar", lambda m, c, a: m.where(c, a, 0.5), [C(N(3, 4) > 0), N(3, 4)])
case("where_method", lambda m, a: a.where(a > 0, a * a), [away(N(3, 4))])
case("clamp", lambda m, x: x.clamp(-0.5, 0.7), [away(N(3, 4), points=(-0.5, 0.7), margin=0.05)], expand=True)
case("clamp_min", lambda m, x: x.clamp(min=0.2), [away(N(3, 4), points=(0.2,), margin=0.05)])
case("clamp_max", lambda m, x: m.clamp(x, max=0.2), [away(N(3, 4), points=(0.2,), margin=0.05)])
case("clip", lambda m, x: x.clip(-0.3, 0.3), [away(N(3, 4), points=(-0.3, 0.3), margin=0.05)])
case("clamp_tensor_bounds", lambda m, x, lo, hi: x.clamp(lo, hi),
     [away(N(3, 4), points=(-0.5, 0.5), margin=0.05), np.full((4,), -0.5) + U(-0.01, 0.01, 4),
      np.full((3, 1), 0.5)], gradcheck=False)
# PyTorch's clamp passes the gradient where min <= x <= max, boundaries included.
case("clamp_at_boundary", lambda m, x: x.clamp(-0.5, 0.5),
     [np.array([[-0.5, 0.5, 0.0], [1.0, -1.0, 0.5]])], gradcheck=False)
# tensor bounds at the boundary, equal bounds and crossed bounds (min > max: the result is max)
case("clamp_tensor_bounds_edges", lambda m, x, lo, hi: x.clamp(lo, hi),
     [np.array([[-0.5, 0.5, 0.0, 2.0, -2.0], [0.3, 0.3, 1.0, -1.0, 0.7]]),
      np.array([[-0.5, 0.0, 0.0, 0.0, 0.0], [0.3, 0.5, 2.0, 0.5, 0.5]]),
      np.array([[0.5, 0.5, 0.0, 1.0, 1.0], [0.3, 0.1, 0.5, 0.2, -0.2]])], gradcheck=False,
     layouts=("contiguous", "transposed"))
case("clamp_tensor_bounds_min_only", lambda m, x, lo: x.clamp(min=lo), [np.array([[-0.5, 0.5, 0.0], [1.0, -1.0, 0.2]]),
                                                                  np.array([[-0.5, 0.6, 0.0], [0.0, 0.0, 0.2]])],
     gradcheck=False)
# a number min with a tensor max (PyTorch takes two tensors)
case("clamp_tensor_bounds_number_min", lambda m, x, hi: x.clamp(-0.2, hi),
     [np.array([[-0.5, 0.5, 0.0], [1.0, -0.2, 0.2]]), np.array([[0.1, 0.5, -0.3], [2.0, 0.0, 0.2]])],
     torch_fn=lambda m, x, hi: x.clamp(m.full_like(hi, -0.2), hi), gradcheck=False)
case("lerp_scalar_weight", lambda m, a, b: m.lerp(a, b, 0.3), [N(3, 4), N(3, 4)], expand=True)
case("lerp_scalar_weight_high", lambda m, a, b: a.lerp(b, 0.8), [N(3, 4), N(3, 4)])
case("lerp_tensor_weight", lambda m, a, b, w: m.lerp(a, b, w), [N(3, 4), N(3, 4), U(-0.2, 1.2, 3, 4)])
case("lerp_broadcast", lambda m, a, b, w: m.lerp(a, b, w), [N(3, 4), N(4), U(0.1, 0.9, 3, 1)])
case("addcmul", lambda m, x, a, b: m.addcmul(x, a, b, value=0.5), [N(3, 4), N(3, 4), N(4)])
case("addcmul_method", lambda m, x, a, b: x.addcmul(a, b), [N(3, 4), N(3, 1), N(3, 4)])
case("addcdiv", lambda m, x, a, b: m.addcdiv(x, a, b, value=-2.0), [N(3, 4), N(3, 4), U(0.5, 2, 3, 4)])
case("addcdiv_method", lambda m, x, a, b: x.addcdiv(a, b), [N(3, 4), N(4), U(0.5, 2, 3, 1)])

# reductions
case("sum", lambda m, x: x.sum(), [N(3, 4)], expand=True)
case("sum_dim", lambda m, x: x.sum(1), [N(3, 4)])
case("sum_dims_keepdim", lambda m, x: x.sum((0, 2), keepdim=True), [N(2, 3, 4)])
case("sum_negative_dim", lambda m, x: m.sum(x, dim=-2), [N(2, 3, 4)])
case("mean", lambda m, x: x.mean(), [N(3, 4)])
case("mean_dim_keepdim", lambda m, x: x.mean(0, keepdim=True), [N(3, 4)])
case("mean_dims", lambda m, x: m.mean(x, (1, 2)), [N(2, 3, 4)])
case("prod", lambda m, x: x.prod(), [U(0.5, 1.5, 3, 4) * np.sign(N(3, 4))])
case("prod_dim", lambda m, x: x.prod(1), [U(0.5, 1.5, 3, 4) * np.sign(N(3, 4))])
case("prod_dim_keepdim", lambda m, x: m.prod(x, 0, keepdim=True), [U(0.5, 1.5, 3, 4)])
case("prod_with_zero", lambda m, x: x.prod(1), [np.array([[1.5, 0.0, 2.0], [3.0, 4.0, -0.5]])], gradcheck=False,
     layouts=("contiguous",))
case("prod_with_zeros", lambda m, x: x.prod(0), [np.array([[1.5, 0.0, 0.0, 2.0], [0.0, 4.0, 0.0, 3.0],
                                                             [2.5, 0.5, 0.0, -1.0]])], gradcheck=False,
     layouts=("contiguous", "transposed"))
case("prod_all_with_zero", lambda m, x: x.prod(), [np.array([[1.5, 0.0], [-2.0, 3.0]])], gradcheck=False)
case("prod_all_with_zeros", lambda m, x: x.prod(), [np.array([[1.5, 0.0], [0.0, 3.0]])], gradcheck=False)
case("amax", lambda m, x: x.amax(), [distinct(3, 4)])
case("amax_dim", lambda m, x: x.amax(1), [distinct(3, 4)])
case("amax_dims_keepdim", lambda m, x: m.amax(x, (0, 2), keepdim=True), [distinct(2, 3, 4)])
case("amin_dim", lambda m, x: x.amin(-1), [distinct(3, 4)])
case("amin_keepdim", lambda m, x: m.amin(x, 0, keepdim=True), [distinct(3, 4)])
# ties: amax / amin share the gradient evenly (PyTorch's rule)
case("amax_ties", lambda m, x: x.amax(1), [np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])],
     gradcheck=False, layouts=("contiguous",), expand=True)
case("amin_ties", lambda m, x: x.amin(0), [np.array([[1.0, 3.0], [1.0, 0.0], [4.0, 0.0]])],
     gradcheck=False, layouts=("contiguous", "transposed"))
case("max_all", lambda m, x: x.max(), [distinct(3, 4)])
case("min_all", lambda m, x: m.min(x), [distinct(3, 4)])
case("max_all_ties", lambda m, x: x.max(), [np.array([[1.0, 3.0], [3.0, 0.0]])], gradcheck=False,
     layouts=("contiguous",))
case("max_dim", lambda m, x: x.max(1), [distinct(3, 4)])
case("max_dim_keepdim", lambda m, x: m.max(x, dim=0, keepdim=True), [distinct(3, 4)])
case("min_dim", lambda m, x: x.min(dim=-1), [distinct(2, 3, 4)])
case("min_dim_keepdim", lambda m, x: x.min(1, keepdim=True), [distinct(2, 3, 4)])
case("max_dim_values", lambda m, x: x.max(1).values * 2, [distinct(3, 4)])
# max(dim) / min(dim) with ties: PyTorch sends the whole gradient to the element at the returned index
case("max_dim_ties", lambda m, x: x.max(1)[0], [np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])], gradcheck=False,
     layouts=("contiguous",))
case("min_dim_ties", lambda m, x: x.min(0).values, [np.array([[1.0, 0.0], [1.0, 0.0], [4.0, 2.0]])],
     gradcheck=False, layouts=("contiguous",))
case("max_dim_ties_keepdim", lambda m, x: x.max(-1, keepdim=True).values,
     [np.array([[[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]])], gradcheck=False, layouts=("contiguous", "transposed"))
case("var", lambda m, x: x.var(), [N(3, 4)])
case("var_dim_biased", lambda m, x: x.var(1, unbiased=False), [N(3, 4)])
case("var_correction_keepdim", lambda m, x: m.var(x, (0, 2), keepdim=True, correction=0), [N(2, 3, 4)],
     torch_fn=lambda m, x: x.var((0, 2), keepdim=True, unbiased=False))
case("std", lambda m, x: x.std(), [N(3, 4)])
case("std_dim", lambda m, x: x.std(0, keepdim=True), [N(3, 4)])
case("std_biased", lambda m, x: m.std(x, -1, unbiased=False), [N(2, 3, 4)])
case("logsumexp", lambda m, x: x.logsumexp(1), [N(3, 4, scale=3)])
case("logsumexp_dims_keepdim", lambda m, x: m.logsumexp(x, (0, 2), keepdim=True), [N(2, 3, 4, scale=3)])
case("norm", lambda m, x: x.norm(), [N(3, 4)])
case("norm_dim", lambda m, x: x.norm(dim=1), [N(3, 4)])
case("norm_p1", lambda m, x: x.norm(p=1, dim=0), [away(N(3, 4))])
case("norm_p3_keepdim", lambda m, x: x.norm(p=3, dim=1, keepdim=True), [away(N(3, 4))])
case("norm_inf", lambda m, x: x.norm(p=float("inf"), dim=1), [distinct(3, 4)])
case("norm_function", lambda m, x: m.norm(x, p=2, dim=(0, 1)), [N(2, 3, 2)])
case("norm_of_zeros", lambda m, x: x.norm(dim=1), [np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 2.0]])], gradcheck=False,
     layouts=("contiguous",))
case("norm_p3_of_zeros", lambda m, x: x.norm(p=3, dim=0), [np.array([[0.0, 1.0], [0.0, -2.0]])], gradcheck=False)
case("norm_all_zeros", lambda m, x: x.norm(), [np.zeros((2, 3))], gradcheck=False)
case("softmax", lambda m, x: x.softmax(-1), [N(3, 4)])
case("softmax_dim0", lambda m, x: m.softmax(x, 0), [N(3, 4)])
case("softmax_3d_middle", lambda m, x: f("softmax")(m, x, dim=1), [N(2, 3, 4)])
case("log_softmax", lambda m, x: x.log_softmax(1), [N(3, 4, scale=2)])
case("log_softmax_dim0", lambda m, x: f("log_softmax")(m, x, dim=0), [N(2, 3, 4)])
case("cumsum", lambda m, x: x.cumsum(0), [N(3, 4)])
case("cumsum_last", lambda m, x: m.cumsum(x, -1), [N(2, 3, 4)])
case("cumsum_middle", lambda m, x: x.cumsum(dim=1), [N(2, 3, 4)])
# scans, order statistics and NaN-aware reductions (lazy/statistics.h, lazy/sorting.h)
case("cumprod", lambda m, x: x.cumprod(1), [U(0.5, 1.5, 3, 4) * np.sign(N(3, 4))])
case("cumprod_dim0", lambda m, x: m.cumprod(x, 0), [N(3, 4)])
# zeros: only the first zero of a line gets a gradient (the products past it are all 0)
case("cumprod_with_zeros", lambda m, x: x.cumprod(1),
     [np.array([[1.5, 0.0, 2.0, 0.0, 3.0], [0.5, 2.0, -1.0, 0.0, 2.0], [0.0, 0.0, 1.0, 2.0, 1.5]])],
     layouts=("contiguous", "transposed"))
case("logcumsumexp", lambda m, x: x.logcumsumexp(1), [N(3, 4, scale=3)])
case("logcumsumexp_dim0", lambda m, x: m.logcumsumexp(x, 0), [N(3, 4)])
case("cummax", lambda m, x: x.cummax(1).values, [distinct(3, 4)])
case("cummin_dim0", lambda m, x: m.cummin(x, 0)[0], [distinct(3, 4)])
case("sort", lambda m, x: x.sort(1, descending=True).values, [distinct(3, 4)])
case("msort", lambda m, x: m.msort(x), [distinct(3, 4)])
case("topk", lambda m, x: m.topk(x, 2).values, [distinct(3, 4)])
case("kthvalue", lambda m, x: x.kthvalue(2, 0).values, [distinct(3, 4)])
case("median", lambda m, x: x.median(), [distinct(3, 5)])
case("median_dim", lambda m, x: x.median(1).values, [distinct(3, 5)])
case("nanmedian_dim", lambda m, x, k: m.nanmedian(x.masked_fill(k, float("nan")), 1).values,
     [distinct(3, 5), C([[True, False, False, False, True], [False] * 5, [True] * 4 + [False]])])
# median() shares its gradient evenly among the elements equal to it (PyTorch's rule)
case("median_ties", lambda m, x: x.median(), [np.array([[1.0, 2.0, 2.0], [2.0, 3.0, 0.0]])], gradcheck=False)
case("mode_ties", lambda m, x: m.mode(x, 1).values, [np.array([[1.0, 2.0, 2.0, 3.0], [4.0, 4.0, 0.5, 0.5]])],
     gradcheck=False, layouts=("contiguous", "transposed"))
case("quantile", lambda m, x: m.quantile(x, 0.3, dim=1), [distinct(3, 5)])
case("quantile_tensor_q",
     lambda m, x: m.quantile(x, m.tensor([0.2, 0.9], dtype=m.float64, device=x.device), dim=0, keepdim=True),
     [distinct(4, 3)])
case("quantile_all_midpoint", lambda m, x: x.quantile(0.5, interpolation="midpoint"), [distinct(3, 4)])
case("nanquantile", lambda m, x, k: m.nanquantile(x.masked_fill(k, float("nan")), 0.6, dim=1),
     [distinct(3, 5), C([[True, False, False, False, True], [False] * 5, [True] * 4 + [False]])])
case("nansum", lambda m, x, k: m.nansum(x.masked_fill(k, float("nan")), 1), [N(3, 4), C(N(3, 4) > 0.5)])
case("nanmean", lambda m, x, k: x.masked_fill(k, float("nan")).nanmean((0, 1)), [N(3, 4), C(N(3, 4) > 0.5)])
case("var_mean", lambda m, x: m.var_mean(x, 1), [N(3, 4)])
case("std_mean", lambda m, x: m.std_mean(x, (0, 2), correction=0, keepdim=True), [N(2, 3, 4)])
# torch 1.13 has no aminmax derivative; later versions' is amin's and amax's
case("aminmax", lambda m, x: tuple(m.aminmax(x, dim=1)), [distinct(3, 4)],
     torch_fn=lambda m, x: (x.amin(1), x.amax(1)))
case("aminmax_all", lambda m, x: tuple(x.aminmax()), [distinct(3, 4)], torch_fn=lambda m, x: (x.amin(), x.amax()))
case("logsumexp_all_dims", lambda m, x: m.logsumexp(x, (0, 1)), [N(3, 4)])

# matrix products
case("matmul", lambda m, a, b: a @ b, [N(3, 4), N(4, 2)], expand=True)
case("matmul_vector_matrix", lambda m, a, b: m.matmul(a, b), [N(4), N(4, 3)])
case("matmul_matrix_vector", lambda m, a, b: a.matmul(b), [N(3, 4), N(4)])
case("matmul_dot", lambda m, a, b: a @ b, [N(4), N(4)])
case("matmul_batched", lambda m, a, b: a @ b, [N(2, 3, 4), N(2, 4, 2)])
case("matmul_batched_matrix", lambda m, a, b: a @ b, [N(2, 3, 4), N(4, 2)])
case("matmul_matrix_batched", lambda m, a, b: a @ b, [N(3, 4), N(2, 4, 2)])
case("matmul_batched_broadcast", lambda m, a, b: a @ b, [N(2, 1, 3, 4), N(3, 4, 2)])
case("matmul_batched_vector", lambda m, a, b: a @ b, [N(2, 3, 4), N(4)])
case("matmul_vector_batched", lambda m, a, b: a @ b, [N(3), N(2, 3, 4)])
case("mm", lambda m, a, b: m.mm(a, b), [N(3, 4), N(4, 2)])
case("mm_method", lambda m, a, b: a.mm(b), [N(2, 3), N(3, 3)])
case("bmm", lambda m, a, b: m.bmm(a, b), [N(2, 3, 4), N(2, 4, 3)])
case("addmm", lambda m, x, a, b: m.addmm(x, a, b), [N(3, 2), N(3, 4), N(4, 2)])
case("addmm_beta_alpha_broadcast", lambda m, x, a, b: m.addmm(x, a, b, beta=0.5, alpha=-2.0), [N(2), N(3, 4), N(4, 2)])
case("addmm_method", lambda m, x, a, b: x.addmm(a, b, alpha=1.5), [N(3, 2), N(3, 4), N(4, 2)])
case("linear", lambda m, x, w, b: m.nn.functional.linear(x, w, b), [N(3, 4), N(2, 4), N(2)])
case("linear_no_bias", lambda m, x, w: m.nn.functional.linear(x, w), [N(3, 4), N(2, 4)])
case("linear_batched", lambda m, x, w, b: m.nn.functional.linear(x, w, b), [N(2, 3, 4), N(5, 4), N(5)])

# views
case("view", lambda m, x: x.view(4, 3) * 1.5, [N(3, 4)], layouts=("contiguous",), expand=False)
case("view_infer", lambda m, x: x.view(-1, 2).sin(), [N(2, 3, 4)], layouts=("contiguous",))
case("view_as", lambda m, x, y: x.view_as(y) * y, [N(3, 4), N(2, 6)], layouts=("contiguous",))
case("reshape", lambda m, x: x.reshape(2, 6).sin(), [N(3, 4)])
case("reshape_as", lambda m, x, y: x.reshape_as(y) * y, [N(3, 4), N(4, 3)])
case("permute", lambda m, x: x.permute(2, 0, 1).sin(), [N(2, 3, 4)])
case("transpose", lambda m, x: x.transpose(0, 1).cos(), [N(3, 4)])
case("transpose_3d", lambda m, x, w: x.transpose(-1, 0) * w, [N(2, 3, 4), C(N(4, 3, 2))])
case("T", lambda m, x: x.T @ x, [N(3, 4)])
case("t", lambda m, x, w: x.t() * w, [N(3, 4), C(N(4, 3))])
case("mT", lambda m, x: x.mT @ x, [N(2, 3, 4)])
case("expand", lambda m, x, w: x.expand(3, 4) * w, [N(1, 4), C(N(3, 4))], layouts=("contiguous",))
case("expand_minus_one", lambda m, x, w: x.expand(-1, 4) * w, [N(3, 1), C(N(3, 4))], layouts=("contiguous", "strided"))
case("expand_new_dims", lambda m, x, w: x.expand(2, 3, 4) * w, [N(3, 1), C(N(2, 3, 4))],
     layouts=("contiguous", "strided"))
case("expand_as_broadcast_to", lambda m, x, y: x.expand_as(y) * y + x.broadcast_to(3, 4), [N(4), N(3, 4)])
case("squeeze", lambda m, x, w: x.squeeze() * w, [N(3, 1, 4), C(N(3, 4))], layouts=("contiguous", "strided"))
case("squeeze_dim", lambda m, x, w: x.squeeze(1) * w, [N(3, 1, 4), C(N(3, 4))], layouts=("contiguous", "strided"))
case("unsqueeze", lambda m, x, w: x.unsqueeze(1) * w, [N(3, 4), C(N(3, 2, 4))])
case("unsqueeze_negative", lambda m, x, w: x.unsqueeze(-1) * w, [N(3, 4), C(N(3, 4, 2))])
case("flatten", lambda m, x, w: x.flatten() * w, [N(2, 3, 4), C(N(24))])
case("flatten_range", lambda m, x, w: x.flatten(1) * w, [N(2, 3, 4), C(N(2, 12))])
case("unflatten", lambda m, x, w: x.unflatten(1, (2, 3)) * w, [N(4, 6), C(N(4, 2, 3))])
case("narrow", lambda m, x: x.narrow(1, 1, 2).exp(), [N(3, 4)])
case("select", lambda m, x: x.select(0, 1).exp(), [N(3, 4)])
case("select_negative", lambda m, x: x.select(-1, -2) * 3, [N(2, 3, 4)])
case("index_int", lambda m, x: x[1] * 2, [N(3, 4)])
case("slice", lambda m, x: x[1:].exp(), [N(3, 4)])
case("slice_steps", lambda m, x: x[::2, 1::2].exp(), [N(5, 6)])
case("slice_ellipsis", lambda m, x, w: x[..., 1:3] * w, [N(2, 3, 4), C(N(2, 3, 2))])
case("slice_none_int", lambda m, x, w: x[None, :, 2] * w, [N(3, 4), C(N(1, 3))])
case("index_tensor", lambda m, x, i: x[i] * 2, [N(4, 3), C([2, 0, 2, 3])])
case("index_tensor_dim1", lambda m, x, i: x[:, i] * 2, [N(3, 4), C([3, 3, 0])])
case("index_tensor_2d", lambda m, x, i: x[i].sin(), [N(4, 3), C([[0, 1], [1, 3]])])
case("index_slice_and_tensor", lambda m, x, i: x[1:, i].exp(), [N(3, 4), C([0, 3, 3])])
case("index_tensor_negative", lambda m, x, i: x[i] * 2, [N(4, 3), C([-1, 0, -1])])
case("split_method_sections", lambda m, x: x.split([2, 1, 2], dim=-1), [N(3, 5)])
case("index_two_tensors", lambda m, x, i, j: x[i, j] * 2, [N(3, 4), C([0, 2, 2]), C([1, 3, 1])])
case("index_bool", lambda m, x, k: x[k] * 2, [N(3, 4), C(np.array([[True, False, True, False],
                                                                     [False, False, True, True],
                                                                     [True, True, False, False]]))])
case("index_bool_rows", lambda m, x, k: x[k].exp(), [N(3, 4), C([True, False, True])])
case("chain_of_views", lambda m, x, w: x.transpose(0, 1)[1:, ::2].reshape(-1).unsqueeze(0) * w, [N(4, 4), C(N(1, 6))])

# joining, splitting and data movement
case("cat", lambda m, a, b, w: m.cat([a, b]) * w, [N(2, 4), N(3, 4), C(N(5, 4))])
case("cat_dim1", lambda m, a, b, c: m.cat([a, b, c], dim=1).sin(), [N(3, 2), N(3, 1), N(3, 3)])
case("cat_same_tensor", lambda m, a: m.cat([a, a * 2], -1).sin(), [N(3, 2)])
case("stack", lambda m, a, b, w: m.stack([a, b]) * w, [N(3, 4), N(3, 4), C(N(2, 3, 4))])
case("stack_dim", lambda m, a, b: m.stack([a, b], dim=-1).sin(), [N(3, 4), N(3, 4)])
case("split", lambda m, x: x.split(2, dim=1), [N(3, 5)])
case("split_sections", lambda m, x: m.split(x, [1, 2], dim=0), [N(3, 4)])
case("chunk", lambda m, x: x.chunk(3, dim=1), [N(3, 5)])
case("chunk_function", lambda m, x: m.chunk(x, 2), [N(3, 4)])
case("unbind", lambda m, x: x.unbind(1), [N(3, 4)])
case("unbind_function", lambda m, x: m.unbind(x), [N(2, 3)])
case("index_select", lambda m, x, i: x.index_select(0, i), [N(4, 3), C([3, 0, 3, 1])])
case("index_select_dim1", lambda m, x, i: m.index_select(x, 1, i), [N(3, 4), C([1, 1, 2])])
case("gather", lambda m, x, i: x.gather(1, i), [N(3, 4), C([[0, 0, 3], [1, 2, 1], [3, 3, 3]])])
case("gather_dim0", lambda m, x, i: m.gather(x, 0, i), [N(3, 4), C([[0, 1, 2, 0], [2, 2, 1, 1]])])
case("scatter_add", lambda m, x, i, s: x.scatter_add(1, i, s),
     [N(3, 4), C([[0, 0, 3], [1, 2, 1], [3, 3, 3]]), N(3, 3)])
case("scatter_add_dim0", lambda m, x, i, s: m.scatter_add(x, 0, i, s),
     [N(3, 4), C([[0, 1, 2, 0], [2, 2, 1, 1]]), N(2, 4)])
case("take_along_dim", lambda m, x, i: m.take_along_dim(x, i, dim=1), [N(3, 4), C([[0, 3], [1, 1], [2, 0]])])
case("take_along_dim_broadcast", lambda m, x, i: x.take_along_dim(i, dim=0), [N(3, 4), C([[2, 0, 1, 1]])])
case("take_along_dim_flat", lambda m, x, i: m.take_along_dim(x, i), [N(3, 4), C([11, 0, 5, 5])])
case("tril", lambda m, x: x.tril(), [N(4, 4)])
case("tril_diagonal", lambda m, x: m.tril(x, -1), [N(2, 3, 4)])
case("triu", lambda m, x: x.triu(1), [N(3, 4)])
case("triu_function", lambda m, x: m.triu(x), [N(4, 3)])
case("masked_fill", lambda m, x, k: x.masked_fill(k, 0.5), [N(3, 4), C(N(3, 4) > 0)])
case("masked_fill_broadcast", lambda m, x, k: m.masked_fill(x, k, -1.0), [N(3, 4), C(N(4) > 0)])
case("masked_fill_inf_softmax", lambda m, x, k: x.masked_fill(k, float("-inf")).softmax(-1),
     [N(3, 4), C([[False, True, False, False], [True, True, False, True], [False, False, False, False]])])
case("pad", lambda m, x: m.nn.functional.pad(x, (1, 2)), [N(3, 4)])
case("pad_two_dims_value", lambda m, x: m.nn.functional.pad(x, (0, 1, 2, 0), value=1.5), [N(3, 4)])
case("pad_negative", lambda m, x: m.nn.functional.pad(x, (-1, 1)), [N(3, 4)])
case("repeat", lambda m, x: x.repeat(2, 3), [N(2, 3)])
case("repeat_new_dims", lambda m, x: x.repeat(2, 1, 2), [N(3, 2)])

# nn.functional layers and losses
case("embedding", lambda m, i, w: m.nn.functional.embedding(i, w), [C([[0, 2, 0], [3, 3, 1]]), N(4, 3)])
case("embedding_padding_idx", lambda m, i, w: m.nn.functional.embedding(i, w, padding_idx=0),
     [C([[0, 2, 0], [3, 3, 1]]), N(4, 3)], gradcheck=False)
case("embedding_negative_padding_idx", lambda m, i, w: m.nn.functional.embedding(i, w, padding_idx=-1),
     [C([[0, 3, 0], [3, 2, 1]]), N(4, 3)], gradcheck=False)
case("layer_norm", lambda m, x, w, b: m.nn.functional.layer_norm(x, (4,), w, b), [N(3, 4), N(4), N(4)])
case("layer_norm_no_affine", lambda m, x: m.nn.functional.layer_norm(x, [4]), [N(2, 3, 4)])
case("layer_norm_2d_shape", lambda m, x, w, b: m.nn.functional.layer_norm(x, (3, 4), w, b, eps=1e-3),
     [N(2, 3, 4), N(3, 4), N(3, 4)])
_TARGET = C([1, 0, 3, 3, 2])
case("cross_entropy", lambda m, x, t: m.nn.functional.cross_entropy(x, t), [N(5, 4), _TARGET])
case("cross_entropy_ignore_index", lambda m, x, t: m.nn.functional.cross_entropy(x, t, ignore_index=3),
     [N(5, 4), _TARGET])
case("cross_entropy_label_smoothing", lambda m, x, t: m.nn.functional.cross_entropy(x, t, label_smoothing=0.2),
     [N(5, 4), _TARGET])
case("cross_entropy_smoothing_ignore", lambda m, x, t: m.nn.functional.cross_entropy(
    x, t, ignore_index=0, label_smoothing=0.1), [N(5, 4), C([1, 0, 3, 0, 2])])
case("cross_entropy_weight", lambda m, x, t, w: m.nn.functional.cross_entropy(x, t, weight=w),
     [N(5, 4), _TARGET, C([0.5, 1.0, 2.0, 1.5])])
case("cross_entropy_weight_smoothing", lambda m, x, t, w: m.nn.functional.cross_entropy(
    x, t, weight=w, label_smoothing=0.3), [N(5, 4), _TARGET, C([0.5, 1.0, 2.0, 1.5])])
case("cross_entropy_sum", lambda m, x, t: m.nn.functional.cross_entropy(x, t, reduction="sum"), [N(5, 4), _TARGET])
case("cross_entropy_none", lambda m, x, t: m.nn.functional.cross_entropy(x, t, reduction="none"), [N(5, 4), _TARGET])
case("cross_entropy_3d", lambda m, x, t: m.nn.functional.cross_entropy(x, t), [N(2, 4, 3), C([[0, 3, 1], [2, 2, 0]])],
     layouts=("contiguous", "strided"))
# Class probabilities: a floating target shaped like the input (it gets gradients too).
def _probs(*shape, dim=1):
    e = np.exp(N(*shape))
    return e / e.sum(axis=dim, keepdims=True)


_W = C([0.5, 1.0, 2.0, 1.5])
case("cross_entropy_probs", lambda m, x, t: m.nn.functional.cross_entropy(x, t), [N(5, 4), _probs(5, 4)])
case("cross_entropy_probs_weight_smoothing", lambda m, x, t, w: m.nn.functional.cross_entropy(
    x, t, weight=w, label_smoothing=0.2), [N(5, 4), C(_probs(5, 4)), _W])
case("cross_entropy_probs_3d_none", lambda m, x, t, w: m.nn.functional.cross_entropy(x, t, weight=w, reduction="none"),
     [N(2, 4, 3), C(_probs(2, 4, 3)), _W], layouts=("contiguous", "strided"))
case("cross_entropy_probs_unbatched_sum", lambda m, x, t: m.nn.functional.cross_entropy(
    x, t, reduction="sum", label_smoothing=0.1), [N(4), C(_probs(4, dim=0))])
case("nll_loss", lambda m, x, t: m.nn.functional.nll_loss(x, t), [N(5, 4), _TARGET])
case("nll_loss_of_log_softmax", lambda m, x, t: m.nn.functional.nll_loss(x.log_softmax(1), t, ignore_index=1,
                                                                         reduction="sum"), [N(5, 4), _TARGET])
case("nll_loss_weight", lambda m, x, t, w: m.nn.functional.nll_loss(x, t, weight=w),
     [N(5, 4), _TARGET, C([0.5, 1.0, 2.0, 1.5])])
case("mse_loss", lambda m, x, y: m.nn.functional.mse_loss(x, y), [N(3, 4), N(3, 4)])
case("mse_loss_sum_broadcast_target", lambda m, x, y: m.nn.functional.mse_loss(x, y.expand(3, 4), reduction="sum"),
     [N(3, 4), N(4)])
case("mse_loss_none", lambda m, x, y: m.nn.functional.mse_loss(x, y, reduction="none"), [N(3, 4), N(3, 4)])
case("l1_loss", lambda m, x, y: m.nn.functional.l1_loss(x, y), [N(3, 4), N(3, 4) + 3])
case("l1_loss_sum", lambda m, x, y: m.nn.functional.l1_loss(x, y, reduction="sum"), [N(3, 4), N(3, 4) - 3])
case("bce_with_logits", lambda m, x, y: m.nn.functional.binary_cross_entropy_with_logits(x, y),
     [away(N(3, 4, scale=3)), U(0, 1, 3, 4)])
case("bce_with_logits_weights", lambda m, x, y, w, p: m.nn.functional.binary_cross_entropy_with_logits(
    x, y, weight=w, pos_weight=p, reduction="sum"),
     [away(N(3, 4, scale=3)), U(0, 1, 3, 4), C(U(0.5, 2, 4)), C(U(0.5, 3, 4))])
case("bce_with_logits_target_grad", lambda m, x, y: m.nn.functional.binary_cross_entropy_with_logits(
    x, y, reduction="none"), [away(N(3, 4, scale=3)), U(0, 1, 3, 4)])


def _sdpa_reference(m, q, k, v, mask=None, is_causal=False, scale=None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if is_causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return s.softmax(-1) @ v


case("sdpa", lambda m, q, k, v: m.nn.functional.scaled_dot_product_attention(q, k, v), [N(2, 3, 4), N(2, 3, 4),
                                                                                          N(2, 3, 4)],
     torch_fn=_sdpa_reference)
case("sdpa_causal", lambda m, q, k, v: m.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
     [N(2, 3, 4), N(2, 3, 4), N(2, 3, 2)],
     torch_fn=lambda m, q, k, v: _sdpa_reference(m, q, k, v, is_causal=True))
case("sdpa_causal_heads_scale", lambda m, q, k, v: m.nn.functional.scaled_dot_product_attention(
    q, k, v, is_causal=True, scale=0.3), [N(1, 2, 3, 2), N(1, 2, 3, 2), N(1, 2, 3, 2)],
     torch_fn=lambda m, q, k, v: _sdpa_reference(m, q, k, v, is_causal=True, scale=0.3))
case("sdpa_float_mask", lambda m, q, k, v, a: m.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=a),
     [N(2, 3, 4), N(2, 4, 4), N(2, 4, 2), N(3, 4)],
     torch_fn=lambda m, q, k, v, a: _sdpa_reference(m, q, k, v, mask=a))
case("sdpa_bool_mask", lambda m, q, k, v, a: m.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=a),
     [N(2, 3, 4), N(2, 4, 4), N(2, 4, 2), C([[True, False, True, True], [True, True, False, False],
                                            [False, False, False, True]])],
     torch_fn=lambda m, q, k, v, a: _sdpa_reference(m, q, k, v, mask=a))

# ---- convolution, pooling, padding, resampling, losses (ops-nn) ----
# The input gradients of convolutions and pools sum overlapping windows back (col2im); max
# pooling's reaches one element per window (no ties: `distinct`).
case("conv1d", lambda m, x, w, b: m.nn.functional.conv1d(x, w, b, stride=2, padding=1, dilation=2),
     [N(2, 3, 9), N(4, 3, 3), N(4)])
case("conv2d", lambda m, x, w, b: m.nn.functional.conv2d(x, w, b, padding=(1, 2)), [N(2, 3, 5, 4), N(2, 3, 3, 2), N(2)])
case("conv2d_strided_dilated_groups", lambda m, x, w: m.nn.functional.conv2d(x, w, stride=(2, 1), dilation=(1, 2),
                                                                             groups=2), [N(1, 4, 6, 7), N(4, 2, 2, 3)])
case("conv2d_depthwise", lambda m, x, w: m.nn.functional.conv2d(x, w, padding=1, groups=2), [N(2, 2, 4, 4),
                                                                                                N(4, 1, 3, 3)])
case("conv2d_same", lambda m, x, w: m.nn.functional.conv2d(x, w, padding="same"), [N(1, 2, 4, 5), N(3, 2, 2, 3)])
case("conv3d", lambda m, x, w, b: m.nn.functional.conv3d(x, w, b, stride=2, padding=1), [N(1, 2, 3, 4, 3),
                                                                                            N(2, 2, 2, 2, 2), N(2)])
case("conv_transpose1d", lambda m, x, w, b: m.nn.functional.conv_transpose1d(x, w, b, stride=3, padding=1),
     [N(2, 3, 4), N(3, 2, 3), N(2)])
case("conv_transpose2d", lambda m, x, w: m.nn.functional.conv_transpose2d(x, w, stride=2, padding=1,
                                                                          output_padding=1, groups=2, dilation=(1, 2)),
     [N(1, 4, 3, 3), N(4, 1, 3, 2)])
case("conv_transpose3d", lambda m, x, w: m.nn.functional.conv_transpose3d(x, w, stride=(1, 2, 1)),
     [N(1, 2, 2, 3, 2), N(2, 2, 2, 2, 2)])
case("unfold_im2col", lambda m, x: m.nn.functional.unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
     [N(2, 2, 5, 6)])
case("fold_col2im", lambda m, x: m.nn.functional.fold(x, (4, 5), 2, padding=1, stride=(1, 2)), [N(2, 8, 15)])
case("max_pool2d", lambda m, x: m.nn.functional.max_pool2d(x, 3, 2, 1, ceil_mode=True), [distinct(2, 2, 5, 6)])
case("max_pool2d_dilated_indices", lambda m, x: m.nn.functional.max_pool2d(x, 2, 1, 1, dilation=2,
                                                                           return_indices=True),
     [distinct(1, 2, 5, 5)])
case("max_pool1d", lambda m, x: m.nn.functional.max_pool1d(x, 3, 2), [distinct(2, 3, 8)])
case("max_pool3d", lambda m, x: m.nn.functional.max_pool3d(x, 2, 1), [distinct(1, 2, 3, 3, 4)])
case("avg_pool2d", lambda m, x: m.nn.functional.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
     [N(2, 2, 5, 6)])
case("avg_pool2d_divisor", lambda m, x: m.nn.functional.avg_pool2d(x, 2, divisor_override=3), [N(2, 2, 4, 6)])
case("avg_pool1d", lambda m, x: m.nn.functional.avg_pool1d(x, 3, 2, 1), [N(2, 3, 8)])
case("avg_pool3d", lambda m, x: m.nn.functional.avg_pool3d(x, 2, 1, 1), [N(1, 2, 3, 3, 4)])
case("adaptive_avg_pool2d", lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, (3, 4)), [N(2, 2, 5, 7)])
case("adaptive_avg_pool1d_tiles", lambda m, x: m.nn.functional.adaptive_avg_pool1d(x, 4), [N(2, 3, 8)])
case("adaptive_max_pool2d", lambda m, x: m.nn.functional.adaptive_max_pool2d(x, (2, 3)), [distinct(2, 2, 5, 7)])
case("max_unpool2d", lambda m, x, i: m.nn.functional.max_unpool2d(x, i, 2), [N(1, 2, 2, 3),
                                                                             C([[[[0, 3, 5], [12, 9, 23]],
                                                                                 [[7, 2, 4], [18, 21, 16]]]])])
case("lp_pool2d", lambda m, x: m.nn.functional.lp_pool2d(x, 2, (2, 3)), [U(0.5, 2, 1, 2, 4, 6)])
case("pad_reflect", lambda m, x: m.nn.functional.pad(x, (2, 1, 1, 2), "reflect"), [N(2, 2, 3, 4)])
case("pad_replicate", lambda m, x: m.nn.functional.pad(x, (2, 1, 0, 3, 1, 1), "replicate"), [N(1, 2, 2, 3, 4)])
case("pad_circular", lambda m, x: m.nn.functional.pad(x, (2, -1), "circular"), [N(2, 3, 4)])
case("interpolate_bilinear", lambda m, x: m.nn.functional.interpolate(x, size=(5, 7), mode="bilinear"),
     [N(2, 2, 3, 4)])
case("interpolate_bicubic_corners", lambda m, x: m.nn.functional.interpolate(x, scale_factor=1.5, mode="bicubic",
                                                                             align_corners=True), [N(1, 2, 3, 4)])
case("interpolate_trilinear", lambda m, x: m.nn.functional.interpolate(x, size=(3, 2, 5), mode="trilinear"),
     [N(1, 2, 2, 3, 4)])
case("interpolate_nearest", lambda m, x: m.nn.functional.interpolate(x, scale_factor=(1.7, 0.6)), [N(2, 2, 4, 6)])
case("interpolate_area", lambda m, x: m.nn.functional.interpolate(x, size=(3, 4), mode="area"), [N(2, 2, 5, 7)])
case("pixel_shuffle", lambda m, x: m.nn.functional.pixel_shuffle(x, 2), [N(2, 8, 2, 3)])
# PyTorch 1.13's channel_shuffle has no derivative: its reference is the same permutation of channels
case("channel_shuffle", lambda m, x: m.channel_shuffle(x, 3), [N(2, 6, 2, 3)],
     torch_fn=lambda m, x: x[:, [0, 2, 4, 1, 3, 5]])
case("affine_grid", lambda m, t: m.nn.functional.affine_grid(t, (2, 1, 3, 4), align_corners=False), [N(2, 2, 3)])
case("cross_entropy_nd_weight_smoothing", lambda m, x, t, w: m.nn.functional.cross_entropy(
    x, t, weight=w, ignore_index=1, label_smoothing=0.2), [N(2, 4, 3, 2), C([[[0, 1], [3, 2], [1, 1]],
                                                                            [[2, 3], [0, 0], [3, 1]]]),
                                                           C(U(0.5, 2, 4))])
case("cross_entropy_probabilities", lambda m, x, t: m.nn.functional.cross_entropy(x, t, label_smoothing=0.1),
     [N(3, 4), U(0, 1, 3, 4)])
case("nll_loss_none", lambda m, x, t: m.nn.functional.nll_loss(x, t, reduction="none"), [N(3, 4), C([0, 3, 1])])
case("binary_cross_entropy", lambda m, x, y, w: m.nn.functional.binary_cross_entropy(x, y, w),
     [U(0.05, 0.95, 3, 4), U(0, 1, 3, 4), C(U(0.5, 2, 4))])
case("smooth_l1_loss", lambda m, x, y: m.nn.functional.smooth_l1_loss(x, y, beta=0.5), [N(3, 4), N(3, 4)])
case("huber_loss", lambda m, x, y: m.nn.functional.huber_loss(x, y, delta=0.5), [N(3, 4), N(3, 4)])
case("kl_div_batchmean", lambda m, x, y: m.nn.functional.kl_div(x, y, reduction="batchmean"),
     [N(3, 4), U(0.1, 1, 3, 4)])
case("kl_div_log_target", lambda m, x, y: m.nn.functional.kl_div(x, y, reduction="sum", log_target=True),
     [N(3, 4), N(3, 4)])
case("soft_margin_loss", lambda m, x, y: m.nn.functional.soft_margin_loss(x, y), [N(3, 4), C([[1, -1, 1, 1]] * 3)])
case("margin_ranking_loss", lambda m, x, y, t: m.nn.functional.margin_ranking_loss(x, y, t, margin=0.2),
     [N(5), N(5), C([1, -1, -1, 1, 1])])
case("cosine_embedding_loss", lambda m, x, y, t: m.nn.functional.cosine_embedding_loss(x, y, t, margin=0.1),
     [N(4, 3), N(4, 3), C([1, -1, -1, 1])])
case("triplet_margin_loss", lambda m, a, p, n: m.nn.functional.triplet_margin_loss(a, p, n, margin=3.0, swap=True),
     [N(4, 3), N(4, 3), N(4, 3)])
case("hinge_embedding_loss", lambda m, x, t: m.nn.functional.hinge_embedding_loss(x, t, margin=2.0),
     [N(5), C([1, -1, -1, 1, -1])])
case("multilabel_soft_margin_loss", lambda m, x, t: m.nn.functional.multilabel_soft_margin_loss(x, t),
     [N(3, 4), C([[1.0, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]])])
case("multilabel_margin_loss", lambda m, x, t: m.nn.functional.multilabel_margin_loss(x, t),
     [N(3, 4), C([[3, 0, -1, 1], [2, 2, 1, -1], [-1, 0, 1, 2]])])
case("multi_margin_loss", lambda m, x, t, w: m.nn.functional.multi_margin_loss(x, t, p=2, margin=0.5, weight=w),
     [N(3, 4), C([0, 3, 1]), C(U(0.5, 2, 4))])
case("poisson_nll_loss_full", lambda m, x, t: m.nn.functional.poisson_nll_loss(x, t, full=True), [N(3, 4),
                                                                                                   U(0, 4, 3, 4)])
case("gaussian_nll_loss", lambda m, x, t, v: m.nn.functional.gaussian_nll_loss(x, t, v), [N(3, 4), N(3, 4),
                                                                                           U(0.5, 2, 3, 1)])
case("sdpa_dropout_off_enable_gqa", lambda m, q, k, v: m.nn.functional.scaled_dot_product_attention(
    q, k, v, dropout_p=0.0, enable_gqa=True), [N(1, 4, 3, 2), N(1, 2, 3, 2), N(1, 2, 3, 2)],
     torch_fn=lambda m, q, k, v: _sdpa_reference(m, q, k.repeat_interleave(2, -3), v.repeat_interleave(2, -3)))

# data movement (lazy/ops_movement.h)
case("diagonal", lambda m, x: x.diagonal().exp(), [N(3, 4)])
case("diagonal_offset_dims", lambda m, x: m.diagonal(x, -1, 2, 0) * 2, [N(3, 2, 4)])
case("unfold_overlapping", lambda m, x: x.unfold(1, 3, 1).sin(), [N(2, 6)])
case("unfold_disjoint", lambda m, x: x.unfold(0, 2, 3).exp(), [N(7, 2)])
case("movedim", lambda m, x: m.movedim(x, (0, 1), (2, 0)).sin(), [N(2, 3, 4)])
case("swapaxes", lambda m, x: m.swapaxes(x, 0, 2).exp() + x.swapdims(0, 2), [N(2, 3, 4)])
case("diag_vector", lambda m, x: m.diag(x, 1), [N(3)])
case("diag_matrix", lambda m, x: x.diag(-1) * 3, [N(3, 4)])
case("diag_embed", lambda m, x: m.diag_embed(x, 1, 0, 2), [N(2, 3)])
case("trace", lambda m, x: m.trace(x) * x, [N(3, 3)])
case("roll", lambda m, x: m.roll(x, (1, -2), (0, 1)).sin(), [N(3, 4)])
case("roll_flat", lambda m, x: x.roll(5), [N(3, 4)])
case("rot90", lambda m, x: m.rot90(x, 3, (1, 0)).exp(), [N(3, 4)])
case("fliplr_flipud", lambda m, x: m.fliplr(x) * m.flipud(x), [N(3, 3)])
case("repeat_interleave", lambda m, x: x.repeat_interleave(2, dim=1).sin(), [N(2, 3)])
case("repeat_interleave_tensor", lambda m, x, r: m.repeat_interleave(x, r, 0) * 2, [N(3, 2), C([2, 0, 3])])
case("meshgrid", lambda m, x, y: m.meshgrid(x, y, indexing="xy"), [N(3), N(2)])
case("cartesian_prod", lambda m, x, y: m.cartesian_prod(x, y).exp(), [N(3), N(2)])
case("combinations", lambda m, x: m.combinations(x, 2, with_replacement=True).sin(), [N(4)])
case("block_diag", lambda m, x, y: m.block_diag(x, y) * 2, [N(2, 3), N(2)])
case("tensor_split", lambda m, x: m.tensor_split(x, [1, 3], 1), [N(2, 5)])
case("stacks", lambda m, x, y: m.hstack([x, y]) + m.vstack([x, y]).sum() + m.dstack([x, y]).sum() +
     m.column_stack([x, y]).sum(), [N(3), N(3)])
case("atleast_3d", lambda m, x: m.atleast_3d(x).exp(), [N(2, 3)])
# src larger than the index: only its elements at the index's positions get gradients (PyTorch 1.13
# refuses that backward, so its reference slices src first)
case("scatter_src", lambda m, x, i, s: x.scatter(1, i, s), [N(3, 5), C([[0, 3], [4, 1], [2, 0]]), N(3, 3)],
     torch_fn=lambda m, x, i, s: x.scatter(1, i, s[:, :2]))
case("scatter_value", lambda m, x, i: m.scatter(x, 0, i, 1.5) * x, [N(3, 4), C([[2, 0, 1, 1]])])
# PyTorch has no derivative for scatter(reduce="add"); it equals scatter_add's
case("scatter_reduce_add", lambda m, x, i, s: x.scatter(1, i, s, reduce="add"),
     [N(3, 4), C([[0, 0], [3, 1], [2, 2]]), N(3, 3)], torch_fn=lambda m, x, i, s: x.scatter_add(1, i, s[:, :2]))
case("scatter_add_src_larger_than_index", lambda m, x, i, s: x.scatter_add(0, i, s), [N(3, 4), C([[2, 0, 1]]), N(2, 4)],
     torch_fn=lambda m, x, i, s: x.scatter_add(0, i, s[:1, :3]))
for _reduce in ("sum", "mean", "amax", "amin", "prod"):
    _x = distinct(3, 4) if _reduce in ("amax", "amin") else U(0.5, 1.5, 3, 4) * np.sign(N(3, 4))
    _s = distinct(3, 3) + 0.05 if _reduce in ("amax", "amin") else U(0.5, 1.5, 3, 3)
    for _self in (True, False):
        case(f"scatter_reduce_{_reduce}{'' if _self else '_exclude_self'}",
             lambda m, x, i, s, r=_reduce, inc=_self: x.scatter_reduce(1, i, s, r, include_self=inc),
             [_x, C([[0, 0, 3], [1, 2, 1], [3, 3, 3]]), _s])
case("scatter_reduce_amax_ties", lambda m, x, i, s: x.scatter_reduce(1, i, s, "amax"),
     [np.array([[1.0, 2.0], [3.0, 0.5]]), C([[0, 0], [1, 1]]), np.array([[1.0, 1.0], [3.0, 3.0]])],
     gradcheck=False, layouts=("contiguous",))
case("scatter_reduce_prod_with_zeros", lambda m, x, i, s: x.scatter_reduce(1, i, s, "prod"),
     [np.array([[1.5, 0.0, 2.0], [3.0, 4.0, -0.5]]), C([[0, 0, 1], [2, 2, 2]]),
      np.array([[0.0, 2.0, 0.0], [0.0, 1.5, -2.0]])], gradcheck=False, layouts=("contiguous",))
case("index_add", lambda m, x, i, s: x.index_add(0, i, s, alpha=1.5), [N(4, 3), C([3, 0, 3]), N(3, 3)])
case("index_copy", lambda m, x, i, s: m.index_copy(x, 1, i, s), [N(3, 4), C([2, 0]), N(3, 2)])
case("index_fill", lambda m, x, i: x.index_fill(1, i, -1.0) * x, [N(3, 4), C([1, 3])])
case("take", lambda m, x, i: m.take(x, i), [N(3, 4), C([[0, 11], [5, 5]])])
case("put", lambda m, x, i, s: x.put(i, s), [N(3, 4), C([1, 7]), N(2)])
case("put_accumulate", lambda m, x, i, s: x.put(i, s, accumulate=True), [N(3, 4), C([1, 1, 7]), N(3)])
case("index_put_accumulate", lambda m, x, i, v: x.index_put((i,), v, accumulate=True),
     [N(4, 3), C([0, 2, 0]), N(3, 3)])
case("masked_select", lambda m, x, k: m.masked_select(x, k) * 2, [N(3, 4), C(N(4) > 0)])
case("index_nested_tuple", lambda m, x: x[((0, 2), (1, 3))] * x[((1,),)].sum(), [N(3, 4)])

# linear algebra (lazy/ops_linalg.h)
case("einsum_matmul", lambda m, a, b: m.einsum("ij,jk->ik", a, b), [N(3, 4), N(4, 2)])
case("einsum_batch_broadcast", lambda m, a, b: m.einsum("...ij,...jk", a, b), [N(2, 3, 4), N(1, 4, 2)])
case("einsum_trace_diagonal", lambda m, a: m.einsum("ii", a) * m.einsum("ii->i", a), [N(3, 3)])
case("einsum_three", lambda m, a, b, c: m.einsum("bn,anm,bm->ba", a, b, c), [N(2, 3), N(4, 3, 2), N(2, 2)])
case("einsum_outer_sum", lambda m, a, b: m.einsum("i,j->", a, b) + m.einsum("i,j", a, b).sum(), [N(3), N(2)])
case("tensordot", lambda m, a, b: m.tensordot(a, b, ([1, 2], [1, 0])), [N(2, 3, 4), N(4, 3, 2)])
case("kron", lambda m, a, b: m.kron(a, b), [N(2, 3), N(2, 2)])
case("outer_inner", lambda m, a, b: m.outer(a, b).sum() + m.inner(a[:2], b), [N(3), N(2)])
case("dot_mv", lambda m, a, b, v: m.dot(a, b) * m.mv(v, a), [N(3), N(3), N(2, 3)])
case("addbmm", lambda m, i, a, b: m.addbmm(i, a, b, beta=0.5, alpha=2.0), [N(3, 2), N(2, 3, 4), N(2, 4, 2)])
case("baddbmm", lambda m, i, a, b: m.baddbmm(i, a, b, alpha=-1.5), [N(3, 2), N(2, 3, 4), N(2, 4, 2)])
case("addmv", lambda m, i, a, b: m.addmv(i, a, b, beta=2.0), [N(3), N(3, 4), N(4)])
case("addr", lambda m, i, a, b: i.addr(a, b, alpha=0.5), [N(3, 2), N(3), N(2)])
case("multi_dot", lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), [N(3), N(3, 4), N(4, 2)])
case("vector_norm_ords", lambda m, x: m.linalg.vector_norm(x, 3, 1) + m.linalg.vector_norm(x, 0.5, 1) +
     m.linalg.vector_norm(x, -1, 1), [away(N(2, 4))])
case("matrix_norm", lambda m, x: m.linalg.matrix_norm(x) + m.linalg.matrix_norm(x, 1) * 2 +
     m.linalg.matrix_norm(x, float("inf")), [away(N(2, 3, 4))])
case("linalg_norm", lambda m, x: m.linalg.norm(x, dim=(0, 2)), [N(2, 3, 4)])
case("cdist_p2", lambda m, a, b: m.cdist(a, b), [N(4, 3), N(5, 3)])
case("cdist_p2_products", lambda m, a, b: m.cdist(a, b, compute_mode="use_mm_for_euclid_dist"), [N(4, 3), N(5, 3)],
     rtol=1e-7, atol=1e-8)
case("cdist_p1_p3", lambda m, a, b: m.cdist(a, b, 1.0) + m.cdist(a, b, 3.0), [N(2, 4, 3), N(2, 5, 3)])
case("cdist_zero_distance", lambda m, a, b: m.cdist(a, b) + m.cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
     [np.array([[1.0, 2.0], [0.0, 1.0]]), np.array([[1.0, 2.0], [3.0, 1.0]])], gradcheck=False,
     layouts=("contiguous",))
case("cosine_similarity", lambda m, a, b: f("cosine_similarity")(m, a, b), [N(3, 4), N(3, 4)])
case("pairwise_distance", lambda m, a, b: f("pairwise_distance")(m, a, b, 3.0), [N(3, 4), N(4)])
case("normalize", lambda m, a: m.nn.functional.normalize(a, dim=0), [N(3, 4)])
case("vecdot", lambda m, a, b: m.linalg.vecdot(a, b), [N(3, 4), N(3, 4)])

# composite expressions where one leaf reaches the output along several paths
case("shared_leaf", lambda m, x: (x * x.exp()).sum(1) / x.norm(), [N(3, 4)])
case("mlp", lambda m, x, w1, w2: (m.nn.functional.gelu(x @ w1) @ w2).log_softmax(-1),
     [N(3, 4), N(4, 5), N(5, 2)])

CASE_BY_NAME = {c.name: c for c in CASES}
assert len(CASE_BY_NAME) == len(CASES), "duplicate case names"


def _params(cases, xfail=True):
    out = []
    for c in cases:
        marks = [pytest.mark.xfail(reason=c.xfail, strict=True)] if (c.xfail and xfail) else []
        out.append(pytest.param(c, marks=marks, id=c.name))
    return out


# ---- running a case ----

def _tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _weights(outs):
    """A fixed random output gradient per differentiable output."""
    g = np.random.default_rng(1234)
    return [g.standard_normal(tuple(o.shape)) for o in outs]


def _build(lib, c, device, layout):
    """(args, leaves, leaf values): differentiable inputs become leaves with `layout`."""
    args, leaves, values = [], [], []
    for x in c.inputs:
        if isinstance(x, C):
            if lib is loom:
                args.append(loom.tensor(x.array, device=device))
            else:
                args.append(torch.from_numpy(np.array(x.array, copy=True)))
        elif isinstance(x, np.ndarray):
            t, v = make(x, device, layout)
            if lib is torch:
                t = torch.from_numpy(np.array(v, dtype=np.float64, copy=True))
            t.requires_grad_()
            args.append(t)
            leaves.append(t)
            values.append(v)
        else:
            args.append(x)
    return args, leaves, values


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy().copy()
    return np.array(t.numpy(), copy=True)


def run_case(lib, c, device, layout):
    """Runs forward and backward; returns (outputs as numpy, leaf grads as numpy or None)."""
    args, leaves, _ = _build(lib, c, device, layout)
    outs = _tuple(c.run(lib, *args))
    diff = [o for o in outs if o.requires_grad]
    assert diff, "no output requires grad"
    ws = _weights(diff)
    if lib is torch:
        torch.autograd.backward(diff, [torch.from_numpy(w) for w in ws])
    else:
        loom.autograd.backward(diff, [loom.tensor(w, device=device) for w in ws])
    grads = []
    for leaf in leaves:
        if leaf.grad is None:
            grads.append(None)
            continue
        assert tuple(leaf.grad.shape) == tuple(leaf.shape)
        if lib is loom:
            assert leaf.grad.dtype is leaf.dtype
            assert leaf.grad.is_lazy == (device == "lazy")
        grads.append(_np(leaf.grad))
    return [_np(o) for o in outs], grads


def assert_grads_close(got, want, rtol, atol, what):
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        if w is None:
            assert g is None or not np.any(g), f"{what}: input {k} should get no gradient"
            continue
        assert g is not None, f"{what}: input {k} got no gradient"
        assert g.shape == w.shape, (what, k, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"{what}: grad of input {k}")


def gradcheck_case(c, device):
    """Finite differences (float64) of the case's leaves, through loom.autograd.gradcheck."""
    args, leaves, _ = _build(loom, c, device, "contiguous")
    positions = [i for i, a in enumerate(args) if any(a is leaf for leaf in leaves)]

    def fn(*xs):
        full = list(args)
        for p, x in zip(positions, xs):
            full[p] = x
        return c.run(loom, *full)

    assert loom.autograd.gradcheck(fn, tuple(leaves), eps=1e-6, atol=1e-6, rtol=1e-4)


def check_case(c, device):
    sub = SubChecks()
    for layout in c.layouts:
        with sub(layout):
            outs, grads = run_case(loom, c, device, layout)
            t_outs, t_grads = run_case(torch, c, device, layout)
            assert len(outs) == len(t_outs)
            for o, t in zip(outs, t_outs):
                np.testing.assert_allclose(o, t, rtol=1e-9, atol=1e-12, equal_nan=True, err_msg="forward")
            assert_grads_close(grads, t_grads, c.rtol, c.atol, f"{layout} vs torch")
            if device == "lazy":
                _, cpu_grads = run_case(loom, c, "cpu", layout)
                assert_grads_close(grads, cpu_grads, 1e-10, 1e-12, f"{layout} lazy vs cpu")
    sub.finish()


# ---- the tests ----

@pytest.mark.parametrize("c", _params(CASES))
def test_grad_matches_torch(device, c):
    check_case(c, device)


@pytest.mark.parametrize("c", _params([c for c in CASES if c.gradcheck]))
def test_gradcheck(device, c):
    gradcheck_case(c, device)


def test_every_case_has_a_gradcheck_or_a_reason():
    """Cases skip gradcheck only at non-differentiable points (ties, kinks, zeros) or for float32."""
    skipped = [c.name for c in CASES if not c.gradcheck]
    allowed_words = ("ties", "boundary", "zero", "cast", "dtype", "padding", "tensor_bounds")
    for name in skipped:
        assert any(w in name for w in allowed_words), name


def test_gradcheck_detects_a_wrong_gradient():
    """gradcheck itself can fail: a function whose autograd gradient ignores a term (detach)."""
    x = loom.tensor(N(2, 3)).requires_grad_()
    assert not loom.autograd.gradcheck(lambda a: a * a.detach(), (x,), raise_exception=False)
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        loom.autograd.gradcheck(lambda a: a * a.detach(), (x,))
    with pytest.raises(ValueError, match="float64"):
        loom.autograd.gradcheck(lambda a: a * 2, (loom.ones(2).requires_grad_(),))


def test_every_view_op_of_the_tensor_type_is_covered():
    """The list above names each differentiable op family; a new one should get a case."""
    names = " ".join(CASE_BY_NAME)
    for op in ["view", "reshape", "permute", "transpose", "expand", "squeeze", "unsqueeze", "flatten", "unflatten",
               "narrow", "select", "slice", "index_tensor", "index_bool", "cat", "stack", "split", "chunk", "unbind",
               "index_select", "gather", "scatter_add", "take_along_dim", "tril", "triu", "masked_fill", "pad",
               "repeat", "embedding", "layer_norm", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
               "bce_with_logits", "sdpa", "matmul", "mm", "bmm", "addmm", "linear", "cumsum", "softmax",
               "log_softmax", "logsumexp", "norm", "var", "std", "amax", "amin", "max_dim", "min_dim", "prod",
               "mean", "sum", "lerp", "addcmul", "addcdiv", "clamp", "where", "maximum", "minimum", "pow",
               "nan_to_num", "softplus", "gelu_tanh", "gelu", "silu", "remainder",
               # data movement and linear algebra (lazy/ops_movement.h, lazy/ops_linalg.h)
               "diagonal", "unfold", "movedim", "swapaxes", "diag_embed", "trace", "roll", "rot90",
               "repeat_interleave", "meshgrid", "block_diag", "tensor_split", "scatter_src", "scatter_reduce",
               "index_add", "index_copy", "index_fill", "take", "put", "index_put", "masked_select", "einsum",
               "tensordot", "kron", "addbmm", "baddbmm", "addmv", "addr", "multi_dot", "vector_norm",
               "matrix_norm", "cdist", "cosine_similarity", "pairwise_distance", "normalize"]:
        assert op in names, op


# ---- non-float inputs, mixed dtypes, no-grad inputs ----

def test_grad_flows_only_to_inputs_that_require_it(device):
    a = loom.tensor(N(3, 4), device=device).requires_grad_()
    b = loom.tensor(N(3, 4), device=device)
    out = (a * b + b.exp()).sum()
    out.backward()
    assert b.grad is None and not b.requires_grad
    np.testing.assert_allclose(_np(a.grad), _np(b), rtol=1e-12)


def test_float32_leaf_gets_float32_grad_through_float64_ops(device):
    x = loom.tensor(N(3, 4).astype(np.float32), device=device).requires_grad_()
    y = (x.double() * 3).sum()
    y.backward()
    assert x.grad.dtype is loom.float32
    np.testing.assert_allclose(_np(x.grad), np.full((3, 4), 3.0, np.float32))


def test_mixed_dtype_binary_op_grads_have_each_inputs_dtype(device):
    a = loom.tensor(N(3, 4).astype(np.float32), device=device).requires_grad_()
    b = loom.tensor(N(4), device=device).requires_grad_()
    ta = torch.from_numpy(_np(a)).requires_grad_()
    tb = torch.from_numpy(_np(b)).requires_grad_()
    ((a * b).sin().sum()).backward()
    ((ta * tb).sin().sum()).backward()
    assert a.grad.dtype is loom.float32 and b.grad.dtype is loom.float64
    np.testing.assert_allclose(_np(a.grad), ta.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(b.grad), tb.grad.numpy(), rtol=1e-9)


def test_float32_gradients_match_torch(device):
    """The same checks in float32 (the training dtype) with float32 tolerances."""
    g = np.random.default_rng(7)
    x = g.standard_normal((4, 5)).astype(np.float32)
    w = g.standard_normal((3, 5)).astype(np.float32)
    t = np.array([0, 2, 1, 2])
    outs = []
    for lib in (loom, torch):
        lx = lib.tensor(x, device=device) if lib is loom else torch.from_numpy(x.copy())
        lw = lib.tensor(w, device=device) if lib is loom else torch.from_numpy(w.copy())
        lt = lib.tensor(t, device=device) if lib is loom else torch.from_numpy(t.copy())
        lx.requires_grad_()
        lw.requires_grad_()
        h = lib.nn.functional.linear(lib.nn.functional.layer_norm(lx, (5,)), lw)
        loss = lib.nn.functional.cross_entropy(lib.nn.functional.gelu(h), lt, label_smoothing=0.1)
        loss.backward()
        outs.append((_np(lx.grad), _np(lw.grad)))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


# ---- a small set through the compiled executor ----

COMPILED_CASES = ["mlp", "cross_entropy_label_smoothing", "layer_norm", "softmax_dim0", "logsumexp_dims_keepdim",
                  "sdpa_causal", "gather", "index_tensor", "cat_dim1", "slice_steps", "pad_two_dims_value",
                  "embedding", "var_dim_biased", "maximum_ties", "amax_ties", "cumsum_middle",
                  "matmul_batched_broadcast",
                  "bce_with_logits_weights", "gelu_tanh", "softplus_beta_threshold", "pow_tensor_tensor",
                  "where_broadcast", "scatter_add"]


@pytest.fixture
def compiled_lazy():
    """Lazy mode on the compiled executor (fused, generated kernels) instead of the interpreter."""
    loom._C._set_executor("compiled")
    try:
        yield "lazy"
    finally:
        loom._C._set_executor("compiled")
        release_pending()


@pytest.mark.parametrize("c", _params([CASE_BY_NAME[n] for n in COMPILED_CASES]))
def test_compiled_backward(compiled_lazy, c):
    """The backward programs of these cases compiled (one trace per case and layout, contiguous
    and transposed only): grads equal PyTorch's and eager's."""
    before = loom.metrics()["graph_replays"]  # the interpreter replays no compiled graph
    sub = SubChecks()
    for layout in [lay for lay in c.layouts if lay in ("contiguous", "transposed")]:
        with sub(layout):
            outs, grads = run_case(loom, c, "lazy", layout)
            _, t_grads = run_case(torch, c, "lazy", layout)
            _, cpu_grads = run_case(loom, c, "cpu", layout)
            assert_grads_close(grads, t_grads, c.rtol, c.atol, f"{layout} compiled vs torch")
            assert_grads_close(grads, cpu_grads, 1e-10, 1e-12, f"{layout} compiled vs cpu")
    sub.finish()
    assert loom.metrics()["graph_replays"] > before, "nothing ran through the compiled executor"
