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
    if not wrap and 0 in self.stride() and numel:
        return self.masked_fill_(_diagonal_in_memory(self), fill_value)
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


def _diagonal_in_memory(self):
    """Where an expanded tensor's elements share memory with its diagonal: the mask of the elements
    whose memory offset is one of the diagonal's (i * sum(strides), i < the shortest dim). PyTorch
    writes the diagonal through the tensor's strides, so every element sharing a diagonal
    element's memory shows the value; a mask by memory offset gives those elements one value each,
    whatever order the write visits them in."""
    offsets = loom.zeros(self.shape, dtype=loom.int64, device=self.device)
    for d, (size, stride) in enumerate(zip(self.shape, self.stride())):
        along = [1] * self.dim()
        along[d] = size
        offsets = offsets + (loom.arange(size, device=self.device) * stride).reshape(along)
    step = sum(self.stride())
    if step == 0:
        return offsets == 0
    return (offsets % step == 0) & (offsets // step < min(self.shape))


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


def polygamma(self, n):
    """torch.Tensor.polygamma: loom.polygamma(n, self)."""
    return loom.polygamma(n, self)


def polygamma_(self, n):
    return self.copy_(loom.polygamma(n, self))


def share_memory_(self):
    """Moves the elements into memory shared with other processes (loom/multiprocessing)."""
    from loom.multiprocessing.tensor_sharing import share_memory_ as share
    return share(self)


def is_shared(self):
    """Whether the elements are in memory shared with other processes."""
    from loom.multiprocessing.tensor_sharing import is_shared as shared
    return shared(self)


def resize_(self, *sizes, memory_format=None):
    """self gets the shape `sizes`, contiguous, in place (the same Python tensor): its first
    min(old, new) elements in order are kept and the rest are zeros (PyTorch leaves them
    uninitialized). loom gives self new memory when the shape changes, so a view of self made
    before no longer shares it. out= resizes its tensor so (loom/_out.py)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list, loom.Size)):
        sizes = tuple(sizes[0])
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in sizes):
        raise TypeError(f"resize_(): argument 'size' must be tuple of ints, but found element of type "
                        f"{next(type(s).__name__ for s in sizes if not isinstance(s, int) or isinstance(s, bool))}")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(sizes)}: {list(sizes)}")
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    if tuple(self.shape) == sizes:
        return self
    n = 1
    for s in sizes:
        n *= s
    with loom.no_grad():
        fresh = loom.zeros(sizes, dtype=self.dtype, device=self.device)
        keep = min(n, self.numel())
        if keep:
            fresh.view(-1)[:keep] = self.detach().reshape(-1)[:keep]
    self.data = fresh
    return self


def resize_as_(self, other, memory_format=None):
    """self resized (resize_) to other's shape."""
    return resize_(self, tuple(other.shape))
