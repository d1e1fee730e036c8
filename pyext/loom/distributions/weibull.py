"""Weibull(scale, concentration): scale * E ** (1 / concentration) for E a standard exponential,
with a reparameterized sample."""

import loom
from loom.distributions import constraints
from loom.distributions.distribution import broadcast_all
from loom.distributions.exponential import Exponential
from loom.distributions.gumbel import _EULER_GAMMA
from loom.distributions.transformed_distribution import TransformedDistribution
from loom.distributions.transforms import AffineTransform, PowerTransform


class Weibull(TransformedDistribution):
    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base = Exponential(loom.ones_like(self.scale), validate_args=validate_args)
        transforms = [PowerTransform(self.concentration_reciprocal), AffineTransform(0, self.scale)]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Weibull, _instance)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        base = self.base_dist.expand(batch_shape)
        TransformedDistribution.__init__(new, base, [PowerTransform(new.concentration_reciprocal),
                                                     AffineTransform(0, new.scale)], validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.scale * loom.exp(loom.lgamma(1 + self.concentration_reciprocal))

    @property
    def mode(self):
        c = self.concentration
        return self.scale * ((c - 1) / c) ** c.reciprocal()

    @property
    def variance(self):
        return self.scale.pow(2) * (loom.exp(loom.lgamma(1 + 2 * self.concentration_reciprocal))
                                    - loom.exp(2 * loom.lgamma(1 + self.concentration_reciprocal)))

    def entropy(self):
        return _EULER_GAMMA * (1 - self.concentration_reciprocal) + loom.log(self.scale * self.concentration_reciprocal) + 1
