"""The data-movement family agrees with PyTorch (lazy/ops_movement.h): views (diagonal, unfold,
movedim, view(dtype)), copies (diag, diag_embed, trace, roll, rot90, repeat_interleave, meshgrid,
cartesian_prod, combinations, block_diag, tril/triu_indices), splitting and stacking, scatters and
index updates, the ops whose size depends on the data (sync points on the lazy device), Tensor.type
and new_*, and indices that are tuples.

Values, dtypes, shapes and errors on both devices (the lazy results also against eager ones);
contiguous, transposed, strided and expanded inputs; the in-place forms; and one program of these
ops run fused, unfused and on the interpreter against eager mode."""

import numpy as np
import pytest

import loom
from _ops_helpers import (ALL_DTYPES, LAYOUTS, SubChecks, assert_close, assert_raises_like, check,  # noqa: F401
                          device, make, random_array, torch)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _tuple_of(f):
    return lambda m, *a: tuple(f(m, *a))


def _np(t):
    return np.array(t.numpy(), copy=True)


# ---- views ----

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["bool", "int64", "float32"])
def test_diagonal(device, dtype, layout):
    sub = SubChecks()
    for shape in [(3, 4), (4, 3), (2, 3, 4)]:
        x = random_array(shape, dtype, seed=1)
        for offset in (-5, -1, 0, 1, 3, 5):
            for dims in [(0, 1), (1, 0), (-1, 0)] + ([(0, 2), (2, 1)] if len(shape) == 3 else []):
                with sub(f"{shape} offset={offset} dims={dims}"):
                    check(device, lambda m, t: m.diagonal(t, offset, *dims), x, layouts=[layout])
                    check(device, lambda m, t: t.diagonal(offset=offset, dim1=dims[0], dim2=dims[1]), x,
                          layouts=[layout])
    for bad in [(1, 1), (0, 2)]:
        with sub(f"error dims={bad}"):
            check(device, lambda m, t: m.diagonal(t, 0, *bad), random_array((3, 4), dtype))
    with sub("1-d"):
        check(device, lambda m, t: t.diagonal(), random_array((3,), dtype))
    sub.finish()


def test_diagonal_is_a_view(device):
    """Writes through a diagonal land in its base (a common idiom: A.diagonal().add_(eps))."""
    x, _ = make(np.zeros((3, 4), np.float32), device)
    x.diagonal().add_(2.0)
    x.diagonal(1).fill_(5.0)
    expected = np.zeros((3, 4), np.float32)
    expected[[0, 1, 2], [0, 1, 2]] = 2
    expected[[0, 1, 2], [1, 2, 3]] = 5
    np.testing.assert_array_equal(_np(x), expected)
    if device == "cpu":
        assert x.diagonal()._base is x if hasattr(x.diagonal(), "_base") else True


@pytest.mark.parametrize("layout", LAYOUTS)
def test_unfold(device, layout):
    sub = SubChecks()
    x = random_array((4, 7), "float32", seed=2)
    for dim in (0, 1, -1):
        for size in (0, 1, 2, 3, 4):
            for step in (1, 2, 3, 5):
                with sub(f"dim={dim} size={size} step={step}"):
                    check(device, lambda m, t: t.unfold(dim, size, step), x, layouts=[layout])
    for args in [(1, 8, 1), (1, 2, 0), (2, 1, 1)]:
        with sub(f"error {args}"):
            check(device, lambda m, t: t.unfold(*args), x)
    with sub("0-d"):
        check(device, lambda m, t: t.unfold(0, 1, 1), np.array(2.5, np.float32))
        check(device, lambda m, t: t.unfold(0, 2, 1), np.array(2.5, np.float32))
    sub.finish()


def test_unfold_is_a_view(device):
    x, _ = make(np.arange(6, dtype=np.float32), device)
    w = x.unfold(0, 2, 2)
    w[:, 0] = -1.0
    assert x.tolist() == [-1.0, 1.0, -1.0, 3.0, -1.0, 5.0]


def test_movedim_swapaxes(device):
    sub = SubChecks()
    x = random_array((2, 3, 4, 5), "float32")
    cases = [(0, 1), (0, -1), ((0, 1), (2, 0)), ((0, 1, 2, 3), (3, 2, 1, 0)), ((), ()), ((0, 1), (1,)),
             ((0, 0), (1, 2)), ((0, 1), (2, 2)), (0, 4)]
    for src, dst in cases:
        with sub(f"movedim {src} {dst}"):
            check(device, lambda m, t: m.movedim(t, src, dst), x, layouts=["transposed"])
            check(device, lambda m, t: t.moveaxis(src, dst), x)
    for a, b in [(0, 1), (-1, 1), (2, 2), (0, 7)]:
        with sub(f"swap {a} {b}"):
            check(device, lambda m, t: m.swapaxes(t, a, b), x)
            check(device, lambda m, t: t.swapdims(a, b), x)
    sub.finish()


@pytest.mark.parametrize("pair", [("float32", "int32"), ("int32", "float32"), ("float32", "float16"),
                                  ("uint8", "int32"), ("float64", "int64"), ("int64", "float32"),
                                  ("float16", "uint8"), ("bool", "uint8"), ("float32", "uint8")])
def test_view_dtype(device, pair):
    src, dst = pair
    sub = SubChecks()
    for shape in [(2, 8), (3, 4, 4), (8,)]:
        x = random_array(shape, src, seed=3)
        with sub(f"{shape}"):
            check(device, lambda m, t: t.view(getattr(m, dst)), x)
    with sub("transposed"):  # PyTorch needs a unit last stride when the item sizes differ
        check(device, lambda m, t: t.t().view(getattr(m, dst)), random_array((4, 4), src))
    with sub("0-d"):
        check(device, lambda m, t: t.view(getattr(m, dst)), random_array((), src))
    sub.finish()


def test_view_dtype_errors_and_sharing(device):
    check(device, lambda m, t: t.view(m.float32), np.ones(3, np.float16))
    check(device, lambda m, t: t.t().view(m.float16), np.ones((3, 4), np.float32))
    check(device, lambda m, t: t[:, 1:].view(m.float64), np.ones((2, 5), np.float32))
    # A stored tensor's bytes are shared: a write through either shows in the other.
    x, _ = make(np.zeros(4, np.float32), device)
    v = x.view(loom.int32)
    v[1] = 1065353216  # the bits of 1.0f
    assert x.tolist() == [0.0, 1.0, 0.0, 0.0]
    assert not x.view(loom.int32).requires_grad


def test_view_dtype_of_a_pending_tensor_is_its_bytes():
    x = loom.tensor([1.0, -2.0], device="lazy") * 2
    got = x.view(loom.int32)
    want = (torch.tensor([1.0, -2.0]) * 2).view(torch.int32)
    assert got.tolist() == want.tolist()
    assert (x.view(loom.float16) + 0).tolist() == (torch.tensor([2.0, -4.0]).view(torch.float16) + 0).tolist()


def test_tensor_type_and_new(device):
    x, _ = make(np.arange(6, dtype=np.float32).reshape(2, 3), device)
    assert x.type() == "torch.FloatTensor"
    assert x.long().type() == "torch.LongTensor" and x.bool().type() == "torch.BoolTensor"
    assert x.type(loom.float32) is x
    assert x.type(loom.int32).dtype is loom.int32
    assert x.type("torch.DoubleTensor").dtype is loom.float64
    with pytest.raises(ValueError, match="invalid type"):
        x.type("float")
    for name, args, kwargs in [("new_zeros", (2, 3), {}), ("new_ones", ((2,),), {"dtype": loom.int32}),
                               ("new_full", ((2, 2), 3.5), {}), ("new_empty", (4,), {})]:
        t = getattr(x, name)(*args, **kwargs)
        r = getattr(torch.zeros(2, 3), name)(*args, **{k: torch.int32 for k in kwargs})
        assert tuple(t.shape) == tuple(r.shape) and str(t.dtype).split(".")[-1] == str(r.dtype).split(".")[-1]
        assert t.is_lazy == (device == "lazy") and not t.requires_grad
        if name != "new_empty":
            np.testing.assert_array_equal(_np(t), r.numpy())
    t = x.long().new_full((2,), 3.5)
    assert t.tolist() == [3, 3] and t.dtype is loom.int64
    t = x.new_tensor([1, 2])
    assert t.dtype is loom.float32 and t.tolist() == [1.0, 2.0] and t.is_lazy == (device == "lazy")
    assert x.new_zeros((2,), requires_grad=True).requires_grad
    assert x.new_ones(3, device="cpu").is_lazy is False


# ---- copies ----

@pytest.mark.parametrize("dtype", ["bool", "int32", "float32"])
def test_diag_diag_embed_trace(device, dtype):
    sub = SubChecks()
    for d in (-2, -1, 0, 1, 3):
        with sub(f"diag d={d}"):
            check(device, lambda m, t: m.diag(t, d), random_array((4,), dtype))
            check(device, lambda m, t: t.diag(d), random_array((3, 4), dtype), layouts=["strided"])
        for dims in [(-2, -1), (0, 2), (-1, -2), (1, 0)]:
            with sub(f"diag_embed d={d} dims={dims}"):
                check(device, lambda m, t: m.diag_embed(t, d, *dims), random_array((2, 3), dtype),
                      layouts=["transposed"])
    with sub("diag errors"):
        check(device, lambda m, t: m.diag(t), random_array((2, 2, 2), dtype))
        check(device, lambda m, t: m.diag_embed(t, 0, 1, 1), random_array((2,), dtype))
    with sub("trace"):
        check(device, lambda m, t: m.trace(t), random_array((3, 4), dtype), layouts=["transposed"])
        check(device, lambda m, t: t.trace(), random_array((2, 2, 2), dtype))
    sub.finish()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_roll_rot90_flips(device, layout):
    x = random_array((3, 4, 2), "int64", seed=4)
    sub = SubChecks()
    for shifts, dims in [(1, None), (-7, None), (2, 0), ((1, -2), (0, 1)), ((5, 1, 3), (2, 1, 0)), ((1, 2), None),
                         ((1, 2), (0,)), ((), ()), (0, 1), (1, 5)]:
        with sub(f"roll {shifts} {dims}"):
            if dims is None:
                check(device, lambda m, t: m.roll(t, shifts), x, layouts=[layout])
            else:
                check(device, lambda m, t: t.roll(shifts, dims), x, layouts=[layout])
    for k in (-3, -1, 0, 1, 2, 3, 6):
        for dims in [(0, 1), (1, 0), (2, 0), (0, 0), (0,)]:
            with sub(f"rot90 k={k} dims={dims}"):
                check(device, lambda m, t: m.rot90(t, k, dims), x, layouts=[layout])
    with sub("rot90 1-d"):
        check(device, lambda m, t: m.rot90(t), random_array((3,), "int64"))
    with sub("fliplr / flipud"):
        check(device, lambda m, t: m.fliplr(t), x, layouts=[layout])
        check(device, lambda m, t: t.flipud(), x, layouts=[layout])
        # PyTorch's message has no word to compare ("Input must be >= 2-d."): matched whole.
        with pytest.raises(RuntimeError, match="Input must be >= 2-d."):
            loom.fliplr(make(random_array((3,), "int64"), device)[0])
        with pytest.raises(RuntimeError, match="Input must be >= 1-d."):
            loom.flipud(make(random_array((), "int64"), device)[0])
    with sub("narrow_copy"):
        check(device, lambda m, t: m.narrow_copy(t, 1, 1, 2), x, layouts=[layout])
        check(device, lambda m, t: t.narrow_copy(0, 2, 5), x, layouts=[layout])
    sub.finish()


def test_repeat_interleave(device):
    x = random_array((3, 4), "float32", seed=5)
    sub = SubChecks()
    for repeats in (0, 1, 2):
        for dim in (None, 0, 1, -1):
            with sub(f"int repeats={repeats} dim={dim}"):
                check(device, lambda m, t: m.repeat_interleave(t, repeats, dim), x, layouts=["transposed"])
                check(device, lambda m, t: t.repeat_interleave(repeats, dim=dim), x)
    for reps, dim in [([1, 0, 2], 0), ([2, 1, 1, 3], 1), ([2], 0), (3, 1), ([1, 0], 0), ([[1, 0, 2]], 0), ([-1, 0, 2], 0)]:
        with sub(f"tensor repeats={reps} dim={dim}"):
            check(device, lambda m, t, r: m.repeat_interleave(t, r, dim), x, np.array(reps, np.int64))
    with sub("int32 and float repeats"):
        check(device, lambda m, t, r: t.repeat_interleave(r, dim=0), x, np.array([1, 2, 0], np.int32))
        check(device, lambda m, t, r: t.repeat_interleave(r, dim=0), x, np.array([1.0, 2.0, 0.0], np.float32))
    with sub("repeats alone"):
        check(device, lambda m, r: m.repeat_interleave(r), np.array([1, 0, 3], np.int64))
        check(device, lambda m, r: r.repeat_interleave(), np.array([2, 1], np.int32))
        check(device, lambda m, r: m.repeat_interleave(r), np.array([[1, 2]], np.int64))
    with sub("output_size"):
        check(device, lambda m, r: m.repeat_interleave(r, output_size=4), np.array([1, 3], np.int64))
        check(device, lambda m, r: m.repeat_interleave(r, output_size=5), np.array([1, 3], np.int64))
        check(device, lambda m, t: m.repeat_interleave(t, 2, 0, output_size=5), x)
    with sub("negative"):
        check(device, lambda m, t: m.repeat_interleave(t, -1), x)
    with sub("0-d"):
        check(device, lambda m, t: m.repeat_interleave(t, 2), np.array(3.0, np.float32))
    sub.finish()


def test_meshgrid_cartesian_combinations(device):
    a, b, c = np.arange(3), np.arange(2) * 10, np.array([7, 8, 9, 10])
    sub = SubChecks()
    for indexing in ("ij", "xy"):
        with sub(f"meshgrid {indexing}"):
            check(device, _tuple_of(lambda m, x, y, z: m.meshgrid(x, y, z, indexing=indexing)), a, b, c)
            check(device, _tuple_of(lambda m, x, y: m.meshgrid([x, y], indexing=indexing)), a, b)
            check(device, _tuple_of(lambda m, x: m.meshgrid(x, indexing=indexing)), a)
            check(device, _tuple_of(lambda m, x, y: m.meshgrid(x, y, indexing=indexing)), np.array(5), b)
    with sub("meshgrid errors"):
        check(device, _tuple_of(lambda m, x, y: m.meshgrid(x, y, indexing="ab")), a, b)
        check(device, _tuple_of(lambda m, x, y: m.meshgrid(x, y)), a, b.astype(np.float32))
        check(device, _tuple_of(lambda m, x: m.meshgrid(x)), np.ones((2, 2)))
    with sub("cartesian_prod"):
        check(device, lambda m, x, y, z: m.cartesian_prod(x, y, z), a, b, c)
        check(device, lambda m, x: m.cartesian_prod(x), a)
        check(device, lambda m, x, y: m.cartesian_prod(x, y), a, np.ones((2, 2), np.int64))
    for r in (0, 1, 2, 3, 5, -1):
        for replace in (False, True):
            with sub(f"combinations r={r} {replace}"):
                check(device, lambda m, x: m.combinations(x, r, with_replacement=replace), c)
    with sub("combinations of a matrix"):
        check(device, lambda m, x: m.combinations(x), np.ones((2, 2)))
    with sub("combinations: few tuples of many picks (no recursion per pick)"):
        # (torch builds these from an r-way meshgrid: no reference at this r)
        many = loom.combinations(loom.tensor([3.0], device=device), 100_000, with_replacement=True)
        np.testing.assert_array_equal(many.numpy(), np.full((1, 100_000), 3.0, np.float32))
        assert loom.combinations(loom.arange(3.0, device=device), 100_000).shape == (0, 100_000)
    with sub("combinations: more tuples than fit"):
        with pytest.raises(RuntimeError, match="more than loom lists"):
            loom.combinations(loom.arange(1000, device=device), 5)
    sub.finish()


def test_block_diag_and_tri_indices(device):
    sub = SubChecks()
    with sub("block_diag"):
        check(device, lambda m, x, y, z: m.block_diag(x, y, z), random_array((2, 2), "float32"),
              np.array(3, np.int64), np.array([4, 5], np.int32))
        check(device, lambda m, x, y: m.block_diag(x, y), np.ones((0, 3)), np.ones((2, 0)))
        check(device, lambda m, x: m.block_diag(x), np.ones((2, 2, 2)))
        check(device, lambda m, x, y: m.block_diag(x, y), random_array((2, 3), "bool"), random_array((1, 2), "bool"))
    for name in ("tril_indices", "triu_indices"):
        for args in [(3, 3), (3, 4, 1), (4, 3, -1), (3, 3, -5), (0, 3), (3, 3, 5), (-1, 3)]:
            with sub(f"{name}{args}"):
                check(device, lambda m: getattr(m, name)(*args, device=device) if m is loom else
                      getattr(m, name)(*args))
        with sub(f"{name} dtypes"):
            check(device, lambda m: getattr(m, name)(3, 3, dtype=m.int32, device=device) if m is loom else
                  getattr(m, name)(3, 3, dtype=m.int32))
            check(device, lambda m: getattr(m, name)(3, 3, dtype=m.float32))
    sub.finish()


# ---- splitting and stacking ----

def test_tensor_split_and_directional_splits(device):
    sub = SubChecks()
    x = random_array((7, 6, 4), "float32")
    for arg in (1, 3, 7, 9, [1, 5, 3], [], [-2], (0, 10)):
        for dim in (0, 1, -1):
            with sub(f"tensor_split {arg} dim={dim}"):
                check(device, _tuple_of(lambda m, t: m.tensor_split(t, arg, dim)), x, layouts=["transposed"])
                check(device, _tuple_of(lambda m, t: t.tensor_split(arg, dim=dim)), x)
    with sub("tensor_split with a tensor"):
        check(device, _tuple_of(lambda m, t: m.tensor_split(t, m.tensor(3))), x)
        check(device, _tuple_of(lambda m, t: m.tensor_split(t, m.tensor([1, 4]), 1)), x)
    with sub("tensor_split errors"):
        check(device, _tuple_of(lambda m, t: m.tensor_split(t, 0)), x)
        check(device, _tuple_of(lambda m, t: m.tensor_split(t, 2)), np.array(1.0))
    for name in ("hsplit", "vsplit", "dsplit"):
        for shape in [(6,), (4, 6), (4, 6, 4), ()]:
            for arg in (2, 3, [1, 3]):
                with sub(f"{name} {shape} {arg}"):
                    check(device, _tuple_of(lambda m, t: getattr(m, name)(t, arg)), random_array(shape, "int64"))
    sub.finish()


def test_stacks_and_atleast(device):
    sub = SubChecks()
    shapes = [[(), (3,)], [(3,), (3,)], [(2, 3), (2, 3)], [(2, 3, 1), (2, 3, 2)], [(3,), (3, 2)]]
    for name in ("hstack", "vstack", "row_stack", "dstack", "column_stack"):
        for pair in shapes:
            with sub(f"{name} {pair}"):
                check(device, lambda m, x, y: getattr(m, name)([x, y]), random_array(pair[0], "float32"),
                      random_array(pair[1], "int64", seed=2))
    with sub("column_stack of numbers"):
        check(device, lambda m, x, y: m.column_stack((x, y)), np.array(1), np.array(2))
    for n in (1, 2, 3):
        for shape in [(), (3,), (2, 3), (2, 3, 4)]:
            with sub(f"atleast_{n}d {shape}"):
                f = f"atleast_{n}d"
                check(device, lambda m, x: getattr(m, f)(x), random_array(shape, "float32"))
                check(device, lambda m, x, y: getattr(m, f)(x, y), random_array(shape, "float32"),
                      random_array((), "float32"))
                check(device, lambda m, x: getattr(m, f)([x]), random_array(shape, "float32"))
    sub.finish()


# ---- scatters and index updates ----

@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_scatter(device, dtype):
    x = random_array((3, 5), dtype, seed=6)
    src = random_array((3, 4), dtype, seed=7)
    index = np.array([[0, 4, 2, 1], [3, 0, 1, 2], [4, 4, 0, 0]])
    sub = SubChecks()
    for dim in (0, 1, -1):
        idx = index[:2, :3] % 3 if dim == 0 else index
        idx = idx[:, :3] if dim == 0 else idx
        with sub(f"src dim={dim}"):
            check(device, lambda m, t, i, s: t.scatter(dim, i, s), x, idx[:, :3] if dim == 0 else idx[:, :4], src,
                  layouts=["contiguous", "contiguous", "transposed"])
        for reduce in (None, "add", "multiply"):
            with sub(f"value dim={dim} reduce={reduce}"):
                kw = {} if reduce is None else {"reduce": reduce}
                check(device, lambda m, t, i: m.scatter(t, dim, i, 3, **kw), x, idx)
                check(device, lambda m, t, i, s: t.scatter(dim, i, s, **kw), x, idx, src)
    with sub("in place"):
        check(device, lambda m, t, i, s: t.clone().scatter_(1, i, s), x, index, src)
        check(device, lambda m, t, i: t.clone().scatter_(1, i, 2.5, reduce="multiply"), x, index)
    with sub("float value into integers"):
        check(device, lambda m, t, i: t.scatter(1, i, 9.5), x, index)
    with sub("errors"):
        check(device, lambda m, t, i: t.scatter(1, i, 1.0, reduce="mean"), x, index)
        check(device, lambda m, t, i: t.scatter(1, i.int(), 1.0), x, index)
        check(device, lambda m, t, i, s: t.scatter(1, i, s.double()), x, index, src)
        check(device, lambda m, t, i: t.scatter(1, i[0], 1.0), x, index)
        check(device, lambda m, t, i, s: t.scatter(1, i, s[:, :2]), x, index, src)
        check(device, lambda m, t, i: t.scatter(0, i, 1.0), x, index)  # index 4 out of range for dim 0
        check(device, lambda m, t, i: t.scatter(1, i - 6, 1.0), x, index)
    sub.finish()


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce(device, dtype, reduce):
    x = random_array((3, 5), dtype, seed=8)
    src = random_array((3, 6), dtype, seed=9)
    index = np.array([[0, 0, 2, 4, 4, 4], [1, 1, 1, 0, 3, 3], [2, 2, 2, 2, 2, 2]])
    sub = SubChecks()
    for include_self in (True, False):
        with sub(f"dim=1 include_self={include_self}"):
            check(device, lambda m, t, i, s: t.scatter_reduce(1, i, s, reduce, include_self=include_self), x, index,
                  src, layouts=["transposed", "contiguous", "strided"])
            check(device, lambda m, t, i, s: m.scatter_reduce(t, 0, i[:, :5] % 3, s, reduce,
                                                              include_self=include_self), x, index, src)
        with sub(f"in place include_self={include_self}"):
            check(device, lambda m, t, i, s: t.clone().scatter_reduce_(1, i, s, reduce, include_self=include_self),
                  x, index, src)
    sub.finish()


def test_scatter_reduce_nan_and_errors(device):
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], np.float32)
    s = np.array([[np.nan, 2.0], [0.5, 9.0]], np.float32)
    i = np.array([[0, 1], [2, 2]])
    for reduce in ("amax", "amin", "prod", "sum", "mean"):
        check(device, lambda m, t, j, u: t.scatter_reduce(1, j, u, reduce), x, i, s)
        check(device, lambda m, t, j, u: t.scatter_reduce(1, j, u, reduce, include_self=False), x, i, s)
    check(device, lambda m, t, j, u: t.scatter_reduce(1, j, u, "max"), x, i, s)
    check(device, lambda m, t, j, u: t.scatter_reduce(1, j, u.double(), "sum"), x, i, s)
    check(device, lambda m, t, j, u: t.scatter_reduce(1, j + 5, u, "amax"), x, i, s)
    check(device, lambda m, t, j, u: t.bool().scatter_reduce(1, j, u.bool(), "amax"), x, i, s)


@pytest.mark.parametrize("dtype", ["int64", "float32", "float64"])
def test_index_add_copy_fill(device, dtype):
    x = random_array((4, 3), dtype, seed=10)
    src = random_array((3, 3), dtype, seed=11)
    sub = SubChecks()
    layouts = ["transposed", "contiguous", "strided"]
    for idx in ([0, 2, 3], [1, 1, 1], [3, -1, 0], [0, 4, 1]):
        index = np.array(idx)
        with sub(f"index_add {idx}"):
            check(device, lambda m, t, i, s: t.index_add(0, i, s), x, index, src, layouts=layouts)
            check(device, lambda m, t, i, s: m.index_add(t.t(), 1, i, s), x, index, src)
            check(device, lambda m, t, i, s: t.clone().index_add_(0, i.int(), s, alpha=2), x, index, src)
        with sub(f"index_copy {idx}"):
            check(device, lambda m, t, i, s: t.index_copy(0, i, s), x, index, src, layouts=layouts)
            check(device, lambda m, t, i, s: t.t().clone().index_copy_(1, i, s), x, index, src)
        with sub(f"index_fill {idx}"):
            check(device, lambda m, t, i: t.index_fill(0, i, 5), x, index, layouts=["strided", "contiguous"])
            check(device, lambda m, t, i: t.t().clone().index_fill_(1, i, -2.5), x, index)
            check(device, lambda m, t, i, v: m.index_fill(t.t(), 1, i, v), x, index, np.array(7, dtype))
    with sub("errors"):
        index = np.array([0, 1, 2])
        check(device, lambda m, t, i, s: t.index_add(0, i, s.double()), x, index, src)
        check(device, lambda m, t, i, s: t.index_add(0, i.float(), s), x, index, src)
        check(device, lambda m, t, i, s: t.index_add(0, i[None], s), x, index, src)
        check(device, lambda m, t, i, s: t.index_add(0, i, s[:, :2]), x, index, src)
        check(device, lambda m, t, i, s: t.index_copy(0, i, s[:, :2]), x, index, src)
        check(device, lambda m, t, i, s: t.index_copy(0, i, s[:2]), x, index, src)
        check(device, lambda m, t, i, s: t.index_copy(0, i.int(), s), x, index, src)
        check(device, lambda m, t, i: t.index_fill(0, i.int(), 1), x, index)
        check(device, lambda m, t, i, v: t.index_fill(0, i, v), x, index, np.array([1], dtype))
    sub.finish()


def test_take_put_index_put(device):
    x = random_array((3, 4), "float32", seed=12)
    sub = SubChecks()
    for idx in ([[0, -1], [5, 5]], [11, 0, 3], [12], [-13]):
        with sub(f"take {idx}"):
            check(device, lambda m, t, i: m.take(t, i), x, np.array(idx), layouts=["transposed", "contiguous"])
    with sub("take int32"):
        check(device, lambda m, t, i: t.take(i.int()), x, np.array([1]))
    for idx, acc in [([0, -1], False), ([0, 0], True), ([0, 20], False), ([3, 7], True)]:
        with sub(f"put {idx} accumulate={acc}"):
            check(device, lambda m, t, i, s: t.put(i, s, accumulate=acc), x, np.array(idx),
                  np.array([5.0, 6.0], np.float32), layouts=["transposed", "contiguous", "contiguous"])
            check(device, lambda m, t, i, s: t.clone().put_(i, s, acc), x, np.array(idx), np.array([5.0, 6.0], np.float32))
    with sub("put errors"):
        check(device, lambda m, t, i, s: t.put(i, s), x, np.array([0, 1]), np.array([5.0], np.float32))
        check(device, lambda m, t, i, s: t.put(i, s.double()), x, np.array([0, 1]), np.array([5.0, 6.0], np.float32))
    cases = [
        (lambda m, i, j: (i,), True), (lambda m, i, j: (i, j), False), (lambda m, i, j: [i], False),
        (lambda m, i, j: (slice(None), j), True), (lambda m, i, j: (i > 0,), False), (lambda m, i, j: (None, i), True),
    ]
    for k, (indices, acc) in enumerate(cases):
        with sub(f"index_put case {k}"):
            check(device, lambda m, t, i, j, v: t.index_put(indices(m, i, j), v, accumulate=acc), x,
                  np.array([0, 2, 0]), np.array([1, 3, 1]), np.array(1.5, np.float32))
            check(device, lambda m, t, i, j, v: t.clone().index_put_(indices(m, i, j), v, acc), x,
                  np.array([0, 2, 0]), np.array([1, 3, 1]), np.array(1.5, np.float32))
    with sub("index_put errors"):
        check(device, lambda m, t, i, v: t.index_put((i,), v.double()), x, np.array([0]), np.array(1.0, np.float32))
        check(device, lambda m, t, i, v: t.index_put((i,), v), x, np.array([0, 5]), np.array(1.0, np.float32))
    sub.finish()


# ---- sizes that depend on the data ----

@pytest.mark.parametrize("dtype", ["bool", "int32", "float32"])
def test_nonzero_argwhere_where(device, dtype):
    sub = SubChecks()
    for shape in [(), (5,), (3, 4), (2, 0), (2, 3, 2)]:
        x = random_array(shape, dtype, seed=13)
        if dtype == "float32" and x.size:
            x[x > 0.5] = 0.0
        with sub(f"{shape}"):
            check(device, lambda m, t: m.nonzero(t), x, layouts=["transposed"])
            check(device, _tuple_of(lambda m, t: t.nonzero(as_tuple=True)), x)
            check(device, lambda m, t: m.argwhere(t), x)
            check(device, _tuple_of(lambda m, t: m.where(t)), x)
    with sub("NaN is nonzero"):
        check(device, lambda m, t: m.nonzero(t), np.array([0.0, np.nan, 1.0]))
    sub.finish()


def test_masked_select(device):
    x = random_array((3, 4), "float32", seed=14)
    sub = SubChecks()
    for mask_shape in [(3, 4), (4,), (3, 1), (), (2, 3, 4)]:
        mask = random_array(mask_shape, "bool", seed=15)
        with sub(f"mask {mask_shape}"):
            check(device, lambda m, t, k: m.masked_select(t, k), x, mask, layouts=["transposed", "contiguous"])
            check(device, lambda m, t, k: t.masked_select(k), x, mask)
    with sub("errors"):
        check(device, lambda m, t, k: m.masked_select(t, k.long()), x, np.ones(4, bool))
        check(device, lambda m, t, k: m.masked_select(t, k), x, np.ones(3, bool))
    sub.finish()


def test_data_dependent_ops_sync_lazy_inputs():
    """nonzero and friends compute their pending input (a sync point) and return a lazy result."""
    x = loom.tensor([[0.0, 1.0], [2.0, 0.0]], device="lazy")
    before = loom.metrics()["traces"]
    y = x * 2
    idx = loom.nonzero(y)
    assert loom.metrics()["traces"] > before
    assert idx.is_lazy and idx.tolist() == [[0, 1], [1, 0]]
    assert loom.masked_select(y, y > 1).tolist() == [2.0, 4.0]
    assert loom.repeat_interleave(loom.tensor([1, 2], device="lazy") + 0).tolist() == [0, 1, 1]


# ---- indices that are tuples ----

def test_tuple_and_sequence_indices(device):
    x = random_array((3, 4, 5), "float32", seed=16)
    b, c = np.array([0, 2]), np.array([1, 3])
    sub = SubChecks()
    indices = [
        lambda m, b, c: ((0,),), lambda m, b, c: ((0, 2),), lambda m, b, c: ((0,), b, c, slice(None)),
        lambda m, b, c: ((0, 1), (1, 2)), lambda m, b, c: [[0, 1]], lambda m, b, c: [0, [1, 2]],
        lambda m, b, c: [0, slice(None)], lambda m, b, c: [None, 0], lambda m, b, c: [[0, 1], [1, 2]],
        lambda m, b, c: [b, c], lambda m, b, c: (Ellipsis, (0, 4)), lambda m, b, c: [0, 1],
        lambda m, b, c: ([True, False, True],), lambda m, b, c: ((1,), slice(1, 3), (0, 4)),
    ]
    for k, ix in enumerate(indices):
        with sub(f"case {k}"):
            check(device, lambda m, t, bb, cc: t[ix(m, bb, cc)], x, b, c)

            def assign(m, t, bb, cc):
                t = t.clone()
                t[ix(m, bb, cc)] = 7.0
                return t
            check(device, assign, x, b, c)
    sub.finish()


# ---- fused, unfused and the interpreter agree with eager mode ----

def _program(m, x, i, s):
    a = m.diagonal(x, 1).exp() + x.unfold(1, 2, 1).sum(-1)[:, :3]
    b = m.roll(x, 2, 1) * m.rot90(x.reshape(4, 3), 1) + m.diag_embed(x[:, :4], 1)[0, :3, :4]
    c = x.scatter(1, i, s) + x.scatter_reduce(1, i, s, "amax", include_self=False) * 0.5
    d = x.scatter_reduce(1, i, s, "prod") - x.index_add(0, i[:, 0], s[:, :1].expand(3, 4).contiguous())[:, :4]
    e = m.repeat_interleave(x, 2, 1)[:, ::3] + m.take(x, i).sum()
    f = m.movedim(m.stack(m.meshgrid(x[0], x[1], indexing="xy")), 0, -1).sum(-1)
    return a, b, c, d, e, f, m.block_diag(x, x[:1]), m.tril_indices(3, 4, device=x.device) * 1


def test_fused_equals_unfused_equals_eager():
    rng = np.random.default_rng(17)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    i = np.array([[0, 3], [1, 1], [2, 0]])
    s = rng.standard_normal((3, 2)).astype(np.float32)
    eager = [_np(t) for t in _program(loom, *(loom.tensor(a) for a in (x, i, s)))]
    ref = _program(torch, *(torch.from_numpy(a) for a in (x, i, s)))
    for got, want in zip(eager, ref):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
    try:
        for executor in ["fused", "unfused", "interpreter"]:
            loom._C._set_executor(executor)
            out = _program(loom, *(loom.tensor(a, device="lazy") for a in (x, i, s)))
            for got, want in zip(out, eager):
                np.testing.assert_allclose(_np(got), want, rtol=1e-5, atol=1e-6, err_msg=executor)
    finally:
        loom._C._set_executor("compiled")
