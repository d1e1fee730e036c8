// Definitions of the LAPACK primitives (Note [LAPACK steps]) and the composites of
// torch.linalg's factorizations and solvers built on them (lazy/ops_linalg.h).
//
// Note [LAPACK steps]
// Each primitive is a library step (OpClass::Other), as MatMul is: fusion leaves it alone, the
// CPU plan calls its run_cpu with the stored operands, and it runs LAPACK (Debian's
// liblapacke-dev: the C interface over liblapack3, which Debian points at OpenBLAS's LAPACK when
// OpenBLAS is installed) over the batch, one matrix at a time, float32 and float64. No result
// shape depends on the data, so none of them syncs (one exception: linalg.lstsq's residuals with
// the gelsd / gelss drivers exist only when every matrix has full rank, PyTorch's rule, so asking
// for them reads the ranks). A primitive with several results (eigh, svd, qr, lu, lstsq) packs
// them into one tensor, flat in the last dim, and the composites return views of its parts. An input LAPACK finds singular or not
// positive-definite raises PyTorch's LinAlgError text (ErrorKind::LinAlg, a RuntimeError) from
// run_cpu: eagerly at the call, lazily as the failing node's error at the sync (the results
// computed from it raise it when read, the rest of the trace is computed: docs/architecture.md,
// "Errors in lazy mode"). The `_ex` forms run the same primitive in a mode that never raises and
// return LinalgInfo's codes instead. The CUDA backend has no kernels for them: a lazy:cuda trace
// holding one raises NotImplementedError naming the op (graph/cuda_lowering.cpp).
//
// Matrices are handed to LAPACK column-major: each matrix is copied transposed into a work
// buffer (the copy LAPACK needs anyway, since it works in place) and the result transposed back.
// That skeleton (the host batch, the work copies, the result block per matrix, the copy into the
// output) is for_each_matrix's, once; each kernel is its LAPACK call and how its result is laid out.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <type_traits>
#include <limits>
#include <sstream>
#include <string_view>
#include <vector>

#include "lazy/autograd.h"
#include "lazy/ops_linalg.h"
#include "lazy/ops_movement.h"
#include "runtime/error.h"
#include "runtime/layout.h"

#if LOOM_HAVE_LAPACK
#include <lapacke.h>
#endif

namespace loom {
namespace {

// ---- shapes, dtypes and the error texts ----

// Attrs of the factorizations: how a failure is reported.
enum FailMode : int64_t {
  kRaiseLinalg = 0,  // PyTorch's linalg.* text
  kRaiseLegacy = 1,  // torch.cholesky's / torch.inverse's text (a name without "linalg.")
  kNoRaise = 2,      // the _ex forms and derivatives: results as LAPACK leaves them
};

void check_lapack_built(const char* name) {
#if !LOOM_HAVE_LAPACK
  LOOM_FAIL(NotImplemented, name,
            ": loom was built without LAPACK (install Debian's liblapacke-dev, which scripts/setup does, and "
            "rebuild)");
#else
  (void)name;
#endif
}

void check_float(const InputMeta& a, const char* name) {
  LOOM_CHECK(is_floating(a.dtype), Runtime, name, ": Expected a floating point or complex tensor as input. Got ",
             dtype_info(a.dtype).scalar_type_name);
  LOOM_CHECK(a.dtype == DType::Float32 || a.dtype == DType::Float64, Runtime, name,
             ": Low precision dtypes not supported. Got ", dtype_info(a.dtype).scalar_type_name);
}

void check_square(const InputMeta& a, const char* name) {
  LOOM_CHECK(a.shape.size() >= 2, Runtime, name, ": The input tensor A must have at least 2 dimensions.");
  int64_t r = a.shape[a.shape.size() - 2], c = a.shape.back();
  LOOM_CHECK(r == c, Runtime, name, ": A must be batches of square matrices, but they are ", r, " by ", c,
             " matrices");
}

// The names errors use, by op and mode.
const char* cholesky_name(int64_t mode) { return mode == kRaiseLegacy ? "cholesky" : "linalg.cholesky"; }
const char* inv_name(int64_t mode) { return mode == kRaiseLegacy ? "inverse" : "linalg.inv"; }

// "name: " or "name: (Batch element b): ", as PyTorch prefixes a failure of a batch's matrix.
std::string failure_prefix(const char* name, int64_t b, int64_t batch, bool batched) {
  std::string s = std::string(name) + ": ";
  if (batched && batch >= 1) s += "(Batch element " + std::to_string(b) + "): ";
  return s;
}

// ---- LAPACK by type (the _work forms: no NaN scan of the input, which would refuse it) ----
// Without LAPACK the same names exist and raise (infer raises first: they are never reached).

#if LOOM_HAVE_LAPACK
lapack_int potrf(char uplo, lapack_int n, float* a) { return LAPACKE_spotrf_work(LAPACK_COL_MAJOR, uplo, n, a, n); }
lapack_int potrf(char uplo, lapack_int n, double* a) { return LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, uplo, n, a, n); }
lapack_int getrf(lapack_int n, float* a, lapack_int* piv) {
  return LAPACKE_sgetrf_work(LAPACK_COL_MAJOR, n, n, a, n, piv);
}
lapack_int getrf(lapack_int n, double* a, lapack_int* piv) {
  return LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, n, n, a, n, piv);
}
lapack_int gesv(lapack_int n, lapack_int k, float* a, lapack_int* piv, float* b) {
  return LAPACKE_sgesv_work(LAPACK_COL_MAJOR, n, k, a, n, piv, b, n);
}
lapack_int gesv(lapack_int n, lapack_int k, double* a, lapack_int* piv, double* b) {
  return LAPACKE_dgesv_work(LAPACK_COL_MAJOR, n, k, a, n, piv, b, n);
}
lapack_int syevd(char uplo, lapack_int n, float* a, float* w) {
  return LAPACKE_ssyevd(LAPACK_COL_MAJOR, 'V', uplo, n, a, n, w);
}
lapack_int syevd(char uplo, lapack_int n, double* a, double* w) {
  return LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', uplo, n, a, n, w);
}
// The factorizations past the square ones, through LAPACKE's allocating forms (they size the
// work arrays; their NaN scan returns a negative info, which the callers turn into NaN results).
lapack_int gesdd(char jobz, lapack_int m, lapack_int n, float* a, float* s, float* u, lapack_int ldu, float* vt,
                 lapack_int ldvt) {
  return LAPACKE_sgesdd(LAPACK_COL_MAJOR, jobz, m, n, a, m, s, u, ldu, vt, ldvt);
}
lapack_int gesdd(char jobz, lapack_int m, lapack_int n, double* a, double* s, double* u, lapack_int ldu, double* vt,
                 lapack_int ldvt) {
  return LAPACKE_dgesdd(LAPACK_COL_MAJOR, jobz, m, n, a, m, s, u, ldu, vt, ldvt);
}
lapack_int geqrf(lapack_int m, lapack_int n, float* a, float* tau) {
  return LAPACKE_sgeqrf(LAPACK_COL_MAJOR, m, n, a, m, tau);
}
lapack_int geqrf(lapack_int m, lapack_int n, double* a, double* tau) {
  return LAPACKE_dgeqrf(LAPACK_COL_MAJOR, m, n, a, m, tau);
}
lapack_int orgqr(lapack_int m, lapack_int n, lapack_int k, float* a, const float* tau) {
  return LAPACKE_sorgqr(LAPACK_COL_MAJOR, m, n, k, a, m, tau);
}
lapack_int orgqr(lapack_int m, lapack_int n, lapack_int k, double* a, const double* tau) {
  return LAPACKE_dorgqr(LAPACK_COL_MAJOR, m, n, k, a, m, tau);
}
lapack_int getrf_mn(lapack_int m, lapack_int n, float* a, lapack_int* piv) {
  return LAPACKE_sgetrf_work(LAPACK_COL_MAJOR, m, n, a, m, piv);
}
lapack_int getrf_mn(lapack_int m, lapack_int n, double* a, lapack_int* piv) {
  return LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, m, n, a, m, piv);
}
lapack_int getrs(char trans, lapack_int n, lapack_int k, const float* a, const lapack_int* piv, float* b) {
  return LAPACKE_sgetrs_work(LAPACK_COL_MAJOR, trans, n, k, a, n, piv, b, n);
}
lapack_int getrs(char trans, lapack_int n, lapack_int k, const double* a, const lapack_int* piv, double* b) {
  return LAPACKE_dgetrs_work(LAPACK_COL_MAJOR, trans, n, k, a, n, piv, b, n);
}
lapack_int gels(lapack_int m, lapack_int n, lapack_int k, float* a, float* b, lapack_int ldb) {
  return LAPACKE_sgels(LAPACK_COL_MAJOR, 'N', m, n, k, a, m, b, ldb);
}
lapack_int gels(lapack_int m, lapack_int n, lapack_int k, double* a, double* b, lapack_int ldb) {
  return LAPACKE_dgels(LAPACK_COL_MAJOR, 'N', m, n, k, a, m, b, ldb);
}
lapack_int gelsy(lapack_int m, lapack_int n, lapack_int k, float* a, float* b, lapack_int ldb, lapack_int* jpvt,
                 float rcond, lapack_int* rank) {
  return LAPACKE_sgelsy(LAPACK_COL_MAJOR, m, n, k, a, m, b, ldb, jpvt, rcond, rank);
}
lapack_int gelsy(lapack_int m, lapack_int n, lapack_int k, double* a, double* b, lapack_int ldb, lapack_int* jpvt,
                 double rcond, lapack_int* rank) {
  return LAPACKE_dgelsy(LAPACK_COL_MAJOR, m, n, k, a, m, b, ldb, jpvt, rcond, rank);
}
lapack_int gelsd(bool divide, lapack_int m, lapack_int n, lapack_int k, float* a, float* b, lapack_int ldb, float* s,
                 float rcond, lapack_int* rank) {
  return divide ? LAPACKE_sgelsd(LAPACK_COL_MAJOR, m, n, k, a, m, b, ldb, s, rcond, rank)
                : LAPACKE_sgelss(LAPACK_COL_MAJOR, m, n, k, a, m, b, ldb, s, rcond, rank);
}
lapack_int gelsd(bool divide, lapack_int m, lapack_int n, lapack_int k, double* a, double* b, lapack_int ldb,
                 double* s, double rcond, lapack_int* rank) {
  return divide ? LAPACKE_dgelsd(LAPACK_COL_MAJOR, m, n, k, a, m, b, ldb, s, rcond, rank)
                : LAPACKE_dgelss(LAPACK_COL_MAJOR, m, n, k, a, m, b, ldb, s, rcond, rank);
}
#else
using lapack_int = int;
template <typename... Args>
lapack_int no_lapack(Args&&...) {
  check_lapack_built("linalg");
  return -1;
}
#define LOOM_NO_LAPACK(name) \
  template <typename... Args> \
  lapack_int name(Args&&... args) { return no_lapack(args...); }
LOOM_NO_LAPACK(potrf)
LOOM_NO_LAPACK(getrf)
LOOM_NO_LAPACK(gesv)
LOOM_NO_LAPACK(syevd)
LOOM_NO_LAPACK(gesdd)
LOOM_NO_LAPACK(geqrf)
LOOM_NO_LAPACK(orgqr)
LOOM_NO_LAPACK(getrf_mn)
LOOM_NO_LAPACK(getrs)
LOOM_NO_LAPACK(gels)
LOOM_NO_LAPACK(gelsy)
LOOM_NO_LAPACK(gelsd)
#undef LOOM_NO_LAPACK
#endif

// The batch of matrices of `x` as a contiguous host copy in T.
template <typename T>
struct Batch {
  Array host;
  int64_t count = 1, rows = 0, cols = 0;
  explicit Batch(const Array& x) : host(copy_to(x, x.dtype, kCPU)) {
    rows = x.sizes()[x.ndim() - 2];
    cols = x.sizes()[x.ndim() - 1];
    for (int64_t d = 0; d + 2 < x.ndim(); ++d) count *= x.sizes()[d];
  }
  const T* matrix(int64_t b) const { return static_cast<const T*>(host.data()) + b * rows * cols; }
};

// Row-major rows x cols -> column-major (LAPACK's), and back.
template <typename T>
void to_column_major(const T* src, int64_t rows, int64_t cols, T* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i + j * rows] = src[i * cols + j];
}
template <typename T>
void to_row_major(const T* src, int64_t rows, int64_t cols, T* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[i + j * rows];
}

// Runs f<T> for the float dtype of `dtype`.
template <typename F>
void with_float_type(DType dtype, F&& f) {
  if (dtype == DType::Float64) f(double{});
  else f(float{});
}

// One matrix of the batch as for_each_matrix hands it to an op's body: per input, the row-major
// matrix and (with kColumnMajor) a column-major work copy LAPACK may overwrite; and the
// matrix's block of the result (out.numel() / count elements of R: T, or int32 for LinalgInfo).
template <typename T, typename R, size_t N>
struct MatrixStep {
  int64_t index = 0, count = 1;
  bool batched = false;                     // the input has batch dims (PyTorch's "(Batch element b)")
  std::array<const T*, N> in{};             // row-major
  std::array<T*, N> work{};                 // column-major copies, when asked for
  std::array<int64_t, N> rows{}, cols{};
  R* out = nullptr;
  std::string prefix(const char* name) const { return failure_prefix(name, index, count, batched); }
};

enum CopyMode : bool { kRowMajorOnly = false, kColumnMajor = true };

// The skeleton every LAPACK step shares: the float type of input 0, each of the first N inputs
// as a contiguous host batch (their batch dims are equal: the composites expand them), a result
// in out's shape and dtype, one MatrixStep per matrix handed to body(step), then the result
// copied into out. Nothing runs when out is empty.
template <size_t N, typename R = void, typename Body>
void for_each_matrix(std::span<const Operand> in, const Array& out, CopyMode copy, Body&& body) {
  if (out.numel() == 0) return;
  const Array& x = *in[0].array;
  with_float_type(x.dtype, [&](auto zero) {
    using T = decltype(zero);
    using Out = std::conditional_t<std::is_void_v<R>, T, R>;
    std::vector<Batch<T>> batches;
    batches.reserve(N);
    for (size_t i = 0; i < N; ++i) batches.emplace_back(*in[i].array);
    Array result = empty(out.sizes(), out.dtype, kCPU);
    int64_t count = batches[0].count;
    int64_t per_matrix = count ? out.numel() / count : 0;
    MatrixStep<T, Out, N> step;
    step.count = count;
    step.batched = x.ndim() > 2;
    std::array<std::vector<T>, N> work;
    for (size_t i = 0; i < N; ++i) {
      step.rows[i] = batches[i].rows;
      step.cols[i] = batches[i].cols;
      if (copy) work[i].resize(static_cast<size_t>(batches[i].rows * batches[i].cols));
      step.work[i] = work[i].data();
    }
    for (int64_t b = 0; b < count; ++b) {
      step.index = b;
      step.out = static_cast<Out*>(result.data()) + b * per_matrix;
      for (size_t i = 0; i < N; ++i) {
        step.in[i] = batches[i].matrix(b);
        if (copy) to_column_major(step.in[i], step.rows[i], step.cols[i], step.work[i]);
      }
      body(step);
    }
    copy_(out, result);
  });
}

// ---- LinalgCholeskyEx: attrs [upper, mode]; the Cholesky factor of each matrix (the lower one,
// or with upper its transpose), the other triangle zero; read from A's lower triangle. ----

OutputMeta infer_cholesky(std::span<const InputMeta> in, const Attrs& attrs) {
  const char* name = cholesky_name(attrs[1]);
  check_square(in[0], name);
  LOOM_CHECK(in[0].dtype == DType::Float32 || in[0].dtype == DType::Float64 || !is_floating(in[0].dtype), Runtime,
             "\"cholesky_cpu\" not implemented for '", dtype_info(in[0].dtype).scalar_type_name, "'");
  check_float(in[0], name);
  check_lapack_built(name);
  return {in[0].dtype, Dims(in[0].shape)};
}

void run_cholesky(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  bool upper = attrs[0] != 0;
  int64_t mode = attrs[1];
  for_each_matrix<1>(in, out, kColumnMajor, [&](auto& m) {
    using T = std::remove_pointer_t<decltype(m.out)>;
    int64_t n = m.rows[0];
    lapack_int info = potrf('L', static_cast<lapack_int>(n), m.work[0]);
    LOOM_CHECK(info >= 0, Runtime, "internal: LAPACK potrf refused argument ", -info);
    if (info > 0 && mode != kNoRaise)
      LOOM_FAIL(LinAlg, m.prefix(cholesky_name(mode)),
                "The factorization could not be completed because the input is not positive-definite (the "
                "leading minor of order ", info, " is not positive-definite).");
    to_row_major(m.work[0], n, n, m.out);
    // potrf leaves the upper triangle as it was: zero it (and transpose for upper).
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) m.out[i * n + j] = T(0);
    if (upper)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = i + 1; j < n; ++j) std::swap(m.out[i * n + j], m.out[j * n + i]);
  });
}

// ---- LinalgSolveEx: inputs (A [..., n, n], B [..., n, k]) with equal batch dims, attrs [mode,
// which]: X with A X = B by LU with partial pivoting (gesv). which: 0 linalg.solve, 1 linalg.inv
// (B the identity: the texts of inv) ----

OutputMeta infer_solve(std::span<const InputMeta> in, const Attrs& attrs) {
  const char* name = attrs[1] ? inv_name(attrs[0]) : "linalg.solve";
  check_square(in[0], name);
  check_float(in[0], name);
  const InputMeta& b = in[1];
  LOOM_CHECK(b.shape.size() == in[0].shape.size() && b.shape[b.shape.size() - 2] == in[0].shape.back() &&
                 std::equal(b.shape.begin(), b.shape.end() - 2, in[0].shape.begin()),
             Runtime, "internal: LinalgSolveEx needs B with A's batch dims and rows");
  LOOM_CHECK(b.dtype == in[0].dtype, Runtime, "linalg.solve: Expected A and B to have the same dtype, but found A of type ",
             dtype_info(in[0].dtype).scalar_type_name, " and B of type ", dtype_info(b.dtype).scalar_type_name,
             " instead");
  check_lapack_built(name);
  return {b.dtype, Dims(b.shape)};
}

void run_solve(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  int64_t mode = attrs[0];
  bool inverse = attrs[1] != 0;
  std::vector<lapack_int> piv;
  for_each_matrix<2>(in, out, kColumnMajor, [&](auto& m) {
    int64_t n = m.rows[0], k = m.cols[1];
    piv.resize(static_cast<size_t>(n));
    lapack_int info = gesv(static_cast<lapack_int>(n), static_cast<lapack_int>(k), m.work[0], piv.data(), m.work[1]);
    LOOM_CHECK(info >= 0, Runtime, "internal: LAPACK gesv refused argument ", -info);
    if (info > 0 && mode != kNoRaise) {
      if (inverse)
        LOOM_FAIL(LinAlg, m.prefix(inv_name(mode)), "The diagonal element ", info,
                  " is zero, the inversion could not be completed because the input matrix is singular.");
      LOOM_FAIL(LinAlg, m.prefix("torch.linalg.solve"), "The solver failed because the input matrix is singular.");
    }
    to_row_major(m.work[1], n, k, m.out);
  });
}

// ---- LinalgSolveTriangular: inputs (A [..., n, n], B [..., n, k]), equal batch dims and dtype;
// attrs [upper, unitriangular, legacy]: X with A X = B, A read from one triangle (its diagonal
// taken as ones when unitriangular). Substitution row by row, each row of X a vector operation
// over its k columns; no check for a zero diagonal (inf and NaN, as PyTorch's trsm gives).
// legacy: called by torch.triangular_solve (its texts, its grad_fn name). ----

OutputMeta infer_solve_triangular(std::span<const InputMeta> in, const Attrs& attrs) {
  const char* name = attrs[2] ? "triangular_solve" : "linalg.solve_triangular";
  LOOM_CHECK(in[0].dtype == DType::Float32 || in[0].dtype == DType::Float64, Runtime, "\"", attrs[2] ? "triangular_solve_cpu" : "triangular_solve_cpu",
             "\" not implemented for '", dtype_info(in[0].dtype).scalar_type_name, "'");
  check_square(in[0], name);
  const InputMeta& b = in[1];
  LOOM_CHECK(b.dtype == in[0].dtype && b.shape.size() == in[0].shape.size() &&
                 b.shape[b.shape.size() - 2] == in[0].shape.back(),
             Runtime, "internal: LinalgSolveTriangular needs B with A's dtype, batch dims and rows");
  return {b.dtype, Dims(b.shape)};
}

template <typename T>
void substitute(const T* a, const T* bm, T* x, int64_t n, int64_t k, bool upper, bool unit) {
  for (int64_t step = 0; step < n; ++step) {
    int64_t i = upper ? n - 1 - step : step;
    T* xi = x + i * k;
    for (int64_t j = 0; j < k; ++j) xi[j] = bm[i * k + j];
    int64_t lo = upper ? i + 1 : 0, hi = upper ? n : i;
    for (int64_t p = lo; p < hi; ++p) {
      T coef = a[i * n + p];
      const T* xp = x + p * k;
      for (int64_t j = 0; j < k; ++j) xi[j] -= coef * xp[j];
    }
    if (!unit) {
      T d = a[i * n + i];
      for (int64_t j = 0; j < k; ++j) xi[j] /= d;
    }
  }
}

void run_solve_triangular(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  bool upper = attrs[0] != 0, unit = attrs[1] != 0;
  for_each_matrix<2>(in, out, kRowMajorOnly, [&](auto& m) {
    substitute(m.in[0], m.in[1], m.out, m.rows[0], m.cols[1], upper, unit);
  });
}

// ---- LinalgDet and LinalgSlogdet: LU (getrf) of each matrix; det = the sign of the pivots'
// permutation times the product of U's diagonal; slogdet [..., 2] = (sign, log |det|), (0, -inf)
// for a singular matrix. ----

OutputMeta infer_det(std::span<const InputMeta> in, const Attrs& attrs) {
  const char* name = attrs[0] ? "linalg.slogdet" : "linalg.det";
  check_square(in[0], name);
  check_float(in[0], name);
  check_lapack_built(name);
  Dims shape(in[0].shape.begin(), in[0].shape.end() - 2);
  if (attrs[0]) shape.push_back(2);
  return {in[0].dtype, shape};
}

void run_det(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  bool log = attrs[0] != 0;
  std::vector<lapack_int> piv;
  for_each_matrix<1>(in, out, kColumnMajor, [&](auto& m) {
    using T = std::remove_pointer_t<decltype(m.out)>;
    int64_t n = m.rows[0];
    piv.resize(static_cast<size_t>(n));
    lapack_int info = n ? getrf(static_cast<lapack_int>(n), m.work[0], piv.data()) : 0;
    LOOM_CHECK(info >= 0, Runtime, "internal: LAPACK getrf refused argument ", -info);
    // The determinant: the permutation's sign times U's diagonal, multiplied in T as PyTorch
    // does; slogdet: the sign of that and the sum of log |u_ii|.
    T perm = T(1), product = T(1), sign = T(1), logabs = T(0);
    for (int64_t i = 0; i < n; ++i) {
      T d = m.work[0][i + i * n];
      if (piv[static_cast<size_t>(i)] != i + 1) perm = -perm;
      product *= d;
      if (d < 0) sign = -sign;
      logabs += std::log(std::abs(d));
    }
    if (!log) {
      m.out[0] = perm * product;
    } else if (std::isnan(logabs)) {
      m.out[0] = logabs;
      m.out[1] = logabs;
    } else if (info > 0 || (std::isinf(logabs) && logabs < 0)) {
      m.out[0] = T(0);
      m.out[1] = -std::numeric_limits<T>::infinity();
    } else {
      m.out[0] = perm * sign;
      m.out[1] = logabs;
    }
  });
}

// ---- LinalgInfo: attrs [routine, upper]; LAPACK's info per matrix (int32 [...batch]) for the
// _ex forms: routine 0 Cholesky (potrf: the order of the first minor not positive-definite),
// 1 LU (getrf: the first zero of U's diagonal). Run again on its own so the factor stays one op
// with one result; the _ex forms are checks, rarely on a hot path. ----

OutputMeta infer_info(std::span<const InputMeta> in, const Attrs&) {
  return {DType::Int32, Dims(in[0].shape.begin(), in[0].shape.end() - 2)};
}

void run_info(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  std::vector<lapack_int> piv;
  for_each_matrix<1, int32_t>(in, out, kColumnMajor, [&](auto& m) {
    int64_t n = m.rows[0];
    piv.resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
    lapack_int info = 0;
    int64_t cols = m.cols[0];
    if (n && cols) info = attrs[0] == 0 ? potrf('L', static_cast<lapack_int>(n), m.work[0])
                                        : getrf_mn(static_cast<lapack_int>(n), static_cast<lapack_int>(cols), m.work[0],
                                                   piv.data());
    m.out[0] = static_cast<int32_t>(info);
  });
}


// ---- LinalgEigh: attrs [upper]; the eigenvalues (ascending) and eigenvectors of symmetric
// matrices read from one triangle (syevd), packed as [..., n + 1, n]: row 0 the eigenvalues,
// rows 1..n the eigenvectors as columns (one primitive, one result; linalg.eigh takes views). ----

OutputMeta infer_eigh(std::span<const InputMeta> in, const Attrs&) {
  check_square(in[0], "linalg.eigh");
  LOOM_CHECK(in[0].dtype == DType::Float32 || in[0].dtype == DType::Float64, Runtime,
             "\"linalg_eigh_cpu\" not implemented for '", dtype_info(in[0].dtype).scalar_type_name, "'");
  check_lapack_built("linalg.eigh");
  Dims shape(in[0].shape);
  shape[shape.size() - 2] += 1;
  return {in[0].dtype, shape};
}

void run_eigh(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  char uplo = attrs[0] ? 'U' : 'L';
  for_each_matrix<1>(in, out, kColumnMajor, [&](auto& m) {
    using T = std::remove_pointer_t<decltype(m.out)>;
    int64_t n = m.rows[0];
    lapack_int info = n ? syevd(uplo, static_cast<lapack_int>(n), m.work[0], m.out) : 0;
    if (info < 0) {  // LAPACKE refuses an input holding NaN: NaN results, as the factorization would give
      std::fill(m.out, m.out + (n + 1) * n, std::numeric_limits<T>::quiet_NaN());
      return;
    }
    LOOM_CHECK(info == 0, LinAlg, m.prefix("linalg.eigh"),
               "The algorithm failed to converge because the input matrix is ill-conditioned or has too many "
               "repeated eigenvalues (error code: ", info, ").");
    to_row_major(m.work[0], n, n, m.out + n);
  });
}

// ---- the factorizations of general (m x n) matrices: SVD, QR, LU, least squares ----

// Work buffers a body reuses from matrix to matrix, per float type (a batch of small matrices
// allocates them once, not per matrix).
struct Scratch {
  std::array<std::vector<float>, 3> f;
  std::array<std::vector<double>, 3> d;
  std::vector<lapack_int> ints;
  template <typename T>
  T* get(size_t i, int64_t n) {
    std::vector<T>* v;
    if constexpr (std::is_same_v<T, float>) v = &f[i];
    else v = &d[i];
    if (v->size() < static_cast<size_t>(std::max<int64_t>(n, 1))) v->resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
    return v->data();
  }
  lapack_int* pivots(int64_t n) {
    if (ints.size() < static_cast<size_t>(std::max<int64_t>(n, 1))) ints.resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
    return ints.data();
  }
};

template <typename T>
void set_identity(T* m, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[i * cols + j] = T(i == j);
}

template <typename T>
void fill_nan(T* m, int64_t count) {
  std::fill(m, m + count, std::numeric_limits<T>::quiet_NaN());
}

void check_matrix(const InputMeta& a, const char* name) {
  LOOM_CHECK(a.shape.size() >= 2, Runtime, name, ": The input tensor A must have at least 2 dimensions.");
}

int64_t rows_of(const InputMeta& a) { return a.shape[a.shape.size() - 2]; }
int64_t cols_of(const InputMeta& a) { return a.shape.back(); }
Dims batch_dims(const InputMeta& a) { return Dims(a.shape.begin(), a.shape.end() - 2); }

// ---- LinalgSvd: attrs [full_matrices, compute_uv]; gesdd. With compute_uv the result packs
// [..., m*ku + k + kv*n]: U (m x ku, row-major), S (k), Vh (kv x n), k = min(m, n), ku = m and
// kv = n with full_matrices (else k); without it [..., k], the singular values only (jobz 'N').
// One primitive, one result; linalg.svd takes views (as LinalgEigh). ----

struct SvdSizes {
  int64_t m, n, k, ku, kv;
  SvdSizes(int64_t rows, int64_t cols, bool full)
      : m(rows), n(cols), k(std::min(rows, cols)), ku(full ? rows : k), kv(full ? cols : k) {}
  int64_t packed() const { return m * ku + k + kv * n; }
};

OutputMeta infer_svd(std::span<const InputMeta> in, const Attrs& attrs) {
  const char* name = "linalg.svd";  // svdvals too, as PyTorch words it
  check_matrix(in[0], name);
  check_float(in[0], name);
  check_lapack_built(name);
  SvdSizes z(rows_of(in[0]), cols_of(in[0]), attrs[0] != 0);
  Dims shape = batch_dims(in[0]);
  shape.push_back(attrs[1] ? z.packed() : z.k);
  return {in[0].dtype, shape};
}

void run_svd(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  bool full = attrs[0] != 0, uv = attrs[1] != 0;
  Scratch scratch;
  for_each_matrix<1>(in, out, kColumnMajor, [&](auto& mat) {
    using T = std::remove_pointer_t<decltype(mat.out)>;
    SvdSizes z(mat.rows[0], mat.cols[0], full);
    T* u_out = mat.out;
    T* s_out = uv ? u_out + z.m * z.ku : mat.out;
    T* vh_out = s_out + z.k;
    if (z.k == 0) {  // no singular values; U and Vh (full) the identity, as PyTorch's
      if (uv) set_identity(u_out, z.m, z.ku), set_identity(vh_out, z.kv, z.n);
      return;
    }
    T* u = scratch.template get<T>(0, uv ? z.m * z.ku : 1);
    T* vt = scratch.template get<T>(1, uv ? z.kv * z.n : 1);
    lapack_int info = gesdd(!uv ? 'N' : full ? 'A' : 'S', static_cast<lapack_int>(z.m), static_cast<lapack_int>(z.n),
                            mat.work[0], s_out, u, static_cast<lapack_int>(z.m), vt, static_cast<lapack_int>(z.kv));
    if (info < 0) return fill_nan(mat.out, uv ? z.packed() : z.k);  // the NaN scan refused A
    LOOM_CHECK(info == 0, LinAlg, mat.prefix("linalg.svd"),
               "The algorithm failed to converge because the input matrix is ill-conditioned or has too many "
               "repeated singular values (error code: ", info, ").");
    if (uv) {
      to_row_major(u, z.m, z.ku, u_out);
      to_row_major(vt, z.kv, z.n, vh_out);
    }
  });
}

// ---- LinalgQr: attrs [mode: 0 reduced, 1 complete, 2 r]; geqrf, then orgqr for Q. The result
// packs [..., m*kq + kr*n]: Q (m x kq) then R (kr x n), kq = k, m or 0 and kr = k, m, k by mode. ----

struct QrSizes {
  int64_t m, n, k, kq, kr;
  QrSizes(int64_t rows, int64_t cols, int64_t mode)
      : m(rows), n(cols), k(std::min(rows, cols)), kq(mode == 0 ? k : mode == 1 ? rows : 0), kr(mode == 1 ? rows : k) {}
  int64_t packed() const { return m * kq + kr * n; }
};

OutputMeta infer_qr(std::span<const InputMeta> in, const Attrs& attrs) {
  check_matrix(in[0], "linalg.qr");
  check_float(in[0], "linalg.qr");
  check_lapack_built("linalg.qr");
  Dims shape = batch_dims(in[0]);
  shape.push_back(QrSizes(rows_of(in[0]), cols_of(in[0]), attrs[0]).packed());
  return {in[0].dtype, shape};
}

void run_qr(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  Scratch scratch;
  for_each_matrix<1>(in, out, kColumnMajor, [&](auto& mat) {
    using T = std::remove_pointer_t<decltype(mat.out)>;
    QrSizes z(mat.rows[0], mat.cols[0], attrs[0]);
    T* a = mat.work[0];
    T* tau = scratch.template get<T>(0, z.k);
    if (z.k > 0 && geqrf(static_cast<lapack_int>(z.m), static_cast<lapack_int>(z.n), a, tau) < 0)
      return fill_nan(mat.out, z.packed());
    T* r = mat.out + z.m * z.kq;  // R: the upper triangle of geqrf's first kr rows
    for (int64_t i = 0; i < z.kr; ++i)
      for (int64_t j = 0; j < z.n; ++j) r[i * z.n + j] = j >= i ? a[i + j * z.m] : T(0);
    if (z.kq == 0) return;
    if (z.k == 0) return set_identity(mat.out, z.m, z.kq);
    T* q = scratch.template get<T>(1, z.m * z.kq);  // the reflectors, widened to kq columns
    for (int64_t j = 0; j < z.kq; ++j)
      for (int64_t i = 0; i < z.m; ++i) q[i + j * z.m] = j < z.n ? a[i + j * z.m] : T(0);
    lapack_int info = orgqr(static_cast<lapack_int>(z.m), static_cast<lapack_int>(z.kq), static_cast<lapack_int>(z.k), q, tau);
    LOOM_CHECK(info == 0, Runtime, "internal: LAPACK orgqr refused argument ", -info);
    to_row_major(q, z.m, z.kq, mat.out);
  });
}

// ---- LinalgLu: attrs [mode, raise]; getrf (partial pivoting) of m x n matrices. mode 0 packs
// [..., m*n + k]: LU as LAPACK leaves it (L's unit diagonal implied) and the pivots (1-based, as
// T: exact below 2^24 rows), mode 1 [..., m*m + m*k + k*n]: P, L and U of A = P L U. raise: a
// zero on U's diagonal raises linalg.lu_factor's error (a RuntimeError, as PyTorch's). ----

struct LuSizes {
  int64_t m, n, k;
  LuSizes(int64_t rows, int64_t cols) : m(rows), n(cols), k(std::min(rows, cols)) {}
  int64_t packed(int64_t mode) const { return mode == 0 ? m * n + k : m * m + m * k + k * n; }
};

OutputMeta infer_lu(std::span<const InputMeta> in, const Attrs& attrs) {
  const char* name = attrs[0] ? "linalg.lu" : "linalg.lu_factor";
  check_matrix(in[0], name);
  check_float(in[0], name);
  check_lapack_built(name);
  Dims shape = batch_dims(in[0]);
  shape.push_back(LuSizes(rows_of(in[0]), cols_of(in[0])).packed(attrs[0]));
  return {in[0].dtype, shape};
}

void run_lu(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  int64_t mode = attrs[0];
  bool raise = attrs[1] != 0;
  Scratch scratch;
  std::vector<int64_t> perm;
  for_each_matrix<1>(in, out, kColumnMajor, [&](auto& mat) {
    using T = std::remove_pointer_t<decltype(mat.out)>;
    LuSizes z(mat.rows[0], mat.cols[0]);
    T* a = mat.work[0];
    lapack_int* piv = scratch.pivots(z.k);
    lapack_int info = z.k ? getrf_mn(static_cast<lapack_int>(z.m), static_cast<lapack_int>(z.n), a, piv) : 0;
    LOOM_CHECK(info >= 0, Runtime, "internal: LAPACK getrf refused argument ", -info);
    if (info > 0 && raise)
      // PyTorch 1.13 raises a plain RuntimeError here, not LinAlgError.
      LOOM_FAIL(Runtime, mat.prefix("torch.linalg.lu_factor"), "U[", info, ",", info,
                "] is zero and using it on lu_solve would result in a division by zero. If you still want to "
                "perform the factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)");
    if (mode == 0) {
      to_row_major(a, z.m, z.n, mat.out);
      for (int64_t i = 0; i < z.k; ++i) mat.out[z.m * z.n + i] = static_cast<T>(piv[i]);
      return;
    }
    // P: the row swaps applied to 0..m-1 give perm, with (P^T A)[i] = A[perm[i]], so P[perm[i], i] = 1.
    perm.resize(static_cast<size_t>(z.m));
    for (int64_t i = 0; i < z.m; ++i) perm[i] = i;
    for (int64_t i = 0; i < z.k; ++i) std::swap(perm[i], perm[piv[i] - 1]);
    T* p = mat.out;
    T* l = p + z.m * z.m;
    T* u = l + z.m * z.k;
    std::fill(p, p + z.m * z.m, T(0));
    for (int64_t i = 0; i < z.m; ++i) p[perm[i] * z.m + i] = T(1);
    for (int64_t i = 0; i < z.m; ++i)
      for (int64_t j = 0; j < z.k; ++j) l[i * z.k + j] = i > j ? a[i + j * z.m] : T(i == j);
    for (int64_t i = 0; i < z.k; ++i)
      for (int64_t j = 0; j < z.n; ++j) u[i * z.n + j] = j >= i ? a[i + j * z.m] : T(0);
  });
}

// ---- LinalgLuSolve: inputs (LU [..., n, n], pivots [..., n, 1] as T, B [..., n, k]), equal batch
// dims; attrs [trans]: X with A X = B (A^T X = B with trans) for A = P L U, by getrs. ----

OutputMeta infer_lu_solve(std::span<const InputMeta> in, const Attrs&) {
  check_lapack_built("linalg.lu_solve");
  return {in[2].dtype, Dims(in[2].shape)};
}

void run_lu_solve(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  Scratch scratch;
  for_each_matrix<3>(in, out, kColumnMajor, [&](auto& mat) {
    int64_t n = mat.rows[0], k = mat.cols[2];
    lapack_int* piv = scratch.pivots(n);
    for (int64_t i = 0; i < n; ++i) piv[i] = static_cast<lapack_int>(mat.in[1][i]);
    lapack_int info = getrs(attrs[0] ? 'T' : 'N', static_cast<lapack_int>(n), static_cast<lapack_int>(k), mat.work[0],
                            piv, mat.work[2]);
    LOOM_CHECK(info == 0, Runtime, "internal: LAPACK getrs refused argument ", -info);
    to_row_major(mat.work[2], n, k, mat.out);
  });
}

// ---- LinalgLstsq: inputs (A [..., m, n], B [..., m, k]), equal batch dims; attrs [driver (0
// gels, 1 gelsy, 2 gelsd, 3 gelss), rcond as the bits of a double]. The result packs
// [..., n*k + k + 1 + min(m, n)]: the solution, the squared residuals per column (the rows past
// n of what LAPACK leaves in B; meaningful for m > n and full rank), the rank and the singular
// values (gelsd / gelss). ----

enum LstsqDriver : int64_t { kGels = 0, kGelsy = 1, kGelsd = 2, kGelss = 3 };

OutputMeta infer_lstsq(std::span<const InputMeta> in, const Attrs&) {
  check_lapack_built("linalg.lstsq");
  int64_t m = rows_of(in[0]), n = cols_of(in[0]), k = cols_of(in[1]);
  Dims shape = batch_dims(in[0]);
  shape.push_back(n * k + k + 1 + std::min(m, n));
  return {in[0].dtype, shape};
}

void run_lstsq(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  int64_t driver = attrs[0];
  double rcond = std::bit_cast<double>(attrs[1]);
  Scratch scratch;
  for_each_matrix<2>(in, out, kColumnMajor, [&](auto& mat) {
    using T = std::remove_pointer_t<decltype(mat.out)>;
    int64_t m = mat.rows[0], n = mat.cols[0], k = mat.cols[1], mx = std::max<int64_t>({m, n, 1});
    T* x = mat.out;
    T* residuals = x + n * k;
    T* rank_out = residuals + k;
    T* sv = rank_out + 1;
    T* b = scratch.template get<T>(0, mx * std::max<int64_t>(k, 1));  // B with leading dimension max(m, n): X comes back in it
    for (int64_t j = 0; j < k; ++j)
      for (int64_t i = 0; i < mx; ++i) b[i + j * mx] = i < m ? mat.work[1][i + j * m] : T(0);
    lapack_int rank = static_cast<lapack_int>(std::min(m, n)), info = 0;
    auto lm = static_cast<lapack_int>(m), ln = static_cast<lapack_int>(n), lk = static_cast<lapack_int>(k);
    if (m > 0 && n > 0 && k > 0) {
      if (driver == kGels) info = gels(lm, ln, lk, mat.work[0], b, static_cast<lapack_int>(mx));
      else if (driver == kGelsy) {
        lapack_int* jpvt = scratch.pivots(n);
        std::fill(jpvt, jpvt + n, 0);
        info = gelsy(lm, ln, lk, mat.work[0], b, static_cast<lapack_int>(mx), jpvt, static_cast<T>(rcond), &rank);
      } else {
        info = gelsd(driver == kGelsd, lm, ln, lk, mat.work[0], b, static_cast<lapack_int>(mx), sv, static_cast<T>(rcond),
                     &rank);
      }
    } else if (m > 0 && n > 0 && driver >= kGelsd) {  // no right-hand sides: still the rank and singular values
      info = gelsd(driver == kGelsd, lm, ln, 1, mat.work[0], b, static_cast<lapack_int>(mx), sv, static_cast<T>(rcond),
                   &rank);
    } else if (m == 0 || n == 0) {
      rank = 0;
    }
    if (info < 0) return fill_nan(mat.out, n * k + k + 1 + std::min(m, n));  // the NaN scan refused A or B
    if (info > 0 && driver == kGels)
      LOOM_FAIL(LinAlg, mat.prefix("torch.linalg.lstsq"),
                "The least squares solution could not be computed because the input matrix does not have full rank "
                "(error code: ", info, ").");
    LOOM_CHECK(info == 0, LinAlg, mat.prefix("torch.linalg.lstsq"),
               "The algorithm failed to converge because the input matrix is ill-conditioned or has too many "
               "repeated singular values (error code: ", info, ").");
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j) x[i * k + j] = b[i + j * mx];
    for (int64_t j = 0; j < k; ++j) {
      T r = T(0);
      for (int64_t i = n; i < m; ++i) r += b[i + j * mx] * b[i + j * mx];
      residuals[j] = r;
    }
    rank_out[0] = static_cast<T>(rank);
    if (driver < kGelsd) std::fill(sv, sv + std::min(m, n), T(0));
  });
}

const bool registered = [] {
  define_op(OpId::LinalgCholeskyEx,
            OpDef{.name = "LinalgCholeskyEx", .cls = OpClass::Other, .infer = infer_cholesky, .run_cpu = run_cholesky});
  define_op(OpId::LinalgSolveEx,
            OpDef{.name = "LinalgSolveEx", .cls = OpClass::Other, .infer = infer_solve, .run_cpu = run_solve});
  define_op(OpId::LinalgSolveTriangular,
            OpDef{.name = "LinalgSolveTriangular", .cls = OpClass::Other, .infer = infer_solve_triangular,
                  .run_cpu = run_solve_triangular});
  define_op(OpId::LinalgDet, OpDef{.name = "LinalgDet", .cls = OpClass::Other, .infer = infer_det, .run_cpu = run_det});
  define_op(OpId::LinalgEigh,
            OpDef{.name = "LinalgEigh", .cls = OpClass::Other, .infer = infer_eigh, .run_cpu = run_eigh});
  define_op(OpId::LinalgInfo, OpDef{.name = "LinalgInfo", .cls = OpClass::Other, .infer = infer_info,
                                    .run_cpu = run_info});
  define_op(OpId::LinalgSvd, OpDef{.name = "LinalgSvd", .cls = OpClass::Other, .infer = infer_svd, .run_cpu = run_svd});
  define_op(OpId::LinalgQr, OpDef{.name = "LinalgQr", .cls = OpClass::Other, .infer = infer_qr, .run_cpu = run_qr});
  define_op(OpId::LinalgLu, OpDef{.name = "LinalgLu", .cls = OpClass::Other, .infer = infer_lu, .run_cpu = run_lu});
  define_op(OpId::LinalgLuSolve, OpDef{.name = "LinalgLuSolve", .cls = OpClass::Other, .infer = infer_lu_solve,
                                       .run_cpu = run_lu_solve});
  define_op(OpId::LinalgLstsq,
            OpDef{.name = "LinalgLstsq", .cls = OpClass::Other, .infer = infer_lstsq, .run_cpu = run_lstsq});
  return true;
}();

}  // namespace

// ---- the composites (lazy/ops_linalg.h) ----
namespace ops {
namespace {

Attrs attrs_of(std::initializer_list<int64_t> values) {
  Attrs a;
  for (int64_t v : values) a.push_back(v);
  return a;
}

Tensor mT(const Tensor& x) { return transpose(x, -2, -1); }

int64_t rows_of(const Tensor& x) { return x->sizes()[x->ndim() - 2]; }
int64_t cols_of(const Tensor& x) { return x->sizes()[x->ndim() - 1]; }
Dims batch_of(const Tensor& x) { return Dims(x->sizes().begin(), x->sizes().end() - 2); }

// PyTorch's checks of a batch of square float matrices, before anything is built from A.
void check_square_float(const Tensor& a, const char* name) {
  LOOM_CHECK(a->ndim() >= 2, Runtime, name, ": The input tensor A must have at least 2 dimensions.");
  LOOM_CHECK(rows_of(a) == cols_of(a), Runtime, name, ": A must be batches of square matrices, but they are ",
             rows_of(a), " by ", cols_of(a), " matrices");
  LOOM_CHECK(is_floating(a->dtype()), Runtime, name, ": Expected a floating point or complex tensor as input. Got ",
             dtype_info(a->dtype()).scalar_type_name);
  LOOM_CHECK(a->dtype() == DType::Float32 || a->dtype() == DType::Float64, Runtime, name,
             ": Low precision dtypes not supported. Got ", dtype_info(a->dtype()).scalar_type_name);
}

// x broadcast to batch + its own last two sizes.
Tensor expand_batch(const Tensor& x, const Dims& batch) {
  Dims shape = batch;
  shape.push_back(rows_of(x));
  shape.push_back(cols_of(x));
  return expand(x, shape);
}

// The identity, batched like a (an expanded view: no memory per matrix).
Tensor identity_like(const Tensor& a) {
  int64_t n = rows_of(a);
  Tensor eye = diag_embed(full(Dims{n}, Scalar(int64_t{1}), a->dtype(), placement_of(a)));
  Dims shape = batch_of(a);
  shape.push_back(n);
  shape.push_back(n);
  return expand(eye, shape);
}

}  // namespace

Tensor linalg_cholesky(const Tensor& a, bool upper, bool legacy) {
  return apply(OpId::LinalgCholeskyEx, {Arg(a)}, attrs_of({upper, legacy ? kRaiseLegacy : kRaiseLinalg}));
}

std::pair<Tensor, Tensor> linalg_cholesky_ex(const Tensor& a, bool upper, bool check_errors) {
  Tensor l = apply(OpId::LinalgCholeskyEx, {Arg(a)}, attrs_of({upper, check_errors ? kRaiseLinalg : kNoRaise}));
  return {l, apply(OpId::LinalgInfo, {Arg(a)}, attrs_of({0, upper}))};
}

// The inverse is the solution of A X = I (gesv), with inv's texts (LinalgSolveEx's attr 1). Its
// derivative reads only the result, gA = -X^T g X^T, as PyTorch's LinalgInvExBackward0 does:
// through LinalgSolveEx's it would save A, and an in-place write to A after inv (allowed by
// PyTorch) would then fail the backward.
namespace {
Tensor inverse_of(const Tensor& a, int64_t mode) {
  Tensor x;
  {
    GradModeGuard no_grad(false);
    x = apply(OpId::LinalgSolveEx, {Arg(a), Arg(identity_like(a))}, attrs_of({mode, 1}));
  }
  record_composite({"LinalgInvExBackward0", {a.get()}, 0, true, {}}, *x,
                   [](const Tensor& g, const CompositeSaved& s) -> std::vector<Tensor> {
                     Tensor xt = mT(s.result);
                     return {unary(OpId::Neg, matmul(xt, matmul(g, xt)))};
                   });
  return x;
}
}  // namespace

Tensor linalg_inv(const Tensor& a, bool legacy) {
  int64_t mode = legacy ? kRaiseLegacy : kRaiseLinalg;
  check_square_float(a, inv_name(mode));
  return inverse_of(a, mode);
}

std::pair<Tensor, Tensor> linalg_inv_ex(const Tensor& a, bool check_errors) {
  check_square_float(a, "linalg.inv");
  Tensor x = inverse_of(a, check_errors ? kRaiseLinalg : kNoRaise);
  return {x, apply(OpId::LinalgInfo, {Arg(a)}, attrs_of({1, 0}))};
}

// B is a vector (PyTorch 1.13's rule: 1-d, or A's batch of vectors) or a batch of matrices; X A = B
// is solved as A^T X^T = B^T.
Tensor linalg_solve(const Tensor& a, const Tensor& b, bool left) {
  check_square_float(a, "linalg.solve");
  LOOM_CHECK(a->dtype() == b->dtype(), Runtime, "linalg.solve: Expected A and B to have the same dtype, but found A of type ",
             dtype_info(a->dtype()).scalar_type_name, " and B of type ", dtype_info(b->dtype()).scalar_type_name,
             " instead");
  bool vector = b->ndim() == 1 || (b->ndim() == a->ndim() - 1 &&
                                   std::equal(b->sizes().begin(), b->sizes().end(), a->sizes().begin()));
  Tensor bm = vector ? unsqueeze(b, -1) : b;
  Tensor am = a;
  if (!left) {
    am = mT(a);
    if (!vector) bm = mT(bm);
  }
  int64_t n = rows_of(am);
  LOOM_CHECK(bm->sizes()[bm->ndim() - 2] == n, Runtime, "linalg.solve: Incompatible shapes of A and B for the equation ",
             left ? "AX = B" : "XA = B", " (", rows_of(a), "x", cols_of(a), " and ", rows_of(bm), "x", cols_of(bm), ")");
  Dims batch = broadcast_shapes(batch_of(am), batch_of(bm));
  Tensor x = apply(OpId::LinalgSolveEx, {Arg(expand_batch(am, batch)), Arg(expand_batch(bm, batch))},
                   attrs_of({kRaiseLinalg, 0}));
  if (vector) return squeeze(x, DimList{-1});
  return left ? x : mT(x);
}

Tensor linalg_solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left, bool unitriangular) {
  LOOM_CHECK(a->ndim() >= 2, Runtime, "linalg.solve_triangular: The input tensor A must have at least 2 dimensions.");
  LOOM_CHECK(b->ndim() >= 2, Runtime, "linalg.solve_triangular: The input tensor B must have at least 2 dimensions.");
  LOOM_CHECK(rows_of(a) == cols_of(a), Runtime, "linalg.solve_triangular: A must be batches of square matrices, but they are ",
             rows_of(a), " by ", cols_of(a), " matrices");
  int64_t n = rows_of(a);
  LOOM_CHECK((left ? rows_of(b) : cols_of(b)) == n, Runtime,
             "linalg.solve_triangular: Incompatible shapes of A and B for the equation ", left ? "AX = B" : "XA = B", " (",
             n, "x", n, " and ", rows_of(b), "x", cols_of(b), ")");
  DType dtype = promote_types(a->dtype(), b->dtype());
  LOOM_CHECK(dtype == DType::Float32 || dtype == DType::Float64, Runtime,
             "\"triangular_solve_cpu\" not implemented for '", dtype_info(dtype).scalar_type_name, "'");
  Tensor am = a->dtype() == dtype ? a : cast(a, dtype), bm = b->dtype() == dtype ? b : cast(b, dtype);
  if (!left) {  // X A = B: A^T X^T = B^T, the other triangle
    am = mT(am);
    bm = mT(bm);
    upper = !upper;
  }
  Dims batch = broadcast_shapes(batch_of(am), batch_of(bm));
  Tensor x = apply(OpId::LinalgSolveTriangular, {Arg(expand_batch(am, batch)), Arg(expand_batch(bm, batch))},
                   attrs_of({upper, unitriangular, 0}));
  return left ? x : mT(x);
}

std::pair<Tensor, Tensor> triangular_solve(const Tensor& b, const Tensor& a, bool upper, bool transpose,
                                           bool unitriangular) {
  LOOM_CHECK(b->ndim() >= 2, Runtime, "torch.triangular_solve: Expected b to have at least 2 dimensions, but it has ",
             b->ndim(), " dimensions instead");
  LOOM_CHECK(a->ndim() >= 2, Runtime, "torch.triangular_solve: Expected A to have at least 2 dimensions, but it has ",
             a->ndim(), " dimensions instead");
  LOOM_CHECK(rows_of(a) == cols_of(a), Runtime, "A must be batches of square matrices, but they are ", rows_of(a),
             " by ", cols_of(a), " matrices");
  LOOM_CHECK(rows_of(a) == rows_of(b), Runtime, "Incompatible matrix sizes for triangular_solve: each A matrix is ",
             rows_of(a), " by ", cols_of(a), " but each b matrix is ", rows_of(b), " by ", cols_of(b));
  LOOM_CHECK(a->dtype() == b->dtype(), Runtime, "Expected b and A to have the same dtype, but found b of type ",
             dtype_info(b->dtype()).scalar_type_name, " and A of type ", dtype_info(a->dtype()).scalar_type_name,
             " instead.");
  Dims batch = broadcast_shapes(batch_of(a), batch_of(b));
  Tensor am = expand_batch(transpose ? mT(a) : a, batch);
  Tensor x = apply(OpId::LinalgSolveTriangular, {Arg(am), Arg(expand_batch(b, batch))},
                   attrs_of({transpose ? !upper : upper, unitriangular, 1}));
  return {x, clone(expand_batch(a, batch))};
}

// X = (L L^T)^{-1} B as two triangular solves, with PyTorch's derivative (record_composite): L's
// gradient is that of a full matrix L entering A = L L^T (not only its triangle), as PyTorch's.
namespace {
Tensor cholesky_solve_impl(const Tensor& b, const Tensor& l, bool upper, const char* grad_name) {
  Dims batch = broadcast_shapes(batch_of(b), batch_of(l));
  Tensor bb = expand_batch(b, batch), lb = expand_batch(l, batch);
  Tensor x;
  {
    GradModeGuard no_grad(false);
    Tensor lower = upper ? mT(lb) : lb;  // A = lower lower^T
    Tensor y = apply(OpId::LinalgSolveTriangular, {Arg(lower), Arg(bb)}, attrs_of({0, 0, 0}));
    x = apply(OpId::LinalgSolveTriangular, {Arg(mT(lower)), Arg(y)}, attrs_of({1, 0, 0}));
  }
  // X = A^{-1} B: gB = A^{-1} g; gA = -gB X^T, and A = L L^T gives gL = (gA + gA^T) L
  // (U (gA + gA^T) for A = U^T U).
  record_composite({grad_name, {b.get(), l.get()}, 0b10u, true, {}}, *x,
                   [upper](const Tensor& g, const CompositeSaved& s) -> std::vector<Tensor> {
                     const Tensor& l = s.inputs[1];
                     Tensor gb = cholesky_solve_impl(g, l, upper, "CholeskySolveBackward0");
                     std::vector<Tensor> grads(2);
                     if (s.needs_grad[0]) grads[0] = gb;
                     if (s.needs_grad[1]) {
                       Tensor common = matmul(gb, mT(s.result));
                       common = add(common, mT(common));
                       grads[1] = unary(OpId::Neg, upper ? matmul(l, common) : matmul(common, l));
                     }
                     return grads;
                   });
  return x;
}
}  // namespace

Tensor cholesky_solve(const Tensor& b, const Tensor& l, bool upper) {
  LOOM_CHECK(b->ndim() >= 2, Runtime, "b should have at least 2 dimensions, but has ", b->ndim(),
             " dimensions instead");
  LOOM_CHECK(l->ndim() >= 2, Runtime, "u should have at least 2 dimensions, but has ", l->ndim(),
             " dimensions instead");
  LOOM_CHECK(rows_of(l) == cols_of(l), Runtime, "A must be batches of square matrices, but they are ", rows_of(l),
             " by ", cols_of(l), " matrices");
  LOOM_CHECK(rows_of(l) == rows_of(b), Runtime, "Incompatible matrix sizes for cholesky_solve: each A matrix is ",
             rows_of(l), " by ", cols_of(l), " but each b matrix is ", rows_of(b), " by ", cols_of(b));
  LOOM_CHECK(l->dtype() == b->dtype(), Runtime, "Expected b and A to have the same dtype, but found b of type ",
             dtype_info(b->dtype()).scalar_type_name, " and A of type ", dtype_info(l->dtype()).scalar_type_name,
             " instead.");
  LOOM_CHECK(l->dtype() == DType::Float32 || l->dtype() == DType::Float64, Runtime,
             "\"cholesky_solve_cpu\" not implemented for '", dtype_info(l->dtype()).scalar_type_name, "'");
  return cholesky_solve_impl(b, l, upper, "CholeskySolveBackward0");
}

Tensor cholesky_inverse(const Tensor& l, bool upper) {
  check_square_float(l, "cholesky_inverse");
  return cholesky_solve_impl(identity_like(l), l, upper, "CholeskyInverseBackward0");
}

Tensor linalg_det(const Tensor& a) {
  check_square_float(a, "linalg.det");
  return apply(OpId::LinalgDet, {Arg(a)}, attrs_of({0}));
}

std::pair<Tensor, Tensor> linalg_slogdet(const Tensor& a) {
  check_square_float(a, "linalg.slogdet");
  Tensor both = apply(OpId::LinalgDet, {Arg(a)}, attrs_of({1}));
  return {select(both, -1, 0), select(both, -1, 1)};
}

// log det: NaN where the determinant is negative, -inf where it is 0 (slogdet's logabsdet).
Tensor logdet(const Tensor& a) {
  check_square_float(a, "linalg.slogdet");
  auto [sign, logabs] = linalg_slogdet(a);
  return where(binary(OpId::Lt, sign, Scalar(int64_t{0})), Scalar(std::numeric_limits<double>::quiet_NaN()), logabs);
}

std::pair<Tensor, Tensor> linalg_eigh(const Tensor& a, std::string_view uplo) {
  LOOM_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u", Runtime,
             "Expected UPLO argument to be 'L' or 'U', but got ", uplo);
  Tensor packed = apply(OpId::LinalgEigh, {Arg(a)}, attrs_of({uplo == "U" || uplo == "u"}));
  int64_t n = cols_of(a);
  return {select(packed, -2, 0), narrow(packed, -2, 1, n)};
}

Tensor linalg_eigvalsh(const Tensor& a, std::string_view uplo) { return linalg_eigh(a, uplo).first; }


// ---- SVD, QR, pinv, rank, cond, LU, least squares (the primitives above) ----
namespace {

// A part of a packed result: `tail`'s element count from `offset` of the last dim, as the batch
// dims + tail (a view: the parts are contiguous runs of each matrix's row).
Tensor unpack(const Tensor& packed, int64_t offset, const Dims& tail) {
  Dims shape(packed->sizes().begin(), packed->sizes().end() - 1);
  int64_t count = 1;
  for (int64_t d : tail) count *= d;
  for (int64_t d : tail) shape.push_back(d);
  return reshape(narrow(packed, -1, offset, count), shape);
}

bool needs_grad(const Tensor& a) { return grad_enabled() && requires_grad(*a); }

Tensor zeros_of(Dims shape, const Tensor& like, DType dtype) {
  return full(shape, Scalar(int64_t{0}), dtype, placement_of(like));
}

Dims with_tail(Dims batch, std::initializer_list<int64_t> tail) {
  for (int64_t d : tail) batch.push_back(d);
  return batch;
}

double eps_of(DType dtype) {
  return dtype == DType::Float64 ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
}

// The cutoff [..., 1] below which singular values (or |eigenvalues|) s [..., k > 0] count as
// zero: max(atol, rtol * the largest).
Tensor cutoff(const Tensor& s, Tolerances tol, int64_t m, int64_t n) {
  double atol = tol.atol.value_or(0.0);
  double rtol = tol.rtol ? *tol.rtol : atol > 0 ? 0.0 : eps_of(s->dtype()) * static_cast<double>(std::max(m, n));
  Tensor scaled = mul(amax(s, DimList{-1}, true), Scalar(rtol));
  return binary(OpId::Maximum, scaled, Scalar(atol));
}

// The gradient of P = pinv(A) (A m x n, P n x m) for g = dL/dP: from
// dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P (Golub and Pereyra),
// gA = -P^T g P^T + (I - A P) g^T P P^T + P^T P g^T (I - P A), without forming I.
Tensor pinv_gradient(const Tensor& g, const Tensor& p, const Tensor& a) {
  Tensor pt = mT(p), gt = mT(g);
  Tensor first = unary(OpId::Neg, matmul(matmul(pt, g), pt));
  Tensor x = matmul(gt, matmul(p, pt));
  Tensor second = sub(x, matmul(a, matmul(p, x)));
  Tensor y = matmul(matmul(pt, p), gt);
  Tensor third = sub(y, matmul(matmul(y, p), a));
  return add(add(first, second), third);
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> linalg_svd(const Tensor& a, bool full_matrices) {
  Tensor packed = apply(OpId::LinalgSvd, {Arg(a)}, attrs_of({full_matrices, 1}));
  SvdSizes z(rows_of(a), cols_of(a), full_matrices);
  return {unpack(packed, 0, {z.m, z.ku}), unpack(packed, z.m * z.ku, {z.k}),
          unpack(packed, z.m * z.ku + z.k, {z.kv, z.n})};
}

// Without a gradient to compute only the values (jobz 'N'); with one, the full SVD's S (its
// derivative needs U and V), as PyTorch does.
Tensor linalg_svdvals(const Tensor& a) {
  if (needs_grad(a)) return std::get<1>(linalg_svd(a, false));
  return apply(OpId::LinalgSvd, {Arg(a)}, attrs_of({0, 0}));
}

std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& a, bool some, bool compute_uv) {
  if (compute_uv) {
    auto [u, s, vh] = linalg_svd(a, !some);
    return {u, s, mT(vh)};
  }
  Tensor s = linalg_svdvals(a);
  Dims batch = batch_of(a);
  return {zeros_of(with_tail(batch, {rows_of(a), rows_of(a)}), a, a->dtype()), s,
          zeros_of(with_tail(batch, {cols_of(a), cols_of(a)}), a, a->dtype())};
}

std::pair<Tensor, Tensor> linalg_qr(const Tensor& a, std::string_view mode, const char* name) {
  int64_t m = mode == "reduced" ? 0 : mode == "complete" ? 1 : mode == "r" ? 2 : -1;
  LOOM_CHECK(m >= 0, Runtime, "qr received unrecognized mode '", mode,
             "' but expected one of 'reduced' (default), 'r', or 'complete'");
  (void)name;
  Tensor packed = apply(OpId::LinalgQr, {Arg(a)}, attrs_of({m}));
  QrSizes z(rows_of(a), cols_of(a), m);
  Tensor q = m == 2 ? zeros_of(Dims{0}, a, a->dtype()) : unpack(packed, 0, {z.m, z.kq});
  return {q, unpack(packed, z.m * z.kq, {z.kr, z.n})};
}

// P = V diag(1 / s) U^T over the singular values above the cutoff (hermitian: the eigenvalues of
// magnitude above it, P = V diag(1 / w) V^T), with its own derivative (pinv_gradient), as
// PyTorch's LinalgPinvBackward0 rather than the chain through the SVD's.
Tensor linalg_pinv(const Tensor& a, Tolerances tol, bool hermitian) {
  const char* name = "linalg.pinv";
  LOOM_CHECK(a->ndim() >= 2 && (a->dtype() == DType::Float32 || a->dtype() == DType::Float64), Runtime, name, "(",
             dtype_info(a->dtype()).scalar_type_name, "{", format_dims(a->sizes()),
             "}): expected a tensor with 2 or more dimensions of float, double, cfloat or cdouble types");
  int64_t m = rows_of(a), n = cols_of(a);
  if (hermitian) check_square_float(a, name);
  Tensor p;
  {
    GradModeGuard no_grad(false);
    if (std::min(m, n) == 0) {
      p = zeros_of(with_tail(batch_of(a), {n, m}), a, a->dtype());
    } else if (hermitian) {
      auto [w, v] = linalg_eigh(a);
      Tensor keep = binary(OpId::Gt, unary(OpId::Abs, w), cutoff(unary(OpId::Abs, w), tol, m, n));
      Tensor inv = where(keep, div(Scalar(1.0), w), Scalar(int64_t{0}));
      p = matmul(v, mul(unsqueeze(inv, -1), mT(v)));
    } else {
      auto [u, s, vh] = linalg_svd(a, false);
      Tensor inv = where(binary(OpId::Gt, s, cutoff(s, tol, m, n)), div(Scalar(1.0), s), Scalar(int64_t{0}));
      p = matmul(mT(vh), mul(unsqueeze(inv, -1), mT(u)));
    }
  }
  record_composite({"LinalgPinvBackward0", {a.get()}, 0b1u, true, {}}, *p,
                   [](const Tensor& g, const CompositeSaved& s) -> std::vector<Tensor> {
                     return {pinv_gradient(g, s.result, s.inputs[0])};
                   });
  return p;
}

Tensor linalg_matrix_rank(const Tensor& a, Tolerances tol, bool hermitian) {
  LOOM_CHECK(a->ndim() >= 2, Runtime,
             "torch.linalg.matrix_rank: The input tensor input must have at least 2 dimensions.");
  LOOM_CHECK(a->dtype() == DType::Float32 || a->dtype() == DType::Float64, Runtime,
             "This function doesn't handle types other than float and double");
  int64_t m = rows_of(a), n = cols_of(a);
  if (std::min(m, n) == 0) return zeros_of(batch_of(a), a, DType::Int64);
  GradModeGuard no_grad(false);
  Tensor s = hermitian ? unary(OpId::Abs, linalg_eigvalsh(a)) : linalg_svdvals(a);
  return sum(binary(OpId::Gt, s, cutoff(s, tol, m, n)), DimList{-1}, false, DType::Int64);
}

// p None or +-2: the ratio of the extreme singular values (any shape); the other orders
// norm(A) norm(A^{-1}) of square matrices, inf where A is singular.
Tensor linalg_cond(const Tensor& a, std::string_view ord, std::optional<double> number_ord) {
  if (ord.empty() && (!number_ord || std::abs(*number_ord) == 2)) {
    LOOM_CHECK(a->ndim() >= 2, Runtime, "linalg.cond: The input tensor A must have at least 2 dimensions.");
    Tensor s = linalg_svdvals(a);
    Tensor big = amax(s, DimList{-1}), small = amin(s, DimList{-1});
    return number_ord && *number_ord < 0 ? div(small, big) : div(big, small);
  }
  LOOM_CHECK(ord.empty() || ord == "fro" || ord == "nuc", Runtime, "linalg.cond got an invalid norm type: ", ord);
  LOOM_CHECK(!number_ord || std::abs(*number_ord) == 1 || std::isinf(*number_ord), Runtime,
             "linalg.cond got an invalid norm type: ", *number_ord);
  std::ostringstream label;
  label << "linalg.cond(ord=";
  if (ord.empty()) label << *number_ord;
  else label << ord;
  label << ")";
  check_square_float(a, label.str().c_str());
  auto [inv, info] = linalg_inv_ex(a, false);
  double num = number_ord.value_or(0.0);
  Dims dims{-2, -1};
  Tensor r = mul(matrix_norm(a, ord, num, dims, false, std::nullopt), matrix_norm(inv, ord, num, dims, false, std::nullopt));
  return where(binary(OpId::Ne, info, Scalar(int64_t{0})), Scalar(std::numeric_limits<double>::infinity()), r);
}

std::pair<Tensor, Tensor> linalg_lu_factor(const Tensor& a, bool pivot, bool check_errors, const char* name) {
  LOOM_CHECK(a->ndim() >= 2, Runtime, "torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: ",
             format_dims(a->sizes()), " instead");
  LOOM_CHECK(a->dtype() == DType::Float32 || a->dtype() == DType::Float64, Runtime, "\"lu_cpu\" not implemented for '",
             dtype_info(a->dtype()).scalar_type_name, "'");
  LOOM_CHECK(pivot, Runtime, name, ": LU without pivoting is not implemented on the CPU");
  Tensor packed = apply(OpId::LinalgLu, {Arg(a)}, attrs_of({0, check_errors}));
  LuSizes z(rows_of(a), cols_of(a));
  return {unpack(packed, 0, {z.m, z.n}), cast(unpack(packed, z.m * z.n, {z.k}), DType::Int32)};
}

Tensor linalg_lu_factor_ex_info(const Tensor& a) { return apply(OpId::LinalgInfo, {Arg(a)}, attrs_of({1, 0})); }

std::tuple<Tensor, Tensor, Tensor> linalg_lu(const Tensor& a, bool pivot) {
  LOOM_CHECK(pivot, Runtime, "linalg.lu: LU without pivoting is not implemented on the CPU");
  Tensor packed = apply(OpId::LinalgLu, {Arg(a)}, attrs_of({1, 0}));
  LuSizes z(rows_of(a), cols_of(a));
  return {unpack(packed, 0, {z.m, z.m}), unpack(packed, z.m * z.m, {z.m, z.k}),
          unpack(packed, z.m * z.m + z.m * z.k, {z.k, z.n})};
}

// A X = B (left) is getrs with A, A^T X = B (adjoint) with A^T; X A = B is A^T X^T = B^T and
// X A^T = B is A X^T = B^T.
Tensor linalg_lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool left, bool adjoint,
                       const char* name) {
  LOOM_CHECK(lu->ndim() >= 2, Runtime, name, ": The input tensor LU must have at least 2 dimensions.");
  LOOM_CHECK(b->ndim() >= 2, Runtime, name, ": The input tensor B must have at least 2 dimensions.");
  LOOM_CHECK(rows_of(lu) == cols_of(lu), Runtime, "torch.", name, ": A must be batches of square matrices, but they are ",
             rows_of(lu), " by ", cols_of(lu), " matrices");
  int64_t n = rows_of(lu);
  LOOM_CHECK((left ? rows_of(b) : cols_of(b)) == n, Runtime, name, ": Incompatible shapes of A and B for the equation ",
             left ? "AX = B" : "XA = B", " (", n, "x", n, " and ", rows_of(b), "x", cols_of(b), ")");
  LOOM_CHECK(pivots->dtype() == DType::Int32, Runtime, name, ": pivots should be a Tensor of scalar type torch.int32");
  LOOM_CHECK(pivots->ndim() == lu->ndim() - 1 && pivots->sizes().back() == n, Runtime, name,
             ": Expected pivots of shape (*, ", n, ") matching LU's batch dims. Got ", format_dims(pivots->sizes()));
  LOOM_CHECK(lu->dtype() == b->dtype(), Runtime, name, ": Expected LU and B to have the same dtype, but found LU of type ",
             dtype_info(lu->dtype()).scalar_type_name, " and B of type ", dtype_info(b->dtype()).scalar_type_name,
             " instead");
  LOOM_CHECK(lu->dtype() == DType::Float32 || lu->dtype() == DType::Float64, Runtime, name,
             ": Expected a float32 or float64 LU. Got ", dtype_info(lu->dtype()).scalar_type_name);
  Tensor bm = left ? b : mT(b);
  bool trans = left ? adjoint : !adjoint;
  Dims batch = broadcast_shapes(broadcast_shapes(batch_of(lu), batch_of(bm)),
                                Dims(pivots->sizes().begin(), pivots->sizes().end() - 1));
  Tensor piv = expand_batch(unsqueeze(cast(pivots, lu->dtype()), -1), batch);
  Tensor x = apply(OpId::LinalgLuSolve, {Arg(expand_batch(lu, batch)), Arg(piv), Arg(expand_batch(bm, batch))},
                   attrs_of({trans}));
  return left ? x : mT(x);
}

std::vector<Tensor> linalg_lstsq(const Tensor& a, const Tensor& b, std::optional<double> rcond,
                                 std::optional<std::string_view> driver_name) {
  const char* name = "torch.linalg.lstsq";
  LOOM_CHECK(a->ndim() >= 2, Runtime, name, ": input must have at least 2 dimensions.");
  LOOM_CHECK(b->ndim() >= 1, Runtime, name, ": other must have at least 1 dimension.");
  LOOM_CHECK(a->dtype() == b->dtype(), Runtime, name, ": Expected input and other to have the same dtype, but got input's dtype ",
             dtype_info(a->dtype()).scalar_type_name, " and other's dtype ", dtype_info(b->dtype()).scalar_type_name);
  LOOM_CHECK(a->dtype() == DType::Float32 || a->dtype() == DType::Float64, Runtime, name,
             ": Expected a float32 or float64 input. Got ", dtype_info(a->dtype()).scalar_type_name);
  bool vector = b->ndim() == a->ndim() - 1;
  Tensor bm = vector ? unsqueeze(b, -1) : b;
  LOOM_CHECK(rows_of(a) == rows_of(bm), Runtime, name, ": input.size(-2) should match other.size(",
             vector ? -1 : -2, ")");
  std::string_view dn = driver_name.value_or("gelsy");
  int64_t driver = dn == "gels"    ? int64_t{kGels}
                   : dn == "gelsy" ? int64_t{kGelsy}
                   : dn == "gelsd" ? int64_t{kGelsd}
                   : dn == "gelss" ? int64_t{kGelss}
                                   : int64_t{-1};
  LOOM_CHECK(driver >= 0, Runtime, name, ": parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  int64_t m = rows_of(a), n = cols_of(a), k = cols_of(bm);
  double rc = rcond.value_or(eps_of(a->dtype()) * static_cast<double>(std::max(m, n)));
  Dims batch = broadcast_shapes(batch_of(a), batch_of(bm));
  Tensor packed = apply(OpId::LinalgLstsq, {Arg(expand_batch(a, batch)), Arg(expand_batch(bm, batch))},
                        attrs_of({driver, std::bit_cast<int64_t>(rc)}));
  Tensor x;
  {
    GradModeGuard no_grad(false);
    x = contiguous(unpack(packed, 0, {n, k}));
  }
  // X = pinv(A) B: gB = pinv(A)^T g, gA through pinv's derivative with g B^T (full-rank A: the
  // least-squares solution is pinv(A) B for every driver).
  record_composite({"LinalgLstsqBackward0", {a.get(), b.get()}, 0b11u, false, {}}, *x,
                   [vector](const Tensor& g, const CompositeSaved& s) -> std::vector<Tensor> {
                     const Tensor& a = s.inputs[0];
                     Tensor bm = vector ? unsqueeze(s.inputs[1], -1) : s.inputs[1];
                     Tensor p = linalg_pinv(a, {}, false);
                     std::vector<Tensor> grads(2);
                     if (s.needs_grad[1]) {
                       Tensor gb = matmul(mT(p), g);
                       grads[1] = vector ? squeeze(gb, DimList{-1}) : gb;
                     }
                     if (s.needs_grad[0]) grads[0] = pinv_gradient(matmul(g, mT(bm)), p, a);
                     return grads;
                   });
  Tensor residuals = zeros_of(Dims{0}, a, a->dtype());
  if (m > n && driver != kGelsy) {
    bool full_rank = true;
    if (driver != kGels) {  // the residuals exist when every matrix has full rank: a read of the ranks
      Array ranks = copy_to(values_for_shape(unpack(packed, n * k + k, {}), "linalg.lstsq's residuals"), DType::Float64, kCPU);
      const auto* r = static_cast<const double*>(ranks.data());
      for (int64_t i = 0; i < ranks.numel(); ++i) full_rank = full_rank && r[i] == static_cast<double>(n);
    }
    if (full_rank) residuals = unpack(packed, n * k, {k});
  }
  Tensor rank = driver == kGels ? zeros_of(Dims{0}, a, DType::Int64) : cast(unpack(packed, n * k + k, {}), DType::Int64);
  Tensor sv = driver >= kGelsd ? unpack(packed, n * k + k + 1, {std::min(m, n)}) : zeros_of(Dims{0}, a, a->dtype());
  if (vector) x = squeeze(x, DimList{-1});
  return {x, residuals, rank, sv};
}

}  // namespace ops
}  // namespace loom
