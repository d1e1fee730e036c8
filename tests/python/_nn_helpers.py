"""Shared helpers of the nn / optim suites that compare loom modules with PyTorch's: copying
weights, running a module on both with the same inputs, and comparing outputs and gradients."""

from collections import OrderedDict

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")


def np_(t):
    """A numpy copy of a loom or torch tensor (bfloat16 through float32)."""
    if hasattr(t, "is_lazy") or isinstance(t, loom.Tensor):
        if t.dtype is loom.bfloat16:
            t = t.float()
        return np.array(t.detach().cpu().numpy(), copy=True)
    return t.detach().numpy().copy()


def to_loom(t, device="cpu"):
    """A torch tensor's values as a loom tensor on `device`."""
    return loom.tensor(t.detach().numpy().copy(), device=device)


def copy_weights(tmodule, lmodule, device="cpu"):
    """Loads PyTorch's parameters and buffers into the loom module (strict)."""
    lmodule.load_state_dict(OrderedDict((k, to_loom(v, device)) for k, v in tmodule.state_dict().items()))


def assert_close(got, want, rtol=1e-10, atol=1e-12, what=""):
    """loom result(s) `got` equal torch result(s) `want`: tensors, None, or tuples/lists of them."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), (what, type(got), len(got), len(want))
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, rtol, atol, f"{what}[{i}]")
        return
    if want is None:
        assert got is None, what
        return
    g, w = np_(got), np_(want)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=what)


def tensors_in(x):
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in tensors_in(item)]
    return [] if x is None else [x]


def check_against_torch(tmodule, lmodule, inputs, device, rtol=1e-10, atol=1e-12, train_steps=1):
    """Runs both modules (float64, same weights) on the same inputs (torch tensors; those that
    are floating require grad), compares outputs, the gradients of a weighted sum of every
    output with respect to the inputs and to each parameter, and the state dicts afterwards
    (running statistics). Returns the loom outputs."""
    copy_weights(tmodule, lmodule, device)
    tins = [t.detach().clone().requires_grad_(t.is_floating_point()) if hasattr(t, "requires_grad") else t
            for t in inputs]
    lins = [to_loom(t, device).requires_grad_(t.is_floating_point()) if hasattr(t, "requires_grad") else t
            for t in inputs]
    for _ in range(train_steps):
        tout, lout = tmodule(*tins), lmodule(*lins)
        assert_close(lout, tout, rtol, atol, "output")
    touts, louts = tensors_in(tout), tensors_in(lout)
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(tuple(t.shape)) for t in touts]
    tloss = sum((t * torch.tensor(w, dtype=t.dtype)).sum() for t, w in zip(touts, weights) if t.requires_grad)
    lloss = sum((t * loom.tensor(w, dtype=t.dtype, device=device)).sum() for t, w in zip(louts, weights)
                if t.requires_grad)
    if hasattr(tloss, "backward"):
        tloss.backward()
        lloss.backward()
        for i, (t, lt) in enumerate(zip(tins, lins)):
            if hasattr(t, "grad") and t.requires_grad:
                assert_close(lt.grad, t.grad, rtol, atol, f"grad of input {i}")
        lparams = dict(lmodule.named_parameters())
        for name, p in tmodule.named_parameters():
            assert_close(lparams[name].grad, p.grad, rtol, atol, f"grad of {name}")
    lstate = lmodule.state_dict()
    assert list(lstate) == list(tmodule.state_dict())
    for k, v in tmodule.state_dict().items():
        assert_close(lstate[k], v, rtol, atol, f"state {k}")
    return lout


def counters_after_warm_up(step, warm_up=3, steps=2):
    """loom.metrics() counters that moved over `steps` calls of step() after `warm_up` calls: what
    a training loop does at steady state (each step is expected to sync itself, e.g. float(loss)).
    A dict of name -> increase."""
    for _ in range(warm_up):
        step()
    before = loom.metrics()
    for _ in range(steps):
        step()
    after = loom.metrics()
    return {k: after[k] - before[k] for k in after if isinstance(after[k], (int, float))}
