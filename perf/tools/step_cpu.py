"""CPU time per step of one harness case in one loom mode: a load-tolerant figure for A/B runs.

On a shared machine wall-clock steps measure the other processes as much as loom; the CPU time
the process spends per step (time.process_time: every thread's user and system time) does much
less so, and with LOOM_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 it is the work itself. Builds the
case as perf/run.py does (same data, weights, warm-up), then prints one line per block: CPU
time per step, and the counters that must not move in a steady state (kernels compiled).

usage: LOOM_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python perf/tools/step_cpu.py CASE
           [--mode loom-lazy] [--blocks 5] [--steps 20]
CASE is a case name of perf/cases.py ("gpt", "mlp", "softmax 256x512", "chain 1e5", ...).
Compare builds by running this with each build's python in turn (interleaved, several times).
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import loom  # noqa: E402
import cases as C  # noqa: E402
from modes import BY_NAME  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("case", help='a case of perf/cases.py: "gpt", "mlp", "softmax 256x512", ...')
    p.add_argument("--mode", default="loom-lazy", help="a mode of perf/modes.py (default loom-lazy)")
    p.add_argument("--blocks", type=int, default=5, help="timed blocks (default 5)")
    p.add_argument("--steps", type=int, default=20, help="steps per block (default 20)")
    args = p.parse_args()
    case = next((c for c in C.cases(False) if c.name == args.case), None)
    if case is None:
        p.error(f"no case named '{args.case}'; cases: " + ", ".join(c.name for c in C.cases(False)))
    mode = BY_NAME[args.mode]
    mode.enter()
    runner = case.build(mode, "cpu")
    runner.block(args.steps)  # one more block of warm-up: the first timed block starts steady
    before = loom.metrics()
    per_step = []
    for _ in range(args.blocks):
        start = time.process_time()
        runner.block(args.steps)
        per_step.append((time.process_time() - start) / args.steps)
    after = loom.metrics()
    moved = {k: after[k] - before[k] for k in ("kernels_compiled", "graph_cache_misses")}
    print(f"{case.name} {args.mode}: CPU per step min {min(per_step) * 1e6:.1f} us, "
          f"median {statistics.median(per_step) * 1e6:.1f} us, blocks "
          + " ".join(f"{t * 1e6:.1f}" for t in per_step) + f"; while timed: {moved}")


if __name__ == "__main__":
    main()
