"""Gamma(concentration, rate), with a reparameterized sample: standard gamma draws
(_sample_standard_gamma: Marsaglia-Tsang, composed of loom's random ops so that cpu, lazy and CUDA
draw the same values from one seed, and a lazy draw joins the step's trace) divided by the rate. The draw's
gradient with respect to the concentration is the implicit one, dx/dalpha = -(dF/dalpha) / f(x)
for F the gamma cdf at fixed x, as PyTorch's _standard_gamma_grad defines it; here it is
computed from F's power series (any x within reach of 256 terms) and, past that, from the
Wilson-Hilferty approximation's derivative (only for large shapes, where it is accurate).

cdf needs the regularized incomplete gamma function (igamma), which loom does not have yet."""

import math

import loom
from loom.distributions import constraints
from loom.distributions.distribution import as_size, batch_shape_of, broadcast_all
from loom.distributions.exp_family import ExponentialFamily

_SERIES_TERMS = 256
_ROUNDS = 16


def _sample_standard_gamma(alpha):
    """Standard gamma draws (rate 1) of the shapes alpha, outside autograd.

    Marsaglia and Tsang's method ("A simple method for generating gamma variables", 2000):
    d = a - 1/3, c = 1 / sqrt(9 d); a normal z with v = (1 + c z)^3 > 0 is accepted when
    log u < z^2 / 2 + d (1 - v + log v), and d v is then Gamma(a). A loop of data-dependent length
    would need a sync on lazy, so each element gets _ROUNDS candidates at once and keeps the first
    accepted one. Every round accepts with probability above 0.95 (a >= 1), so all 16 fail with
    probability below 1e-20; such an element would take d, Gamma(a)'s mode region. Shapes below 1
    draw Gamma(a + 1) times u^(1/a), which is Gamma(a). A shape that is not positive gives NaN; a
    draw that underflows is raised to the dtype's smallest normal number, as PyTorch's."""
    with loom.no_grad():
        alpha = alpha.detach()
        small = alpha < 1
        a = loom.where(small, alpha + 1, alpha)
        d = a - 1.0 / 3
        c = (9 * d).rsqrt()
        shape = tuple(alpha.shape) + (_ROUNDS,)
        z = loom.randn(shape, dtype=alpha.dtype, device=alpha.device)
        u = loom.rand(shape, dtype=alpha.dtype, device=alpha.device)
        v = (1 + c.unsqueeze(-1) * z).pow(3)
        positive = v > 0
        log_v = loom.where(positive, v, loom.ones_like(v)).log()
        accept = positive & (u.log() < 0.5 * z * z + d.unsqueeze(-1) * (1 - v + log_v))
        # The first accepted round: the largest of (rounds - k) over the accepted k.
        rank = loom.arange(_ROUNDS, 0, -1, device=alpha.device)
        first = (accept.to(rank.dtype) * rank).argmax(-1, keepdim=True)
        chosen = v.gather(-1, first).squeeze(-1)
        sample = d * loom.where(accept.any(-1), chosen, loom.ones_like(chosen))
        boost = (1 - loom.rand(tuple(alpha.shape), dtype=alpha.dtype, device=alpha.device)).pow(alpha.reciprocal())
        sample = loom.where(small, sample * boost, sample).clamp(min=loom.finfo(alpha.dtype).tiny)
        return loom.where(alpha > 0, sample, loom.full_like(sample, math.nan))


def _standard_gamma_grad(alpha, x):
    """d x / d alpha of a standard gamma draw x at fixed cdf value, elementwise, in x's dtype."""
    dtype = x.dtype
    a, x = alpha.to(loom.float64), x.to(loom.float64).clamp(min=loom.finfo(loom.float64).tiny)
    log_x = x.log()
    # Series: dx/da = -x * sum_n (log x - digamma(a+n+1)) * x^n Gamma(a) / Gamma(a+n+1).
    n = loom.arange(_SERIES_TERMS, dtype=loom.float64, device=x.device)
    an1 = a.unsqueeze(-1) + n + 1
    log_terms = n * log_x.unsqueeze(-1) + loom.lgamma(a).unsqueeze(-1) - loom.lgamma(an1)
    series = -x * ((log_x.unsqueeze(-1) - loom.digamma(an1)) * log_terms.exp()).sum(-1)
    # The terms peak near n = x - a with a spread of about sqrt(x): the series has converged when
    # 256 terms reach well past that peak.
    converged = (x - a).clamp(min=0) + 10 * x.sqrt() + 10 < _SERIES_TERMS
    # Wilson-Hilferty: x = a w^3, w = 1 - 1/(9a) + z / (3 sqrt a), z held fixed.
    w = (x / a).pow(1 / 3)
    z = (w - 1 + 1 / (9 * a)) * 3 * a.sqrt()
    asymptotic = w.pow(3) + 3 * a * w.pow(2) * (1 / (9 * a * a) - z / (6 * a.pow(1.5)))
    return loom.where(converged, series, asymptotic).to(dtype)


class _StandardGamma(loom.autograd.Function):
    @staticmethod
    def forward(ctx, alpha):
        x = _sample_standard_gamma(alpha)
        ctx.save_for_backward(alpha, x)
        return x

    @staticmethod
    def backward(ctx, grad):
        alpha, x = ctx.saved_tensors
        return grad * _standard_gamma_grad(alpha.detach(), x)


def _standard_gamma(alpha):
    """Standard gamma draws of shapes alpha, differentiable in alpha."""
    if alpha.requires_grad and loom.is_grad_enabled():
        return _StandardGamma.apply(alpha)
    return _sample_standard_gamma(alpha)


class Gamma(ExponentialFamily):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(batch_shape_of((concentration, rate), self.concentration), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(Gamma, batch_shape, _instance, concentration=self.concentration.expand(batch_shape),
                              rate=self.rate.expand(batch_shape))

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(as_size(sample_shape))
        value = _standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        # Kept off 0 (a tiny concentration's draw may underflow), so that log_prob stays finite.
        return value.clamp(min=loom.finfo(value.dtype).tiny)

    def log_prob(self, value):
        value = value if isinstance(value, loom.Tensor) else \
            loom.tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        return (loom.xlogy(self.concentration, self.rate) + loom.xlogy(self.concentration - 1, value)
                - self.rate * value - loom.lgamma(self.concentration))

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + loom.lgamma(c) + (1.0 - c) * loom.digamma(c)

    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return loom.lgamma(x + 1) + (x + 1) * loom.log(-y.reciprocal())

    def cdf(self, value):
        raise NotImplementedError("Gamma.cdf needs the regularized incomplete gamma function (torch.special.gammainc "
                                  "/ igamma), which loom does not have yet")
