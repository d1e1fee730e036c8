"""loom.utils.checkpoint against running the function plainly (and against torch's checkpoint):
the same outputs and gradients for inputs and for the parameters the function uses, in float64,
on cpu and lazy; dropout inside draws the same mask in the rerun; kwargs, non-tensor arguments,
tuple outputs, checkpoint_sequential; no history kept by the first run; and a lazy training step
with checkpointed blocks compiles nothing after warm-up."""

import numpy as np
import pytest

import loom
from _nn_helpers import counters_after_warm_up
from _ops_helpers import torch  # noqa: F401
from loom.utils.checkpoint import checkpoint, checkpoint_sequential

torch_checkpoint = pytest.importorskip("torch.utils.checkpoint")

nn = loom.nn


def block(seed, device, p=0.0):
    loom.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Dropout(p), nn.Linear(8, 6)).to(device).double()


def grads(module, *tensors):
    return [t.grad.cpu().numpy().copy() for t in tensors] + [p.grad.cpu().numpy().copy() for p in module.parameters()]


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_gradients_equal_the_plain_run(device, dropout):
    results = []
    for use in (False, True):
        m = block(0, device, dropout)
        x = loom.tensor(np.random.default_rng(1).standard_normal((5, 6)), device=device, requires_grad=True)
        loom.manual_seed(5)  # the dropout mask's draws
        y = checkpoint(m, x, use_reentrant=False) if use else m(x)
        (y * y).sum().backward()
        results.append([y.detach().cpu().numpy()] + grads(m, x))
    for plain, ckpt in zip(*results):
        np.testing.assert_allclose(ckpt, plain, rtol=1e-12, atol=1e-14)


def test_matches_torch_checkpoint():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((4, 4))
    xs = rng.standard_normal((3, 4))

    def f(lib, x, w, scale):
        return (x @ w).tanh() * scale, x.sin()

    lw, lx = loom.tensor(w, requires_grad=True), loom.tensor(xs, requires_grad=True)
    tw, tx = torch.tensor(w, requires_grad=True), torch.tensor(xs, requires_grad=True)
    a, b = checkpoint(lambda x, w, scale: f(loom, x, w, scale), lx, lw, 2.0)
    ta, tb = torch_checkpoint.checkpoint(lambda x, w, scale: f(torch, x, w, scale), tx, tw, 2.0,
                                       use_reentrant=True)
    (a.sum() + (b * b).sum()).backward()
    (ta.sum() + (tb * tb).sum()).backward()
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(lw.grad.numpy(), tw.grad.numpy(), rtol=1e-12)


def test_the_first_run_keeps_no_history_and_backward_reruns_the_function():
    calls = []

    def f(x, *, power):
        calls.append(loom.is_grad_enabled())
        return x ** power

    x = loom.tensor([1.0, 2.0], requires_grad=True)
    y = checkpoint(f, x, power=3)
    assert y.requires_grad and y.grad_fn is not None and calls == [False]
    y.sum().backward()
    assert calls == [False, True]
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])


def test_parameters_get_gradients_when_no_input_needs_one():
    m = block(3, "cpu")
    x = loom.randn(2, 6, dtype=loom.float64)
    checkpoint(m, x, use_reentrant=False).sum().backward()
    assert all(p.grad is not None for p in m.parameters())


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_checkpoint_sequential_equals_the_plain_sequential(device):
    results = []
    for use in (False, True):
        loom.manual_seed(4)
        seq = nn.Sequential(*[nn.Linear(5, 5) for _ in range(5)]).to(device).double()
        x = loom.tensor(np.random.default_rng(3).standard_normal((2, 5)), device=device, requires_grad=True)
        y = checkpoint_sequential(seq, 2, x, use_reentrant=False) if use else seq(x)
        y.pow(2).sum().backward()
        results.append(grads(seq, x))
    for plain, ckpt in zip(*results):
        np.testing.assert_allclose(ckpt, plain, rtol=1e-12, atol=1e-14)


def test_a_lazy_step_with_checkpointed_blocks_compiles_nothing_after_warm_up():
    loom.manual_seed(0)
    blocks = nn.ModuleList([nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Dropout(0.1)) for _ in range(3)]).to("lazy")
    opt = loom.optim.AdamW(blocks.parameters(), lr=1e-3)
    x = loom.randn(4, 8, device="lazy").requires_grad_()

    def step():
        h = x
        for b in blocks:
            h = checkpoint(b, h, use_reentrant=False)
        loss = h.square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        float(loss)

    moved = counters_after_warm_up(step)
    assert moved["kernels_compiled"] == 0 and moved["graph_cache_misses"] == 0


def test_torch_names_resolve():
    import loom.utils.checkpoint as module
    assert loom.utils.checkpoint is module and module.checkpoint is checkpoint
    with pytest.raises(NotImplementedError, match="context_fn"):
        checkpoint(lambda t: t, loom.ones(1, requires_grad=True), context_fn=lambda: None)
