"""HalfNormal(scale) and HalfCauchy(scale): |X| for X a Normal(0, scale) or a Cauchy(0, scale),
with reparameterized samples. The density doubles the base's on [0, inf) and is 0 below."""

import math

import loom
from loom.distributions import constraints
from loom.distributions.cauchy import Cauchy
from loom.distributions.normal import Normal
from loom.distributions.transformed_distribution import TransformedDistribution
from loom.distributions.transforms import AbsTransform


class _Folded(TransformedDistribution):
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mode(self):
        return loom.zeros_like(self.scale)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return log_prob.masked_fill(value < 0, -math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class HalfNormal(_Folded):
    def __init__(self, scale, validate_args=None):
        super().__init__(Normal(0, scale, validate_args=False), AbsTransform(), validate_args=validate_args)
        self._check_scale()

    def _check_scale(self):
        # Checked here, not by the base (whose loc the caller did not give), so the error names this family.
        scale = self.scale
        if self._validate_args and self._should_check(scale) and not bool(constraints.positive.check(scale).all()):
            raise ValueError(f"Expected parameter scale ({type(scale).__name__} of shape {tuple(scale.shape)}) of "
                             f"distribution {type(self).__name__} to satisfy the constraint GreaterThan(lower_bound="
                             f"0.0), but found invalid values:\n{scale}")

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(HalfNormal, _instance))

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)


class HalfCauchy(_Folded):
    def __init__(self, scale, validate_args=None):
        super().__init__(Cauchy(0, scale, validate_args=False), AbsTransform(), validate_args=validate_args)
        HalfNormal._check_scale(self)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(HalfCauchy, _instance))

    @property
    def mean(self):
        return loom.full(self._extended_shape(), math.inf, dtype=self.scale.dtype, device=self.scale.device)

    @property
    def variance(self):
        return loom.full(self._extended_shape(), math.inf, dtype=self.scale.dtype, device=self.scale.device)
