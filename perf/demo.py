"""What loom can do today, shown side by side with numpy and PyTorch.

Run by scripts/demo. It prints tensors in PyTorch's format, shows that views and numpy/DLPack
exchange share memory instead of copying, shows the caching allocator at work, and measures the
per-call cost of the Python layer on small tensors (the cost that dominates small-op loops)
against PyTorch and numpy, interleaving repeats so machine drift hits every library alike.

The eager-versus-lazy harness of BENCH.md replaces this once the op library and the lazy
executor exist.
"""

import argparse
import statistics
import sys
import time

import numpy as np

import loom

try:
    import torch
except ImportError:  # the demo runs without PyTorch; its column says so
    torch = None


def show_tensors():
    loom.manual_seed(0)
    print("loom.randn(2, 3):")
    print(loom.randn(2, 3))
    x = loom.arange(12, dtype=loom.float32).reshape(3, 4)
    print("\nx = loom.arange(12.).reshape(3, 4); x.T[1:, ::2]:")
    print(x.T[1:, ::2])
    print("shape", tuple(x.T.shape), "strides", x.T.stride(), "- a view: no copy was made")


def show_sharing():
    x = loom.zeros(2, 3)
    view = x[:, 1]
    view[:] = 7
    arr = x.numpy()
    print("\nwrites through a view land in the base tensor; numpy sees the same memory:")
    print(arr, "| same address:", arr.ctypes.data == x.data_ptr())
    if torch is not None:
        t = torch.from_dlpack(x)
        t.add_(1)
        print("torch.from_dlpack(x).add_(1) changes x too:", x[0].tolist())


def show_allocator():
    before = loom.memory_stats()
    for _ in range(1000):
        loom.empty(256)
    after = loom.memory_stats()
    hits = after["num_cache_hits"] - before["num_cache_hits"]
    system = after["num_system_allocations"] - before["num_system_allocations"]
    print(f"\n1000 x loom.empty(256): {hits} served from the allocator's cache, {system} from the system")


def per_call_ns(fn, n):
    start = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - start) / n


def measure(repeats, calls):
    cases = []
    lx = loom.zeros(4, 4)
    nx = np.zeros((4, 4), dtype=np.float32)
    tx = torch.zeros(4, 4) if torch is not None else None
    cases.append(("empty(16)", lambda: loom.empty(16), lambda: np.empty(16, np.float32),
                  (lambda: torch.empty(16)) if torch else None))
    cases.append(("x[1:3]", lambda: lx[1:3], lambda: nx[1:3], (lambda: tx[1:3]) if torch else None))
    cases.append(("x.transpose(0, 1)", lambda: lx.transpose(0, 1), lambda: nx.transpose(1, 0),
                  (lambda: tx.transpose(0, 1)) if torch else None))
    cases.append(("x.reshape(16)", lambda: lx.reshape(16), lambda: nx.reshape(16),
                  (lambda: tx.reshape(16)) if torch else None))
    cases.append(("x.shape", lambda: lx.shape, lambda: nx.shape, (lambda: tx.shape) if torch else None))
    rows = []
    for name, fl, fn, ft in cases:
        samples = {"loom": [], "numpy": [], "torch": []}
        for _ in range(repeats):  # interleaved: each repeat times every library once
            samples["loom"].append(per_call_ns(fl, calls))
            samples["numpy"].append(per_call_ns(fn, calls))
            if ft:
                samples["torch"].append(per_call_ns(ft, calls))
        rows.append((name, {k: statistics.median(v) for k, v in samples.items() if v}))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (about 5 seconds)")
    args = parser.parse_args(argv)
    show_tensors()
    show_sharing()
    show_allocator()
    repeats, calls = (5, 20000) if args.quick else (15, 50000)
    print(f"\nper-call cost of the Python layer, median of {repeats} interleaved repeats of {calls} calls:")
    rows = measure(repeats, calls)
    print("\n| call | loom ns | numpy ns | torch ns | loom / torch |")
    print("|---|---:|---:|---:|---:|")
    for name, r in rows:
        torch_ns = f"{r['torch']:.0f}" if "torch" in r else "n/a (no torch)"
        ratio = f"{r['loom'] / r['torch']:.2f}" if "torch" in r else "-"
        print(f"| {name} | {r['loom']:.0f} | {r['numpy']:.0f} | {torch_ns} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
