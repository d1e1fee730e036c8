"""Zero-copy exchange: DLPack with numpy and torch in both directions, from_numpy and as_tensor.

Sharing is checked by address (the consumer's first element is the producer's) and by writes
showing up on the other side; lifetimes by the allocator's statistics and weak references."""

import gc
import weakref

import numpy as np
import pytest

import loom
from conftest import ALL_DTYPES, DTYPE_NAMES, NUMPY_DTYPES, allocated_bytes, assert_equal_np, to_numpy, torch_dtype

NUMPY_LOOM = list(NUMPY_DTYPES.items())


def _numpy_dlpack_supports(np_dt):
    try:
        np.from_dlpack(np.zeros(1, np_dt))
        return True
    except (BufferError, RuntimeError, TypeError):
        return False


def _torch_dlpack_supports(torch, dtype):
    try:
        torch.from_dlpack(torch.zeros(1, dtype=dtype))
        return True
    except (BufferError, RuntimeError, TypeError):
        return False


LOOM_VIEWS = [
    ("contiguous", lambda x: x),
    ("transposed", lambda x: x.t()),
    ("sliced", lambda x: x[1:, 1:]),
    ("strided", lambda x: x[::2, 1::2]),
    ("row", lambda x: x[2]),
    ("column", lambda x: x[:, 3]),
    ("expanded", lambda x: x[1:2].expand(3, 5)),
    ("unsqueezed", lambda x: x[1:].unsqueeze(1)),
    ("scalar", lambda x: x[1, 2]),
    ("empty", lambda x: x[:, 2:2]),
]


# ---------------------------------------------------------------------------------------------
# numpy -> loom
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("loom_dt,np_dt", NUMPY_LOOM, ids=[DTYPE_NAMES[d] for d, _ in NUMPY_LOOM])
def test_from_dlpack_numpy_shares_memory(loom_dt, np_dt):
    if not _numpy_dlpack_supports(np_dt):
        pytest.skip(f"numpy {np.__version__} cannot export {np_dt.__name__} through DLPack")
    a = (np.arange(12) % 3).astype(np_dt).reshape(3, 4)
    t = loom.from_dlpack(a)
    assert t.dtype is loom_dt
    assert t.data_ptr() == a.ctypes.data
    assert_equal_np(t, a)
    a[1, 1] = 2
    assert to_numpy(t)[1, 1] == 2
    t[2, 3] = 1
    assert a[2, 3] == 1


@pytest.mark.parametrize("make", [lambda a: a.T, lambda a: a[1:, ::2], lambda a: a[:, 1], lambda a: a[2, 3, ...],
                                  lambda a: a[:0]],
                         ids=["T", "slice", "column", "scalar", "empty"])
def test_from_dlpack_numpy_views(make):
    base = np.arange(20.0).reshape(4, 5)
    a = make(base)
    t = loom.from_dlpack(a)
    assert_equal_np(t, a)
    if a.size:
        assert t.data_ptr() == a.ctypes.data
        assert t.stride() == tuple(s // 8 for s in a.strides)


def test_from_dlpack_numpy_keeps_array_alive():
    a = np.arange(100.0)
    ref = weakref.ref(a)
    t = loom.from_dlpack(a)
    del a
    gc.collect()
    assert ref() is not None and t.tolist()[99] == 99.0
    del t
    gc.collect()
    assert ref() is None


def test_from_dlpack_rejects_negative_strides():
    a = np.arange(5.0)[::-1]
    with pytest.raises((ValueError, BufferError), match="negative|stride"):
        loom.from_dlpack(a)


# ---------------------------------------------------------------------------------------------
# loom -> numpy
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("loom_dt,np_dt", NUMPY_LOOM, ids=[DTYPE_NAMES[d] for d, _ in NUMPY_LOOM])
def test_numpy_from_dlpack_shares_memory(loom_dt, np_dt):
    if not _numpy_dlpack_supports(np_dt):
        pytest.skip(f"numpy {np.__version__} has no DLPack support for {np_dt.__name__}")
    t = loom.tensor((np.arange(12) % 3).astype(np_dt).reshape(3, 4))
    a = np.from_dlpack(t)
    assert a.dtype == np_dt and a.ctypes.data == t.data_ptr()
    np.testing.assert_array_equal(a, t.numpy())
    t[0, 0] = 2
    assert a[0, 0] == 2


@pytest.mark.parametrize("op", [v[1] for v in LOOM_VIEWS], ids=[v[0] for v in LOOM_VIEWS])
def test_numpy_from_dlpack_views(op):
    base = loom.arange(20.0).view(4, 5)
    v = op(base)
    a = np.from_dlpack(v)
    np.testing.assert_array_equal(a, to_numpy(v))
    assert a.shape == tuple(v.shape)
    if v.numel():
        assert a.ctypes.data == v.data_ptr()
        assert a.strides == tuple(s * 4 for s in v.stride())


def test_numpy_from_dlpack_keeps_tensor_alive():
    before = allocated_bytes()
    t = loom.arange(1000.0)
    a = np.from_dlpack(t)
    del t
    assert allocated_bytes() > before and a[999] == 999.0
    del a
    assert allocated_bytes() == before


# ---------------------------------------------------------------------------------------------
# torch <-> loom
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DTYPE_NAMES.get)
def test_from_dlpack_torch_shares_memory(torch, dtype):
    td = torch_dtype(dtype)
    if not _torch_dlpack_supports(torch, td):
        pytest.skip(f"torch {torch.__version__} cannot export {td} through DLPack")
    ref = (torch.arange(12) % 3).to(td).reshape(3, 4)
    t = loom.from_dlpack(ref)
    assert t.dtype is dtype and t.data_ptr() == ref.data_ptr()
    assert t.tolist() == ref.tolist()
    ref[1, 2] = 2
    assert t.tolist()[1][2] == 2
    t[0, 0] = 1
    assert ref[0, 0].item() == 1


@pytest.mark.parametrize("make", [lambda x: x.t(), lambda x: x[1:, ::2], lambda x: x[:, 3], lambda x: x[1, 2],
                                  lambda x: x[:1].expand(4, 5)],
                         ids=["t", "slice", "column", "scalar", "expand"])
def test_from_dlpack_torch_views(torch, make):
    base = torch.arange(20.0).reshape(4, 5)
    ref = make(base)
    t = loom.from_dlpack(ref)
    assert t.tolist() == ref.tolist() and t.shape == ref.shape and t.stride() == ref.stride()
    assert t.data_ptr() == ref.data_ptr()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DTYPE_NAMES.get)
def test_torch_from_dlpack_shares_memory(torch, dtype):
    td = torch_dtype(dtype)
    if not _torch_dlpack_supports(torch, td):
        pytest.skip(f"torch {torch.__version__} has no DLPack support for {td}")
    t = loom.tensor([[0, 1, 2], [1, 0, 1]], dtype=dtype)
    ref = torch.from_dlpack(t)
    assert ref.dtype == td and ref.data_ptr() == t.data_ptr()
    assert ref.tolist() == t.tolist()
    t[1, 1] = 1
    assert ref[1, 1].item() == 1
    ref2 = torch.utils.dlpack.from_dlpack(t)
    assert ref2.data_ptr() == t.data_ptr()
    ref3 = torch.utils.dlpack.from_dlpack(t.__dlpack__())
    assert ref3.data_ptr() == t.data_ptr() and ref3.tolist() == t.tolist()


@pytest.mark.parametrize("op", [v[1] for v in LOOM_VIEWS], ids=[v[0] for v in LOOM_VIEWS])
def test_torch_from_dlpack_views(torch, op):
    base = loom.arange(20.0).view(4, 5)
    v = op(base)
    ref = torch.from_dlpack(v)
    assert ref.tolist() == v.tolist() and tuple(ref.shape) == tuple(v.shape)
    if v.numel():
        assert ref.data_ptr() == v.data_ptr()
        assert ref.stride() == v.stride()


def test_torch_from_dlpack_keeps_tensor_alive(torch):
    before = allocated_bytes()
    t = loom.arange(1000.0)
    ref = torch.from_dlpack(t)
    del t
    assert allocated_bytes() > before and ref[999].item() == 999.0
    del ref
    assert allocated_bytes() == before


def test_bfloat16_round_trip_through_torch(torch):
    values = [1.0, -2.5, 3.140625, 1e-3]
    t = loom.tensor(values, dtype=loom.bfloat16)
    ref = torch.from_dlpack(t)
    assert ref.dtype == torch.bfloat16 and ref.tolist() == torch.tensor(values, dtype=torch.bfloat16).tolist()
    back = loom.from_dlpack(ref)
    assert back.dtype is loom.bfloat16 and back.data_ptr() == t.data_ptr() and back.tolist() == t.tolist()


# ---------------------------------------------------------------------------------------------
# loom -> loom, capsules, protocol details
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DTYPE_NAMES.get)
@pytest.mark.parametrize("op", [v[1] for v in LOOM_VIEWS], ids=[v[0] for v in LOOM_VIEWS])
def test_loom_round_trip_every_dtype(dtype, op):
    base = loom.tensor(np.arange(20) % 3).to(dtype).view(4, 5)
    v = op(base)
    back = loom.from_dlpack(v)
    assert back.dtype is dtype and back.shape == v.shape and back.tolist() == v.tolist()
    if v.numel():
        assert back.data_ptr() == v.data_ptr() and back.stride() == v.stride()
    # So does a versioned capsule.
    back2 = loom.from_dlpack(v.__dlpack__(max_version=(1, 0)))
    assert back2.dtype is dtype and back2.tolist() == v.tolist()


def test_dlpack_device():
    assert loom.zeros(2).__dlpack_device__() == (1, 0)
    assert tuple(loom.zeros(2).__dlpack_device__()) == (1, 0)


def test_dlpack_capsule_names():
    t = loom.ones(3)
    assert 'dltensor"' in repr(t.__dlpack__())
    assert "dltensor_versioned" in repr(t.__dlpack__(max_version=(1, 0)))
    assert 'dltensor"' in repr(t.__dlpack__(max_version=(0, 8)))
    assert 'dltensor"' in repr(t.__dlpack__(stream=None))


def test_dlpack_arguments():
    t = loom.ones(3)
    t.__dlpack__(dl_device=(1, 0))
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(ValueError, match="copy"):
        t.__dlpack__(copy=True)
    t.__dlpack__(copy=False)
    with pytest.raises(TypeError):
        t.__dlpack__(max_version=1)
    with pytest.raises(TypeError):
        t.__dlpack__(bogus=1)


def test_capsule_consumed_once():
    t = loom.arange(4.0)
    capsule = t.__dlpack__()
    u = loom.from_dlpack(capsule)
    assert u.data_ptr() == t.data_ptr()
    with pytest.raises(ValueError, match="consumed|capsule"):
        loom.from_dlpack(capsule)
    assert "used_dltensor" in repr(capsule)


def test_from_dlpack_rejects_non_producers():
    with pytest.raises(TypeError):
        loom.from_dlpack([1, 2, 3])
    with pytest.raises(TypeError):
        loom.from_dlpack(object())


def test_unconsumed_capsules_are_freed():
    before = allocated_bytes()
    t = loom.zeros(10_000)
    during = allocated_bytes()
    assert during > before
    for _ in range(50):
        t.__dlpack__()
        t.__dlpack__(max_version=(1, 0))
        t[100:].__dlpack__()
    kept = [t.__dlpack__() for _ in range(5)]
    del t
    assert allocated_bytes() == during  # the capsules still own the tensor
    del kept
    assert allocated_bytes() == before


def test_consumed_capsules_are_freed_once():
    before = allocated_bytes()
    t = loom.zeros(10_000)
    views = [loom.from_dlpack(t[i:]) for i in range(20)]
    views += [loom.from_dlpack(t.__dlpack__(max_version=(1, 0))) for _ in range(20)]
    del t
    assert allocated_bytes() > before
    views[5][0] = 1.0
    assert views[0].tolist()[5] == 1.0
    del views
    assert allocated_bytes() == before


def test_round_trips_through_numpy_and_torch_do_not_leak(torch):
    before = allocated_bytes()
    for _ in range(20):
        t = loom.rand(64, 64)
        a = np.from_dlpack(t.t())
        r = torch.from_dlpack(t[1:])
        b = loom.from_dlpack(r)
        c = loom.from_dlpack(t.numpy())
        assert a.ctypes.data == c.data_ptr() == t.data_ptr() and b.data_ptr() == r.data_ptr()
        del t, a, r, b, c
    assert allocated_bytes() == before


# ---------------------------------------------------------------------------------------------
# from_numpy and as_tensor
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("loom_dt,np_dt", NUMPY_LOOM, ids=[DTYPE_NAMES[d] for d, _ in NUMPY_LOOM])
def test_from_numpy_shares_memory(loom_dt, np_dt):
    a = (np.arange(12) % 2).astype(np_dt).reshape(3, 4)
    t = loom.from_numpy(a)
    assert t.dtype is loom_dt and t.data_ptr() == a.ctypes.data
    assert_equal_np(t, a)
    a[2, 2] = 1
    assert t.tolist()[2][2] == 1
    t[0, 1] = 0
    assert a[0, 1] == 0


@pytest.mark.parametrize("make", [lambda a: a.T, lambda a: a[::2, 1:], lambda a: a[1], lambda a: a[1, 1, ...],
                                  lambda a: np.lib.stride_tricks.as_strided(a[:1], (4, 5), (0, 4))],
                         ids=["T", "slice", "row", "scalar", "broadcast"])
def test_from_numpy_views(make):
    base = np.arange(20, dtype=np.int32).reshape(4, 5)
    a = make(base)
    t = loom.from_numpy(a)
    assert_equal_np(t, a)
    assert t.data_ptr() == a.ctypes.data
    assert t.stride() == tuple(s // 4 for s in a.strides)


def test_from_numpy_keeps_array_alive():
    a = np.arange(10.0)
    ref = weakref.ref(a)
    t = loom.from_numpy(a)
    del a
    gc.collect()
    assert ref() is not None and t.tolist()[9] == 9.0
    del t
    gc.collect()
    assert ref() is None


def test_from_numpy_read_only_array_warns_like_torch(torch):
    a = np.broadcast_to(np.arange(3.0), (2, 3))
    with pytest.warns(UserWarning, match="not writable"):
        torch.from_numpy(a)
    with pytest.warns(UserWarning, match="not writable"):
        t = loom.from_numpy(a)
    assert t.data_ptr() == a.ctypes.data and t.stride() == (0, 1)
    assert_equal_np(t, a)


def test_from_numpy_errors():
    with pytest.raises(TypeError):
        loom.from_numpy([1, 2])
    with pytest.raises(TypeError):
        loom.from_numpy(np.zeros(2, np.uint16))
    with pytest.raises(ValueError, match="negative"):
        loom.from_numpy(np.arange(3)[::-1])


def test_as_tensor_shares_when_possible():
    a = np.arange(6.0, dtype=np.float32)
    t = loom.as_tensor(a)
    assert t.data_ptr() == a.ctypes.data
    assert loom.as_tensor(a, dtype=loom.float32).data_ptr() == a.ctypes.data
    assert loom.as_tensor(a, device="cpu").data_ptr() == a.ctypes.data
    c = loom.as_tensor(a, dtype=loom.float64)
    assert c.dtype is loom.float64 and c.data_ptr() != a.ctypes.data and c.tolist() == a.tolist()
    x = loom.ones(3)
    assert loom.as_tensor(x) is x
    assert loom.as_tensor(x, dtype=loom.float32) is x
    y = loom.as_tensor(x, dtype=loom.int32)
    assert y.dtype is loom.int32 and y.data_ptr() != x.data_ptr()
    lst = loom.as_tensor([1, 2, 3])
    assert lst.dtype is loom.int64 and lst.tolist() == [1, 2, 3]
    assert loom.as_tensor([1.5], dtype=loom.float16).dtype is loom.float16


def test_as_tensor_matches_torch(torch):
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    t, ref = loom.as_tensor(a), torch.as_tensor(a)
    assert t.data_ptr() == ref.data_ptr() == a.ctypes.data
    assert DTYPE_NAMES[t.dtype] == str(ref.dtype)[6:]
    t2, ref2 = loom.as_tensor(a, dtype=loom.float32), torch.as_tensor(a, dtype=torch.float32)
    assert t2.tolist() == ref2.tolist() and t2.data_ptr() != a.ctypes.data
