"""kl_divergence(p, q) = E_p[log p - log q], dispatched on the pair of families. register_kl adds
a pair; the most specific registered pair (by the classes' method resolution orders) is used."""

import math

import loom
from loom.distributions.bernoulli import Bernoulli
from loom.distributions.categorical import Categorical, OneHotCategorical
from loom.distributions.exponential import Exponential
from loom.distributions.independent import Independent, sum_rightmost
from loom.distributions.laplace import Laplace
from loom.distributions.multivariate_normal import LowRankMultivariateNormal, MultivariateNormal
from loom.distributions.normal import Normal
from loom.distributions.uniform import Uniform
from loom.nn import functional as F

_KL_REGISTRY = {}
_KL_MEMO = {}


def register_kl(type_p, type_q):
    """Decorator: fn(p, q) computes KL(p || q) for p of type_p and q of type_q (or subclasses)."""
    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMO.clear()
        return fn
    return decorator


def _dispatch(type_p, type_q):
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return None
    # The pair closest to (type_p, type_q) in both orders; PyTorch also ranks this way and warns on
    # ties, where the first in p's order wins here.
    rank = lambda pair: (type_p.__mro__.index(pair[0]), type_q.__mro__.index(pair[1]))
    return _KL_REGISTRY[min(matches, key=rank)]


def kl_divergence(p, q):
    try:
        fn = _KL_MEMO[type(p), type(q)]
    except KeyError:
        fn = _KL_MEMO[type(p), type(q)] = _dispatch(type(p), type(q))
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                                  f"{type(q).__name__}")
    return fn(p, q)


def _infinite_where(condition, value):
    return value.masked_fill(condition, math.inf)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    return -scale_ratio.log() + loc_abs_diff / q.scale + scale_ratio * loom.exp(-loc_abs_diff / p.scale) - 1


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    # Infinite where p's interval reaches outside q's.
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _infinite_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    # Each term is 0 where p gives its outcome no mass, and infinite where q gives it none but p does.
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = _infinite_where(q.probs == 0, t1).masked_fill(p.probs == 0, 0)
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = _infinite_where(q.probs == 1, t2).masked_fill(p.probs == 1, 0)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _infinite_where((q.probs == 0).expand_as(t), t).masked_fill((p.probs == 0).expand_as(t), 0)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different event dimensions is not implemented")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


def _mvn_factor_and_logdet(d):
    """The lower factor L of d's covariance (unbroadcast) and log det of the covariance."""
    if isinstance(d, LowRankMultivariateNormal):
        return loom.linalg.cholesky(d.covariance_matrix), d._log_det()
    l = d._unbroadcasted_scale_tril
    return l, 2 * l.diagonal(dim1=-2, dim2=-1).log().sum(-1)


@register_kl(MultivariateNormal, MultivariateNormal)
@register_kl(LowRankMultivariateNormal, MultivariateNormal)
@register_kl(MultivariateNormal, LowRankMultivariateNormal)
@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_mvn(p, q):
    # KL = (tr(S_q^{-1} S_p) + |L_q^{-1} (mu_q - mu_p)|^2 - n + log det S_q - log det S_p) / 2, with
    # tr(S_q^{-1} S_p) = |L_q^{-1} L_p|_F^2: two triangular solves, no inverse.
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot "
                         "be computed")
    lp, logdet_p = _mvn_factor_and_logdet(p)
    lq, logdet_q = _mvn_factor_and_logdet(q)
    n = p.event_shape[0]
    batch = loom.broadcast_shapes(lp.shape[:-2], lq.shape[:-2])
    lq_b = lq.expand(batch + lq.shape[-2:])
    trace = loom.linalg.solve_triangular(lq_b, lp.expand(batch + lp.shape[-2:]), upper=False).pow(2).sum((-2, -1))
    diff = (q.loc - p.loc).unsqueeze(-1)
    lq_d = lq.expand(loom.broadcast_shapes(lq.shape[:-2], diff.shape[:-2]) + lq.shape[-2:])
    m = loom.linalg.solve_triangular(lq_d, diff, upper=False).squeeze(-1).pow(2).sum(-1)
    return 0.5 * (trace + m - n + logdet_q - logdet_p)
