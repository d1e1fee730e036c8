"""Cauchy(loc, scale): the Lorentz distribution (no mean, infinite variance), with a
reparameterized sample loc + scale * tan(pi (u - 1/2))."""

import math

import loom
from loom.distributions.distribution import LocationScale, as_size


class Cauchy(LocationScale):
    def expand(self, batch_shape, _instance=None):
        return self._expand_as(Cauchy, batch_shape, _instance)

    @property
    def mean(self):
        return loom.full(self._extended_shape(), math.nan, dtype=self.loc.dtype, device=self.loc.device)

    @property
    def variance(self):
        return loom.full(self._extended_shape(), math.inf, dtype=self.loc.dtype, device=self.loc.device)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(as_size(sample_shape))
        u = loom.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + self.scale * loom.tan(math.pi * (u - 0.5))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - ((value - self.loc) / self.scale).pow(2).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return loom.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return loom.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
