"""The CUDA executor's lowering, run on the host by the CUDA emulator (graph/cuda_emulator.h):
every program is partitioned, planned, lowered to launches, matrix products and an argument
table exactly as for a GPU, then executed on the host with the same kernel sources (fused
kernels through their C++ rendering). Results must equal the CPU executor's. What needs a
GPU (threads, streams, graphs, cuBLAS) is in tests/gpu/."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "perf"))
import workloads as W  # noqa: E402

from _cuda_programs import PROGRAMS, RANDOM, F  # noqa: E402

EMULATED = ["cuda-emulated", "cuda-emulated-unfused"]


def run(executor, program, *arrays):
    """program's outputs (numpy) with the given lazy executor, on fresh lazy inputs."""
    loom._C._set_executor(executor)
    try:
        args = [loom.tensor(a, device="lazy:cpu") for a in arrays]
        outs = program(*args)
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        return [o.cpu().numpy() if o.dtype != loom.bfloat16 else o.float().cpu().numpy() for o in outs]
    finally:
        loom._C._set_executor("compiled")


def check(program, *arrays, tol=1e-5):
    want = run("fused", program, *arrays)
    for executor in EMULATED:
        got = run(executor, program, *arrays)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, executor
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=executor)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_emulated_cuda_program_equals_cpu(name):
    program, *arrays = PROGRAMS[name]
    if name in RANDOM:
        # Random numbers depend only on the seed and the op count (runtime/random.h): the same on
        # every backend, so the emulated GPU kernels must reproduce the CPU's exactly.
        got = {}
        for executor in ["fused"] + EMULATED:
            loom.manual_seed(3)
            got[executor] = run(executor, program, *arrays)
        for executor in EMULATED:
            for g, w in zip(got[executor], got["fused"]):
                np.testing.assert_array_equal(g, w, err_msg=executor)
        return
    check(program, *arrays, tol=1e-12 if name == "matmul_float64" else 1e-5)


def test_in_place_writes_land_in_strided_destinations():
    def program(a, b):
        t = loom.tensor(np.zeros((4, 6), np.float32), device="lazy:cpu")
        view = t[:, ::2]
        view.add_(a)
        t[1:3].mul_(b[:2])
        return [t]

    check(program, F(4, 3), F(4, 6))


def test_one_plan_serves_inputs_at_other_addresses():
    # The second and third runs hit the cached plan with inputs, outputs and scalar parameters in
    # new places: only the argument table changes.
    loom._C._set_executor("cuda-emulated")
    try:
        results = []
        for scale in [1.5, 2.5, 3.5]:
            a = loom.tensor(F(6, 5), device="lazy:cpu")
            b = loom.tensor(F(5, 4), device="lazy:cpu")
            results.append(((a @ b) * scale + a.sum(), a, b, scale))
        for out, a, b, scale in results:
            want = (a.numpy() @ b.numpy()) * scale + a.numpy().sum()
            np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
    finally:
        loom._C._set_executor("compiled")


def test_an_index_out_of_range_found_by_a_kernel_raises():
    loom._C._set_executor("cuda-emulated")
    try:
        x = loom.tensor(F(4, 3), device="lazy:cpu")
        i = loom.tensor(np.array([0, 7]), device="lazy:cpu")
        with pytest.raises(IndexError, match="index out of bounds"):
            x[i].tolist()
        j = loom.tensor(np.array([[0, 5]]), device="lazy:cpu")
        with pytest.raises(RuntimeError, match=r"gather\(\): index out of bounds"):
            x.gather(1, j).tolist()
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            (loom.tensor(np.arange(3), device="lazy:cpu") // loom.tensor(np.array([1, 0, 2]), device="lazy:cpu")).tolist()
    finally:
        loom._C._set_executor("compiled")


@pytest.mark.parametrize("name", ["mlp", "gpt"])
def test_emulated_training_steps_equal_cpu(name):
    import torch

    model_fn, data_fn = (W.mlp_model, W.mlp_data) if name == "mlp" else (W.gpt_model, W.gpt_data)
    torch.manual_seed(0)
    initial = {k: v.detach().numpy().copy() for k, v in model_fn(torch).state_dict().items()}
    losses = {}
    for executor in ["fused", "cuda-emulated"]:
        loom._C._set_executor(executor)
        try:
            model = model_fn(loom)
            model.load_state_dict({k: loom.tensor(v) for k, v in initial.items()})
            model = model.to("lazy:cpu")
            optimizer = loom.optim.AdamW(model.parameters(), lr=1e-3)
            x, y = (loom.tensor(a, device="lazy:cpu") for a in data_fn())
            losses[executor] = [W.train_step(loom, model, optimizer, x, y).item() for _ in range(5)]
        finally:
            loom._C._set_executor("compiled")
    np.testing.assert_allclose(losses["cuda-emulated"], losses["fused"], rtol=1e-5, atol=1e-6)


# ---- CUDA Graphs as the emulator models them (graph/cuda_capture.h) ----

def runs_of_one_plan(program, arrays, runs, fault=None):
    """Runs `program` `runs` times on the emulator (one trace, so one plan after the first), the
    fault injected before the second run (the capture). Returns the outputs (numpy) and loom's
    counters for each run."""
    outputs, counters = [], []
    loom._C._set_executor("cuda-emulated")
    try:
        for i in range(runs):
            if i == 1 and fault:
                loom._C._inject_capture_fault(fault)
            before = loom.metrics()
            out = program(*[loom.tensor(a, device="lazy:cpu") for a in arrays])
            loom.sync()
            after = loom.metrics()
            outputs.append(out.numpy())
            counters.append({k: after[k] - before[k] for k in after if isinstance(after[k], int)})
    finally:
        loom._C._inject_capture_fault("")
        loom._C._set_executor("compiled")
    return outputs, counters


def graph_program(x, w):
    return ((x @ w).relu() * 1.5 + x.sum(1, keepdim=True)).exp()


def graph_program_numpy(x, w):
    return np.exp(np.maximum(x @ w, 0) * 1.5 + x.sum(1, keepdims=True))


def test_a_plan_runs_directly_then_captures_then_replays():
    x, w = F(7, 11), F(11, 5)  # shapes of this test alone: a new plan
    outputs, counters = runs_of_one_plan(graph_program, [x, w], 4)
    for out in outputs:
        np.testing.assert_allclose(out, graph_program_numpy(x, w), rtol=1e-5, atol=1e-5)
    assert counters[0]["kernel_launches"] > 0 and counters[0]["graph_replays"] == 0
    for c in counters[1:]:  # captured at the second run, then replayed: no launch outside the graph
        assert (c["kernel_launches"], c["graph_replays"], c["graph_capture_failures"]) == (0, 1, 0)


@pytest.mark.parametrize("fault", ["allocate", "synchronize"])
def test_a_failed_capture_runs_the_plan_directly_from_then_on(fault):
    # "allocate": a step allocates while the graph is recorded (refused by the allocator's capture
    # guard); "synchronize": a step waits for the capturing stream (refused, as the driver does).
    x, w = F(6, 13 + len(fault)), F(13 + len(fault), 4)  # a new plan per fault
    outputs, counters = runs_of_one_plan(graph_program, [x, w], 4, fault)
    for out in outputs:
        np.testing.assert_allclose(out, graph_program_numpy(x, w), rtol=1e-5, atol=1e-5)
    launches = counters[0]["kernel_launches"]
    assert launches > 0
    assert [c["graph_capture_failures"] for c in counters] == [0, 1, 0, 0]  # tried once, never again
    assert all(c["graph_replays"] == 0 and c["kernel_launches"] == launches for c in counters)
    # The emulated stream is usable after the failed capture: a new plan captures and replays.
    y = F(3, 9 + len(fault))
    outputs, counters = runs_of_one_plan(lambda a: (a * 2).exp().sum(0), [y], 3)
    np.testing.assert_allclose(outputs[-1], np.exp(y * 2).sum(0), rtol=1e-5)
    assert [c["graph_replays"] for c in counters] == [0, 1, 1]


def test_strict_graphs_raise_where_the_capture_fails_and_change_nothing():
    previous = loom._C._set_strict_cuda_graphs(True)
    loom._C._set_executor("cuda-emulated")
    try:
        a = F(5, 19)

        def step():  # one trace, one plan at every call
            return (loom.tensor(a, device="lazy:cpu") * 2).exp().sum()

        assert step().item() == pytest.approx(np.exp(a * 2).sum(), rel=1e-5)
        loom._C._inject_capture_fault("allocate")
        y = step()
        with pytest.raises(RuntimeError, match=r"cannot allocate 16 bytes on cpu while capturing the CUDA Graph of "
                                               r"trace [0-9a-f]+ \(emulated\) \(recording .+\): a CUDA Graph replays"):
            y.item()
        # A failure of the whole trace errors its fresh results (lazy/sync.h): y keeps raising it.
        with pytest.raises(RuntimeError, match="while capturing the CUDA Graph"):
            y.item()
        # The next step captures again (strict tries at every run), and replays.
        before = loom.metrics()["graph_replays"]
        assert step().item() == pytest.approx(np.exp(a * 2).sum(), rel=1e-5)
        assert loom.metrics()["graph_replays"] == before + 1
    finally:
        loom._C._inject_capture_fault("")
        loom._C._set_strict_cuda_graphs(previous)
        loom._C._set_executor("compiled")


def test_a_failed_capture_warns_once_per_process():
    # A fresh process: the warning is given once per process, whichever plan fails first.
    code = textwrap.dedent("""
        import warnings
        import numpy as np
        import loom
        loom._C._set_executor("cuda-emulated")
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for n in (3, 4):  # two plans, both failing their capture
                x = loom.tensor(np.ones((n, 5), np.float32), device="lazy:cpu")
                (x * 2).sum().item()
                loom._C._inject_capture_fault("synchronize")
                assert (x * 2).sum().item() == 10 * n
        print(loom.metrics()["graph_capture_failures"], len(seen))
        print(seen[0].category.__name__, seen[0].message)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, LOOM_CUDA_GRAPHS="1"))
    assert done.returncode == 0, done.stderr
    counts, warning = done.stdout.splitlines()[:2]
    assert counts == "2 1"
    assert warning.startswith("RuntimeWarning capturing the CUDA Graph of trace ")
    assert "operation not permitted when stream is capturing" in warning
    assert "graph_capture_failures" in warning
