"""Categorical(probs= | logits=): one draw among K categories per batch element, and
OneHotCategorical, the same draw written as a one-hot vector. probs are normalized to sum to 1
over the last dimension and logits to log-probabilities (logsumexp 0)."""

from functools import cached_property

import loom
from loom.distributions import constraints
from loom.distributions.distribution import Distribution, as_size, logits_to_probs, probs_to_logits
from loom.nn import functional as F


class Categorical(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.dim() > 1 else loom.Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        param_shape = loom.Size(tuple(batch_shape) + (self._num_events,))
        given = {k: self.__dict__[k].expand(param_shape) for k in ("probs", "logits") if k in self.__dict__}
        return self._expanded(Categorical, batch_shape, _instance, _param=given.get("probs", given.get("logits")),
                              _num_events=self._num_events, **given)

    @property
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @cached_property
    def logits(self):
        return probs_to_logits(self.probs)

    @cached_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return self._param.size()

    @property
    def mean(self):
        return loom.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    @property
    def variance(self):
        return loom.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    def sample(self, sample_shape=()):
        sample_shape = as_size(sample_shape)
        with loom.no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            draws = loom.multinomial(probs_2d, sample_shape.numel(), replacement=True).T
            return draws.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = loom.broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        # Where a probability is 0 its logit is -inf; the term is 0, not NaN (0 * -inf).
        logits = self.logits.clamp(min=loom.finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = loom.arange(self._num_events, dtype=loom.long, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


class OneHotCategorical(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        param = self._categorical._param
        super().__init__(param.size()[:-1], param.size()[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expanded(OneHotCategorical, batch_shape, _instance,
                              _categorical=self._categorical.expand(batch_shape))

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        return F.one_hot(probs.argmax(dim=-1), probs.shape[-1]).to(probs.dtype)

    @property
    def variance(self):
        probs = self._categorical.probs
        return probs * (1 - probs)

    def sample(self, sample_shape=()):
        probs = self._categorical.probs
        indices = self._categorical.sample(as_size(sample_shape))
        return F.one_hot(indices, probs.shape[-1]).to(probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.max(-1)[1])

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self.event_shape[0]
        values = loom.eye(n, dtype=self._categorical._param.dtype, device=self._categorical._param.device)
        values = values.view((n,) + (1,) * len(self.batch_shape) + (n,))
        return values.expand((n,) + tuple(self.batch_shape) + (n,)) if expand else values
