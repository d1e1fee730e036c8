"""Laplace(loc, scale): the double exponential, with a reparameterized sample by inverting the cdf."""

import loom
from loom.distributions.distribution import LocationScale, as_size


class Laplace(LocationScale):
    def expand(self, batch_shape, _instance=None):
        return self._expand_as(Laplace, batch_shape, _instance)

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return 2 ** 0.5 * self.scale

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(as_size(sample_shape))
        eps = loom.finfo(self.loc.dtype).eps
        # u in (-1, 1), kept off -1 so that log1p(-|u|) stays finite.
        u = loom.rand(shape, dtype=self.loc.dtype, device=self.loc.device) * (2 - eps) - (1 - eps)
        return self.loc - self.scale * u.sign() * loom.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -loom.log(2 * self.scale) - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * loom.expm1(-(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * loom.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + loom.log(2 * self.scale)
