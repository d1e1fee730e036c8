"""Gumbel(loc, scale): the type-I extreme-value distribution, loc - scale * log(-log u) for
uniform u, as a TransformedDistribution (so cdf and icdf come from the uniform's)."""

import math

import loom
from loom.distributions import constraints
from loom.distributions.distribution import batch_shape_of, broadcast_all
from loom.distributions.transformed_distribution import TransformedDistribution
from loom.distributions.transforms import AffineTransform, ExpTransform
from loom.distributions.uniform import Uniform

_EULER_GAMMA = 0.57721566490153286060


class Gumbel(TransformedDistribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        info = loom.finfo(self.loc.dtype)
        # u in [tiny, 1 - eps]: both logs finite.
        if batch_shape_of((loc, scale), self.loc) == ():
            base = Uniform(info.tiny, 1 - info.eps, validate_args=False)
        else:
            base = Uniform(loom.full_like(self.loc, info.tiny), loom.full_like(self.loc, 1 - info.eps),
                           validate_args=False)
        transforms = [ExpTransform().inv, AffineTransform(0, -loom.ones_like(self.scale)), ExpTransform().inv,
                      AffineTransform(self.loc, -self.scale)]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gumbel, _instance)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (self.loc - value) / self.scale
        return (z - z.exp()) - self.scale.log()

    @property
    def mean(self):
        return self.loc + self.scale * _EULER_GAMMA

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def entropy(self):
        return self.scale.log() + (1 + _EULER_GAMMA)
