"""Elementwise ops and operators agree with PyTorch: values, result dtype (type promotion) and shape.

Inputs come contiguous, transposed, strided (slices with steps), broadcast (expand), empty and
0-d; dtypes bool, uint8, int32, int64, float32 and float64. Where PyTorch rejects an input, loom
must raise the same exception type (see _ops_helpers.check)."""

import operator

import numpy as np
import pytest
import torch.nn.functional as F

from _ops_helpers import (ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, LAYOUTS, SubChecks, assert_close, check,  # noqa: F401
                          device, make, random_array, torch)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SPECIAL = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.5, -2.5, 0.5, -1.5, 1e-30, 1e30, 3.0, -7.0]


# ---- unary ops ----

def _fn(name):
    """loom.<name> / the torch function of the same meaning (F.<name> for activation functions)."""
    def call(m, x, *args, **kw):
        if m is torch and name in ("gelu", "silu", "softplus"):
            return getattr(F, name)(x, *args, **kw)
        return getattr(m, name)(x, *args, **kw)
    return call


UNARY = ["abs", "neg", "negative", "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos",
         "tan", "tanh", "sigmoid", "relu", "silu", "erf", "floor", "ceil", "sign", "reciprocal", "square",
         "logical_not", "isnan", "isinf", "round", "gelu", "softplus", "nan_to_num", "bitwise_not"]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_float(device, name, dtype):
    sub = SubChecks()
    for layout in LAYOUTS:
        for shape in [(3, 4), (2, 3, 5), (0, 3), ()]:
            with sub(f"{layout} {shape}"):
                check(device, _fn(name), random_array(shape, dtype, seed=len(shape)), layouts=[layout])
    sub.finish()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_special_values(device, name, dtype):
    check(device, _fn(name), np.array(SPECIAL, dtype=dtype))


@pytest.mark.parametrize("dtype", INT_DTYPES + ["bool"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_int_and_bool(device, name, dtype):
    """Integer and bool inputs: PromoteFloat ops give float32, the rest keep the dtype (nan_to_num
    is the identity), square of bool is int64; ops that PyTorch rejects on these dtypes (abs, neg,
    floor of bool; gelu, silu of any) raise."""
    for shape, layout in [((3, 4), "contiguous"), ((3, 4), "transposed"), ((2, 6), "strided"), ((0,), "contiguous"),
                          ((), "contiguous")]:
        check(device, _fn(name), random_array(shape, dtype, seed=3), layouts=[layout])


@pytest.mark.parametrize("name", ["abs", "neg", "exp", "sqrt", "sigmoid", "relu", "floor", "sign", "round",
                                  "logical_not", "isnan", "square", "gelu", "nan_to_num"])
def test_unary_method_form(device, name):
    x = random_array((3, 4), "float32", seed=5)
    check(device, lambda m, t: getattr(t, name)(), x,
          torch_fn=(lambda m, t: getattr(F, name)(t)) if name == "gelu" else None)


@pytest.mark.parametrize("name", ["abs", "neg", "exp", "sqrt", "sin", "tanh", "sigmoid", "relu", "floor", "ceil",
                                  "round", "sign", "reciprocal", "square", "silu", "erf", "nan_to_num"])
def test_unary_inplace_method(device, name):
    """x.<op>_() writes op(x) into x and returns x itself."""
    values = random_array((3, 4), "float64", seed=7)
    x, _ = make(values, device)
    ref = torch.from_numpy(values.copy())
    r = getattr(x, name + "_")()
    assert r is x
    if name == "silu":
        F.silu(ref, inplace=True)
    else:
        getattr(ref, name + "_")()
    assert_close(x, ref)


def test_round_half_to_even(device):
    values = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 1e16 + 1], dtype=np.float64)
    check(device, lambda m, x: m.round(x), values)
    check(device, lambda m, x: m.round(x), values.astype(np.float32))


@pytest.mark.parametrize("decimals", [1, 2, 3, -1, -2])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_round_decimals(device, decimals, dtype):
    values = np.array([0.125, 1.005, 2.675, -3.14159, 1234.5678, 25.0, 35.0, -45.0, 0.0], dtype=dtype)
    check(device, lambda m, x: m.round(x, decimals=decimals), values)
    check(device, lambda m, x: x.round(decimals=decimals), values)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_gelu(device, approximate, dtype):
    x = np.concatenate([random_array((20,), dtype, seed=2) * 4, np.array(SPECIAL, dtype=dtype)])
    check(device, lambda m, t: (F.gelu if m is torch else m.gelu)(t, approximate=approximate), x)


@pytest.mark.parametrize("beta,threshold", [(1, 20), (2, 5), (0.5, 1.0), (3.0, 40)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softplus(device, beta, threshold, dtype):
    x = np.concatenate([random_array((20,), dtype, seed=2) * 10, np.array(SPECIAL, dtype=dtype)])
    check(device, lambda m, t: (F.softplus if m is torch else m.softplus)(t, beta=beta, threshold=threshold), x)


@pytest.mark.parametrize("kw", [{}, {"nan": 1.5}, {"posinf": 7.0}, {"neginf": -7.0},
                                {"nan": -1.0, "posinf": 2.0, "neginf": -3.0}])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_nan_to_num(device, kw, dtype):
    x = np.array(SPECIAL, dtype=dtype)
    check(device, lambda m, t: m.nan_to_num(t, **kw), x)
    check(device, lambda m, t: t.nan_to_num(**kw), x)


# ---- binary ops ----

def _op(name):
    return lambda m, a, b: getattr(m, name)(a, b)


BINARY = {
    "add": _op("add"), "sub": _op("sub"), "subtract": _op("subtract"), "mul": _op("mul"), "multiply": _op("multiply"),
    "div": _op("div"), "divide": _op("divide"), "true_divide": _op("true_divide"),
    "floor_divide": _op("floor_divide"), "remainder": _op("remainder"), "pow": _op("pow"),
    "maximum": _op("maximum"), "minimum": _op("minimum"), "eq": _op("eq"), "ne": _op("ne"), "lt": _op("lt"),
    "le": _op("le"), "gt": _op("gt"), "ge": _op("ge"), "logical_and": _op("logical_and"),
    "logical_or": _op("logical_or"), "logical_xor": _op("logical_xor"),
    "bitwise_and": _op("bitwise_and"), "bitwise_or": _op("bitwise_or"), "bitwise_xor": _op("bitwise_xor"),
    "add_alpha": lambda m, a, b: m.add(a, b, alpha=2),
    "sub_alpha": lambda m, a, b: m.sub(a, b, alpha=3),
    "div_trunc": lambda m, a, b: m.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda m, a, b: m.div(a, b, rounding_mode="floor"),
    "op_add": lambda m, a, b: a + b, "op_sub": lambda m, a, b: a - b, "op_mul": lambda m, a, b: a * b,
    "op_truediv": lambda m, a, b: a / b, "op_floordiv": lambda m, a, b: a // b, "op_mod": lambda m, a, b: a % b,
    "op_pow": lambda m, a, b: a ** b, "op_eq": lambda m, a, b: a == b, "op_ne": lambda m, a, b: a != b,
    "op_lt": lambda m, a, b: a < b, "op_le": lambda m, a, b: a <= b, "op_gt": lambda m, a, b: a > b,
    "op_ge": lambda m, a, b: a >= b, "op_and": lambda m, a, b: a & b, "op_or": lambda m, a, b: a | b,
    "op_xor": lambda m, a, b: a ^ b,
    "method_add": lambda m, a, b: a.add(b), "method_mul": lambda m, a, b: a.mul(b),
    "method_maximum": lambda m, a, b: a.maximum(b), "method_pow": lambda m, a, b: a.pow(b),
    "method_bitwise_xor": lambda m, a, b: a.bitwise_xor(b),
}

DIVISIONS = {"div", "divide", "true_divide", "floor_divide", "remainder", "div_trunc", "div_floor", "op_truediv",
             "op_floordiv", "op_mod"}
POWERS = {"pow", "op_pow", "method_pow"}
SUBTRACTIONS = {"sub", "subtract", "sub_alpha", "op_sub"}


def _operands(name, dta, dtb, shape_a=(3, 1, 4), shape_b=(2, 4)):
    a = random_array(shape_a, dta, seed=11)
    b = random_array(shape_b, dtb, seed=12, nonzero=name in DIVISIONS)
    if name in POWERS:
        if np.dtype(dta).kind in "iu":
            a = random_array(shape_a, dta, seed=11, low=0 if dta == "uint8" else -3, high=4)
        if np.dtype(dtb).kind in "iu":
            b = random_array(shape_b, dtb, seed=12, low=0, high=4)
        elif np.dtype(dtb).kind == "f" and np.dtype(dta).kind in "iub":
            b = np.abs(b)
    return a, b


# One operator per kernel is enough here: the aliases (subtract, multiply, x.add(), a - b, ...) are
# checked in test_binary_aliases.
PROMOTION_OPS = ["add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "maximum", "minimum", "eq", "ne",
                 "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
                 "bitwise_xor", "add_alpha", "sub_alpha", "div_trunc", "div_floor"]


@pytest.mark.parametrize("dta", ALL_DTYPES)
@pytest.mark.parametrize("name", PROMOTION_OPS)
def test_binary_promotion(device, name, dta):
    """dta op every dtype: the result dtype is torch.result_type's, values PyTorch's (broadcast
    shapes (3, 1, 4) and (2, 4)); where PyTorch raises (bool // bool, any subtraction with a bool
    operand, ...) loom raises. add / sub with alpha scale `other` in the result dtype."""
    sub = SubChecks()
    for dtb in ALL_DTYPES:
        with sub(f"{dta} {name} {dtb}"):
            a, b = _operands(name, dta, dtb)
            check(device, BINARY[name], a, b)
    sub.finish()


@pytest.mark.parametrize("name", sorted(set(BINARY) - set(PROMOTION_OPS)))
def test_binary_aliases(device, name):
    """Operators (a + b, a // b, ...), alias names and method forms on a few dtype pairs."""
    sub = SubChecks()
    for dta, dtb in [("float32", "float32"), ("int64", "float64"), ("int32", "int64"), ("uint8", "int32"),
                     ("bool", "bool"), ("float32", "int64"), ("uint8", "bool")]:
        with sub(f"{dta} {name} {dtb}"):
            a, b = _operands(name, dta, dtb)
            check(device, BINARY[name], a, b)
    sub.finish()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + ["int64"])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "maximum",
                                  "minimum", "lt", "eq", "op_add", "op_mul", "op_truediv", "add_alpha",
                                  "div_trunc"])
def test_binary_layouts(device, name, dtype):
    """Non-contiguous operands: transposed, strided (steps), expanded (stride 0)."""
    a, b = _operands(name, dtype, dtype, (4, 5), (4, 5))
    if name in POWERS and dtype.startswith("float"):
        a = np.abs(a)
    sub = SubChecks()
    for layouts in [("contiguous", "transposed"), ("transposed", "transposed"), ("strided", "contiguous"),
                    ("expanded", "strided"), ("transposed", "expanded"), ("strided", "strided")]:
        with sub(layouts):
            check(device, BINARY[name], a, b, layouts=list(layouts))
    sub.finish()


@pytest.mark.parametrize("shapes", [((3, 1, 4), (2, 4)), ((0, 4), (1, 4)), ((), (3,)), ((3,), ()), ((), ()),
                                    ((2, 0), (2, 1)), ((1,), (0,)), ((4, 1), (1, 5))], ids=str)
@pytest.mark.parametrize("name", ["add", "mul", "div", "floor_divide", "remainder", "pow", "maximum", "ge",
                                  "logical_and", "logical_or", "logical_xor"])
def test_binary_broadcast_shapes(device, name, shapes):
    a = random_array(shapes[0], "float64", seed=1)
    b = random_array(shapes[1], "float64", seed=2, nonzero=True)
    if name == "pow":
        a = np.abs(a)
    check(device, BINARY[name], a, b)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "maximum",
                                  "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
                                  "logical_xor"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_binary_special_values(device, name, dtype):
    """Every pair of 0, -0, +-1, +-inf, nan, ...: IEEE results as PyTorch's (floor division and
    remainder follow Python's rules, maximum / minimum propagate NaN)."""
    v = np.array(SPECIAL, dtype=dtype)
    check(device, BINARY[name], v[:, None], v[None, :])


@pytest.mark.parametrize("name", ["floor_divide", "remainder", "div_trunc", "div_floor"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_division_signs(device, name, dtype):
    a = np.array([-7, -6, -1, 0, 1, 6, 7, 13, -13], dtype=dtype)
    b = np.array([2, -2, 3, -3, 5, -5, 1, -1], dtype=dtype)
    check(device, BINARY[name], a[:, None], b[None, :])


def test_integer_pow_negative_exponent_tensor(device):
    """int ** negative int tensor: 1 and -1 give +-1, other bases 0 (PyTorch's integer pow)."""
    a = np.array([-2, -1, 0, 1, 2, 3], dtype=np.int64)
    b = np.array([-3, -2, -1, 0, 1, 2], dtype=np.int64)
    check(device, BINARY["pow"], a[:, None] * (a[:, None] != 0) + (a[:, None] == 0), b[None, :])


# ---- tensors with Python scalars (weak types) ----

SCALARS = [3, -2, 2.5, -0.75, True, False, 0.0]


def test_logical_xor_non_bool(device):
    """logical_xor reads its operands as bools (non-zero is True) and broadcasts them."""
    check(device, lambda m, a, b: m.logical_xor(a, b), np.array([1.0, 0.0, 2.0]), np.array([1.0, 1.0, 0.0]))
    check(device, lambda m, a, b: m.logical_xor(a, b), np.array([0, 3]), np.array([[0], [5]]))
    check(device, lambda m, a, b: a.logical_xor(b), np.array([[0.5, 0.0]]), np.array([True, True]))


def test_logical_xor_bool(device):
    a = random_array((3, 4), "bool", seed=1)
    b = random_array((4,), "bool", seed=2)
    check(device, lambda m, x, y: m.logical_xor(x, y), a, b)
    check(device, lambda m, x, y: x.logical_xor(y), a, b, layouts=["transposed", "contiguous"])
SCALAR_OPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
    "ge": operator.ge, "and": operator.and_, "or": operator.or_, "xor": operator.xor,
}


def _scalar_ok(name, dtype, scalar, reflected):
    """Cases PyTorch defines without data-dependent errors."""
    divides_by_scalar = name in ("truediv", "floordiv", "mod") and not reflected
    if divides_by_scalar and scalar == 0:
        return False
    if name == "pow" and not reflected and dtype != "bool" and not dtype.startswith("float") \
            and isinstance(scalar, int) and scalar < 0:
        return False  # "Integers to negative integer powers are not allowed" (test_ops_errors.py)
    return True


@pytest.mark.parametrize("reflected", [False, True], ids=["tensor_op_scalar", "scalar_op_tensor"])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", list(SCALAR_OPS))
def test_scalar_operand(device, name, dtype, reflected):
    """t op s and s op t (the reflected forms 2 - t, 2 ** t, ...) for s in SCALARS: a Python scalar
    is a weak operand, so int tensor + 2.5 is float32, uint8 tensor + 3 stays uint8, bool + 3 is
    int64."""
    f = SCALAR_OPS[name]
    sub = SubChecks()
    for scalar in SCALARS:
        if not _scalar_ok(name, dtype, scalar, reflected):
            continue
        values = random_array((3, 4), dtype, seed=4, nonzero=reflected and name in ("truediv", "floordiv", "mod"))
        if name == "pow":
            if reflected and dtype != "bool" and not dtype.startswith("float"):
                values = random_array((3, 4), dtype, seed=4, low=0, high=4)
            if not reflected and dtype.startswith("float"):
                values = np.abs(values)
        with sub(repr(scalar)):
            if reflected:
                check(device, lambda m, t: f(scalar, t), values)
            else:
                check(device, lambda m, t: f(t, scalar), values)
    sub.finish()


@pytest.mark.parametrize("scalar", [3, 2.5, True, -1], ids=repr)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "eq", "lt", "div", "pow", "remainder", "floor_divide"])
def test_scalar_function_forms(device, name, scalar):
    """loom.<op>(tensor, scalar) and loom.<op>(scalar, tensor) where torch accepts them."""
    values = np.abs(random_array((2, 3), "float32", seed=9)) + 0.5
    check(device, lambda m, t: getattr(m, name)(t, scalar), values)
    if name in ("add", "mul", "div", "pow", "remainder"):
        check(device, lambda m, t: getattr(m, name)(scalar, t), values)


# ---- 0-d tensors against dim tensors ----

@pytest.mark.parametrize("dt_0d", ALL_DTYPES)
@pytest.mark.parametrize("name", ["add", "mul", "maximum", "div", "eq", "op_floordiv"])
def test_zero_dim_promotion(device, name, dt_0d):
    """A 0-d tensor takes part in promotion only when its category (bool < int < float) is higher
    than the dim tensors': int32[3] + int64 0-d is int32, int32[3] + float64 0-d is float64,
    float32[3] + float64 0-d is float32."""
    sub = SubChecks()
    for dt_dim in ALL_DTYPES:
        zero_d = random_array((), dt_0d, seed=1, nonzero=True)
        dim = random_array((5,), dt_dim, seed=2, nonzero=True)
        with sub(f"dim {dt_dim} op 0-d {dt_0d}"):
            check(device, BINARY[name], dim, zero_d)
        with sub(f"0-d {dt_0d} op dim {dt_dim}"):
            check(device, BINARY[name], zero_d, dim)
        with sub(f"0-d {dt_0d} op 0-d {dt_dim}"):
            check(device, BINARY[name], zero_d, random_array((), dt_dim, seed=3, nonzero=True))
    sub.finish()


# ---- & | ^ ~: bitwise on integers, logical on bool tensors ----

@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "expanded"])
@pytest.mark.parametrize("name", ["and", "or", "xor"])
def test_bool_bitwise_operators(device, name, layout):
    f = {"and": operator.and_, "or": operator.or_, "xor": operator.xor}[name]
    a = random_array((4, 5), "bool", seed=1)
    b = random_array((4, 5), "bool", seed=2)
    check(device, lambda m, x, y: f(x, y), a, b, layouts=[layout, "contiguous"])
    check(device, lambda m, x, y: f(x, y), a[:1], b)  # broadcast
    check(device, lambda m, x: f(x, True), a, layouts=[layout])
    check(device, lambda m, x: f(False, x), a, layouts=[layout])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bool_invert(device, layout):
    a = random_array((4, 5), "bool", seed=1)
    check(device, lambda m, x: ~x, a, layouts=[layout])
    check(device, lambda m, x: ~x, np.array(True))
    check(device, lambda m, x: ~x, np.zeros((0, 2), bool))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_invert(device, dtype, layout):
    """~x is bitwise_not: -x - 1 for signed integers, 255 - x for uint8."""
    values = random_array((4, 5), dtype, seed=3, low=0 if dtype == "uint8" else -100, high=100)
    check(device, lambda m, x: ~x, values, layouts=[layout])
    check(device, lambda m, x: x.bitwise_not(), values, layouts=[layout])
    check(device, lambda m, x: ~x, np.array([np.iinfo(dtype).min, np.iinfo(dtype).max, 0], dtype=dtype))


def test_bool_bitwise_with_int_scalar(device):
    """bool | int is bitwise_or promoted to int64, as in PyTorch."""
    a = np.array([True, False, True])
    check(device, lambda m, x: x | 1, a)
    check(device, lambda m, x: x & 3, a)
    check(device, lambda m, x: x ^ 1, a)
    check(device, lambda m, x: 1 ^ x, a)
    check(device, lambda m, x: x | True, a)


# ---- unary operators ----

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64"] + FLOAT_DTYPES)
def test_unary_operators(device, dtype, layout):
    values = random_array((3, 4), dtype, seed=6)
    check(device, lambda m, x: -x, values, layouts=[layout])
    check(device, lambda m, x: abs(x), values, layouts=[layout])
    check(device, lambda m, x: +x, values, layouts=[layout])


def test_positive_is_identity(device):
    x, _ = make(np.arange(3.0), device)
    assert (+x) is x


# ---- composite elementwise ops ----

@pytest.mark.parametrize("weight", [0.0, 0.25, 0.5, 0.75, 1.0, -1.5, 2.0, "tensor"], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_lerp(device, dtype, weight):
    start = random_array((3, 4), dtype, seed=1)
    end = random_array((3, 4), dtype, seed=2)
    if weight == "tensor":
        w = random_array((4,), dtype, seed=3, low=-0.5, high=1.5)
        check(device, lambda m, s, e, ww: m.lerp(s, e, ww), start, end, w)
        check(device, lambda m, s, e, ww: s.lerp(e, ww), start, end, w, layouts=["transposed", "strided", "contiguous"])
    else:
        check(device, lambda m, s, e: m.lerp(s, e, weight), start, end)
        check(device, lambda m, s, e: s.lerp(e, weight), start, end, layouts=["expanded", "transposed"])


@pytest.mark.parametrize("value", [1, 0.5, -2, 3.0], ids=repr)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv(device, name, dtype, value):
    x = random_array((3, 4), dtype, seed=1)
    t1 = random_array((3, 1), dtype, seed=2)
    t2 = random_array((4,), dtype, seed=3, nonzero=True)
    check(device, lambda m, a, b, c: getattr(m, name)(a, b, c, value=value), x, t1, t2)
    check(device, lambda m, a, b, c: getattr(a, name)(b, c, value=value), x, t1, t2,
          layouts=["transposed", "contiguous", "strided"])


@pytest.mark.parametrize("case", ["addcmul_f64_f32", "addcdiv_f64_f32", "addcmul_uint8_bool"])
def test_addcmul_addcdiv_promotion(device, case):
    """Computed in the result dtype of all three tensors."""
    if case == "addcmul_uint8_bool":
        check(device, lambda m, x, a, b: m.addcmul(x, a, b, value=2), np.array([1, 2], np.uint8),
              np.array([True, False]), np.array([True, True]))
        return
    name = case.split("_")[0]
    x = random_array((3, 4), "float64", seed=1)
    t1 = random_array((3, 4), "float32", seed=2)
    t2 = random_array((3, 4), "float32", seed=3, nonzero=True)
    check(device, lambda m, a, b, c: getattr(m, name)(a, b, c, value=3), x, t1, t2)


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_addcmul_integer(device, dtype):
    x = random_array((3, 4), dtype, seed=1)
    t1 = random_array((3, 4), dtype, seed=2)
    t2 = random_array((3, 4), dtype, seed=3)
    check(device, lambda m, a, b, c: m.addcmul(a, b, c, value=2), x, t1, t2)


def test_addcdiv_float_tensors_with_int_input(device):
    """addcdiv of an int input with float tensor1 / tensor2: promoted to float."""
    x = random_array((3, 4), "int64", seed=1)
    t1 = random_array((3, 4), "float32", seed=2)
    t2 = random_array((3, 4), "float32", seed=3, nonzero=True)
    check(device, lambda m, a, b, c: m.addcdiv(a, b, c), x, t1, t2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_add_sub_alpha_with_float_scalar(device, dtype):
    x = random_array((3, 4), dtype, seed=1)
    for alpha in (2, 0.5, -3):
        check(device, lambda m, t: m.add(t, 1.5, alpha=alpha), x)
        check(device, lambda m, t: t.sub(0.25, alpha=alpha), x)


@pytest.mark.parametrize("dtype", ["int64", "uint8", "bool"])
def test_add_sub_alpha_with_int_scalar(device, dtype):
    """alpha * other is computed in the result dtype: ints stay ints (and wrap in uint8)."""
    x = random_array((3, 4), dtype, seed=1)
    scalar = True if dtype == "bool" else 2
    check(device, lambda m, t: m.add(t, scalar, alpha=3), x)
    if dtype != "bool":
        check(device, lambda m, t: m.sub(t, scalar, alpha=3), x)


@pytest.mark.parametrize("mode", ["trunc", "floor", None])
@pytest.mark.parametrize("dtype", ["int64", "int32", "float32", "float64"])
def test_div_rounding_mode_tensor_tensor(device, dtype, mode):
    a = random_array((4, 5), dtype, seed=1) * (7 if dtype.startswith("int") else 3)
    b = random_array((5,), dtype, seed=2, nonzero=True)
    check(device, lambda m, x, y: m.div(x, y, rounding_mode=mode), a.astype(dtype), b)
    check(device, lambda m, x, y: x.div(y, rounding_mode=mode), a.astype(dtype), b)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
@pytest.mark.parametrize("reflected", [False, True])
def test_div_trunc_integer_with_scalar(device, dtype, reflected):
    """A number operand's sign is its sign in the result dtype (-7 is 249 in uint8)."""
    a = random_array((6,), dtype, seed=1, nonzero=True)
    if reflected:
        check(device, lambda m, x: m.div(-7, x, rounding_mode="trunc"), a)
    else:
        check(device, lambda m, x: m.div(x, 2, rounding_mode="trunc"), a)


@pytest.mark.parametrize("scalar", [2, -3, 2.5, -0.5])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_div_rounding_float_with_scalar(device, dtype, scalar):
    a = random_array((6,), dtype, seed=1) * 10
    for mode in ("trunc", "floor"):
        check(device, lambda m, x: m.div(x, scalar, rounding_mode=mode), a)
        check(device, lambda m, x: m.div(scalar, x, rounding_mode=mode), a + 0.5)


@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64"])
def test_integer_overflow_wraps(device, dtype):
    info = np.iinfo(dtype)
    a = np.array([info.max, info.min, info.max - 1], dtype=dtype)
    check(device, lambda m, x: x + 1, a)
    check(device, lambda m, x: x * 3, a)
    check(device, lambda m, x: x - x.max(), a)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_empty_and_zero_dim_results(device, dtype):
    for shape in [(0,), (0, 3), (2, 0, 4), ()]:
        a = random_array(shape, dtype, seed=1, nonzero=True)
        check(device, lambda m, x: m.eq(x, x), a)
        check(device, lambda m, x: m.maximum(x, x), a)
        check(device, lambda m, x: m.mul(x, x), a)
        check(device, lambda m, x: x + 1.5, a)
        check(device, lambda m, x: m.exp(x), a)


def test_comparison_of_uint8_with_negative_scalar(device):
    """The scalar is cast to the tensor's dtype first (PyTorch): uint8 255 == -1 is True."""
    check(device, lambda m, x: x == -1, np.array([255, 0, 1], dtype=np.uint8))
    check(device, lambda m, x: x + 300, np.array([255, 0, 1], dtype=np.uint8))


def test_large_int64_precision(device):
    """int64 arithmetic is exact beyond 2**53."""
    a = np.array([2**60 + 1, -(2**62) + 3, 2**53 + 1], dtype=np.int64)
    check(device, lambda m, x: x + 1, a)
    check(device, lambda m, x: x * 2 - x, a)
    check(device, lambda m, x: x // 3, a)
    check(device, lambda m, x: x % 7, a)
    check(device, lambda m, x: m.maximum(x, x - 1), a)
