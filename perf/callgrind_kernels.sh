#!/bin/bash
# Instructions spent in generated kernels, counted by callgrind: a load-independent figure for
# kernel forms on a shared machine (perf/RESULTS.md, issue 15).
#
# usage: perf/callgrind_kernels.sh PYTHONPATH WORKLOAD     (WORKLOAD: softmax_causal, column_sums, gpt)
# prints the self cost of the generated functions (loom_k*) and of libmvec / libm's exp over 22
# steps on one thread (gpt: 6 training steps, BENCH.md's model, and the cost of all of libm and
# libmvec). Kernels are compiled for x86-64-v3 through a LOOM_CXX wrapper: valgrind
# cannot run AVX-512, and glibc's AVX2 vector exp has the slow path the AVX-512 one has.
set -e
work=$(mktemp -d /tmp/loom-callgrind.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat > "$work/prog.py" <<'PY'
import sys, numpy as np, loom
rng = np.random.default_rng(0)
if sys.argv[1] == "softmax_causal":  # gpt's attention softmax: (batch * heads, 32, 32), causal mask
    x = rng.standard_normal((64, 32, 32)).astype(np.float32)
    x[:, np.triu(np.ones((32, 32), bool), 1)] = -np.inf
    t = loom.tensor(x, device="lazy")
    step = lambda: [t.softmax(-1)]
elif sys.argv[1] == "column_sums":  # bias and layer-norm gradients: 512 rows, 64 channels
    g = loom.tensor(rng.standard_normal((512, 64)).astype(np.float32), device="lazy")
    h = loom.tensor(rng.standard_normal((512, 64)).astype(np.float32), device="lazy")
    step = lambda: [g.sum(0), (g * h).sum(0), (g * h - h).sum(0), g.amax(0)]
elif sys.argv[1] == "gpt":  # BENCH.md's gpt training step
    sys.path.insert(0, sys.argv[2])
    import torch, workloads as W
    torch.manual_seed(0)
    model = W.gpt_model(loom)
    W.copy_weights(W.gpt_model(torch), model, loom)
    model = model.to("lazy")
    opt = loom.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = (loom.tensor(a, device="lazy") for a in W.gpt_data())
    for _ in range(6):
        W.train_step(loom, model, opt, x, y).item()
    sys.exit(0)
else:
    sys.exit(f"unknown workload {sys.argv[1]}")
for _ in range(22):
    [o.numpy() for o in step()]
PY
PYTHONPATH=$1 LOOM_CXX="$(cd "$(dirname "$0")" && pwd)/tools/cxx_x86_64_v3.sh" LOOM_NUM_THREADS=1 LOOM_CACHE_DIR="$work/cache" \
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" /usr/bin/python3 "$work/prog.py" "$2" "$(dirname "$0")" >/dev/null 2>&1
callgrind_annotate --threshold=100 "$work/cg.out" 2>/dev/null |
  awk '/loom_k/ {gsub(",", "", $1); k += $1} /libmvec|expf/ {gsub(",", "", $1); e += $1}
       /libmvec|libm[.-]/ {gsub(",", "", $1); m += $1}
       END {printf "kernels %d instructions, exp %d instructions, libm + libmvec %d\n", k, e, m}'
