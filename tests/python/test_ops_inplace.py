"""In-place ops agree with PyTorch's: add_ / sub_ / mul_ / div_ / clamp_ / fill_ / zero_ / copy_ /
masked_fill_ / lerp_ / addcmul_ / addcdiv_ / ... and the operators +=, -=, *=, /=, //=, %=, **=,
&=, |=, ^=.

Each returns self (the same object), keeps self's dtype, shape and (eager) storage, casts the
result back to self's dtype, and writes through views: an in-place op on a view changes its base
and every other view of that base, an in-place op on the base shows in existing views."""

import operator

import numpy as np
import pytest

import loom
from _ops_helpers import (FLOAT_DTYPES, SubChecks, _build, assert_close, device, make,  # noqa: F401
                          random_array, torch)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def run_inplace(device, op, self_values, *others, layout="contiguous"):
    """op(m, self, *others) in place on loom and torch; self keeps identity, storage, dtype, shape."""
    x, v = make(self_values, device, layout)
    ref = torch.from_numpy(np.array(v, copy=True))
    loom_others, torch_others = _build(others, device, None)
    ptr = x.data_ptr() if device == "cpu" else None
    dtype, shape = x.dtype, tuple(x.shape)
    r = op(loom, x, *loom_others)
    assert r is x, "an in-place op returns self"
    op(torch, ref, *torch_others)
    assert x.dtype is dtype and tuple(x.shape) == shape
    assert_close(x, ref)
    if ptr is not None:
        assert x.data_ptr() == ptr, "an in-place op keeps self's storage"
    return x, ref


INPLACE_CASES = {
    "add_": lambda m, x, y: x.add_(y),
    "add_ alpha": lambda m, x, y: x.add_(y, alpha=2),
    "add_ scalar": lambda m, x, y: x.add_(1.5),
    "sub_": lambda m, x, y: x.sub_(y),
    "sub_ alpha": lambda m, x, y: x.sub_(y, alpha=0.5),
    "mul_": lambda m, x, y: x.mul_(y),
    "mul_ scalar": lambda m, x, y: x.mul_(-3),
    "div_": lambda m, x, y: x.div_(y),
    "div_ floor": lambda m, x, y: x.div_(y, rounding_mode="floor"),
    "div_ trunc": lambda m, x, y: x.div_(y, rounding_mode="trunc"),
    "pow_": lambda m, x, y: x.abs_().pow_(y),
    "floor_divide_": lambda m, x, y: x.floor_divide_(y),
    "remainder_": lambda m, x, y: x.remainder_(y),
    "clamp_": lambda m, x, y: x.clamp_(-0.5, 0.5),
    "clamp_ tensor": lambda m, x, y: x.clamp_(min=y),
    "clip_": lambda m, x, y: x.clip_(max=0.25),
    "fill_": lambda m, x, y: x.fill_(2.5),
    "fill_ 0-d tensor": lambda m, x, y: x.fill_(y[0, 0]),
    "zero_": lambda m, x, y: x.zero_(),
    "copy_": lambda m, x, y: x.copy_(y),
    "masked_fill_": lambda m, x, y: x.masked_fill_(y > 0, -7.0),
    "lerp_": lambda m, x, y: x.lerp_(y, 0.3),
    "lerp_ tensor weight": lambda m, x, y: x.lerp_(y, y.abs() / (1 + y.abs())),
    "addcmul_": lambda m, x, y: x.addcmul_(y, y, value=0.5),
    "addcdiv_": lambda m, x, y: x.addcdiv_(y, y.abs() + 1, value=-2),
    "tril_": lambda m, x, y: x.tril_(1),
    "triu_": lambda m, x, y: x.triu_(-1),
    "nan_to_num_": lambda m, x, y: x.div_(0).nan_to_num_(posinf=1.0),
    "round_": lambda m, x, y: x.mul_(10).round_(),
    "+=": lambda m, x, y: operator.iadd(x, y),
    "-=": lambda m, x, y: operator.isub(x, y),
    "*=": lambda m, x, y: operator.imul(x, y),
    "/=": lambda m, x, y: operator.itruediv(x, y),
    "//=": lambda m, x, y: operator.ifloordiv(x, y),
    "%=": lambda m, x, y: operator.imod(x, y),
    "**=": lambda m, x, y: operator.ipow(x.abs_(), y),
    "+= scalar": lambda m, x, y: operator.iadd(x, 2),
    "*= scalar": lambda m, x, y: operator.imul(x, 0.5),
    "**= scalar": lambda m, x, y: operator.ipow(x, 2),
}


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", list(INPLACE_CASES))
def test_inplace_ops(device, name, dtype, layout):
    """Self contiguous / transposed / strided; other the same shape, a broadcast row and a 0-d."""
    x = random_array((3, 4), dtype, seed=1)
    sub = SubChecks()
    for label, other in [("same shape", random_array((3, 4), dtype, seed=2, nonzero=True)),
                         ("row", random_array((4,), dtype, seed=3, nonzero=True)),
                         ("column", random_array((3, 1), dtype, seed=4, nonzero=True))]:
        if name == "fill_ 0-d tensor" and label != "same shape":
            continue
        with sub(label):
            run_inplace(device, INPLACE_CASES[name], x, other, layout=layout)
    sub.finish()


@pytest.mark.parametrize("name", ["add_", "sub_", "mul_", "+=", "-=", "*=", "//=", "%=", "floor_divide_",
                                  "remainder_", "fill_", "zero_", "copy_", "tril_", "triu_", "+= scalar"])
@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64"])
def test_inplace_integer(device, name, dtype):
    x = random_array((3, 4), dtype, seed=5)
    y = random_array((3, 4), dtype, seed=6, nonzero=True)
    op = INPLACE_CASES[name]
    if name == "fill_":
        op = lambda m, a, b: a.fill_(7)  # noqa: E731
    run_inplace(device, op, x, y)
    run_inplace(device, op, x, y, layout="transposed")


def test_inplace_integer_division_modes(device):
    x = np.array([-7, -6, 5, 9, 0], dtype=np.int64)
    run_inplace(device, lambda m, a: a.div_(2, rounding_mode="floor"), x)
    run_inplace(device, lambda m, a, b: a.div_(b, rounding_mode="trunc"), x, np.array([2, -4, 3, -2, 1]))


def test_inplace_integer_div_trunc_scalar(device):
    run_inplace(device, lambda m, a: a.div_(2, rounding_mode="trunc"), np.array([-7, -6, 5, 9, 0], dtype=np.int64))


# ---- the result is cast back to self's dtype ----

@pytest.mark.parametrize("self_dtype,other_dtype", [
    ("float32", "float64"), ("float32", "int64"), ("float64", "float32"), ("float32", "bool"), ("int64", "int32"),
    ("int32", "int64"), ("uint8", "int64"), ("int64", "bool"), ("int32", "uint8"), ("uint8", "bool"),
    ("bool", "bool")], ids="-".join)
@pytest.mark.parametrize("name", ["add_", "mul_", "+=", "*=", "copy_", "maximum"])
def test_inplace_casts_back(device, name, self_dtype, other_dtype):
    """self op= other computes in the promoted dtype, then stores in self's dtype (float32 +=
    float64 stays float32; uint8 += int64 wraps)."""
    x = random_array((3, 4), self_dtype, seed=7)
    y = random_array((3, 4), other_dtype, seed=8, high=300 if other_dtype == "int64" else None)
    if name == "maximum":
        op = lambda m, a, b: a.copy_(m.maximum(a, b))  # noqa: E731
    else:
        op = INPLACE_CASES[name]
    run_inplace(device, op, x, y)


@pytest.mark.parametrize("src", ["float64", "float32", "int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("dst", ["float64", "float32", "int64", "int32", "uint8", "bool"])
def test_copy_converts_any_dtype(device, dst, src):
    """copy_ converts (float -> int truncates toward zero, number -> bool is != 0)."""
    values = random_array((3, 4), src, seed=9)
    if src.startswith("float"):
        values = values * 3
        if dst == "uint8":
            values = np.abs(values)
    run_inplace(device, lambda m, a, b: a.copy_(b), random_array((3, 4), dst, seed=10), values)
    run_inplace(device, lambda m, a, b: a.copy_(b), random_array((3, 4), dst, seed=10), values[0])  # broadcast


def test_copy_from_non_contiguous_sources(device):
    x = random_array((4, 5), "float64", seed=11)
    for layout in ("transposed", "strided", "expanded"):
        src, v = make(x, device, layout)
        dst, _ = make(np.zeros((4, 5)), device)
        r = dst.copy_(src)
        assert r is dst
        np.testing.assert_array_equal(dst.numpy(), v)


def test_fill_zero_on_empty_and_zero_dim(device):
    run_inplace(device, lambda m, a: a.fill_(3.0), np.zeros((0, 3)))
    run_inplace(device, lambda m, a: a.zero_(), np.zeros((2, 0)))
    run_inplace(device, lambda m, a: a.fill_(3.0), np.array(1.0))
    run_inplace(device, lambda m, a: a.add_(1), np.array(1.0))
    run_inplace(device, lambda m, a, b: a.add_(b), np.array(1.0), np.array(2.0))
    run_inplace(device, lambda m, a, b: a.add_(b), np.ones(3), np.array(2.0))


def test_fill_with_zero_dim_tensor_of_other_dtype(device):
    run_inplace(device, lambda m, a, b: a.fill_(b), np.zeros(3, np.int64), np.array(2.7))
    run_inplace(device, lambda m, a, b: a.fill_(b), np.zeros(3, np.float32), np.array(True))
    run_inplace(device, lambda m, a: a.fill_(2.7), np.zeros(3, np.int32))
    run_inplace(device, lambda m, a: a.fill_(-1), np.zeros(3, np.uint8))
    run_inplace(device, lambda m, a: a.fill_(2), np.zeros(3, bool))


def test_masked_fill_inplace(device):
    x = random_array((3, 4), "float32", seed=12)
    run_inplace(device, lambda m, a, k: a.masked_fill_(k, 0.5), x, random_array((3, 4), "bool", seed=1))
    run_inplace(device, lambda m, a, k: a.masked_fill_(k, 0.5), x, random_array((4,), "bool", seed=2))
    run_inplace(device, lambda m, a, k, v: a.masked_fill_(k, v), x, random_array((3, 1), "bool", seed=3),
                np.array(9.0, np.float32))
    run_inplace(device, lambda m, a, k: a.masked_fill_(k, 3), random_array((3, 4), "int64", seed=4),
                random_array((3, 4), "bool", seed=5))


def test_self_aliasing_operands(device):
    """x.op_(x): the operand is read before it is overwritten."""
    x = random_array((3, 4), "float64", seed=13)
    run_inplace(device, lambda m, a: a.add_(a), x)
    run_inplace(device, lambda m, a: a.mul_(a), x)
    run_inplace(device, lambda m, a: a.sub_(a.sum()), x)
    run_inplace(device, lambda m, a: a.copy_(a), x)
    run_inplace(device, lambda m, a: a.div_(a.amax(1, keepdim=True)), x)


def test_operator_rebinding_keeps_other_references(device):
    """x += y modifies the object every name refers to (no new tensor is bound)."""
    x, _ = make(np.arange(4.0), device)
    alias = x
    x += 1
    x *= 2
    x -= 0.5
    x /= 2
    x **= 2
    x //= 1
    x %= 3
    assert x is alias
    ref = torch.arange(4.0, dtype=torch.float64)
    ref += 1
    ref *= 2
    ref -= 0.5
    ref /= 2
    ref **= 2
    ref //= 1
    ref %= 3
    assert_close(alias, ref)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64"])
@pytest.mark.parametrize("op", [operator.iand, operator.ior, operator.ixor], ids=["&=", "|=", "^="])
def test_bitwise_inplace_operators(device, op, dtype):
    """x &= y writes into x (other references and views of x see it)."""
    a = random_array((3, 4), dtype, seed=14)
    b = random_array((3, 4), dtype, seed=15)
    run_inplace(device, lambda m, x, y: op(x, y), a, b)
    run_inplace(device, lambda m, x: op(x, 3 if dtype != "bool" else True), a)


@pytest.mark.parametrize("write", ["fill_", "zero_", "masked_fill_", "setitem", "expand of size 1"])
def test_writes_allowed_on_expanded(device, write):
    """PyTorch rejects elementwise in-place ops on tensors whose elements share memory (test_ops_errors.py),
    but fills, masked fills and index assignments write them, and a size-1 expanded dim shares nothing."""
    def run(m, dev):
        base = m.zeros(1, 3, device=dev) if m is loom else m.zeros(1, 3)
        t = base.expand(2, 3)
        if write == "fill_":
            t.fill_(2.0)
        elif write == "zero_":
            base.fill_(5.0)
            t.zero_()
        elif write == "masked_fill_":
            t.masked_fill_(m.ones(2, 3, dtype=m.bool, **({"device": dev} if m is loom else {})), 3.0)
        elif write == "setitem":
            t[0] = 4.0
        else:
            t = base.expand(1, 3)
            t.add_(1)
        return base
    assert_close(run(loom, device), run(torch, None))


# ---- writes through views ----

VIEWS = {
    "row": lambda t: t[1],
    "column": lambda t: t[:, 2],
    "stepped": lambda t: t[::2, 1::2],
    "transposed": lambda t: t.t(),
    "narrowed": lambda t: t.narrow(1, 1, 3),
    "view": lambda t: t.view(20),
    "reshape": lambda t: t.reshape(2, 10),
    "unsqueeze": lambda t: t.unsqueeze(0),
    "select of transpose": lambda t: t.t()[3],
    "diag-like": lambda t: t[1:3, 1:3],
    "split piece": lambda t: t.split(2)[1],
    "unbind piece": lambda t: t.unbind(1)[4],
}

VIEW_WRITES = {
    "add_": lambda t: t.add_(100),
    "mul_": lambda t: t.mul_(-1),
    "fill_": lambda t: t.fill_(7),
    "zero_": lambda t: t.zero_(),
    "clamp_": lambda t: t.clamp_(2, 5),
    "copy_": lambda t: t.copy_(t * 0 + 3),
    "masked_fill_": lambda t: t.masked_fill_(t > 5, -1),
    "+=": lambda t: operator.iadd(t, 10),
    "sub_ tensor": lambda t: t.sub_(t.sum()),
    "lerp_": lambda t: t.lerp_(t * 2, 0.5),
    "addcmul_": lambda t: t.addcmul_(t, t, value=0.5),
}


@pytest.mark.parametrize("write", list(VIEW_WRITES))
@pytest.mark.parametrize("view", list(VIEWS))
def test_inplace_on_view_changes_base(device, view, write):
    """An in-place op on a view changes the base (and reads of the view after it see the write)."""
    values = np.arange(20.0).reshape(4, 5)
    base, _ = make(values, device)
    ref = torch.from_numpy(values.copy())
    v = VIEWS[view](base)
    rv = VIEWS[view](ref)
    r = VIEW_WRITES[write](v)
    VIEW_WRITES[write](rv)
    assert r is v
    assert_close(base, ref)
    assert_close(v, rv)


@pytest.mark.parametrize("write", list(VIEW_WRITES))
def test_inplace_on_base_shows_in_views(device, write):
    values = np.arange(20.0).reshape(4, 5)
    base, _ = make(values, device)
    ref = torch.from_numpy(values.copy())
    views = [f(base) for f in VIEWS.values()]
    ref_views = [f(ref) for f in VIEWS.values()]
    VIEW_WRITES[write](base)
    VIEW_WRITES[write](ref)
    sub = SubChecks()
    for name, v, rv in zip(VIEWS, views, ref_views):
        with sub(name):
            assert_close(v, rv)
    sub.finish()


def test_inplace_on_view_shows_in_sibling_views(device):
    """Two overlapping views of one base: a write through one is seen through the other, and
    further ops on the base and both views compose in program order."""
    values = np.arange(24.0).reshape(4, 6)
    sub = SubChecks()
    for mod in (loom, torch):
        if mod is loom:
            base, _ = make(values, device)
        else:
            base = torch.from_numpy(values.copy())
        a = base[1:3]          # rows 1, 2
        b = base[:, ::2]       # even columns
        c = base.t()[2:5]      # columns 2..4, transposed
        a.mul_(-1)
        b.add_(100)
        c[0].fill_(0.5)
        base[3, 3:] += 1000
        a.add_(b[1:3].sum(1, keepdim=True))
        if mod is loom:
            out = [base, a, b, c]
        else:
            ref = [base, a, b, c]
    for name, o, r in zip(["base", "a", "b", "c"], out, ref):
        with sub(name):
            assert_close(o, r)
    sub.finish()


@pytest.mark.parametrize("drop_base", ["before_writes", "between_writes", "after_writes"])
def test_sibling_views_of_a_dropped_base(device, drop_base):
    """Overlapping views of a computed base that the program drops (a function returning two
    slices of a local tensor): writes through either view, before or after the base is gone, are
    seen through the other, as while the base lives (a lazy view holds a computed base weakly)."""
    values = np.arange(24.0).reshape(4, 6)
    results = []
    for mod in (loom, torch):
        x = make(values, device)[0] if mod is loom else torch.from_numpy(values.copy())
        base = x * 1
        a, b = base[1:3], base[:, ::2]
        if drop_base == "before_writes":
            del base
        a.mul_(-1)
        if drop_base == "between_writes":
            del base
        b.add_(100)
        if drop_base == "after_writes":
            del base
        a.add_(b[1:3].sum(1, keepdim=True))
        results.append([a, b, a * 1, b.sum(0)])
    for o, r in zip(*results):
        assert_close(o, r)


def test_inplace_view_of_view_chain(device):
    values = np.arange(60.0).reshape(3, 4, 5)
    results = []
    for mod in (loom, torch):
        base = make(values, device)[0] if mod is loom else torch.from_numpy(values.copy())
        v1 = base.transpose(0, 2)           # (5, 4, 3)
        v2 = v1[1:4, ::2]                   # (3, 2, 3)
        v3 = v2.reshape(3, 6)               # not viewable: a copy in both libraries
        v4 = v3[:, 1:5:3]                   # (3, 2), a view of the copy
        v4.mul_(-1)
        v2.add_(0.25)
        v1[0].zero_()
        results.append([base, v1, v2, v3, v4])
    for o, r in zip(*results):
        assert_close(o, r)


def test_inplace_visible_through_numpy(device):
    """Eager CPU tensors share memory with .numpy(): in-place writes are visible there at once
    (on the lazy device, .numpy() after the writes is the sync point that shows them)."""
    x, _ = make(np.zeros((2, 3)), device)
    arr = x.numpy() if device == "cpu" else None
    x.add_(1)
    x[0].mul_(5)
    x.t()[2].fill_(-1)
    if arr is None:
        arr = x.numpy()
    np.testing.assert_array_equal(arr, [[5.0, 5.0, -1.0], [1.0, 1.0, -1.0]])


def test_reads_before_write_keep_old_values(device):
    """A result computed from x before an in-place write on x keeps the old values."""
    x, _ = make(np.arange(6.0), device)
    y = x * 2
    s = x.sum()
    v = x[2:]
    x.add_(10)
    assert y.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert s.item() == 15.0
    assert v.tolist() == [12.0, 13.0, 14.0, 15.0]


def test_inplace_then_more_ops_in_program_order(device):
    """A longer program mixing in-place and out-of-place ops, views and reductions."""
    values = random_array((4, 6), "float64", seed=16)
    results = []
    for mod in (loom, torch):
        x = make(values, device)[0] if mod is loom else torch.from_numpy(values.copy())
        y = x.t()
        x.mul_(2)
        z = y + 1
        y[1:3].clamp_(-0.5, 0.5)
        w = x.sum(1)
        x[:, ::3] -= w.unsqueeze(1)
        z.add_(x.t())
        results.append([x, y, z, w])
    for o, r in zip(*results):
        assert_close(o, r)
