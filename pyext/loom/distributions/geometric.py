"""Geometric(probs= | logits=): the number of failures before the first success of independent
Bernoulli(probs) trials, on {0, 1, 2, ...}."""

from functools import cached_property

import loom
from loom.distributions import constraints
from loom.distributions.distribution import (Distribution, as_size, batch_shape_of, broadcast_all,
                                             logits_to_probs, probs_to_logits)
from loom.nn import functional as F


class Geometric(Distribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        (param,) = broadcast_all(given)
        if probs is not None:
            self.probs = param
        else:
            self.logits = param
        super().__init__(batch_shape_of((given,), param), validate_args=validate_args)
        # probs = 0 is in the unit interval but gives no distribution (no success ever).
        if self._validate_args and probs is not None and self._should_check(param) and not bool((param > 0).all()):
            raise ValueError(f"Expected parameter probs ({type(param).__name__} of shape {tuple(param.shape)}) of "
                             f"distribution {self!r} to be positive but found invalid values:\n{param}")

    def expand(self, batch_shape, _instance=None):
        given = {k: self.__dict__[k].expand(batch_shape) for k in ("probs", "logits") if k in self.__dict__}
        return self._expanded(Geometric, batch_shape, _instance, **given)

    @cached_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @cached_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return loom.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()):
        shape = self._extended_shape(as_size(sample_shape))
        tiny = loom.finfo(self.probs.dtype).tiny
        with loom.no_grad():
            # Inversion: floor(log u / log(1 - p)), u in [tiny, 1) so that log u is finite.
            u = loom.rand(shape, dtype=self.probs.dtype, device=self.probs.device).clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # p = 1 puts all mass on 0: there 0 * log(0) must read 0, not NaN.
        probs = probs.masked_fill((probs == 1) & (value == 0), 0)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs
