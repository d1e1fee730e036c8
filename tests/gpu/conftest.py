"""The GPU suites: run where loom sees a GPU, skipped with the reason elsewhere (never passed).
With LOOM_REQUIRE_GPU=1 (tests/gpu/check.sh sets it) a machine where loom sees no GPU is an
error instead: on a GPU machine, a skipped suite must not read as a pass."""

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
    reason = f"no GPU: {loom.cuda.unavailable_reason() or 'none found'}"
    if os.environ.get("LOOM_REQUIRE_GPU") == "1":
        raise pytest.UsageError(f"LOOM_REQUIRE_GPU=1, but loom sees no GPU ({reason})")
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def executor():
    """Every test starts on the default executor (fused, CUDA Graphs on) with no pending work, and
    a CUDA Graph capture that fails raises (LOOM_CUDA_GRAPHS=strict) instead of falling back to
    direct launches: these suites must see the graphs they count, and the reason when one fails."""
    loom._C._set_executor("compiled")
    strict = loom._C._set_strict_cuda_graphs(True)
    yield
    loom._C._set_strict_cuda_graphs(strict)
    loom._C._set_executor("compiled")
    if loom.cuda.is_available():
        loom.cuda.synchronize()
