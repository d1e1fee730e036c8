"""Kumaraswamy(concentration1, concentration0) on (0, 1): (1 - (1 - u)^(1/b))^(1/a) for uniform u,
a Beta-like family whose cdf and sample are closed-form (reparameterized)."""

import math

import loom
from loom.distributions import constraints
from loom.distributions.distribution import broadcast_all
from loom.distributions.gumbel import _EULER_GAMMA
from loom.distributions.transformed_distribution import TransformedDistribution
from loom.distributions.transforms import AffineTransform, PowerTransform
from loom.distributions.uniform import Uniform


def _moments(a, b, n):
    # E[x^n] = b B(1 + n/a, b).
    arg = 1 + n / a
    return (b.log() + loom.lgamma(arg) + loom.lgamma(b) - loom.lgamma(arg + b)).exp()


class Kumaraswamy(TransformedDistribution):
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base = Uniform(loom.full_like(self.concentration0, 0), loom.full_like(self.concentration0, 1),
                       validate_args=validate_args)
        transforms = [PowerTransform(self.concentration0.reciprocal()), AffineTransform(1.0, -1.0),
                      PowerTransform(self.concentration1.reciprocal())]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        # ((a - 1) / (a b - 1))^(1/a), for a >= 1 and b >= 1.
        log_mode = a.reciprocal() * ((a - 1).log() - (a * b - 1).log())
        log_mode = log_mode.masked_fill((a < 1) | (b < 1), math.nan)
        return log_mode.exp()

    @property
    def variance(self):
        return _moments(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        harmonic_b = loom.digamma(b + 1) + _EULER_GAMMA
        return (1 - b.reciprocal()) + (1 - a.reciprocal()) * harmonic_b - a.log() - b.log()
