#!/bin/bash
# Instructions of steady-state training steps in loom-lazy, counted by callgrind for those steps
# only (a load-independent figure of host work on a shared machine; perf/RESULTS.md 2026-12-03).
#
# usage: perf/tools/callgrind_step.sh PYTHON WORKLOAD STEPS OUT   (WORKLOAD: mlp or gpt)
# PYTHON is the build's python (.venv/bin/python); OUT the callgrind file to write (read it with
# callgrind_annotate OUT, or --inclusive=yes). 8 warm-up steps run uncounted, then collection is
# switched on by a client request around STEPS steps. One thread; kernels are compiled for
# x86-64-v3 through a LOOM_CXX wrapper (valgrind cannot run AVX-512) into an empty cache.
set -e
python=$1 workload=$2 steps=$3 out=$4
perf_dir=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/loom-cgstep.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat > "$work/cg.c" <<'C'
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS; }
C
gcc -O1 -shared -fPIC "$work/cg.c" -o "$work/cg.so"
cat > "$work/prog.py" <<'PY'
import ctypes, sys
perf_dir, workload, steps, lib = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sys.path.insert(0, perf_dir)
sys.modules.setdefault("torch", None)  # not needed, and a minute to import under valgrind
import loom
import cases as C, workloads as W
from modes import BY_NAME
cg = ctypes.CDLL(lib)
mode = BY_NAME["loom-lazy"]
mode.enter()
model_fn, data_fn = {"mlp": (W.mlp_model, W.mlp_data), "gpt": (W.gpt_model, W.gpt_data)}[workload]
model, opt, x, y = C.training_setup(mode, "cpu", model_fn, data_fn)
for _ in range(8):
    W.train_step(loom, model, opt, x, y).item()
loom.metrics_reset()
cg.cg_start()
for _ in range(steps):
    W.train_step(loom, model, opt, x, y).item()
cg.cg_stop()
m = loom.metrics()
print(f"loss after {steps} more steps {W.train_step(loom, model, opt, x, y).item()!r}, nodes per step "
      f"{m['nodes_recorded'] / steps:.0f}, kernels compiled {m['kernels_compiled']}, plan misses {m['graph_cache_misses']}")
PY
LOOM_CXX="$perf_dir/tools/cxx_x86_64_v3.sh" LOOM_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 LOOM_CACHE_DIR="$work/cache" \
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/cg.out" \
  "$python" "$work/prog.py" "$perf_dir" "$workload" "$steps" "$work/cg.so" 2>"$work/valgrind.log"
# The client request's dump is the counted steps (cg.out.1); cg.out is what ran after.
cp "$work/cg.out.1" "$out"
grep -E "^totals:" "$out" | awk -v n="$steps" '{printf "instructions per step: %.0f\n", $2 / n}'
