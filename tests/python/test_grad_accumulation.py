"""How backward puts gradients into .grad, as PyTorch's AccumulateGrad does: the incoming gradient
becomes .grad itself when nothing else refers to it (no copy), later backwards add into .grad in
place, and nothing a user holds (a .grad from an earlier step, a gradient a hook kept, a gradient
passed to backward) changes where PyTorch's would not.

Every test runs eagerly and lazily and runs the same program through torch.
"""

import numpy as np
import pytest

import loom
from _ops_helpers import device, torch  # noqa: F401

W = [[0.5, -1.25, 2.0], [1.5, 0.75, -0.5]]
X = [[1.0, 2.0], [-0.5, 0.25], [3.0, -1.0]]


def both(device):
    """The same leaves in loom (on `device`) and in torch, float64."""
    lw = loom.tensor(np.asarray(W), device=device).requires_grad_()
    lx = loom.tensor(np.asarray(X), device=device).requires_grad_()
    tw = torch.tensor(np.asarray(W)).requires_grad_()
    tx = torch.tensor(np.asarray(X)).requires_grad_()
    return (lw, lx), (tw, tx)


def step(m, w, x, scale=1.0):
    """A small step whose weight gradient comes out of a matrix product (a fresh tensor)."""
    return (m.tanh(w @ x) * scale).sum()


def same(a, b):
    np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_grad_held_from_an_earlier_step(device, set_to_none):
    """zero_grad(set_to_none=True) leaves a held .grad as it was; set_to_none=False zeroes it and
    the next backward adds into it, in both libraries."""
    (lw, lx), (tw, tx) = both(device)
    held = []
    for lib, (w, x) in ((loom, (lw, lx)), (torch, (tw, tx))):
        opt = lib.optim.SGD([w, x], lr=0.0)
        step(lib, w, x).backward()
        first = w.grad
        opt.zero_grad(set_to_none=set_to_none)
        step(lib, w, x, 3.0).backward()
        held.append((first, w.grad, x.grad))
    (lf, lg, lxg), (tf, tg, txg) = held
    same(lf, tf)
    same(lg, tg)
    same(lxg, txg)
    # Later in-place writes into the new .grad reach a held one only where they are one tensor.
    lg.mul_(2)
    tg.mul_(2)
    same(lf, tf)


def test_accumulates_in_place_without_zero_grad(device):
    """A second backward adds into the existing .grad: a held reference sees the sum."""
    (lw, lx), (tw, tx) = both(device)
    first = {}
    for lib, w, x in ((loom, lw, lx), (torch, tw, tx)):
        step(lib, w, x).backward()
        first[lib.__name__] = w.grad
        step(lib, w, x, -2.0).backward()
    same(lw.grad, tw.grad)
    same(first["loom"], tw.grad)  # one tensor: the held one shows the sum


def test_one_gradient_for_two_leaves_is_not_shared(device):
    """AddBackward hands one tensor to both leaves: at most one may take it as its .grad."""
    for lib, dev in ((loom, device), (torch, "cpu")):
        a = lib.tensor(np.asarray(W), device=dev).requires_grad_()
        b = lib.tensor(np.asarray(W) * 2, device=dev).requires_grad_()
        ((a + b) * 3.0).sum().backward()
        a.grad.add_(1.0)
        np.testing.assert_allclose(b.grad.cpu().numpy(), np.full((2, 3), 3.0))
        np.testing.assert_allclose(a.grad.cpu().numpy(), np.full((2, 3), 4.0))
        ((a + b) * 3.0).sum().backward()
        np.testing.assert_allclose(b.grad.cpu().numpy(), np.full((2, 3), 6.0))
        np.testing.assert_allclose(a.grad.cpu().numpy(), np.full((2, 3), 7.0))


def test_gradient_kept_by_a_hook_is_not_written(device):
    """A hook that keeps the gradient holds it: .grad must be a copy, which later backwards add
    into without changing what the hook kept."""
    (lw, lx), (tw, tx) = both(device)
    kept = {}
    for lib, w, x in ((loom, lw, lx), (torch, tw, tx)):
        seen = []
        w.register_hook(lambda g, seen=seen: seen.append(g))
        step(lib, w, x).backward()
        step(lib, w, x).backward()
        kept[lib.__name__] = seen
    same(kept["loom"][0], kept["torch"][0])
    same(kept["loom"][1], kept["torch"][1])
    same(lw.grad, tw.grad)
    np.testing.assert_allclose(lw.grad.cpu().numpy(), 2 * kept["loom"][0].cpu().numpy(), rtol=1e-12)


def test_gradient_passed_to_backward_is_not_written(device):
    """A leaf's backward with a gradient the caller holds: .grad is a copy of it."""
    g = np.asarray(W) * 0.5
    for lib, dev in ((loom, device), (torch, "cpu")):
        w = lib.tensor(np.asarray(W), device=dev).requires_grad_()
        given = lib.tensor(g, device=dev)
        w.backward(given)
        w.grad.add_(1.0)
        np.testing.assert_allclose(given.cpu().numpy(), g)
        np.testing.assert_allclose(w.grad.cpu().numpy(), g + 1.0)


def test_retain_graph_and_retain_grad(device):
    """Two backwards through one graph accumulate; a retained non-leaf gradient that flows on to
    a leaf unchanged stays its own tensor."""
    (lw, lx), (tw, tx) = both(device)
    out = {}
    for lib, w, x in ((loom, lw, lx), (torch, tw, tx)):
        y = w + 1.0
        y.retain_grad()
        loss = (y @ x).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        w.grad.mul_(10.0)
        out[lib.__name__] = (y.grad, w.grad)
    same(out["loom"][0], out["torch"][0])
    same(out["loom"][1], out["torch"][1])


def test_autograd_grad_and_create_graph_leave_grad_alone(device):
    """loom.autograd.grad returns gradients without touching .grad; create_graph gives .grad a
    history, and a first-order backward afterwards adds into it."""
    (lw, lx), (tw, tx) = both(device)
    with_history = {}
    for lib, w, x in ((loom, lw, lx), (torch, tw, tx)):
        (gw,) = lib.autograd.grad(step(lib, w, x), [w])
        assert w.grad is None
        gw.mul_(2.0)
        step(lib, w, x).backward(create_graph=True)
        assert w.grad.requires_grad
        with_history[lib.__name__] = w.grad
        step(lib, w, x).backward()
    same(lw.grad, tw.grad)
    same(with_history["loom"], with_history["torch"])


def test_training_loop_matches_torch(device):
    """Ten SGD steps with momentum, set_to_none both ways: parameters and gradients as torch's."""
    for set_to_none in (True, False):
        (lw, lx), (tw, tx) = both(device)
        for lib, w, x in ((loom, lw, lx), (torch, tw, tx)):
            opt = lib.optim.SGD([w, x], lr=0.1, momentum=0.9)
            for i in range(10):
                opt.zero_grad(set_to_none=set_to_none)
                step(lib, w, x, 1.0 + i).backward()
                opt.step()
        same(lw, tw)
        same(lx, tx)
        same(lw.grad, tw.grad)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_linear_layer_gradients(device, set_to_none):
    """A linear layer's weight gradient is t() of a product and its bias's a reduction: .grad
    takes them without a copy where nothing else sees them; held gradients and accumulation as
    in torch."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3))
    results = {}
    for lib, dev in ((loom, device), (torch, "cpu")):
        lib.manual_seed(0)
        layer = lib.nn.Linear(3, 2).double()
        with lib.no_grad():
            layer.weight.copy_(lib.tensor(np.arange(6.0).reshape(2, 3) / 7))
            layer.bias.copy_(lib.tensor(np.array([0.25, -0.5])))
        layer = layer.to(dev)
        inp = lib.tensor(x, device=dev)
        opt = lib.optim.SGD(layer.parameters(), lr=0.1)
        layer(inp).tanh().sum().backward()
        held = (layer.weight.grad, layer.bias.grad)
        opt.step()
        opt.zero_grad(set_to_none=set_to_none)
        layer(inp).tanh().sum().backward()
        layer(inp).sigmoid().sum().backward()
        layer.weight.grad.mul_(3.0)
        results[lib.__name__] = [t.detach().cpu().numpy() for t in (*held, layer.weight.grad, layer.bias.grad,
                                                                   layer.weight)]
    for a, b in zip(results["loom"], results["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
