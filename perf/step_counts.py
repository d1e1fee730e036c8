"""Ops recorded and kernels launched by one steady-state BENCH `gpt` training step (loom-lazy,
CPU), from loom.metrics(); issue 15's composite-op measurement (perf/RESULTS.md).

usage: python perf/step_counts.py [--functional-from COMMIT]
--functional-from runs the step with loom.nn.functional's layer_norm, rms_norm, cross_entropy
and scaled_dot_product_attention taken from COMMIT's Python sources (the compositions of
primitives that preceded the composites), in this same build: a before/after pair that differs
in those functions only.

Instructions per step (callgrind, robust on a busy machine): run it under
valgrind --tool=callgrind with --steps 1 and --steps 6 and divide the difference by 5, with
LOOM_NUM_THREADS=1 and kernels compiled for x86-64-v3 (perf/callgrind_kernels.sh's LOOM_CXX).
"""

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.modules.setdefault("torch", None)  # not needed here, and a minute to import under valgrind

import loom  # noqa: E402

import cases as C  # noqa: E402
import workloads as W  # noqa: E402
from modes import BY_NAME  # noqa: E402

_FILES = {"_normalization": ("layer_norm", "rms_norm"), "_loss": ("cross_entropy",),
          "_attention": ("scaled_dot_product_attention",)}


def use_functional_from(commit):
    """Replaces the functions of _FILES in loom.nn.functional by COMMIT's versions."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folder = tempfile.mkdtemp(prefix="loom-functional-")
    for name, functions in _FILES.items():
        path = f"pyext/loom/nn/functional/{name}.py"
        text = subprocess.run(["git", "-C", root, "show", f"{commit}:{path}"], capture_output=True, text=True,
                              check=True).stdout
        file = os.path.join(folder, name + ".py")
        with open(file, "w") as f:
            f.write(text)
        spec = importlib.util.spec_from_file_location(f"old{name}", file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for fn in functions:
            setattr(loom.nn.functional, fn, getattr(module, fn))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--functional-from")
    parser.add_argument("--steps", type=int, default=1)
    args = parser.parse_args()
    if args.functional_from:
        use_functional_from(args.functional_from)
    mode = BY_NAME["loom-lazy"]
    mode.enter()
    model, optimizer, x, y = C.training_setup(mode, "cpu", W.gpt_model, W.gpt_data)
    for _ in range(3):
        W.train_step(loom, model, optimizer, x, y).item()
    loom.metrics_reset()
    for _ in range(args.steps):
        W.train_step(loom, model, optimizer, x, y).item()
    m = loom.metrics()
    print(f"ops recorded per step {m['nodes_recorded'] / args.steps:.0f}, "
          f"kernels per step {m['kernel_launches'] / args.steps:.0f}")


if __name__ == "__main__":
    sys.exit(main())
