"""Normal(loc, scale): the Gaussian, with a reparameterized sample loc + scale * eps."""

import math

import loom
from loom.distributions.distribution import LocationScale, as_size


class Normal(LocationScale):
    def expand(self, batch_shape, _instance=None):
        return self._expand_as(Normal, batch_shape, _instance)

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale.pow(2)

    def sample(self, sample_shape=()):
        with loom.no_grad():
            shape = self._extended_shape(as_size(sample_shape))
            return loom.normal(self.loc.expand(shape), self.scale.expand(shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(as_size(sample_shape))
        eps = loom.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log() - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + loom.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * loom.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + loom.log(self.scale)
