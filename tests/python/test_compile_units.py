"""Cold start: kernels compiled once per process, a plan's new kernels compiled in parallel units
(rtc/kernel_units.h). Each case runs in a fresh process with an empty cache folder, so the
counters see every compile."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

PROGRAM = textwrap.dedent("""
    import json, sys, loom, numpy as np
    x = loom.tensor(np.linspace(-2, 2, 48, dtype=np.float32).reshape(6, 8), device="lazy")
    out = {}

    def compiled(step):
        loom.metrics_reset()
        values = [t.tolist() for t in step()]
        return values, loom.metrics()["kernels_compiled"]

    # Three kernels of different domains (columns, rows, everything) in one trace.
    first = lambda: [(x * 2 + 1).exp().sum(0), x.amax(1), (x * x).sum()]
    # Another trace: two of those kernels again (the same text), one new.
    second = lambda: [(x * 2 + 1).exp().sum(0), x.amax(1), (x - 1).abs().sum()]
    out["first"], out["first_compiled"] = compiled(first)
    out["second"], out["second_compiled"] = compiled(second)
    print(json.dumps(out))
""")


def run(tmp_path, threads):
    cache = tmp_path / f"cache-{threads}"
    env = dict(os.environ, LOOM_CACHE_DIR=str(cache), LOOM_NUM_THREADS=str(threads))
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), cache


def test_kernels_compiled_for_an_earlier_module_are_not_compiled_again(tmp_path):
    out, _ = run(tmp_path, 1)
    assert out["first_compiled"] == 3
    assert out["second_compiled"] == 1  # only the new kernel
    x = np.linspace(-2, 2, 48, dtype=np.float32).reshape(6, 8)
    np.testing.assert_allclose(out["second"][0], np.exp(x * 2 + 1).sum(0), rtol=1e-5)
    np.testing.assert_allclose(out["second"][1], x.max(1), rtol=0)
    np.testing.assert_allclose(out["second"][2], np.abs(x - 1).sum(), rtol=1e-5)


def test_new_kernels_compile_in_one_unit_per_thread_with_the_same_results(tmp_path):
    one, cache_one = run(tmp_path, 1)
    two, cache_two = run(tmp_path, 2)
    assert one == two  # the same values and compile counts, however the kernels were grouped
    # Modules on disk: one per unit. One thread: one unit per trace; two threads: the first
    # trace's three kernels in two units, the second trace's one new kernel in one.
    assert len(list((cache_one / "cpu").glob("*.so"))) == 2
    assert len(list((cache_two / "cpu").glob("*.so"))) == 3


def test_a_new_process_loads_every_unit_from_disk(tmp_path):
    run(tmp_path, 2)
    again, _ = run(tmp_path, 2)  # the same cache folder: the same units, found on disk
    assert again["first_compiled"] == 0 and again["second_compiled"] == 0
