"""The thread pool on a machine that refuses threads, and LOOM_NUM_THREADS (issue 12, item 4).

A pool that cannot start every worker it asks for runs with the ones it started and warns once,
instead of crashing or hanging the first op (runtime/thread_pool.h). The child processes below
make thread creation fail for real: an address-space limit (RLIMIT_AS, which binds root too,
unlike RLIMIT_NPROC) leaves room for only a few thread stacks. tests/cpp/test_thread_pool.cpp
checks the same through a thread-starting seam.
"""

import os
import resource
import subprocess
import sys
import textwrap

import pytest

# Runs a kernel large enough to be split over threads (so it needs the pool) after an
# address-space limit that leaves room for only a few 64 MiB thread stacks. The kernel is
# compiled first at a size that is not split, before the limit (the compiler needs far more
# address space than the limit leaves); the large run then reuses it.
LIMITED = textwrap.dedent("""
    import resource, sys
    import numpy as np
    import loom
    def run(n):
        x = loom.arange(n, dtype=loom.float32, device="lazy")
        return ((x * 0.5 + 1.0).sqrt() * 2.0).numpy()
    run(1000)
    n = 4 * 2**20
    # The reference, before the limit: the limit leaves room for the pool's stacks and loom's
    # data, and numpy's temporaries would pass it or not by a few KiB of heap layout.
    expected = (np.sqrt(np.arange(n, dtype=np.float32) * np.float32(0.5) + np.float32(1.0)) * np.float32(2.0))
    def vm_bytes():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    limit = vm_bytes() + 320 * 2**20   # data (32 MiB) + about 3 stacks of 64 MiB
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    threads = loom.get_num_threads()
    got = run(n)
    print(threads, bool((got == expected).all()))
""")


def stack_64mib():
    resource.setrlimit(resource.RLIMIT_STACK, (64 * 2**20, resource.getrlimit(resource.RLIMIT_STACK)[1]))


def run_child(program, env_extra, preexec=None, timeout=300):
    env = dict(os.environ, MALLOC_ARENA_MAX="1", OPENBLAS_NUM_THREADS="1", **env_extra)
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env,
                          preexec_fn=preexec, timeout=timeout)


def test_a_pool_the_system_limits_runs_on_fewer_threads_and_warns_once(tmp_path):
    done = run_child(LIMITED, {"LOOM_NUM_THREADS": "64", "LOOM_CACHE_DIR": str(tmp_path)}, preexec=stack_64mib,
                     timeout=150)  # the pool it replaced hung here
    assert done.returncode == 0, done.stderr
    threads, correct = done.stdout.split()
    assert 1 <= int(threads) < 64, done.stdout
    assert correct == "True"
    warnings = [line for line in done.stderr.splitlines() if "worker threads" in line]
    assert len(warnings) == 1, done.stderr
    assert "RuntimeWarning: " in warnings[0] and f"run on {threads} threads instead of 64" in warnings[0]


@pytest.mark.parametrize("value", ["abc", "0", "-3", "4x", "2.5", "99999999999999999999", "100000"])
def test_a_bad_loom_num_threads_fails_the_import_clearly(value):
    done = run_child("import loom", {"LOOM_NUM_THREADS": value}, timeout=120)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ValueError:") and f"LOOM_NUM_THREADS='{value}'" in last, done.stderr
    assert "from 1 to 1024" in last


@pytest.mark.parametrize("value, threads", [("1", 1), (" 3 ", 3), ("", None)])
def test_good_loom_num_threads(value, threads):
    done = run_child("import loom; print(loom.get_num_threads())", {"LOOM_NUM_THREADS": value}, timeout=120)
    assert done.returncode == 0, done.stderr
    if threads is None:
        threads = os.cpu_count()
    assert int(done.stdout) == threads
