"""Whole training loops (BENCH.md's mlp and gpt, written once in perf/workloads.py) against
PyTorch: the same initial weights and data give the same loss trajectory in loom's eager and
lazy modes, and a lazy step in the steady state is one trace, one graph replay and no
compilation, updating the parameters where they are."""

import os
import sys

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "perf"))
import workloads as W  # noqa: E402

MODELS = {"mlp": (W.mlp_model, W.mlp_data, 50), "gpt": (W.gpt_model, W.gpt_data, 30)}


def torch_run(name, steps):
    model_fn, data_fn, _ = MODELS[name]
    torch.manual_seed(0)
    model = model_fn(torch)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = (torch.tensor(a) for a in data_fn())
    losses = [W.train_step(torch, model, optimizer, x, y).item() for _ in range(steps)]
    return initial, losses, {k: v.detach().numpy() for k, v in model.state_dict().items()}


def loom_setup(name, initial, device):
    model_fn, data_fn, _ = MODELS[name]
    model = model_fn(loom)
    model.load_state_dict({k: loom.tensor(v.numpy()) for k, v in initial.items()})
    model = model.to(device)
    optimizer = loom.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = (loom.tensor(a, device=device) for a in data_fn())
    return model, optimizer, x, y


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("name", ["mlp", "gpt"])
def test_loss_trajectory_matches_pytorch(name, device):
    steps = MODELS[name][2]
    initial, want, want_state = torch_run(name, steps)
    model, optimizer, x, y = loom_setup(name, initial, device)
    got = [W.train_step(loom, model, optimizer, x, y).item() for _ in range(steps)]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    assert got[-1] < got[0]  # it trains
    # Adam turns a gradient's rounding into a step of up to lr (1e-3) when the gradient is near 0,
    # so parameters agree to a tenth of one step, not to float32 rounding.
    for k, v in model.state_dict().items():
        np.testing.assert_allclose(v.cpu().numpy(), want_state[k], rtol=1e-4, atol=1e-4, err_msg=k)


@pytest.mark.parametrize("name", ["mlp", "gpt"])
def test_lazy_steady_state_is_one_replay_of_a_cached_graph(name):
    initial, _, _ = torch_run(name, 0)
    model, optimizer, x, y = loom_setup(name, initial, "lazy")
    for _ in range(3):  # the first steps differ (optimizer state and gradients appear)
        W.train_step(loom, model, optimizer, x, y).item()
    params = [p.data_ptr() for p in model.parameters()]
    state = [t.data_ptr() for s in optimizer.state.values() for t in s.values() if isinstance(t, loom.Tensor)]
    for _ in range(5):
        before = loom.metrics()
        W.train_step(loom, model, optimizer, x, y).item()
        after = loom.metrics()
        delta = {k: after[k] - before[k] for k in ("traces", "graph_replays", "kernels_compiled",
                                                      "graph_cache_misses")}
        assert delta == {"traces": 1, "graph_replays": 1, "kernels_compiled": 0, "graph_cache_misses": 0}
    # Parameters and optimizer state are updated in place: same storage every step.
    assert [p.data_ptr() for p in model.parameters()] == params
    assert [t.data_ptr() for s in optimizer.state.values() for t in s.values() if isinstance(t, loom.Tensor)] == state


def test_a_loop_that_reads_no_value_still_replays_one_graph_per_step():
    """A loop that logs its loss only now and then (or never) is still one trace per step: the end
    of optimizer.step() is the step's sync (syncs_step), so no trace spans several steps, none is
    cut mid-step by LOOM_MAX_TRACE_NODES, and the steady state replays one cached graph per step.
    The values are the same as a loop that reads its loss every step."""
    initial, _, _ = torch_run("mlp", 0)
    model, optimizer, x, y = loom_setup("mlp", initial, "lazy")
    losses = []
    for step in range(9):
        before = loom.metrics()
        losses.append(W.train_step(loom, model, optimizer, x, y))  # never read in the loop
        after = loom.metrics()
        delta = {k: after[k] - before[k] for k in ("traces", "syncs", "syncs_step", "graph_replays",
                                                      "kernels_compiled", "graph_cache_misses")}
        if step >= 3:  # the first steps differ (optimizer state and gradients appear)
            assert delta == {"traces": 1, "syncs": 1, "syncs_step": 1, "graph_replays": 1, "kernels_compiled": 0,
                             "graph_cache_misses": 0}, (step, delta)
    model_cpu, optimizer_cpu, x_cpu, y_cpu = loom_setup("mlp", initial, "cpu")
    want = [W.train_step(loom, model_cpu, optimizer_cpu, x_cpu, y_cpu).item() for _ in range(9)]
    np.testing.assert_allclose([loss.item() for loss in losses], want, rtol=1e-6, atol=1e-7)
