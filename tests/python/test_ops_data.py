"""Data-movement ops agree with PyTorch: cat, stack, split, chunk, unbind, index_select, gather,
take_along_dim, scatter_add, tril, triu, masked_fill, one_hot, pad, repeat, flip, where and clamp.

Values, result dtype (cat / stack / where / clamp promote) and shape; contiguous, transposed,
strided and expanded inputs; empty and 0-d where the op allows them."""

import numpy as np
import pytest
import torch.nn.functional as F

import loom
from _ops_helpers import (ALL_DTYPES, LAYOUTS, SubChecks, assert_close, check, device,  # noqa: F401
                          make, random_array, torch)
from conftest import storage_base

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def fn_of(name):
    """loom.<name>, or torch.nn.functional.<name> for one_hot / pad."""
    def call(m, *args, **kwargs):
        if m is torch and name in ("one_hot", "pad"):
            return getattr(F, name)(*args, **kwargs)
        return getattr(m, name)(*args, **kwargs)
    return call


# ---- cat / stack ----

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_cat(device, dtype):
    a = random_array((2, 3, 4), dtype, seed=1)
    sub = SubChecks()
    for dim in (0, 1, 2, -1, -3):
        shape_b = list(a.shape)
        shape_b[dim] = 2
        b = random_array(tuple(shape_b), dtype, seed=2)
        shape_e = list(a.shape)
        shape_e[dim] = 0
        e = np.zeros(shape_e, dtype)
        for la, lb in [("contiguous", "contiguous"), ("transposed", "strided"), ("expanded", "transposed")]:
            with sub(f"dim={dim} {la} {lb}"):
                check(device, lambda m, x, y: m.cat([x, y], dim), a, b, layouts=[la, lb])
                check(device, lambda m, x, y: m.cat((y, x, y), dim=dim), a, b, layouts=[la, lb])
        with sub(f"dim={dim} with an empty part"):
            check(device, lambda m, x, y: m.cat([y, x], dim), a, e)
        with sub(f"dim={dim} concat alias"):
            check(device, lambda m, x, y: m.concat([x, y], dim), a, b)
    with sub("single tensor"):
        check(device, lambda m, x: m.cat([x]), a)
    sub.finish()


def test_cat_result_is_a_copy(device):
    x, _ = make(np.arange(4.0), device)
    y = loom.cat([x])
    x.fill_(-1.0)
    assert y.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_cat_1d_and_empty(device):
    check(device, lambda m, x, y: m.cat([x, y]), np.arange(3.0), np.arange(2.0))
    check(device, lambda m, x, y: m.cat([x, y]), np.zeros(0), np.zeros(0))
    check(device, lambda m, x, y: m.cat([x, y], 1), np.zeros((0, 2)), np.zeros((0, 3)))


@pytest.mark.parametrize("dta", ALL_DTYPES)
def test_cat_promotion(device, dta):
    """cat promotes across its inputs (torch.result_type of all of them)."""
    sub = SubChecks()
    for dtb in ALL_DTYPES:
        with sub(f"{dta} + {dtb}"):
            check(device, lambda m, x, y: m.cat([x, y], 0), random_array((2, 3), dta, seed=1),
                  random_array((1, 3), dtb, seed=2))
    sub.finish()


def test_cat_legacy_empty_1d(device):
    """cat skips 1-D empty tensors next to tensors of other ranks (they still promote)."""
    check(device, lambda m, x, y: m.cat([x, y]), np.ones((2, 3)), np.zeros(0))
    check(device, lambda m, x, y: m.cat([y, x], 1), np.ones((2, 3)), np.zeros(0))
    check(device, lambda m, x, y: m.cat([y, x], -1), np.ones((2, 3), np.float32), np.zeros(0))
    check(device, lambda m, x, y: m.cat([x, y, x]), np.ones((2, 3), np.float32), np.zeros(0, np.int64))
    check(device, lambda m, x, y: m.cat([x, y], 1), np.zeros(0, np.float32), np.zeros(0))
    check(device, lambda m, x, y: m.cat([x, y]), np.zeros(0), np.ones(2))
    check(device, lambda m, x, y: m.cat([x, y]), np.zeros(0), np.array(1.0))


@pytest.mark.parametrize("dtype", ["bool", "int32", "float32", "float64"])
def test_stack(device, dtype):
    sub = SubChecks()
    for shape in [(3, 4), (5,), (), (0, 2)]:
        a = random_array(shape, dtype, seed=1)
        b = random_array(shape, dtype, seed=2)
        for dim in range(-len(shape) - 1, len(shape) + 1):
            with sub(f"shape={shape} dim={dim}"):
                check(device, lambda m, x, y: m.stack([x, y, x], dim), a, b, layouts=["transposed", "strided"])
                check(device, lambda m, x, y: m.stack((x, y), dim=dim), a, b, layouts=["expanded", "contiguous"])
    with sub("promotion"):
        check(device, lambda m, x, y: m.stack([x, y]), random_array((3,), "int64", seed=1),
              random_array((3,), "float32", seed=2))
    sub.finish()


# ---- split / chunk / unbind ----

def _tuple_of(f):
    return lambda m, *a: tuple(f(m, *a))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_split(device, layout):
    x = random_array((7, 6), "float32", seed=1)
    sub = SubChecks()
    for size in (1, 2, 3, 7, 10):
        for dim in (0, -2):
            with sub(f"split({size}, {dim})"):
                check(device, _tuple_of(lambda m, t: m.split(t, size, dim)), x, layouts=[layout])
                check(device, _tuple_of(lambda m, t: t.split(size, dim=dim)), x, layouts=[layout])
    for sizes in ([1, 6], [3, 0, 4], [7], (2, 2, 3)):
        with sub(f"split({sizes})"):
            check(device, _tuple_of(lambda m, t: m.split(t, sizes)), x, layouts=[layout])
            check(device, _tuple_of(lambda m, t: t.split(list(sizes), 0)), x, layouts=[layout])
    with sub("sections along dim 1"):
        check(device, _tuple_of(lambda m, t: t.split([1, 5], 1)), x, layouts=[layout])
        check(device, _tuple_of(lambda m, t: t.split(4, -1)), x, layouts=[layout])
    sub.finish()


def test_split_empty_dim(device):
    check(device, _tuple_of(lambda m, t: m.split(t, 2)), np.zeros((0, 3)))
    check(device, _tuple_of(lambda m, t: m.split(t, 0)), np.zeros((0, 3)))
    check(device, _tuple_of(lambda m, t: m.split(t, [0, 0])), np.zeros((0, 3)))


def test_split_pieces_are_views(device):
    """split / chunk / unbind return views: a write to a piece lands in the base."""
    base, _ = make(np.arange(12.0).reshape(4, 3), device)
    ref = torch.arange(12.0, dtype=torch.float64).reshape(4, 3)
    for f in (lambda t: t.split(2)[1], lambda t: t.chunk(3, 1)[2], lambda t: t.unbind(1)[0],
              lambda t: t.split([1, 3])[0]):
        f(base).mul_(-1)
        f(ref).mul_(-1)
    assert_close(base, ref)
    if device == "cpu":
        assert storage_base(base.split(2)[1]) == storage_base(base)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_chunk(device, layout):
    sub = SubChecks()
    for size in (1, 5, 6, 7, 12):
        x = random_array((size, 4), "float64", seed=size)
        for chunks in (1, 2, 3, 4, 5, 6, 13):
            with sub(f"{size} into {chunks}"):
                check(device, _tuple_of(lambda m, t: m.chunk(t, chunks)), x, layouts=[layout])
                check(device, _tuple_of(lambda m, t: t.chunk(chunks, dim=-2)), x, layouts=[layout])
    with sub("dim 1"):
        check(device, _tuple_of(lambda m, t: t.chunk(3, 1)), random_array((2, 7), "int64", seed=1), layouts=[layout])
    sub.finish()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_unbind(device, layout):
    x = random_array((2, 3, 4), "int32", seed=1)
    sub = SubChecks()
    for dim in (0, 1, 2, -1, -3):
        with sub(f"dim={dim}"):
            check(device, _tuple_of(lambda m, t: m.unbind(t, dim)), x, layouts=[layout])
            check(device, _tuple_of(lambda m, t: t.unbind(dim=dim)), x, layouts=[layout])
    with sub("empty dim"):
        check(device, _tuple_of(lambda m, t: t.unbind(0)), np.zeros((0, 3)))
        check(device, _tuple_of(lambda m, t: t.unbind(1)), np.zeros((0, 3)))
    sub.finish()


# ---- index_select / gather / take_along_dim / scatter_add ----

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64", "float32", "float64"])
def test_index_select(device, dtype, layout):
    x = random_array((4, 5, 3), dtype, seed=1)
    sub = SubChecks()
    for dim in (0, 1, 2, -1):
        n = x.shape[dim]
        for idx in ([0], [n - 1, 0, 0, 1], list(range(n))[::-1], []):
            for idx_dtype in ("int64", "int32"):
                index = np.array(idx, dtype=idx_dtype)
                with sub(f"dim={dim} index={idx} {idx_dtype}"):
                    check(device, lambda m, t, i: m.index_select(t, dim, i), x, index, layouts=[layout, "contiguous"])
                    check(device, lambda m, t, i: t.index_select(dim, i), x, index, layouts=[layout, "contiguous"])
    with sub("0-d index"):
        check(device, lambda m, t, i: t.index_select(1, i), x, np.array(2), layouts=[layout, "contiguous"])
    with sub("strided index"):
        check(device, lambda m, t, i: t.index_select(0, i), x, np.array([3, 1, 2, 0, 1]), layouts=[layout, "strided"])
    sub.finish()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64", "float32", "float64"])
def test_flip(device, dtype, layout):
    x = random_array((4, 5, 3), dtype, seed=2)
    sub = SubChecks()
    for dims in [(0,), (1,), (-1,), (0, 2), (2, 0, 1), ()]:
        with sub(f"dims={dims}"):
            check(device, lambda m, t: m.flip(t, dims), x, layouts=[layout])
            check(device, lambda m, t: t.flip(*dims) if dims else t.flip(dims), x, layouts=[layout])
    with sub("0-d and empty"):
        check(device, lambda m, t: m.flip(t, (0,)), random_array((0, 3), dtype, seed=3))
        check(device, lambda m, t: m.flip(t, ()), random_array((), dtype, seed=4))
    sub.finish()


def test_flip_is_a_copy_and_checks_dims(device):
    t = loom.tensor([1.0, 2.0], device=device)
    f = t.flip(0)
    f.add_(1)
    assert t.tolist() == [1.0, 2.0] and f.tolist() == [3.0, 2.0]
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        loom.flip(t, (0, -1))
    with pytest.raises(IndexError, match="Dimension out of range"):
        t.flip(1)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["bool", "int32", "float32", "float64"])
def test_gather(device, dtype, layout):
    x = random_array((4, 5, 3), dtype, seed=2)
    g = np.random.default_rng(3)
    sub = SubChecks()
    for dim in (0, 1, 2, -1, -2):
        d = dim % 3
        for shape in [(4, 5, 3), (2, 5, 1), (1, 2, 3), (4, 7, 3) if d == 1 else (4, 5, 3), (0, 5, 3)]:
            if any(s > x.shape[i] for i, s in enumerate(shape) if i != d):
                continue
            index = g.integers(0, x.shape[d], size=shape).astype(np.int64)
            with sub(f"dim={dim} index shape {shape}"):
                check(device, lambda m, t, i: m.gather(t, dim, i), x, index, layouts=[layout, "contiguous"])
                check(device, lambda m, t, i: t.gather(dim, i), x, index, layouts=[layout, "transposed"])
    sub.finish()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_gather_and_scatter_add_read_an_index_of_any_layout(device, layout):
    # The CPU gather and scatters read an int64 index in place, at its strides (a transposed,
    # strided or expanded one, whose stride 0 repeats a row), rather than a contiguous copy.
    g = np.random.default_rng(11)
    x = random_array((6, 5, 4), "float32", seed=12)
    src = random_array((6, 5, 4), "float32", seed=13)
    sub = SubChecks()
    for dim in (0, 1, 2):
        index = g.integers(0, x.shape[dim], size=(6, 5, 4)).astype(np.int64)
        with sub(f"dim={dim}"):
            check(device, lambda m, t, i: m.gather(t, dim, i), x, index, layouts=["contiguous", layout])
            check(device, lambda m, t, i: t.gather(dim, i), x, index, layouts=["transposed", layout])
            check(device, lambda m, t, i, s: m.scatter_add(t, dim, i, s), x, index, src,
                  layouts=["contiguous", layout, "contiguous"])
    sub.finish()


def test_gather_zero_dim(device):
    check(device, lambda m, t, i: m.gather(t, 0, i), np.array(2.5), np.array(0))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_take_along_dim(device, layout):
    x = random_array((3, 4, 5), "float32", seed=4)
    g = np.random.default_rng(5)
    sub = SubChecks()
    for dim in (0, 1, 2, -1):
        d = dim % 3
        for shape in [(3, 4, 5), (1, 4, 5), (3, 1, 2), (1, 1, 7)]:
            shape = tuple(s if i == d else s for i, s in enumerate(shape))
            index = g.integers(0, x.shape[d], size=shape).astype(np.int64)
            with sub(f"dim={dim} index {shape}"):
                check(device, lambda m, t, i: m.take_along_dim(t, i, dim), x, index, layouts=[layout, "contiguous"])
                check(device, lambda m, t, i: t.take_along_dim(i, dim=dim), x, index, layouts=[layout, "contiguous"])
    with sub("no dim: flattened"):
        index = g.integers(0, x.size, size=(7,)).astype(np.int64)
        check(device, lambda m, t, i: m.take_along_dim(t, i), x, index, layouts=[layout, "contiguous"])
        check(device, lambda m, t, i: m.take_along_dim(t, i), x, index.reshape(7, 1), layouts=[layout, "contiguous"])
    with sub("with argmax / argmin"):
        check(device, lambda m, t: m.take_along_dim(t, t.argmax(1, keepdim=True), 1), x, layouts=[layout])
        check(device, lambda m, t: m.take_along_dim(t, t.argmin(-1, keepdim=True), -1), x, layouts=[layout])
    sub.finish()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["int64", "int32", "float32", "float64"])
def test_scatter_add(device, dtype, layout):
    g = np.random.default_rng(6)
    x = random_array((4, 5), dtype, seed=7)
    sub = SubChecks()
    for dim in (0, 1, -1):
        d = dim % 2
        for shape in [(4, 5), (2, 3), (6, 2) if d == 0 else (2, 9), (0, 5)]:
            index = g.integers(0, x.shape[d], size=shape).astype(np.int64)  # with repeats: accumulates
            src = random_array(tuple(s + 1 for s in shape), dtype, seed=8)  # src may be larger than index
            with sub(f"dim={dim} index {shape}"):
                check(device, lambda m, t, i, s: m.scatter_add(t, dim, i, s), x, index, src,
                      layouts=[layout, "contiguous", "contiguous"])
                check(device, lambda m, t, i, s: t.scatter_add(dim, i, s), x, index, src,
                      layouts=["contiguous", "transposed", layout])
    sub.finish()


def test_scatter_add_does_not_modify_input(device):
    x, _ = make(np.zeros(3, np.float32), device)
    y = loom.scatter_add(x, 0, loom.tensor([0, 0, 2], device=device), loom.tensor([1.0, 2.0, 3.0], device=device))
    assert y.tolist() == [3.0, 0.0, 3.0]
    assert x.tolist() == [0.0, 0.0, 0.0]


# ---- tril / triu ----

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", ["tril", "triu"])
def test_tril_triu(device, name, dtype, layout):
    sub = SubChecks()
    for shape in [(4, 4), (3, 5), (5, 2), (2, 3, 4), (0, 3), (3, 0), (2, 0, 2)]:
        x = random_array(shape, dtype, seed=9)
        for diagonal in (0, 1, -1, 2, -3, 6, -6):
            with sub(f"{shape} diagonal={diagonal}"):
                check(device, lambda m, t: getattr(m, name)(t, diagonal), x, layouts=[layout])
                check(device, lambda m, t: getattr(t, name)(diagonal=diagonal), x, layouts=[layout])
        with sub(f"{shape} default"):
            check(device, lambda m, t: getattr(t, name)(), x, layouts=[layout])
    sub.finish()


@pytest.mark.parametrize("name", ["tril", "triu"])
def test_tril_triu_special_values(device, name):
    """Kept NaN / inf stay, dropped ones become 0; large int64 values are exact."""
    x = np.array([[np.nan, np.inf], [-np.inf, np.nan]])
    check(device, lambda m, t: getattr(m, name)(t), x)
    check(device, lambda m, t: getattr(m, name)(t), np.full((3, 3), 2**60 + 1, dtype=np.int64))
    check(device, lambda m, t: getattr(m, name)(t, 1), np.full((3, 3), 255, dtype=np.uint8))


# ---- masked_fill ----

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_masked_fill(device, dtype, layout):
    x = random_array((3, 4), dtype, seed=10)
    mask = random_array((3, 4), "bool", seed=11)
    sub = SubChecks()
    values = [True, 0, 3, -1, 2.5] if dtype != "bool" else [True, False]
    if dtype.startswith("float"):
        values += [float("nan"), float("inf")]
    for value in values:
        with sub(f"value={value!r}"):
            check(device, lambda m, t, k: m.masked_fill(t, k, value), x, mask, layouts=[layout, "contiguous"])
            check(device, lambda m, t, k: t.masked_fill(k, value), x, mask, layouts=[layout, "strided"])
    with sub("broadcast mask row / column"):
        check(device, lambda m, t, k: t.masked_fill(k, 1), x, mask[0], layouts=[layout, "contiguous"])
        check(device, lambda m, t, k: t.masked_fill(k, 1), x, mask[:, :1], layouts=[layout, "contiguous"])
    with sub("0-d tensor value"):
        check(device, lambda m, t, k, v: t.masked_fill(k, v), x, mask, np.array(7, dtype=x.dtype),
              layouts=[layout, "contiguous", "contiguous"])
    with sub("empty"):
        check(device, lambda m, t, k: t.masked_fill(k, 1), np.zeros((0, 4), x.dtype), np.zeros((0, 4), bool))
    sub.finish()


def test_masked_fill_zero_dim_value_of_other_dtype(device):
    check(device, lambda m, t, k, v: t.masked_fill(k, v), random_array((3,), "float32", seed=1),
          np.array([True, False, True]), np.array(7.5))
    check(device, lambda m, t, k, v: t.masked_fill(k, v), random_array((3,), "int64", seed=1),
          np.array([True, False, True]), np.array(2))
    check(device, lambda m, t, k: t.masked_fill(k, 2**60 + 1), random_array((3,), "int64", seed=1),
          np.array([True, False, True]))


# ---- one_hot ----

@pytest.mark.parametrize("shape", [(5,), (2, 3), (), (0,), (2, 0, 3)], ids=str)
def test_one_hot(device, shape):
    idx = random_array(shape, "int64", seed=12, low=0, high=4)
    sub = SubChecks()
    for nc in (4, 6):
        with sub(f"num_classes={nc}"):
            check(device, lambda m, i: fn_of("one_hot")(m, i, nc), idx)
            check(device, lambda m, i: fn_of("one_hot")(m, i, num_classes=nc), idx, layouts=["transposed"])
    if idx.size:
        with sub("inferred"):
            check(device, lambda m, i: fn_of("one_hot")(m, i), idx)
            check(device, lambda m, i: fn_of("one_hot")(m, i, -1), idx, layouts=["strided"])
    sub.finish()


# ---- pad ----

@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64", "float32", "float64"])
def test_pad(device, dtype):
    x = random_array((2, 3, 4), dtype, seed=13)
    sub = SubChecks()
    for pads in [(1, 2), (0, 0), (2, 0, 0, 1), (1, 1, 1, 1, 1, 1), (-1, 1), (1, -2, -1, 0), (0, -4),
                 (3, 3, -1, -1, 0, 2)]:
        for layout in ("contiguous", "transposed", "strided"):
            with sub(f"pad={pads} {layout}"):
                check(device, lambda m, t: fn_of("pad")(m, t, pads), x, layouts=[layout])
        value = True if dtype == "bool" else 7
        with sub(f"pad={pads} value={value}"):
            check(device, lambda m, t: fn_of("pad")(m, t, pads, value=value), x)
            check(device, lambda m, t: fn_of("pad")(m, t, list(pads), "constant", value), x)
    sub.finish()


def test_pad_float_values_and_empty(device):
    check(device, lambda m, t: fn_of("pad")(m, t, (1, 1), value=-1.5), random_array((2, 3), "float32", seed=1))
    check(device, lambda m, t: fn_of("pad")(m, t, (1, 1), value=float("nan")), random_array((3,), "float64", seed=1))
    check(device, lambda m, t: fn_of("pad")(m, t, (1, 2)), np.zeros((0, 3), np.float32))
    check(device, lambda m, t: fn_of("pad")(m, t, (0, 0, 1, 1)), np.zeros((0, 3), np.float32))


# ---- repeat ----

def test_repeat(device):
    x = random_array((2, 3), "float32", seed=14)
    sub = SubChecks()
    for reps in [(1, 1), (2, 1), (2, 3), (2, 1, 2), (1, 0), (3, 1, 1, 1)]:
        for layout in ("contiguous", "transposed", "expanded"):
            with sub(f"{reps} {layout}"):
                check(device, lambda m, t: t.repeat(*reps), x, layouts=[layout])
                check(device, lambda m, t: t.repeat(reps), x, layouts=[layout])
    with sub("0-d"):
        check(device, lambda m, t: t.repeat(3, 2), np.array(1.5))
    sub.finish()


# ---- where ----

@pytest.mark.parametrize("dta", ALL_DTYPES)
def test_where_promotion(device, dta):
    cond = random_array((3, 1, 4), "bool", seed=15)
    a = random_array((2, 4), dta, seed=16)
    sub = SubChecks()
    for dtb in ALL_DTYPES:
        b = random_array((3, 2, 1), dtb, seed=17)
        with sub(f"{dta} / {dtb}"):
            check(device, lambda m, c, x, y: m.where(c, x, y), cond, a, b)
        with sub(f"0-d {dtb}"):
            check(device, lambda m, c, x, y: m.where(c, x, y), cond, a, np.array(random_array((), dtb, seed=3)))
    sub.finish()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_where_layouts_and_forms(device, layout):
    cond = random_array((4, 5), "bool", seed=18)
    a = random_array((4, 5), "float32", seed=19)
    b = random_array((4, 5), "float32", seed=20)
    sub = SubChecks()
    with sub("function"):
        check(device, lambda m, c, x, y: m.where(c, x, y), cond, a, b, layouts=[layout, layout, "transposed"])
    with sub("method"):
        check(device, lambda m, c, x, y: x.where(c, y), cond, a, b, layouts=[layout, "strided", layout])
    with sub("keyword"):
        check(device, lambda m, c, x, y: m.where(c, input=x, other=y), cond, a, b, layouts=[layout, layout, layout])
    for sa, sb in [(1.5, 0), (2, -1), (True, 0.5)]:
        with sub(f"scalars {sa!r} {sb!r}"):
            check(device, lambda m, c, x: m.where(c, x, sb), cond, a, layouts=[layout, layout])
            check(device, lambda m, c, y: m.where(c, sa, y), cond, b, layouts=[layout, layout])
    sub.finish()


def test_where_scalar_promotion(device):
    """Python scalars are weak: where(c, int tensor, 2.5) is float32; where(c, 1, 0) is int64."""
    cond = np.array([True, False, True])
    check(device, lambda m, c, x: m.where(c, x, 2.5), cond, np.array([1, 2, 3]))
    check(device, lambda m, c, x: m.where(c, x, 2), cond, np.array([1, 2, 3], dtype=np.uint8))
    check(device, lambda m, c, x: m.where(c, x, 1.5), cond, np.array([1.0, 2.0, 3.0], dtype=np.float64))
    check(device, lambda m, c: m.where(c, 1.5, 2), cond)
    check(device, lambda m, c: m.where(c, 1, 0), cond)
    check(device, lambda m, c: m.where(c, True, False), cond)


def test_where_empty_and_zero_dim(device):
    check(device, lambda m, c, x, y: m.where(c, x, y), np.zeros((0, 3), bool), np.zeros((0, 3)), np.ones(3))
    check(device, lambda m, c, x, y: m.where(c, x, y), np.array(True), np.array(1.0), np.array(2.0))
    check(device, lambda m, c, x, y: m.where(c, x, y), np.array(False), np.arange(3.0), np.array(-1.0))


# ---- clamp / clip ----

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64", "float32", "float64"])
def test_clamp_scalar_bounds(device, dtype, layout):
    x = random_array((4, 5), dtype, seed=21)
    sub = SubChecks()
    for lo, hi in [(0, 3), (-2, None), (None, 1), (1, 1), (3, 0), (0.5, 2.5), (-1.5, None), (None, 2.0)]:
        if dtype == "uint8" and ((lo is not None and lo < 0) or (hi is not None and hi < 0)):
            continue
        with sub(f"min={lo} max={hi}"):
            check(device, lambda m, t: m.clamp(t, lo, hi), x, layouts=[layout])
            check(device, lambda m, t: t.clamp(min=lo, max=hi), x, layouts=[layout])
            check(device, lambda m, t: t.clip(lo, hi), x, layouts=[layout])
            check(device, lambda m, t: m.clip(t, min=lo, max=hi), x, layouts=[layout])
    sub.finish()


@pytest.mark.parametrize("dtype", ["int64", "float32", "float64"])
def test_clamp_tensor_bounds(device, dtype):
    x = random_array((4, 5), dtype, seed=22)
    lo = random_array((5,), dtype, seed=23)
    hi = random_array((4, 1), dtype, seed=24) + 2
    sub = SubChecks()
    with sub("both"):
        check(device, lambda m, t, a, b: m.clamp(t, a, b), x, lo, hi, layouts=["transposed", "strided", "contiguous"])
    with sub("min only"):
        check(device, lambda m, t, a: t.clamp(min=a), x, lo)
    with sub("max only"):
        check(device, lambda m, t, b: t.clamp(max=b), x, hi)
    with sub("0-d bounds"):
        check(device, lambda m, t, a, b: t.clamp(a, b), x, np.array(-0.5, dtype), np.array(0.5, dtype))
    with sub("float64 0-d bound on float32"):
        check(device, lambda m, t, a: t.clamp(a), random_array((3,), "float32", seed=1), np.array(0.25))
    sub.finish()


def test_clamp_nan_and_promotion(device):
    """NaN in the input stays NaN; an int tensor clamped to a float bound becomes float32."""
    x = np.array([np.nan, -2.0, 0.5, 3.0, np.inf, -np.inf])
    check(device, lambda m, t: m.clamp(t, -1, 1), x)
    check(device, lambda m, t: m.clamp(t, min=0), x.astype(np.float32))
    check(device, lambda m, t: m.clamp(t, min=1.5), np.array([1, 2, 3]))
    check(device, lambda m, t: m.clamp(t, max=2.5), np.array([1, 2, 3], dtype=np.int32))
    check(device, lambda m, t, lo: m.clamp(t, min=lo), np.array([1, 2, 3]), np.array(1.5))
    check(device, lambda m, t: m.clamp(t, 0, 2), np.zeros((0, 2)))
    check(device, lambda m, t: m.clamp(t, 0, 2), np.array(5.0))
