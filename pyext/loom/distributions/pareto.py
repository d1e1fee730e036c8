"""Pareto(scale, alpha): scale * exp(E) for E an Exponential(alpha), on [scale, inf), with a
reparameterized sample."""

import loom
from loom.distributions import constraints
from loom.distributions.distribution import broadcast_all
from loom.distributions.exponential import Exponential
from loom.distributions.transformed_distribution import TransformedDistribution
from loom.distributions.transforms import AffineTransform, ExpTransform


class Pareto(TransformedDistribution):
    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base = Exponential(self.alpha, validate_args=validate_args)
        super().__init__(base, [ExpTransform(), AffineTransform(0, self.scale)], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Pareto, _instance)
        new.scale = self.scale.expand(batch_shape)
        new.alpha = self.alpha.expand(batch_shape)
        TransformedDistribution.__init__(new, self.base_dist.expand(batch_shape),
                                         [ExpTransform(), AffineTransform(0, new.scale)], validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        # Infinite for alpha <= 1: alpha clamped to 1 gives a / 0.
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        # Infinite for alpha <= 2.
        a = self.alpha.clamp(min=2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())
