"""Transforms, as torch.distributions.transforms: invertible (or at least differentiable) maps y = t(x)
with the log |det dy/dx| that TransformedDistribution needs to move a density through them.

Every transform states its domain and codomain (constraints; their event_dim says how many
rightmost dimensions one application acts on jointly), whether it is bijective, and the sign of
its derivative where it is monotone. t.inv is the inverse transform (same object on each read while
it lives); with cache_size=1 a transform remembers its last (x, y) pair, so that t.inv(t(x)) returns
x itself (no round trip through a lossy inverse, and autograd sees x).

Everything is composed of loom's ops: on device="lazy" the transforms join the step's trace."""

import math
import numbers
import weakref

import loom
from loom.distributions import constraints
from loom.nn import functional as F

__all__ = ["AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform", "CorrCholeskyTransform",
           "CumulativeDistributionTransform", "ExpTransform", "IndependentTransform", "LowerCholeskyTransform",
           "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftplusTransform", "TanhTransform",
           "SoftmaxTransform", "StackTransform", "StickBreakingTransform", "Transform", "identity_transform"]


def _sum_rightmost(value, dims):
    if dims <= 0:
        return value
    return value.reshape(tuple(value.shape[:value.dim() - dims]) + (-1,)).sum(-1)


def _clipped_sigmoid(x):
    # Kept inside (0, 1) so that the inverse (logit) and log-densities stay finite.
    info = loom.finfo(x.dtype)
    return loom.clamp(loom.sigmoid(x), min=info.tiny, max=1.0 - info.eps)


class Transform:
    """y = self(x), x = self.inv(y), and log_abs_det_jacobian(x, y). A subclass implements _call,
    _inverse (where invertible) and log_abs_det_jacobian, and sets domain, codomain, bijective."""

    bijective = False
    domain = constraints.real
    codomain = constraints.real

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached_x_y = None, None
        self._inv = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_inv"] = None  # a weak reference does not pickle; the inverse is rebuilt on use
        return state

    @property
    def event_dim(self):
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self):
        inv = self._inv() if self._inv is not None else None
        if inv is None:
            inv = _InverseTransform(self)
            self._inv = weakref.ref(inv)
        return inv

    @property
    def sign(self):
        raise NotImplementedError

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
        return shape

    def inverse_shape(self, shape):
        return shape

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    """t.inv: calls t's inverse, negates its log-determinant, swaps domain and codomain."""

    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform  # a strong reference: the inverse keeps its forward alive

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
    """parts applied in order; ComposeTransform([]) is the identity."""

    def __init__(self, parts, cache_size=0):
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    def _event_dims(self):
        """(domain event_dim, codomain event_dim) of the whole chain: each part acts on at least
        its own event dimensions, and the chain on the largest block any part needs."""
        if not self.parts:
            return 0, 0
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim = max(event_dim + part.domain.event_dim - part.codomain.event_dim, part.domain.event_dim)
        domain_dim = event_dim
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim = max(event_dim + part.codomain.event_dim - part.domain.event_dim, part.codomain.event_dim)
        return domain_dim, event_dim

    @constraints.dependent_property
    def domain(self):
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self._event_dims()[0]
        return constraints.independent(domain, event_dim - domain.event_dim) if event_dim > domain.event_dim \
            else domain

    @constraints.dependent_property
    def codomain(self):
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self._event_dims()[1]
        return constraints.independent(codomain, event_dim - codomain.event_dim) \
            if event_dim > codomain.event_dim else codomain

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
        return self if self._cache_size == cache_size else ComposeTransform(self.parts, cache_size=cache_size)

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
        total = 0
        event_dim = self.domain.event_dim
        for part, xi, yi in zip(self.parts, xs[:-1], xs[1:]):
            total = total + _sum_rightmost(part.log_abs_det_jacobian(xi, yi), event_dim - part.domain.event_dim)
            event_dim += part.codomain.event_dim - part.domain.event_dim
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
        return f"{type(self).__name__}(\n    " + ",\n    ".join(repr(p) for p in self.parts) + "\n)"


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """base_transform with its rightmost reinterpreted_batch_ndims dimensions made part of the
    event: the log-determinant sums over them."""

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size)

    @constraints.dependent_property
    def domain(self):
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @constraints.dependent_property
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


class ReshapeTransform(Transform):
    """Reshapes the rightmost dimensions from in_shape to out_shape (same number of elements)."""
    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape = loom.Size(in_shape)
        self.out_shape = loom.Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x):
        batch = tuple(x.shape[:x.dim() - len(self.in_shape)])
        return x.reshape(batch + tuple(self.out_shape))

    def _inverse(self, y):
        batch = tuple(y.shape[:y.dim() - len(self.out_shape)])
        return y.reshape(batch + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        batch = tuple(x.shape[:x.dim() - len(self.in_shape)])
        return x.new_zeros(batch)

    def _moved(self, shape, source, target):
        if len(shape) < len(source):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(source)
        if tuple(shape[cut:]) != tuple(source):
            raise ValueError(f"Shape mismatch: expected {tuple(shape[cut:])} but got {tuple(source)}")
        return tuple(shape[:cut]) + tuple(target)

    def forward_shape(self, shape):
        return self._moved(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._moved(shape, self.out_shape, self.in_shape)


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
        return x


class PowerTransform(Transform):
    """y = x ** exponent on the positive reals."""
    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        (self.exponent,) = _as_tensors(exponent)

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else PowerTransform(self.exponent, cache_size=cache_size)

    @property
    def sign(self):
        return self.exponent.sign()

    def __eq__(self, other):
        return isinstance(other, PowerTransform) and bool(self.exponent.eq(other.exponent).all())

    __hash__ = object.__hash__

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return loom.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))

    def inverse_shape(self, shape):
        return loom.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))


class SigmoidTransform(Transform):
    """y = sigmoid(x), kept strictly inside (0, 1)."""
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
        # log sigmoid(x) + log sigmoid(-x), written with softplus so that it is stable at both ends.
        return -F.softplus(-x) - F.softplus(x)


class SoftplusTransform(Transform):
    """y = log(1 + exp(x))."""
    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SoftplusTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return F.softplus(x)

    def _inverse(self, y):
        # x = log(exp(y) - 1) = y + log(1 - exp(-y)), finite for large y.
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x)


class TanhTransform(Transform):
    """y = tanh(x)."""
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
        # No clipping: a cached transform returns the exact x; a y of +-1 maps to +-inf.
        return loom.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) = 2 (log 2 - x - softplus(-2x)), which does not cancel for large |x|.
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class AbsTransform(Transform):
    """y = |x|; not invertible: inv(y) returns y (the nonnegative preimage)."""
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
    """y = loc + scale * x, acting on event_dim rightmost dimensions at once (their
    log-determinants summed)."""
    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return constraints.real if self.event_dim == 0 else constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return constraints.real if self.event_dim == 0 else constraints.independent(constraints.real, self.event_dim)

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
                if a != b:
                    return False
            elif not bool((a == b).all()):
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
        shape = x.shape
        scale = self.scale
        if isinstance(scale, numbers.Real):
            result = loom.full_like(x, math.log(abs(scale)))
        else:
            result = scale.abs().log()
        if self.event_dim:
            result = result.reshape(tuple(result.shape[:result.dim() - self.event_dim]) + (-1,)).sum(-1)
            shape = shape[:len(shape) - self.event_dim]
        return result.expand(shape)

    def forward_shape(self, shape):
        return loom.broadcast_shapes(shape, getattr(self.loc, "shape", ()), getattr(self.scale, "shape", ()))

    def inverse_shape(self, shape):
        return loom.broadcast_shapes(shape, getattr(self.loc, "shape", ()), getattr(self.scale, "shape", ()))


class CorrCholeskyTransform(Transform):
    """An unconstrained vector of D(D-1)/2 reals to the lower Cholesky factor of a D x D correlation
    matrix: tanh maps each entry into (-1, 1), then each row is built by stick-breaking so that it
    has unit norm with a positive diagonal."""
    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def __eq__(self, other):
        return isinstance(other, CorrCholeskyTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        x = loom.tanh(x)
        eps = loom.finfo(x.dtype).eps
        x = x.clamp(min=-1 + eps, max=1 - eps)
        r = _vec_to_tril_matrix(x, diag=-1)
        # Row i: y_ij = r_ij * prod_{k<j} sqrt(1 - r_ik^2), and y_ii the remaining length.
        remaining = (1 - r.pow(2)).sqrt().cumprod(-1)
        r = r + loom.eye(r.shape[-1], dtype=r.dtype, device=r.device)
        return r * F.pad(remaining[..., :-1], [1, 0], value=1)

    def _inverse(self, y):
        left = 1 - loom.cumsum(y * y, dim=-1)
        left_before = F.pad(left[..., :-1], [1, 0], value=1)
        t = _tril_matrix_to_vec(y, diag=-1) / _tril_matrix_to_vec(left_before, diag=-1).sqrt()
        return (t.log1p() - t.neg().log1p()) / 2

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        left = 1 - (y * y).cumsum(-1)
        stick_breaking = 0.5 * _tril_matrix_to_vec(left, diag=-2).log().sum(-1)
        tanh = -2 * (x + F.softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking + tanh

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattend lower-diagonal number")
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return tuple(shape[:-2]) + (d * (d - 1) // 2,)


def _tril_positions(n, diag):
    """Row-major flat positions (in an n x n matrix) of the entries on or below diagonal `diag`."""
    return [i * n + j for i in range(n) for j in range(n) if j - i <= diag]


def _vec_to_tril_matrix(vec, diag=0):
    """The entries of vec laid out, row by row, in the lower triangle (below diagonal `diag`) of
    a square matrix, zeros elsewhere: a gather from vec padded with one zero, so it is
    differentiable and fuses on lazy."""
    m = vec.shape[-1]
    n = round((-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * m) ** 0.5) / 2)
    positions = _tril_positions(n, diag)
    index = [m] * (n * n)
    for k, p in enumerate(positions):
        index[p] = k
    padded = F.pad(vec, [0, 1])
    gathered = padded.index_select(-1, loom.tensor(index, dtype=loom.long, device=vec.device))
    return gathered.reshape(tuple(vec.shape[:-1]) + (n, n))


def _tril_matrix_to_vec(mat, diag=0):
    n = mat.shape[-1]
    positions = loom.tensor(_tril_positions(n, diag), dtype=loom.long, device=mat.device)
    return mat.flatten(-2).index_select(-1, positions)


class SoftmaxTransform(Transform):
    """Real vectors to the simplex by softmax; not bijective (inv gives log y, one preimage)."""
    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other):
        return isinstance(other, SoftmaxTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        probs = (x - x.max(-1, keepdim=True)[0]).exp()
        return probs / probs.sum(-1, keepdim=True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape

    inverse_shape = forward_shape


class StickBreakingTransform(Transform):
    """Real vectors of length K-1 to the K-simplex, bijectively: each entry, shifted so that 0
    maps to the uniform point, is the sigmoid fraction broken off the stick that remains."""
    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def __eq__(self, other):
        return isinstance(other, StickBreakingTransform)

    __hash__ = object.__hash__

    @staticmethod
    def _offset_log(n, like):
        # log(K - k) for k = 1..K-1 (K = n + 1): the shift that makes x = 0 the uniform simplex point.
        return (n + 1 - loom.arange(1, n + 1, dtype=like.dtype, device=like.device)).log()

    def _call(self, x):
        z = _clipped_sigmoid(x - self._offset_log(x.shape[-1], x))
        remaining = (1 - z).cumprod(-1)
        return F.pad(z, [0, 1], value=1) * F.pad(remaining, [1, 0], value=1)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        n = y_crop.shape[-1]
        offset = n + 1 - loom.arange(1, n + 1, dtype=y.dtype, device=y.device)
        remaining = (1 - y_crop.cumsum(-1)).clamp(min=loom.finfo(y.dtype).tiny)
        return y_crop.log() - remaining.log() + offset.log()

    def log_abs_det_jacobian(self, x, y):
        x = x - self._offset_log(x.shape[-1], x)
        return (-x + F.logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class LowerCholeskyTransform(Transform):
    """Square matrices to lower-triangular ones with a positive diagonal: the strictly lower part
    kept, the diagonal exponentiated."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other):
        return isinstance(other, LowerCholeskyTransform)

    __hash__ = object.__hash__

    def _call(self, x):
        return x.tril(-1) + loom.diag_embed(x.diagonal(dim1=-2, dim2=-1).exp())

    def _inverse(self, y):
        return y.tril(-1) + loom.diag_embed(y.diagonal(dim1=-2, dim2=-1).log())


class CatTransform(Transform):
    """Transforms applied to consecutive slices (of lengths `lengths`) along dim, results concatenated."""

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise ValueError("CatTransform: one length per transform")
        self.dim = dim

    @property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self):
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _apply(self, x, direction):
        if not -x.dim() <= self.dim < x.dim() or x.size(self.dim) != self.length:
            raise ValueError(f"CatTransform expects size {self.length} along dim {self.dim}, got {tuple(x.shape)}")
        pieces, start = [], 0
        for t, length in zip(self.transforms, self.lengths):
            pieces.append(direction(t)(x.narrow(self.dim, start, length)))
            start += length
        return loom.cat(pieces, dim=self.dim)

    def _call(self, x):
        return self._apply(x, lambda t: t)

    def _inverse(self, y):
        return self._apply(y, lambda t: t.inv)

    def log_abs_det_jacobian(self, x, y):
        terms, start = [], 0
        for t, length in zip(self.transforms, self.lengths):
            term = t.log_abs_det_jacobian(x.narrow(self.dim, start, length), y.narrow(self.dim, start, length))
            if t.event_dim < self.event_dim:
                term = _sum_rightmost(term, self.event_dim - t.event_dim)
            terms.append(term)
            start += length
        dim = (self.dim - x.dim() if self.dim >= 0 else self.dim) + self.event_dim
        # Concatenated where dim is still a batch dimension of the log-determinant, else summed.
        return loom.cat(terms, dim=dim) if dim < 0 else sum(terms)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """Transform i applied to x.select(dim, i), results stacked along dim."""

    def __init__(self, tseq, dim=0, cache_size=0):
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else StackTransform(self.transforms, self.dim, cache_size)

    def _slices(self, z):
        if not -z.dim() <= self.dim < z.dim() or z.size(self.dim) != len(self.transforms):
            raise ValueError(f"StackTransform expects size {len(self.transforms)} along dim {self.dim}, "
                             f"got {tuple(z.shape)}")
        return [z.select(self.dim, i) for i in range(z.size(self.dim))]

    def _call(self, x):
        return loom.stack([t(s) for s, t in zip(self._slices(x), self.transforms)], dim=self.dim)

    def _inverse(self, y):
        return loom.stack([t.inv(s) for s, t in zip(self._slices(y), self.transforms)], dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        terms = [t.log_abs_det_jacobian(xs, ys)
                 for xs, ys, t in zip(self._slices(x), self._slices(y), self.transforms)]
        return loom.stack(terms, dim=self.dim)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x): the distribution's support to the unit interval; its
    log-determinant is the distribution's log-density."""
    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            CumulativeDistributionTransform(self.distribution, cache_size=cache_size)

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)


def _as_tensors(*values):
    first = next((v for v in values if isinstance(v, loom.Tensor)), None)
    options = dict(dtype=first.dtype, device=first.device) if first is not None else \
        dict(dtype=loom.get_default_dtype())
    return [v if isinstance(v, loom.Tensor) else loom.tensor(v, **options) for v in values]
