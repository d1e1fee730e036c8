"""Parametrizations for register_parametrization, as torch.nn.utils.parametrizations:
weight_norm (the weight as a direction times a magnitude) and spectral_norm (the weight divided
by its largest singular value, estimated by power iteration). They replace the hook-based forms
of loom.nn.utils (weight_norm.py) that PyTorch deprecates. orthogonal is not here: it needs a
matrix exponential or a QR factorization, which loom does not compute."""

import loom
import loom.nn.functional as F
from loom.nn.modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from loom.nn.modules.module import Module
from loom.nn.utils import parametrize
from loom.nn.utils.weight_norm import _weight_norm, norm_except_dim


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """module.<name> = g * v / |v|, with g (original0) the norm over every dim but `dim` and v
    (original1) the direction, both trained."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    """weight / sigma, sigma = u . (W v) with u and v the leading singular vectors of W (the
    weight as a matrix, `dim` first), refined by n_power_iterations steps per training forward.
    A 1-d weight is normalized instead."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got n_power_iterations="
                             f"{n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            matrix = self._matrix(weight)
            h, w = matrix.shape
            u = F.normalize(loom.randn(h, dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
            v = F.normalize(loom.randn(w, dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
            self.register_buffer("_u", u)
            self.register_buffer("_v", v)
            self._power_method(matrix, 15)

    def _matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.dim()) if d != self.dim])
        return weight.flatten(1)

    @loom.no_grad()
    def _power_method(self, matrix, iterations):
        # In place, so the buffers keep their storage (and a lazy step's trace its inputs).
        for _ in range(iterations):
            self._u.copy_(F.normalize(loom.mv(matrix, self._v), dim=0, eps=self.eps))
            self._v.copy_(F.normalize(loom.mv(matrix.t(), self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.dim() == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        matrix = self._matrix(weight)
        if self.training:
            self._power_method(matrix, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = loom.dot(u, loom.mv(matrix, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """module.<name> divided by its spectral norm (see _SpectralNorm); dim defaults to 1 for
    transposed convolutions (their output channels), else 0."""
    weight = getattr(module, name, None)
    if not isinstance(weight, loom.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


__all__ = ["spectral_norm", "weight_norm"]
