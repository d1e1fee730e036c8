"""Basic indexing (ints, slices, None, Ellipsis) and assignment, checked against numpy."""

import numpy as np
import pytest

import loom
from conftest import assert_equal_np, storage_base, to_numpy

E = Ellipsis

INDICES = [
    0,
    -1,
    2,
    slice(None),
    slice(1, 3),
    slice(None, None, 2),
    slice(1, None, 3),
    slice(-3, -1),
    slice(-100, 100),
    slice(5, 1),
    slice(3, 3),
    None,
    E,
    (),
    (1, 2),
    (-1, -2, -3),
    (0, slice(None), 1),
    (slice(None), 0),
    (slice(None, None, 2), slice(1, None, 2)),
    (E, 0),
    (E, None),
    (None, E),
    (0, E, 1),
    (E, slice(1, 3), 0),
    (None, 0, None, slice(None, None, 3)),
    (slice(None), None, slice(None), None),
    (None, None),
    (1, None, E, None, 2),
    (slice(2, None), E, slice(None, 1)),
    (E, -1, slice(None), slice(None)),
    (np.int64(1), np.int32(-1)),
    (slice(np.int64(1), np.int64(3)),),
]


@pytest.mark.parametrize("index", INDICES, ids=repr)
@pytest.mark.parametrize("shape", [(4, 5, 6), (3, 4, 5, 6)], ids=repr)
def test_getitem_matches_numpy(shape, index):
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    t = loom.tensor(a)
    r = t[index]
    assert_equal_np(r, a[index])
    assert type(r) is loom.Tensor
    # Basic indexing is always a view of the same storage.
    assert storage_base(r) == storage_base(t)


@pytest.mark.parametrize("index", [E, None, (), (None, E), (E, None, None)], ids=repr)
def test_getitem_zero_dim(index):
    a = np.array(3.5, dtype=np.float32)
    t = loom.tensor(3.5)
    assert_equal_np(t[index], a[index])


@pytest.mark.parametrize("index", [0, slice(0, 0), (slice(None), slice(1)), (E, slice(None, None, 2))], ids=repr)
def test_getitem_empty_dims(index):
    a = np.zeros((2, 0, 3), dtype=np.int64)
    t = loom.zeros(2, 0, 3, dtype=loom.int64)
    assert_equal_np(t[index], a[index])


def test_getitem_chained_views_and_strides():
    a = np.arange(120, dtype=np.float64).reshape(4, 5, 6)
    t = loom.tensor(a)
    r = t[1:, ::2][..., 1::2][0]
    ra = a[1:, ::2][..., 1::2][0]
    assert_equal_np(r, ra)
    assert r.stride() == tuple(s // 8 for s in ra.strides)
    assert r.storage_offset() == (ra.ctypes.data - a.ctypes.data) // 8


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int32, np.int64, np.float16, np.float64])
def test_getitem_dtypes(dtype):
    a = (np.arange(24) % 5).astype(dtype).reshape(2, 3, 4)
    t = loom.tensor(a)
    for index in ((1, slice(None, None, 2)), (E, -1), (None, 0, 1, 2)):
        assert_equal_np(t[index], a[index])


def test_getitem_int_gives_zero_dim_view():
    t = loom.tensor([[1, 2], [3, 4]])
    x = t[1, 0]
    assert x.dim() == 0 and x.item() == 3
    x[...] = 30
    assert t.tolist() == [[1, 2], [30, 4]]


def test_getitem_huge_slice_bounds():
    a = np.arange(5)
    t = loom.tensor(a)
    assert_equal_np(t[: 2**64], a[: 2**64])
    assert_equal_np(t[-(2**70):], a[-(2**70):])
    assert_equal_np(t[2**64:], a[2**64:])
    assert_equal_np(t[:-(2**64)], a[:-(2**64)])
    assert_equal_np(t[1 :: 2**70], a[1 :: 2**70])
    m = np.arange(10).reshape(5, 2)
    assert_equal_np(loom.tensor(m)[1 :: 2**70], m[1 :: 2**70])  # stride * step would overflow
    assert_equal_np(loom.tensor(m)[:, 1 :: 2**62], m[:, 1 :: 2**62])  # byte strides would
    assert repr(t[1 :: 2**70]) == "tensor([1])"
    t[: 2**64] = 7
    assert t.tolist() == [7] * 5
    with pytest.raises(ValueError, match="step must be greater than zero"):
        t[:: -(2**70)]


def test_getitem_slice_bounds_with_index_objects():
    a = np.arange(6)
    t = loom.tensor(a)
    assert_equal_np(t[np.int64(1) : np.int32(4)], a[1:4])
    assert_equal_np(t[loom.tensor(2) :], a[2:])  # as torch: integer tensors have __index__
    with pytest.raises(TypeError, match="slice indices must be integers"):
        t[1.5:]


# ---------------------------------------------------------------------------------------------
# __setitem__
# ---------------------------------------------------------------------------------------------

SETITEM_CASES = [
    (0, 7.0),
    (-1, -2.5),
    ((1, 2), 9),
    ((1, 2, 3), True),
    (slice(None), 0.0),
    (slice(1, 3), 4),
    ((E, 0), 1.5),
    ((slice(None, None, 2), 1), -1),
    ((None, 1), 3.0),
    (E, 2.0),
    (0, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),           # broadcast a row over dim 1
    ((slice(None), slice(None), 0), [[1], [2], [3], [4]]),
    (1, [[10, 20, 30, 40, 50, 60]]),                # broadcast a (1, 6) list over (5, 6)
    (slice(0, 2), np.arange(6.0)),
    ((E, slice(1, 4)), np.ones((4, 1, 3))),
    (slice(None, None, 3), np.arange(30.0).reshape(1, 5, 6)[0]),
]


@pytest.mark.parametrize("index,value", SETITEM_CASES, ids=repr)
def test_setitem_matches_numpy(index, value):
    a = np.arange(120, dtype=np.float32).reshape(4, 5, 6)
    t = loom.tensor(a)
    ptr = t.data_ptr()
    a[index] = value
    t[index] = value
    assert_equal_np(t, a)
    assert t.data_ptr() == ptr  # in place


@pytest.mark.parametrize("index,value_shape", [
    (slice(None), (6,)),
    (slice(None), (5, 1)),
    (0, (5, 6)),
    ((E, 2), (1,)),
    ((slice(1, 3), slice(None, None, 2)), (2, 3, 6)),
    (E, ()),
    (None, (4, 5, 6)),
], ids=repr)
def test_setitem_tensor_broadcast(index, value_shape):
    a = np.zeros((4, 5, 6), dtype=np.float64)
    t = loom.tensor(a)
    v = np.arange(np.prod(value_shape), dtype=np.float64).reshape(value_shape) + 1
    a[index] = v
    t[index] = loom.tensor(v)
    assert_equal_np(t, a)


def test_setitem_tensor_with_leading_ones():
    a = np.zeros((2, 3), dtype=np.float32)
    t = loom.tensor(a)
    a[0] = np.ones((1, 3), np.float32)
    t[0] = loom.ones(1, 3)
    assert_equal_np(t, a)


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int32, np.int64, np.float16, np.float64])
def test_setitem_converts_value_to_target_dtype(dtype):
    a = np.zeros((3, 4), dtype=dtype)
    t = loom.tensor(a)
    a[1] = 2.75 if dtype != np.bool_ else 1
    t[1] = 2.75 if dtype != np.bool_ else 1
    a[:, 2] = np.array([1, 0, 1], dtype=np.float32)
    t[:, 2] = loom.tensor([1.0, 0.0, 1.0])
    a[2, 3] = True
    t[2, 3] = True
    assert_equal_np(t, a)


def test_setitem_tensor_of_other_dtype():
    t = loom.zeros(2, 3, dtype=loom.int32)
    t[...] = loom.tensor([[1.9, -2.9, 3.5]])
    assert t.tolist() == [[1, -2, 3], [1, -2, 3]]
    b = loom.zeros(3, dtype=loom.bfloat16)
    b[:] = loom.tensor([1.0, 2.0, 3.0], dtype=loom.float64)
    assert b.tolist() == [1.0, 2.0, 3.0]


def test_setitem_zero_dim():
    t = loom.tensor(1.0)
    t[...] = 5.0
    assert t.item() == 5.0
    t[()] = loom.tensor(6.0)
    assert t.item() == 6.0


@pytest.mark.parametrize("dst,src", [
    (slice(1, None), slice(None, -1)),
    (slice(None, -1), slice(1, None)),
    (slice(2, None, 2), slice(None, -2, 2)),
    (slice(None, None, -1 + 2), slice(None)),
    (slice(3, 8), slice(1, 6)),
    (slice(1, 6), slice(3, 8)),
], ids=repr)
def test_setitem_overlapping_same_tensor_1d(dst, src):
    a = np.arange(10.0)
    t = loom.tensor(a)
    a[dst] = a[src]
    t[dst] = t[src]
    assert_equal_np(t, a)


@pytest.mark.parametrize("case", ["transpose", "shift_rows", "shift_cols", "reverse_permute", "strided"])
def test_setitem_overlapping_same_tensor_2d(case):
    a = np.arange(36.0).reshape(6, 6)
    t = loom.tensor(a)
    if case == "transpose":
        a[...] = a.T
        t[...] = t.t()
    elif case == "shift_rows":
        a[1:] = a[:-1]
        t[1:] = t[:-1]
    elif case == "shift_cols":
        a[:, 1:] = a[:, :-1]
        t[:, 1:] = t[:, :-1]
    elif case == "reverse_permute":
        a[:3, :3] = a[1:4, 1:4].T
        t[:3, :3] = t[1:4, 1:4].t()
    else:
        a[::2, 1:] = a[1::2, :-1]
        t[::2, 1:] = t[1::2, :-1]
    assert_equal_np(t, a)


def test_setitem_overlapping_alias_of_same_memory():
    a = np.arange(10.0)
    t = loom.from_numpy(a)
    alias = loom.from_numpy(a)
    expected = np.arange(10.0)
    expected[2::2] = expected.copy()[:-2:2]
    t[2::2] = alias[:-2:2]
    assert_equal_np(t, expected)


def test_setitem_non_overlapping_alias_of_same_memory():
    a = np.arange(10.0)
    t = loom.from_numpy(a)
    t[:5] = loom.from_numpy(a)[5:]
    assert a.tolist() == [5.0, 6.0, 7.0, 8.0, 9.0, 5.0, 6.0, 7.0, 8.0, 9.0]


def test_setitem_from_numpy_view_of_itself():
    t = loom.arange(6.0)
    t[1:] = t.numpy()[:-1]
    assert t.tolist() == [0.0, 0.0, 1.0, 2.0, 3.0, 4.0]


def test_setitem_bumps_visible_values_in_other_views():
    t = loom.zeros(3, 3)
    row = t[1]
    col = t[:, 1]
    t[1, 1] = 4.0
    assert row.tolist() == [0.0, 4.0, 0.0] and col.tolist() == [0.0, 4.0, 0.0]


# ---------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("index", [3, -4, (0, 5), (0, -6), (E, 7), (None, 3)], ids=repr)
def test_index_out_of_range(index):
    t = loom.zeros(3, 5)
    with pytest.raises(IndexError, match="out of bounds"):
        t[index]
    with pytest.raises(IndexError):
        t[index] = 1.0


@pytest.mark.parametrize("index", [(0, 0, 0), (E, 0, 0, 0), (slice(None),) * 3, (0, None, 0, 0)], ids=repr)
def test_too_many_indices(index):
    t = loom.zeros(3, 5)
    with pytest.raises(IndexError, match="too many indices"):
        t[index]


def test_index_zero_dim_with_int():
    with pytest.raises(IndexError):
        loom.tensor(1.0)[0]
    with pytest.raises(IndexError):
        loom.tensor(1.0)[:]


def test_index_zero_dim_with_int_message(torch):
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        torch.tensor(1.0)[0]
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        loom.tensor(1.0)[0]
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        loom.tensor(1.0)[0] = 2.0


@pytest.mark.parametrize("index", [1, -1, (0,), (0, 0), slice(None), slice(0, 1), (Ellipsis, 0), (None, 0)], ids=repr)
def test_index_zero_dim_messages_match_torch(torch, index):
    with pytest.raises(IndexError) as expected:
        torch.tensor(1.0)[index]
    with pytest.raises(IndexError) as actual:
        loom.tensor(1.0)[index]
    assert str(actual.value) == str(expected.value)


@pytest.mark.parametrize("step", [-1, -2, 0])
def test_non_positive_slice_step(step):
    t = loom.arange(5)
    with pytest.raises(ValueError, match="step must be greater than zero"):
        t[::step]
    with pytest.raises(ValueError):
        t[::step] = 0


def test_two_ellipses():
    with pytest.raises(IndexError, match="single ellipsis"):
        loom.zeros(2, 2)[..., 0, ...]


@pytest.mark.parametrize("index", [1.5, "a", object()], ids=repr)
def test_unsupported_index_types(index):
    with pytest.raises(IndexError):
        loom.zeros(3)[index]


# Advanced indexing: integer tensors, lists, bool masks and Python bools, alone or mixed with
# basic items, in both modes; results and assignments compared with numpy.
ADVANCED = [
    lambda m: (m([0, 2]),),
    lambda m: (m([[0, 1], [2, 0]]),),
    lambda m: (slice(None), m([3, 0])),
    lambda m: (m([0, 2]), m([1, 3])),
    lambda m: (m([0, 2]), slice(1, 3), m([1, 3])),  # separated: broadcast dims go first
    lambda m: (Ellipsis, m([1])),
    lambda m: (1, m([0, 3])),
    lambda m: (None, m([2, 1])),
    lambda m: (m([-1, -3]),),
]


def _np_index(build):
    return build(lambda v: np.array(v))


def _loom_index(build, device):
    return build(lambda v: loom.tensor(v, device=device))


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("case", range(len(ADVANCED)))
def test_advanced_getitem_matches_numpy(device, case):
    a = np.arange(60.0).reshape(3, 4, 5)
    t = loom.tensor(a, device=device)
    expected = a[_np_index(ADVANCED[case])]
    got = t[_loom_index(ADVANCED[case], device)]
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got.numpy(), expected)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("case", range(len(ADVANCED)))
def test_advanced_setitem_matches_numpy(device, case):
    a = np.arange(60.0).reshape(3, 4, 5)
    t = loom.tensor(a, device=device)
    a[_np_index(ADVANCED[case])] = -1.0
    t[_loom_index(ADVANCED[case], device)] = -1.0
    np.testing.assert_array_equal(t.numpy(), a)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_bool_mask_get_and_set(device):
    a = np.arange(12.0).reshape(3, 4)
    t = loom.tensor(a, device=device)
    mask = a % 3 == 0
    np.testing.assert_array_equal(t[loom.tensor(mask, device=device)].numpy(), a[mask])
    row_mask = np.array([True, False, True])
    np.testing.assert_array_equal(t[loom.tensor(row_mask, device=device)].numpy(), a[row_mask])
    np.testing.assert_array_equal(t[[True, False, True]].numpy(), a[[True, False, True]])
    t[loom.tensor(mask, device=device)] = 0.0
    a[mask] = 0.0
    np.testing.assert_array_equal(t.numpy(), a)
    # Python bools add a dim: True keeps everything, False nothing.
    assert t[True].shape == (1, 3, 4)
    assert t[False].shape == (0, 3, 4)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_advanced_setitem_with_tensor_values(device):
    a = np.zeros((4, 3))
    t = loom.tensor(a, device=device)
    t[loom.tensor([0, 2], device=device)] = loom.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=device)
    a[[0, 2]] = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    np.testing.assert_array_equal(t.numpy(), a)
    t[:, loom.tensor([1], device=device)] = loom.tensor([7.0], device=device)
    a[:, [1]] = 7.0
    np.testing.assert_array_equal(t.numpy(), a)


def test_index_out_of_range_in_tensor_index():
    with pytest.raises(IndexError, match="out of bounds"):
        loom.zeros(3)[loom.tensor([0, 3])]


def test_setitem_bad_broadcast():
    t = loom.zeros(3, 4)
    before = t.tolist()
    with pytest.raises(RuntimeError):
        t[0] = loom.ones(3)
    with pytest.raises(RuntimeError):
        t[...] = [1.0, 2.0]
    with pytest.raises(ValueError):
        t[...] = [[1.0, 2.0], [3.0]]
    assert t.tolist() == before  # nothing was written


def test_delitem_not_supported():
    t = loom.zeros(3)
    with pytest.raises(TypeError):
        del t[0]


# ---- numpy arrays as indices ----

NUMPY_INDICES = [
    ("int64", lambda: np.array([0, 2, 5])),
    ("int32", lambda: np.array([4, 1], np.int32)),
    ("bool", lambda: np.array([1, 0, 1, 0, 1, 0], bool)),
    ("2d", lambda: np.array([[0, 1], [2, 3]])),
    ("tuple", lambda: (np.array([0, 1]), np.array([1, 0]))),
    ("column", lambda: (slice(None), np.array([1]))),
    ("scalar", lambda: np.int64(3)),
    ("0d", lambda: np.array(2)),
    ("list_of_arrays", lambda: [np.array([0, 1]), np.array([1, 1])]),
    ("range", lambda: range(1, 4)),
    ("range_pair", lambda: (range(2), np.array([1, 0]))),
]


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("case", NUMPY_INDICES, ids=[c[0] for c in NUMPY_INDICES])
def test_numpy_array_index(device, case):
    """A numpy array indexes as the tensor it holds (cleanrl's PPO: b_obs[mb_inds] with mb_inds a
    slice of a shuffled np.arange); numpy scalars stay integers; a range is a sequence of indices
    (mnist_forward_forward: x_[range(x.shape[0]), y] = x.max())."""
    base = np.arange(12.0).reshape(6, 2)
    index = case[1]()
    np_index = tuple(index) if isinstance(index, list) else index
    np_index = tuple(list(i) if isinstance(i, range) else i for i in np_index) if isinstance(np_index, tuple) else \
        (list(np_index) if isinstance(np_index, range) else np_index)
    got = loom.tensor(base, device=device)[index]
    np.testing.assert_array_equal(to_numpy(got), base[np_index])
    t = loom.tensor(base, device=device)
    t[index] = -1.0
    expected = base.copy()
    expected[np_index] = -1.0
    np.testing.assert_array_equal(to_numpy(t), expected)
