"""Running a job of several loom processes in a test: each rank is `python3 _dist_workers.py CASE`
with torchrun's environment (MASTER_ADDR 127.0.0.1, a free MASTER_PORT, RANK, WORLD_SIZE,
LOCAL_RANK). Every process is reaped whatever happens: a job past its deadline is killed, and so
are the ranks still running when the test fails."""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import namedtuple

import pytest

import loom

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "_dist_workers.py")

Rank = namedtuple("Rank", ["rank", "returncode", "stdout", "stderr", "result"])


def _gloo_missing():
    import loom.distributed as dist

    return "" if dist.is_gloo_available() else loom._C._dist_unavailable("gloo")


# Tests that start gloo groups: skipped, saying why, in a build without Gloo (LOOM_GLOO=OFF, or
# no libgloo-dev at configure time); test_distributed.py checks what such a build says at use.
needs_gloo = pytest.mark.skipif(bool(_gloo_missing()), reason=f"no gloo backend: {_gloo_missing()}")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(case, world_size, deadline=60, env=None, args=()):
    """Runs `case` on `world_size` ranks; returns one Rank per rank (result: the JSON a rank wrote
    with _dist_workers.report, or None). Raises AssertionError when the job passes `deadline`."""
    with tempfile.TemporaryDirectory(prefix="loom-dist-") as out:
        base = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world_size),
                    LOOM_TEST_OUT=out, LOOM_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        base.update(env or {})
        procs = []
        try:
            for r in range(world_size):
                e = dict(base, RANK=str(r), LOCAL_RANK=str(r))
                procs.append(subprocess.Popen([sys.executable, WORKERS, case, *args], env=e, cwd=HERE,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                              start_new_session=True))
            end = time.monotonic() + deadline
            outputs = []
            for p in procs:
                try:
                    outputs.append(p.communicate(timeout=max(end - time.monotonic(), 0.1)))
                except subprocess.TimeoutExpired:
                    raise AssertionError(f"the {case} job on {world_size} ranks passed its {deadline} s deadline")
        finally:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        ranks = []
        for r, (p, (stdout, stderr)) in enumerate(zip(procs, outputs)):
            path = os.path.join(out, f"rank{r}.json")
            result = None
            if os.path.exists(path):
                with open(path) as f:
                    result = json.load(f)
            ranks.append(Rank(r, p.returncode, stdout, stderr, result))
        return ranks


def expect_success(ranks):
    for r in ranks:
        assert r.returncode == 0, f"rank {r.rank} exited with {r.returncode}:\n{r.stderr[-4000:]}"
    return [r.result for r in ranks]
