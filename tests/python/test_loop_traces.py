"""A training loop's steps lower the same trace from the first step on wherever the program is the
same: the first step of a process must not order its gradients differently (plan caching, the
-O3 tier of rtc/kernel_units.h and loom.compile's capture all start from the second step's trace
matching the first's).

The first GradFn a process records was numbered 0, the number every AccumulateGrad has, so on the
first step only it tied with the leaves' accumulations in the backward engine's queue; gradients
taken as .grad without a copy (lazy/autograd.cpp) then reached the sync in another order, and the
first step lowered a trace of its own. Each case runs in a fresh process, since only a process's
first recorded function had that number.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent("""
    import json, sys, loom, numpy as np
    clear, optimizer, model_kind = sys.argv[1], sys.argv[2], sys.argv[3]
    rng = np.random.default_rng(0)
    F = loom.nn.functional

    if model_kind == "mlp":
        # The first op is the first layer's product: its GradFn is the first the process records.
        model = loom.nn.Sequential(loom.nn.Linear(16, 32), loom.nn.GELU(), loom.nn.LayerNorm(32),
                                   loom.nn.Linear(32, 32), loom.nn.Tanh(), loom.nn.Linear(32, 4)).to("lazy")
        params = list(model.parameters())
        x = loom.tensor(rng.standard_normal((64, 16)).astype(np.float32), device="lazy")
        y = loom.tensor(rng.integers(0, 4, 64), device="lazy")

        def loss_of():
            return F.cross_entropy(model(x), y)
    else:
        # test_kernel_tiers' program: a masked softmax, a layer norm, GELU; two leaves.
        xs = loom.tensor(rng.standard_normal((8, 16, 16)).astype(np.float32), requires_grad=True, device="lazy")
        w = loom.tensor(rng.standard_normal(16).astype(np.float32), requires_grad=True, device="lazy")
        mask = loom.tensor(np.tril(np.ones((16, 16), bool)), device="lazy")
        params = [xs, w]

        def loss_of():
            s = F.softmax(xs.masked_fill(~mask, float("-inf")), -1)
            h = F.gelu(F.layer_norm(s * w, (16,)))
            return (h * h).sum() + F.gelu(xs, approximate="tanh").sum()

    opt = {"sgd_momentum": lambda: loom.optim.SGD(params, lr=1e-3, momentum=0.9),
           "adamw": lambda: loom.optim.AdamW(params, lr=1e-3),
           "manual": lambda: None}[optimizer]()

    def zero_grad():
        if clear == "assign_none":
            for p in params:
                p.grad = None
        elif opt is not None:
            opt.zero_grad(set_to_none=clear == "set_to_none")
        else:
            for p in params:
                if p.grad is not None:
                    p.grad.zero_()

    def sync_record():
        m = loom.metrics()
        return {"key": loom._C._last_trace_key(), **{k: m[k] for k in ("traces", "graph_cache_misses", "kernel_launches")}}

    out = [sync_record()]  # the counters before the loop (making the model ran eager kernels)
    for i in range(4):
        zero_grad()
        loss = loss_of()
        loss.backward()
        loss.item()  # the forward and backward: one sync
        backward = sync_record()
        if opt is not None:
            opt.step()  # ends with a sync of its own
        else:
            with loom.no_grad():
                for p in params:
                    p.sub_(p.grad * 1e-3)
            loom.sync()
        out.append({"backward": backward, "update": sync_record()})
    print(json.dumps(out))
""")


def run(clear, optimizer, model, tmp_path):
    env = dict(os.environ, LOOM_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", PROGRAM, clear, optimizer, model], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    before, *steps = json.loads(done.stdout)
    # Per step and sync: the trace's key, and the counters' growth during that sync.
    previous = {k: before[k] for k in ("traces", "graph_cache_misses", "kernel_launches")}
    for s in steps:
        for part in ("backward", "update"):
            now = s[part]
            s[part] = {"key": now["key"], **{k: now[k] - previous[k] for k in previous}}
            previous = {k: now[k] for k in previous}
    return steps


def assert_same_from(steps, part, first):
    """Steps `first` (1-based) on lower one trace, found in the plan cache after its first use."""
    runs = [s[part] for s in steps[first - 1:]]
    assert all(r["traces"] == 1 for r in runs), runs
    assert len({r["key"] for r in runs}) == 1, f"{part}: steps {first}.. lowered different traces: {runs}"
    assert len({r["kernel_launches"] for r in runs}) == 1, runs
    assert all(r["graph_cache_misses"] == 0 for r in runs[1:]), runs


# Every way of clearing .grad with each optimizer on an mlp; test_kernel_tiers' program (where the
# first step's gradients of both leaves came out in another order) with two of them.
CASES = [(clear, optimizer, "mlp") for clear, optimizer in [("assign_none", "manual"), ("set_to_none", "sgd_momentum"),
                                                          ("set_to_none", "adamw"), ("keep", "sgd_momentum"),
                                                          ("keep", "adamw"), ("keep", "manual")]]
CASES += [("assign_none", "manual", "tiers"), ("set_to_none", "adamw", "tiers")]


@pytest.mark.parametrize("clear, optimizer, model", CASES)
def test_steps_lower_the_same_traces_from_the_first_step(tmp_path, clear, optimizer, model):
    steps = run(clear, optimizer, model, tmp_path)
    if clear == "keep":
        # zero_grad(set_to_none=False): the first backward takes its gradients as .grad, later
        # ones zero them and add into them (as in PyTorch), so the loop is the same from step 2.
        assert steps[0]["backward"]["key"] != steps[1]["backward"]["key"]
        assert_same_from(steps, "backward", 2)
    else:
        # .grad is None before every backward: the forward and backward are the same program at
        # every step, the first included.
        assert_same_from(steps, "backward", 1)
    # The optimizers make their state at their first step (a momentum buffer that is the first
    # gradient, AdamW's zeros), so their update is the same program from step 2; a manual update
    # (which keeps no state) from step 1.
    assert_same_from(steps, "update", 1 if optimizer == "manual" else 2)
