"""Split reductions (fusion/program.h, Kernel::split_block).

A full reduction (sum, prod, amax, amin over every dim; mean is a sum and a division) of at least
2^15 elements joins the pointwise kernel that computes its input: the first pass computes the
elementwise chain and one partial per block of 4096 elements, in parallel over blocks; the second
combines the partials in block order. Checked here: every dtype and reduction the partitioner
splits, sizes around the threshold and not a multiple of the block, empty and one-element inputs,
NaN and infinities, a strided input, keepdim, results read by elementwise work (which cannot join
the first pass), fused against unfused, the emulated CUDA lowering (which runs the passes as two
launches) and float64 references; a chain then a reduction is one kernel step of two launches,
both renderings take the split form, and results do not depend on the thread count.
"""

import os
import sys

import numpy as np
import pytest

import loom
from _fusion_helpers import outputs_by_thread_count, run_lazy

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "perf"))
import workloads as W  # noqa: E402

RNG = np.random.default_rng(23)
EXECUTORS = ["fused", "unfused", "cuda-emulated", "cuda-emulated-unfused"]
THRESHOLD, BLOCK = 1 << 15, 4096
# Around the threshold, a whole number of blocks, and a partial last block.
SPLIT_SIZES = [THRESHOLD, THRESHOLD + 1, 9 * BLOCK, 100_003]


def data(dtype, n):
    x = RNG.standard_normal(n) * 3
    if dtype == "bool":
        return x > 0.5
    if dtype in ("int8", "int16", "int32", "int64"):
        return np.round(x).astype(dtype)
    if dtype == "uint8":
        return np.abs(np.round(x)).astype(np.uint8)
    return x.astype(np.float32 if dtype in ("float16", "bfloat16") else dtype)


def as_loom(t, dtype):
    return t.to(getattr(loom, dtype)) if dtype in ("float16", "bfloat16") else t


def programs(dtype):
    """(name, loom program, float64 reference) triples of full reductions over a chain."""
    floating = dtype in ("float32", "float64", "float16", "bfloat16")
    if dtype == "bool":
        return [("sum", lambda t: t.sum(), lambda x: x.sum()),
                ("amax", lambda t: t.amax(), lambda x: x.max()),
                ("amin", lambda t: t.amin(), lambda x: x.min())]
    progs = [("amax", lambda t: (t * 2).amax(), lambda x: (x * 2).max()),
             ("amin", lambda t: (t - 1).amin(), lambda x: (x - 1).min()),
             ("sum", lambda t: (t * 3 + 1).sum(), lambda x: (x * 3 + 1).sum())]
    if dtype in ("float16", "bfloat16"):
        progs[-1] = ("sum", lambda t: ((t * 3 + 1) * 0.01).sum(), lambda x: ((x * 3 + 1) * 0.01).sum())
    if floating:
        progs += [
            # Sums that stay inside float16's range (a float16 sum is rounded to float16).
            ("mean", lambda t: (t * t * 0.01).mean(), lambda x: (x * x * 0.01).mean()),
            ("chain_sum", lambda t: ((t * 0.5).tanh() + 2).log().sum() * 0.1,
             lambda x: np.log(np.tanh(x * 0.5) + 2).sum() * 0.1),
            # Values near one, so that a product of 1e5 of them stays finite.
            ("prod", lambda t: (t * 1e-5 + 1).prod(), lambda x: (x * 1e-5 + 1).prod()),
            ("sum_keepdim", lambda t: (t.abs() * 0.1).sum(0, keepdim=True), lambda x: (np.abs(x) * 0.1).sum(0, keepdims=True)),
        ]
    return progs


DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool"]


def check_close(got, want, dtype, name, msg):
    if dtype in ("float16", "bfloat16"):
        # Elements rounded to the narrow dtype at every op, the result rounded once more.
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=1e-2 * max(1.0, abs(float(np.max(want)))), err_msg=msg)
    elif dtype in ("float32", "float64"):
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12, err_msg=msg)
    else:
        np.testing.assert_array_equal(got, want, err_msg=msg)


@pytest.mark.parametrize("dtype", DTYPES)
def test_split_reductions_equal_unfused_emulated_and_float64(dtype):
    for n in [SPLIT_SIZES[0], SPLIT_SIZES[3]] if dtype not in ("float32", "int32") else SPLIT_SIZES:
        x = data(dtype, n)
        progs = programs(dtype)

        def program(t):
            t = as_loom(t, dtype)
            return [f(t) for _, f, _ in progs]

        results = {e: run_lazy(program, [x], e) for e in EXECUTORS}
        if dtype in ("float16", "bfloat16"):
            x64 = torch.tensor(x).to(getattr(torch, dtype)).double().numpy()
        else:
            x64 = x.astype(np.float64) if dtype in ("float32", "float64") else x  # integers wrap as loom's
        for (name, _, ref), *got in zip(progs, *results.values()):
            want = ref(x64)
            for executor, g in zip(EXECUTORS, got):
                check_close(g, want, dtype, name, f"{executor} {name} {dtype} n={n}")
            # The same kernels, blocks and order: the emulated lowering agrees exactly with the
            # CPU executor (fused and unfused may differ in the last bit: a fused a * b + c may
            # be one FMA).
            np.testing.assert_array_equal(got[2], got[0], err_msg=f"emulated {name} {dtype} n={n}")
            np.testing.assert_array_equal(got[3], got[1], err_msg=f"emulated unfused {name} {dtype} n={n}")


@pytest.mark.parametrize("n", [0, 1, 3])
def test_empty_and_tiny_inputs(n):
    x = RNG.standard_normal(n).astype(np.float32)

    def program(t):
        outs = [(t * 2).sum(), (t + 1).prod(), t.mean()]
        return outs + ([t.amax(), t.amin()] if n else [])

    for executor in EXECUTORS:
        got = run_lazy(program, [x], executor)
        tx = torch.tensor(x, dtype=torch.float64)
        want = [(tx * 2).sum(), (tx + 1).prod(), tx.mean()] + ([tx.amax(), tx.amin()] if n else [])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-6, equal_nan=True, err_msg=executor)


@pytest.mark.parametrize("special", ["nan", "inf", "-inf", "both_inf"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_and_infinities_reach_the_result(special, dtype):
    n = 100_003
    x = data(dtype, n)
    at = {"nan": [77_777], "inf": [5], "-inf": [n - 1], "both_inf": [4096, 50_000]}[special]
    values = {"nan": [np.nan], "inf": [np.inf], "-inf": [-np.inf], "both_inf": [np.inf, -np.inf]}[special]
    for i, v in zip(at, values):
        x[i] = v

    def program(t):
        return [t.sum(), t.amax(), t.amin(), (t * 0.5).mean(), (t * 1e-6 + 1).prod()]

    tx = torch.tensor(x, dtype=torch.float64)
    want = [tx.sum(), tx.amax(), tx.amin(), (tx * 0.5).mean(), (tx * 1e-6 + 1).prod()]
    for executor in EXECUTORS:
        got = run_lazy(program, [x], executor)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, equal_nan=True, err_msg=f"{executor} {special}")


def test_strided_and_multi_dim_inputs():
    x = RNG.standard_normal((300, 257)).astype(np.float32)

    def program(t):
        u = t.t()  # a transposed view: the first pass walks the domain with unravelled indices
        return [(u * 2).sum(), u.exp().amax(), (t[:, ::2] + 1).mean(), t.sum((0, 1), keepdim=True)]

    tx = torch.tensor(x, dtype=torch.float64)
    want = [(tx.t() * 2).sum(), tx.t().exp().amax(), (tx[:, ::2] + 1).mean(), tx.sum((0, 1), keepdim=True)]
    for executor in EXECUTORS:
        got = run_lazy(program, [x], executor)
        for g, w in zip(got, want):
            assert g.shape == tuple(w.shape), executor
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, err_msg=executor)


def groups(tmp_path, program, arrays):
    """The dumped kernel groups of the modules the fused executor builds, and the launches."""
    dump = tmp_path / "dump"
    old = os.environ.get("LOOM_DUMP_DIR")
    os.environ["LOOM_DUMP_DIR"] = str(dump)
    try:
        loom.sync()
        before = loom.metrics()["kernel_launches"]
        outs = run_lazy(program, arrays, "fused")
        launches = loom.metrics()["kernel_launches"] - before
    finally:
        if old is None:
            del os.environ["LOOM_DUMP_DIR"]
        else:
            os.environ["LOOM_DUMP_DIR"] = old
    lines = [line for p in dump.glob("*.groups") for line in p.read_text().splitlines() if line.startswith("kernel")]
    cpp = "".join(p.read_text() for p in dump.glob("*.cpp"))
    cu = "".join(p.read_text() for p in dump.glob("*.cu"))
    return lines, launches, outs, cpp, cu


@pytest.mark.parametrize("reduction", ["sum", "mean", "amax"])
def test_a_chain_then_a_reduction_is_one_split_kernel(tmp_path, reduction):
    x = RNG.uniform(-2, 2, 100_000).astype(np.float32)
    lines, launches, (got,), cpp, cu = groups(tmp_path, lambda t: [getattr(W.chain(loom, t), reduction)()], [x])
    assert len(lines) == 1 and "(split)" in lines[0], lines
    assert launches == 2  # the chain with the partials, then their combination
    chained = W.chain_numpy(x).astype(np.float64)
    want = {"sum": chained.sum(), "mean": chained.mean(), "amax": chained.max()}[reduction]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    # Both renderings: per-block partials, then a second function over them.
    assert "for (i64 blk = lo; blk < hi; ++blk)" in cpp and "_c(const i64* ip" in cpp
    assert "for (i64 blk = blockIdx.x; blk < blocks; blk += gridDim.x)" in cu
    assert "for (i64 blk = threadIdx.x; blk < blocks; blk += blockDim.x)" in cu


def test_several_reductions_share_the_first_pass(tmp_path):
    x = RNG.standard_normal(70_000).astype(np.float32)
    program = lambda t: [(t * 2).exp().sum(), (t * 2).exp().amax(), t.abs().mean()]  # noqa: E731
    lines, launches, got, _, _ = groups(tmp_path, program, [x])
    assert len(lines) == 1 and launches == 2
    x64 = x.astype(np.float64)
    for g, w in zip(got, [np.exp(x64 * 2).sum(), np.exp(x64 * 2).max(), np.abs(x64).mean()]):
        np.testing.assert_allclose(g, w, rtol=1e-5)


def test_elements_reading_a_result_are_a_kernel_of_their_own(tmp_path):
    x = RNG.standard_normal(50_000).astype(np.float32)
    lines, _, (centered,), _, _ = groups(tmp_path / "a", lambda t: [t - t.mean()], [x])
    assert len(lines) == 2
    lines, _, (total,), _, _ = groups(tmp_path / "b", lambda t: [(t - t.sum()).sum()], [x])
    assert len(lines) == 2
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(centered, x64 - x64.mean(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(total, (x64 - x64.sum()).sum(), rtol=1e-4)


def test_the_backward_of_a_chain_then_a_sum():
    x = RNG.uniform(-2, 2, 100_000).astype(np.float32)
    t = loom.tensor(x, device="lazy", requires_grad=True)
    W.chain(loom, t).sum().backward()
    tt = torch.tensor(x.astype(np.float64), requires_grad=True)
    W.chain(torch, tt).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_split_results_do_not_depend_on_the_thread_count(tmp_path):
    outs = outputs_by_thread_count(tmp_path, """
        import numpy as np, loom
        x = np.random.default_rng(3).standard_normal(1_000_003).astype(np.float32)
        t = loom.tensor(x, device="lazy")
        outs = [(t * 1.5).sum(), (t * t).mean(), t.exp().amax()]
        print(b"".join(o.numpy().tobytes() for o in outs).hex())
    """)
    assert len(outs) == 1


def test_in_place_updates_beside_a_split_reduction():
    """An in-place update of the reduced tensor and of a 0-d accumulator in the same trace: the
    first pass reads each element before writing it, the second reads the accumulator's old value."""
    x = RNG.standard_normal(80_000).astype(np.float32)
    for executor in EXECUTORS:
        loom._C._set_executor(executor)
        try:
            t = loom.tensor(x, device="lazy")
            acc = loom.tensor(np.float32(5.0), device="lazy")
            before = (t * 3).sum()
            t.mul_(2)
            acc += t.sum() + before
            got_t, got_acc = t.numpy(), acc.numpy()
        finally:
            loom._C._set_executor("compiled")
        x64 = x.astype(np.float64)
        np.testing.assert_array_equal(got_t, x * 2, err_msg=executor)
        np.testing.assert_allclose(got_acc, 5 + (2 * x64).sum() + (3 * x64).sum(), rtol=1e-5, err_msg=executor)
