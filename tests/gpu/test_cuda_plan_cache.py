"""The bounded plan cache on a GPU (graph/plan_cache.h): lazy traces and eager ops' one-node plans
are evicted under the bounds, an evicted plan's private pool goes back to the device at once, a
plan lowered again after eviction captures and replays its graph correctly, and clearing
unloads the modules no plan uses (they come back from the disk cache, not the compiler)."""

import numpy as np

import loom

from test_plan_cache import MiB, limits  # noqa: F401  the fixture that sets the bounds for a test


def step(batch, w, runs=3):
    """A lazy step at one batch size, run `runs` times (direct, capture, replay), checked."""
    x = np.random.default_rng(batch).standard_normal((batch, 64)).astype(np.float32)
    want = np.maximum(x.astype(np.float64) @ w, 0).sum(0)
    for _ in range(runs):
        got = (loom.tensor(x, device="lazy:cuda") @ loom.tensor(w, device="lazy:cuda")).relu().sum(0).cpu().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def test_lazy_plans_are_evicted_and_their_pools_released(limits):
    limits(megabytes=8, entries=10_000)
    w = np.random.default_rng(0).standard_normal((64, 512)).astype(np.float32) / 8
    step(16, w)
    loom.cuda.synchronize()
    loom.cuda.empty_cache()
    base = loom.cuda.memory_reserved()
    before = loom.metrics()
    for batch in range(32, 32 + 120):
        step(batch, w, runs=1)
        assert loom.cuda.memory_reserved() - base <= 8 * MiB + 16 * MiB
    after = loom.metrics()
    assert after["plan_cache_evictions"] > before["plan_cache_evictions"]
    assert after["plan_cache_bytes"] <= 8 * MiB
    # Evicted and lowered again: a fresh capture, replays right, nothing compiled.
    step(32, w)
    assert loom.metrics()["kernels_compiled"] == after["kernels_compiled"]


def test_eager_one_node_plans_are_evicted(limits):
    limits(entries=4)
    before = loom.metrics()
    for n in range(1, 40):
        a = np.arange(n, dtype=np.float32)
        got = (loom.tensor(a, device="cuda") * 3).cpu().numpy()
        np.testing.assert_array_equal(got, a * 3)
    after = loom.metrics()
    assert after["plan_cache_entries"] <= 4
    assert after["plan_cache_evictions"] - before["plan_cache_evictions"] >= 30


def test_clear_unloads_modules_and_lowering_again_loads_them_from_disk(limits):
    w = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32)
    step(20, w)
    loom.cuda.synchronize()
    loom.clear_plan_cache()
    assert loom.metrics()["plan_cache_entries"] == 0
    before = loom.metrics()
    step(20, w)
    after = loom.metrics()
    assert after["kernels_compiled"] == before["kernels_compiled"]
    assert after["modules_loaded_from_disk"] > before["modules_loaded_from_disk"]
