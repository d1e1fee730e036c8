"""What the fusion suites share: running a program on a chosen executor, reading the sources the
executor dumps (LOOM_DUMP_DIR, graph/compiled.cpp) to check which kernel forms it took, and
running a program in fresh processes with different thread counts."""

import contextlib
import os
import subprocess
import sys
import textwrap

import loom


def run_lazy(program, arrays, executor):
    """program's results on the lazy device with `executor` ("fused", "unfused", "cuda-emulated",
    ...), as numpy arrays (float16 / bfloat16 read as float32, which holds them exactly)."""
    loom._C._set_executor(executor)
    try:
        outs = program(*[loom.tensor(a, device="lazy") for a in arrays])
        return [o.float().numpy() if o.dtype in (loom.float16, loom.bfloat16) else o.numpy() for o in outs]
    finally:
        loom._C._set_executor("compiled")


@contextlib.contextmanager
def dumping_to(directory):
    """Sets LOOM_DUMP_DIR to `directory` inside the block, and back to what it was after."""
    old = os.environ.get("LOOM_DUMP_DIR")
    os.environ["LOOM_DUMP_DIR"] = str(directory)
    try:
        yield directory
    finally:
        if old is None:
            del os.environ["LOOM_DUMP_DIR"]
        else:
            os.environ["LOOM_DUMP_DIR"] = old


def outputs_by_thread_count(tmp_path, code, counts=("1", "2", "3")):
    """The distinct standard outputs of `code` run in a new process with each LOOM_NUM_THREADS of
    `counts` (one kernel cache under tmp_path): one when results do not depend on the count."""
    outs = set()
    for threads in counts:
        env = dict(os.environ, LOOM_NUM_THREADS=threads, LOOM_CACHE_DIR=str(tmp_path / "cache"))
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        outs.add(done.stdout)
    return outs
