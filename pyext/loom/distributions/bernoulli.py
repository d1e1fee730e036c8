"""Bernoulli(probs= | logits=): one coin flip per batch element, given either parameter; the
other is computed on first use."""

from functools import cached_property

import loom
from loom.distributions import constraints
from loom.distributions.distribution import (Distribution, as_size, batch_shape_of, broadcast_all,
                                             logits_to_probs, probs_to_logits)
from loom.nn import functional as F


class Bernoulli(Distribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        (param,) = broadcast_all(given)
        if probs is not None:
            self.probs = param
        else:
            self.logits = param
        self._param = param
        super().__init__(batch_shape_of((given,), param), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        # The parameter given (probs or logits), and the other one too where it was computed.
        given = {k: self.__dict__[k].expand(batch_shape) for k in ("probs", "logits") if k in self.__dict__}
        return self._expanded(Bernoulli, batch_shape, _instance, _param=given.get("probs", given.get("logits")),
                              **given)

    @cached_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @cached_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.size()

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return mode.masked_fill(self.probs == 0.5, float("nan"))

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(as_size(sample_shape))
        with loom.no_grad():
            return loom.bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = loom.broadcast_tensors(self.logits, value.to(self.logits.dtype))
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = loom.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values
