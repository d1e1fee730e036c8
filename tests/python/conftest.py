"""Shared fixtures and helpers for loom's Python test suites.

Run with the build directory on the path:
    cd tests/python && PYTHONPATH=../../build/python python3 -m pytest -q

Torch is optional: suites that compare against PyTorch use `pytest.importorskip("torch")` (or the
`torch` fixture below), so everything else still runs where torch is missing.
"""

import gc
import os
import tempfile

import numpy as np
import pytest

# The CUDA rendering of every module the suites lower is saved here and compiled with NVRTC by
# test_zz_cuda_renders.py (the last file), so CI checks CUDA kernels without a GPU.
os.environ.setdefault("LOOM_CUDA_RENDER_DIR", tempfile.mkdtemp(prefix="loom-cuda-renders-"))

import loom  # noqa: E402

# Every dtype loom has, and the numpy / torch names of the ones those libraries have.
ALL_DTYPES = [loom.bool, loom.uint8, loom.int8, loom.int16, loom.int32, loom.int64, loom.float16, loom.bfloat16,
              loom.float32, loom.float64]
NUMPY_DTYPES = {  # loom dtype -> numpy dtype (numpy has no bfloat16)
    loom.bool: np.bool_,
    loom.uint8: np.uint8,
    loom.int8: np.int8,
    loom.int16: np.int16,
    loom.int32: np.int32,
    loom.int64: np.int64,
    loom.float16: np.float16,
    loom.float32: np.float32,
    loom.float64: np.float64,
}
DTYPE_NAMES = {d: repr(d).split(".", 1)[1] for d in ALL_DTYPES}


def torch_dtype(dtype):
    """The torch dtype with the same name as a loom dtype."""
    import torch

    return getattr(torch, DTYPE_NAMES[dtype])


def loom_dtype(torch_dtype_):
    return getattr(loom, str(torch_dtype_).split(".", 1)[1])


def to_numpy(t):
    """A numpy copy of a loom tensor's values (bfloat16 through float32)."""
    if t.dtype is loom.bfloat16:
        t = t.float()
    return np.array(t.numpy(), copy=True)


def assert_equal_np(t, expected):
    """Values, shape and (numpy-equivalent) dtype of loom tensor t equal the numpy array expected."""
    expected = np.asarray(expected)
    assert tuple(t.shape) == expected.shape
    actual = to_numpy(t)
    if t.dtype is not loom.bfloat16:
        assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    np.testing.assert_array_equal(actual, expected)


def assert_matches_torch(t, ref, check_strides=True):
    """loom tensor t has torch tensor ref's shape, dtype, values and (optionally) strides."""
    assert tuple(t.shape) == tuple(ref.shape)
    assert DTYPE_NAMES[t.dtype] == str(ref.dtype).split(".", 1)[1]
    if check_strides:
        assert t.stride() == ref.stride(), (t.stride(), ref.stride())
    expected = ref.float().numpy() if str(ref.dtype) == "torch.bfloat16" else ref.numpy()
    np.testing.assert_array_equal(to_numpy(t), expected)


def storage_base(t):
    """The address of the storage element 0 of a tensor (data_ptr minus the offset)."""
    return t.data_ptr() - t.storage_offset() * t.element_size()


def allocated_bytes():
    gc.collect()
    return loom.memory_stats("cpu")["allocated_bytes"]


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture
def restore_default_dtype():
    """Tests that change the default dtype get it put back, pass or fail."""
    before = loom.get_default_dtype()
    yield
    loom.set_default_dtype(before)
    assert loom.get_default_dtype() is before


@pytest.fixture(autouse=True)
def _default_device_untouched():
    """No test may leak a changed default device (loom.set_default_device) into the next one."""
    yield
    after = loom.get_default_device()
    loom.set_default_device(None)
    assert after == loom.device("cpu"), f"the test changed the default device to {after} and did not restore it"


@pytest.fixture(autouse=True)
def _default_dtype_untouched():
    """No test may leak a changed default dtype into the next one: put it back and fail the test."""
    before = loom.get_default_dtype()
    yield
    after = loom.get_default_dtype()
    loom.set_default_dtype(before)
    assert after is before, f"the test changed the default dtype to {after} and did not restore it"
