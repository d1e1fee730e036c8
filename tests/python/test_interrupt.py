"""Ctrl-C stops a long sync (runtime/blocking.h, pyext/embedding.cpp): SIGINT during a sync on the
main thread raises KeyboardInterrupt from the sync within a step of the trace, and the interrupted
sync changes nothing (lazy/sync.h): the tensor it would have written keeps its value and stays
usable, the fresh results raise KeyboardInterrupt when read. A SIGINT handler that does not raise
lets the sync finish.

Each case runs in a subprocess whose helper thread sends the signal once the trace is running (it
watches the launch counter, which it can read because the sync released the GIL)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(r"""
    import json, os, signal, sys, threading
    import numpy as np
    import loom

    mode, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    p = loom.ones(4, device="lazy")
    loom.sync()

    def step(n, k):
        w = loom.tensor(np.eye(n, dtype=np.float32), device="lazy")
        y = loom.ones(n, n, device="lazy")
        for _ in range(k):
            y = y @ w  # k products: library steps, checked for an interrupt before each
        p.add_(y.sum() * 0 + 1)
        return y

    step(4, k)  # the same kernels, compiled before the long sync (shapes are not in the source)
    p.tolist()
    before = p.tolist()
    hits = []
    if mode == "custom":
        signal.signal(signal.SIGINT, lambda *_: hits.append(1))  # a handler that does not raise
    out = {"k": k}

    def interrupter(start):
        while loom.metrics()["kernel_launches"] < start + 3:  # the trace is running
            pass
        # The count is read after the signal is sent (delivered before os.kill returns): read
        # before, launches made between the read and the kill would count against the sync.
        os.kill(os.getpid(), signal.SIGINT)
        out["launches_at_signal"] = loom.metrics()["kernel_launches"]

    y = step(n, k)
    start = loom.metrics()["kernel_launches"]
    thread = threading.Thread(target=interrupter, args=(start,))
    thread.start()
    try:
        p.tolist()
        out["interrupted"] = False
    except KeyboardInterrupt:
        out["interrupted"] = True
    out["launches_at_stop"] = loom.metrics()["kernel_launches"]
    out["start"] = start
    thread.join()
    out["hits"] = len(hits)
    out["before"], out["p"] = before, p.tolist()
    try:
        y.sum().item()
        out["fresh"] = "value"
    except KeyboardInterrupt:
        out["fresh"] = "KeyboardInterrupt"
    p.add_(1)
    out["p_after_add"] = p.tolist()
    print(json.dumps(out))
""")


def run(mode, n=128, k=4000):
    env = dict(os.environ)
    result = subprocess.run([sys.executable, "-c", SCRIPT, mode, str(n), str(k)], capture_output=True, text=True,
                            timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_ctrl_c_stops_a_long_sync_and_changes_nothing():
    out = run("default")
    assert out["interrupted"]
    # Stopped promptly: within the step running when the signal came (and the check before the next).
    ran = out["launches_at_stop"] - out["start"]
    assert ran < out["k"]
    assert out["launches_at_stop"] - out["launches_at_signal"] <= 2, out
    assert out["p"] == out["before"]  # the write it would have made: not made, readable
    assert out["fresh"] == "KeyboardInterrupt"  # its fresh results were not computed
    assert out["p_after_add"] == [x + 1 for x in out["before"]]  # and the tensor is usable


def test_a_sigint_handler_that_does_not_raise_lets_the_sync_finish():
    out = run("custom", k=400)
    assert not out["interrupted"] and out["hits"] == 1
    assert out["launches_at_stop"] - out["start"] >= out["k"]
    assert out["p"] == [x + 1 for x in out["before"]]
    assert out["fresh"] == "value"
