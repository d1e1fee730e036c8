// The derivatives of the LAPACK primitives (lazy/ops_lapack.cpp), written in loom ops like every
// other derivative (so they record lazily and differentiate again), with the values each reads.
// The formulas are the standard matrix-calculus ones PyTorch 1.13 uses, so gradients agree with
// torch's (tests/python/test_linalg_lapack.py checks both against finite differences).
#include "lazy/derivatives.h"
#include "lazy/ops_linalg.h"
#include "lazy/ops_movement.h"

namespace loom {
namespace {

using namespace derivative;
using ops::matmul;
using ops::mul;

Tensor mT(const Tensor& x) { return ops::transpose(x, -2, -1); }
Tensor neg(const Tensor& x) { return ops::unary(OpId::Neg, x); }
Tensor expand_last2(const Tensor& x) { return ops::unsqueeze(ops::unsqueeze(x, -1), -1); }

// A^{-1} without raising (a derivative of a singular input gives inf / NaN, not an error).
Tensor inverse_no_raise(const Tensor& a) { return ops::linalg_inv_ex(a, false).first; }

// L = chol(A) (attrs [upper, mode]; the result read). With L lower (U^T for upper) and gL
// likewise: P = tril(L^T gL), S = (P + tril(P, -1)^T) / 2 (symmetric, half of P's diagonal),
// gA = L^{-T} S L^{-1}.
DERIVATIVE(LinalgCholeskyEx) {
  bool upper = c.attrs[0] != 0;
  Tensor l = upper ? mT(result(c)) : result(c);
  Tensor gl = upper ? mT(c.grad) : c.grad;
  Tensor p = ops::tril(matmul(mT(l), gl));
  Tensor s = mul(ops::add(p, mT(ops::tril(p, -1))), Scalar(0.5));
  Tensor left = ops::linalg_solve_triangular(mT(l), s, /*upper=*/true, /*left=*/true);
  g[0] = ops::linalg_solve_triangular(l, left, /*upper=*/false, /*left=*/false);
}

// X = A^{-1} B (attrs [mode, inverse]; A and X read): gB = A^{-T} g, gA = -gB X^T. For the
// inverse (B = I, no gradient) that is -X^T g X^T.
DERIVATIVE(LinalgSolveEx) {
  const Tensor& a = saved(c, 0);
  Tensor gb = ops::linalg_solve(mT(a), c.grad);
  if (c.needs_grad[1]) g[1] = gb;
  if (c.needs_grad[0]) g[0] = neg(matmul(gb, mT(result(c))));
}

// X = A^{-1} B with A triangular (attrs [upper, unitriangular, legacy]): gB = A^{-T} g (the
// other triangle), gA = -gB X^T kept to A's triangle (without the diagonal when unitriangular).
DERIVATIVE(LinalgSolveTriangular) {
  bool upper = c.attrs[0] != 0, unit = c.attrs[1] != 0;
  const Tensor& a = saved(c, 0);
  Tensor gb = ops::linalg_solve_triangular(mT(a), c.grad, !upper, true, unit);
  if (c.needs_grad[1]) g[1] = gb;
  if (c.needs_grad[0]) {
    Tensor ga = neg(matmul(gb, mT(result(c))));
    g[0] = upper ? ops::triu(ga, unit ? 1 : 0) : ops::tril(ga, unit ? -1 : 0);
  }
}

// det: gA = g det A^{-T}; slogdet (attrs [1], result [..., 2] = (sign, logabsdet)): the sign has
// no gradient, gA = g_logabsdet A^{-T}.
DERIVATIVE(LinalgDet) {
  Tensor inv_t = mT(inverse_no_raise(saved(c, 0)));
  Tensor scale = c.attrs[0] ? ops::select(c.grad, -1, 1) : mul(c.grad, result(c));
  g[0] = mul(expand_last2(scale), inv_t);
}

// eigh (result [..., n + 1, n]: the eigenvalues w, then the eigenvectors V): with gw, gV the
// gradient's parts, gA = V (diag(gw) + skew(V^T gV) / E) V^T, E_ij = w_j - w_i off the diagonal
// (skew(X) = (X - X^T) / 2, zero on the diagonal).
DERIVATIVE(LinalgEigh) {
  const Tensor& packed = result(c);
  int64_t n = packed->sizes()[packed->ndim() - 1];
  Tensor w = ops::select(packed, -2, 0), v = ops::narrow(packed, -2, 1, n);
  Tensor gw = ops::select(c.grad, -2, 0), gv = ops::narrow(c.grad, -2, 1, n);
  Tensor vtgv = matmul(mT(v), gv);
  Tensor skew = mul(ops::sub(vtgv, mT(vtgv)), Scalar(0.5));
  Tensor gaps = ops::sub(ops::unsqueeze(w, -2), ops::unsqueeze(w, -1));
  Tensor ones = ops::full(Dims{n}, Scalar(int64_t{1}), w->dtype(), placement_of(w));
  gaps = ops::add(gaps, ops::diag_embed(ones));  // 1 on the diagonal, where skew is 0
  Tensor inner = ops::add(ops::div(skew, gaps), ops::diag_embed(gw));
  g[0] = matmul(v, matmul(inner, mT(v)));
}

const bool registered = [] {
  define_backward(OpId::LinalgCholeskyEx, d_LinalgCholeskyEx, kResult);
  define_backward(OpId::LinalgSolveEx, d_LinalgSolveEx, {.inputs_for = {kIn0, kIn0}, .result_for = 1});
  define_backward(OpId::LinalgSolveTriangular, d_LinalgSolveTriangular, {.inputs_for = {kIn0, kIn0}, .result_for = 1});
  define_backward(OpId::LinalgEigh, d_LinalgEigh, kResult);
  define_backward(OpId::LinalgDet, d_LinalgDet, {.inputs_for = {kIn0}, .result_for = 1});
  return true;
}();

}  // namespace
}  // namespace loom
