"""Lazy training on a GPU: the mlp workload matches the CPU backend, a steady-state step is one
CUDA Graph replay with nothing compiled, replays follow inputs to new addresses, dropout draws
new masks every replay (reproducibly), and LOOM_CUDA_GRAPHS=0 computes the same. A capture that
fails (the driver refuses a call inside it, a step allocates) leaves the stream usable and the
plan launching directly, or raises under LOOM_CUDA_GRAPHS=strict (these suites' default)."""

import numpy as np
import pytest

import loom
import workloads as W


def training_setup(name, device):
    import torch

    model_fn, data_fn = (W.mlp_model, W.mlp_data) if name == "mlp" else (W.gpt_model, W.gpt_data)
    torch.manual_seed(0)
    initial = {k: v.detach().numpy().copy() for k, v in model_fn(torch).state_dict().items()}
    model = model_fn(loom)
    model.load_state_dict({k: loom.tensor(v) for k, v in initial.items()})
    model = model.to(device)
    optimizer = loom.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = (loom.tensor(a, device=device) for a in data_fn())
    return model, optimizer, x, y


@pytest.mark.parametrize("name,steps", [("mlp", 20), ("gpt", 8)])
def test_lazy_training_on_the_gpu_matches_the_cpu(name, steps):
    losses = {}
    for device in ["lazy:cpu", "lazy:cuda"]:
        model, optimizer, x, y = training_setup(name, device)
        losses[device] = [W.train_step(loom, model, optimizer, x, y).item() for _ in range(steps)]
    np.testing.assert_allclose(losses["lazy:cuda"], losses["lazy:cpu"], rtol=1e-4, atol=1e-5)
    assert losses["lazy:cuda"][-1] < losses["lazy:cuda"][0]


def test_eager_training_on_the_gpu_matches_the_cpu():
    losses = {}
    for device in ["cpu", "cuda"]:
        model, optimizer, x, y = training_setup("mlp", device)
        losses[device] = [W.train_step(loom, model, optimizer, x, y).item() for _ in range(5)]
    np.testing.assert_allclose(losses["cuda"], losses["cpu"], rtol=1e-4, atol=1e-5)


def test_steady_state_is_one_graph_replay_per_step_and_no_compile():
    model, optimizer, x, y = training_setup("mlp", "lazy:cuda")
    for _ in range(3):  # the first run launches directly, the second captures
        W.train_step(loom, model, optimizer, x, y).item()
    before = loom.metrics()
    for _ in range(10):
        W.train_step(loom, model, optimizer, x, y).item()
    after = loom.metrics()
    delta = {k: after[k] - before[k] for k in before}
    assert delta["traces"] == 10
    assert delta["graph_replays"] == 10
    assert delta["graph_cache_misses"] == 0
    assert delta["kernels_compiled"] == 0
    assert delta["kernel_launches"] == 0, "a steady-state step launched kernels outside its graph"


def test_replays_follow_inputs_and_outputs_to_new_addresses():
    rng = np.random.default_rng(0)
    w = loom.tensor(rng.standard_normal((8, 4)).astype(np.float32), device="lazy:cuda")
    outs = []
    for step in range(6):
        a = rng.standard_normal((5, 8)).astype(np.float32)
        x = loom.tensor(a, device="lazy:cuda")  # new storage every step (old ones stay alive)
        outs.append(((x @ w).relu() * (step + 0.5), a, step))
        loom.sync()  # one trace per step: run, capture, then replays
    for out, a, step in outs:
        want = np.maximum(a @ w.cpu().numpy(), 0) * (step + 0.5)
        np.testing.assert_allclose(out.cpu().numpy(), want, rtol=1e-5, atol=1e-5)
    # Earlier outputs are untouched by later replays.
    assert len({o.data_ptr() for o, _, _ in outs}) == len(outs)


def test_dropout_differs_per_replay_and_reproduces_under_a_seed():
    def masks():
        loom.manual_seed(1234)
        x = loom.ones(64, 64, device="lazy:cuda")
        return [(loom.nn.functional.dropout(x, 0.5) == 0).cpu().numpy() for _ in range(5)]

    first, second = masks(), masks()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    assert all((first[i] != first[i + 1]).any() for i in range(4))
    loom.manual_seed(1234)
    cpu = (loom.nn.functional.dropout(loom.ones(64, 64, device="lazy:cpu"), 0.5) == 0).numpy()
    np.testing.assert_array_equal(first[0], cpu)


def test_without_graphs_the_same_steps_launch_kernels():
    loom._C._set_executor("fused-nograph")
    model, optimizer, x, y = training_setup("mlp", "lazy:cuda")
    losses = [W.train_step(loom, model, optimizer, x, y).item() for _ in range(3)]
    before = loom.metrics()
    losses.append(W.train_step(loom, model, optimizer, x, y).item())
    after = loom.metrics()
    assert after["graph_replays"] == before["graph_replays"]
    assert after["kernel_launches"] > before["kernel_launches"]
    loom._C._set_executor("fused")
    model, optimizer, x, y = training_setup("mlp", "lazy:cuda")
    with_graphs = [W.train_step(loom, model, optimizer, x, y).item() for _ in range(4)]
    # The two forms of cuBLAS call (graph/cuda_blas.h) may sum in different orders.
    np.testing.assert_allclose(losses, with_graphs, rtol=1e-5, atol=1e-6)


def test_memory_api():
    loom.cuda.empty_cache()
    base = loom.cuda.memory_allocated()
    x = loom.zeros(1 << 20, device="cuda")
    assert loom.cuda.memory_allocated() >= base + 4 * (1 << 20)
    assert loom.cuda.memory_reserved() >= loom.cuda.memory_allocated()
    assert loom.cuda.max_memory_allocated() >= loom.cuda.memory_allocated()
    del x
    loom.cuda.synchronize()
    assert loom.cuda.memory_allocated() == base


def one_plan_runs(w, fault, runs=4):
    """The same lazy program `runs` times (one plan), `fault` injected before the second run (its
    capture; graph/cuda_capture.h); each result checked against numpy. loom's counters per run."""
    rng = np.random.default_rng(3)
    wt = loom.tensor(w, device="lazy:cuda")
    counters = []
    try:
        for i in range(runs):
            if i == 1 and fault:
                loom._C._inject_capture_fault(fault)
            a = rng.standard_normal((6, w.shape[0])).astype(np.float32)
            before = loom.metrics()
            out = ((loom.tensor(a, device="lazy:cuda") @ wt).relu() * (i + 0.5)).sum(0).cpu().numpy()
            after = loom.metrics()
            np.testing.assert_allclose(out, (np.maximum(a @ w, 0) * (i + 0.5)).sum(0), rtol=1e-5, atol=1e-5)
            counters.append({k: after[k] - before[k] for k in ("graph_replays", "graph_capture_failures")})
    finally:
        loom._C._inject_capture_fault("")
    return counters


@pytest.mark.parametrize("fault", ["synchronize", "allocate"])
def test_a_failed_capture_falls_back_to_direct_launches_and_the_stream_stays_usable(fault):
    # synchronize: cudaStreamSynchronize on the capturing stream, which the driver refuses,
    # invalidating the capture; allocate: refused by the allocator's capture guard.
    loom._C._set_strict_cuda_graphs(False)
    w = np.random.default_rng(1).standard_normal((9, 4 + len(fault))).astype(np.float32)  # a new plan
    counters = one_plan_runs(w, fault)
    assert [c["graph_capture_failures"] for c in counters] == [0, 1, 0, 0]
    assert all(c["graph_replays"] == 0 for c in counters)
    # Another plan captures and replays on the same stream.
    w = np.random.default_rng(2).standard_normal((5, 3 + len(fault))).astype(np.float32)
    assert [c["graph_replays"] for c in one_plan_runs(w, None, 3)] == [0, 1, 1]


def test_strict_graphs_raise_the_drivers_refusal_and_then_capture():
    w = np.random.default_rng(4).standard_normal((7, 6)).astype(np.float32)
    with pytest.raises(RuntimeError, match="cudaStreamSynchronize.*a wait injected into the capture of trace"):
        one_plan_runs(w, "synchronize", 2)
    # The next run of the plan captures, and its graph replays.
    assert [c["graph_replays"] for c in one_plan_runs(w, None, 2)] == [1, 1]
