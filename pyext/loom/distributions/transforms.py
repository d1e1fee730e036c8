"""Transforms: invertible maps y = t(x) with the log |det J| of their Jacobian, as
torch.distributions.transforms. TransformedDistribution pushes a base distribution through them
(a logistic distribution is a Uniform through SigmoidTransform().inv, a log-normal a Normal through
ExpTransform()).

A transform knows its domain and codomain (constraints, whose event_dim says how many rightmost
dimensions one event spans), whether it is bijective, the sign of its derivative where it is
monotone, and caches its last (x, y) pair when cache_size=1 so that inverting a value it produced
returns the exact input (the inverse of a clamped sigmoid is not). Everything is composed of loom's
ops, so transforms record on the lazy device and differentiate like any other arithmetic."""

import math
import numbers
import weakref

import loom
from loom.distributions import constraints

__all__ = ["AbsTransform", "AffineTransform", "ComposeTransform", "ExpTransform", "IndependentTransform",
           "PowerTransform", "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform", "TanhTransform",
           "Transform", "identity_transform"]


def _softplus(x):
    return loom.nn.functional.softplus(x)  # looked up when called: loom.nn loads after distributions


def _sum_rightmost(value, dim):
    """value summed over its `dim` rightmost dimensions (none where dim is 0)."""
    if dim == 0:
        return value
    return value.reshape(value.shape[:value.dim() - dim] + (-1,)).sum(-1)


class Transform:
    """The base: a subclass implements _call (x -> y), _inverse (y -> x) and
    log_abs_det_jacobian(x, y), and sets domain, codomain, bijective and sign as they apply."""

    bijective = False
    domain = constraints.real
    codomain = constraints.real

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._inv = None
        self._cached_x_y = (None, None)

    @property
    def event_dim(self):
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self):
        """The inverse transform (t.inv.inv is t), kept weakly so the pair do not hold each other."""
        inv = self._inv() if self._inv is not None else None
        if inv is None:
            inv = _InverseTransform(self)
            self._inv = weakref.ref(inv)
        return inv

    @property
    def sign(self):
        raise NotImplementedError(f"{type(self).__name__} has no sign (not monotone)")

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x):
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y):
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def forward_shape(self, shape):
        """The shape of t(x) for an x of this shape."""
        return shape

    def inverse_shape(self, shape):
        return shape

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    """t.inv: calling it inverts t, its log |det J| at (x, y) is minus t's at (y, x)."""

    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @property
    def domain(self):
        return self._inv.codomain

    @property
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self):
        return self._inv.bijective

    @property
    def sign(self):
        return self._inv.sign

    @property
    def inv(self):
        return self._inv

    def with_cache(self, cache_size=1):
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

    def __repr__(self):
        return f"{type(self).__name__}({self._inv!r})"

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """parts applied in order: y = parts[-1](...parts[0](x)); the log |det J| terms are summed
    over the event dimensions each part leaves."""

    def __init__(self, parts, cache_size=0):
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    @property
    def domain(self):
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @property
    def codomain(self):
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    @property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    @property
    def sign(self):
        sign = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self):
        inv = self._inv() if self._inv is not None else None
        if inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv = weakref.ref(inv)
            inv._inv = weakref.ref(self)
        return inv

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return loom.zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        terms = []
        event_dim = self.domain.event_dim
        for part, a, b in zip(self.parts, xs[:-1], xs[1:]):
            terms.append(_sum_rightmost(part.log_abs_det_jacobian(a, b), event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        return total

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    def __repr__(self):
        inner = ",\n    ".join(repr(p) for p in self.parts)
        return f"{type(self).__name__}(\n    {inner}\n)"


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """base_transform with its `reinterpreted_batch_ndims` rightmost batch dimensions made part of
    one event: its log |det J| is summed over them."""

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size)

    @property
    def domain(self):
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @property
    def codomain(self):
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        if x.dim() < self.domain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.dim() < self.codomain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)

    def __repr__(self):
        return f"{type(self).__name__}({self.base_transform!r}, {self.reinterpreted_batch_ndims})"


class ExpTransform(Transform):
    """y = exp(x)."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, ExpTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x  # d exp(x)/dx = exp(x), whose log is x


class PowerTransform(Transform):
    """y = x ** exponent on positive x."""

    domain = constraints.positive
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.exponent = exponent

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    def __eq__(self, other):
        if not isinstance(other, PowerTransform):
            return False
        same = self.exponent == other.exponent
        return bool(same.all()) if isinstance(same, loom.Tensor) else bool(same)

    __hash__ = object.__hash__

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        # |d x^p / dx| = |p| x^(p-1) = |p y / x|
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return loom.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))

    def inverse_shape(self, shape):
        return loom.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))


def _clipped_sigmoid(x):
    # sigmoid kept strictly inside (0, 1) in x's dtype, so that its inverse (a logit) is finite.
    info = loom.finfo(x.dtype)
    return loom.clamp(loom.sigmoid(x), min=info.tiny, max=1.0 - info.eps)


class SigmoidTransform(Transform):
    """y = sigmoid(x), clipped to the open unit interval; its inverse is the logit."""

    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SigmoidTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return _clipped_sigmoid(x)

    def _inverse(self, y):
        info = loom.finfo(y.dtype)
        y = y.clamp(min=info.tiny, max=1.0 - info.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        # sigmoid'(x) = sigmoid(x) sigmoid(-x); log of each is -softplus(-x), -softplus(x).
        return -_softplus(-x) - _softplus(x)


class SoftplusTransform(Transform):
    """y = log(1 + exp(x)) on the reals, onto the positive reals."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SoftplusTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return _softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y  # log(exp(y) - 1), kept finite for large y

    def log_abs_det_jacobian(self, x, y):
        return -_softplus(-x)  # d softplus / dx = sigmoid(x)


class TanhTransform(Transform):
    """y = tanh(x) onto (-1, 1)."""

    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, TanhTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return loom.atanh(y)  # not clipped: a cache_size=1 transform returns the exact x instead

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) = 2 (log 2 - x - softplus(-2x)), stable for large |x|
        return 2.0 * (math.log(2.0) - x - _softplus(-2.0 * x))


class AbsTransform(Transform):
    """y = |x|: not bijective (no log |det J|); its inverse picks the non-negative root."""

    domain = constraints.real
    codomain = constraints.positive

    def __eq__(self, other):
        return isinstance(other, AbsTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class AffineTransform(Transform):
    """y = loc + scale * x, elementwise or (event_dim > 0) over events of that many dimensions."""

    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @property
    def domain(self):
        return constraints.real if self._event_dim == 0 else constraints.independent(constraints.real,
                                                                                    self._event_dim)

    @property
    def codomain(self):
        return self.domain

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self._event_dim, cache_size=cache_size)

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        for mine, theirs in ((self.loc, other.loc), (self.scale, other.scale)):
            same = mine == theirs
            if not (bool(same.all()) if isinstance(same, loom.Tensor) else bool(same)):
                return False
        return True

    __hash__ = object.__hash__

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Real):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        scale = self.scale
        if isinstance(scale, numbers.Real):
            result = loom.full_like(x, math.log(abs(scale)))
        else:
            result = scale.abs().log()
        if self._event_dim:
            result = _sum_rightmost(result, self._event_dim)
            shape = x.shape[:x.dim() - self._event_dim]
            result = result.expand(shape)
        return result

    def forward_shape(self, shape):
        return loom.broadcast_shapes(shape, getattr(self.loc, "shape", ()), getattr(self.scale, "shape", ()))

    def inverse_shape(self, shape):
        return loom.broadcast_shapes(shape, getattr(self.loc, "shape", ()), getattr(self.scale, "shape", ()))


class SoftmaxTransform(Transform):
    """x -> softmax(x) over the last dimension, onto the simplex: not bijective (a constant added to
    x does not change y), so no log |det J|; its inverse is the log, one of the preimages."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other):
        return isinstance(other, SoftmaxTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        logprobs = x
        probs = (logprobs - logprobs.max(-1, True)[0]).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y):
        return y.log()

