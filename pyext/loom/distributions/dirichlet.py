"""Dirichlet(concentration): distributions over the simplex, with a reparameterized sample:
independent Gamma(concentration_k, 1) draws normalized to sum 1, whose gradient is the gammas'
implicit one carried through the normalization."""

import loom
from loom.distributions import constraints
from loom.distributions.distribution import as_size
from loom.distributions.exp_family import ExponentialFamily
from loom.distributions.gamma import _standard_gamma


def _dirichlet_sample(concentration):
    gammas = _standard_gamma(concentration)
    info = loom.finfo(gammas.dtype)
    return (gammas / gammas.sum(-1, keepdim=True)).clamp(min=info.tiny, max=1 - info.eps)


class Dirichlet(ExponentialFamily):
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = loom.Size(batch_shape)
        return self._expanded(Dirichlet, batch_shape, _instance,
                              concentration=self.concentration.expand(batch_shape + self.event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(as_size(sample_shape))
        return _dirichlet_sample(self.concentration.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return loom.xlogy(c - 1.0, value).sum(-1) + loom.lgamma(c.sum(-1)) - loom.lgamma(c).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        # (c - 1) / sum(c - 1) where every c > 1; where every c < 1 the density peaks at the vertex
        # of the largest concentration; torch's convention for the mixed case (c - 1 clamped at 0).
        c = self.concentration
        m1 = (c - 1).clamp(min=0.0)
        mode = m1 / m1.sum(-1, keepdim=True)
        all_below = (c < 1).all(-1, keepdim=True)
        vertex = loom.nn.functional.one_hot(c.argmax(-1), c.shape[-1]).to(mode.dtype)
        return loom.where(all_below, vertex, mode)

    @property
    def variance(self):
        c = self.concentration
        c0 = c.sum(-1, keepdim=True)
        return c * (c0 - c) / (c0.pow(2) * (c0 + 1))

    def entropy(self):
        c = self.concentration
        k = c.size(-1)
        c0 = c.sum(-1)
        return (loom.lgamma(c).sum(-1) - loom.lgamma(c0) - (k - c0) * loom.digamma(c0)
                - ((c - 1.0) * loom.digamma(c)).sum(-1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return loom.lgamma(x).sum(-1) - loom.lgamma(x.sum(-1))
