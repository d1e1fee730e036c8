"""Beta(concentration1, concentration0) on [0, 1], with a reparameterized sample: a Dirichlet over
the pair (x, 1 - x), i.e. two gamma draws g1 / (g1 + g0)."""

import numbers

import loom
from loom.distributions import constraints
from loom.distributions.dirichlet import Dirichlet
from loom.distributions.distribution import as_size, broadcast_all
from loom.distributions.exp_family import ExponentialFamily


class Beta(ExponentialFamily):
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        if isinstance(concentration1, numbers.Real) and isinstance(concentration0, numbers.Real):
            pair = loom.tensor([float(concentration1), float(concentration0)], dtype=loom.get_default_dtype())
        else:
            c1, c0 = broadcast_all(concentration1, concentration0)
            pair = loom.stack([c1, c0], -1)
        self._dirichlet = Dirichlet(pair, validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(Beta, batch_shape, _instance, _dirichlet=self._dirichlet.expand(batch_shape))

    @property
    def concentration1(self):
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self):
        return self._dirichlet.concentration[..., 1]

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(as_size(sample_shape)).select(-1, 0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        pair = loom.stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(pair)

    def entropy(self):
        return self._dirichlet.entropy()

    @property
    def _natural_params(self):
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x, y):
        return loom.lgamma(x) + loom.lgamma(y) - loom.lgamma(x + y)

    def __repr__(self):
        return f"Beta(concentration1: {self.concentration1}, concentration0: {self.concentration0})"
