"""loom.linalg: the norms and products of torch.linalg that loom computes (in loom ops, so they
record lazily, fuse and differentiate). Decompositions and solvers are not here: loom computes no
singular values, so matrix norms that need them (ord 'nuc', 2, -2) raise NotImplementedError."""

from loom import _C

vector_norm = _C.linalg_vector_norm
matrix_norm = _C.linalg_matrix_norm
norm = _C.linalg_norm
multi_dot = _C.linalg_multi_dot
vecdot = _C.linalg_vecdot
cross = _C.linalg_cross


def matrix_power(A, n):
    """A to the n-th power, n >= 0 (Tensor.matrix_power)."""
    return A.matrix_power(n)


__all__ = ["vector_norm", "matrix_norm", "norm", "multi_dot", "vecdot", "cross", "matrix_power"]
