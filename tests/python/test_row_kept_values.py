"""Costly values a row kernel keeps across its passes (fusion/render.cpp, "kept values").

A row kernel walks each row once per reduction and once more for its element epilogue. A costly
value (exp, tanh, ...) that a later pass needs again is written by the first pass that computes
it into the element of a row-shaped store of its dtype and read back, instead of being computed
again: softmax calls exp once per element, not twice. Checked here: the sources call exp once
(both renderings), and every form computes what the unfused executor and PyTorch (float64) do:
masked, NaN and -inf rows, rows of length 1, several reduced dims, non-contiguous inputs,
results written over their input or into another tensor, every float dtype, a value needed by
two reductions and the epilogue, two costly values with one store free, and cross-entropy's
forward and backward in one step.
"""

import re

import numpy as np
import pytest

import loom
from _fusion_helpers import dumping_to, run_lazy

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(151)


def dumped(tmp_path, program, arrays):
    """The fused results, and the C++ and CUDA sources of the modules that computed them."""
    with dumping_to(tmp_path / "dump") as dump:
        outs = run_lazy(program, arrays, "fused")
    cpp = "".join(p.read_text() for p in sorted(dump.glob("*.cpp")))
    cu = "".join(p.read_text() for p in sorted(dump.glob("*.cu")))
    return outs, cpp, cu


def exp_calls(source):
    """Calls of exp in the kernels (the prelude's definition `loom_expf(float x)` is not one)."""
    return len(re.findall(r"= loom_expf?\(v", source))


def masked_rows(shape, dtype):
    x = RNG.standard_normal(shape) * 3
    if dtype in ("float32", "float64"):
        flat = x.reshape(-1, shape[-1])
        flat[0, :] = -np.inf  # a row masked whole: NaN out, as in PyTorch
        flat[1, 1::2] = -np.inf  # a causal-style mask
        flat[2, 3 % shape[-1]] = np.nan
        flat[3, :] = 0.0
        flat[4, 0] = 80.0  # a dominant element: the others' exps underflow
    return x


def as_dtype(lib, x, dtype):
    t = lib.tensor(x.astype(np.float64 if dtype == "float64" else np.float32))
    return t.to(getattr(lib, dtype))


# Programs over the last dim whose kernels keep a costly value (or have one too many to keep).
def programs(lib):
    F = lib.nn.functional

    def entropy(t):  # exp needed by two reductions and the epilogue
        e = (t - t.amax(-1, keepdim=True)).exp()
        s = e.sum(-1, keepdim=True)
        return [e / s, (e * t).sum(-1, keepdim=True) / s]

    def two_costly(t):  # exp and tanh both wanted again; one row-shaped store to keep them in
        th = t.tanh()
        return [F.softmax(t, -1) + th * th.sum(-1, keepdim=True)]

    return {
        "softmax": lambda t: [F.softmax(t, -1)],
        "softmax and layer norm": lambda t: [F.softmax(t, -1), F.layer_norm(t, (t.shape[-1],))],
        "scaled softmax": lambda t: [F.softmax(t * 0.5, -1) * 3.0],
        "log_softmax": lambda t: [F.log_softmax(t, -1)],
        "entropy": entropy,
        "two costly": two_costly,
        "softmax over two dims": lambda t: [(t - t.amax((-2, -1), keepdim=True)).exp()
                                            / (t - t.amax((-2, -1), keepdim=True)).exp().sum((-2, -1), keepdim=True)],
    }


def reference(name, x, dtype):
    """PyTorch's result in float64 from the input as rounded to dtype."""
    t = as_dtype(torch, x, dtype).double()
    return [r.numpy() for r in programs(torch)[name](t)]


TOL = {"float16": 1e-2, "bfloat16": 5e-2, "float32": 1e-5, "float64": 1e-12}


def check(name, got_all, want, dtype, what):
    for got, ref in zip(got_all, want):
        np.testing.assert_allclose(got, ref, rtol=TOL[dtype], atol=TOL[dtype], err_msg=f"{what} {name} {dtype}")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("name", list(programs(loom)))
@pytest.mark.parametrize("shape", [(3, 7, 33), (6, 1), (5, 300)], ids=["3d", "rows-of-1", "long-rows"])
def test_kept_values_fused_equal_unfused_and_torch(name, dtype, shape):
    x = masked_rows(shape, dtype)

    def program(t):
        return programs(loom)[name](t.to(getattr(loom, dtype)))

    arrays = [x.astype(np.float64 if dtype == "float64" else np.float32)]
    want = reference(name, x, dtype)
    check(name, run_lazy(program, arrays, "fused"), want, dtype, "fused")
    check(name, run_lazy(program, arrays, "unfused"), want, dtype, "unfused")


def test_softmax_and_layer_norm_call_exp_once_per_element(tmp_path):
    """The issue's workload: the sum's pass computes exp(x - max) and keeps it; the epilogue reads
    it back. Both renderings."""
    x = RNG.standard_normal((16, 96)).astype(np.float32)
    F = loom.nn.functional
    outs, cpp, cu = dumped(tmp_path, lambda t: [F.softmax(t, -1), F.layer_norm(t, (96,))], [x])
    assert exp_calls(cpp) == 1 and exp_calls(cu) == 1
    t = torch.tensor(x, dtype=torch.float64)
    np.testing.assert_allclose(outs[0], torch.softmax(t, -1).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[1], torch.nn.functional.layer_norm(t, (96,)).numpy(), rtol=1e-5, atol=1e-5)


def test_a_value_with_no_store_of_its_dtype_is_computed_again(tmp_path):
    """A softmax compared with a threshold stores only bools: no store can hold the float32 exp,
    so both passes call exp."""
    x = RNG.standard_normal((16, 96)).astype(np.float32)

    def program(t):
        e = (t - t.amax(-1, keepdim=True)).exp()
        return [e / e.sum(-1, keepdim=True) > 0.02]

    outs, cpp, _ = dumped(tmp_path, program, [x])
    assert exp_calls(cpp) == 2
    t = torch.tensor(x, dtype=torch.float64)
    p = torch.softmax(t, -1).numpy()
    decided = np.abs(p - 0.02) > 1e-6  # away from the threshold, where float32 rounding cannot flip it
    np.testing.assert_array_equal(outs[0][decided], (p > 0.02)[decided])


@pytest.mark.parametrize("view", ["transposed", "strided", "broadcast"])
def test_non_contiguous_rows(view):
    x = masked_rows((40, 24), "float32").astype(np.float32)
    F = loom.nn.functional

    def take(lib, t):
        if view == "transposed":
            return t.transpose(0, 1)
        if view == "strided":
            return t[::2, 1::3]
        return t[:1].expand(5, 24)

    def program(t):
        v = take(loom, t)
        return [F.softmax(v, -1), F.layer_norm(v, (v.shape[-1],))]

    t = take(torch, torch.tensor(x, dtype=torch.float64))
    want = [torch.softmax(t, -1).numpy(), torch.nn.functional.layer_norm(t, (t.shape[-1],)).numpy()]
    for executor in ("fused", "unfused"):
        check(view, run_lazy(program, [x], executor), want, "float32", executor)


def test_results_written_over_their_input_and_into_another_tensor():
    """softmax written over its own input (the row kernel reads what the result overwrites), and
    into another tensor's memory (a destination the kernel may write early)."""
    x = masked_rows((9, 50), "float32").astype(np.float32)
    other = np.zeros_like(x)
    t64 = torch.tensor(x, dtype=torch.float64)
    want_self = torch.softmax(t64 * 2.0, -1).numpy()
    want_other = (torch.softmax(t64, -1) * 3.0).numpy()
    for executor in ("fused", "unfused"):
        loom._C._set_executor(executor)
        try:
            a = loom.tensor(x, device="lazy")
            b = loom.tensor(other, device="lazy")
            b.copy_(a.softmax(-1) * 3.0)
            a.copy_((a * 2.0).softmax(-1))
            got_a, got_b = a.numpy(), b.numpy()
        finally:
            loom._C._set_executor("compiled")
        np.testing.assert_allclose(got_a, want_self, rtol=1e-5, atol=1e-6, err_msg=executor)
        np.testing.assert_allclose(got_b, want_other, rtol=1e-5, atol=1e-6, err_msg=executor)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_cross_entropy_step_calls_exp_once(tmp_path, dtype):
    """Cross-entropy's forward and backward in one step: one row kernel, whose gradient reads back
    the exp(x - max) its sum's pass computed. Values and gradients against the unfused executor
    and PyTorch."""
    x = RNG.standard_normal((64, 37)) * 4
    x[3, :] = 0.0
    target = RNG.integers(0, 37, 64)
    target[5] = -100  # ignored

    def step(lib, xs, ts):
        leaf = xs.clone().requires_grad_(True)
        loss = lib.nn.functional.cross_entropy(leaf.to(getattr(lib, dtype)), ts)
        loss.backward()
        return loss, leaf.grad

    def program(xs, ts):
        loss, grad = step(loom, xs, ts)
        return [loss, grad]

    arrays = [x.astype(np.float64 if dtype == "float64" else np.float32), target]
    outs, cpp, cu = dumped(tmp_path, program, arrays)
    if dtype == "float32":
        assert exp_calls(cpp) == 1 and exp_calls(cu) == 1
    # PyTorch in float64, from the logits as rounded to dtype.
    rounded = torch.tensor(arrays[0]).to(getattr(torch, dtype)).double().requires_grad_(True)
    want_loss = torch.nn.functional.cross_entropy(rounded, torch.tensor(target))
    want_loss.backward()
    want_grad = rounded.grad
    tol = TOL[dtype] if dtype != "float32" else 1e-5
    for what, got in (("fused", outs), ("unfused", run_lazy(program, arrays, "unfused"))):
        np.testing.assert_allclose(got[0], want_loss.detach().numpy(), rtol=tol, atol=tol, err_msg=what)
        np.testing.assert_allclose(got[1], want_grad.numpy(), rtol=tol, atol=tol, err_msg=what)
