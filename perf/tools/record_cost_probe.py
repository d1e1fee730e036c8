"""Recording cost per op, alone: the fastest of many repeats of recording 2000 adds and muls on lazy
64x64 tensors that are never synced (no kernel runs), without and with autograd. The minimum is
the figure least moved by a loaded machine; run it alternately with another checkout's python."""
import time

import numpy as np

import loom

a = loom.tensor(np.ones((64, 64), np.float32), device="lazy")
b = loom.tensor(np.ones((64, 64), np.float32), device="lazy")
N = 2000


def fastest_record(start, repeats):
    """Seconds per op of recording N alternating adds and muls from `start`, the fastest of repeats."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        x = start
        for _ in range(N // 2):
            x = x + b
            x = x * b
        best = min(best, (time.perf_counter() - t0) / N)
        del x
    return best


best = fastest_record(a, 60)
# The same with autograd recording (from a leaf that requires grad).
bestg = fastest_record(loom.tensor(np.ones((64, 64), np.float32), device="lazy", requires_grad=True), 30)
print(f"record {best*1e9:.0f} ns/op, with autograd {bestg*1e9:.0f} ns/op")
