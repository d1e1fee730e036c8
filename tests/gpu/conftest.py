"""The GPU suites: run where loom sees a GPU, skipped with the reason elsewhere (never passed)."""

import os
import sys

import pytest

import loom

# The programs shared with the host emulation of the CUDA lowering (tests/python).
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "perf"))


def pytest_collection_modifyitems(config, items):
    if loom.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"no GPU: {loom.cuda.unavailable_reason() or 'none found'}")
    for item in items:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def executor():
    """Every test starts on the default executor (fused, CUDA Graphs on) with no pending work."""
    loom._C._set_executor("compiled")
    yield
    loom._C._set_executor("compiled")
    if loom.cuda.is_available():
        loom.cuda.synchronize()
