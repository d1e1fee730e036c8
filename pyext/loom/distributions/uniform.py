"""Uniform(low, high): the half-open interval [low, high), with a reparameterized sample."""

import loom
from loom.distributions import constraints
from loom.distributions.distribution import Distribution, as_size, batch_shape_of, broadcast_all


class Uniform(Distribution):
    arg_constraints = {"low": constraints.dependent, "high": constraints.dependent}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(batch_shape_of((low, high), self.low), validate_args=validate_args)
        if self._validate_args and self._should_check(self.low) and not bool((self.low < self.high).all()):
            raise ValueError(f"Expected parameter low ({tuple(self.low.shape)}) of distribution {self!r} to be "
                             f"less than high everywhere, but found invalid values:\nlow={self.low}\nhigh={self.high}")

    def expand(self, batch_shape, _instance=None):
        return self._expanded(Uniform, batch_shape, _instance,
                              low=self.low.expand(batch_shape), high=self.high.expand(batch_shape))

    @property
    def support(self):
        return constraints.half_open_interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return loom.full_like(self.low, float("nan"))

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(as_size(sample_shape))
        u = loom.rand(shape, dtype=self.low.dtype, device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = ((self.low <= value) & (value < self.high)).to(self.low.dtype)
        return loom.log(inside) - loom.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return loom.log(self.high - self.low)
