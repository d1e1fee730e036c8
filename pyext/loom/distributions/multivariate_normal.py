"""MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril) and
LowRankMultivariateNormal(loc, cov_factor, cov_diag): Gaussians over vectors, as
torch.distributions has them.

Everything goes through the lower Cholesky factor L of the covariance (linalg.cholesky, a LAPACK
step): a sample is loc + L eps, log_prob solves L y = x - loc by substitution
(linalg.solve_triangular) and takes log det from L's diagonal, so nothing inverts a matrix, and
on device="lazy" all of it records into the step's trace without a sync. A covariance that is not
positive-definite raises linalg.cholesky's LinAlgError (on a lazy device when the values are
read, unless validate_args=True checks it at construction)."""

import math

import loom
from loom.distributions import constraints
from loom.distributions.distribution import Distribution


def _batch_mv(matrix, vector):
    """matrix [..., n, n] times vector [..., n], batch dims broadcast."""
    return (matrix @ vector.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(scale_tril, x):
    """|L^{-1} x|^2 over the last dim: the squared Mahalanobis distance of x for covariance L L^T."""
    y = loom.linalg.solve_triangular(scale_tril, x.unsqueeze(-1), upper=False).squeeze(-1)
    return y.pow(2).sum(-1)


def _precision_to_scale_tril(precision):
    """The lower Cholesky factor L of precision^{-1} without inverting a matrix. With J the
    reversal of rows and columns, J P J = F F^T (F = chol(J P J)) gives P = U U^T for the upper
    triangular U = J F J, so P^{-1} = U^{-T} U^{-1} and L = (U^T)^{-1}: one Cholesky factorization
    and one triangular solve against the identity."""
    flipped = loom.linalg.cholesky(loom.flip(precision, (-2, -1)))
    l_inv = loom.transpose(loom.flip(flipped, (-2, -1)), -2, -1)
    eye = loom.eye(precision.shape[-1], dtype=precision.dtype, device=precision.device)
    return loom.linalg.solve_triangular(l_inv, eye, upper=False)


class MultivariateNormal(Distribution):
    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        matrix = next(m for m in (scale_tril, covariance_matrix, precision_matrix) if m is not None)
        name = "scale_tril" if scale_tril is not None else \
            "covariance_matrix" if covariance_matrix is not None else "precision_matrix"
        if matrix.dim() < 2:
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch "
                             "dimensions")
        batch_shape = loom.broadcast_shapes(matrix.shape[:-2], loc.shape[:-1])
        event_shape = loc.shape[-1:]
        setattr(self, name, matrix.expand(batch_shape + (-1, -1)))
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = loom.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = loom.Size(batch_shape)
        matrix_shape = batch_shape + self.event_shape + self.event_shape
        new.loc = self.loc.expand(batch_shape + self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(matrix_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix(self, value):
        return value.expand(self._batch_shape + self._event_shape + self._event_shape)

    def __getattr__(self, name):
        # The parameterizations not given, computed from the factor when first asked for (PyTorch's
        # lazy_property): kept in the instance's __dict__ afterwards.
        if name == "scale_tril":
            value = self._matrix(self._unbroadcasted_scale_tril)
        elif name == "covariance_matrix":
            l = self._unbroadcasted_scale_tril
            value = self._matrix(l @ l.mT)
        elif name == "precision_matrix":
            value = self._matrix(loom.cholesky_inverse(self._unbroadcasted_scale_tril))
        else:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        self.__dict__[name] = value
        return value

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(loom.Size(sample_shape))
        eps = loom.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h.expand(self._batch_shape) if self._batch_shape else h

    def __repr__(self):
        return f"{type(self).__name__}(loc: {self.loc.size()}, {self._param_name()}: " \
               f"{self.__dict__[self._param_name()].size()})"

    def _param_name(self):
        return next(n for n in ("covariance_matrix", "precision_matrix", "scale_tril") if n in self.__dict__)


class LowRankMultivariateNormal(Distribution):
    """Covariance cov_factor cov_factor^T + diag(cov_diag): cov_factor [..., n, r], cov_diag [..., n].
    Computed through the r x r capacitance matrix I + W^T D^{-1} W (Woodbury and the matrix
    determinant lemma), so nothing n x n is factorized."""

    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if cov_factor.shape[-2:-1] != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if cov_diag.shape[-1:] != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {tuple(event_shape)}")
        loc_ = loc.unsqueeze(-1)
        cov_diag_ = cov_diag.unsqueeze(-1)
        try:
            loc_, self.cov_factor, cov_diag_ = loom.broadcast_tensors(loc_, cov_factor, cov_diag_)
        except RuntimeError as e:
            raise ValueError(f"Incompatible batch shapes: loc {tuple(loc.shape)}, cov_factor "
                             f"{tuple(cov_factor.shape)}, cov_diag {tuple(cov_diag.shape)}") from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        batch_shape = self.loc.shape[:-1]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = self._capacitance(cov_factor, cov_diag)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    @staticmethod
    def _capacitance(w, d):
        wt_dinv = w.mT / d.unsqueeze(-2)
        k = wt_dinv @ w
        k = k + loom.eye(w.shape[-1], dtype=w.dtype, device=w.device)
        return loom.linalg.cholesky(k)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = loom.Size(batch_shape)
        loc_shape = batch_shape + self.event_shape
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + self.cov_factor.shape[-1:])
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return (w.pow(2).sum(-1) + d).expand(self._batch_shape + self._event_shape)

    @property
    def covariance_matrix(self):
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        cov = w @ w.mT + loom.diag_embed(d)
        return cov.expand(self._batch_shape + self._event_shape + self._event_shape)

    @property
    def scale_tril(self):
        return loom.linalg.cholesky(self.covariance_matrix)

    @property
    def precision_matrix(self):
        # Woodbury: D^{-1} - D^{-1} W K^{-1} W^T D^{-1}, K = L_K L_K^T.
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        a = loom.linalg.solve_triangular(self._capacitance_tril, w.mT / d.unsqueeze(-2), upper=False)
        precision = loom.diag_embed(d.reciprocal()) - a.mT @ a
        return precision.expand(self._batch_shape + self._event_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(loom.Size(sample_shape))
        w_shape = shape[:-1] + self.cov_factor.shape[-1:]
        eps_w = loom.randn(w_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_d = loom.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_w) + \
            self._unbroadcasted_cov_diag.sqrt() * eps_d

    def _log_det(self):
        # det(W W^T + D) = det(K) det(D)
        return 2 * self._capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + \
            self._unbroadcasted_cov_diag.log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        # x^T (W W^T + D)^{-1} x = x^T D^{-1} x - |L_K^{-1} W^T D^{-1} x|^2
        wt_dinv_x = _batch_mv(w.mT, diff / d)
        m = (diff.pow(2) / d).sum(-1) - _batch_mahalanobis(self._capacitance_tril, wt_dinv_x)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m + self._log_det())

    def entropy(self):
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return h.expand(self._batch_shape) if self._batch_shape else h
