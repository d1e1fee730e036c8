"""loom.distributions' transforms, TransformedDistribution, biject_to / transform_to and the families
built on them (LogNormal, HalfNormal, HalfCauchy, Cauchy, Gumbel, Weibull, Pareto, LogisticNormal,
RelaxedBernoulli, RelaxedOneHotCategorical, OneHotCategoricalStraightThrough, Geometric,
MixtureSameFamily) against torch 1.13's, in float64 on cpu and lazy: log_prob, cdf, icdf, entropy,
moments, KL divergences, log-determinants and inverses of every transform, shapes of sample /
rsample / expand, gradients through rsample and log_prob, sample statistics with a fixed seed, and
argument checking with torch's exception types."""

import math

import numpy as np
import pytest

import loom
from _ops_helpers import torch  # noqa: F401

D = loom.distributions
TD = torch.distributions
RNG = np.random.default_rng(32)

LOC = RNG.standard_normal((3, 4))
SCALE = RNG.uniform(0.4, 2.0, (3, 4))
CONC = RNG.uniform(0.6, 3.0, (3, 4))
PROBS = RNG.uniform(0.05, 0.95, (3, 4))
LOGITS5 = RNG.standard_normal((3, 5))
POS = RNG.uniform(0.2, 3.0, (3, 4))


def both(array, device):
    return loom.tensor(array, dtype=loom.float64, device=device), torch.tensor(array, dtype=torch.float64)


def check(got, want, rtol=1e-11, atol=1e-12):
    got = np.asarray(got.detach().cpu().numpy(), dtype=np.float64)
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=rtol, atol=atol)


def simplex(shape):
    x = RNG.uniform(0.1, 1.0, shape)
    return x / x.sum(-1, keepdims=True)


# name -> (constructor(module, *params), parameter arrays, values in the support, extra methods)
FAMILIES = {
    "LogNormal": (lambda M, a, b: M.LogNormal(a, b), (LOC, SCALE), POS, ["cdf", "icdf"]),
    "HalfNormal": (lambda M, s: M.HalfNormal(s), (SCALE,), POS, ["cdf", "icdf"]),
    "HalfCauchy": (lambda M, s: M.HalfCauchy(s), (SCALE,), POS, ["cdf", "icdf"]),
    "Cauchy": (lambda M, a, b: M.Cauchy(a, b), (LOC, SCALE), RNG.standard_normal((3, 4)) * 3, ["cdf", "icdf"]),
    "Gumbel": (lambda M, a, b: M.Gumbel(a, b), (LOC, SCALE), RNG.standard_normal((3, 4)) * 2, ["cdf", "icdf"]),
    "Weibull": (lambda M, a, b: M.Weibull(a, b), (SCALE, CONC), POS, ["cdf", "icdf"]),
    "Pareto": (lambda M, a, b: M.Pareto(a, b), (SCALE, CONC + 2.5), SCALE + POS, ["cdf", "icdf"]),
    "Geometric": (lambda M, p: M.Geometric(p), (PROBS,), RNG.integers(0, 6, (3, 4)).astype(np.float64), []),
    "GeometricLogits": (lambda M, l: M.Geometric(logits=l), (LOC,), RNG.integers(0, 6, (3, 4)).astype(np.float64), []),
}
# Moments torch has; the Cauchy family has none finite, compared as nan / inf all the same.
NO_ENTROPY = {"Geometric": False}


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("name", FAMILIES)
def test_family_matches_torch(name, device):
    make, params, value, extra = FAMILIES[name]
    ours = [both(p, device) for p in params]
    p = make(D, *[o for o, _ in ours])
    q = make(TD, *[t for _, t in ours])
    assert p.batch_shape == tuple(q.batch_shape) and p.event_shape == tuple(q.event_shape)
    assert p.has_rsample == q.has_rsample
    v, tv = both(value, device)
    check(p.log_prob(v), q.log_prob(tv))
    check(p.entropy(), q.entropy())
    for moment in ("mean", "mode", "variance", "stddev"):
        check(getattr(p, moment), getattr(q, moment))
    for method in extra:
        check(getattr(p, method)(v), getattr(q, method)(tv), rtol=1e-9)
    if "icdf" in extra:
        u, tu = both(RNG.uniform(0.02, 0.98, (3, 4)), device)
        check(p.icdf(u), q.icdf(tu), rtol=1e-9)
    # expand keeps the family and broadcasts its parameters; samples take the extended shape.
    e = p.expand((2, 3, 4))
    assert type(e) is type(p) and e.batch_shape == (2, 3, 4)
    check(e.log_prob(v), q.expand((2, 3, 4)).log_prob(tv))
    assert p.sample((5,)).shape == (5, 3, 4) and e.sample().shape == (2, 3, 4)
    if p.has_rsample:
        assert p.rsample((2, 1)).shape == (2, 1, 3, 4)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_scalar_parameters_give_an_empty_batch(device):
    for p, q in [(D.LogNormal(0.0, 1.0), TD.LogNormal(0.0, 1.0)), (D.Gumbel(1.0, 2.0), TD.Gumbel(1.0, 2.0)),
                 (D.HalfNormal(2.0), TD.HalfNormal(2.0)), (D.Pareto(1.0, 3.0), TD.Pareto(1.0, 3.0)),
                 (D.Weibull(1.0, 2.0), TD.Weibull(1.0, 2.0)), (D.Cauchy(0.0, 1.0), TD.Cauchy(0.0, 1.0))]:
        assert p.batch_shape == q.batch_shape == () and p.sample().shape == ()
        np.testing.assert_allclose(p.log_prob(loom.tensor(1.5)).item(), q.log_prob(torch.tensor(1.5)).item(),
                                   rtol=1e-6)


# ---- transforms ----

def transform_cases(M):
    T = M.transforms
    loc, scale = (np.array([0.5, -1.0, 2.0]), np.array([2.0, -0.5, 1.5]))
    conv = (lambda a: loom.tensor(a, dtype=loom.float64)) if M is D else (lambda a: torch.tensor(a))
    return {
        "exp": (T.ExpTransform(), (3, 4), "real"),
        "power": (T.PowerTransform(conv(np.array([0.5, 2.0, 3.0, -1.5]))), (3, 4), "positive"),
        "sigmoid": (T.SigmoidTransform(), (3, 4), "real"),
        "softplus": (T.SoftplusTransform(), (3, 4), "real"),
        "tanh": (T.TanhTransform(), (3, 4), "real"),
        "affine": (T.AffineTransform(conv(loc), conv(scale)), (4, 3), "real"),
        "affine_scalar": (T.AffineTransform(1.5, -2.0), (3, 4), "real"),
        "affine_event": (T.AffineTransform(conv(loc), conv(scale), event_dim=1), (4, 3), "real"),
        "stick": (T.StickBreakingTransform(), (3, 4), "real"),
        "corr_cholesky": (T.CorrCholeskyTransform(), (2, 6), "real"),
        "reshape": (T.ReshapeTransform((4,), (2, 2)), (3, 4), "real"),
        "independent": (T.IndependentTransform(T.ExpTransform(), 1), (3, 4), "real"),
        "compose": (T.ComposeTransform([T.AffineTransform(0.5, 2.0), T.ExpTransform(), T.PowerTransform(
            conv(np.array(0.5)))]), (3, 4), "real"),
        "inverse": (T.ExpTransform().inv, (3, 4), "positive"),
        "cat": (T.CatTransform([T.ExpTransform(), T.AffineTransform(1.0, 3.0)], dim=1, lengths=[2, 2]),
                (3, 4), "real"),
        "stack": (T.StackTransform([T.ExpTransform(), T.SigmoidTransform(), T.TanhTransform()], dim=0), (3, 4),
                  "real"),
        "cdf": (T.CumulativeDistributionTransform(M.Normal(conv(np.array(0.5)), conv(np.array(2.0)))), (3, 4),
                "real"),
    }


X_REAL = {shape: RNG.standard_normal(shape) for shape in [(3, 4), (4, 3), (2, 6)]}
X_POS = {shape: RNG.uniform(0.3, 2.0, shape) for shape in [(3, 4)]}


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("case", list(transform_cases(TD)))
def test_transform_matches_torch(case, device):
    t, shape, where = transform_cases(D)[case]
    tt = transform_cases(TD)[case][0]
    if device == "lazy":
        t = _to_lazy(t)
    x_np = (X_REAL if where == "real" else X_POS)[shape]
    x, tx = both(x_np, device)
    y, ty = t(x), tt(tx)
    check(y, ty)
    check(t.log_abs_det_jacobian(x, y), tt.log_abs_det_jacobian(tx, ty), rtol=1e-9)
    if tt.bijective:
        check(t.inv(y), tt.inv(ty), rtol=1e-8, atol=1e-10)
        check(t.inv(y), tx, rtol=1e-8, atol=1e-10)  # a round trip
    assert t.bijective == tt.bijective
    assert t.domain.event_dim == tt.domain.event_dim and t.codomain.event_dim == tt.codomain.event_dim
    assert tuple(t.forward_shape(shape)) == tuple(tt.forward_shape(shape))
    out_shape = tuple(tt.forward_shape(shape))
    assert tuple(t.inverse_shape(out_shape)) == tuple(tt.inverse_shape(out_shape))
    assert bool(t.codomain.check(y).all())


def _to_lazy(t):
    """The same transform with its tensor parameters on lazy."""
    T = D.transforms
    if isinstance(t, T.AffineTransform):
        move = lambda v: v.to("lazy") if isinstance(v, loom.Tensor) else v
        return T.AffineTransform(move(t.loc), move(t.scale), event_dim=t.event_dim)
    if isinstance(t, T.PowerTransform):
        return T.PowerTransform(t.exponent.to("lazy"))
    if isinstance(t, T.ComposeTransform):
        return T.ComposeTransform([_to_lazy(p) for p in t.parts])
    if isinstance(t, T.CatTransform):
        return T.CatTransform([_to_lazy(p) for p in t.transforms], t.dim, t.lengths)
    if isinstance(t, T.CumulativeDistributionTransform):
        d = t.distribution
        return T.CumulativeDistributionTransform(D.Normal(d.loc.to("lazy"), d.scale.to("lazy")))
    return t


def test_transform_inverses_caching_and_equality():
    T = D.transforms
    exp = T.ExpTransform()
    assert exp.inv.inv is exp and exp.inv is exp.inv  # one inverse object while it lives
    assert exp == T.ExpTransform() and exp.inv == T.ExpTransform().inv and exp != T.SigmoidTransform()
    assert T.identity_transform(loom.tensor(2.0)).item() == 2.0
    cached = T.TanhTransform(cache_size=1)
    x = loom.tensor([30.0, -0.5], dtype=loom.float64)
    y = cached(x)
    assert cached.inv(y) is x  # the cache returns x itself, where atanh(1.0) would be inf
    assert not math.isfinite(T.TanhTransform().inv(y)[0].item())
    with pytest.raises(ValueError):
        T.ExpTransform(cache_size=2)
    assert T.AffineTransform(0.0, 2.0) == T.AffineTransform(0.0, 2.0) != T.AffineTransform(0.0, 3.0)
    assert T.ComposeTransform([T.ExpTransform()]) == T.ComposeTransform([T.ExpTransform()])
    assert T.AffineTransform(0.0, -2.0).sign == -1 and T.ExpTransform().inv.sign == 1


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_transformed_distribution_matches_torch(device):
    loc, tloc = both(LOC[:, :3], device)
    scale, tscale = both(SCALE[:, :3], device)
    T, TT = D.transforms, TD.transforms
    # A vector Normal pushed through affine, exp and stick-breaking: the event grows from 3 to 4.
    p = D.TransformedDistribution(D.Normal(loc, scale), [T.AffineTransform(0.3, 2.0), T.StickBreakingTransform()])
    q = TD.TransformedDistribution(TD.Normal(tloc, tscale), [TT.AffineTransform(0.3, 2.0), TT.StickBreakingTransform()])
    assert p.batch_shape == q.batch_shape == (3,) and p.event_shape == q.event_shape == (4,)
    v = simplex((3, 4))
    check(p.log_prob(both(v, device)[0]), q.log_prob(torch.tensor(v)))
    assert p.rsample((2,)).shape == (2, 3, 4) and p.expand((5, 3)).batch_shape == (5, 3)
    # A decreasing transform flips the cdf; a batched AffineTransform broadcasts the base.
    half, thalf = both(np.array(0.5), device)
    p = D.TransformedDistribution(D.Normal(half, 3 * half), [T.AffineTransform(loc, -scale)])
    q = TD.TransformedDistribution(TD.Normal(thalf, 3 * thalf), [TT.AffineTransform(tloc, -tscale)])
    assert p.batch_shape == q.batch_shape == (3, 3)
    x, tx = both(RNG.standard_normal((3, 3)), device)
    check(p.cdf(x), q.cdf(tx))
    check(p.log_prob(x), q.log_prob(tx))
    u, tu = both(RNG.uniform(0.1, 0.9, (3, 3)), device)
    check(p.icdf(u), q.icdf(tu))
    with pytest.raises(ValueError):
        D.TransformedDistribution(D.Normal(0.0, 1.0), [T.StickBreakingTransform()])  # needs a vector
    with pytest.raises(ValueError):
        D.TransformedDistribution(D.Normal(0.0, 1.0), "exp")


def test_biject_to_and_transform_to():
    C = D.constraints
    x = loom.tensor(RNG.standard_normal((3, 4)))
    for constraint, bijective in [(C.real, True), (C.positive, True), (C.greater_than(2.0), True),
                                  (C.greater_than_eq(-1.0), True), (C.less_than(3.0), True),
                                  (C.interval(-2.0, 5.0), True), (C.unit_interval, True),
                                  (C.half_open_interval(0.0, 2.0), True), (C.simplex, True),
                                  (C.independent(C.positive, 1), True), (C.real_vector, True)]:
        for registry, tregistry in [(D.biject_to, TD.biject_to), (D.transform_to, TD.transform_to)]:
            t = registry(constraint)
            y = t(x)
            assert bool(constraint.check(y).all()), (constraint, registry)
            assert t.bijective == (True if registry is D.biject_to else t.bijective)
    assert isinstance(D.transform_to(C.simplex), D.transforms.SoftmaxTransform)
    assert isinstance(D.biject_to(C.simplex), D.transforms.StickBreakingTransform)
    lower = D.transform_to(C.lower_cholesky)(loom.tensor(RNG.standard_normal((2, 3, 3))))
    assert bool(C.lower_cholesky.check(lower).all())
    corr = D.biject_to(C.corr_cholesky)(loom.tensor(RNG.standard_normal((2, 3))))
    assert corr.shape == (2, 3, 3) and bool(C.corr_cholesky.check(corr).all())
    both_cat = D.biject_to(C.cat([C.positive, C.interval(0.0, 1.0)], dim=1, lengths=[2, 2]))
    assert bool((both_cat(x)[:, :2] > 0).all()) and bool((both_cat(x)[:, 2:] < 1).all())
    stacked = D.biject_to(C.stack([C.positive, C.real, C.unit_interval], dim=0))(x[:, 0])
    assert stacked[0].item() > 0 and 0 < stacked[2].item() < 1
    with pytest.raises(NotImplementedError):
        D.biject_to(C.lower_cholesky)  # torch registers it only for transform_to
    # A constraint-preserving parameterization, differentiated as torch differentiates it.
    x = loom.tensor([0.3, -1.2], dtype=loom.float64, requires_grad=True)
    tx = torch.tensor([0.3, -1.2], dtype=torch.float64, requires_grad=True)
    D.transform_to(C.interval(1.0, 4.0))(x).pow(2).sum().backward()
    TD.transform_to(TD.constraints.interval(1.0, 4.0))(tx).pow(2).sum().backward()
    check(x.grad, tx.grad)


# ---- families with vector events and composites ----

@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_logistic_normal_and_relaxed_families_match_torch(device):
    loc, tloc = both(LOC, device)
    scale, tscale = both(SCALE, device)
    p, q = D.LogisticNormal(loc, scale), TD.LogisticNormal(tloc, tscale)
    assert p.batch_shape == q.batch_shape == (3,) and p.event_shape == q.event_shape == (5,)
    v = simplex((3, 5))
    check(p.log_prob(both(v, device)[0]), q.log_prob(torch.tensor(v)))
    assert p.rsample((2,)).shape == (2, 3, 5)
    assert D.LogisticNormal(0.0, 1.0).event_shape == TD.LogisticNormal(0.0, 1.0).event_shape == (2,)

    temp, ttemp = both(np.array(0.7), device)
    probs, tprobs = both(PROBS, device)
    p, q = D.RelaxedBernoulli(temp, probs=probs), TD.RelaxedBernoulli(ttemp, probs=tprobs)
    u = RNG.uniform(0.05, 0.95, (3, 4))
    check(p.log_prob(both(u, device)[0]), q.log_prob(torch.tensor(u)))
    logits, tlogits = both(LOC, device)
    p, q = D.RelaxedBernoulli(temp, logits=logits), TD.RelaxedBernoulli(ttemp, logits=tlogits)
    check(p.log_prob(both(u, device)[0]), q.log_prob(torch.tensor(u)))
    s = p.rsample((7,))
    assert s.shape == (7, 3, 4) and bool(((s > 0) & (s < 1)).all())

    logits5, tlogits5 = both(LOGITS5, device)
    p = D.RelaxedOneHotCategorical(temp, logits=logits5)
    q = TD.RelaxedOneHotCategorical(ttemp, logits=tlogits5)
    assert p.batch_shape == (3,) and p.event_shape == (5,)
    v = simplex((3, 5))
    check(p.log_prob(both(v, device)[0]), q.log_prob(torch.tensor(v)), rtol=1e-9)
    s = p.rsample((4,))
    assert s.shape == (4, 3, 5)
    np.testing.assert_allclose(s.sum(-1).cpu().numpy(), 1.0, rtol=1e-12)
    e = p.expand((2, 3))
    assert e.batch_shape == (2, 3) and e.sample().shape == (2, 3, 5)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_mixture_same_family_matches_torch(device):
    weights, tweights = both(RNG.uniform(0.2, 1.0, (2, 3)), device)
    loc, tloc = both(RNG.standard_normal((2, 3)), device)
    scale, tscale = both(RNG.uniform(0.5, 1.5, (2, 3)), device)
    p = D.MixtureSameFamily(D.Categorical(probs=weights), D.Normal(loc, scale))
    q = TD.MixtureSameFamily(TD.Categorical(probs=tweights), TD.Normal(tloc, tscale))
    assert p.batch_shape == q.batch_shape == (2,) and p.event_shape == ()
    x, tx = both(RNG.standard_normal((5, 2)), device)
    check(p.log_prob(x), q.log_prob(tx))
    check(p.cdf(x), q.cdf(tx))
    check(p.mean, q.mean)
    check(p.variance, q.variance)
    assert p.sample((6,)).shape == (6, 2) and p.expand((4, 2)).sample().shape == (4, 2)
    # A mixture of 2-d Gaussians (an event dimension) with one shared weight vector.
    mloc, tmloc = both(RNG.standard_normal((3, 2)), device)
    mscale, tmscale = both(RNG.uniform(0.5, 1.5, (3, 2)), device)
    w, tw = both(np.array([0.2, 0.5, 0.3]), device)
    p = D.MixtureSameFamily(D.Categorical(probs=w), D.Independent(D.Normal(mloc, mscale), 1))
    q = TD.MixtureSameFamily(TD.Categorical(probs=tw), TD.Independent(TD.Normal(tmloc, tmscale), 1))
    assert p.event_shape == (2,) and p.batch_shape == ()
    x, tx = both(RNG.standard_normal((4, 2)), device)
    check(p.log_prob(x), q.log_prob(tx))
    check(p.mean, q.mean)
    check(p.variance, q.variance)
    assert p.sample((5,)).shape == (5, 2)
    with pytest.raises(ValueError):
        D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(loc, scale))
    with pytest.raises(ValueError):
        D.MixtureSameFamily(D.Categorical(probs=loom.ones(4)), D.Normal(loom.zeros(3), 1.0))


def test_one_hot_categorical_straight_through_passes_gradients_to_probs():
    probs = loom.tensor([0.2, 0.5, 0.3], dtype=loom.float64, requires_grad=True)
    tprobs = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64, requires_grad=True)
    loom.manual_seed(1)
    s = D.OneHotCategoricalStraightThrough(probs=probs).rsample((4,))
    assert s.shape == (4, 3) and bool((s.detach().sum(-1) == 1).all())
    weights = loom.tensor([1.0, 2.0, 3.0], dtype=loom.float64)
    (s * weights).sum().backward()
    ts = TD.OneHotCategoricalStraightThrough(probs=tprobs).rsample((4,))
    (ts * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)).sum().backward()
    check(probs.grad, tprobs.grad)  # the straight-through gradient does not depend on the draw


# ---- KL divergences ----

def kl_cases():
    b_loc, b_scale = LOC[::-1].copy() * 0.5, SCALE[::-1].copy()
    width = SCALE + 0.5
    return {
        "Cauchy-Cauchy": (("Cauchy", LOC, SCALE), ("Cauchy", b_loc, b_scale)),
        "Gumbel-Gumbel": (("Gumbel", LOC, SCALE), ("Gumbel", b_loc, b_scale)),
        "HalfNormal-HalfNormal": (("HalfNormal", SCALE), ("HalfNormal", b_scale)),
        "LogNormal-LogNormal": (("LogNormal", LOC, SCALE), ("LogNormal", b_loc, b_scale)),
        "Pareto-Pareto": (("Pareto", SCALE, CONC), ("Pareto", b_scale, CONC[::-1].copy())),
        "Geometric-Geometric": (("Geometric", PROBS), ("Geometric", PROBS[::-1].copy())),
        "Exponential-Gumbel": (("Exponential", SCALE), ("Gumbel", b_loc, b_scale)),
        "Exponential-Normal": (("Exponential", SCALE), ("Normal", b_loc, b_scale)),
        "Exponential-Pareto": (("Exponential", SCALE), ("Pareto", b_scale, CONC)),
        "Gumbel-Normal": (("Gumbel", LOC, SCALE), ("Normal", b_loc, b_scale)),
        "Gumbel-Uniform": (("Gumbel", LOC, SCALE), ("Uniform", b_loc, b_loc + 1)),
        "Laplace-Normal": (("Laplace", LOC, SCALE), ("Normal", b_loc, b_scale)),
        "Normal-Gumbel": (("Normal", LOC, SCALE), ("Gumbel", b_loc, b_scale)),
        "Normal-Laplace": (("Normal", LOC, SCALE), ("Laplace", b_loc, b_scale)),
        "Normal-Pareto": (("Normal", LOC, SCALE), ("Pareto", b_scale, CONC)),
        "Pareto-Exponential": (("Pareto", SCALE, CONC), ("Exponential", b_scale)),
        "Pareto-Normal": (("Pareto", SCALE, CONC + 0.5), ("Normal", b_loc, b_scale)),
        "Pareto-Uniform": (("Pareto", SCALE, CONC), ("Uniform", b_loc, b_loc + 1)),
        "Uniform-Exponential": (("Uniform", LOC, LOC + width), ("Exponential", b_scale)),
        "Uniform-Gumbel": (("Uniform", LOC, LOC + width), ("Gumbel", b_loc, b_scale)),
        "Uniform-Normal": (("Uniform", LOC, LOC + width), ("Normal", b_loc, b_scale)),
        "Uniform-Pareto": (("Uniform", np.abs(LOC) + 0.1, np.abs(LOC) + width), ("Pareto", SCALE * 0.5, CONC)),
    }


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("pair", list(kl_cases()))
def test_kl_divergence_matches_torch(pair, device):
    (pn, *pa), (qn, *qa) = kl_cases()[pair]
    p = getattr(D, pn)(*[both(a, device)[0] for a in pa])
    q = getattr(D, qn)(*[both(a, device)[0] for a in qa])
    tp = getattr(TD, pn)(*[torch.tensor(a) for a in pa])
    tq = getattr(TD, qn)(*[torch.tensor(a) for a in qa])
    check(D.kl_divergence(p, q), TD.kl_divergence(tp, tq), rtol=1e-10)


def test_kl_of_different_transforms_is_not_implemented():
    p = D.Weibull(loom.tensor([1.0]), loom.tensor([2.0]))
    q = D.Weibull(loom.tensor([1.0]), loom.tensor([3.0]))
    with pytest.raises(NotImplementedError):
        D.kl_divergence(p, q)


# ---- gradients ----

@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("name", ["LogNormal", "HalfNormal", "HalfCauchy", "Cauchy", "Gumbel", "Weibull", "Pareto"])
def test_log_prob_gradients_match_torch(name, device):
    make, params, value, _ = FAMILIES[name]
    ours = [loom.tensor(p, dtype=loom.float64, device=device, requires_grad=True) for p in params]
    theirs = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in params]
    v, tv = both(value, device)
    (make(D, *ours).log_prob(v).sum() + make(D, *ours).entropy().sum()).backward()
    (make(TD, *theirs).log_prob(tv).sum() + make(TD, *theirs).entropy().sum()).backward()
    for a, b in zip(ours, theirs):
        check(a.grad, b.grad, rtol=1e-9)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_rsample_gradients_are_the_derivative_of_the_transformed_draw(device):
    # For x = T(eps) with eps drawn, d sum(x) / d theta is fixed once eps is: recover eps from the
    # draw through the inverse and compare with torch's gradient at the same eps.
    loc = loom.tensor([0.3, -0.7], dtype=loom.float64, device=device, requires_grad=True)
    scale = loom.tensor([0.5, 2.0], dtype=loom.float64, device=device, requires_grad=True)
    loom.manual_seed(3)
    x = D.LogNormal(loc, scale).rsample((500,))
    x.sum().backward()
    eps = ((x.detach().log() - loc.detach()) / scale.detach())
    want_loc = x.detach().sum(0)
    want_scale = (x.detach() * eps).sum(0)
    np.testing.assert_allclose(loc.grad.cpu().numpy(), want_loc.cpu().numpy(), rtol=1e-10)
    np.testing.assert_allclose(scale.grad.cpu().numpy(), want_scale.cpu().numpy(), rtol=1e-9)
    # Weibull: x = scale * E^(1/c); d x / d scale = x / scale.
    scale.grad = None
    c = loom.tensor([1.5, 0.8], dtype=loom.float64, device=device, requires_grad=True)
    w = D.Weibull(scale, c).rsample((300,))
    w.sum().backward()
    np.testing.assert_allclose(scale.grad.cpu().numpy(), (w.detach() / scale.detach()).sum(0).cpu().numpy(),
                               rtol=1e-9)
    e = (w.detach() / scale.detach()) ** c.detach()
    want_c = (w.detach() * e.log() * -(c.detach() ** -2)).sum(0)
    np.testing.assert_allclose(c.grad.cpu().numpy(), want_c.cpu().numpy(), rtol=1e-8)


# ---- sample statistics ----

@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_sample_statistics(device):
    loom.manual_seed(0)
    n = 40000

    def t(values):
        return loom.tensor(values, dtype=loom.float64, device=device)
    cases = [D.LogNormal(t([0.1, -0.5]), t([0.3, 0.6])), D.HalfNormal(t([0.5, 2.0])), D.Gumbel(t([1.0, -2.0]),
             t([0.5, 2.0])), D.Weibull(t([1.0, 2.0]), t([1.5, 3.0])), D.Pareto(t([1.0, 2.0]), t([5.0, 6.0])),
             D.Geometric(t([0.3, 0.8]))]
    for dist in cases:
        s = dist.sample((n,))
        assert s.shape == (n, 2) and s.device.type == device
        got = s.cpu().numpy()
        mean, var = dist.mean.cpu().numpy(), dist.variance.cpu().numpy()
        assert (np.abs(got.mean(0) - mean) <= 5 * np.sqrt(var / n)).all(), (type(dist).__name__, got.mean(0), mean)
        np.testing.assert_allclose(got.var(0), var, rtol=0.1, err_msg=type(dist).__name__)
    # The Cauchy's median and quartiles (it has no moments).
    s = D.Cauchy(t([1.0]), t([2.0])).sample((n,)).cpu().numpy()[:, 0]
    np.testing.assert_allclose(np.percentile(s, [25, 50, 75]), [-1.0, 1.0, 3.0], atol=0.1)
    g = D.Geometric(t([0.3])).sample((n,)).cpu().numpy()
    assert (g == np.floor(g)).all() and g.min() == 0
    counts = np.bincount(g[:, 0].astype(np.int64), minlength=3)[:3] / n
    np.testing.assert_allclose(counts, [0.3, 0.21, 0.147], atol=0.01)
    mix = D.MixtureSameFamily(D.Categorical(probs=t([0.25, 0.75])), D.Normal(t([-3.0, 3.0]), t([0.5, 0.5])))
    s = mix.sample((n,)).cpu().numpy()
    assert abs((s < 0).mean() - 0.25) < 0.01 and abs(s.mean() - mix.mean.item()) < 0.05


# ---- argument checking ----

def _t(M, fn, *args):
    return getattr(loom if M is D else torch, fn)(*args)


def test_arguments_are_checked_as_torch_checks_them():
    cases = [
        lambda M: M.LogNormal(_t(M, 'zeros', 2), -1.0),
        lambda M: M.HalfNormal(_t(M, 'tensor', [1.0, -1.0])),
        lambda M: M.HalfCauchy(_t(M, 'tensor', [0.0])),
        lambda M: M.Cauchy(0.0, -2.0),
        lambda M: M.Gumbel(0.0, -1.0),
        lambda M: M.Weibull(1.0, -1.0),
        lambda M: M.Pareto(-1.0, 2.0),
        lambda M: M.Geometric(_t(M, 'tensor', [0.0, 0.5])),
        lambda M: M.Geometric(_t(M, 'tensor', [1.5])),
        lambda M: M.Geometric(),
        lambda M: M.HalfNormal(1.0).log_prob(_t(M, 'tensor', [-1.0])),
        lambda M: M.Pareto(2.0, 1.0).log_prob(_t(M, 'tensor', [1.0])),
        lambda M: M.Geometric(0.5).log_prob(_t(M, 'tensor', [1.5])),
        lambda M: M.LogisticNormal(_t(M, 'zeros', 2), -1.0),
        lambda M: M.RelaxedBernoulli(_t(M, 'tensor', 0.5), probs=1.5),
    ]
    for make in cases:
        with pytest.raises(ValueError):
            make(TD)
        with pytest.raises(ValueError):
            make(D)
    D.HalfNormal(loom.tensor([-1.0]), validate_args=False)  # unchecked on request


def test_a_lazy_family_is_checked_only_on_request_so_it_does_not_sync():
    scale = loom.tensor([1.0, 2.0], device="lazy") * 1
    before = loom.metrics()["syncs"]
    for d in [D.LogNormal(loom.zeros(2, device="lazy"), scale), D.HalfNormal(scale), D.Gumbel(scale, scale),
              D.Weibull(scale, scale), D.Pareto(scale, scale)]:
        d.log_prob(scale + 1)
    assert loom.metrics()["syncs"] == before
    with pytest.raises(ValueError):
        D.HalfNormal(scale * -1, validate_args=True)


def test_the_alias_sees_the_new_names():
    import loom as alias
    for name in ["TransformedDistribution", "LogNormal", "biject_to", "ExpTransform", "identity_transform"]:
        assert hasattr(alias.distributions, name), name
    from loom.distributions.transforms import StickBreakingTransform  # noqa: F401
    from loom.distributions.constraint_registry import transform_to  # noqa: F401
    assert set(TD.__all__) - set(D.__all__) <= {
        "Binomial", "ContinuousBernoulli", "LKJCholesky", "Multinomial", "NegativeBinomial", "Poisson", "VonMises",
        "Wishart"}


# ---- the gamma family: the standard gamma sampler (Marsaglia-Tsang of loom's random ops), Gamma, Chi2, Beta, Dirichlet,
# StudentT, FisherSnedecor, Kumaraswamy ----

GAMMA_FAMILIES = {
    "Gamma": (lambda M, a, b: M.Gamma(a, b), (CONC, SCALE), POS, ["mode"]),
    "Chi2": (lambda M, k: M.Chi2(k), (CONC * 2 + 2,), POS, ["mode"]),
    "Beta": (lambda M, a, b: M.Beta(a, b), (CONC + 1, SCALE + 1), PROBS, ["mode"]),
    "StudentT": (lambda M, d, a, b: M.StudentT(d, a, b), (CONC + 2.5, LOC, SCALE), RNG.standard_normal((3, 4)) * 2,
                 ["mode"]),
    "FisherSnedecor": (lambda M, a, b: M.FisherSnedecor(a, b), (CONC * 3 + 2.5, SCALE * 3 + 4.5), POS, ["mode"]),
    # torch 1.13's Kumaraswamy.mode is NaN wherever concentration0 > 1 (log1p(-b)): checked below instead.
    "Kumaraswamy": (lambda M, a, b: M.Kumaraswamy(a, b), (CONC + 1, SCALE + 1), PROBS, []),
}


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("name", GAMMA_FAMILIES)
def test_gamma_family_matches_torch(name, device):
    make, params, value, extra = GAMMA_FAMILIES[name]
    ours = [both(p, device) for p in params]
    p = make(D, *[o for o, _ in ours])
    q = make(TD, *[t for _, t in ours])
    assert p.batch_shape == tuple(q.batch_shape) and p.event_shape == tuple(q.event_shape)
    assert p.has_rsample == q.has_rsample
    v, tv = both(value, device)
    check(p.log_prob(v), q.log_prob(tv), rtol=1e-10)
    if name != "FisherSnedecor":  # torch has no FisherSnedecor entropy
        check(p.entropy(), q.entropy(), rtol=1e-10)
    for moment in ["mean", "variance", "stddev"] + extra:
        check(getattr(p, moment), getattr(q, moment), rtol=1e-10)
    e = p.expand((2, 3, 4))
    assert type(e) is type(p) and e.batch_shape == (2, 3, 4)
    check(e.log_prob(v), q.expand((2, 3, 4)).log_prob(tv), rtol=1e-10)
    assert p.sample((5,)).shape == (5, 3, 4) and p.rsample((2, 1)).shape == (2, 1, 3, 4)
    assert e.sample().shape == (2, 3, 4)


def test_kumaraswamy_mode_is_where_the_density_peaks():
    a, b = loom.tensor(CONC + 1), loom.tensor(SCALE + 1)
    d = D.Kumaraswamy(a, b)
    mode = d.mode.numpy()
    np.testing.assert_allclose(mode, ((CONC + 1 - 1) / ((CONC + 1) * (SCALE + 1) - 1)) ** (1 / (CONC + 1)), rtol=1e-12)
    for shift in (-1e-4, 1e-4):
        assert (d.log_prob(loom.tensor(mode)).numpy() > d.log_prob(loom.tensor(mode + shift)).numpy()).all()
    assert math.isnan(D.Kumaraswamy(0.5, 2.0).mode.item())


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_dirichlet_matches_torch(device):
    c, tc = both(CONC, device)
    p, q = D.Dirichlet(c), TD.Dirichlet(tc)
    assert p.batch_shape == (3,) and p.event_shape == (4,)
    v, tv = both(simplex((3, 4)), device)
    check(p.log_prob(v), q.log_prob(tv), rtol=1e-10)
    check(p.entropy(), q.entropy(), rtol=1e-10)
    for moment in ("mean", "variance", "mode"):
        check(getattr(p, moment), getattr(q, moment), rtol=1e-10)
    s = p.rsample((6,))
    assert s.shape == (6, 3, 4)
    np.testing.assert_allclose(s.sum(-1).cpu().numpy(), 1.0, rtol=1e-12)
    assert p.expand((2, 3)).sample().shape == (2, 3, 4)
    with pytest.raises(ValueError):
        D.Dirichlet(loom.tensor(1.0))


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_standard_gamma_sample_statistics(device):
    loom.manual_seed(5)
    n = 40000
    for alpha in [0.3, 1.0, 2.5, 40.0]:
        s = D.gamma._standard_gamma(loom.full((n,), alpha, dtype=loom.float64, device=device)).cpu().numpy()
        assert (s > 0).all()
        assert abs(s.mean() - alpha) <= 5 * math.sqrt(alpha / n), (alpha, s.mean())
        np.testing.assert_allclose(s.var(), alpha, rtol=0.06)
        # The distribution, not only its moments: Kolmogorov-Smirnov against the gamma cdf.
        from scipy import stats
        assert stats.kstest(s, stats.gamma(alpha).cdf).pvalue > 1e-3, alpha
    # float32 draws, and the same draws on cpu and lazy from one seed (to the last bit or so: the
    # fused lazy kernel may round a float32 intermediate differently).
    loom.manual_seed(9)
    a = D.gamma._standard_gamma(loom.full((1000,), 0.7, device=device))
    loom.manual_seed(9)
    b = D.gamma._standard_gamma(loom.full((1000,), 0.7))
    assert a.dtype == loom.float32
    np.testing.assert_allclose(a.cpu().numpy(), b.numpy(), rtol=1e-6)
    assert math.isnan(D.gamma._standard_gamma(loom.tensor([-1.0], device=device)).item())


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_gamma_family_sample_statistics(device):
    loom.manual_seed(11)
    n = 40000

    def t(values):
        return loom.tensor(values, dtype=loom.float64, device=device)
    for dist in [D.Gamma(t([0.5, 4.0]), t([2.0, 0.5])), D.Chi2(t([3.0, 10.0])), D.Beta(t([0.5, 3.0]), t([2.0, 3.0])),
                 D.StudentT(t([5.0, 9.0]), t([1.0, -1.0]), t([2.0, 0.5])), D.FisherSnedecor(t([6.0, 10.0]), t([12.0, 20.0])),
                 D.Kumaraswamy(t([2.0, 0.7]), t([3.0, 1.5]))]:
        s = dist.sample((n,))
        assert s.shape == (n, 2)
        got = s.cpu().numpy()
        mean, var = dist.mean.cpu().numpy(), dist.variance.cpu().numpy()
        assert (np.abs(got.mean(0) - mean) <= 5 * np.sqrt(var / n)).all(), (type(dist).__name__, got.mean(0), mean)
        np.testing.assert_allclose(got.var(0), var, rtol=0.15, err_msg=type(dist).__name__)
    s = D.Dirichlet(t([[0.5, 1.0, 2.0]])).sample((n,)).cpu().numpy()[:, 0]
    np.testing.assert_allclose(s.mean(0), [0.5 / 3.5, 1.0 / 3.5, 2.0 / 3.5], atol=0.01)


def test_standard_gamma_gradient_is_the_implicit_one():
    from scipy import special
    alpha = np.array([0.05, 0.3, 0.9, 1.0, 2.5, 7.0, 30.0, 150.0, 1500.0, 0.5, 3.0, 3.0])
    u = np.array([0.3, 0.6, 0.1, 0.5, 0.9, 0.02, 0.7, 0.4, 0.999, 0.999, 1e-4, 0.9999])
    x = special.gammaincinv(alpha, u)
    got = D.gamma._standard_gamma_grad(loom.tensor(alpha), loom.tensor(x)).numpy()
    h = 1e-6 * np.maximum(alpha, 1e-2)
    fd = (special.gammaincinv(alpha + h, u) - special.gammaincinv(alpha - h, u)) / (2 * h)
    np.testing.assert_allclose(got, fd, rtol=1e-4)  # Wilson-Hilferty only past the series: 1500
    np.testing.assert_allclose(got[:8], fd[:8], rtol=1e-6)
    want = torch._standard_gamma_grad(torch.tensor(alpha), torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-3)  # torch's own approximation


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_gamma_rsample_gradients(device):
    # d(sample)/d(concentration) is the implicit gradient at the drawn sample; d/d(rate) = -x / rate.
    c = loom.tensor([0.7, 3.0], dtype=loom.float64, device=device, requires_grad=True)
    r = loom.tensor([2.0, 0.5], dtype=loom.float64, device=device, requires_grad=True)
    x = D.Gamma(c, r).rsample((200,))
    x.sum().backward()
    xs = x.detach().cpu()
    want_c = torch._standard_gamma_grad(torch.tensor([0.7, 3.0], dtype=torch.float64).expand(200, 2),
                                        torch.tensor(xs.numpy() * np.array([2.0, 0.5]))) / torch.tensor([2.0, 0.5])
    np.testing.assert_allclose(c.grad.cpu().numpy(), want_c.sum(0).numpy(), rtol=1e-3)
    np.testing.assert_allclose(r.grad.cpu().numpy(), (-xs.numpy() / np.array([2.0, 0.5])).sum(0), rtol=1e-10)
    # Beta and Dirichlet carry the gammas' gradients; the expected value of the sample's gradient
    # is the mean's gradient: d E[x] / d a = b / (a + b)^2 for Beta(a, b).
    loom.manual_seed(2)
    a = loom.tensor(2.0, dtype=loom.float64, device=device, requires_grad=True)
    D.Beta(a, 3.0 * loom.ones((), dtype=loom.float64, device=device)).rsample((20000,)).mean().backward()
    assert abs(a.grad.item() - 3.0 / 25) < 0.006, a.grad.item()
    # log_prob and entropy gradients against torch's.
    for name in GAMMA_FAMILIES:
        make, params, value, _ = GAMMA_FAMILIES[name]
        ours = [loom.tensor(p, dtype=loom.float64, device=device, requires_grad=True) for p in params]
        theirs = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in params]
        v, tv = both(value, device)
        loss = make(D, *ours).log_prob(v).sum()
        tloss = make(TD, *theirs).log_prob(tv).sum()
        if name != "FisherSnedecor":
            loss, tloss = loss + make(D, *ours).entropy().sum(), tloss + make(TD, *theirs).entropy().sum()
        loss.backward()
        tloss.backward()
        for o, th in zip(ours, theirs):
            check(o.grad, th.grad, rtol=1e-8)


def gamma_kl_cases():
    b_loc, b_scale = LOC[::-1].copy() * 0.5, SCALE[::-1].copy()
    return {
        "Gamma-Gamma": (("Gamma", CONC, SCALE), ("Gamma", CONC[::-1].copy(), b_scale)),
        "Chi2-Chi2": (("Chi2", CONC), ("Chi2", CONC[::-1].copy())),
        "Beta-Beta": (("Beta", CONC, SCALE), ("Beta", b_scale, CONC)),
        "Dirichlet-Dirichlet": (("Dirichlet", CONC), ("Dirichlet", CONC[::-1].copy())),
        "Beta-Exponential": (("Beta", CONC, SCALE), ("Exponential", b_scale)),
        "Beta-Gamma": (("Beta", CONC, SCALE), ("Gamma", b_scale, CONC)),
        "Beta-Normal": (("Beta", CONC, SCALE), ("Normal", b_loc, b_scale)),
        "Beta-Uniform": (("Beta", CONC, SCALE), ("Uniform", b_loc - 1, b_loc + 1)),
        "Exponential-Gamma": (("Exponential", SCALE), ("Gamma", CONC, b_scale)),
        "Gamma-Exponential": (("Gamma", CONC, SCALE), ("Exponential", b_scale)),
        "Gamma-Gumbel": (("Gamma", CONC, SCALE), ("Gumbel", b_loc, b_scale)),
        "Gamma-Normal": (("Gamma", CONC, SCALE), ("Normal", b_loc, b_scale)),
        "Pareto-Gamma": (("Pareto", SCALE, CONC), ("Gamma", CONC, b_scale)),
        "Uniform-Beta": (("Uniform", PROBS * 0.5, PROBS * 0.5 + 0.5), ("Beta", CONC, SCALE)),
        "Uniform-Gamma": (("Uniform", LOC, LOC + 2), ("Gamma", CONC, SCALE)),
        "Normal-Gamma": (("Normal", LOC, SCALE), ("Gamma", CONC, SCALE)),
        "Gamma-Beta": (("Gamma", CONC, SCALE), ("Beta", CONC, SCALE)),
    }


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("pair", list(gamma_kl_cases()))
def test_gamma_family_kl_matches_torch(pair, device):
    (pn, *pa), (qn, *qa) = gamma_kl_cases()[pair]
    p = getattr(D, pn)(*[both(a, device)[0] for a in pa])
    q = getattr(D, qn)(*[both(a, device)[0] for a in qa])
    tp = getattr(TD, pn)(*[torch.tensor(a) for a in pa])
    tq = getattr(TD, qn)(*[torch.tensor(a) for a in qa])
    check(D.kl_divergence(p, q), TD.kl_divergence(tp, tq), rtol=1e-9)


def test_exponential_family_entropy_and_bregman_kl():
    # The generic ExponentialFamily routes (autograd through the log-normalizer) agree with the
    # closed forms.
    c, r = loom.tensor(CONC), loom.tensor(SCALE)
    g = D.Gamma(c, r)
    check(D.ExponentialFamily.entropy(g), TD.Gamma(torch.tensor(CONC), torch.tensor(SCALE)).entropy(), rtol=1e-10)
    h = D.Gamma(c.flip(0), r.flip(1))
    check(D.kl._kl_expfamily_expfamily(g, h), D.kl_divergence(g, h), rtol=1e-9)


def test_gamma_family_arguments_are_checked():
    for make in [lambda M: M.Gamma(_t(M, "tensor", [1.0, -1.0]), 1.0), lambda M: M.Gamma(1.0, 0.0),
                 lambda M: M.Chi2(-1.0), lambda M: M.Beta(0.0, 1.0), lambda M: M.Dirichlet(_t(M, "tensor", [1.0, -1.0])),
                 lambda M: M.StudentT(-1.0), lambda M: M.FisherSnedecor(1.0, -2.0), lambda M: M.Kumaraswamy(-1.0, 1.0),
                 lambda M: M.Beta(2.0, 2.0).log_prob(_t(M, "tensor", [1.5])),
                 lambda M: M.Gamma(2.0, 2.0).log_prob(_t(M, "tensor", [-0.5])),
                 lambda M: M.Dirichlet(_t(M, "ones", 3)).log_prob(_t(M, "tensor", [0.5, 0.6, 0.1]))]:
        with pytest.raises(ValueError):
            make(TD)
        with pytest.raises(ValueError):
            make(D)
    with pytest.raises(NotImplementedError, match="igamma"):
        D.Gamma(1.0, 1.0).cdf(loom.tensor(0.5))


def test_a_lazy_gamma_draw_and_its_gradient_do_not_sync():
    # The sampler's rounds are drawn at once (no data-dependent loop): nothing is read back.
    c = (loom.tensor([0.5, 2.0], device="lazy") * 1).requires_grad_()
    before = loom.metrics()["syncs"]
    for d in [D.Gamma(c, 2.0), D.Beta(c, c + 1), D.Dirichlet(c + 0.5), D.StudentT(c + 2)]:
        x = d.rsample((3,))
        (x.sum() + d.log_prob(x.detach()).sum()).backward()
    assert loom.metrics()["syncs"] == before
    assert c.grad.shape == (2,)
