"""RelaxedBernoulli(temperature, probs= | logits=): the binary Concrete distribution, a
differentiable stand-in for a coin flip on (0, 1) that approaches Bernoulli as temperature -> 0;
LogitRelaxedBernoulli is its logit (the sigmoid's argument)."""

from functools import cached_property

import loom
from loom.distributions import constraints
from loom.distributions.distribution import (Distribution, as_size, batch_shape_of, broadcast_all, clamp_probs,
                                             logits_to_probs, probs_to_logits)
from loom.distributions.transformed_distribution import TransformedDistribution
from loom.distributions.transforms import SigmoidTransform


def _as_tensor_like(value, like):
    return value if isinstance(value, loom.Tensor) else loom.tensor(value, dtype=like.dtype, device=like.device)


class LogitRelaxedBernoulli(Distribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        (param,) = broadcast_all(given)
        if probs is not None:
            self.probs = param
        else:
            self.logits = param
        self._param = param
        self.temperature = _as_tensor_like(temperature, param)
        super().__init__(batch_shape_of((given,), param), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        given = {k: self.__dict__[k].expand(batch_shape) for k in ("probs", "logits") if k in self.__dict__}
        return self._expanded(LogitRelaxedBernoulli, batch_shape, _instance, temperature=self.temperature,
                              _param=given.get("probs", given.get("logits")), **given)

    @cached_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @cached_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.size()

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(as_size(sample_shape))
        probs = clamp_probs(self.probs.expand(shape))
        u = clamp_probs(loom.rand(shape, dtype=probs.dtype, device=probs.device))
        # Logistic noise log u - log(1 - u) added to the logits, sharpened by the temperature.
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value.mul(self.temperature)
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(TransformedDistribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(RelaxedBernoulli, _instance))

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs
