"""RelaxedOneHotCategorical(temperature, probs= | logits=): the Concrete (Gumbel-softmax)
distribution on the simplex, a differentiable stand-in for a one-hot draw; ExpRelaxedCategorical
is its logarithm (what is sampled: softmax of (logits + Gumbel noise) / temperature, in log space)."""

import math

import loom
from loom.distributions import constraints
from loom.distributions.categorical import Categorical
from loom.distributions.distribution import Distribution, as_size, clamp_probs
from loom.distributions.relaxed_bernoulli import _as_tensor_like
from loom.distributions.transformed_distribution import TransformedDistribution
from loom.distributions.transforms import ExpTransform


class ExpRelaxedCategorical(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = _as_tensor_like(temperature, self._categorical._param)
        param_shape = self._categorical.param_shape
        super().__init__(self._categorical.batch_shape, param_shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(ExpRelaxedCategorical, batch_shape, _instance,
                              temperature=self.temperature, _categorical=self._categorical.expand(batch_shape))

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(as_size(sample_shape))
        u = clamp_probs(loom.rand(shape, dtype=self.logits.dtype, device=self.logits.device))
        gumbels = -((-(u.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = loom.broadcast_tensors(self.logits, value)
        # Normalizer: Gamma(K) * temperature^(K-1).
        log_scale = math.lgamma(k) + (k - 1) * self.temperature.log()
        score = logits - value.mul(self.temperature)
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(RelaxedOneHotCategorical, _instance))

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs
