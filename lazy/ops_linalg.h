// The linear-algebra family of the op library (PyTorch's names and semantics): einsum and the
// products and norms built on matrix products and reductions.
//
// Every op here is a composite: contractions become permutes, views and MatMul (OpenBLAS on the
// CPU, cuBLAS on a GPU), the rest elementwise ops and reductions that fuse; so both modes and
// autograd come with them.
#pragma once

#include <tuple>
#include <string_view>
#include <vector>

#include "lazy/ops.h"

namespace loom::ops {

// Einstein summation over `operands` (lazy/einsum.cpp): any equation PyTorch accepts (ellipsis,
// implicit output, labels repeated within an operand for diagonals and traces, size-1 dims
// broadcast). Operands contract pairwise, greedily picking the pair whose result is smallest.
Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands);

// tensordot: a's dims `dims_a` contracted with b's `dims_b`, in order.
Tensor tensordot(const Tensor& a, const Tensor& b, IntSpan dims_a, IntSpan dims_b);
// tensordot(a, b, dims=n): a's last n dims with b's first n.
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t n);
Tensor kron(const Tensor& a, const Tensor& b);
Tensor outer(const Tensor& a, const Tensor& b);
Tensor inner(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b, const char* name = "dot");
Tensor mv(const Tensor& m, const Tensor& v);
// beta * input + alpha * (the product), as PyTorch's add* products: with beta 0 input is ignored
// (its NaNs do not propagate). addmm is declared in lazy/ops.h.
Tensor addbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, Scalar beta, Scalar alpha);
Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, Scalar beta, Scalar alpha);
Tensor addmv(const Tensor& input, const Tensor& m, const Tensor& v, Scalar beta, Scalar alpha);
Tensor addr(const Tensor& input, const Tensor& v1, const Tensor& v2, Scalar beta, Scalar alpha);
// The product of the matrices in the cheapest order (dynamic programming over the chain); the
// first and the last may be vectors (linalg.multi_dot). `name` words the errors.
Tensor multi_dot(const std::vector<Tensor>& xs, const char* name = "multi_dot");

// linalg.vector_norm: ord any number (inf, -inf, 0 included).
Tensor vector_norm(const Tensor& x, double ord, const DimList& dims, bool keepdim, std::optional<DType> dtype);
// linalg.matrix_norm over the two dims: ord "fro", or 1, -1, inf, -inf as a number. "nuc", 2 and
// -2 need singular values, which loom does not compute: NotImplementedError.
Tensor matrix_norm(const Tensor& x, std::string_view ord, double number_ord, IntSpan dims, bool keepdim,
                   std::optional<DType> dtype);
// cdist: distances between the rows of x1 [..., P, M] and of x2 [..., R, M]: [..., P, R].
// compute_mode: 0 = use matrix products for p = 2 when P or R > 25, 1 = always, 2 = never.
Tensor cdist(const Tensor& x1, const Tensor& x2, double p, int64_t compute_mode);
// cosine_similarity: the dot product of x1 and x2 (broadcast) along dim over the product of their
// 2-norms, each at least eps.
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// pairwise_distance: the p-norm of x1 - x2 + eps over the last dim.
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2, double eps = 1e-6, bool keepdim = false);
// linalg.vecdot: sum(x * y) over dim (real dtypes: no conjugate).
Tensor vecdot(const Tensor& x, const Tensor& y, int64_t dim);

// ---- factorizations and solvers: LAPACK steps (lazy/ops_lapack.cpp, Note [LAPACK steps]) ----
// float32 / float64 matrices batched over the leading dims; PyTorch 1.13's checks and texts. A
// singular or not positive-definite input raises ErrorKind::LinAlg where PyTorch raises
// LinAlgError (lazy: when a result computed from it is read).

// linalg.cholesky (legacy: torch.cholesky's texts and grad_fn); the factor of A's lower triangle.
Tensor linalg_cholesky(const Tensor& a, bool upper, bool legacy = false);
// linalg.cholesky_ex: (L, info), info int32 per matrix (0, or the order of the failing minor).
std::pair<Tensor, Tensor> linalg_cholesky_ex(const Tensor& a, bool upper, bool check_errors);
// linalg.inv (legacy: torch.inverse's texts) and linalg.inv_ex: (inverse, info).
Tensor linalg_inv(const Tensor& a, bool legacy = false);
std::pair<Tensor, Tensor> linalg_inv_ex(const Tensor& a, bool check_errors);
// linalg.solve: X with A X = B (left) or X A = B; B a vector or a batch of matrices, broadcast.
Tensor linalg_solve(const Tensor& a, const Tensor& b, bool left = true);
// linalg.solve_triangular: A read from its upper or lower triangle (unit diagonal if asked).
Tensor linalg_solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left = true,
                               bool unitriangular = false);
// torch.triangular_solve(b, A, upper, transpose, unitriangular): (solution, cloned_coefficient).
std::pair<Tensor, Tensor> triangular_solve(const Tensor& b, const Tensor& a, bool upper, bool transpose,
                                           bool unitriangular);
// torch.cholesky_solve(B, L, upper): X with (L L^T) X = B (U^T U with upper); cholesky_inverse.
Tensor cholesky_solve(const Tensor& b, const Tensor& l, bool upper);
Tensor cholesky_inverse(const Tensor& l, bool upper);
// linalg.det, linalg.slogdet (sign, logabsdet), torch.logdet (NaN for a negative determinant).
Tensor linalg_det(const Tensor& a);
std::pair<Tensor, Tensor> linalg_slogdet(const Tensor& a);
Tensor logdet(const Tensor& a);
// linalg.eigh (eigenvalues ascending, eigenvectors as columns; UPLO "L" or "U") and eigvalsh.
std::pair<Tensor, Tensor> linalg_eigh(const Tensor& a, std::string_view uplo = "L");
Tensor linalg_eigvalsh(const Tensor& a, std::string_view uplo = "L");

// linalg.svd: (U, S, Vh), reduced unless full_matrices; linalg.svdvals (through the full SVD when
// A needs a gradient, as PyTorch's); torch.svd: (U, S, V), some = reduced, compute_uv false gives
// zero U and V of the full shapes.
std::tuple<Tensor, Tensor, Tensor> linalg_svd(const Tensor& a, bool full_matrices);
Tensor linalg_svdvals(const Tensor& a);
std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& a, bool some, bool compute_uv);
// linalg.qr: (Q, R); mode "reduced", "complete" or "r" (Q an empty tensor). `name` words errors.
std::pair<Tensor, Tensor> linalg_qr(const Tensor& a, std::string_view mode, const char* name = "linalg.qr");
// The tolerances of pinv and matrix_rank: absent values as PyTorch chooses them (rtol
// max(m, n) * eps when neither is given, 0 when only atol is).
struct Tolerances {
  std::optional<double> atol, rtol;
};
// linalg.pinv (hermitian: through eigh), linalg.matrix_rank (int64), linalg.cond (p None: 2).
Tensor linalg_pinv(const Tensor& a, Tolerances tol, bool hermitian);
Tensor linalg_matrix_rank(const Tensor& a, Tolerances tol, bool hermitian);
Tensor linalg_cond(const Tensor& a, std::string_view ord, std::optional<double> number_ord);
// linalg.lu_factor(_ex): (LU, pivots int32[, info]); linalg.lu: (P, L, U); linalg.lu_solve(LU,
// pivots, B, left, adjoint). pivot=False is refused on CPU, as PyTorch's.
std::pair<Tensor, Tensor> linalg_lu_factor(const Tensor& a, bool pivot, bool check_errors, const char* name);
std::tuple<Tensor, Tensor, Tensor> linalg_lu(const Tensor& a, bool pivot);
// getrf's info per matrix (int32): 0, or the first zero of U's diagonal (1-based).
Tensor linalg_lu_factor_ex_info(const Tensor& a);
Tensor linalg_lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool left, bool adjoint,
                       const char* name = "linalg.lu_solve");
// linalg.lstsq: (solution, residuals, rank, singular_values); driver "gels", "gelsy" (the
// default), "gelsd" or "gelss"; rcond absent: eps * max(m, n).
std::vector<Tensor> linalg_lstsq(const Tensor& a, const Tensor& b, std::optional<double> rcond,
                                 std::optional<std::string_view> driver);

}  // namespace loom::ops
