"""loom.func against torch's autograd (torch 1.13 has no torch.func; its autograd.functional and
nn.utils.stateless are the references): functional_call with swapped, tied and missing tensors;
grad / grad_and_value / vjp / jacrev / jacfwd / hessian values in float64, composed (grad of
grad) and second order through a functional inner step (MAML); vmap's in_dims, out_dims,
nested structures, errors and randomness modes; per-sample gradients by vmap(grad(...)) against
one backward per sample; and vmap on lazy tensors."""

import numpy as np
import pytest

import loom
from _ops_helpers import torch  # noqa: F401
from loom.func import functional_call, grad, grad_and_value, hessian, jacfwd, jacrev, vjp, vmap

tstateless = pytest.importorskip("torch.nn.utils.stateless")
RNG = np.random.default_rng(11)


def net(lib):
    """The same small network in either library (loom's gets torch's initial weights)."""
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    if lib is torch:
        return theirs
    ours = loom.nn.Sequential(loom.nn.Linear(3, 4), loom.nn.Tanh(), loom.nn.Linear(4, 2)).double()
    ours.load_state_dict({k: loom.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    return ours


def test_functional_call_swaps_and_restores_like_torch():
    ours, theirs = net(loom), net(torch)
    new = {name: RNG.standard_normal(tuple(p.shape)) for name, p in theirs.named_parameters()}
    x = RNG.standard_normal((5, 3))
    before = {k: v.detach().numpy().copy() for k, v in ours.state_dict().items()}
    a = functional_call(ours, {k: loom.tensor(v) for k, v in new.items()}, (loom.tensor(x),))
    b = tstateless.functional_call(theirs, {k: torch.tensor(v) for k, v in new.items()}, (torch.tensor(x),))
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)
    for k, v in ours.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])  # put back
    # Only some names given: the others keep the module's own; a list of dicts is merged.
    part = functional_call(ours, [{"0.weight": loom.tensor(new["0.weight"])}, {"2.bias": loom.tensor(new["2.bias"])}],
                           loom.tensor(x))
    with loom.no_grad():
        h = (loom.tensor(x) @ loom.tensor(new["0.weight"]).T + ours[0].bias).tanh()
        want = h @ ours[2].weight.T + loom.tensor(new["2.bias"])
    np.testing.assert_allclose(part.detach().numpy(), want.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="missing keys"):
        functional_call(ours, {"0.weight": loom.tensor(new["0.weight"])}, loom.tensor(x), strict=True)
    with pytest.raises(ValueError, match="multiple dictionaries"):
        functional_call(ours, [{"0.bias": loom.zeros(4)}, {"0.bias": loom.zeros(4)}], loom.tensor(x))


def test_functional_call_ties_shared_weights():
    class Tied(loom.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = loom.nn.Linear(2, 2, bias=False)
            self.b = loom.nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    m = Tied()
    w = loom.eye(2) * 3
    out = functional_call(m, {"a.weight": w}, loom.ones(1, 2))
    np.testing.assert_allclose(out.detach().numpy(), [[9.0, 9.0]])
    assert loom.nn.utils.stateless.functional_call is functional_call


def f_scalar(x, y):
    return (x.sin() * y).sum() + (x * x * y).sum()


def test_grad_and_value_match_torch_autograd():
    x, y = RNG.standard_normal(4), RNG.standard_normal(4)
    gx, gy = grad(f_scalar, argnums=(0, 1))(loom.tensor(x), loom.tensor(y))
    tx, ty = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    wx, wy = torch.autograd.grad(f_scalar(tx, ty), (tx, ty))
    np.testing.assert_allclose(gx.numpy(), wx.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gy.numpy(), wy.numpy(), rtol=1e-12)
    assert not gx.requires_grad  # nothing outside differentiates it
    g, (value, aux) = grad_and_value(lambda x: (f_scalar(x, loom.tensor(y)), "aux"), has_aux=True)(loom.tensor(x))
    np.testing.assert_allclose(value.item(), f_scalar(tx, ty).item(), rtol=1e-12)
    assert aux == "aux"
    # grad of grad: d2/dx2 of x^4 at 1.5 = 12 x^2.
    assert grad(grad(lambda x: x ** 4))(loom.tensor(1.5, dtype=loom.float64)).item() == pytest.approx(27.0)
    # dict arguments (a module's parameters) give a dict of gradients.
    d = grad(lambda p: (p["w"] * p["b"]).sum())({"w": loom.tensor([1.0, 2.0]), "b": loom.tensor([3.0, 4.0])})
    assert set(d) == {"w", "b"} and d["w"].tolist() == [3.0, 4.0]
    with pytest.raises(RuntimeError, match="scalar Tensor"):
        grad(lambda x: x * 2)(loom.ones(3))


def test_jacobians_hessian_and_vjp_match_torch():
    x = RNG.standard_normal(3)

    def f(lib, t):
        return lib.stack([t[0] * t[1], t[1].sin() + t[2] ** 2])

    want = torch.autograd.functional.jacobian(lambda t: f(torch, t), torch.tensor(x))
    for transform in (jacrev, jacfwd):
        np.testing.assert_allclose(transform(lambda t: f(loom, t))(loom.tensor(x)).numpy(), want.numpy(), rtol=1e-12)

    def g(lib, t):
        return (t ** 3).sum() + t[0] * t[2]

    np.testing.assert_allclose(hessian(lambda t: g(loom, t))(loom.tensor(x)).numpy(),
                               torch.autograd.functional.hessian(lambda t: g(torch, t), torch.tensor(x)).numpy(),
                               rtol=1e-12)
    v = RNG.standard_normal(2)
    out, fn = vjp(lambda t: f(loom, t), loom.tensor(x))
    (got,) = fn(loom.tensor(v))
    _, tw = torch.autograd.functional.vjp(lambda t: f(torch, t), torch.tensor(x), torch.tensor(v))
    np.testing.assert_allclose(got.numpy(), tw.numpy(), rtol=1e-12)
    np.testing.assert_allclose(out.numpy(), f(torch, torch.tensor(x)).numpy(), rtol=1e-12)


def test_second_order_through_a_functional_inner_step():
    """MAML: adapt the parameters by one gradient step taken functionally, then differentiate the
    adapted loss with respect to the original parameters."""
    ours, theirs = net(loom), net(torch)
    x, y = RNG.standard_normal((6, 3)), RNG.standard_normal((6, 2))

    def loss(lib, model, params, x, y):
        call = functional_call if lib is loom else tstateless.functional_call
        return ((call(model, params, (x,)) - y) ** 2).mean()

    params = dict(ours.named_parameters())
    inner = grad(lambda p: loss(loom, ours, p, loom.tensor(x), loom.tensor(y)))(params)
    adapted = {k: params[k] - 0.1 * inner[k] for k in params}
    loss(loom, ours, adapted, loom.tensor(x), loom.tensor(y)).backward()

    tparams = dict(theirs.named_parameters())
    tl = loss(torch, theirs, tparams, torch.tensor(x), torch.tensor(y))
    tinner = dict(zip(tparams, torch.autograd.grad(tl, list(tparams.values()), create_graph=True)))
    tadapted = {k: tparams[k] - 0.1 * tinner[k] for k in tparams}
    loss(torch, theirs, tadapted, torch.tensor(x), torch.tensor(y)).backward()
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, err_msg=name)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_per_sample_gradients_by_vmap_of_grad(device):
    model = net(loom).to(device)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = loom.tensor(RNG.standard_normal((5, 3)), device=device)
    y = loom.tensor(RNG.standard_normal((5, 2)), device=device)

    def sample_loss(params, xi, yi):
        return ((functional_call(model, params, (xi.unsqueeze(0),)) - yi) ** 2).sum()

    per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))(params, x, y)
    for i in range(5):
        model.zero_grad()
        sample_loss(dict(model.named_parameters()), x[i], y[i]).backward()
        for name, p in model.named_parameters():
            np.testing.assert_allclose(per_sample[name][i].cpu().numpy(), p.grad.cpu().numpy(), rtol=1e-10)


def test_vmap_dims_structures_and_errors():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 3))
    out = vmap(lambda u, v: u * v, in_dims=(0, 1))(loom.tensor(a), loom.tensor(b))
    np.testing.assert_allclose(out.numpy(), a * b.T)
    out = vmap(lambda u, c: u + c, in_dims=(-1, None), out_dims=1)(loom.tensor(a), loom.tensor(1.0))
    np.testing.assert_allclose(out.numpy(), (a + 1))
    pair = vmap(lambda d: (d["u"].sum(), {"m": d["u"].max()}))({"u": loom.tensor(a)})
    np.testing.assert_allclose(pair[0].numpy(), a.sum(1))
    np.testing.assert_allclose(pair[1]["m"].numpy(), a.max(1))
    nested = vmap(vmap(lambda s: s * 2))(loom.tensor(a))
    np.testing.assert_allclose(nested.numpy(), a * 2)
    with pytest.raises(ValueError, match="same size"):
        vmap(lambda u, v: u + v)(loom.ones(3), loom.ones(4))
    with pytest.raises(ValueError, match="at least one input must be batched"):
        vmap(lambda u: u, in_dims=None)(loom.ones(3))


def test_vmap_randomness_modes():
    x = loom.zeros(4, 3)
    with pytest.raises(RuntimeError, match="randomness"):
        vmap(lambda t: t + loom.rand(3))(x)
    same = vmap(lambda t: t + loom.rand(3), randomness="same")(x).numpy()
    assert (same == same[0]).all()
    different = vmap(lambda t: t + loom.rand(3), randomness="different")(x).numpy()
    assert len({tuple(r) for r in different}) == 4
