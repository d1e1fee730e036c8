"""Reductions agree with PyTorch: sum, mean, prod, amax, amin, max / min (every overload), argmax,
argmin, var, std, logsumexp, all, any, norm, softmax, log_softmax and cumsum.

dim as None, int, negative int, tuple and list; keepdim; dtype=; inputs contiguous, transposed,
strided, expanded, empty and 0-d; NaN propagation where PyTorch propagates."""

import math

import numpy as np
import pytest

import loom
from _ops_helpers import (ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, LAYOUTS, SubChecks, check, device,  # noqa: F401
                          make, random_array)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# Float32 sums accumulate in a different order than PyTorch's: a little more room than elementwise.
RTOL = {"float32": 2e-5, "float64": 1e-12}
ATOL = {"float32": 2e-5, "float64": 1e-12}


def tol(dtype):
    return {"rtol": RTOL.get(dtype), "atol": ATOL.get(dtype)}


SHAPE = (3, 4, 5)
DIMS = [None, 0, 2, -1, -3, (0, 2), [-1, 0], (1,), (0, 1, 2)]


def _reduce_call(name, dim, keepdim, method):
    """m.name(x, dim, keepdim=...) / x.name(...) with dim left out when None."""
    def call(m, x):
        f = getattr(x, name) if method else (lambda *a, **k: getattr(m, name)(x, *a, **k))
        if dim is None:
            return f()
        return f(dim, keepdim=keepdim)
    return call


# Which dtypes each reduction takes (PyTorch raises for the others; test_ops_errors.py).
REDUCTION_DTYPES = {
    "sum": ALL_DTYPES, "prod": ALL_DTYPES, "amax": ALL_DTYPES, "amin": ALL_DTYPES,
    "mean": FLOAT_DTYPES, "logsumexp": FLOAT_DTYPES + INT_DTYPES, "all": ["bool", "int32", "int64", "float32"],
    "any": ["bool", "int32", "int64", "float32"],
}


def _reduction_params():
    out = []
    for name, dtypes in REDUCTION_DTYPES.items():
        for dt in dtypes:
            out.append(pytest.param(name, dt, id=f"{name}-{dt}"))
    return out


@pytest.mark.parametrize("name,dtype", _reduction_params())
def test_reduction_dims(device, name, dtype):
    """Every dim form, keepdim True / False, function and method, on every layout."""
    sub = SubChecks()
    for layout in LAYOUTS:
        values = random_array(SHAPE, dtype, seed=LAYOUTS.index(layout))
        if name in ("all", "any"):  # zeros in some rows, none in others
            values = values * (random_array(SHAPE, "float64", seed=9, low=0, high=1) > 0.15).astype(values.dtype)
            values[0] = values[0] + (values[0] == 0)
        if name == "prod" and not dtype.startswith("float"):
            values = random_array(SHAPE, dtype, seed=1, low=0 if dtype == "uint8" else -2, high=3)
        for dim in DIMS:
            if name in ("prod", "all", "any") and isinstance(dim, (tuple, list)):
                continue  # one dim only (torch 1.13's all / any take no tuple either)
            if name == "logsumexp" and dim is None:
                continue  # logsumexp requires dim
            for keepdim in ([False] if dim is None else [False, True]):
                for method in (False, True):
                    with sub(f"{layout} dim={dim} keepdim={keepdim} method={method}"):
                        check(device, _reduce_call(name, dim, keepdim, method), values, layouts=[layout],
                              **tol(dtype))
    sub.finish()


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "prod", "logsumexp", "all", "any"])
def test_reduction_keyword_forms(device, name):
    x = random_array((3, 4), "float64", seed=2)
    check(device, lambda m, t: getattr(m, name)(t, dim=1, keepdim=True), x)
    check(device, lambda m, t: getattr(t, name)(dim=-2), x)
    check(device, lambda m, t: getattr(m, name)(input=t, dim=0), x)


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "prod", "all", "any", "logsumexp"])
def test_reduction_zero_dim_input(device, name):
    """A 0-d tensor reduces over dim 0 / -1 (the one dim it is allowed to name) to itself."""
    x = np.array(2.5)
    sub = SubChecks()
    for dim in (0, -1):
        for keepdim in (False, True):
            with sub(f"dim={dim} keepdim={keepdim}"):
                check(device, lambda m, t: getattr(m, name)(t, dim, keepdim=keepdim), x)
    if name != "logsumexp":
        with sub("no dim"):
            check(device, lambda m, t: getattr(m, name)(t), x)
    sub.finish()


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("name", ["sum", "prod", "mean", "all", "any"])
def test_reduction_of_empty(device, name, dtype):
    """sum of nothing is 0, prod 1, mean NaN, all True, any False; over an empty dim or all dims."""
    if name == "mean" and dtype != "float32":
        return
    x = np.zeros((0, 4), dtype=dtype)
    sub = SubChecks()
    for dim in (None, 0, 1, (0, 1)):
        if name in ("prod", "all", "any") and isinstance(dim, tuple):
            continue
        for keepdim in ([False] if dim is None else [False, True]):
            with sub(f"dim={dim} keepdim={keepdim}"):
                check(device, _reduce_call(name, dim, keepdim, False), x)
    sub.finish()


@pytest.mark.parametrize("name", ["amax", "amin", "argmax", "argmin"])
def test_extreme_of_empty_dim_raises(device, name):
    out, error = check(device, lambda m, t: getattr(m, name)(t, 0), np.zeros((0, 4), np.float32))
    assert out is None and isinstance(error, IndexError), error  # PyTorch's error, and loom's too
    # reducing the non-empty dim of an empty tensor is fine: an empty result
    check(device, lambda m, t: getattr(m, name)(t, 1), np.zeros((0, 4), np.float32))


# ---- dtype= and integer result dtypes ----

@pytest.mark.parametrize("src", ["bool", "uint8", "int32", "int64", "float32"])
@pytest.mark.parametrize("name", ["sum", "prod", "cumsum"])
def test_integer_inputs_accumulate_in_int64(device, name, src):
    """Sums and products of bool / integer tensors are int64 (and do not overflow uint8 / int32)."""
    if src == "uint8":
        values = np.array([[200, 100, 3], [255, 255, 2]], dtype=np.uint8)
    elif src == "int32":
        values = np.array([[2**31 - 1, 2**31 - 1, 3], [-(2**31), 5, 2]], dtype=np.int32)
    else:
        values = random_array((2, 3), src, seed=3)
    if name == "cumsum":
        check(device, lambda m, t: m.cumsum(t, 1), values)
        check(device, lambda m, t: t.cumsum(0), values)
    else:
        check(device, lambda m, t: getattr(m, name)(t), values, **tol(src))
        check(device, lambda m, t: getattr(m, name)(t, 1), values, **tol(src))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("src", ["bool", "int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("name", ["sum", "mean", "prod", "cumsum"])
def test_float_dtype_argument(device, name, src, dtype):
    """dtype= casts the input first: mean of an int tensor with dtype=float64 is allowed."""
    values = random_array((3, 4), src, seed=4)
    if name == "cumsum":
        check(device, lambda m, t: m.cumsum(t, 1, dtype=getattr(m, dtype)), values, **tol(dtype))
    elif name == "prod":
        check(device, lambda m, t: m.prod(t, 1, dtype=getattr(m, dtype)), values, **tol(dtype))
        check(device, lambda m, t: t.prod(dtype=getattr(m, dtype)), values, **tol(dtype))
    else:
        check(device, lambda m, t: getattr(m, name)(t, dtype=getattr(m, dtype)), values, **tol(dtype))
        check(device, lambda m, t: getattr(t, name)(1, keepdim=True, dtype=getattr(m, dtype)), values, **tol(dtype))


@pytest.mark.parametrize("name,dtype", [(n, d) for n in ("sum", "prod", "cumsum") for d in ("int32", "uint8", "bool")])
def test_integer_dtype_argument(device, name, dtype):
    """The result has the dtype asked for (wrapping as that dtype does); cumsum rejects bool."""
    values = random_array((3, 4), "int64", seed=4, low=0, high=3)
    if dtype == "uint8":
        values = values * 100  # sums and products beyond 255 wrap
    if name == "cumsum":
        check(device, lambda m, t: m.cumsum(t, 1, dtype=getattr(m, dtype)), values)
    elif name == "prod":
        check(device, lambda m, t: m.prod(t, 1, dtype=getattr(m, dtype)), values)
    else:
        check(device, lambda m, t: m.sum(t, dtype=getattr(m, dtype)), values)


# ---- max / min overloads, argmax / argmin ----

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_overloads(device, name, dtype, layout):
    values = random_array(SHAPE, dtype, seed=5)
    sub = SubChecks()
    with sub("max()"):  # the extreme element, 0-d
        check(device, lambda m, t: getattr(m, name)(t), values, layouts=[layout])
        check(device, lambda m, t: getattr(t, name)(), values, layouts=[layout])
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            with sub(f"dim={dim} keepdim={keepdim}"):
                # (values, indices): as a tuple, by attribute and by unpacking
                check(device, lambda m, t: tuple(getattr(m, name)(t, dim, keepdim=keepdim)), values,
                      layouts=[layout])
                check(device, lambda m, t: getattr(t, name)(dim, keepdim).values, values, layouts=[layout])
                check(device, lambda m, t: getattr(t, name)(dim=dim, keepdim=keepdim).indices, values,
                      layouts=[layout])
                check(device, lambda m, t: getattr(t, name)(dim, keepdim)[1], values, layouts=[layout])
    with sub("max(other)"):
        other = random_array(SHAPE[1:], dtype, seed=6)
        check(device, lambda m, t, o: getattr(m, name)(t, o), values, other, layouts=[layout, "contiguous"])
        check(device, lambda m, t, o: getattr(t, name)(o), values, other, layouts=[layout, "contiguous"])
    sub.finish()


def test_max_dim_result_type(device):
    x, _ = make(np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]]), device)
    r = x.max(1)
    assert isinstance(r, tuple) and len(r) == 2
    values, indices = r
    assert values.tolist() == [5.0, 7.0]
    assert indices.tolist() == [1, 0]  # the first of equal maxima
    assert r.values.tolist() == values.tolist() and r.indices.tolist() == indices.tolist()
    assert r.indices.dtype is loom.int64
    m = loom.min(x, dim=0, keepdim=True)
    assert m.values.tolist() == [[1.0, 0.0, 2.0]] and m.indices.tolist() == [[0, 1, 0]]


def test_max_other_keyword(device):
    check(device, lambda m, a, b: m.max(a, other=b), np.array([1.0, 5.0]), np.array([3.0, 2.0]))
    check(device, lambda m, a, b: m.min(a, other=b), np.array([1.0, 5.0]), np.array([3.0, 2.0]))
    check(device, lambda m, a, b: a.max(other=b), np.array([1.0, 5.0]), np.array([3.0, 2.0]))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin(device, name, dtype, layout):
    values = random_array(SHAPE, dtype, seed=7)
    sub = SubChecks()
    with sub("no dim"):
        check(device, lambda m, t: getattr(m, name)(t), values, layouts=[layout])
        check(device, lambda m, t: getattr(t, name)(), values, layouts=[layout])
    for dim in (0, 1, 2, -1, -2):
        for keepdim in (False, True):
            with sub(f"dim={dim} keepdim={keepdim}"):
                check(device, lambda m, t: getattr(m, name)(t, dim, keepdim=keepdim), values, layouts=[layout])
                check(device, lambda m, t: getattr(t, name)(dim=dim, keepdim=keepdim), values, layouts=[layout])
    sub.finish()


@pytest.mark.parametrize("dtype", ["int64", "float32"])
def test_arg_extremes_ties_pick_first(device, dtype):
    values = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [0, 5, 0, 5]], dtype=dtype)
    for name in ("argmax", "argmin"):
        check(device, lambda m, t: getattr(m, name)(t, 1), values)
        check(device, lambda m, t: getattr(m, name)(t, 0), values)
        check(device, lambda m, t: getattr(m, name)(t), values)
    for name in ("max", "min"):
        check(device, lambda m, t: tuple(getattr(m, name)(t, 1)), values)


def test_arg_extremes_zero_dim(device):
    check(device, lambda m, t: m.argmax(t), np.array(3.0))
    check(device, lambda m, t: m.argmin(t, 0), np.array(3.0))
    check(device, lambda m, t: tuple(m.max(t, 0)), np.array(3.0))
    check(device, lambda m, t: tuple(m.min(t, -1, keepdim=True)), np.array(3.0))


# ---- var / std ----

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std(device, name, dtype, layout):
    values = random_array(SHAPE, dtype, seed=8) * 3 + 1
    sub = SubChecks()
    calls = {
        "default": lambda m, t: getattr(t, name)(),
        "unbiased=False": lambda m, t: getattr(m, name)(t, unbiased=False),
        "positional bool": lambda m, t: getattr(t, name)(False),
        "dim": lambda m, t: getattr(t, name)(1),
        "dim neg keepdim": lambda m, t: getattr(m, name)(t, -1, keepdim=True),
        "dim tuple unbiased": lambda m, t: getattr(t, name)((0, 2), False),
        "dim list positional keepdim": lambda m, t: getattr(t, name)([0, -1], True, True),
        "correction=0": lambda m, t: getattr(t, name)(1, correction=0),
        "correction=2": lambda m, t: getattr(m, name)(t, (0, 1), correction=2),
        "correction=1 keepdim": lambda m, t: getattr(t, name)(2, keepdim=True, correction=1),
        "dim None correction": lambda m, t: getattr(t, name)(None, correction=0),
        "all dims tuple": lambda m, t: getattr(t, name)((0, 1, 2)),
    }
    for label, call in calls.items():
        with sub(label):
            check(device, call, values, layouts=[layout], **tol(dtype))
    sub.finish()


@pytest.mark.parametrize("ddof", [0, 1, 2])
def test_var_std_against_numpy(device, ddof):
    values = random_array((4, 6), "float64", seed=9)
    x, _ = make(values, device)
    np.testing.assert_allclose(x.var(1, correction=ddof).numpy(), values.var(1, ddof=ddof), rtol=1e-12)
    np.testing.assert_allclose(x.std(0, correction=ddof).numpy(), values.std(0, ddof=ddof), rtol=1e-12)
    np.testing.assert_allclose(x.var(None, correction=ddof).item(), values.var(ddof=ddof), rtol=1e-12)


def test_var_std_degenerate(device):
    """One element with the default correction: 0 / 0 is NaN; correction > n: divided by 0 (inf)."""
    sub = SubChecks()
    for label, values, call in [
        ("single", np.array([2.0]), lambda m, t: m.var(t)),
        ("single std", np.array([[2.0], [3.0]]), lambda m, t: m.std(t, 1)),
        ("0-d", np.array(2.0), lambda m, t: m.var(t)),
        ("empty", np.zeros((0,)), lambda m, t: m.var(t)),
        ("empty dim", np.zeros((3, 0)), lambda m, t: m.std(t, 1)),
        ("correction > n", np.array([1.0, 4.0]), lambda m, t: m.var(t, None, correction=3)),
        ("constant", np.full((5,), 3.25), lambda m, t: m.std(t)),
    ]:
        with sub(label):
            check(device, call, values)
    sub.finish()


# ---- logsumexp ----

@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_logsumexp_large_and_infinite(device, dtype):
    """Stable for large values; +inf gives inf, all -inf gives -inf, NaN propagates."""
    values = np.array([[1000.0, 1000.0, -1000.0], [np.inf, 1.0, 2.0], [-np.inf, -np.inf, -np.inf],
                       [np.nan, 1.0, 2.0], [-1000.0, -1001.0, -np.inf]], dtype=dtype)
    check(device, lambda m, t: m.logsumexp(t, 1), values)
    check(device, lambda m, t: m.logsumexp(t, -1, keepdim=True), values)
    check(device, lambda m, t: m.logsumexp(t, (0, 1)), values)


def test_logsumexp_empty_dim(device):
    """The log of an empty sum: -inf."""
    check(device, lambda m, t: m.logsumexp(t, 0), np.zeros((0, 3), np.float32))
    check(device, lambda m, t: m.logsumexp(t, 0, keepdim=True), np.zeros((0, 3), np.float64))
    check(device, lambda m, t: m.logsumexp(t, (0, 1)), np.zeros((0, 3), np.float32))
    check(device, lambda m, t: m.logsumexp(t, 1), np.zeros((0, 3), np.float32))
    check(device, lambda m, t: m.logsumexp(t, 0), np.zeros((0, 3), np.int64))


# ---- all / any ----

@pytest.mark.parametrize("name", ["all", "any"])
def test_all_any_truthiness(device, name):
    """Non-zero (NaN included) is True."""
    values = np.array([[0.0, np.nan, 1.0], [0.0, 0.0, 0.0], [2.0, -1.0, np.inf]])
    check(device, lambda m, t: getattr(m, name)(t, 1), values)
    check(device, lambda m, t: getattr(m, name)(t), values)
    check(device, lambda m, t: getattr(t, name)(0, keepdim=True), values)


@pytest.mark.parametrize("name", ["all", "any"])
def test_all_any_uint8_result_dtype(device, name):
    """uint8 in, uint8 out (PyTorch: 'For uint8 the dtype of output is uint8 itself')."""
    values = np.array([[0, 3, 1], [2, 2, 255]], dtype=np.uint8)
    check(device, lambda m, t: getattr(m, name)(t), values)
    check(device, lambda m, t: getattr(m, name)(t, 1), values)
    check(device, lambda m, t: getattr(m, name)(t), np.zeros(0, np.uint8))
    check(device, lambda m, t: getattr(m, name)(t, 0, keepdim=True), np.zeros((0, 2), np.uint8))


# ---- norm ----

NORM_PS = [1, 2, math.inf, -math.inf, "fro", 0, 3, 0.5, 2.0]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_norm(device, dtype, layout):
    values = random_array(SHAPE, dtype, seed=10)
    values[0, 0, :2] = 0.0  # zeros for p = 0
    sub = SubChecks()
    for p in NORM_PS:
        for dim in (None, 1, -1, (0, 2)):
            if p == "fro" and isinstance(dim, int):
                continue  # torch.norm('fro') wants all dims or two
            for keepdim in ([False] if dim is None else [False, True]):
                with sub(f"p={p} dim={dim} keepdim={keepdim}"):
                    if dim is None:
                        check(device, lambda m, t: m.norm(t, p), values, layouts=[layout], **tol(dtype))
                    else:
                        check(device, lambda m, t: t.norm(p, dim, keepdim), values, layouts=[layout], **tol(dtype))
    with sub("default"):
        check(device, lambda m, t: t.norm(), values, layouts=[layout], **tol(dtype))
        check(device, lambda m, t: m.norm(t, dim=1), values, layouts=[layout], **tol(dtype))
    sub.finish()


def test_norm_zero_dim_and_empty(device):
    check(device, lambda m, t: m.norm(t), np.array(-3.0))
    check(device, lambda m, t: m.norm(t, 1), np.array(-3.0))
    check(device, lambda m, t: m.norm(t), np.zeros((0, 3)))
    check(device, lambda m, t: m.norm(t, 2, 0), np.zeros((0, 3)))
    check(device, lambda m, t: m.norm(t, 1, 1), np.zeros((0, 3)))


# ---- softmax, log_softmax, cumsum ----

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax(device, name, dtype, layout):
    values = random_array(SHAPE, dtype, seed=11) * 5
    sub = SubChecks()
    for dim in (0, 1, 2, -1, -3):
        with sub(f"dim={dim}"):
            check(device, lambda m, t: getattr(m, name)(t, dim), values, layouts=[layout], **tol(dtype))
            check(device, lambda m, t: getattr(t, name)(dim=dim), values, layouts=[layout], **tol(dtype))
    with sub("dtype=float64"):
        check(device, lambda m, t: getattr(m, name)(t, 1, dtype=m.float64), values, layouts=[layout])
    sub.finish()


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_special_values(device, name):
    """Large values are stable; a row of -inf is NaN; +inf gives NaN; NaN propagates along its row."""
    values = np.array([[1000.0, 0.0, -1000.0], [-np.inf, -np.inf, -np.inf], [np.inf, 1.0, 0.0],
                       [np.nan, 1.0, 2.0], [-np.inf, 0.0, 1.0]])
    check(device, lambda m, t: getattr(m, name)(t, 1), values)
    check(device, lambda m, t: getattr(m, name)(t, 0), values)
    check(device, lambda m, t: getattr(m, name)(t, 0), np.array(3.0))  # 0-d: 1 / 0
    check(device, lambda m, t: getattr(m, name)(t, -1), np.array(3.0))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_integer_input_with_dtype(device, name):
    values = random_array((3, 4), "int64", seed=12)
    check(device, lambda m, t: getattr(m, name)(t, 1, dtype=m.float32), values)
    check(device, lambda m, t: getattr(m, name)(t, 0, dtype=m.float64), values)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_along_nonempty_dim_of_empty(device, name):
    check(device, lambda m, t: getattr(m, name)(t, 1), np.zeros((0, 3), np.float32))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_along_empty_dim(device, name):
    check(device, lambda m, t: getattr(m, name)(t, 0), np.zeros((0, 3), np.float32))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_cumsum(device, dtype, layout):
    values = random_array(SHAPE, dtype, seed=13)
    sub = SubChecks()
    for dim in (0, 1, 2, -1, -2):
        with sub(f"dim={dim}"):
            check(device, lambda m, t: m.cumsum(t, dim), values, layouts=[layout], **tol(dtype))
            check(device, lambda m, t: t.cumsum(dim=dim), values, layouts=[layout], **tol(dtype))
    sub.finish()


def test_cumsum_zero_dim_empty_and_nan(device):
    check(device, lambda m, t: m.cumsum(t, 0), np.array(2.5))
    check(device, lambda m, t: m.cumsum(t, -1), np.array(7))
    check(device, lambda m, t: m.cumsum(t, 0), np.zeros((0, 3), np.float32))
    check(device, lambda m, t: m.cumsum(t, 1), np.zeros((0, 3), np.int64))
    check(device, lambda m, t: m.cumsum(t, 0), np.array([1.0, np.nan, 2.0, np.inf, -np.inf, 3.0]))


# ---- NaN propagation ----

NAN_VALUES = np.array([[1.0, np.nan, 3.0, -2.0], [4.0, 5.0, -6.0, 0.5], [np.nan, np.nan, 0.0, 1.0]])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_nan_propagation(device, dtype):
    """sum / mean / prod / amax / amin / max / min / var / std / norm give NaN for rows holding NaN,
    argmax / argmin / max(dim).indices point at the (first) NaN, as in PyTorch."""
    values = NAN_VALUES.astype(dtype)
    sub = SubChecks()
    cases = {
        "sum": lambda m, t: m.sum(t, 1), "mean": lambda m, t: m.mean(t, 1), "prod": lambda m, t: m.prod(t, 1),
        "amax": lambda m, t: m.amax(t, 1), "amin": lambda m, t: m.amin(t, 0), "max()": lambda m, t: m.max(t),
        "min()": lambda m, t: t.min(), "max(dim)": lambda m, t: tuple(m.max(t, 1)),
        "min(dim)": lambda m, t: tuple(t.min(0)), "argmax": lambda m, t: m.argmax(t, 1),
        "argmin": lambda m, t: m.argmin(t, 1), "argmax all": lambda m, t: m.argmax(t),
        "argmin all": lambda m, t: t.argmin(), "var": lambda m, t: m.var(t, 1), "std": lambda m, t: t.std(0),
        "norm": lambda m, t: t.norm(2, 1), "norm1": lambda m, t: t.norm(1, 0),
        "norm inf": lambda m, t: t.norm(math.inf, 1),
        "logsumexp": lambda m, t: m.logsumexp(t, 1), "softmax": lambda m, t: m.softmax(t, 1),
        "log_softmax": lambda m, t: m.log_softmax(t, 0), "cumsum": lambda m, t: m.cumsum(t, 1),
        "sum all": lambda m, t: m.sum(t), "mean all": lambda m, t: m.mean(t),
    }
    for label, call in cases.items():
        with sub(label):
            check(device, call, values, **tol(dtype))
    sub.finish()
