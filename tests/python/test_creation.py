"""Creation ops (loom.tensor, zeros, ones, full, arange, linspace, eye, random, *_like), the default
dtype, loom.Size and loom.dtype objects, checked against numpy and PyTorch."""

import math
import pickle

import numpy as np
import pytest

import loom
from conftest import ALL_DTYPES, DTYPE_NAMES, NUMPY_DTYPES, assert_equal_np, assert_matches_torch, to_numpy, torch_dtype

NUMPY_LOOM = list(NUMPY_DTYPES.items())


# ---------------------------------------------------------------------------------------------
# loom.tensor
# ---------------------------------------------------------------------------------------------

NESTED_DATA = [
    3,
    -7,
    2.5,
    True,
    False,
    [],
    [[]],
    [[], []],
    [1, 2, 3],
    (1, 2, 3),
    [1.0, 2, 3],
    [True, False],
    [True, 2],
    [True, 2.5],
    [1, 2.5, True],
    [[1, 2], [3, 4]],
    ((1, 2), [3, 4]),
    [[[1.5], [2]], [[3], [4]]],
    [2**62 + 1, -(2**62)],
    [1e30, -1e-30, 0.1],
    [float("inf"), float("-inf"), -0.0],
]


@pytest.mark.parametrize("data", NESTED_DATA, ids=repr)
def test_tensor_from_python_data_matches_torch(torch, data):
    t = loom.tensor(data)
    ref = torch.tensor(data)
    assert_matches_torch(t, ref)
    assert t.tolist() == ref.tolist()


def test_tensor_nan_from_python(torch):
    t = loom.tensor([float("nan"), 1.0])
    assert t.dtype is loom.float32
    assert math.isnan(t.tolist()[0]) and t.tolist()[1] == 1.0


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DTYPE_NAMES.get)
@pytest.mark.parametrize("data", [[1, 0, 3], [[0.0, 1.5], [-2.25, 7.0]], [True, False], 5, 0.5],
                         ids=repr)
def test_tensor_with_dtype_matches_torch(torch, data, dtype):
    if dtype is loom.uint8 and "-2.25" in repr(data):
        data = [[0.0, 1.5], [2.25, 7.0]]  # negative float -> uint8 is undefined behaviour in C++ and torch
    t = loom.tensor(data, dtype=dtype)
    assert t.dtype is dtype
    assert_matches_torch(t, torch.tensor(data, dtype=torch_dtype(dtype)))


def test_tensor_in_range_ints_to_narrow_dtypes(torch):
    for dtype in (loom.uint8, loom.int32):
        data = [0, 1, 127, 255] if dtype is loom.uint8 else [-(2**31), 2**31 - 1, 0]
        assert_matches_torch(loom.tensor(data, dtype=dtype), torch.tensor(data, dtype=torch_dtype(dtype)))


# torch 1.13 wraps negative ints into uint8 as long as their magnitude fits (-1 is 255, -256
# overflows), and checks floats going to integer types against the range exactly.
@pytest.mark.parametrize("data,dtype", [([-256], loom.uint8), ([256], loom.uint8), ([2**31], loom.int32),
                                        ([-(2**31) - 1], loom.int32), ([-0.5], loom.uint8), ([255.5], loom.uint8),
                                        ([1e20], loom.int64), ([float("nan")], loom.int32), ([float("inf")], loom.uint8),
                                        ([2**64], loom.int64)], ids=repr)
def test_tensor_out_of_range_int_raises_like_torch(torch, data, dtype):
    with pytest.raises(RuntimeError, match="overflow|Overflow"):
        torch.tensor(data, dtype=torch_dtype(dtype))
    with pytest.raises(RuntimeError, match="overflow"):
        loom.tensor(data, dtype=dtype)


@pytest.mark.parametrize("data,dtype", [([-1], loom.uint8), ([-255], loom.uint8), ([1.9], loom.uint8), ([-1.5], loom.int32),
                                        ([1e40], loom.float32), ([65520.0], loom.float16), ([2**31], loom.float16),
                                        ([2**64], loom.float32), ([-(2**70)], loom.bfloat16), ([2**64, 0.0], loom.bool),
                                        ([2**62 + 2**38 + 1], loom.float32)], ids=repr)
def test_tensor_in_range_or_floating_converts_like_torch(torch, data, dtype):
    # No overflow check for floating and bool targets: huge values become inf or True, and ints go
    # through a double first (2**62 + 2**38 + 1 rounds twice, as in torch).
    assert_matches_torch(loom.tensor(data, dtype=dtype), torch.tensor(data, dtype=torch_dtype(dtype)))


def test_numpy_scalars_are_numbers_and_arrays_are_arrays_like_torch(torch):
    # A numpy scalar is stored as a number (integer targets check the range); a 0-d array is
    # copied as an array (values wrap as in a cast).
    for v in (np.int64(300), np.float64(-1.0)):
        with pytest.raises(RuntimeError, match="overflow"):
            torch.tensor(v, dtype=torch.uint8)
        with pytest.raises(RuntimeError, match="overflow"):
            loom.tensor(v, dtype=loom.uint8)
    assert_matches_torch(loom.tensor(np.array(300), dtype=loom.uint8), torch.tensor(np.array(300), dtype=torch.uint8))
    assert_matches_torch(loom.as_tensor(np.float16(1.5)), torch.as_tensor(np.float16(1.5)))


OVERFLOW_PROBES = [-1, -255, -256, 255, 256, 2**31 - 1, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 2**63, 2**64,
                   1.5, -1.5, -0.5, 255.9, 256.0, 300.5, 1e10, 1e20, 1e40, -1e40, float("inf"), float("-inf"),
                   float("nan"), 65504.0, 65519.0, 65520.0, 3.3895313892515355e38, 3.4e38, 3.5e38, True, False]


def _outcome(make):
    try:
        return str(make().tolist())
    except RuntimeError:
        return "RuntimeError"


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DTYPE_NAMES.get)
def test_overflow_checks_match_torch(torch, dtype):
    # tensor() checks only integer targets; full and t[i] = value (PyTorch's fill_) check every
    # dtype but bool. Either way, what raises and what converts must be torch's.
    tdtype = torch_dtype(dtype)

    def assigned(m, d, v):
        t = m.zeros(2, dtype=d)
        t[0] = v
        return t

    for v in OVERFLOW_PROBES:
        cases = [("tensor", lambda m, d: m.tensor([v], dtype=d)), ("full", lambda m, d: m.full((2,), v, dtype=d)),
                 ("setitem", lambda m, d: assigned(m, d, v))]
        for name, make in cases:
            assert _outcome(lambda: make(loom, dtype)) == _outcome(lambda: make(torch, tdtype)), (name, v)


def test_tensor_dtype_inference_order():
    # bool < int64 < default float, as torch.tensor infers.
    assert loom.tensor([True, False]).dtype is loom.bool
    assert loom.tensor([True, 1]).dtype is loom.int64
    assert loom.tensor([1, 2.0]).dtype is loom.float32
    assert loom.tensor([True, 1, 2.0]).dtype is loom.float32
    assert loom.tensor([[True], [1]]).dtype is loom.int64
    assert loom.tensor(1).dtype is loom.int64
    assert loom.tensor(1.0).dtype is loom.float32
    assert loom.tensor(True).dtype is loom.bool
    assert loom.tensor([]).dtype is loom.float32


def test_tensor_scalars_are_zero_dim():
    for v in (3, 2.5, True):
        t = loom.tensor(v)
        assert t.dim() == 0 and t.shape == () and t.numel() == 1
        assert t.item() == v and type(t.item()) is type(v)


def test_tensor_of_zero_dim_int_and_bool_tensors(torch):
    t = loom.tensor([loom.tensor(2), 3, loom.tensor(True)])
    assert_matches_torch(t, torch.tensor([torch.tensor(2), 3, torch.tensor(True)]))
    t = loom.tensor([loom.tensor(1.5), 2], dtype=loom.float64)
    assert_matches_torch(t, torch.tensor([torch.tensor(1.5), 2], dtype=torch.float64))


def test_tensor_of_zero_dim_float_tensors(torch):
    data = [loom.tensor(1.5), loom.tensor(2), 3]
    assert_matches_torch(loom.tensor(data), torch.tensor([torch.tensor(1.5), torch.tensor(2), 3]))


@pytest.mark.parametrize("loom_dt,np_dt", NUMPY_LOOM, ids=[DTYPE_NAMES[d] for d, _ in NUMPY_LOOM])
def test_tensor_from_numpy_keeps_dtype_and_copies(loom_dt, np_dt):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((3, 4)) * 10).astype(np_dt)
    t = loom.tensor(a)
    assert t.dtype is loom_dt
    assert_equal_np(t, a)
    assert t.data_ptr() != a.ctypes.data  # loom.tensor always copies
    before = a.copy()
    a[...] = np.logical_not(a) if np_dt is np.bool_ else a + 1
    assert_equal_np(t, before)


@pytest.mark.parametrize("loom_dt,np_dt", NUMPY_LOOM, ids=[DTYPE_NAMES[d] for d, _ in NUMPY_LOOM])
@pytest.mark.parametrize("target", ALL_DTYPES, ids=DTYPE_NAMES.get)
def test_tensor_from_numpy_with_dtype_matches_torch(torch, loom_dt, np_dt, target):
    a = np.array([[0, 1, 2], [3, 4, 5]]).astype(np_dt)
    t = loom.tensor(a, dtype=target)
    assert t.dtype is target
    assert_matches_torch(t, torch.tensor(a, dtype=torch_dtype(target)))


def test_tensor_from_numpy_views_and_zero_dim():
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    for view in (a[:, 1], a[..., ::2], a.transpose(2, 0, 1), a[1:, :, 1:3], np.float64(2.5) * np.ones(())):
        assert_equal_np(loom.tensor(view), view)
    assert_equal_np(loom.tensor(np.zeros((0, 3), np.int32)), np.zeros((0, 3), np.int32))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tensor_from_list_of_numpy_bools(torch):
    assert_matches_torch(loom.tensor([np.bool_(True), np.bool_(False)]), torch.tensor([np.bool_(True), np.bool_(False)]))
    for data in ([np.bool_(True), 1], [True, np.bool_(False)], [np.bool_(True), np.uint8(2)]):
        assert_matches_torch(loom.tensor(data), torch.tensor(data))


@pytest.mark.parametrize("data", [[np.float64(1.5)], [np.float16(1.5)], [np.uint8(3)], [np.float64(1.0), 2]], ids=repr)
def test_tensor_from_list_of_numpy_scalars_dtype(torch, data):
    assert_matches_torch(loom.tensor(data), torch.tensor(data))


# torch.tensor promotes the dtypes its leaves ask for (promote_types, no "weak" Python numbers).
@pytest.mark.parametrize("data", [[np.float16(1.0), 2.5], [np.uint8(3), 300], [np.uint8(3), np.int32(-1)],
                                  [np.uint8(3), 1.5], [np.int32(3), np.float16(1)], [np.float32(1), np.float64(1)],
                                  [np.float16(1), np.float32(1)], [np.uint8(1), True], [[np.uint8(1)], [2]],
                                  [2, np.float64(1.0)], [np.int64(-4), np.int32(2)]], ids=repr)
def test_tensor_promotes_numpy_scalar_dtypes_like_torch(torch, data):
    assert_matches_torch(loom.tensor(data), torch.tensor(data))


def test_tensor_promotes_zero_dim_tensor_dtypes_like_torch(torch):
    for make in (lambda m: [m.tensor(1.5, dtype=m.float64), 2.5], lambda m: [m.tensor(1, dtype=m.uint8)],
                 lambda m: [m.tensor(1, dtype=m.uint8), 300], lambda m: [m.tensor(1.0, dtype=m.float16), 2.5],
                 lambda m: [m.tensor(1, dtype=m.int32), m.tensor(True)]):
        assert_matches_torch(loom.tensor(make(loom)), torch.tensor(make(torch)))


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch warns that this path is slow
def test_tensor_from_list_of_numpy_arrays(torch):
    data = [np.array([1, 2]), np.array([3, 4])]
    assert_matches_torch(loom.tensor(data), torch.tensor(data))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch reads np.bool_ elements through __index__
@pytest.mark.parametrize("make", [
    lambda: [np.array([1, 2], np.uint8), np.array([3, 4])],
    lambda: [np.array([1.0, 2.0], np.float32), [3, 4]],
    lambda: [[3, 4], np.array([1, 2], np.uint8)],
    lambda: [np.array([True, False]), np.array([2, 3], np.uint8)],
    lambda: [np.array([1, 2]), [np.float16(3), 4]],
    lambda: [np.arange(6.0).reshape(2, 3).T[::2]],
    lambda: [np.array([[1, 2]]).T],
    lambda: [np.array([]), np.array([])],
    lambda: [np.zeros((2, 0, 3))],
    lambda: [np.array([], np.int64), []],
    lambda: ([np.arange(4).reshape(2, 2)] * 3, [np.arange(4).reshape(2, 2)] * 3),
], ids=["uint8_and_int64", "float32_and_list", "list_and_uint8", "bool_and_uint8", "int64_and_float16_list",
        "strided", "column", "empty", "size0_dim_stops_the_walk", "empty_int64_and_empty_list", "nested_tuples"])
def test_tensor_from_nested_numpy_arrays_like_torch(torch, make):
    assert_matches_torch(loom.tensor(make()), torch.tensor(make()))
    assert_matches_torch(loom.tensor(make(), dtype=loom.float64), torch.tensor(make(), dtype=torch.float64))


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_tensor_from_nested_numpy_arrays_errors(torch):
    with pytest.raises(ValueError, match="expected sequence of length 2 at dim 1"):
        loom.tensor([np.array([1, 2]), np.array([3])])
    with pytest.raises(ValueError, match="expected a number at dim 1"):
        loom.tensor([3, np.array([1, 2])])
    with pytest.raises(ValueError, match="expected sequence of length 2 at dim 1"):
        loom.tensor([np.array([1, 2]), 3])
    # Values are stored as numbers of nested data are: integer targets check their range.
    with pytest.raises(RuntimeError, match="overflow"):
        torch.tensor([np.array([300, 2])], dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="overflow"):
        loom.tensor([np.array([300, 2])], dtype=loom.uint8)


def test_tensor_from_list_of_tensors_raises_like_torch(torch):
    # torch.tensor reads tensors in nested data as numbers, so only one-element ones fit; stacking
    # is torch.stack's job.
    for make in (lambda m: [m.tensor([1, 2]), m.tensor([3, 4])], lambda m: [m.tensor([1.0, 2.0]), m.tensor([3.0, 4.0])]):
        with pytest.raises((TypeError, ValueError)):
            torch.tensor(make(torch))
        with pytest.raises(ValueError, match="only 0-d tensors"):
            loom.tensor(make(loom))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.tensor(np.bool_) warns in torch itself
def test_tensor_from_numpy_scalars(torch):
    for v in (np.float32(1.5), np.float64(-2.25), np.int64(7), np.int32(-3), np.uint8(200), np.bool_(True)):
        t = loom.tensor(v)
        assert_matches_torch(t, torch.tensor(v))


def test_tensor_from_numpy_negative_strides_raises_like_torch(torch):
    a = np.arange(4.0)[::-1]
    with pytest.raises(ValueError, match="negative"):
        torch.tensor(a)
    with pytest.raises(ValueError, match="negative"):
        loom.tensor(a)


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor:UserWarning")
@pytest.mark.parametrize("make", [lambda t: t.arange(6, dtype=t.float64).reshape(2, 3).t(), lambda t: t.tensor(1.5)],
                         ids=["2d", "0d"])
def test_tensor_from_torch_tensor(torch, make):
    ref = make(torch)
    # torch.tensor(t) is t.to(copy=True): values, dtype and memory format of t.
    assert_matches_torch(loom.tensor(ref), torch.tensor(ref))
    assert loom.as_tensor(ref).tolist() == ref.tolist()


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor:UserWarning")
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DTYPE_NAMES.get)
def test_tensor_and_as_tensor_from_torch_tensors_of_every_dtype(torch, dtype):
    # DLPack where torch exports it (bfloat16 has no numpy dtype), numpy's __array__ where it
    # does not (torch 1.13 has no bool in DLPack).
    ref = torch.arange(6).reshape(2, 3).to(torch_dtype(dtype))
    copy = loom.tensor(ref)
    assert_matches_torch(copy, torch.tensor(ref))
    ref[0, 0] = 1
    assert copy.tolist()[0][0] == 0  # tensor() copies
    shared = loom.as_tensor(ref)
    assert_matches_torch(shared, ref)
    assert shared.data_ptr() == ref.data_ptr()  # as_tensor shares
    assert_matches_torch(loom.as_tensor(ref, dtype=loom.float64), torch.as_tensor(ref, dtype=torch.float64))
    assert_matches_torch(loom.tensor(ref.t(), dtype=loom.int32), torch.tensor(ref.t(), dtype=torch.int32))


def test_tensor_from_torch_tensor_errors(torch):
    with pytest.raises(RuntimeError, match="require gradient"):
        loom.tensor(torch.ones(2, requires_grad=True))
    with pytest.raises(TypeError, match="unsupported DLPack dtype"):
        loom.tensor(torch.ones(2, dtype=torch.complex64))


def test_torch_tensors_in_nested_data_are_numbers_like_torch(torch):
    for make in (lambda m: [m.tensor(1.5), 2], lambda m: [m.tensor(1.5, dtype=m.float64)],
                 lambda m: [m.tensor(3, dtype=m.uint8), m.tensor(True)], lambda m: [[m.tensor(1)], [m.tensor(2.5)]]):
        assert_matches_torch(loom.tensor(make(torch)), torch.tensor(make(torch)))
    with pytest.raises(ValueError, match="only 0-d tensors"):
        loom.tensor([torch.tensor([1.0, 2.0])])


def test_tensor_copies_loom_tensor():
    src = loom.tensor([1.0, 2.0])
    t = loom.tensor(src)
    assert t.data_ptr() != src.data_ptr()
    src[0] = 5.0
    assert t.tolist() == [1.0, 2.0]
    assert loom.tensor(src, dtype=loom.int64).tolist() == [5, 2]


def test_tensor_unsupported_numpy_dtype():
    with pytest.raises(TypeError):
        loom.tensor(np.zeros(3, dtype=np.uint16))


# ---------------------------------------------------------------------------------------------
# zeros / ones / empty / full
# ---------------------------------------------------------------------------------------------

SIZE_FORMS = [
    ((2, 3), {}),
    (((2, 3),), {}),
    (([2, 3],), {}),
    ((), {"size": (2, 3)}),
    ((loom.Size([2, 3]),), {}),
    ((np.int64(2), np.int32(3)), {}),
]


@pytest.mark.parametrize("fn,fill", [(loom.zeros, 0), (loom.ones, 1), (loom.empty, None)])
@pytest.mark.parametrize("args,kwargs", SIZE_FORMS)
def test_sized_creation_forms(fn, fill, args, kwargs):
    t = fn(*args, **kwargs)
    assert t.shape == (2, 3) and t.dtype is loom.float32 and t.is_contiguous() and t.stride() == (3, 1)
    if fill is not None:
        assert_equal_np(t, np.full((2, 3), fill, np.float32))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DTYPE_NAMES.get)
def test_zeros_ones_dtypes(torch, dtype):
    assert_matches_torch(loom.zeros(2, 3, dtype=dtype), torch.zeros(2, 3, dtype=torch_dtype(dtype)))
    assert_matches_torch(loom.ones(4, dtype=dtype), torch.ones(4, dtype=torch_dtype(dtype)))
    e = loom.empty(3, 1, dtype=dtype)
    assert e.shape == (3, 1) and e.dtype is dtype


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (1, 1, 1), (2, 3, 4)], ids=repr)
def test_zeros_shapes(torch, shape):
    assert_matches_torch(loom.zeros(shape), torch.zeros(shape))
    assert_matches_torch(loom.ones(list(shape)), torch.ones(list(shape)))
    if shape:
        assert_matches_torch(loom.ones(*shape), torch.ones(*shape))


def test_sized_creation_without_size_raises():
    for fn in (loom.zeros, loom.ones, loom.empty, loom.rand, loom.randn):
        with pytest.raises(TypeError):
            fn()
    with pytest.raises(TypeError):
        loom.zeros(2, 3.0)


def test_dtype_argument_forms():
    for spec in (loom.float64, "float64", "double", np.float64, np.dtype("float64"), float):
        expected = loom.float32 if spec is float else loom.float64
        assert loom.zeros(2, dtype=spec).dtype is expected
    assert loom.zeros(2, dtype=int).dtype is loom.int64
    assert loom.zeros(2, dtype=bool).dtype is loom.bool
    assert loom.zeros(2, dtype=np.dtype("bool")).dtype is loom.bool
    for alias, dt in (("float", loom.float32), ("half", loom.float16), ("long", loom.int64), ("int", loom.int32),
                      ("byte", loom.uint8), ("bfloat16", loom.bfloat16), ("uint8", loom.uint8)):
        assert loom.ones(1, dtype=alias).dtype is dt
    for np_dt, dt in ((np.float16, loom.float16), (np.float32, loom.float32), (np.int32, loom.int32),
                      (np.int64, loom.int64), (np.uint8, loom.uint8)):
        assert loom.ones(1, dtype=np_dt).dtype is dt
        assert loom.ones(1, dtype=np.dtype(np_dt)).dtype is dt


def test_dtype_numpy_bool_scalar_type():
    assert loom.zeros(2, dtype=np.bool_).dtype is loom.bool


@pytest.mark.parametrize("np_dtype,expected", [(np.bool_, loom.bool), (np.dtype("bool"), loom.bool), (np.longlong, loom.int64),
                                               (np.intc, loom.int32), (np.half, loom.float16), (np.double, loom.float64),
                                               (np.ubyte, loom.uint8), (np.dtype(">f4"), loom.float32)], ids=repr)
def test_dtype_numpy_spellings(np_dtype, expected):
    assert loom.zeros(2, dtype=np_dtype).dtype is expected


@pytest.mark.parametrize("np_dtype", [np.uint16, np.dtype("complex64"), np.object_], ids=repr)
def test_dtype_numpy_without_loom_equivalent(np_dtype):
    with pytest.raises(TypeError, match="has no loom equivalent"):
        loom.zeros(2, dtype=np_dtype)


@pytest.mark.parametrize("value,dtype", [(1.5, None), (7, None), (True, None), (False, None), (-3, None),
                                         (2.75, loom.int32), (3, loom.float64), (1, loom.bool), (0.5, loom.float16),
                                         (2**62 + 3, None), (255, loom.uint8), (1.1, loom.bfloat16)], ids=repr)
def test_full_matches_torch(torch, value, dtype):
    kwargs = {} if dtype is None else {"dtype": dtype}
    tkwargs = {} if dtype is None else {"dtype": torch_dtype(dtype)}
    assert_matches_torch(loom.full((2, 3), value, **kwargs), torch.full((2, 3), value, **tkwargs))


def test_full_forms():
    assert loom.full([2], 1.0).shape == (2,)
    assert loom.full(size=(1, 2), fill_value=3).tolist() == [[3, 3]]
    assert loom.full((), 4.0).dim() == 0
    assert loom.full((2,), loom.tensor(3)).tolist() == [3, 3]


def test_full_with_float_tensor_fill_value(torch):
    assert torch.full((2,), torch.tensor(2.5)).tolist() == [2.5, 2.5]
    assert loom.full((2,), loom.tensor(2.5)).tolist() == [2.5, 2.5]


def test_arange_with_float_tensor_bound(torch):
    assert_matches_torch(loom.arange(loom.tensor(2.5)), torch.arange(torch.tensor(2.5)))


def test_full_out_of_range_raises_like_torch(torch):
    with pytest.raises(RuntimeError, match="overflow"):
        torch.full((2,), 300, dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="overflow"):
        loom.full((2,), 300, dtype=loom.uint8)
    with pytest.raises(RuntimeError, match="value cannot be converted to type float16 without overflow"):
        loom.full_like(loom.zeros(2, dtype=loom.float16), 1e5)
    assert loom.full((2,), -1, dtype=loom.uint8).tolist() == torch.full((2,), -1, dtype=torch.uint8).tolist() == [255] * 2


# ---------------------------------------------------------------------------------------------
# arange / linspace / eye
# ---------------------------------------------------------------------------------------------

ARANGE_ARGS = [
    (5,),
    (0,),
    (2, 9),
    (2, 9, 3),
    (10, 0, -1),
    (10, 0, -3),
    (-5, 5, 2),
    (5.0,),
    (0, 1, 0.1),
    (1, 2.5, 0.5),
    (0.5, 3),
    (1.0, -1.0, -0.25),
    (0, -3, -0.7),
    (3, 3),
    (3, 3, -1),
]


@pytest.mark.parametrize("args", ARANGE_ARGS, ids=repr)
def test_arange_matches_torch(torch, args):
    t = loom.arange(*args)
    ref = torch.arange(*args)
    assert t.shape == ref.shape and DTYPE_NAMES[t.dtype] == str(ref.dtype)[6:]
    if t.dtype.is_floating_point:
        np.testing.assert_allclose(to_numpy(t), ref.numpy(), rtol=1e-6, atol=1e-7)
    else:
        assert t.tolist() == ref.tolist()


@pytest.mark.parametrize("dtype", [loom.int32, loom.float64, loom.float16, loom.uint8, loom.bfloat16],
                         ids=DTYPE_NAMES.get)
def test_arange_with_dtype(torch, dtype):
    assert_matches_torch(loom.arange(0, 12, 2, dtype=dtype), torch.arange(0, 12, 2, dtype=torch_dtype(dtype)))
    assert loom.arange(end=4, dtype=dtype).tolist() == [0, 1, 2, 3]


def test_arange_keyword_forms():
    assert loom.arange(start=1, end=4).tolist() == [1, 2, 3]
    assert loom.arange(1, 10, step=4).tolist() == [1, 5, 9]
    assert loom.arange(np.int64(3)).dtype is loom.int64


def test_arange_float64_values_exact(torch):
    t = loom.arange(0, 1, 0.1, dtype=loom.float64)
    assert t.tolist() == [i * 0.1 for i in range(10)]


def test_arange_large_int64_exact(torch):
    start = 2**53 + 1
    assert loom.arange(start, start + 3).tolist() == torch.arange(start, start + 3).tolist() == \
        [start, start + 1, start + 2]


def test_arange_errors():
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        loom.arange(0, 5, 0)
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        loom.arange(5, 0)
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        loom.arange(0, 5, -1)
    with pytest.raises(TypeError):
        loom.arange()


LINSPACE_ARGS = [(0, 1, 5), (-1, 1, 11), (3, -2, 6), (0, 1, 2), (0, 10, 0), (1.5, 1.5, 4), (0, 1, 100)]


@pytest.mark.parametrize("args", LINSPACE_ARGS, ids=repr)
def test_linspace_matches_torch_and_numpy(torch, args):
    t = loom.linspace(*args)
    ref = torch.linspace(*args)
    assert t.shape == ref.shape and t.dtype is loom.float32
    np.testing.assert_allclose(to_numpy(t), ref.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(to_numpy(loom.linspace(*args, dtype=loom.float64)), np.linspace(*args),
                               rtol=1e-15, atol=1e-15)
    if args[2] > 1:
        assert t.tolist()[0] == np.float32(args[0]) and t.tolist()[-1] == np.float32(args[1])


def test_linspace_one_step(torch):
    assert loom.linspace(0, 1, 1).tolist() == torch.linspace(0, 1, 1).tolist() == [0.0]


def test_linspace_integer_dtype(torch):
    assert_matches_torch(loom.linspace(0, 10, 5, dtype=loom.int64), torch.linspace(0, 10, 5, dtype=torch.int64))


@pytest.mark.parametrize("dtype", [loom.int8, loom.uint8, loom.int16, loom.int32, loom.int64], ids=DTYPE_NAMES.get)
@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_linspace_integer_rounding_matches_torch(torch, dtype, device):
    # PyTorch's CPU kernel rounds by SIMD chunks (runtime/cpu/kernels.cpp): every length from 1 to
    # 70 crosses chunk boundaries of each element width, descending and ascending, with fractional
    # endpoints (converted to the dtype first).
    if "CPU capability usage: AVX2" not in torch.__config__.show():
        pytest.skip("the reference's chunks are AVX2's 32 bytes; this PyTorch uses another vector width")
    for start, end in [(5, -5), (-7, 100), (0.5, 3.7), (3, 3), (-2.9, 2.9)]:
        if dtype is loom.uint8 and min(start, end) < 0:
            continue
        for steps in range(1, 71):
            got = loom.linspace(start, end, steps, dtype=dtype, device=device).tolist()
            want = torch.linspace(start, end, steps, dtype=torch_dtype(dtype)).tolist()
            assert got == want, (start, end, steps)


def test_linspace_negative_steps():
    with pytest.raises(RuntimeError, match="non-negative"):
        loom.linspace(0, 1, -1)


@pytest.mark.parametrize("args", [(3,), (2, 4), (4, 2), (0,), (3, 0), (1,)], ids=repr)
@pytest.mark.parametrize("dtype", [None, loom.int64, loom.bool, loom.float64], ids=repr)
def test_eye_matches_torch(torch, args, dtype):
    kwargs = {} if dtype is None else {"dtype": dtype}
    tkwargs = {} if dtype is None else {"dtype": torch_dtype(dtype)}
    assert_matches_torch(loom.eye(*args, **kwargs), torch.eye(*args, **tkwargs))


def test_eye_errors():
    with pytest.raises(RuntimeError):
        loom.eye(-1)


# ---------------------------------------------------------------------------------------------
# random creation (distribution properties are in test_random.py)
# ---------------------------------------------------------------------------------------------

def test_random_creation_shapes_and_dtypes():
    assert loom.rand(2, 3).shape == (2, 3) and loom.rand(2, 3).dtype is loom.float32
    assert loom.rand((4,), dtype=loom.float64).dtype is loom.float64
    assert loom.randn(size=(2, 2), dtype=loom.float16).dtype is loom.float16
    assert loom.randn(3).dtype is loom.float32
    r = loom.randint(10, (3, 4))
    assert r.shape == (3, 4) and r.dtype is loom.int64
    assert loom.randint(2, 5, (6,), dtype=loom.int32).dtype is loom.int32
    assert loom.randint(low=2, high=5, size=(6,)).shape == (6,)
    assert loom.rand(0).shape == (0,) and loom.randn(()).dim() == 0


# ---------------------------------------------------------------------------------------------
# *_like
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [loom.float32, loom.int32, loom.bool, loom.float64, loom.bfloat16],
                         ids=DTYPE_NAMES.get)
def test_like_functions_take_shape_and_dtype(torch, dtype):
    src = loom.zeros(2, 3, dtype=dtype)
    ref = torch.zeros(2, 3, dtype=torch_dtype(dtype))
    assert_matches_torch(loom.zeros_like(src), torch.zeros_like(ref))
    assert_matches_torch(loom.ones_like(src), torch.ones_like(ref))
    assert_matches_torch(loom.full_like(src, 1), torch.full_like(ref, 1))
    e = loom.empty_like(src)
    assert e.shape == src.shape and e.dtype is dtype and e.data_ptr() != src.data_ptr()
    assert_matches_torch(loom.zeros_like(src, dtype=loom.int64), torch.zeros_like(ref, dtype=torch.int64))
    assert_matches_torch(loom.ones_like(src, dtype="float64"), torch.ones_like(ref, dtype=torch.float64))


def test_full_like_values(torch):
    i = loom.tensor([1, 2, 3])
    assert_matches_torch(loom.full_like(i, 2.75), torch.full_like(torch.tensor([1, 2, 3]), 2.75))
    f = loom.zeros(2)
    assert_matches_torch(loom.full_like(f, 7, dtype=loom.float16), torch.full_like(torch.zeros(2), 7,
                                                                                  dtype=torch.float16))
    assert loom.full_like(f, fill_value=-1.5).tolist() == [-1.5, -1.5]


def test_random_like():
    src = loom.zeros(5, 4, dtype=loom.float64)
    for r in (loom.rand_like(src), loom.randn_like(src)):
        assert r.shape == (5, 4) and r.dtype is loom.float64
    assert loom.rand_like(src, dtype=loom.float16).dtype is loom.float16
    ri = loom.randint_like(src, 10)
    assert ri.shape == (5, 4) and ri.dtype is loom.float64
    vals = to_numpy(ri)
    assert (vals == np.floor(vals)).all() and vals.min() >= 0 and vals.max() < 10
    ri = loom.randint_like(loom.zeros(1000, dtype=loom.int32), 3, 6)
    assert ri.dtype is loom.int32 and set(ri.tolist()) == {3, 4, 5}
    with pytest.raises(TypeError):
        loom.rand_like(loom.zeros(2, dtype=loom.int64))


def test_like_preserves_strides(torch):
    src = loom.zeros(3, 4).t()
    assert loom.zeros_like(src).stride() == torch.zeros_like(torch.zeros(3, 4).t()).stride() == (1, 4)


@pytest.mark.parametrize("make", [lambda: np.arange(12.0).reshape(3, 4).T, lambda: np.arange(24.0).reshape(4, 6).T[::2],
                                  lambda: np.arange(24.0).reshape(2, 3, 4).transpose(1, 2, 0),
                                  lambda: np.arange(0.0).reshape(2, 0, 3), lambda: np.arange(6.0)[::2]],
                         ids=["transposed", "transposed_sliced", "permuted", "empty", "stepped"])
def test_tensor_from_numpy_preserves_format_like_torch(torch, make):
    # torch.tensor(array) is from_numpy(array).to(copy=True): the copy keeps the array's dim order.
    a = make()
    assert_matches_torch(loom.tensor(a), torch.tensor(a))
    assert_matches_torch(loom.tensor(a, dtype=loom.float32), torch.tensor(a, dtype=torch.float32))


# ---------------------------------------------------------------------------------------------
# default dtype
# ---------------------------------------------------------------------------------------------

def test_default_dtype_is_float32():
    assert loom.get_default_dtype() is loom.float32


@pytest.mark.parametrize("default", [loom.float64, loom.float16, loom.bfloat16], ids=DTYPE_NAMES.get)
def test_set_default_dtype_changes_float_creation(restore_default_dtype, default):
    loom.set_default_dtype(default)
    assert loom.get_default_dtype() is default
    assert loom.tensor([1.5]).dtype is default
    assert loom.tensor(2.5).dtype is default
    assert loom.zeros(2).dtype is default
    assert loom.ones(1).dtype is default
    assert loom.empty(1).dtype is default
    assert loom.full((1,), 2.5).dtype is default
    assert loom.arange(0.0, 1.0).dtype is default
    assert loom.linspace(0, 1, 3).dtype is default
    assert loom.eye(2).dtype is default
    assert loom.rand(2).dtype is default and loom.randn(2).dtype is default
    assert loom.tensor([]).dtype is default
    # Non-float inference and explicit buffers are unaffected.
    assert loom.tensor([1, 2]).dtype is loom.int64
    assert loom.arange(3).dtype is loom.int64
    assert loom.tensor([True]).dtype is loom.bool
    assert loom.tensor(np.zeros(2, np.float32)).dtype is loom.float32


def test_set_default_dtype_with_string_and_restore(restore_default_dtype):
    loom.set_default_dtype("float64")
    assert loom.get_default_dtype() is loom.float64
    loom.set_default_dtype(loom.float32)
    assert loom.tensor([0.5]).dtype is loom.float32


@pytest.mark.parametrize("bad", [loom.int64, loom.bool, loom.uint8, loom.int32])
def test_set_default_dtype_rejects_non_float(restore_default_dtype, bad):
    with pytest.raises(TypeError, match="floating"):
        loom.set_default_dtype(bad)
    assert loom.get_default_dtype() is loom.float32


def test_set_default_dtype_matches_torch_float64(torch, restore_default_dtype):
    before = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        loom.set_default_dtype(loom.float64)
        for data in ([1.5, 2], 3.25, [[1], [2.5]]):
            assert_matches_torch(loom.tensor(data), torch.tensor(data))
        assert_matches_torch(loom.arange(0, 2, 0.5), torch.arange(0, 2, 0.5))
    finally:
        torch.set_default_dtype(before)


# ---------------------------------------------------------------------------------------------
# loom.Size
# ---------------------------------------------------------------------------------------------

def test_size_is_tuple_subclass():
    s = loom.zeros(2, 3).shape
    assert isinstance(s, loom.Size) and isinstance(s, tuple)
    assert s == (2, 3) and s == loom.Size([2, 3]) and tuple(s) == (2, 3)
    assert hash(s) == hash((2, 3))
    assert len(s) == 2 and s[0] == 2 and s[-1] == 3 and list(s) == [2, 3]
    assert type(loom.zeros(2).size()) is loom.Size


def test_size_repr_matches_torch(torch):
    for dims in ([2, 3], [], [0], [1, 2, 3, 4]):
        assert repr(loom.Size(dims)) == repr(torch.Size(dims)).replace("torch.", "loom.")
    assert repr(loom.Size([2, 3])) == "loom.Size([2, 3])"
    assert str(loom.zeros(4, 5).shape) == "loom.Size([4, 5])"


def test_size_numel():
    assert loom.Size([2, 3, 4]).numel() == 24
    assert loom.Size([]).numel() == 1
    assert loom.Size([5, 0]).numel() == 0
    assert loom.zeros(3, 7).shape.numel() == 21


def test_size_constructor():
    assert loom.Size() == ()
    assert loom.Size((1, 2)) == (1, 2)
    assert loom.Size(range(3)) == (0, 1, 2)
    with pytest.raises(TypeError):
        loom.Size([1.5])


def test_size_pickle_round_trip():
    s = loom.Size([2, 3])
    back = pickle.loads(pickle.dumps(s))
    assert back == s and type(back) is loom.Size


def test_size_operations_keep_type(torch):
    s = loom.Size([2, 3, 4])
    assert type(torch.Size([2, 3, 4])[1:]) is torch.Size
    assert type(s[1:]) is loom.Size
    assert type(s + (5,)) is loom.Size
    assert type(s * 2) is loom.Size


def test_size_operations_match_torch(torch):
    s, ts = loom.Size([2, 3, 4]), torch.Size([2, 3, 4])
    for op in (lambda x: x[::2], lambda x: x[5:], lambda x: x[:], lambda x: x + x, lambda x: 2 * x, lambda x: x * 0,
               lambda x: x[1], lambda x: (5,) + x, lambda x: x + ()):
        result, expected = op(s), op(ts)
        assert result == expected
        assert type(result).__name__ == type(expected).__name__
    with pytest.raises(TypeError):
        s + (1.5,)  # the result must still be a size
    with pytest.raises(TypeError):
        s + [1]
    assert loom.zeros(s[1:]).shape == (3, 4)


def test_size_accepted_as_shape():
    s = loom.zeros(2, 5).shape
    assert loom.ones(s).shape == s
    assert loom.arange(10).view(s).shape == s
    assert loom.arange(10).reshape(s).shape == s


# ---------------------------------------------------------------------------------------------
# loom.dtype objects
# ---------------------------------------------------------------------------------------------

def test_dtype_aliases_are_the_same_objects():
    assert loom.float32 is loom.float
    assert loom.float64 is loom.double
    assert loom.float16 is loom.half
    assert loom.int64 is loom.long
    assert loom.int32 is loom.int
    assert loom.uint8 is loom.byte


def test_dtype_reprs(torch):
    for d in ALL_DTYPES:
        assert repr(d) == "loom." + DTYPE_NAMES[d]
        assert repr(d) == repr(torch_dtype(d)).replace("torch.", "loom.")
        assert str(d) == repr(d)
    assert repr(loom.float) == "loom.float32"


def test_dtype_properties(torch):
    for d in ALL_DTYPES:
        td = torch_dtype(d)
        assert d.is_floating_point == td.is_floating_point
        assert d.is_signed == td.is_signed
        assert d.itemsize == torch.empty(0, dtype=td).element_size()
        assert isinstance(d, loom.dtype)
    assert loom.bfloat16.itemsize == 2 and loom.float64.itemsize == 8 and loom.bool.itemsize == 1


@pytest.mark.filterwarnings("ignore::FutureWarning")  # pickle's module scan touches numpy's deprecated np.bool
def test_dtype_pickle_returns_same_object():
    for d in ALL_DTYPES:
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            assert pickle.loads(pickle.dumps(d, protocol=protocol)) is d
    assert pickle.loads(pickle.dumps([loom.float, loom.int])) == [loom.float32, loom.int32]


def test_dtype_hashable_and_comparable():
    assert len({loom.float32, loom.float, loom.float64}) == 2
    assert loom.float32 == loom.float32 and loom.float32 != loom.float64
    assert {loom.int64: 1}[loom.long] == 1


def test_tensor_metadata(torch):
    t = loom.zeros(2, 3, 4, dtype=loom.float16)
    ref = torch.zeros(2, 3, 4, dtype=torch.float16)
    assert t.dim() == t.ndim == t.ndimension() == ref.dim()
    assert t.numel() == t.nelement() == 24
    assert t.element_size() == t.itemsize == 2
    assert t.nbytes == 48
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.stride() == ref.stride() and t.stride(0) == 12 and t.stride(-1) == 1
    assert t.is_floating_point() and not loom.zeros(1, dtype=loom.int32).is_floating_point()
    assert t.is_cpu and not t.is_cuda
    assert t.device == loom.device("cpu") and str(t.device) == "cpu" and t.device.type == "cpu"
    assert repr(t.device) == repr(ref.device).replace("torch.", "loom.")
    assert loom.is_tensor(t) and not loom.is_tensor(np.zeros(1)) and isinstance(t, loom.Tensor)
    assert t.storage_offset() == 0 and t.is_contiguous()


def test_device_objects(torch):
    for spec in ("cpu", "cuda", "cuda:1"):
        d = loom.device(spec)
        assert repr(d) == repr(torch.device(spec)) and str(d) == str(torch.device(spec))
        assert d.type == torch.device(spec).type and d.index == torch.device(spec).index
    assert loom.device("cuda", 2) == loom.device("cuda:2")
    assert hash(loom.device("cpu")) == hash(loom.device("cpu"))
    assert loom.device("cpu") != loom.device("cuda")
    assert pickle.loads(pickle.dumps(loom.device("cuda:3"))) == loom.device("cuda:3")
    assert loom.zeros(1, device="cpu").device == loom.device("cpu")
    assert loom.zeros(1, device=loom.device("cpu")).is_cpu


def test_tensor_constructs_as_pytorchs_legacy_constructor():
    # the forms and errors are test_legacy_constructors.py's
    assert loom.Tensor().shape == (0,) and loom.Tensor(2, 3).shape == (2, 3)


def test_tensor_from_other_buffer_exporters():
    import array

    assert_equal_np(loom.tensor(array.array("d", [1.5, -2.0])), np.array([1.5, -2.0]))
    assert_equal_np(loom.tensor(array.array("i", [1, 2, 3])), np.array([1, 2, 3], np.int32))
    assert_equal_np(loom.tensor(array.array("q", [2**40])), np.array([2**40], np.int64))
    assert_equal_np(loom.tensor(memoryview(np.arange(6.0).reshape(2, 3).T)), np.arange(6.0).reshape(2, 3).T)
    assert_equal_np(loom.tensor(np.arange(4, dtype="<f4")), np.arange(4, dtype=np.float32))


def test_tensor_subclass_via_make_subclass():
    class Parameter(loom.Tensor):
        pass

    data = loom.arange(6.0).view(2, 3)
    p = loom.Tensor._make_subclass(Parameter, data)
    assert type(p) is Parameter and isinstance(p, loom.Tensor) and loom.is_tensor(p)
    assert p.data_ptr() == data.data_ptr() and p.shape == (2, 3)
    p[0, 0] = 10.0
    assert data.tolist()[0][0] == 10.0
    assert repr(p) == repr(data)
    with pytest.raises(TypeError):
        loom.Tensor._make_subclass(int, data)


# ---- any Python sequence as data ----

def test_tensor_from_other_sequences():
    """torch.tensor reads every sequence, not only lists and tuples (pytorch/examples' REINFORCE
    makes its returns a collections.deque)."""
    import collections

    class Seq:
        def __len__(self):
            return 2

        def __getitem__(self, i):
            if i >= 2:
                raise IndexError(i)
            return [1.5, -1.0][i]

    assert loom.tensor(collections.deque([1.0, 2.0])).tolist() == [1.0, 2.0]
    t = loom.tensor(range(3))
    assert t.dtype is loom.int64 and t.tolist() == [0, 1, 2]
    assert loom.tensor([range(2), collections.deque([3, 4])]).tolist() == [[0, 1], [3, 4]]
    assert loom.tensor(Seq()).tolist() == [1.5, -1.0]
    assert loom.tensor(collections.deque(), dtype=loom.float64).shape == (0,)
    with pytest.raises(TypeError, match="invalid data type 'str'"):
        loom.tensor("ab")
    with pytest.raises(TypeError):
        loom.tensor({1, 2})
