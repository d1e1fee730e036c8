"""Helpers of the test_programs_*.py suites: small training programs written for these tests, after
the patterns of well-known PyTorch example projects, each defined once inside a function whose
argument is the library (`torch` or `loom`), so the same program text runs under both. The tests
start both runs from PyTorch's initial weights and feed both the same data and the same random
draws (each library's generator is its own), then compare losses and weights."""

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "lazy"]


def load_from(theirs, mine, device="cpu"):
    """`mine` (a loom module) takes `theirs`' parameters and buffers, then moves to `device`."""
    mine.load_state_dict({k: loom.tensor(v.detach().cpu().numpy()) for k, v in theirs.state_dict().items()})
    return mine.to(device)


def tensor(lib, array, device=None):
    """A numpy array as a tensor of `lib` (on `device` when given)."""
    t = lib.tensor(array)
    return t.to(device) if device else t


def numpy_state(module):
    """A module's state_dict as float64 numpy arrays (either library, any device)."""
    return {k: v.detach().cpu().double().numpy() for k, v in module.state_dict().items()}


def assert_same_state(mine, theirs, rtol, atol=None):
    a, b = numpy_state(mine), numpy_state(theirs)
    assert a.keys() == b.keys()
    for k in b:
        np.testing.assert_allclose(a[k], b[k], rtol=rtol, atol=rtol if atol is None else atol, err_msg=k)


def assert_close(mine, theirs, tol):
    np.testing.assert_allclose(np.asarray(mine, dtype=np.float64), np.asarray(theirs, dtype=np.float64),
                               rtol=tol, atol=tol)


class Shim:
    """A library's names with some replaced: how a test hands a program draws it makes itself
    (loom's and PyTorch's generators differ) without editing the program."""

    def __init__(self, lib, **replaced):
        self._lib, self._replaced = lib, replaced

    def __getattr__(self, name):
        if name in self._replaced:
            return self._replaced[name]
        return getattr(self._lib, name)
