"""Constraints: what values a parameter or a sample may take, as torch.distributions.constraints.
check(value) returns a boolean tensor, True where value satisfies the constraint (reduced over
the constraint's event dimensions)."""

import math


class Constraint:
    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__.lstrip("_") + "()"


class _Real(Constraint):
    def check(self, value):
        return value == value  # False for NaN only


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value % 1 == 0) & (self.lower_bound <= value) & (value <= self.upper_bound)


class _NonnegativeInteger(Constraint):
    is_discrete = True

    def check(self, value):
        return (value % 1 == 0) & (value >= 0)


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return self.lower_bound < value


class _GreaterThanEq(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return self.lower_bound <= value


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)


class _HalfOpenInterval(_Interval):
    def check(self, value):
        return (self.lower_bound <= value) & (value < self.upper_bound)


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)


class _Independent(Constraint):
    """A base constraint whose rightmost `reinterpreted_batch_ndims` dimensions form one event."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        ok = self.base_constraint.check(value)
        for _ in range(self.reinterpreted_batch_ndims):
            ok = ok.all(-1)
        return ok


class _LowerCholesky(Constraint):
    """Lower-triangular square matrices with a positive diagonal (a Cholesky factor)."""
    event_dim = 2

    def check(self, value):
        lower = (value.tril() == value).flatten(-2).all(-1)
        return lower & (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)


class _PositiveDefinite(Constraint):
    """Symmetric positive-definite matrices: symmetric within tolerance, and their Cholesky
    factorization succeeds (linalg.cholesky_ex's info is 0)."""
    event_dim = 2

    def check(self, value):
        import loom
        symmetric = loom.isclose(value, value.mT, atol=1e-6).flatten(-2).all(-1)
        return symmetric & loom.linalg.cholesky_ex(value).info.eq(0)


class _Dependent(Constraint):
    """A support that depends on a distribution's parameters (Uniform's): it cannot be checked
    on its own. Called with is_discrete= / event_dim= it returns a copy that states them (as a
    transform's domain that depends on the transform's own parameters does)."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete, self._event_dim = is_discrete, event_dim

    @property
    def is_discrete(self):
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self):
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        return _Dependent(is_discrete=self._is_discrete if is_discrete is NotImplemented else is_discrete,
                          event_dim=self._event_dim if event_dim is NotImplemented else event_dim)

    def check(self, value):
        raise ValueError("cannot determine validity of a dependent constraint")


class _DependentProperty(property, _Dependent):
    """A property whose value is a constraint computed from the instance; read on the class it is
    the dependent constraint itself (so a class's support can be asked whether it is dependent)."""

    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        property.__init__(self, fn)
        _Dependent.__init__(self, is_discrete=is_discrete, event_dim=event_dim)

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound


class _Multinomial(Constraint):
    """Nonnegative integer vectors summing to at most upper_bound."""
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, x):
        return (x >= 0).all(dim=-1) & (x.sum(dim=-1) <= self.upper_bound)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        return (value.tril() == value).flatten(-2).all(-1)


class _CorrCholesky(Constraint):
    """Lower Cholesky factors of correlation matrices: lower-triangular, positive diagonal, rows
    of unit Euclidean norm."""
    event_dim = 2

    def check(self, value):
        import loom
        tol = loom.finfo(value.dtype).eps * value.size(-1) * 10
        row_norm = loom.linalg.norm(value.detach(), dim=-1)
        unit_rows = ((row_norm - 1.0).abs() <= tol).all(dim=-1)
        return lower_cholesky.check(value) & unit_rows


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        import loom
        return loom.full(value.shape[:-2], value.shape[-2] == value.shape[-1], dtype=loom.bool,
                         device=value.device)


class _Symmetric(_Square):
    def check(self, value):
        import loom
        if not bool(super().check(value).all()):
            return super().check(value)
        return loom.isclose(value, value.mT, atol=1e-6).all(-2).all(-1)


class _PositiveSemidefinite(_Symmetric):
    def check(self, value):
        import loom
        symmetric = super().check(value)
        if not bool(symmetric.all()):
            return symmetric
        return loom.linalg.eigvalsh(value).ge(0).all(-1)


class _Cat(Constraint):
    """Constraints applied to consecutive slices (of lengths `lengths`) along dim."""

    def __init__(self, cseq, dim=0, lengths=None):
        self.cseq = list(cseq)
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise ValueError("cat: one length per constraint")
        self.dim = dim

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        import loom
        if not -value.dim() <= self.dim < value.dim():
            raise ValueError(f"cat: dim {self.dim} out of range for a {value.dim()}-d value")
        checks, start = [], 0
        for constraint, length in zip(self.cseq, self.lengths):
            checks.append(constraint.check(value.narrow(self.dim, start, length)))
            start += length
        return loom.cat(checks, self.dim)


class _Stack(Constraint):
    """Constraints applied to the slices value.select(dim, i)."""

    def __init__(self, cseq, dim=0):
        self.cseq = list(cseq)
        self.dim = dim

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        dim = max(c.event_dim for c in self.cseq)
        return dim + 1 if self.dim + dim < 0 else dim

    def check(self, value):
        import loom
        if not -value.dim() <= self.dim < value.dim():
            raise ValueError(f"stack: dim {self.dim} out of range for a {value.dim()}-d value")
        return loom.stack([c.check(value.select(self.dim, i)) for i, c in enumerate(self.cseq)], self.dim)


real = _Real()
real_vector = _Independent(real, 1)
boolean = _Boolean()
nonnegative_integer = _NonnegativeInteger()
positive_integer = _IntegerInterval(1, math.inf)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()
one_hot = _OneHot()
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
dependent = _Dependent()
dependent_property = _DependentProperty
less_than = _LessThan
multinomial = _Multinomial
lower_triangular = _LowerTriangular()
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
cat = _Cat
stack = _Stack
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
interval = _Interval
half_open_interval = _HalfOpenInterval
integer_interval = _IntegerInterval
independent = _Independent


def is_dependent(constraint):
    return isinstance(constraint, _Dependent)


__all__ = ["Constraint", "boolean", "dependent", "greater_than", "greater_than_eq", "half_open_interval",
           "independent", "integer_interval", "interval", "is_dependent", "lower_cholesky", "nonnegative", "nonnegative_integer",
           "one_hot", "positive", "positive_definite", "positive_integer", "real", "real_vector", "simplex", "unit_interval",
           "cat", "corr_cholesky", "dependent_property", "less_than", "lower_triangular", "multinomial",
           "positive_semidefinite", "square", "stack", "symmetric"]
