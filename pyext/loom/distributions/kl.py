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


# ---- The families built on transforms, Cauchy, Geometric, and the pairs across families. Each
# closed form is KL = -H(p) - E_p[log q], with p's moments written out. ----

from loom.distributions.cauchy import Cauchy  # noqa: E402
from loom.distributions.geometric import Geometric  # noqa: E402
from loom.distributions.gumbel import _EULER_GAMMA, Gumbel  # noqa: E402
from loom.distributions.half_normal import HalfNormal  # noqa: E402
from loom.distributions.pareto import Pareto  # noqa: E402
from loom.distributions.transformed_distribution import TransformedDistribution  # noqa: E402


def _infinite_like(tensor):
    return loom.full_like(tensor, math.inf)


def _inf_where(condition, value):
    # where, not masked_fill: the condition may broadcast wider than value (p's and q's shapes).
    return loom.where(condition, math.inf, value)


def _x_log_x(x):
    return x * x.log()


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    # A bijection leaves KL unchanged, so equal transforms reduce to the bases.
    if p.transforms != q.transforms:
        raise NotImplementedError("KL between TransformedDistributions with different transforms is not implemented")
    if p.event_shape != q.event_shape:
        raise NotImplementedError("KL between TransformedDistributions with different event shapes is not implemented")
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    return (((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)) / (4 * p.scale * q.scale)).log()


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    # E_p[x] = 1/p - 1, so -E_p[log q] = -(1/p - 1) log(1 - q) - log q.
    return -p.entropy() - loom.log1p(-q.probs) / p.probs - q.logits


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    # E_p[exp(-x / s_q)] = exp(-m_p / s_q) Gamma(1 + s_p / s_q).
    ratio = p.scale / q.scale
    t1 = -ratio.log() - 1 - _EULER_GAMMA
    t2 = (p.loc + p.scale * _EULER_GAMMA - q.loc) / q.scale
    t3 = ((q.loc - p.loc) / q.scale + loom.lgamma(1 + ratio)).exp()
    return t1 + t2 + t3


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    result = (p.alpha / q.alpha).log() + q.alpha * (p.scale / q.scale).log() + q.alpha / p.alpha - 1
    return _inf_where(p.scale < q.scale, result)  # p puts mass below the support of q


@register_kl(Exponential, Pareto)
@register_kl(Exponential, Uniform)
@register_kl(Normal, Exponential)
@register_kl(Normal, Pareto)
@register_kl(Normal, Uniform)
@register_kl(Laplace, Exponential)
@register_kl(Laplace, Pareto)
@register_kl(Laplace, Uniform)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Pareto)
@register_kl(Gumbel, Uniform)
def _kl_unbounded_bounded(p, q):
    # p has mass where q has none.
    param = p.rate if isinstance(p, Exponential) else p.loc
    return _infinite_like(param)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    rs = p.rate * q.scale
    loc_ratio = q.loc / q.scale
    # E_p[exp(-x / s)] = r s / (r s + 1).
    return rs.log() - 1 + (p.rate.reciprocal() - q.loc) / q.scale + loc_ratio.exp() * rs / (rs + 1)


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var = q.scale.pow(2)
    second_moment = 2 / p.rate.pow(2) - 2 * q.loc / p.rate + q.loc.pow(2)  # E_p[(x - m)^2]
    return p.rate.log() - 1 + (q.scale * math.sqrt(2 * math.pi)).log() + second_moment / (2 * var)


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    p_mean = p.loc + p.scale * _EULER_GAMMA
    p_var = (math.pi ** 2 / 6) * p.scale.pow(2)
    neg_entropy = -p.scale.log() - _EULER_GAMMA - 1
    return neg_entropy + (q.scale * math.sqrt(2 * math.pi)).log() + (p_var + (p_mean - q.loc).pow(2)) / (2 * q.scale.pow(2))


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    second_moment = 2 * p.scale.pow(2) + (p.loc - q.loc).pow(2)
    return -1 - (2 * p.scale).log() + (q.scale * math.sqrt(2 * math.pi)).log() + second_moment / (2 * q.scale.pow(2))


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    # E_p[exp(-(x - m) / s)] = exp((m - m_p) / s + s_p^2 / (2 s^2)).
    neg_entropy = -0.5 * math.log(2 * math.pi * math.e) - p.scale.log()
    expectation = ((q.loc - p.loc) / q.scale + p.scale.pow(2) / (2 * q.scale.pow(2))).exp()
    return neg_entropy + q.scale.log() + (p.loc - q.loc) / q.scale + expectation


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    # E_p|x - m| is the folded normal's mean.
    d = p.loc - q.loc
    abs_mean = p.scale * math.sqrt(2 / math.pi) * (-0.5 * (d / p.scale).pow(2)).exp() + \
        d * loom.erf(d / (p.scale * math.sqrt(2)))
    neg_entropy = -0.5 * math.log(2 * math.pi * math.e) - p.scale.log()
    return neg_entropy + (2 * q.scale).log() + abs_mean / q.scale


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    neg_entropy = -(p.scale / p.alpha).log() - 1 - p.alpha.reciprocal()
    mean = p.alpha * p.scale / (p.alpha - 1)
    result = neg_entropy - q.rate.log() + q.rate * mean
    return _inf_where(p.alpha <= 1, result)  # no finite mean


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    neg_entropy = -(p.scale / p.alpha).log() - 1 - p.alpha.reciprocal()
    mean = p.alpha * p.scale / (p.alpha - 1)
    var = p.alpha * p.scale.pow(2) / ((p.alpha - 1).pow(2) * (p.alpha - 2))
    result = neg_entropy + (q.scale * math.sqrt(2 * math.pi)).log() + (var + (mean - q.loc).pow(2)) / (2 * q.scale.pow(2))
    return _inf_where(p.alpha <= 2, result)  # no finite variance


@register_kl(Pareto, Uniform)
def _kl_pareto_uniform(p, q):
    return _infinite_like(p.scale)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _inf_where(p.low < 0, result)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    width = p.high - p.low
    z_low, z_high = (p.low - q.loc) / q.scale, (p.high - q.loc) / q.scale
    # E_p[z] + E_p[exp(-z)] for z = (x - m) / s, uniform x.
    return (q.scale / width).log() + (z_low + z_high) / 2 + (q.scale / width) * ((-z_low).exp() - (-z_high).exp())


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    width = p.high - p.low
    second_moment = width.pow(2) / 12 + ((p.high + p.low) / 2 - q.loc).pow(2)
    return (math.sqrt(2 * math.pi) * q.scale / width).log() + second_moment / (2 * q.scale.pow(2))


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    mean_log = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width  # E_p[log x]
    result = -width.log() - q.alpha.log() - q.alpha * q.scale.log() + (q.alpha + 1) * mean_log
    return _inf_where(p.low < q.scale, result)


# ---- The gamma family (Gamma, Chi2, Beta, Dirichlet) and ExponentialFamily. ----

from loom.distributions.beta import Beta  # noqa: E402
from loom.distributions.dirichlet import Dirichlet  # noqa: E402
from loom.distributions.exp_family import ExponentialFamily  # noqa: E402
from loom.distributions.gamma import Gamma  # noqa: E402


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    # The Bregman divergence of the log-normalizer F between the natural parameters:
    # F(theta_q) - F(theta_p) - <theta_q - theta_p, grad F(theta_p)>.
    if type(p) is not type(q):
        raise NotImplementedError("KL between exponential families of different types is not implemented")
    p_params = [t.detach().requires_grad_() for t in p._natural_params]
    q_params = q._natural_params
    with loom.enable_grad():
        lg_normal = p._log_normalizer(*p_params)
        gradients = loom.autograd.grad(lg_normal.sum(), p_params, create_graph=True)
    result = q._log_normalizer(*q_params) - lg_normal
    for tp, tq, g in zip(p_params, q_params, gradients):
        result = result - sum_rightmost((tq - tp) * g, len(q.event_shape))
    return result


def _gamma_log_density_mean(q, mean_log_x, mean_x):
    """E_p[log q(x)] for q a Gamma, given E_p[log x] and E_p[x]."""
    a, r = q.concentration, q.rate
    return loom.xlogy(a, r) - loom.lgamma(a) + (a - 1) * mean_log_x - r * mean_x


def _normal_log_density_mean(q, mean, variance):
    return -(q.scale * math.sqrt(2 * math.pi)).log() - (variance + (mean - q.loc).pow(2)) / (2 * q.scale.pow(2))


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    a_p, b_p, a_q, b_q = p.concentration, p.rate, q.concentration, q.rate
    return ((a_p - a_q) * loom.digamma(a_p) - loom.lgamma(a_p) + loom.lgamma(a_q)
            + a_q * (b_p.log() - b_q.log()) + a_p * (b_q - b_p) / b_p)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    a_p, a_q = p.concentration, q.concentration
    sum_p, sum_q = a_p.sum(-1), a_q.sum(-1)
    t1 = loom.lgamma(sum_p) - loom.lgamma(a_p).sum(-1) - loom.lgamma(sum_q) + loom.lgamma(a_q).sum(-1)
    return t1 + ((a_p - a_q) * (loom.digamma(a_p) - loom.digamma(sum_p).unsqueeze(-1))).sum(-1)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    return _kl_dirichlet_dirichlet(p._dirichlet, q._dirichlet)


def _beta_mean_log(p):
    """E_p[log x] and E_p[log(1 - x)] for p a Beta."""
    total = loom.digamma(p.concentration1 + p.concentration0)
    return loom.digamma(p.concentration1) - total, loom.digamma(p.concentration0) - total


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    return -p.entropy() - _gamma_log_density_mean(q, _beta_mean_log(p)[0], p.mean)


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    return -p.entropy() - _normal_log_density_mean(q, p.mean, p.variance)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return _inf_where((q.low > 0) | (q.high < 1), result)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    mean_log = -_EULER_GAMMA - p.rate.log()
    return -p.entropy() - _gamma_log_density_mean(q, mean_log, p.rate.reciprocal())


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    # E_p[exp(-x / s)] is p's moment generating function at -1/s: (b s / (b s + 1))^a.
    bs = p.rate * q.scale
    mean_exp = (q.loc / q.scale + p.concentration * (bs / (bs + 1)).log()).exp()
    return -p.entropy() + q.scale.log() + (p.mean - q.loc) / q.scale + mean_exp


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    return -p.entropy() - _normal_log_density_mean(q, p.mean, p.variance)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    mean_log = p.scale.log() + p.alpha.reciprocal()
    mean = p.alpha * p.scale / (p.alpha - 1)
    result = -p.entropy() - _gamma_log_density_mean(q, mean_log, mean)
    return _inf_where(p.alpha <= 1, result)


def _uniform_mean_log(low, high):
    """E[log x] for x uniform on [low, high] (0 <= low < high)."""
    return (loom.xlogy(high, high) - loom.xlogy(low, low) - (high - low)) / (high - low)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    mean_log_x = _uniform_mean_log(p.low, p.high)
    mean_log_1mx = _uniform_mean_log(1 - p.high, 1 - p.low)
    c1, c0 = q.concentration1, q.concentration0
    log_beta = loom.lgamma(c1) + loom.lgamma(c0) - loom.lgamma(c1 + c0)
    result = -p.entropy() - ((c1 - 1) * mean_log_x + (c0 - 1) * mean_log_1mx - log_beta)
    return _inf_where((p.low < 0) | (p.high > 1), result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    result = -p.entropy() - _gamma_log_density_mean(q, _uniform_mean_log(p.low, p.high), p.mean)
    return _inf_where(p.low < 0, result)


@register_kl(Beta, Pareto)
@register_kl(Exponential, Beta)
@register_kl(Gamma, Beta)
@register_kl(Gamma, Pareto)
@register_kl(Gamma, Uniform)
@register_kl(Gumbel, Beta)
@register_kl(Gumbel, Gamma)
@register_kl(Laplace, Beta)
@register_kl(Laplace, Gamma)
@register_kl(Normal, Beta)
@register_kl(Normal, Gamma)
@register_kl(Pareto, Beta)
def _kl_outside_support(p, q):
    # p has mass where q has none.
    for name in ("rate", "loc", "concentration", "scale", "concentration1"):
        if hasattr(p, name):
            return _infinite_like(getattr(p, name))
