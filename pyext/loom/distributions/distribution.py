"""Distribution, the base of every family: shapes (batch_shape, event_shape), sample versus
rsample, argument checking, and the shared parameter conversions."""

import numbers

import loom
from loom.distributions import constraints

_default_validate_args = True


class Distribution:
    """A family sets arg_constraints ({parameter name: constraint}), support, and implements
    rsample (reparameterized, differentiable) or sample, log_prob, and what else it has."""

    has_rsample = False
    has_enumerate_support = False
    arg_constraints = {}
    support = None

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args expects True or False, got {value!r}")
        global _default_validate_args
        _default_validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = loom.Size(batch_shape)
        self._event_shape = loom.Size(event_shape)
        self._validate_args = _default_validate_args if validate_args is None else validate_args
        self._explicit_validation = validate_args is True
        if self._validate_args:
            for name, constraint in self.arg_constraints.items():
                if constraints.is_dependent(constraint) or name not in self.__dict__:
                    continue  # a parameter given in its other form (probs for logits), or lazily made
                value = getattr(self, name)
                if self._should_check(value) and not bool(constraint.check(value).all()):
                    raise ValueError(f"Expected parameter {name} ({type(value).__name__} of shape "
                                     f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                                     f"constraint {constraint!r}, but found invalid values:\n{value}")

    def _should_check(self, value):
        # Reading a lazy tensor's values forces a sync: only where the caller asked for checks.
        return self._explicit_validation or not (isinstance(value, loom.Tensor) and value.device.type == "lazy")

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def mean(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def expand(self, batch_shape, _instance=None):
        raise NotImplementedError(f"{type(self).__name__} does not implement expand")

    def sample(self, sample_shape=()):
        """A sample, or a batch of them, outside autograd (rsample's value where there is one)."""
        with loom.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sample (has_rsample is False)")

    def sample_n(self, n):
        return self.sample(loom.Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def icdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self):
        return loom.exp(self.entropy())

    def enumerate_support(self, expand=True):
        raise NotImplementedError(f"{type(self).__name__} does not implement enumerate_support")

    def _extended_shape(self, sample_shape=()):
        return loom.Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        """log_prob's and cdf's argument check: a tensor whose shape broadcasts with the batch and
        event shapes, inside the support."""
        if not isinstance(value, loom.Tensor):
            raise ValueError(f"The value argument to log_prob must be a Tensor, not {type(value).__name__}")
        event_dim = len(self._event_shape)
        if tuple(value.shape[value.dim() - event_dim:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {tuple(value.shape)} vs "
                             f"{tuple(self._event_shape)}.")
        actual, expected = value.shape, self.batch_shape + self.event_shape
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {tuple(actual)} vs "
                                 f"{tuple(expected)}.")
        support = self.support
        if support is None or constraints.is_dependent(support) or not self._should_check(value):
            return
        if not bool(support.check(value).all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be "
                             f"within the support ({support!r}) of the distribution {self!r}, but found invalid "
                             f"values:\n{value}")

    def _expanded(self, cls, batch_shape, _instance=None, **params):
        """expand()'s result: an instance of cls with `params` (the parameters already expanded to
        batch_shape) and this one's event shape and argument checking, checked no further."""
        new = self._get_checked_instance(cls, _instance)
        for name, value in params.items():
            setattr(new, name, value)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom "
                                      "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{k}: {self.__dict__[k] if self.__dict__[k].numel() == 1 else self.__dict__[k].size()}"
                         for k in names)
        return f"{type(self).__name__}({args})"


class LocationScale(Distribution):
    """A family of loc + scale * X for one standard variable X (Normal's, Laplace's): the shared
    parameters, their checks and broadcasting, and the moments that are loc."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(batch_shape_of((loc, scale), self.loc), validate_args=validate_args)

    def _expand_as(self, cls, batch_shape, _instance):
        return self._expanded(cls, batch_shape, _instance, loc=self.loc.expand(batch_shape),
                              scale=self.scale.expand(batch_shape))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc


def batch_shape_of(given, tensor):
    """The batch shape of a family whose parameters were `given` and broadcast to `tensor`: () when
    every one was a Python number, as PyTorch has it."""
    return () if all(isinstance(v, numbers.Number) for v in given) else tensor.size()


def broadcast_all(*values):
    """The arguments as tensors of one shape: numbers become tensors of the first tensor's dtype and
    device (the default dtype on the CPU where there is none)."""
    first = next((v for v in values if isinstance(v, loom.Tensor)), None)
    for v in values:
        if not isinstance(v, (loom.Tensor, numbers.Number)):
            raise ValueError(f"Input arguments must all be instances of numbers.Number or Tensor, not "
                             f"{type(v).__name__}")
    options = dict(dtype=first.dtype, device=first.device) if first is not None else \
        dict(dtype=loom.get_default_dtype())
    tensors = [v if isinstance(v, loom.Tensor) else loom.tensor(v, **options) for v in values]
    return loom.broadcast_tensors(*tensors)


def clamp_probs(probs):
    eps = loom.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    return loom.sigmoid(logits) if is_binary else loom.softmax(logits, dim=-1)


def probs_to_logits(probs, is_binary=False):
    p = clamp_probs(probs)
    return loom.log(p) - loom.log1p(-p) if is_binary else loom.log(p)


def as_size(sample_shape):
    return loom.Size(sample_shape) if not isinstance(sample_shape, numbers.Integral) else loom.Size((sample_shape,))

