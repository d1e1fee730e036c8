"""loom.distributions against torch.distributions, in float64: every family's log_prob, cdf, icdf,
entropy and moments at the same parameters and values, on cpu and lazy; KL divergences of every
registered pair, including the infinite and zero cases; sample shapes and sample statistics;
gradients through rsample and log_prob; expand and Independent; argument checking (and that a
lazy construction does not sync); and a REINFORCE step in lazy mode that compiles nothing after
warm-up."""

import math

import numpy as np
import pytest

import loom
from _nn_helpers import counters_after_warm_up
from _ops_helpers import torch  # noqa: F401

D = loom.distributions
TD = torch.distributions
RNG = np.random.default_rng(7)

LOC = RNG.standard_normal((3, 4))
SCALE = RNG.uniform(0.3, 2.0, (3, 4))
PROBS = RNG.uniform(0.05, 0.95, (3, 4))
LOGITS = RNG.standard_normal((3, 5)) * 2


def both(array, device):
    return loom.tensor(array, dtype=loom.float64, device=device), torch.tensor(array, dtype=torch.float64)


def check(got, want, rtol=1e-12, atol=1e-13):
    np.testing.assert_allclose(np.asarray(got.cpu().numpy(), dtype=np.float64), want.numpy(), rtol=rtol, atol=atol)


# name -> (constructor arguments as arrays, values inside the support, methods torch implements)
FAMILIES = {
    "Normal": ((LOC, SCALE), RNG.standard_normal((3, 4)) * 2, ["cdf", "icdf"]),
    "Laplace": ((LOC, SCALE), RNG.standard_normal((3, 4)) * 2, ["cdf", "icdf"]),
    "Uniform": ((LOC - SCALE, LOC + SCALE), LOC + SCALE * RNG.uniform(-0.99, 0.99, (3, 4)), ["cdf", "icdf"]),
    "Exponential": ((SCALE,), RNG.uniform(0, 3, (3, 4)), ["cdf", "icdf"]),
    "Bernoulli": ((PROBS,), (RNG.uniform(size=(3, 4)) > 0.5).astype(np.float64), []),
}


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("name", FAMILIES)
def test_family_matches_torch(name, device):
    params, value, extra = FAMILIES[name]
    ours = [both(p, device) for p in params]
    p = getattr(D, name)(*[o for o, _ in ours])
    q = getattr(TD, name)(*[t for _, t in ours])
    assert p.batch_shape == tuple(q.batch_shape) and p.event_shape == tuple(q.event_shape)
    v, tv = both(value, device)
    check(p.log_prob(v), q.log_prob(tv))
    check(p.entropy(), q.entropy())
    for moment in ("mean", "variance", "stddev"):
        check(getattr(p, moment), getattr(q, moment))
    for method in extra:
        check(getattr(p, method)(v), getattr(q, method)(tv))
        unit = np.clip(RNG.uniform(0.01, 0.99, (3, 4)), 0.01, 0.99)
        u, tu = both(unit, device)
        check(getattr(p, "icdf")(u), getattr(q, "icdf")(tu), rtol=1e-10)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_bernoulli_and_categorical_from_logits(device):
    logits, tlogits = both(LOGITS, device)
    p, q = D.Categorical(logits=logits), TD.Categorical(logits=tlogits)
    check(p.probs, q.probs)
    check(p.logits, q.logits)
    check(p.entropy(), q.entropy())
    value = np.array([4, 0, 2])
    check(p.log_prob(loom.tensor(value, device=device)), q.log_prob(torch.tensor(value)))
    # A value batch broadcast against the distribution's batch, as in torch.
    many = RNG.integers(0, 5, (6, 3))
    check(p.log_prob(loom.tensor(many, device=device)), q.log_prob(torch.tensor(many)))
    probs, tprobs = both(np.exp(LOGITS), device)  # unnormalized probs are normalized
    check(D.Categorical(probs=probs).probs, TD.Categorical(probs=tprobs).probs)
    b, tb = D.Bernoulli(logits=logits), TD.Bernoulli(logits=tlogits)
    check(b.probs, tb.probs)
    check(b.entropy(), tb.entropy())
    ones = (LOGITS > 0).astype(np.float64)
    check(b.log_prob(loom.tensor(ones, device=device)), tb.log_prob(torch.tensor(ones)))
    oh, toh = D.OneHotCategorical(logits=logits), TD.OneHotCategorical(logits=tlogits)
    onehot = np.eye(5)[value]
    check(oh.log_prob(loom.tensor(onehot, device=device)), toh.log_prob(torch.tensor(onehot)))
    check(oh.entropy(), toh.entropy())
    assert oh.event_shape == (5,) and oh.batch_shape == (3,)


def test_categorical_with_zero_probabilities_has_finite_entropy():
    probs = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    check(D.Categorical(probs=loom.tensor(probs)).entropy(), TD.Categorical(probs=torch.tensor(probs)).entropy())


def kl_pairs():
    a = {"loc": LOC, "scale": SCALE}
    b = {"loc": LOC[::-1].copy() * 0.5, "scale": SCALE[::-1].copy()}
    return {
        "Normal": ((LOC, SCALE), (b["loc"], b["scale"])),
        "Laplace": ((LOC, SCALE), (b["loc"], b["scale"])),
        "Exponential": ((SCALE,), (b["scale"],)),
        # Some of p's intervals reach outside q's: infinite there.
        "Uniform": ((LOC - SCALE, LOC + SCALE), (LOC - 1.5 * SCALE[::-1], LOC + 1.5 * SCALE[::-1])),
        # Probabilities of exactly 0 and 1 on either side: the zero and infinite terms.
        "Bernoulli": ((np.array([0.0, 0.3, 1.0, 0.5, 0.0]),), (np.array([0.2, 0.0, 0.7, 1.0, 0.0]),)),
        "Categorical": ((np.array([[0.2, 0.8, 0.0], [0.5, 0.5, 0.0]]),), (np.array([[0.3, 0.3, 0.4], [0.0, 0.5, 0.5]]),)),
    }, a


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("name", ["Normal", "Laplace", "Exponential", "Uniform", "Bernoulli", "Categorical"])
def test_kl_divergence_matches_torch(name, device):
    (pa, qa), _ = kl_pairs()[0][name], None
    p = getattr(D, name)(*[both(x, device)[0] for x in pa])
    q = getattr(D, name)(*[both(x, device)[0] for x in qa])
    tp = getattr(TD, name)(*[torch.tensor(x) for x in pa])
    tq = getattr(TD, name)(*[torch.tensor(x) for x in qa])
    want = TD.kl_divergence(tp, tq)
    got = D.kl_divergence(p, q)
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-12, atol=1e-13)
    if name in ("Uniform", "Bernoulli", "Categorical"):
        assert np.isinf(want.numpy()).any()  # the case is covered


def test_kl_of_independent_sums_over_the_event_and_unknown_pairs_raise():
    p = D.Independent(D.Normal(loom.tensor(LOC), loom.tensor(SCALE)), 1)
    q = D.Independent(D.Normal(loom.zeros(3, 4, dtype=loom.float64), loom.ones(3, 4, dtype=loom.float64)), 1)
    tp = TD.Independent(TD.Normal(torch.tensor(LOC), torch.tensor(SCALE)), 1)
    tq = TD.Independent(TD.Normal(torch.zeros(3, 4, dtype=torch.float64), torch.ones(3, 4, dtype=torch.float64)), 1)
    check(D.kl_divergence(p, q), TD.kl_divergence(tp, tq))
    with pytest.raises(NotImplementedError, match="Normal and q type Cauchy"):  # torch has no such pair either
        D.kl_divergence(D.Normal(0.0, 1.0), D.Cauchy(0.0, 1.0))


def test_register_kl_prefers_the_most_specific_pair():
    class MyNormal(D.Normal):
        pass

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return loom.tensor(-1.0)

    assert D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(0.0, 1.0)).item() == -1.0
    assert D.kl_divergence(D.Normal(0.0, 1.0), D.Normal(0.0, 1.0)).item() == 0.0


def test_independent_log_prob_entropy_and_shapes():
    p = D.Independent(D.Normal(loom.tensor(LOC), loom.tensor(SCALE)), 1)
    q = TD.Independent(TD.Normal(torch.tensor(LOC), torch.tensor(SCALE)), 1)
    assert p.batch_shape == (3,) and p.event_shape == (4,) and p.has_rsample
    value = RNG.standard_normal((2, 3, 4))
    check(p.log_prob(loom.tensor(value)), q.log_prob(torch.tensor(value)))
    check(p.entropy(), q.entropy())
    assert p.sample((5,)).shape == (5, 3, 4)
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        D.Independent(D.Normal(loom.tensor(LOC), loom.tensor(SCALE)), 3)


@pytest.mark.parametrize("name", ["Normal", "Laplace", "Uniform", "Exponential", "Bernoulli"])
def test_expand_broadcasts_the_parameters(name):
    params, value, _ = FAMILIES[name]
    row = [p[0] for p in params]  # batch shape (4,)
    value = np.stack([value[0], value[0][::-1], value[0]])  # inside row 0's support, shape (3, 4)
    if name == "Uniform":
        value[1] = value[0]
    p = getattr(D, name)(*[loom.tensor(x) for x in row]).expand((3, 4))
    q = getattr(TD, name)(*[torch.tensor(x) for x in row]).expand((3, 4))
    assert p.batch_shape == (3, 4)
    check(p.log_prob(loom.tensor(value)), q.log_prob(torch.tensor(value)))
    assert p.sample((2,)).shape == (2, 3, 4)
    c = D.Categorical(logits=loom.tensor(LOGITS[0])).expand((6,))
    assert c.batch_shape == (6,) and c.sample().shape == (6,) and c.probs.shape == (6, 5)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_sample_shapes_and_statistics(device):
    loom.manual_seed(0)
    n = 40000
    loc, scale = loom.tensor([1.0, -2.0], device=device), loom.tensor([0.5, 3.0], device=device)
    cases = [
        (D.Normal(loc, scale), [1.0, -2.0], [0.25, 9.0]),
        (D.Laplace(loc, scale), [1.0, -2.0], [0.5, 18.0]),
        (D.Uniform(loc, loc + scale), [1.25, -0.5], [0.25 / 12, 9.0 / 12]),
        (D.Exponential(scale), [2.0, 1 / 3], [4.0, 1 / 9]),
        (D.Bernoulli(loom.tensor([0.2, 0.9], device=device)), [0.2, 0.9], [0.16, 0.09]),
    ]
    for dist, mean, var in cases:
        s = dist.sample((n,))
        assert s.shape == (n, 2) and s.device == loc.device
        got = s.cpu().numpy().astype(np.float64)
        # Five standard errors of the sample mean and variance.
        assert (np.abs(got.mean(0) - mean) <= 5 * np.sqrt(np.array(var) / n)).all(), (type(dist), got.mean(0))
        np.testing.assert_allclose(got.var(0), var, rtol=0.06)
    counts = np.bincount(D.Categorical(probs=loom.tensor([0.1, 0.6, 0.3], device=device)).sample((n,)).cpu().numpy(),
                         minlength=3) / n
    np.testing.assert_allclose(counts, [0.1, 0.6, 0.3], atol=0.01)
    u = D.Uniform(0.0, 1.0).sample((1000,)).numpy()
    assert (u >= 0).all() and (u < 1).all()
    assert D.Normal(0.0, 1.0).sample().shape == () and D.Normal(0.0, 1.0).sample(3).shape == (3,)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_gradients_flow_through_rsample_and_log_prob(device):
    loc = loom.tensor([0.3, -0.7], dtype=loom.float64, device=device, requires_grad=True)
    scale = loom.tensor([0.5, 2.0], dtype=loom.float64, device=device, requires_grad=True)
    d = D.Normal(loc, scale)
    x = d.rsample((1000,))
    x.sum().backward()
    # d/dloc sum(loc + eps * scale) = n; d/dscale = sum(eps) = sum((x - loc) / scale).
    eps = ((x.detach() - loc.detach()) / scale.detach()).sum(0)
    np.testing.assert_allclose(loc.grad.cpu().numpy(), [1000, 1000])
    np.testing.assert_allclose(scale.grad.cpu().numpy(), eps.cpu().numpy(), rtol=1e-10)
    assert not d.sample().requires_grad
    # log_prob's gradient against torch's.
    tl = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
    ts = torch.tensor([0.5, 2.0], dtype=torch.float64, requires_grad=True)
    v = np.array([1.0, -1.0])
    loc.grad = scale.grad = None
    D.Normal(loc, scale).log_prob(loom.tensor(v, device=device)).sum().backward()
    TD.Normal(tl, ts).log_prob(torch.tensor(v)).sum().backward()
    check(loc.grad, tl.grad)
    check(scale.grad, ts.grad)
    with pytest.raises(NotImplementedError, match="no reparameterized sample"):
        D.Bernoulli(0.3).rsample()


def test_arguments_are_checked_as_torch_checks_them():
    with pytest.raises(ValueError, match="scale.*GreaterThan"):
        D.Normal(loom.zeros(2), loom.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="probs"):
        D.Bernoulli(loom.tensor([0.5, 1.5]))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Categorical()
    with pytest.raises(ValueError, match="less than high"):
        D.Uniform(1.0, 0.0)
    with pytest.raises(ValueError, match="support"):
        D.Exponential(1.0).log_prob(loom.tensor([-1.0]))
    with pytest.raises(ValueError, match="broadcastable"):
        D.Normal(loom.zeros(3), 1.0).log_prob(loom.zeros(4))
    D.Normal(loom.zeros(2), loom.tensor([1.0, -1.0]), validate_args=False)  # unchecked on request


def test_a_lazy_distribution_is_checked_only_on_request_so_it_does_not_sync():
    scale = loom.tensor([1.0, 2.0], device="lazy") * 1  # pending
    before = loom.metrics()["syncs"]
    d = D.Normal(loom.zeros(2, device="lazy"), scale)
    d.log_prob(loom.ones(2, device="lazy"))
    assert loom.metrics()["syncs"] == before
    with pytest.raises(ValueError, match="scale"):
        D.Normal(loom.zeros(2, device="lazy"), scale * -1, validate_args=True)


def test_enumerate_support():
    c = D.Categorical(probs=loom.ones(2, 3) / 3)
    tc = TD.Categorical(probs=torch.ones(2, 3) / 3)
    np.testing.assert_array_equal(c.enumerate_support().numpy(), tc.enumerate_support().numpy())
    np.testing.assert_array_equal(c.enumerate_support(False).numpy(), tc.enumerate_support(False).numpy())
    b, tb = D.Bernoulli(loom.full((2,), 0.5)), TD.Bernoulli(torch.full((2,), 0.5))
    np.testing.assert_array_equal(b.enumerate_support().numpy(), tb.enumerate_support().numpy())


def test_a_lazy_reinforce_step_compiles_nothing_after_warm_up():
    """A policy-gradient step as RL scripts write it: sample actions, score them, step."""
    loom.manual_seed(1)
    policy = loom.nn.Linear(4, 3).to("lazy")
    opt = loom.optim.Adam(policy.parameters(), lr=1e-2)
    states = loom.randn(16, 4, device="lazy")

    def step():
        dist = D.Categorical(logits=policy(states))
        actions = dist.sample()
        reward = (actions == 1).float()
        loss = -(dist.log_prob(actions) * reward).mean() - 0.01 * dist.entropy().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))

    losses = []
    moved = counters_after_warm_up(step, steps=3)
    assert moved["kernels_compiled"] == 0 and moved["graph_cache_misses"] == 0
    assert len(losses) == 6 and all(math.isfinite(v) for v in losses)


def test_import_alias_sees_the_distributions():
    import loom as alias
    assert alias.distributions.Normal is D.Normal
    assert D.Categorical(logits=loom.zeros(3)).perplexity().item() == pytest.approx(3.0)


# ---- MultivariateNormal and LowRankMultivariateNormal (linalg.cholesky / solve_triangular) ----

def checkd(got, want, **tolerances):
    check(got.detach(), want.detach(), **tolerances)


def _spd(batch, n):
    x = RNG.standard_normal(batch + (n, n))
    return x @ np.swapaxes(x, -1, -2) + n * np.eye(n)


MVN_LOC = RNG.standard_normal((2, 3))
MVN_COV = _spd((2,), 3)
MVN_VALUE = RNG.standard_normal((4, 2, 3))


def _mvn_pair(param, device, batch_matrix=True):
    loc, tloc = both(MVN_LOC, device)
    cov = MVN_COV if batch_matrix else MVN_COV[0]
    matrix = {"covariance_matrix": cov, "precision_matrix": np.linalg.inv(cov),
              "scale_tril": np.linalg.cholesky(cov)}[param]
    m, tm = both(matrix, device)
    return D.MultivariateNormal(loc, **{param: m}), TD.MultivariateNormal(tloc, **{param: tm})


@pytest.mark.parametrize("batch_matrix", [True, False])
@pytest.mark.parametrize("param", ["covariance_matrix", "precision_matrix", "scale_tril"])
@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_multivariate_normal_matches_torch(device, param, batch_matrix):
    d, td = _mvn_pair(param, device, batch_matrix)
    assert d.batch_shape == td.batch_shape and d.event_shape == td.event_shape
    value, tvalue = both(MVN_VALUE, device)
    checkd(d.log_prob(value), td.log_prob(tvalue), rtol=1e-10, atol=1e-12)
    checkd(d.entropy(), td.entropy(), rtol=1e-12)
    for name in ["mean", "mode", "variance", "covariance_matrix", "precision_matrix", "scale_tril"]:
        checkd(getattr(d, name), getattr(td, name), rtol=1e-10, atol=1e-12)
    e, te = d.expand((5, 2)), td.expand((5, 2))
    assert e.batch_shape == te.batch_shape
    checkd(e.log_prob(value[:1]), te.log_prob(tvalue[:1]), rtol=1e-10, atol=1e-12)
    assert tuple(d.rsample((7,)).shape) == (7, 2, 3) and tuple(d.sample().shape) == (2, 3)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_multivariate_normal_gradients_and_kl_match_torch(device):
    loc, tloc = both(MVN_LOC, device)
    loc.requires_grad_(True)
    tloc.requires_grad_(True)
    x, tx = both(np.linalg.cholesky(MVN_COV), device)
    x.requires_grad_(True)
    tx.requires_grad_(True)
    value, tvalue = both(MVN_VALUE, device)
    q, tq = _mvn_pair("covariance_matrix", device, batch_matrix=False)
    p = D.MultivariateNormal(loc, scale_tril=x)
    tp = TD.MultivariateNormal(tloc, scale_tril=tx)
    kl, tkl = D.kl_divergence(p, q), TD.kl_divergence(tp, tq)
    checkd(kl, tkl, rtol=1e-10)
    (p.log_prob(value).sum() + p.entropy().sum() + kl.sum()).backward()
    (tp.log_prob(tvalue).sum() + tp.entropy().sum() + tkl.sum()).backward()
    checkd(loc.grad, tloc.grad, rtol=1e-10, atol=1e-12)
    checkd(x.grad, tx.grad, rtol=1e-10, atol=1e-12)
    # through the Cholesky factor of a covariance, and through rsample
    cov, tcov = both(MVN_COV, device)
    cov.requires_grad_(True)
    tcov.requires_grad_(True)
    D.MultivariateNormal(loc.detach(), covariance_matrix=cov).log_prob(value).sum().backward()
    TD.MultivariateNormal(tloc.detach(), covariance_matrix=tcov).log_prob(tvalue).sum().backward()
    checkd(cov.grad, tcov.grad, rtol=1e-9, atol=1e-12)
    loom.manual_seed(0)
    s = D.MultivariateNormal(loc, scale_tril=x).rsample((3,))
    s.sum().backward()
    assert loc.grad is not None


def test_multivariate_normal_arguments_and_sample_statistics():
    with pytest.raises(ValueError, match="Exactly one"):
        D.MultivariateNormal(loom.zeros(2))
    with pytest.raises(ValueError, match="covariance_matrix"):
        D.MultivariateNormal(loom.zeros(2), covariance_matrix=loom.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="scale_tril"):
        D.MultivariateNormal(loom.zeros(2), scale_tril=loom.tensor([[1.0, 1.0], [0.0, 1.0]]))
    # a lazy covariance is not checked (no sync) unless asked; its factorization fails at the read
    before = loom.metrics()["syncs"]
    bad = D.MultivariateNormal(loom.zeros(2, device="lazy"),
                               covariance_matrix=loom.tensor([[1.0, 2.0], [2.0, 1.0]], device="lazy"))
    lp = bad.log_prob(loom.zeros(2, device="lazy"))
    assert loom.metrics()["syncs"] == before
    with pytest.raises(loom.linalg.LinAlgError, match="positive-definite"):
        lp.item()
    loom.manual_seed(3)
    cov = loom.tensor(MVN_COV[0])
    s = D.MultivariateNormal(loom.zeros(3, dtype=loom.float64), covariance_matrix=cov).sample((20000,)).numpy()
    np.testing.assert_allclose(np.cov(s.T), MVN_COV[0], atol=0.25)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_low_rank_multivariate_normal_matches_torch(device):
    loc, tloc = both(MVN_LOC, device)
    w, tw = both(RNG.standard_normal((2, 3, 2)), device)
    diag, tdiag = both(RNG.uniform(0.5, 2.0, (2, 3)), device)
    w.requires_grad_(True)
    tw.requires_grad_(True)
    d = D.LowRankMultivariateNormal(loc, w, diag)
    td = TD.LowRankMultivariateNormal(tloc, tw, tdiag)
    value, tvalue = both(MVN_VALUE, device)
    checkd(d.log_prob(value), td.log_prob(tvalue), rtol=1e-10, atol=1e-12)
    checkd(d.entropy(), td.entropy(), rtol=1e-12)
    for name in ["variance", "covariance_matrix", "precision_matrix", "scale_tril"]:
        checkd(getattr(d, name), getattr(td, name), rtol=1e-10, atol=1e-12)
    q, tq = _mvn_pair("covariance_matrix", device)
    checkd(D.kl_divergence(d, q), TD.kl_divergence(td, tq), rtol=1e-10)
    d.log_prob(value).sum().backward()
    td.log_prob(tvalue).sum().backward()
    checkd(w.grad, tw.grad, rtol=1e-9, atol=1e-12)
    assert tuple(d.rsample((5,)).shape) == (5, 2, 3)
