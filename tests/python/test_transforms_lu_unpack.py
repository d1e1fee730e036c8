"""torch.distributions.transforms, TransformedDistribution and LogNormal, and torch.lu_unpack:
built for the normalizing-flow programs (a logistic prior is a Uniform through
SigmoidTransform().inv; Glow's invertible 1x1 convolution starts from lu_unpack of a random
orthogonal matrix's LU). Each is compared with PyTorch 1.13 in float64 on cpu and lazy: values,
log |det J|, inverses, shapes and gradients."""

import numpy as np
import pytest

import loom
from _ops_helpers import torch  # noqa: F401

D = loom.distributions
TD = torch.distributions
DEVICES = ["cpu", "lazy"]
RNG = np.random.default_rng(3)


def both(array, device):
    return loom.tensor(array, dtype=loom.float64, device=device), torch.tensor(array, dtype=torch.float64)


def check(got, want, rtol=1e-12, atol=1e-12):
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=rtol, atol=atol)


X = RNG.standard_normal((4, 3)) * 2
POSITIVE = RNG.uniform(0.2, 3.0, (4, 3))
UNIT = RNG.uniform(0.05, 0.95, (4, 3))

# name -> (how to build it from a distributions module and a tensor maker, an input in its domain)
TRANSFORMS = {
    "exp": (lambda d, t: d.ExpTransform(), X),
    "exp.inv": (lambda d, t: d.ExpTransform().inv, POSITIVE),
    "power": (lambda d, t: d.PowerTransform(t(2.5)), POSITIVE),
    "sigmoid": (lambda d, t: d.SigmoidTransform(), X),
    "sigmoid.inv": (lambda d, t: d.SigmoidTransform().inv, UNIT),
    "tanh": (lambda d, t: d.TanhTransform(), X / 4),
    "softplus": (lambda d, t: d.transforms.SoftplusTransform(), X),
    "affine": (lambda d, t: d.AffineTransform(t(0.5), t(-2.0)), X),
    "affine event_dim=1": (lambda d, t: d.AffineTransform(t([1.0, 2.0, 3.0]), t([0.5, -1.0, 2.0]), event_dim=1), X),
    "compose": (lambda d, t: d.ComposeTransform([d.AffineTransform(1.0, 0.5), d.SigmoidTransform(),
                                                 d.SigmoidTransform().inv, d.ExpTransform()]), X),
    "independent": (lambda d, t: d.transforms.IndependentTransform(d.ExpTransform(), 1), X),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", TRANSFORMS)
def test_transform_matches_torch(name, device):
    make, x = TRANSFORMS[name]
    mine = make(D, lambda v: loom.tensor(v, dtype=loom.float64, device=device))
    theirs = make(TD, lambda v: torch.tensor(v, dtype=torch.float64))
    lx, tx = both(x, device)
    ly, ty = mine(lx), theirs(tx)
    check(ly, ty)
    check(mine.inv(ly), theirs.inv(ty), rtol=1e-9, atol=1e-9)
    check(mine.log_abs_det_jacobian(lx, ly), theirs.log_abs_det_jacobian(tx, ty), rtol=1e-9, atol=1e-9)
    assert mine.inv.inv is mine
    assert mine.bijective == theirs.bijective
    assert mine.domain.event_dim == theirs.domain.event_dim and mine.codomain.event_dim == theirs.codomain.event_dim
    assert tuple(mine.forward_shape((4, 3))) == tuple(theirs.forward_shape((4, 3)))
    if name != "affine event_dim=1" and not isinstance(theirs.sign, torch.Tensor):
        assert mine.sign == theirs.sign


def test_softmax_and_abs_are_not_bijective():
    x = RNG.standard_normal((2, 4))
    for name in ("SoftmaxTransform", "AbsTransform"):
        mine, theirs = getattr(D, name)(), getattr(TD, name)()
        check(mine(loom.tensor(x)), theirs(torch.tensor(x)))
        assert mine.bijective is False and theirs.bijective is False
    assert D.SoftmaxTransform().codomain.event_dim == 1


def test_cache_size_one_returns_the_exact_input():
    """A cached transform's inverse of the value it produced is its input (tanh's inverse of a
    saturated 1.0 would be inf otherwise)."""
    t = D.TanhTransform(cache_size=1)
    x = loom.tensor([0.3, 40.0], dtype=loom.float64)
    y = t(x)
    assert t.inv(y) is x
    assert D.TanhTransform().with_cache(1)._cache_size == 1
    with pytest.raises(ValueError):
        D.ExpTransform(cache_size=2)


def logistic(lib, device=None):
    kw = {} if device is None else {"device": device}
    z, o = lib.zeros(2, dtype=lib.float64, **kw), lib.ones(2, dtype=lib.float64, **kw)
    return lib.distributions.TransformedDistribution(lib.distributions.Uniform(z, o),
                                                     lib.distributions.SigmoidTransform().inv)


@pytest.mark.parametrize("device", DEVICES)
def test_logistic_prior(device):
    """pytorch-normalizing-flows' prior: Uniform(0, 1) through the logit, a standard logistic per
    dimension: log_prob, cdf, icdf, shapes, and gradients of log_prob with respect to the value."""
    mine, theirs = logistic(loom, device), logistic(torch)
    assert tuple(mine.batch_shape) == tuple(theirs.batch_shape) == (2,) and tuple(mine.event_shape) == ()
    lz, tz = both(RNG.standard_normal((5, 2)) * 3, device)
    lz.requires_grad_(), tz.requires_grad_()
    lp, tp = mine.log_prob(lz), theirs.log_prob(tz)
    check(lp, tp)
    lp.sum().backward(), tp.sum().backward()
    check(lz.grad, tz.grad, rtol=1e-10, atol=1e-10)
    check(mine.cdf(lz.detach()), theirs.cdf(tz.detach()))
    lu, tu = both(RNG.uniform(0.1, 0.9, (5, 2)), device)
    check(mine.icdf(lu), theirs.icdf(tu), rtol=1e-10)
    s = mine.sample((7,))
    assert tuple(s.shape) == (7, 2) and s.device.type == device and not s.requires_grad
    assert mine.rsample((3,)).shape == (3, 2)
    assert mine.has_rsample


@pytest.mark.parametrize("device", DEVICES)
def test_transformed_distribution_event_dims(device):
    """An affine map over a whole vector (event_dim=1) turns a batch of Normals into one event:
    the log |det J| is summed once, the base's log_prob over the reinterpreted dimension."""
    loc, tloc = both(RNG.standard_normal(3), device)
    scale, tscale = both(RNG.uniform(0.5, 2, 3), device)
    mine = D.TransformedDistribution(D.Normal(loc, scale), [D.AffineTransform(loc, scale * 2, event_dim=1),
                                                            D.ExpTransform()])
    theirs = TD.TransformedDistribution(TD.Normal(tloc, tscale), [TD.AffineTransform(tloc, tscale * 2, event_dim=1),
                                                                  TD.ExpTransform()])
    assert tuple(mine.batch_shape) == tuple(theirs.batch_shape) == ()
    assert tuple(mine.event_shape) == tuple(theirs.event_shape) == (3,)
    v, tv = both(RNG.uniform(0.5, 3, (2, 3)), device)
    check(mine.log_prob(v), theirs.log_prob(tv), rtol=1e-10)
    e, te = mine.expand((4,)), theirs.expand((4,))
    assert tuple(e.batch_shape) == (4,) and tuple(e.event_shape) == (3,)
    check(e.log_prob(v[:1]), te.log_prob(tv[:1]), rtol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_lognormal(device):
    loc, tloc = both(RNG.standard_normal((2, 3)), device)
    scale, tscale = both(RNG.uniform(0.3, 1.5, (2, 3)), device)
    mine, theirs = D.LogNormal(loc, scale), TD.LogNormal(tloc, tscale)
    v, tv = both(RNG.uniform(0.1, 4, (2, 3)), device)
    check(mine.log_prob(v), theirs.log_prob(tv), rtol=1e-10)
    for moment in ("mean", "mode", "variance"):
        check(getattr(mine, moment), getattr(theirs, moment), rtol=1e-10)
    check(mine.entropy(), theirs.entropy(), rtol=1e-10)
    check(mine.cdf(v), theirs.cdf(tv), rtol=1e-10)
    assert tuple(mine.expand((4, 2, 3)).batch_shape) == (4, 2, 3)


def test_validation_outside_the_support():
    with pytest.raises(ValueError, match="support"):
        D.LogNormal(loom.zeros(2), loom.ones(2)).log_prob(loom.tensor([1.0, -1.0]))


# ---- lu_unpack ----

SHAPES = [(3, 3), (5, 5), (2, 3, 4), (4, 3), (2, 2, 5, 5), (1, 1), (6, 2)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_lu_unpack_matches_torch_with_gradients(shape, device):
    a = torch.tensor(RNG.standard_normal(shape))
    lu, piv = torch.linalg.lu_factor(a)
    mine_lu = loom.tensor(lu.numpy(), device=device).requires_grad_()
    mine_piv = loom.tensor(piv.numpy(), device=device)
    their_lu = lu.clone().requires_grad_()
    P, L, U = loom.lu_unpack(mine_lu, mine_piv)
    tP, tL, tU = torch.lu_unpack(their_lu, piv)
    for got, want in ((P, tP), (L, tL), (U, tU)):
        assert got.device.type == device and got.dtype == loom.float64
        check(got, want)
    a_back = P @ L @ U
    check(a_back, a, rtol=1e-12, atol=1e-12)
    assert not P.requires_grad and L.requires_grad and U.requires_grad
    gl, gu = RNG.standard_normal(tuple(tL.shape)), RNG.standard_normal(tuple(tU.shape))
    ((L * loom.tensor(gl, device=device)).sum() + (U * loom.tensor(gu, device=device)).sum()).backward()
    ((tL * torch.tensor(gl)).sum() + (tU * torch.tensor(gu)).sum()).backward()
    check(mine_lu.grad, their_lu.grad)


def test_lu_unpack_flags_out_and_names():
    a = RNG.standard_normal((3, 4, 4))
    lu, piv = loom.linalg.lu_factor(loom.tensor(a))
    r = loom.lu_unpack(lu, piv)
    assert type(r).__name__ == "lu_unpack" and r.P is r[0] and r.U is r[2]
    no_data = loom.lu_unpack(lu, piv, unpack_data=False)
    assert no_data.L.shape == (0,) and no_data.U.shape == (0,)
    np.testing.assert_array_equal(no_data.P.numpy(), r.P.numpy())
    assert loom.lu_unpack(lu, piv, unpack_pivots=False).P.shape == (0,)


@pytest.mark.parametrize("call, message", [
    (lambda lu, piv: loom.lu_unpack(lu, piv.long()), "contiguous tensor of torch.int32"),
    (lambda lu, piv: loom.lu_unpack(lu[0, 0], piv), "2 or more dimensions"),
    (lambda lu, piv: loom.lu_unpack(lu, piv + 10), "between 1 and LU.size"),
    (lambda lu, piv: loom.lu_unpack(lu, piv[..., :2].contiguous()), "LU_pivots.size"),
])
def test_lu_unpack_errors_as_torch(call, message):
    lu, piv = loom.linalg.lu_factor(loom.tensor(RNG.standard_normal((2, 3, 3))))
    with pytest.raises(RuntimeError, match=message):
        call(lu, piv)
    with pytest.raises(TypeError, match="unpack_data"):
        loom.lu_unpack(lu, piv, unpack_data=1)


def test_lu_unpack_on_lazy_records_without_a_sync():
    """P's permutation is built by recorded gathers and scatters: lu_factor then lu_unpack on the
    lazy device run at the one sync that reads the result."""
    a = loom.tensor(RNG.standard_normal((4, 4)), device="lazy")
    before = loom.metrics()["syncs"]
    P, L, U = loom.lu_unpack(*loom.linalg.lu_factor(a))
    w = P @ L @ U
    assert loom.metrics()["syncs"] == before
    check(w, torch.tensor(a.cpu().numpy()))


@pytest.mark.parametrize("device", DEVICES)
def test_glow_1x1_convolution_trains(device):
    """The use normalizing-flow programs make of it (Glow's invertible 1x1 convolution, as in
    karpathy/pytorch-normalizing-flows, written here from the paper): W = P L (U + diag(S)) from
    lu_unpack of an orthogonal matrix's LU; log |det W| = sum log |S|; an SGD step on a flow loss
    moves L, U, S as PyTorch's does."""
    def step(lib, q, x, dev):
        P, L, U = lib.lu_unpack(*lib.linalg.lu_factor(q))
        L, S, U = (t.clone().requires_grad_() for t in (L, U.diagonal().clone(), lib.triu(U, diagonal=1)))
        params = [L, S, U]
        eye = lib.eye(q.shape[0], dtype=q.dtype, device=dev)
        W = P @ (lib.tril(L, diagonal=-1) + eye) @ (lib.triu(U, diagonal=1) + lib.diag(S))
        z = x @ W
        loss = 0.5 * (z ** 2).sum() - x.shape[0] * lib.log(lib.abs(S)).sum()
        loss.backward()
        return W, loss, [p.grad for p in params]
    q = np.linalg.qr(RNG.standard_normal((4, 4)))[0]
    x = RNG.standard_normal((8, 4))
    W, loss, grads = step(loom, loom.tensor(q, device=device), loom.tensor(x, device=device), device)
    tW, tloss, tgrads = step(torch, torch.tensor(q), torch.tensor(x), None)
    check(W, torch.tensor(q), rtol=1e-12, atol=1e-12)
    check(W, tW)
    assert loss.item() == pytest.approx(tloss.item(), rel=1e-12)
    for g, tg in zip(grads, tgrads):
        check(g, tg, rtol=1e-10, atol=1e-10)
