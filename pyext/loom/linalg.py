"""loom.linalg: torch.linalg's norms and products (in loom ops, so they record lazily, fuse and
differentiate), and its factorizations and solvers: LAPACK steps of the plan (lazy/ops_lapack.cpp,
Debian's liblapacke-dev), float32 and float64, batched over the leading dims, differentiable.
A singular or not positive-definite input raises LinAlgError (a RuntimeError), as PyTorch's; on a
lazy tensor when a result computed from it is read (a failed node of the sync: the rest of the
trace is computed). The SVD (gesdd), QR (geqrf / orgqr), LU (getrf / getrs) and least squares
(gels / gelsy / gelsd / gelss) are LAPACK steps too; pinv, matrix_rank, cond and the matrix norms
ord 'nuc', 2 and -2 are built on them."""

from loom import _C, _argcheck

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
svd = _C.linalg_svd
svdvals = _C.linalg_svdvals
qr = _C.linalg_qr
pinv = _C.linalg_pinv
matrix_rank = _C.linalg_matrix_rank
cond = _C.linalg_cond
lu_factor = _C.linalg_lu_factor
lu_factor_ex = _C.linalg_lu_factor_ex
lu = _C.linalg_lu
lu_solve = _C.linalg_lu_solve
lstsq = _C.linalg_lstsq
LinAlgError = _C._LinAlgError


def _removed(name, two_parts):
    """torch.<name>: removed in PyTorch 1.9 but still a name in 1.13, raising its RuntimeError (the text
    in two parts for lstsq and matrix_rank, as PyTorch raises it)."""
    first = "This function was deprecated since version 1.9 and is now removed."
    second = f"Please use the `torch.linalg.{name}` function instead."

    def removed(*args, **kwargs):
        if two_parts:
            raise RuntimeError(first, second)
        raise RuntimeError(f"{first} {second}")
    removed.__name__ = name
    return removed


def matrix_power(A, n):
    """A to the n-th power, n >= 0 (Tensor.matrix_power)."""
    _argcheck.tensor("linalg_matrix_power", "input", A, 1)
    return A.matrix_power(n)


__all__ = ["vector_norm", "matrix_norm", "norm", "multi_dot", "vecdot", "cross", "matrix_power", "cholesky",
           "cholesky_ex", "inv", "inv_ex", "solve", "solve_triangular", "det", "slogdet", "eigh", "eigvalsh", "svd", "svdvals", "qr",
           "pinv", "matrix_rank", "cond", "lu_factor", "lu_factor_ex", "lu", "lu_solve", "lstsq", "LinAlgError"]
