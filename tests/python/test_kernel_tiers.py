"""Kernels compiled at -O1 first and again at -O3 once their plan keeps running (rtc/kernel_units.h,
graph/compiled.cpp): the swap changes no result, later runs use the -O3 kernels, nothing counts as
compiled after warm-up, a warm disk cache serves the -O3 kernels at once, and a process exiting
during a background compile leaves no compiler running. Each case runs in a fresh process with
an empty cache folder, so the counters see every compile."""

import glob
import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

# A training step's kernel forms: a row softmax with a causal mask, a layer norm, GELU and its
# derivative, column sums of gradients, a split full reduction (over 2^15 elements).
PROGRAM = textwrap.dedent("""
    import json, os, sys, loom, numpy as np
    rng = np.random.default_rng(0)
    x = loom.tensor(rng.standard_normal((64, 32, 32)).astype(np.float32), requires_grad=True, device="lazy")
    w = loom.tensor(rng.standard_normal(32).astype(np.float32), requires_grad=True, device="lazy")
    mask = loom.tensor(np.tril(np.ones((32, 32), bool)), device="lazy")
    F = loom.nn.functional

    def step():
        s = F.softmax(x.masked_fill(~mask, float("-inf")), -1)
        h = F.gelu(F.layer_norm(s * w, (32,)))
        loss = (h * h).sum() + F.gelu(x, approximate="tanh").sum()
        loss.backward()
        values = [loss.numpy(), x.grad.numpy(), w.grad.numpy()]
        x.grad = None
        w.grad = None
        return [np.asarray(v).tobytes().hex() for v in values]

    def mapped_levels():
        # The -O flag of every kernel module this process has loaded now (its .key in the cache).
        levels = []
        cache = os.path.join(os.environ["LOOM_CACHE_DIR"], "cpu")
        for line in open("/proc/self/maps"):
            path = line.split()[-1]
            if path.startswith(cache) and path.endswith(".so") and path not in [p for p, _ in levels]:
                key = open(path[:-3] + ".key").read()
                levels.append((path, "-O3" if "flags: -O3 " in key else "-O1" if "flags: -O1 " in key else "?"))
        return sorted({level for _, level in levels})

    out = {"runs": [], "metrics": [], "mapped": []}
    for i in range(int(sys.argv[1])):
        out["runs"].append(step())
        if i == 1:
            loom._C._wait_for_optimized_kernels()
        out["metrics"].append({k: loom.metrics()[k] for k in ("kernels_compiled", "kernels_optimized",
                                                            "modules_loaded_from_disk")})
        out["mapped"].append(mapped_levels())
    print(json.dumps(out))
""")


def run(cache, runs=4, **env):
    full = dict(os.environ, LOOM_CACHE_DIR=str(cache), **env)
    done = subprocess.run([sys.executable, "-c", PROGRAM, str(runs)], capture_output=True, text=True, env=full,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def levels_on_disk(cache):
    found = []
    for key in glob.glob(str(cache / "cpu" / "*.key")):
        text = open(key).read()
        found.append("-O3" if "flags: -O3 " in text else "-O1" if "flags: -O1 " in text else "?")
    return sorted(found)


def test_a_plan_that_keeps_running_swaps_to_o3_kernels_with_identical_results(tmp_path):
    out = run(tmp_path / "cache")
    first, later = out["metrics"][0], out["metrics"][-1]
    assert first["kernels_compiled"] > 0 and first["kernels_optimized"] == 0
    # Run 2 queued the -O3 compile; after the wait every -O1 kernel ran at -O3 too...
    assert out["metrics"][1]["kernels_optimized"] > 0
    # ...and nothing was compiled for the runs themselves after the first.
    assert all(m["kernels_compiled"] == first["kernels_compiled"] for m in out["metrics"])
    assert all(m["kernels_optimized"] == out["metrics"][1]["kernels_optimized"] for m in out["metrics"][1:])
    # Before the swap the process ran -O1 kernels; after it only -O3 ones are loaded (the -O1
    # units were unloaded with the last run that held them).
    assert out["mapped"][0] == ["-O1"]
    assert out["mapped"][-1] == ["-O3"]
    # The same bits before and after the swap (losses and every gradient).
    assert all(r == out["runs"][0] for r in out["runs"]), "results changed when the kernels were swapped"
    assert "-O1" in levels_on_disk(tmp_path / "cache") and "-O3" in levels_on_disk(tmp_path / "cache")


def test_a_warm_disk_cache_serves_the_o3_kernels_at_once(tmp_path):
    cold = run(tmp_path / "cache")
    warm = run(tmp_path / "cache")
    assert warm["metrics"][-1]["kernels_compiled"] == 0 and warm["metrics"][-1]["kernels_optimized"] == 0
    assert warm["metrics"][0]["modules_loaded_from_disk"] > 0
    assert warm["mapped"][0] == ["-O3"]  # the first run already
    assert warm["runs"] == cold["runs"]


def test_without_the_quick_level_kernels_are_compiled_at_o3_once(tmp_path):
    quick = run(tmp_path / "quick")
    out = run(tmp_path / "cache", LOOM_QUICK_KERNELS="0")
    assert all(m["kernels_optimized"] == 0 for m in out["metrics"])
    assert out["metrics"][0]["kernels_compiled"] == quick["metrics"][0]["kernels_compiled"]
    assert set(levels_on_disk(tmp_path / "cache")) == {"-O3"}
    assert out["mapped"][0] == ["-O3"]
    assert out["runs"] == quick["runs"]


def test_a_bad_quick_kernels_setting_is_refused(tmp_path):
    full = dict(os.environ, LOOM_CACHE_DIR=str(tmp_path), LOOM_QUICK_KERNELS="yes")
    done = subprocess.run([sys.executable, "-c", PROGRAM, "1"], capture_output=True, text=True, env=full, timeout=300)
    assert done.returncode != 0 and "LOOM_QUICK_KERNELS must be 0 or 1, not 'yes'" in done.stderr


THREADS = textwrap.dedent("""
    import json, sys, threading, loom, numpy as np
    rng = np.random.default_rng(1)
    data = rng.standard_normal((256, 64)).astype(np.float32)

    def step(x):
        return ((x.softmax(-1) * 3 - x).exp().sum(0) + x.amax(1).sum()).numpy().tobytes().hex()

    expected = step(loom.tensor(data, device="lazy"))
    bad = []

    def worker():
        x = loom.tensor(data, device="lazy")
        for _ in range(60):
            got = step(x)
            if got != expected:
                bad.append(got)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    loom._C._wait_for_optimized_kernels()
    m = loom.metrics()
    print(json.dumps({"bad": len(bad), "optimized": m["kernels_optimized"], "after": step(loom.tensor(data, device="lazy")) == expected}))
""")


def test_the_swap_under_threads_running_the_plan_changes_no_result(tmp_path):
    env = dict(os.environ, LOOM_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", THREADS], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out == {"bad": 0, "optimized": out["optimized"], "after": True} and out["optimized"] > 0, out


SLOW_COMPILER = """#!/bin/sh
# Waits before compiling at -O3, after writing its process id where the test reads it.
for a in "$@"; do [ "$a" = "-O3" ] && {{ echo $$ >> {pids}; sleep {seconds}; }}; done
exec g++ "$@"
"""


def test_exiting_during_a_background_compile_stops_the_compiler(tmp_path):
    pids = tmp_path / "pids"
    compiler = tmp_path / "slow-cxx"
    compiler.write_text(SLOW_COMPILER.format(pids=pids, seconds=60))
    compiler.chmod(0o755)
    program = textwrap.dedent("""
        import loom, numpy as np, time, os
        x = loom.tensor(np.ones((8, 8), np.float32), device="lazy")
        for _ in range(2):
            (x.exp() * 2).sum(0).numpy()   # the second run queues the -O3 compile
        while not os.path.exists(os.environ["PIDS"]):
            time.sleep(0.05)
        print("exiting", flush=True)
    """)
    env = dict(os.environ, LOOM_CACHE_DIR=str(tmp_path / "cache"), LOOM_CXX=str(compiler), PIDS=str(pids))
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 30, "exit waited for the background compile"
    pid = int(pids.read_text().split()[0])
    time.sleep(0.2)
    try:  # the compiler's process group was killed: gone, or a zombie waiting to be reaped
        state = [line for line in open(f"/proc/{pid}/status") if line.startswith("State:")][0]
        assert "Z" in state.split()[1], state
    except FileNotFoundError:
        pass
    assert "-O3" not in levels_on_disk(tmp_path / "cache")  # nothing half-made was cached


def test_clearing_the_plan_cache_during_a_background_compile_unloads_the_plans_modules(tmp_path):
    # The -O3 compile of a plan that ran twice is in flight (the compiler waits 5 s) when the plan
    # cache is cleared: the plan's -O1 modules are unloaded at once (the compile holds their
    # sources, not them), the -O3 ones it finishes later are not kept loaded for a plan that is
    # gone, and running the program again loads the -O3 ones from the disk cache, compiling
    # nothing. (An in-flight compile used to keep the -O1 modules loaded until it ended, so a
    # trace lowered again right after a clear found them in memory.)
    pids = tmp_path / "pids"
    compiler = tmp_path / "slow-cxx"
    compiler.write_text(SLOW_COMPILER.format(pids=pids, seconds=5))
    compiler.chmod(0o755)
    program = textwrap.dedent("""
        import json, os, time, loom, numpy as np

        def mapped_levels():
            cache = os.path.join(os.environ["LOOM_CACHE_DIR"], "cpu")
            found = set()
            for line in open("/proc/self/maps"):
                path = line.split()[-1]
                if path.startswith(cache) and path.endswith(".so"):
                    found.add("-O3" if "flags: -O3 " in open(path[:-3] + ".key").read() else "-O1")
            return sorted(found)

        x = loom.tensor(np.linspace(-3, 3, 64 * 64, dtype=np.float32).reshape(64, 64), device="lazy")

        def step():
            return (x.softmax(-1) * 3 + x.exp()).sum(0).numpy().tobytes().hex()

        first = step()
        step()  # the second run queues the -O3 compile
        while not os.path.exists(os.environ["PIDS"]):
            time.sleep(0.02)
        out = {"before_clear": mapped_levels()}
        loom.clear_plan_cache()
        out["cleared"] = mapped_levels()
        out["optimized_at_clear"] = loom.metrics()["kernels_optimized"]
        loom._C._wait_for_optimized_kernels()
        out["after_compile"] = mapped_levels()
        m = loom.metrics()
        out["optimized"] = m["kernels_optimized"]
        out["same"] = step() == first
        again = loom.metrics()
        out["compiled_again"] = again["kernels_compiled"] - m["kernels_compiled"]
        out["loaded_from_disk"] = again["modules_loaded_from_disk"] - m["modules_loaded_from_disk"]
        out["rerun"] = mapped_levels()
        print(json.dumps(out))
    """)
    env = dict(os.environ, LOOM_CACHE_DIR=str(tmp_path / "cache"), LOOM_CXX=str(compiler), PIDS=str(pids))
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["before_clear"] == ["-O1"], out
    assert out["optimized_at_clear"] == 0, out  # the compile was still running at the clear
    assert out["cleared"] == [], out
    assert out["optimized"] > 0 and out["after_compile"] == [], out
    assert out["same"] and out["compiled_again"] == 0 and out["loaded_from_disk"] > 0, out
    assert out["rerun"] == ["-O3"], out
