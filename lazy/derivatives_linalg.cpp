// The derivatives of the LAPACK primitives (lazy/ops_lapack.cpp), written in loom ops like every
// other derivative (so they record lazily and differentiate again), with the values each reads.
// The formulas are the standard matrix-calculus ones PyTorch 1.13 uses, so gradients agree with
// torch's (tests/python/test_linalg_lapack.py checks both against finite differences).
#include "lazy/derivatives.h"
#include "lazy/dispatch.h"
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


// A part of a packed result or gradient (lazy/ops_lapack.cpp's unpack): `tail`'s elements from
// `offset` of the last dim as batch + tail.
Tensor part(const Tensor& packed, int64_t offset, std::initializer_list<int64_t> tail) {
  Dims shape(packed->sizes().begin(), packed->sizes().end() - 1);
  int64_t count = 1;
  for (int64_t d : tail) count *= d;
  for (int64_t d : tail) shape.push_back(d);
  return ops::reshape(ops::narrow(packed, -1, offset, count), shape);
}
Tensor eye_like(int64_t n, const Tensor& like) {
  return ops::diag_embed(ops::full(Dims{n}, Scalar(int64_t{1}), like->dtype(), placement_of(like)));
}

// SVD (attrs [full_matrices, 1]; result [..., m*ku + k + kv*n] = U, S, Vh). With U and V = Vh^T
// narrowed to their first k columns (full_matrices: the rest has no gradient that is defined,
// PyTorch narrows too), gU, gS, gV likewise, and F_ij = 1 / (s_j^2 - s_i^2) off the diagonal:
// gA = U [(F o (U^T gU - gU^T U)) S + diag(gS) + S (F o (V^T gV - gV^T V))] V^T
//      + (I - U U^T) gU S^{-1} V^T + U S^{-1} gV^T (I - V V^T)
// (the last two only for tall / wide A). Distinct, nonzero singular values, as PyTorch requires.
DERIVATIVE(LinalgSvd) {
  LOOM_CHECK(c.attrs[1] != 0, Runtime, "internal: the singular values alone (LinalgSvd without U, V) were differentiated");
  const Tensor& packed = result(c);
  int64_t m = c.shapes[0][c.shapes[0].size() - 2], n = c.shapes[0].back();
  int64_t k = std::min(m, n), ku = c.attrs[0] ? m : k, kv = c.attrs[0] ? n : k;
  Tensor u = ops::narrow(part(packed, 0, {m, ku}), -1, 0, k);
  Tensor s = part(packed, m * ku, {k});
  Tensor v = mT(ops::narrow(part(packed, m * ku + k, {kv, n}), -2, 0, k));
  Tensor gu = ops::narrow(part(c.grad, 0, {m, ku}), -1, 0, k);
  Tensor gs = part(c.grad, m * ku, {k});
  Tensor gv = mT(ops::narrow(part(c.grad, m * ku + k, {kv, n}), -2, 0, k));
  Tensor s2 = mul(s, s);
  Tensor diff = ops::sub(ops::unsqueeze(s2, -2), ops::unsqueeze(s2, -1));  // s_j^2 - s_i^2
  Tensor eye = eye_like(k, s);
  Tensor f = ops::where(ops::binary(OpId::Eq, eye, Scalar(int64_t{1})), Scalar(int64_t{0}),
                        ops::div(Scalar(1.0), ops::add(diff, eye)));
  Tensor utgu = matmul(mT(u), gu), vtgv = matmul(mT(v), gv);
  Tensor j = mul(f, ops::sub(utgu, mT(utgu))), kk = mul(f, ops::sub(vtgv, mT(vtgv)));
  Tensor inner = ops::add(ops::add(mul(j, ops::unsqueeze(s, -2)), mul(ops::unsqueeze(s, -1), kk)), ops::diag_embed(gs));
  Tensor ga = matmul(u, matmul(inner, mT(v)));
  Tensor sinv = ops::div(Scalar(1.0), s);
  if (m > k) {
    Tensor t = ops::sub(gu, matmul(u, utgu));
    ga = ops::add(ga, matmul(mul(t, ops::unsqueeze(sinv, -2)), mT(v)));
  }
  if (n > k) {
    Tensor t = ops::sub(gv, matmul(v, vtgv));
    ga = ops::add(ga, matmul(u, mul(ops::unsqueeze(sinv, -1), mT(t))));
  }
  g[0] = ga;
}

// QR (attrs [mode]; result [..., m*kq + kr*n] = Q, R). For m >= n (reduced, or complete square):
// with M = tril(Q^T gQ - gQ^T Q + R gR^T - gR R^T) (its diagonal is zero),
// gA = Q (gR + M R^{-T}) + (gQ - Q Q^T gQ) R^{-T}. For m < n, A = [X | Y] and R = [U | V] with
// U square: X = Q U is the square case with gQ + Y gV^T, and gY = Q gV (Y = Q V).
Tensor qr_square_or_tall(const Tensor& q, const Tensor& r, const Tensor& gq, const Tensor& gr) {
  Tensor qtgq = matmul(mT(q), gq), rgrt = matmul(r, mT(gr));
  Tensor mm = ops::tril(ops::add(ops::sub(qtgq, mT(qtgq)), ops::sub(rgrt, mT(rgrt))));
  // X R^{-T}: X = Y R^T solved as R Y^T = X^T, i.e. solve_triangular(R^T lower, right side).
  auto right_solve = [&](const Tensor& x) { return ops::linalg_solve_triangular(mT(r), x, false, false); };
  Tensor first = matmul(q, ops::add(gr, right_solve(mm)));
  Tensor second = right_solve(ops::sub(gq, matmul(q, qtgq)));
  return ops::add(first, second);
}

DERIVATIVE(LinalgQr) {
  int64_t mode = c.attrs[0];
  int64_t m = c.shapes[0][c.shapes[0].size() - 2], n = c.shapes[0].back(), k = std::min(m, n);
  LOOM_CHECK(mode != 2, Runtime,
             "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
             "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.");
  LOOM_CHECK(!(mode == 1 && m > n), Runtime,
             "The QR decomposition is not differentiable when mode='complete' and nrows > ncols.");
  int64_t kq = mode == 0 ? k : m, kr = mode == 1 ? m : k;
  const Tensor& packed = result(c);
  Tensor q = part(packed, 0, {m, kq}), r = part(packed, m * kq, {kr, n});
  Tensor gq = part(c.grad, 0, {m, kq}), gr = part(c.grad, m * kq, {kr, n});
  if (m >= n) {
    g[0] = qr_square_or_tall(q, r, gq, gr);
    return;
  }
  Tensor ru = ops::narrow(r, -1, 0, m), rv = ops::narrow(r, -1, m, n - m);
  Tensor gru = ops::narrow(gr, -1, 0, m), grv = ops::narrow(gr, -1, m, n - m);
  Tensor y = matmul(q, rv);
  Tensor gx = qr_square_or_tall(q, ru, ops::add(gq, matmul(y, mT(grv))), gru);
  g[0] = ops::cat({gx, matmul(q, grv)}, -1);
}

// X = op(A)^{-1} B with A = P L U held as LU (inputs LU, pivots as floats, B; attrs [trans]:
// op(A) = A^T). gB = op(A)^{-T} g (getrs the other way); gA_op = -gB X^T. LU's gradient: with
// W = P^T gA, gL = tril(W U^T, -1), gU = triu(L^T W), summed into one matrix as LU holds them.
// For trans 0, W = -(L^{-T} U^{-T} g) X^T (A^{-T} = P L^{-T} U^{-T}); for trans 1 (gA = -X gB^T),
// P^T X = L U A^{-1} X.
DERIVATIVE(LinalgLuSolve) {
  bool trans = c.attrs[0] != 0;
  const Tensor& lu = saved(c, 0);
  const Tensor& piv = saved(c, 1);
  Attrs other;
  other.push_back(!trans);
  Tensor gb = apply(OpId::LinalgLuSolve, {Arg(lu), Arg(piv), Arg(c.grad)}, other);
  if (c.needs_grad[2]) g[2] = gb;
  if (!c.needs_grad[0]) return;
  int64_t n = lu->sizes()[lu->ndim() - 1];
  Tensor l = ops::add(ops::tril(lu, -1), eye_like(n, lu)), u = ops::triu(lu);
  const Tensor& x = result(c);
  Tensor w;
  if (!trans) {
    Tensor z = ops::linalg_solve_triangular(mT(u), c.grad, /*upper=*/false);
    z = ops::linalg_solve_triangular(mT(l), z, /*upper=*/true, /*left=*/true, /*unitriangular=*/true);
    w = neg(matmul(z, mT(x)));
  } else {
    Attrs plain;
    plain.push_back(0);
    Tensor ainv_x = apply(OpId::LinalgLuSolve, {Arg(lu), Arg(piv), Arg(x)}, plain);
    w = neg(matmul(matmul(l, matmul(u, ainv_x)), mT(gb)));
  }
  g[0] = ops::add(ops::tril(matmul(w, mT(u)), -1), ops::triu(matmul(mT(l), w)));
}

// linalg.lu (attrs [1, 0]; result [..., m*m + m*k + k*n] = P, L, U) of square A: with
// N = tril(L^T gL, -1) + triu(gU U^T), gA = P L^{-T} N U^{-T} (from L^{-1} P^T dA U^{-1} =
// L^{-1} dL + dU U^{-1}, strictly lower plus upper). lu_factor's packed LU (attrs [0, ...]) has
// no derivative in loom yet.
DERIVATIVE(LinalgLu) {
  int64_t m = c.shapes[0][c.shapes[0].size() - 2], n = c.shapes[0].back();
  LOOM_CHECK(c.attrs[0] == 1, NotImplemented, "the derivative of linalg.lu_factor is not implemented in loom (linalg.lu's is)");
  LOOM_CHECK(m == n, NotImplemented, "the derivative of linalg.lu of non-square matrices is not implemented in loom");
  const Tensor& packed = result(c);
  Tensor p = part(packed, 0, {m, m}), l = part(packed, m * m, {m, m}), u = part(packed, 2 * m * m, {m, n});
  Tensor gl = part(c.grad, m * m, {m, m}), gu = part(c.grad, 2 * m * m, {m, n});
  Tensor nn = ops::add(ops::tril(matmul(mT(l), gl), -1), ops::triu(matmul(gu, mT(u))));
  Tensor z = ops::linalg_solve_triangular(mT(u), nn, /*upper=*/false, /*left=*/false);
  z = ops::linalg_solve_triangular(mT(l), z, /*upper=*/true, /*left=*/true, /*unitriangular=*/true);
  g[0] = matmul(p, z);
}

const bool registered = [] {
  define_backward(OpId::LinalgCholeskyEx, d_LinalgCholeskyEx, kResult);
  define_backward(OpId::LinalgSolveEx, d_LinalgSolveEx, {.inputs_for = {kIn0, kIn0}, .result_for = 1});
  define_backward(OpId::LinalgSolveTriangular, d_LinalgSolveTriangular, {.inputs_for = {kIn0, kIn0}, .result_for = 1});
  define_backward(OpId::LinalgEigh, d_LinalgEigh, kResult);
  define_backward(OpId::LinalgDet, d_LinalgDet, {.inputs_for = {kIn0}, .result_for = 1});
  define_backward(OpId::LinalgSvd, d_LinalgSvd, kResult);
  define_backward(OpId::LinalgQr, d_LinalgQr, kResult);
  define_backward(OpId::LinalgLu, d_LinalgLu, kResult);
  define_backward(OpId::LinalgLuSolve, d_LinalgLuSolve,
                  {.inputs_for = {kIn0 | kIn1, 0, kIn0 | kIn1}, .result_for = 1});
  return true;
}();

}  // namespace
}  // namespace loom
