"""Tensor methods written in Python over loom's ops (loom.Tensor is a C type: its entries in
pyext/tensor_methods.cpp forward here with the tensor first). Each records lazily and
differentiates through the ops it uses. Also the torch.* and torch.linalg forms of the same
functions."""

import loom
from loom import _argcheck


def fill_diagonal_(self, fill_value, wrap=False):
    """Writes fill_value on the main diagonal, in place: positions (i, i, ..., i) of a tensor whose
    dims are all equal, or (i, i) of a matrix; wrap=True continues a tall matrix's diagonal every
    columns + 1 rows, as numpy.fill_diagonal."""
    if self.dim() < 2:
        raise RuntimeError("dimensions must larger than 1")
    if self.dim() > 2 and len(set(self.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    numel = self.numel()
    if self.dim() == 2:
        rows, cols = self.shape
        step = cols + 1
        end = numel if wrap and rows > cols + 1 else min(rows, cols) * cols
    else:
        n = self.shape[0]
        step = sum(n ** k for k in range(self.dim()))
        end = numel
    positions = loom.arange(0, end, step, device=self.device)
    mask = loom.zeros(numel, dtype=loom.bool, device=self.device).index_fill_(0, positions, True)
    return self.masked_fill_(mask.reshape(self.shape), fill_value)


def sum_to_size(self, *size):
    """self summed down to `size`, which it must broadcast to (the gradient of a broadcast)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    lead = self.dim() - len(size)
    if lead < 0 or any(s not in (1, self.shape[lead + i]) for i, s in enumerate(size)):
        raise RuntimeError(f"size {{{', '.join(map(str, size))}}} is not expandable to size "
                           f"{{{', '.join(map(str, self.shape))}}}.")
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(size) if s == 1 and self.shape[lead + i] != 1)
    return (self.sum(dims, keepdim=True) if dims else self).reshape(size)


def matrix_power(self, n):
    """The n-th power of a square matrix (or a batch of them) by repeated squaring; n = 0 gives
    the identity; a negative n is the power of the inverse (linalg.inv: LinAlgError if singular)."""
    _argcheck.tensor("matrix_power", "input", self, 1)
    if self.dim() < 2 or self.shape[-1] != self.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{self.shape[-2] if self.dim() > 1 else 1} by {self.shape[-1] if self.dim() else 1} matrices")
    if n < 0:
        return matrix_power(loom.linalg.inv(self), -n)
    if n == 0:
        eye = loom.eye(self.shape[-1], dtype=self.dtype, device=self.device).expand(self.shape)
        # The identity, differentiable in A with a zero gradient as PyTorch's (where's derivative
        # to the operand it never picks), and never NaN where A is.
        return loom.where(loom.ones((), dtype=loom.bool, device=self.device), eye, self)
    result, base = None, self
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def mvlgamma(self, p):
    """The log of the multivariate gamma function of dimension p, elementwise. PyTorch requires
    every element to exceed (p - 1) / 2; that is checked where the values are at hand (not on a
    lazy device, where reading them would sync)."""
    _argcheck.tensor("mvlgamma", "input", self, 1)
    if self.device.type != "lazy" and self.numel() and not bool((self > (p - 1) / 2).all()):
        raise RuntimeError("All elements must be greater than (p-1)/2")
    return loom.special.multigammaln(self, p)


def mvlgamma_(self, p):
    return self.copy_(mvlgamma(self, p))


def share_memory_(self):
    """Moves the elements into memory shared with other processes (loom/multiprocessing)."""
    from loom.multiprocessing.tensor_sharing import share_memory_ as share
    return share(self)


def is_shared(self):
    """Whether the elements are in memory shared with other processes."""
    from loom.multiprocessing.tensor_sharing import is_shared as shared
    return shared(self)
