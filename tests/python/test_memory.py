"""The CPU caching allocator as seen from Python: loom.memory_stats, empty_cache, peaks, reuse."""

import gc

import numpy as np
import pytest

import loom

KEYS = {"allocated_bytes", "requested_bytes", "reserved_bytes", "peak_allocated_bytes", "peak_reserved_bytes",
        "active_blocks", "num_allocations", "num_cache_hits", "num_system_allocations", "num_system_frees"}


def stats():
    gc.collect()
    return loom.memory_stats("cpu")


def test_memory_stats_keys_and_types():
    s = loom.memory_stats()
    assert set(s) == KEYS
    assert all(isinstance(v, int) and v >= 0 for v in s.values())
    assert loom.memory_stats("cpu") == loom.memory_stats(loom.device("cpu")) == loom.memory_stats()
    assert s["reserved_bytes"] >= s["allocated_bytes"] >= s["requested_bytes"] >= 0
    assert s["peak_allocated_bytes"] >= s["allocated_bytes"]
    assert s["peak_reserved_bytes"] >= s["reserved_bytes"]


@pytest.mark.parametrize("dtype,numel", [(loom.float32, 1000), (loom.float64, 12345), (loom.uint8, 7),
                                         (loom.bfloat16, 4096), (loom.bool, 1), (loom.int64, 0)])
def test_allocation_counts_up_and_returns_after_del(dtype, numel):
    before = stats()
    t = loom.empty(numel, dtype=dtype)
    during = stats()
    nbytes = numel * dtype.itemsize
    assert during["requested_bytes"] - before["requested_bytes"] == nbytes
    assert during["allocated_bytes"] - before["allocated_bytes"] >= nbytes
    assert during["allocated_bytes"] - before["allocated_bytes"] <= max(64, nbytes * 5 // 4)
    assert during["active_blocks"] == before["active_blocks"] + 1
    assert during["num_allocations"] == before["num_allocations"] + 1
    assert during["reserved_bytes"] >= during["allocated_bytes"]
    del t
    after = stats()
    assert after["allocated_bytes"] == before["allocated_bytes"]
    assert after["requested_bytes"] == before["requested_bytes"]
    assert after["active_blocks"] == before["active_blocks"]
    # Freed memory stays cached by the allocator rather than going back to the system.
    assert after["reserved_bytes"] == during["reserved_bytes"]


def test_views_do_not_allocate():
    t = loom.zeros(100, 100)
    before = stats()
    views = [t.t(), t[1:], t.view(-1), t.unsqueeze(0).expand(3, 100, 100), t[5], t.reshape(10, 1000), t.detach()]
    after = stats()
    assert after["num_allocations"] == before["num_allocations"]
    assert after["allocated_bytes"] == before["allocated_bytes"]
    del views


def test_views_keep_storage_alive():
    before = stats()
    t = loom.zeros(1000)
    v = t[10:20]
    del t
    assert stats()["allocated_bytes"] > before["allocated_bytes"]
    assert v.tolist() == [0.0] * 10
    del v
    assert stats()["allocated_bytes"] == before["allocated_bytes"]


def test_copies_allocate():
    t = loom.zeros(100, 100)
    before = stats()
    c = t.t().contiguous()
    r = t.t().reshape(-1)
    d = t.double()
    after = stats()
    assert after["num_allocations"] == before["num_allocations"] + 3
    del c, r, d
    assert stats()["allocated_bytes"] == before["allocated_bytes"]


def test_freed_block_is_reused():
    t = loom.empty(50_000)
    ptr = t.data_ptr()
    del t
    before = stats()
    u = loom.empty(50_000)
    after = stats()
    assert after["num_cache_hits"] == before["num_cache_hits"] + 1
    assert after["num_system_allocations"] == before["num_system_allocations"]
    assert after["reserved_bytes"] == before["reserved_bytes"]
    assert u.data_ptr() == ptr  # the very same memory
    del u


def test_same_size_class_is_reused():
    # Requests are rounded to size classes; a slightly smaller request reuses the freed block.
    t = loom.empty(100_000, dtype=loom.uint8)
    ptr = t.data_ptr()
    del t
    before = stats()
    u = loom.empty(99_990, dtype=loom.uint8)
    assert stats()["num_cache_hits"] == before["num_cache_hits"] + 1
    assert u.data_ptr() == ptr


def test_empty_cache_returns_reserved_memory():
    tensors = [loom.empty(200_000) for _ in range(4)]
    del tensors
    before = stats()
    assert before["reserved_bytes"] - before["allocated_bytes"] >= 4 * 800_000
    loom.empty_cache()
    after = stats()
    assert after["reserved_bytes"] <= before["reserved_bytes"] - 4 * 800_000
    assert after["reserved_bytes"] == after["allocated_bytes"]  # nothing cached any more
    assert after["num_system_frees"] >= before["num_system_frees"] + 4
    assert after["allocated_bytes"] == before["allocated_bytes"]
    # Allocation after empty_cache goes to the system again.
    t = loom.empty(200_000)
    assert stats()["num_system_allocations"] == after["num_system_allocations"] + 1
    del t


def test_empty_cache_keeps_live_tensors():
    t = loom.arange(1000.0)
    loom.empty_cache()
    assert t.tolist()[-1] == 999.0
    assert stats()["allocated_bytes"] >= 4000


def test_peak_stats_and_reset():
    loom.reset_peak_memory_stats()
    base = stats()
    assert base["peak_allocated_bytes"] == base["allocated_bytes"]
    t = loom.empty(300_000)
    del t
    s = stats()
    assert s["peak_allocated_bytes"] >= base["allocated_bytes"] + 1_200_000
    assert s["allocated_bytes"] == base["allocated_bytes"]
    loom.reset_peak_memory_stats()
    s = stats()
    assert s["peak_allocated_bytes"] == s["allocated_bytes"]
    assert s["peak_reserved_bytes"] == s["reserved_bytes"]


def test_numpy_backed_tensors_do_not_use_the_allocator():
    before = stats()
    a = np.zeros(100_000)
    t = loom.from_numpy(a)
    v = t[10:]
    after = stats()
    assert after["num_allocations"] == before["num_allocations"]
    assert after["allocated_bytes"] == before["allocated_bytes"]
    del t, v


def test_many_allocations_do_not_leak():
    before = stats()
    for i in range(200):
        t = loom.rand(i % 17 + 1, 33)
        u = t.t().contiguous().double()
        _ = repr(u[:2])
        _ = u.numpy().sum()
        del t, u
    after = stats()
    assert after["allocated_bytes"] == before["allocated_bytes"]
    assert after["active_blocks"] == before["active_blocks"]
    assert after["num_cache_hits"] > before["num_cache_hits"]


def test_memory_stats_bad_device():
    with pytest.raises(RuntimeError):
        loom.memory_stats("gpu")
    if not loom.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            loom.memory_stats("cuda")
