// Definitions of the LAPACK primitives (Note [LAPACK steps]) and the composites of
// torch.linalg's factorizations and solvers built on them (lazy/ops_linalg.h).
//
// Note [LAPACK steps]
// Each primitive is a library step (OpClass::Other), as MatMul is: fusion leaves it alone, the
// CPU plan calls its run_cpu with the stored operands, and it runs LAPACK (Debian's
// liblapacke-dev: the C interface over liblapack3, which Debian points at OpenBLAS's LAPACK when
// OpenBLAS is installed) over the batch, one matrix at a time, float32 and float64. No result
// shape depends on the data, so none of them syncs. An input LAPACK finds singular or not
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
#include <array>
#include <cmath>
#include <type_traits>
#include <limits>
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
    piv.resize(static_cast<size_t>(n));
    lapack_int info = 0;
    if (n) info = attrs[0] == 0 ? potrf('L', static_cast<lapack_int>(n), m.work[0])
                                : getrf(static_cast<lapack_int>(n), m.work[0], piv.data());
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

}  // namespace ops
}  // namespace loom
