"""The plan cache (graph/plan_cache.h): one process-wide cache of every executor's plans, bounded
by bytes per device (LOOM_PLAN_CACHE_MB) and by entries (LOOM_PLAN_CACHE_ENTRIES), least
recently used evicted first; loom.clear_plan_cache(); its counters in loom.metrics().

The scenario behind it: a program run at many batch sizes makes one plan (and one arena) per
batch size. Without a bound, 2,000 batch sizes grew a process from 218 MiB to 3.2 GiB."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import loom

MiB = 1 << 20
DEPTH, WIDTH = 16, 256


@pytest.fixture
def limits():
    """Sets the plan cache's bounds for one test (on an empty cache) and restores them after."""
    old = loom._C._plan_cache_limits()
    loom.clear_plan_cache()

    def set_limits(megabytes=None, entries=None):
        loom._C._plan_cache_limits(None if megabytes is None else int(megabytes * MiB), entries)

    yield set_limits
    loom._C._set_executor("compiled")
    loom._C._plan_cache_limits(*old)
    loom.clear_plan_cache()


def weights():
    return np.random.default_rng(0).standard_normal((DEPTH, WIDTH)).astype(np.float32) / 4


def program(x, w):
    """A small step: a product, then elementwise and row work whose intermediates live in the
    plan's arena (a few times batch * WIDTH * 4 bytes)."""
    return ((x @ w).relu() * 2 + 1).softmax(-1).sum(0)


def expected(x, w):
    y = np.maximum(x.astype(np.float64) @ w, 0) * 2 + 1
    e = np.exp(y - y.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).sum(0)


def run_at(batch, w, device="lazy:cpu"):
    """The program at one batch size (a distinct trace per batch size), checked against numpy."""
    x = np.random.default_rng(batch).standard_normal((batch, DEPTH)).astype(np.float32)
    got = program(loom.tensor(x, device=device), loom.tensor(w, device=device)).cpu().numpy()
    np.testing.assert_allclose(got, expected(x, w), rtol=1e-4, atol=1e-4)


def reserved():
    return loom.memory_stats()["reserved_bytes"]


def delta(before, after, *names):
    return {n: after[n] - before[n] for n in names}


@pytest.mark.parametrize("executor", ["compiled", "cuda-emulated"])
def test_many_distinct_traces_hold_bounded_memory(limits, executor):
    # 400 batch sizes: unbounded, their arenas would hold about 0.4 GiB. With a 16 MiB bound the
    # allocator's reserved bytes stay near the bound, and so does the cache's own count.
    loom._C._set_executor(executor)
    limits(megabytes=16, entries=10_000)
    w = weights()
    run_at(8, w)
    loom.empty_cache()
    base = reserved()
    peak_held = peak_reserved = 0
    before = loom.metrics()
    for batch in range(16, 16 + 400):
        run_at(batch, w)
        m = loom.metrics()
        peak_held = max(peak_held, m["plan_cache_bytes"])
        peak_reserved = max(peak_reserved, reserved() - base)
    after = loom.metrics()
    assert delta(before, after, "graph_cache_misses")["graph_cache_misses"] == 400
    assert after["plan_cache_evictions"] - before["plan_cache_evictions"] > 300
    assert 0 < peak_held <= 16 * MiB
    # What the bound allows, the last plan, and the run's own outputs and inputs (a few MiB).
    assert peak_reserved <= 16 * MiB + 8 * MiB, peak_reserved / MiB


def test_an_evicted_plan_is_lowered_again_without_compiling(limits):
    limits(entries=2)
    w = weights()
    run_at(40, w)
    run_at(50, w)
    before = loom.metrics()
    run_at(60, w)  # evicts the plan of 40, the least recently used
    run_at(50, w)  # a hit, so 60 becomes the least recently used but one
    run_at(40, w)  # lowered again: its module is still loaded (the plans of 50 and 60 share it)
    after = loom.metrics()
    assert delta(before, after, "graph_cache_misses", "graph_cache_hits", "plan_cache_evictions",
                 "kernels_compiled", "modules_loaded_from_disk") == {
        "graph_cache_misses": 2, "graph_cache_hits": 1, "plan_cache_evictions": 2, "kernels_compiled": 0,
        "modules_loaded_from_disk": 0}
    assert after["plan_cache_entries"] == 2
    run_at(60, w)  # evicted by 40's return: 40 and 50 are cached now
    assert loom.metrics()["graph_cache_misses"] == after["graph_cache_misses"] + 1


def test_clear_plan_cache_frees_arenas_and_modules(limits):
    limits(megabytes=1024, entries=1000)
    w = weights()
    for batch in range(100, 140):
        run_at(batch, w)
    held = loom.metrics()["plan_cache_bytes"]
    assert loom.metrics()["plan_cache_entries"] == 40 and held > 40 * 100 * WIDTH * 4
    loom.empty_cache()
    before = reserved()
    loom.clear_plan_cache()
    m = loom.metrics()
    assert m["plan_cache_entries"] == 0 and m["plan_cache_bytes"] == 0
    loom.empty_cache()
    assert before - reserved() >= held
    # The module went with the last plan that used it: lowering again loads it from the disk
    # cache and compiles nothing.
    before = loom.metrics()
    run_at(100, w)
    after = loom.metrics()
    assert after["kernels_compiled"] == before["kernels_compiled"]
    assert after["modules_loaded_from_disk"] > before["modules_loaded_from_disk"]
    assert after["graph_cache_misses"] == before["graph_cache_misses"] + 1


def test_metrics_count_evictions_and_reset_leaves_the_cache_state(limits):
    limits(entries=3)
    w = weights()
    loom.metrics_reset()
    for batch in range(20, 25):
        run_at(batch, w)
    m = loom.metrics()
    assert (m["plan_cache_entries"], m["plan_cache_evictions"]) == (3, 2)
    loom.metrics_reset()
    m = loom.metrics()
    assert (m["plan_cache_entries"], m["plan_cache_evictions"]) == (3, 0)
    assert m["plan_cache_bytes"] > 0
    limits(entries=1)  # lowering a bound evicts at once
    m = loom.metrics()
    assert (m["plan_cache_entries"], m["plan_cache_evictions"]) == (1, 2)


def test_a_plan_bigger_than_the_bound_still_runs(limits):
    limits(megabytes=0)
    w = weights()
    for _ in range(2):
        run_at(300, w)
        run_at(301, w)
    m = loom.metrics()
    assert m["plan_cache_entries"] == 1  # only the plan inserted last


def test_plans_of_different_executors_are_separate_entries(limits):
    # One cache for every executor; each executor's plans are its own (fused and unfused lower
    # one trace differently).
    w = weights()
    loom._C._set_executor("fused")
    run_at(30, w)
    loom._C._set_executor("unfused")
    run_at(30, w)
    loom._C._set_executor("cuda-emulated")
    run_at(30, w)
    assert loom.metrics()["plan_cache_entries"] == 3


def test_threads_share_the_cache(limits):
    # Syncs from several threads look plans up, insert and evict at once (a bound of 3 plans for
    # 8 batch sizes); every result stays right.
    limits(entries=3)
    w = weights()
    errors = []

    def work(first):
        try:
            for i in range(12):
                run_at(first + i % 8, w)
        except Exception as e:  # noqa: BLE001  reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(64 + 3 * k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert loom.metrics()["plan_cache_entries"] <= 3


def run_python(code, **env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)


def test_environment_knobs():
    code = ("import loom, numpy as np\n"
            "for b in range(3, 9): (loom.ones(b, 4, device='lazy:cpu') * 2).sum().item()\n"
            "m = loom.metrics(); print(m['plan_cache_entries'], m['plan_cache_evictions'], loom._C._plan_cache_limits())")
    r = run_python(code, LOOM_PLAN_CACHE_ENTRIES="2", LOOM_PLAN_CACHE_MB="5")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "4", "(5242880,", "2)"]
    r = run_python(code, LOOM_PLAN_CACHE_MB="lots")
    assert r.returncode != 0
    assert "LOOM_PLAN_CACHE_MB must be a non-negative integer" in r.stderr and "'lots'" in r.stderr
