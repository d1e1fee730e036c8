"""Exponential(rate): waiting times of rate `rate`, with a reparameterized sample -log(u) / rate."""

import loom
from loom.distributions import constraints
from loom.distributions.distribution import Distribution, as_size, batch_shape_of, broadcast_all


class Exponential(Distribution):
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(batch_shape_of((rate,), self.rate), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(Exponential, batch_shape, _instance, rate=self.rate.expand(batch_shape))

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return loom.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(as_size(sample_shape))
        return loom.empty(shape, dtype=self.rate.dtype, device=self.rate.device).exponential_() / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - loom.exp(-self.rate * value)

    def icdf(self, value):
        return -loom.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - loom.log(self.rate)
