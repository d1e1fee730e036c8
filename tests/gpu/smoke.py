"""The CUDA backend's first steps on a GPU, one at a time, each reported OK or FAILED with its
error, so that a first session on a GPU sees at once which layer breaks (driver entry points,
NVRTC and module loading, launches, cuBLAS, graph capture, a failed capture's fallback). Each
step runs in this one process, after the steps before it: a step that faults the device can
fail the ones after it, so read the first FAILED. tests/gpu/check.sh runs it before the suites;
run it alone with: PYTHONPATH=build-gpu/python python3 tests/gpu/smoke.py"""

import traceback

import numpy as np

import loom

STEPS = []


def step(fn):
    STEPS.append(fn)
    return fn


@step
def device():
    assert loom.cuda.is_available(), loom.cuda.unavailable_reason()
    assert loom._C._cuda_driver_status() == "", loom._C._cuda_driver_status()
    return f"{loom.cuda.device_count()} GPU(s)"


@step
def copies():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = loom.tensor(a, device="cuda")
    np.testing.assert_array_equal(x.cpu().numpy(), a)
    return "host -> device -> host"


@step
def runtime_kernels():
    x = loom.arange(10.0, device="cuda")  # NVRTC, module load, a launch through the staging ring
    np.testing.assert_array_equal(x.cpu().numpy(), np.arange(10.0, dtype=np.float32))
    z = loom.ones(3, 5, device="cuda").T.contiguous()  # fill, strided copy
    np.testing.assert_array_equal(z.cpu().numpy(), np.ones((5, 3), np.float32))
    return "arange, fill, strided copy"


@step
def eager_fused_kernel():
    a = np.linspace(-1, 1, 40, dtype=np.float32)
    y = (loom.tensor(a, device="cuda") * 2 + 1).exp()
    np.testing.assert_allclose(y.cpu().numpy(), np.exp(a * 2 + 1), rtol=1e-6)
    s = loom.tensor(a, device="cuda").reshape(4, 10).sum(1)  # a row kernel: block reduction
    np.testing.assert_allclose(s.cpu().numpy(), a.reshape(4, 10).sum(1), rtol=1e-5, atol=1e-6)
    return "pointwise and row kernels"


@step
def cublas_direct():
    a, b = np.random.default_rng(0).standard_normal((2, 33, 17)).astype(np.float32)[0], np.ones((17, 5), np.float32)
    y = loom.tensor(a, device="cuda") @ loom.tensor(b, device="cuda")
    np.testing.assert_allclose(y.cpu().numpy(), a @ b, rtol=1e-5, atol=1e-5)
    return "cublasGemmEx"


def four_runs(shape, fault=None):
    """One lazy program run four times (direct, capture, replays), `fault` injected into its
    capture; returns loom's counters over the four runs."""
    rng = np.random.default_rng(1)
    w = loom.tensor(rng.standard_normal(shape).astype(np.float32), device="lazy:cuda")
    before = loom.metrics()
    for i in range(4):
        if i == 1 and fault:
            loom._C._inject_capture_fault(fault)
        a = rng.standard_normal((5, shape[0])).astype(np.float32)
        out = ((loom.tensor(a, device="lazy:cuda") @ w).relu() * (i + 0.5)).sum(0)
        np.testing.assert_allclose(out.cpu().numpy(), (np.maximum(a @ w.cpu().numpy(), 0) * (i + 0.5)).sum(0),
                                   rtol=1e-5, atol=1e-5)
    after = loom.metrics()
    return {k: after[k] - before[k] for k in ("graph_replays", "graph_capture_failures")}


@step
def lazy_graph():
    strict = loom._C._set_strict_cuda_graphs(True)  # a failed capture raises here, with its reason
    try:
        replays = four_runs((8, 4))["graph_replays"]
    finally:
        loom._C._set_strict_cuda_graphs(strict)
    assert replays == 3, f"{replays} graph replays for 4 runs (expected 3: capture + 2 replays)"
    return "cublasGemmBatchedEx, stream capture, cudaGraphLaunch, moved inputs"


@step
def capture_fallback():
    # cudaStreamSynchronize inside the capture: the driver refuses it and invalidates the capture.
    seen = four_runs((8, 5), fault="synchronize")
    assert seen == {"graph_replays": 0, "graph_capture_failures": 1}, seen
    assert four_runs((8, 6))["graph_replays"] == 3, "the stream captures no more after a failed capture"
    return "a refused call ends the capture; the plan launches directly, the stream captures again"


@step
def data_error():
    x = loom.tensor(np.zeros((3, 2), np.float32), device="cuda")
    bad = x[loom.tensor(np.array([5]), device="cuda")]
    try:
        bad.cpu()
    except IndexError as e:
        return f"raised at the wait: {str(e)[:60]}..."
    raise AssertionError("an index out of range was not reported")


if __name__ == "__main__":
    failed = 0
    for fn in STEPS:
        try:
            print(f"OK      {fn.__name__}: {fn()}", flush=True)
        except Exception as e:  # report every layer, then go on
            failed += 1
            print(f"FAILED  {fn.__name__}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc()
            if fn.__name__ == "device":
                break
    raise SystemExit(1 if failed else 0)
