"""loom.linalg: torch.linalg's norms and products (in loom ops, so they record lazily, fuse and
differentiate), and its factorizations and solvers: LAPACK steps of the plan (lazy/ops_lapack.cpp,
Debian's liblapacke-dev), float32 and float64, batched over the leading dims, differentiable.
A singular or not positive-definite input raises LinAlgError (a RuntimeError), as PyTorch's; on a
lazy tensor when a result computed from it is read (a failed node of the sync: the rest of the
trace is computed). Singular values are not computed yet, so matrix norms that need them
(ord 'nuc', 2, -2) raise NotImplementedError."""

from loom import _C

vector_norm = _C.linalg_vector_norm
matrix_norm = _C.linalg_matrix_norm
norm = _C.linalg_norm
multi_dot = _C.linalg_multi_dot
vecdot = _C.linalg_vecdot
cross = _C.linalg_cross

cholesky = _C.linalg_cholesky
cholesky_ex = _C.linalg_cholesky_ex
inv = _C.linalg_inv
inv_ex = _C.linalg_inv_ex
solve = _C.linalg_solve
solve_triangular = _C.linalg_solve_triangular
det = _C.linalg_det
slogdet = _C.linalg_slogdet
eigh = _C.linalg_eigh
eigvalsh = _C.linalg_eigvalsh
LinAlgError = _C._LinAlgError


def matrix_power(A, n):
    """A to the n-th power, n >= 0 (Tensor.matrix_power)."""
    return A.matrix_power(n)


__all__ = ["vector_norm", "matrix_norm", "norm", "multi_dot", "vecdot", "cross", "matrix_power", "cholesky",
           "cholesky_ex", "inv", "inv_ex", "solve", "solve_triangular", "det", "slogdet", "eigh", "eigvalsh", "LinAlgError"]
