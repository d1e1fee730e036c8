"""The CUDA executor's lowering, run on the host by the CUDA emulator (graph/cuda_emulator.h):
every program is partitioned, planned, lowered to launches, matrix products and an argument
table exactly as for a GPU, then executed on the host with the same kernel sources (fused
kernels through their C++ rendering). Results must equal the CPU executor's. What needs a
GPU (threads, streams, graphs, cuBLAS) is in tests/gpu/."""

import os
import sys

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
