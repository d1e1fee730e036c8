"""Recording cost per op, alone: the fastest of many repeats of recording 2000 adds and muls on lazy
64x64 tensors that are never synced (no kernel runs), without and with autograd. The minimum is
the figure least moved by a loaded machine; run it alternately with another checkout's python."""
import time, loom, numpy as np
a = loom.tensor(np.ones((64, 64), np.float32), device="lazy")
b = loom.tensor(np.ones((64, 64), np.float32), device="lazy")
N = 2000
best = float("inf")
for rep in range(60):
    t0 = time.perf_counter()
    x = a
    for _ in range(N // 2):
        x = x + b
        x = x * b
    t1 = time.perf_counter()
    del x
    best = min(best, (t1 - t0) / N)
# The same with autograd recording (a leaf that requires grad).
w = loom.tensor(np.ones((64, 64), np.float32), device="lazy", requires_grad=True)
bestg = float("inf")
for rep in range(30):
    t0 = time.perf_counter()
    x = w
    for _ in range(N // 2):
        x = x + b
        x = x * b
    t1 = time.perf_counter()
    del x
    bestg = min(bestg, (t1 - t0) / N)
print(f"record {best*1e9:.0f} ns/op, with autograd {bestg*1e9:.0f} ns/op")
