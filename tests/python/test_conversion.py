"""Conversions: tolist/item, numpy (zero-copy), buffer protocol, Python number protocols, len/iter,
format, and dtype conversions (.to, .float(), ...), with float16/bfloat16 rounding checked bit for
bit against PyTorch."""

import ctypes
import gc
import math
import operator
import weakref

import numpy as np
import pytest

import loom
from conftest import (ALL_DTYPES, DTYPE_NAMES, NUMPY_DTYPES, allocated_bytes, assert_equal_np, assert_matches_torch,
                      to_numpy, torch_dtype)

NUMPY_LOOM = list(NUMPY_DTYPES.items())


# ---------------------------------------------------------------------------------------------
# tolist / item
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DTYPE_NAMES.get)
def test_tolist_and_item_match_torch(torch, dtype):
    data = [[0, 1, 2], [3, 4, 5]] if dtype is not loom.bool else [[True, False, True], [False, False, True]]
    t = loom.tensor(data, dtype=dtype)
    ref = torch.tensor(data, dtype=torch_dtype(dtype))
    assert t.tolist() == ref.tolist()
    for row, tref in zip(t.tolist(), ref.tolist()):
        assert [type(v) for v in row] == [type(v) for v in tref]
    assert t[1, 2].item() == ref[1, 2].item() and type(t[1, 2].item()) is type(ref[1, 2].item())
    assert t[0, 0].tolist() == ref[0, 0].tolist()  # 0-d tolist is a scalar
    assert loom.tensor([[5]], dtype=dtype).item() == torch.tensor([[5]], dtype=torch_dtype(dtype)).item()


def test_tolist_of_views_and_empty(torch):
    t = loom.arange(24.0).view(2, 3, 4)
    ref = torch.arange(24.0).view(2, 3, 4)
    for op in (lambda x: x.permute(2, 0, 1), lambda x: x[:, ::2, 1:], lambda x: x[0, :, None].expand(3, 2, 4)):
        assert op(t).tolist() == op(ref).tolist()
    assert loom.zeros(0).tolist() == [] and loom.zeros(2, 0).tolist() == [[], []]


def test_item_values_float_precision(torch):
    x = 0.1
    for dtype in (loom.float16, loom.bfloat16, loom.float32, loom.float64):
        assert loom.tensor(x, dtype=dtype).item() == torch.tensor(x, dtype=torch_dtype(dtype)).item()
    assert loom.tensor(2**62 + 1).item() == 2**62 + 1


# ---------------------------------------------------------------------------------------------
# numpy / buffer protocol
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("loom_dt,np_dt", NUMPY_LOOM, ids=[DTYPE_NAMES[d] for d, _ in NUMPY_LOOM])
def test_numpy_is_zero_copy(loom_dt, np_dt):
    t = loom.ones(3, 4, dtype=loom_dt)
    a = t.numpy()
    assert a.dtype == np_dt and a.shape == (3, 4)
    assert a.ctypes.data == t.data_ptr()
    assert a.flags.writeable
    a[1, 2] = 0
    assert t.tolist()[1][2] == 0
    t[2, 3] = 0
    assert a[2, 3] == 0


@pytest.mark.parametrize("op", [lambda x: x.t(), lambda x: x[1:, ::2], lambda x: x[:, None, 2],
                                lambda x: x[0].unsqueeze(0).expand(3, 4), lambda x: x[2, 3]],
                         ids=["t", "slice", "none", "expand", "scalar"])
def test_numpy_of_views_has_strides_and_shares(op):
    base = loom.arange(12, dtype=loom.int64).view(3, 4)
    v = op(base)
    a = v.numpy()
    assert a.shape == tuple(v.shape)
    assert a.strides == tuple(s * 8 for s in v.stride())
    assert a.ctypes.data == v.data_ptr()
    np.testing.assert_array_equal(a, np.array(v.tolist()))


def test_numpy_keeps_tensor_alive():
    before = allocated_bytes()
    t = loom.arange(1000.0)
    a = t.numpy()
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is not None  # the array holds the tensor
    assert a[999] == 999.0
    assert allocated_bytes() > before
    del a
    gc.collect()
    assert ref() is None
    assert allocated_bytes() == before


def test_asarray_shares_memory():
    t = loom.zeros(2, 3, dtype=loom.float64)
    a = np.asarray(t)
    assert a.ctypes.data == t.data_ptr() and a.dtype == np.float64
    a[0, 1] = 3.0
    assert t.tolist()[0][1] == 3.0
    assert np.shares_memory(np.asarray(t.t()), a)
    c = np.array(t)  # np.array copies
    assert c.ctypes.data != t.data_ptr()
    assert np.asarray(t, dtype=np.float32).dtype == np.float32


@pytest.mark.parametrize("loom_dt,np_dt", NUMPY_LOOM, ids=[DTYPE_NAMES[d] for d, _ in NUMPY_LOOM])
def test_memoryview(loom_dt, np_dt):
    t = loom.tensor(np.arange(6).reshape(2, 3).astype(np_dt))
    m = memoryview(t)
    ref = memoryview(np.arange(6).reshape(2, 3).astype(np_dt))
    assert m.shape == (2, 3) and m.ndim == 2 and not m.readonly
    assert m.itemsize == ref.itemsize and m.nbytes == ref.nbytes
    assert np.dtype(m.format) == np.dtype(np_dt)
    mt = memoryview(t.t())
    assert mt.strides == (m.itemsize, 3 * m.itemsize) and not mt.c_contiguous
    if np_dt is not np.float16:  # memoryview.tolist() has no float16 support
        assert m.tolist() == t.tolist()
        assert mt.tolist() == t.t().tolist()
    assert bytes(t.t()) == np.ascontiguousarray(np.asarray(t).T).tobytes()
    m.release()


def test_memoryview_write_through():
    t = loom.zeros(4, dtype=loom.uint8)
    m = memoryview(t)
    m[2] = 9
    assert t.tolist() == [0, 0, 9, 0]
    assert memoryview(loom.tensor(5)).shape == ()


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.py_object), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
                ("strides", ctypes.POINTER(ctypes.c_ssize_t)), ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)),
                ("internal", ctypes.c_void_p)]


_PyBUF_STRIDES = 0x0010 | 0x0008
_PyBUF_C_CONTIGUOUS = 0x0020 | _PyBUF_STRIDES
_PyBUF_F_CONTIGUOUS = 0x0040 | _PyBUF_STRIDES
_PyBUF_ANY_CONTIGUOUS = 0x0080 | _PyBUF_STRIDES


def _get_buffer(obj, flags):
    """PyObject_GetBuffer(obj, flags): (ndim, strides), or the exception it raised."""
    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
    release = ctypes.pythonapi.PyBuffer_Release
    release.argtypes = [ctypes.POINTER(_PyBuffer)]
    view = _PyBuffer()
    get(obj, ctypes.byref(view), flags)  # ctypes.pythonapi raises the exception that was set
    try:
        return view.ndim, tuple(view.strides[i] for i in range(view.ndim))
    finally:
        release(ctypes.byref(view))


def test_buffer_request_for_strides_succeeds():
    t = loom.zeros(3, 4)
    assert _get_buffer(t.t(), _PyBUF_STRIDES) == (2, (4, 16))
    assert _get_buffer(t, _PyBUF_C_CONTIGUOUS) == (2, (16, 4))


@pytest.mark.parametrize("flags,make", [
    (_PyBUF_C_CONTIGUOUS, lambda m: m.ones(3, 4).T),
    (_PyBUF_F_CONTIGUOUS, lambda m: m.ones(3, 4)),
    (_PyBUF_ANY_CONTIGUOUS, lambda m: m.ones(3, 4)[:, ::2]),
], ids=["C", "F", "ANY"])
def test_buffer_contiguity_requests_are_honoured(flags, make):
    class NumpyLike:
        @staticmethod
        def ones(*shape):
            return np.ones(shape, np.float32)

    with pytest.raises((BufferError, ValueError)):
        _get_buffer(make(NumpyLike), flags)
    with pytest.raises((BufferError, ValueError)):
        _get_buffer(make(loom), flags)


def test_bfloat16_numpy_raises_and_force_converts(torch):
    t = loom.tensor([1.0, 2.5, 1e-3], dtype=loom.bfloat16)
    with pytest.raises(TypeError, match="bfloat16"):
        t.numpy()
    with pytest.raises(TypeError):
        torch.tensor([1.0]).bfloat16().numpy()
    with pytest.raises(TypeError):
        memoryview(t)
    a = t.numpy(force=True)
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, torch.tensor([1.0, 2.5, 1e-3]).bfloat16().float().numpy())
    # force=True on a tensor numpy can represent still shares memory.
    f = loom.ones(3)
    assert f.numpy(force=True).ctypes.data == f.data_ptr()


# ---------------------------------------------------------------------------------------------
# Python number protocols, len, iteration, format
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, 1, -3, 2.5, -2.75, 0.0, True, False], ids=repr)
@pytest.mark.parametrize("shape", [(), (1,), (1, 1)], ids=repr)
def test_number_protocols_match_torch(torch, value, shape):
    t = loom.tensor(value).view(shape)
    ref = torch.tensor(value).view(shape)
    assert float(t) == float(ref) and type(float(t)) is float
    assert int(t) == int(ref) and type(int(t)) is int
    assert bool(t) == bool(ref)
    if isinstance(value, bool) or isinstance(value, int):
        assert operator.index(t) == operator.index(ref)
        assert [10, 20, 30, 40][t] == [10, 20, 30, 40][ref]
    else:
        with pytest.raises(TypeError):
            operator.index(t)


@pytest.mark.parametrize("dtype", [loom.float16, loom.bfloat16, loom.float32, loom.float64, loom.uint8,
                                   loom.int32], ids=DTYPE_NAMES.get)
def test_number_protocols_dtypes(torch, dtype):
    t = loom.tensor([3.75 if dtype.is_floating_point else 3], dtype=dtype)
    ref = torch.tensor([3.75 if dtype.is_floating_point else 3], dtype=torch_dtype(dtype))
    assert float(t) == float(ref) and int(t) == int(ref) and bool(t) == bool(ref)


def test_bool_of_nan_and_negative_zero(torch):
    assert bool(loom.tensor(float("nan"))) == bool(torch.tensor(float("nan"))) is True
    assert bool(loom.tensor(-0.0)) == bool(torch.tensor(-0.0)) is False


@pytest.mark.parametrize("value", [1e20, -1e19, float("nan"), float("inf")], ids=repr)
def test_int_of_large_float(torch, value):
    ref = torch.tensor(value, dtype=torch.float64)
    t = loom.tensor(value, dtype=loom.float64)
    try:
        expected = int(ref)
    except (ValueError, OverflowError) as e:
        with pytest.raises(type(e)):
            int(t)
    else:
        assert int(t) == expected == int(value)


def test_len_and_iteration(torch):
    t = loom.arange(12).view(3, 4)
    assert len(t) == 3 and len(t[0]) == 4 and len(loom.zeros(0, 2)) == 0
    assert [r.tolist() for r in t] == [r.tolist() for r in torch.arange(12).view(3, 4)]
    assert [x.item() for x in loom.tensor([5, 6])] == [5, 6]
    assert list(loom.zeros(0)) == []
    a, b, c = t
    assert b.tolist() == [4, 5, 6, 7]


def test_format(torch):
    t = loom.tensor(3.14159)
    assert f"{t:.2f}" == f"{torch.tensor(3.14159):.2f}" == "3.14"
    assert f"{loom.tensor(42):5d}" == f"{torch.tensor(42):5d}"
    assert f"{loom.tensor(2.5, dtype=loom.float64):e}" == f"{torch.tensor(2.5, dtype=torch.float64):e}"
    assert f"{t}" == f"{torch.tensor(3.14159)}"
    assert f"{loom.tensor(True)}" == "True"
    assert format(loom.tensor([1.0, 2.0])) == str(loom.tensor([1.0, 2.0]))


# ---------------------------------------------------------------------------------------------
# dtype conversions
# ---------------------------------------------------------------------------------------------

SAFE_VALUES = [0.0, 0.5, 1.0, 1.75, 2.5, 100.25, 127.0, 200.9, 255.0]
SIGNED_VALUES = [-1.0, -2.5, -0.25, -100.75]


@pytest.mark.parametrize("src", ALL_DTYPES, ids=DTYPE_NAMES.get)
@pytest.mark.parametrize("dst", ALL_DTYPES, ids=DTYPE_NAMES.get)
def test_to_dtype_matches_torch(torch, src, dst):
    values = list(SAFE_VALUES)
    if src is loom.int8:  # int8 holds no more (PyTorch raises as loom does)
        values = [v for v in values if v <= 127]
    if src not in (loom.bool, loom.uint8) and dst not in (loom.bool, loom.uint8):
        values += SIGNED_VALUES
    t = loom.tensor(values, dtype=src)
    ref = torch.tensor(values, dtype=torch_dtype(src))
    assert_matches_torch(t.to(dst), ref.to(torch_dtype(dst)))
    assert_matches_torch(t.to(dtype=dst), ref.to(dtype=torch_dtype(dst)))
    # Non-contiguous sources convert too.
    assert_matches_torch(t[::2].to(dst), ref[::2].to(torch_dtype(dst)), check_strides=False)


@pytest.mark.parametrize("method", ["float", "double", "half", "bfloat16", "long", "int", "bool", "byte"])
def test_conversion_methods_match_torch(torch, method):
    values = [0.0, 1.5, 2.25, 3.0, 250.5]
    t = loom.tensor(values)
    ref = torch.tensor(values)
    assert_matches_torch(getattr(t, method)(), getattr(ref, method)())
    out = getattr(t, method)()
    if out.dtype is t.dtype:
        assert out is t  # nothing changes: self
    else:
        assert out.data_ptr() != t.data_ptr()


def test_type_as(torch):
    t = loom.tensor([1.5, 2.5])
    assert_matches_torch(t.type_as(loom.zeros(1, dtype=loom.int32)),
                         torch.tensor([1.5, 2.5]).type_as(torch.zeros(1, dtype=torch.int32)))
    assert t.type_as(loom.zeros(1)) is t


def test_to_returns_self_or_copy():
    t = loom.arange(4.0)
    assert t.to(loom.float32) is t
    assert t.to("cpu") is t
    assert t.to(loom.device("cpu")) is t
    assert t.to("cpu", loom.float32) is t
    assert t.to(device="cpu", dtype=loom.float32) is t
    assert t.to(loom.zeros(1)) is t
    assert t.cpu() is t
    c = t.to(loom.float32, copy=True)
    assert c is not t and c.data_ptr() != t.data_ptr() and c.tolist() == t.tolist()
    c2 = t.to("cpu", copy=True)
    assert c2.data_ptr() != t.data_ptr()
    d = t.to("cpu", loom.float64)
    assert d.dtype is loom.float64 and d.tolist() == t.tolist()
    o = t.to(loom.zeros(1, dtype=loom.int32))
    assert o.dtype is loom.int32
    assert t.to(dtype="float16").dtype is loom.float16


def test_to_preserves_strides_like_torch(torch):
    t = loom.arange(12.0).view(3, 4).t()
    ref = torch.arange(12.0).view(3, 4).t()
    assert t.double().stride() == ref.double().stride()


# --- float16 / bfloat16 rounding, bit for bit ------------------------------------------------

def _float32_probe_values():
    rng = np.random.default_rng(1234)
    random_bits = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    parts = [random_bits.view(np.float32)]
    # Normal float32 values in and around float16's range, as random bit patterns.
    exps = rng.integers(100, 145, size=100_000, dtype=np.uint32)
    mant = rng.integers(0, 2**23, size=100_000, dtype=np.uint32)
    sign = rng.integers(0, 2, size=100_000, dtype=np.uint32) << 31
    parts.append((sign | (exps << 23) | mant).view(np.float32))
    # Exact ties for float16 (13 dropped bits = 0x1000) and bfloat16 (16 dropped bits = 0x8000),
    # with even and odd kept mantissas, across normal and float16-subnormal exponents.
    kept = rng.integers(0, 2**10, size=20_000, dtype=np.uint32)
    exps = rng.integers(90, 145, size=20_000, dtype=np.uint32)
    parts.append(((exps << 23) | (kept << 13) | 0x1000).view(np.float32))
    parts.append(((exps << 23) | (kept << 13) | 0x0FFF).view(np.float32))
    parts.append(((exps << 23) | (kept << 13) | 0x1001).view(np.float32))
    kept7 = rng.integers(0, 2**7, size=20_000, dtype=np.uint32)
    exps = rng.integers(1, 255, size=20_000, dtype=np.uint32)
    parts.append(((exps << 23) | (kept7 << 16) | 0x8000).view(np.float32))
    parts.append(((exps << 23) | (kept7 << 16) | 0x7FFF).view(np.float32))
    # float16 subnormals and the boundaries: smallest subnormal, half of it (tie to 0), its ties.
    k = np.arange(1, 2048, dtype=np.float64)
    parts.append((k * 2.0**-25).astype(np.float32))  # every float16 subnormal and the midpoints between them
    special = [0.0, -0.0, 2.0**-24, 2.0**-25, 2.0**-25 * 1.0000001, 2.0**-26, 3 * 2.0**-25, 2.0**-14,
               2.0**-14 * (1 - 2.0**-11), 6.1e-5, 65504.0, 65519.0, 65519.996, 65520.0, 65536.0, 1e5, 3.4e38,
               np.finfo(np.float32).max, np.finfo(np.float32).tiny, 1e-45, np.inf, -np.inf, 1.0, 1.0 + 2.0**-11,
               1.0 + 3 * 2.0**-11, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 0.1, 1 / 3]
    special = np.array(special, dtype=np.float32)
    parts.append(special)
    parts.append(-special)
    return np.concatenate(parts)


@pytest.fixture(scope="module")
def float32_probes():
    return _float32_probe_values()


def _same_bits_or_both_nan(actual, expected, bits_dtype):
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan)
    a = actual[~nan].view(bits_dtype)
    e = expected[~nan].view(bits_dtype)
    bad = np.nonzero(a != e)[0]
    assert bad.size == 0, f"{bad.size} values differ, e.g. {actual[~nan][bad[:5]]} vs {expected[~nan][bad[:5]]}"


def test_float32_to_float16_rounding_matches_torch(torch, float32_probes):
    x = float32_probes
    expected = torch.from_numpy(x.copy()).half().numpy()
    actual = loom.from_numpy(x.copy()).half().numpy()
    _same_bits_or_both_nan(actual, expected, np.uint16)
    # numpy implements the same IEEE rounding.
    with np.errstate(over="ignore", invalid="ignore"):
        _same_bits_or_both_nan(actual, x.astype(np.float16), np.uint16)


def test_float32_to_bfloat16_rounding_matches_torch(torch, float32_probes):
    x = float32_probes
    expected = torch.from_numpy(x.copy()).bfloat16().float().numpy()
    actual = loom.from_numpy(x.copy()).bfloat16().float().numpy()
    _same_bits_or_both_nan(actual, expected, np.uint32)


def test_python_floats_to_16_bit_match_torch(torch, float32_probes):
    values = [float(v) for v in float32_probes[-2000:]] + [0.1, 1 / 3, 65519.99, 1e-8, 2.0**-25 + 2.0**-60]
    for dtype in (loom.float16, loom.bfloat16):
        actual = loom.tensor(values, dtype=dtype).float().numpy()
        expected = torch.tensor(values, dtype=torch_dtype(dtype)).float().numpy()
        _same_bits_or_both_nan(actual, expected, np.uint32)


def test_float64_to_16_bit_matches_torch(torch):
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(20000) * 10.0 ** rng.integers(-9, 6, 20000),
                        (1.0 + (np.arange(1, 2000) * 2.0**-11 + 2.0**-40)), [2.0**-25 + 2.0**-50, 65519.9999]])
    for dtype in (loom.float16, loom.bfloat16):
        actual = loom.from_numpy(x.copy()).to(dtype).float().numpy()
        expected = torch.from_numpy(x.copy()).to(torch_dtype(dtype)).float().numpy()
        _same_bits_or_both_nan(actual, expected, np.uint32)


def test_16_bit_to_wider_is_exact(torch):
    bits = np.arange(2**16, dtype=np.uint16)
    halves = bits.view(np.float16)
    t = loom.from_numpy(halves.copy())
    for dst in (loom.float32, loom.float64):
        actual = t.to(dst).numpy()
        expected = halves.astype(np.float32 if dst is loom.float32 else np.float64)
        _same_bits_or_both_nan(actual, expected, np.uint32 if dst is loom.float32 else np.uint64)
    bf = torch.from_numpy(bits.astype(np.int16)).view(torch.bfloat16)
    lb = loom.from_dlpack(bf)
    _same_bits_or_both_nan(lb.float().numpy(), bf.float().numpy(), np.uint32)
    _same_bits_or_both_nan(lb.double().numpy(), bf.double().numpy(), np.uint64)


def test_ints_to_16_bit_match_torch(torch):
    values = np.array([0, 1, 2047, 2049, 2051, 4097, 65504, 65519, 65520, 70000, -70000, 2**24 + 1, 2**40 + 2**27,
                       -(2**62)], dtype=np.int64)
    for dtype in (loom.float16, loom.bfloat16):
        actual = loom.from_numpy(values.copy()).to(dtype).float().numpy()
        expected = torch.from_numpy(values.copy()).to(torch_dtype(dtype)).float().numpy()
        _same_bits_or_both_nan(actual, expected, np.uint32)


def test_half_tensor_repr_values(torch):
    t = loom.tensor([0.1, 1000.5, 65504.0, 1e-7], dtype=loom.float16)
    assert t.tolist() == torch.tensor([0.1, 1000.5, 65504.0, 1e-7], dtype=torch.float16).tolist()


def test_method_keyword_forms(torch):
    t = loom.zeros(2, 3, 4)
    assert t.size(dim=1) == 3 and t.stride(dim=0) == 12 and t.size(-1) == 4
    assert t.to(loom.float64, non_blocking=True).dtype is loom.float64
    assert t.to(device="cpu", non_blocking=False) is t
    assert t.cpu() is t


def test_type_as_takes_the_other_tensors_device_and_dtype():
    """PyTorch's type_as is self.to(other.options()): a CPU tensor type_as a CUDA one moves to
    CUDA (language_translation's greedy_decode builds each next token with
    torch.ones(1, 1).type_as(src.data) and concatenates it to tokens on the model's device). Here
    lazy plays CUDA's part; the gradient comes back to the CPU source."""
    lazy_long = loom.ones(2, dtype=loom.int64, device="lazy")
    moved = loom.ones(1, 1).type_as(lazy_long)
    assert moved.device.type == "lazy" and moved.dtype == loom.int64
    assert loom.cat([lazy_long.view(2, 1), moved]).tolist() == [[1], [1], [1]]
    back = lazy_long.type_as(loom.ones(1))
    assert back.device.type == "cpu" and back.dtype == loom.float32
    src = loom.tensor([1.0, 2.0], requires_grad=True)
    out = src.type_as(loom.ones(1, dtype=loom.float64, device="lazy"))
    assert out.device.type == "lazy" and out.dtype == loom.float64
    (out * 3).sum().backward()
    assert src.grad.device.type == "cpu" and src.grad.tolist() == [3.0, 3.0]
    same = loom.ones(2)
    assert same.type_as(loom.zeros(3)) is same  # already of that type: itself, as in PyTorch
