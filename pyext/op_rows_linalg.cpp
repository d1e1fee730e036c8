// The linear-algebra family as Python: the op table's rows (pyext/op_table.h) of
// lazy/ops_linalg.h, named as PyTorch's C++ functions are (so their TypeErrors are the same):
// loom.linalg (pyext/loom/linalg.py) names the `linalg_*` rows as torch.linalg does, and
// einsum(equation, *operands), tensordot's dims forms and chain_matmul(*matrices) wrap rows in
// pyext/loom/_functional.py.
#include <cmath>
#include <deque>
#include <map>
#include <tuple>

#include "lazy/ops_linalg.h"
#include "pyext/op_table.h"
#include "lazy/ops_movement.h"
#include "runtime/error.h"
#include "runtime/layout.h"

namespace loom::py {
namespace {



// A named tuple like torch.return_types.<name> with any number of fields (named_pair's, for
// three and four results).
PyObject* named_tuple(const char* name, const std::vector<Tensor>& parts, std::vector<const char*> fields) {
  static std::map<std::string, PyTypeObject*> types;
  static std::deque<std::pair<std::string, std::vector<PyStructSequence_Field>>> descriptions;
  static std::deque<PyStructSequence_Desc> descs;
  PyTypeObject*& type = types[name];
  if (!type) {
    auto& [type_name, fs] = descriptions.emplace_back(std::string("loom.return_types.") + name,
                                                      std::vector<PyStructSequence_Field>{});
    for (const char* f : fields) fs.push_back({f, nullptr});
    fs.push_back({nullptr, nullptr});
    PyStructSequence_Desc& desc = descs.emplace_back(PyStructSequence_Desc{
        type_name.c_str(), "a named tuple of results", fs.data(), static_cast<int>(fields.size())});
    type = PyStructSequence_NewType(&desc);
    if (!type) throw PythonError{};
  }
  PyRef result = PyRef::checked(PyStructSequence_New(type));
  for (size_t i = 0; i < parts.size(); ++i) PyStructSequence_SET_ITEM(result.get(), i, wrap(parts[i]));
  return result.release();
}

template <typename... Ts>
std::vector<Tensor> tensors_of(const std::tuple<Ts...>& t) {
  return std::apply([](const auto&... x) { return std::vector<Tensor>{x...}; }, t);
}

// PyTorch 1.13's deprecation warnings of the old names (UserWarning, its texts).
void warn_deprecated(const char* text) { check_status(PyErr_WarnEx(PyExc_UserWarning, text, 1)); }

const char* kCholeskyDeprecated =
    "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future PyTorch "
    "release.\nL = torch.cholesky(A)\nshould be replaced with\nL = torch.linalg.cholesky(A)\nand\nU = "
    "torch.cholesky(A, upper=True)\nshould be replaced with\nU = torch.linalg.cholesky(A).mH().\nThis transform "
    "will produce equivalent results for all valid (symmetric positive definite) inputs.";
const char* kTriangularSolveDeprecated =
    "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will be removed in a future "
    "PyTorch release.\ntorch.linalg.solve_triangular has its arguments reversed and does not return a copy of one "
    "of the inputs.\nX = torch.triangular_solve(B, A).solution\nshould be replaced with\nX = "
    "torch.linalg.solve_triangular(A, B).";
const char* kLuDeprecated =
    "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and will be removed in "
    "a future PyTorch release.\nLU, pivots = torch.lu(A, compute_pivots)\nshould be replaced with\nLU, pivots = "
    "torch.linalg.lu_factor(A, compute_pivots)\nand\nLU, pivots, info = torch.lu(A, compute_pivots, "
    "get_infos=True)\nshould be replaced with\nLU, pivots, info = torch.linalg.lu_factor_ex(A, compute_pivots)";
const char* kLuSolveDeprecated =
    "torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed in a future PyTorch "
    "release.\nNote that torch.linalg.lu_solve has its arguments reversed.\nX = torch.lu_solve(B, LU, "
    "pivots)\nshould be replaced with\nX = torch.linalg.lu_solve(LU, pivots, B)";
const char* kQrDeprecated =
    "torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future PyTorch release.\nThe "
    "boolean parameter 'some' has been replaced with a string parameter 'mode'.\nQ, R = torch.qr(A, "
    "some)\nshould be replaced with\nQ, R = torch.linalg.qr(A, 'reduced' if some else 'complete')";

const char* kSymeigDeprecated =
    "torch.symeig is deprecated in favor of torch.linalg.eigh and will be removed in a future PyTorch "
    "release.\nThe default behavior has changed from using the upper triangular portion of the matrix by default "
    "to using the lower triangular portion.\nL, _ = torch.symeig(A, upper=upper)\nshould be replaced with\nL = "
    "torch.linalg.eigvalsh(A, UPLO='U' if upper else 'L')\nand\nL, V = torch.symeig(A, "
    "eigenvectors=True)\nshould be replaced with\nL, V = torch.linalg.eigh(A, UPLO='U' if upper else 'L')";

// torch.linalg.svd's driver= selects a cuSOLVER routine: refused on CPU, as PyTorch does.
void check_no_driver(const Parsed& p, int i, const char* name) {
  LOOM_CHECK(!p.has(i), Runtime, name,
             ": keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend.");
}

Result lu_row(const Parsed& p) {
  warn_deprecated(kLuDeprecated);
  auto [lu, piv] = ops::linalg_lu_factor(p.tensor(0), p.boolean(1), false, "torch.lu");
  if (!p.boolean(2)) return std::vector<Tensor>{lu, piv};
  Tensor a = p.tensor(0);
  // infos: LAPACK's getrf info per matrix (LinalgInfo's LU routine), as lu_factor_ex's
  return std::vector<Tensor>{lu, piv, ops::linalg_lu_factor_ex_info(a)};
}

// norm orders arrive as numbers (inf included) or, for matrices, as strings.
double order_of(const Parsed& p, int i, double absent) { return p.has(i) ? p.scalar(i).as_double() : absent; }

// linalg.norm: ord None over all or one dim is the 2-norm of the elements; a string or two dims
// make it a matrix norm; a number without dims needs a 1-d or 2-d input.
Result linalg_norm(const Parsed& p) {
  Tensor x = p.tensor(0);
  std::optional<DType> dtype = p.optional_dtype(4);
  bool keepdim = p.boolean(3);
  bool has_ord = p.index == 1 || p.has(1);
  ops::DimList dims = p.dims(2);
  if (p.has(2))
    LOOM_CHECK(dims.size() == 1 || dims.size() == 2, Runtime,
               "linalg.norm: If dim is specified, it must be of length 1 or 2. Got ", format_dims(dims));
  else if (has_ord)
    LOOM_CHECK(x->ndim() == 1 || x->ndim() == 2, Runtime,
               "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got ", x->ndim(), "D");
  bool matrix = p.index == 1 ? true : p.has(2) ? dims.size() == 2 : has_ord && x->ndim() == 2;
  if (!has_ord || !matrix) {
    if (p.index == 1) return ops::matrix_norm(x, p.string(1), 0, dims, keepdim, dtype);  // raises its error
    return ops::vector_norm(x, order_of(p, 1, 2), dims, keepdim, dtype);
  }
  Dims matrix_dims = p.has(2) ? Dims(dims.begin(), dims.end()) : Dims{-2, -1};
  if (p.index == 1) return ops::matrix_norm(x, p.string(1), 0, matrix_dims, keepdim, dtype);
  return ops::matrix_norm(x, "", order_of(p, 1, 2), matrix_dims, keepdim, dtype);
}

// The cross product of 3-vectors along dim, the operands broadcast: component i is
// a[i+1] b[i+2] - a[i+2] b[i+1] (indices mod 3), which rolls by one and two line up.
Tensor cross(const Tensor& a, const Tensor& b, int64_t dim) {
  LOOM_CHECK(a->ndim() == b->ndim(), Runtime, "linalg.cross: inputs must have the same number of dimensions. Got ",
             format_dims(a->sizes()), " and ", format_dims(b->sizes()));
  Dims shape = broadcast_shapes(a->sizes(), b->sizes());
  dim = wrap_dim(dim, static_cast<int64_t>(shape.size()));
  LOOM_CHECK(a->sizes()[dim] == 3 && b->sizes()[dim] == 3, Runtime, "linalg.cross: inputs dimension ", dim,
             " must have length 3. Got ", a->sizes()[dim], " and ", b->sizes()[dim]);
  Tensor x = ops::expand(a, shape), y = ops::expand(b, shape);
  Dims at{dim}, one{-1}, two{-2};
  return ops::sub(ops::mul(ops::roll(x, one, at), ops::roll(y, two, at)),
                  ops::mul(ops::roll(x, two, at), ops::roll(y, one, at)));
}

// torch.cross: dim None is the first dim of size 3 (deprecated in PyTorch 1.13, with its warning).
Result cross_row(const Parsed& p) {
  Tensor a = p.tensor(0), b = p.tensor(1);
  if (std::optional<int64_t> dim = p.optional_int64(2)) return cross(a, b, *dim);
  check_status(PyErr_WarnEx(PyExc_UserWarning,
                            "Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the "
                            "dim explicitly or simply use torch.linalg.cross.\nThe default value of dim will change "
                            "to agree with that of linalg.cross in a future release.",
                            1));
  Dims shape = broadcast_shapes(a->sizes(), b->sizes());
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] == 3) return cross(a, b, static_cast<int64_t>(d));
  LOOM_FAIL(Runtime, "no dimension of size 3 in input (shapes ", format_dims(a->sizes()), " and ",
            format_dims(b->sizes()), ")");
}

// renorm: each slice along dim whose p-norm exceeds maxnorm scaled to norm maxnorm (by
// maxnorm / (norm + 1e-7), PyTorch's factor).
Result renorm(const Parsed& p) {
  Tensor x = p.tensor(0);
  double order = p.scalar(1).as_double(), maxnorm = p.scalar(3).as_double();
  LOOM_CHECK(order > 0, Runtime, "renorm: non-positive-norm not supported (p=", order, ")");
  LOOM_CHECK(maxnorm >= 0, Runtime, "renorm: expected maxnorm to be >= 0 but got ", maxnorm);
  LOOM_CHECK(x->ndim() > 1, Runtime, "renorm: input needs at least 2 dimensions, got ", x->ndim(), " dimensions");
  int64_t dim = wrap_dim(p.int64(2), x->ndim());
  ops::DimList others;
  for (int64_t d = 0; d < x->ndim(); ++d)
    if (d != dim) others.push_back(d);
  Tensor norms = ops::vector_norm(x, order, others, true, std::nullopt);
  Tensor factor = ops::where(ops::binary(OpId::Gt, norms, Scalar(maxnorm)),
                             ops::div(Scalar(maxnorm), ops::add(norms, Scalar(1e-7))), Scalar(1.0));
  return ops::mul(x, factor);
}

int64_t compute_mode(const Parsed& p, int i) {
  if (!p.has(i)) return 0;
  std::string mode = p.string(i);
  if (mode == "use_mm_for_euclid_dist_if_necessary") return 0;
  if (mode == "use_mm_for_euclid_dist") return 1;
  if (mode == "donot_use_mm_for_euclid_dist") return 2;
  LOOM_FAIL(Value, mode, " is not a valid value for compute_mode");
}

const Row kRows[] = {
    {{"einsum(str equation, Tensor[] tensors)"}, kFunction, LOOM_BODY(ops::einsum(p.string(0), p.tensors(1)))},
    {{"tensordot(Tensor input, Tensor other, int[] dims_self, int[] dims_other)"}, kFunction,
     LOOM_BODY(ops::tensordot(p.tensor(0), p.tensor(1), p.int_list(2), p.int_list(3)))},
    {{"kron(Tensor input, Tensor other)"}, kBoth, LOOM_BODY(ops::kron(p.tensor(0), p.tensor(1)))},
    {{"outer(Tensor input, Tensor vec2)"}, kBoth, LOOM_BODY(ops::outer(p.tensor(0), p.tensor(1)))},
    {{"ger(Tensor input, Tensor vec2)"}, kBoth, LOOM_BODY(ops::outer(p.tensor(0), p.tensor(1)))},
    {{"inner(Tensor input, Tensor other)"}, kBoth, LOOM_BODY(ops::inner(p.tensor(0), p.tensor(1)))},
    {{"dot(Tensor input, Tensor tensor)"}, kBoth, LOOM_BODY(ops::dot(p.tensor(0), p.tensor(1)))},
    {{"vdot(Tensor input, Tensor other)"}, kBoth, LOOM_BODY(ops::dot(p.tensor(0), p.tensor(1)))},
    {{"mv(Tensor input, Tensor vec)"}, kBoth, LOOM_BODY(ops::mv(p.tensor(0), p.tensor(1)))},
    {{"addbmm(Tensor input, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1)"}, kAll,
     LOOM_BODY(ops::addbmm(p.tensor(0), p.tensor(1), p.tensor(2), p.scalar(3), p.scalar(4)))},
    {{"baddbmm(Tensor input, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1)"}, kAll,
     LOOM_BODY(ops::baddbmm(p.tensor(0), p.tensor(1), p.tensor(2), p.scalar(3), p.scalar(4)))},
    {{"addmv(Tensor input, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1)"}, kAll | kInplaceFunction,
     LOOM_BODY(ops::addmv(p.tensor(0), p.tensor(1), p.tensor(2), p.scalar(3), p.scalar(4)))},
    {{"addr(Tensor input, Tensor vec1, Tensor vec2, *, Scalar beta=1, Scalar alpha=1)"}, kAll,
     LOOM_BODY(ops::addr(p.tensor(0), p.tensor(1), p.tensor(2), p.scalar(3), p.scalar(4)))},
    {{"cross(Tensor input, Tensor other, int? dim=None)"}, kBoth, cross_row,
     "dim None: the first dim of size 3 (deprecated, as in PyTorch)."},
    {{"renorm(Tensor input, Scalar p, int dim, Scalar maxnorm)"}, kAll, renorm,
     "Each slice along dim whose p-norm exceeds maxnorm, scaled to norm maxnorm."},
    {{"chain_matmul(Tensor[] matrices)"}, kFunction, [](const Parsed& p) -> Result {
       std::vector<Tensor> ms = p.tensors(0);
       if (ms.size() == 1) return ops::clone(ms[0]);
       return ops::multi_dot(ms, "chain_matmul");
     }},
    {{"cdist(Tensor x1, Tensor x2, float p=2, str? compute_mode=None)"}, kFunction,
     LOOM_BODY(ops::cdist(p.tensor(0), p.tensor(1), p.real(2), compute_mode(p, 3))),
     "p = 2 uses matrix products when either input has more than 25 rows (compute_mode as PyTorch's)."},
    {{"cosine_similarity(Tensor x1, Tensor x2, int dim=1, float eps=1e-8)"}, kFunction,
     LOOM_BODY(ops::cosine_similarity(p.tensor(0), p.tensor(1), p.int64(2), p.real(3)))},
    {{"pairwise_distance(Tensor x1, Tensor x2, float p=2, float eps=1e-6, bool keepdim=False)"}, kFunction,
     LOOM_BODY(ops::pairwise_distance(p.tensor(0), p.tensor(1), p.real(2), p.real(3), p.boolean(4)))},

    // ---- loom.linalg ----
    {{"linalg_vector_norm(Tensor input, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, "
      "ScalarType? dtype=None)"},
     kFunction, LOOM_BODY(ops::vector_norm(p.tensor(0), p.scalar(1).as_double(), p.dims(2), p.boolean(3),
                                           p.optional_dtype(4)))},
    {{"linalg_matrix_norm(Tensor input, Scalar ord, int[] dim=[-2,-1], bool keepdim=False, *, "
      "ScalarType? dtype=None)",
      "linalg_matrix_norm(Tensor input, str ord='fro', int[] dim=[-2,-1], bool keepdim=False, *, "
      "ScalarType? dtype=None)"},
     kFunction, [](const Parsed& p) -> Result {
       std::string ord = p.index ? p.string(1) : "";
       return ops::matrix_norm(p.tensor(0), ord, p.index ? 0 : p.scalar(1).as_double(), p.int_list(2), p.boolean(3),
                               p.optional_dtype(4));
     },
     "ord 'nuc', 2 and -2 need singular values: NotImplementedError."},
    {{"linalg_norm(Tensor input, Scalar? ord=None, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)",
      "linalg_norm(Tensor input, str ord, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)"},
     kFunction, linalg_norm},
    {{"linalg_multi_dot(Tensor[] tensors)"}, kFunction, LOOM_BODY(ops::multi_dot(p.tensors(0)))},
    {{"linalg_cross(Tensor input, Tensor other, *, int dim=-1)"}, kFunction,
     LOOM_BODY(cross(p.tensor(0), p.tensor(1), p.int64(2)))},
    {{"linalg_vecdot(Tensor x, Tensor y, *, int dim=-1)"}, kFunction,
     LOOM_BODY(ops::vecdot(p.tensor(0), p.tensor(1), p.int64(2)))},

    // ---- factorizations and solvers: LAPACK steps (lazy/ops_lapack.cpp) ----
    {{"linalg_cholesky(Tensor input, *, bool upper=False)"}, kFunction,
     LOOM_BODY(ops::linalg_cholesky(p.tensor(0), p.boolean(1)))},
    {{"linalg_cholesky_ex(Tensor input, *, bool upper=False, bool check_errors=False)"}, kFunction,
     LOOM_BODY(named_pair("linalg_cholesky_ex", ops::linalg_cholesky_ex(p.tensor(0), p.boolean(1), p.boolean(2)), "L",
                          "info"))},
    {{"cholesky(Tensor input, bool upper=False)"}, kBoth, [](const Parsed& p) -> Result {
       warn_deprecated(kCholeskyDeprecated);
       return ops::linalg_cholesky(p.tensor(0), p.boolean(1), /*legacy=*/true);
     }},
    {{"linalg_inv(Tensor A)"}, kFunction, LOOM_BODY(ops::linalg_inv(p.tensor(0)))},
    {{"linalg_inv_ex(Tensor A, *, bool check_errors=False)"}, kFunction,
     LOOM_BODY(named_pair("linalg_inv_ex", ops::linalg_inv_ex(p.tensor(0), p.boolean(1)), "inverse", "info"))},
    {{"inverse(Tensor input)"}, kBoth, LOOM_BODY(ops::linalg_inv(p.tensor(0), /*legacy=*/true))},
    {{"linalg_solve(Tensor A, Tensor B, *, bool left=True)"}, kFunction,
     LOOM_BODY(ops::linalg_solve(p.tensor(0), p.tensor(1), p.boolean(2)))},
    {{"linalg_solve_triangular(Tensor input, Tensor B, *, bool upper, bool left=True, bool unitriangular=False)"},
     kFunction,
     LOOM_BODY(ops::linalg_solve_triangular(p.tensor(0), p.tensor(1), p.boolean(2), p.boolean(3), p.boolean(4)))},
    {{"triangular_solve(Tensor input, Tensor A, bool upper=True, bool transpose=False, bool unitriangular=False)"},
     kBoth, [](const Parsed& p) -> Result {
       warn_deprecated(kTriangularSolveDeprecated);
       return named_pair("triangular_solve",
                         ops::triangular_solve(p.tensor(0), p.tensor(1), p.boolean(2), p.boolean(3), p.boolean(4)),
                         "solution", "cloned_coefficient");
     }},
    {{"cholesky_solve(Tensor input, Tensor input2, bool upper=False)"}, kBoth,
     LOOM_BODY(ops::cholesky_solve(p.tensor(0), p.tensor(1), p.boolean(2)))},
    {{"cholesky_inverse(Tensor input, bool upper=False)"}, kBoth,
     LOOM_BODY(ops::cholesky_inverse(p.tensor(0), p.boolean(1)))},
    {{"linalg_det(Tensor A)"}, kFunction, LOOM_BODY(ops::linalg_det(p.tensor(0)))},
    {{"det(Tensor input)"}, kBoth, LOOM_BODY(ops::linalg_det(p.tensor(0)))},
    {{"linalg_slogdet(Tensor A)"}, kFunction,
     LOOM_BODY(named_pair("linalg_slogdet", ops::linalg_slogdet(p.tensor(0)), "sign", "logabsdet"))},
    {{"slogdet(Tensor input)"}, kBoth,
     LOOM_BODY(named_pair("slogdet", ops::linalg_slogdet(p.tensor(0)), "sign", "logabsdet"))},
    {{"logdet(Tensor input)"}, kBoth, LOOM_BODY(ops::logdet(p.tensor(0)))},
    {{"linalg_eigh(Tensor input, str UPLO='L')"}, kFunction,
     LOOM_BODY(named_pair("linalg_eigh", ops::linalg_eigh(p.tensor(0), p.string(1)), "eigenvalues", "eigenvectors"))},
    {{"linalg_eigvalsh(Tensor input, str UPLO='L')"}, kFunction,
     LOOM_BODY(ops::linalg_eigvalsh(p.tensor(0), p.string(1)))},

    // ---- SVD, QR, pinv, rank, cond, LU, least squares (lazy/ops_lapack.cpp) ----
    {{"linalg_svd(Tensor A, bool full_matrices=True, *, str? driver=None)"}, kFunction, [](const Parsed& p) -> Result {
       check_no_driver(p, 2, "torch.linalg.svd");
       return named_tuple("linalg_svd", tensors_of(ops::linalg_svd(p.tensor(0), p.boolean(1))), {"U", "S", "Vh"});
     }},
    {{"linalg_svdvals(Tensor A, *, str? driver=None)"}, kFunction, [](const Parsed& p) -> Result {
       check_no_driver(p, 1, "torch.linalg.svdvals");
       return ops::linalg_svdvals(p.tensor(0));
     }},
    {{"svd(Tensor input, bool some=True, bool compute_uv=True)"}, kBoth,
     LOOM_BODY(named_tuple("svd", tensors_of(ops::svd(p.tensor(0), p.boolean(1), p.boolean(2))), {"U", "S", "V"}))},
    {{"linalg_qr(Tensor A, str mode='reduced')"}, kFunction,
     LOOM_BODY(named_pair("linalg_qr", ops::linalg_qr(p.tensor(0), p.string(1)), "Q", "R"))},
    {{"qr(Tensor input, bool some=True)"}, kBoth, [](const Parsed& p) -> Result {
       warn_deprecated(kQrDeprecated);
       return named_pair("qr", ops::linalg_qr(p.tensor(0), p.boolean(1) ? "reduced" : "complete"), "Q", "R");
     }},
    {{"linalg_pinv(Tensor input, *, float? atol=None, float? rtol=None, bool hermitian=False)",
      "linalg_pinv(Tensor input, float rcond, bool hermitian=False)"},
     kFunction, [](const Parsed& p) -> Result {
       if (p.index == 1) return ops::linalg_pinv(p.tensor(0), {0.0, p.real(1)}, p.boolean(2));
       return ops::linalg_pinv(p.tensor(0), {p.optional_real(1), p.optional_real(2)}, p.boolean(3));
     }},
    {{"pinverse(Tensor input, float rcond=1e-15)"}, kBoth,
     LOOM_BODY(ops::linalg_pinv(p.tensor(0), {0.0, p.real(1)}, false))},
    {{"linalg_matrix_rank(Tensor input, *, float? atol=None, float? rtol=None, bool hermitian=False)",
      "linalg_matrix_rank(Tensor input, float tol, bool hermitian=False)"},
     kFunction, [](const Parsed& p) -> Result {
       if (p.index == 1) return ops::linalg_matrix_rank(p.tensor(0), {p.real(1), 0.0}, p.boolean(2));
       return ops::linalg_matrix_rank(p.tensor(0), {p.optional_real(1), p.optional_real(2)}, p.boolean(3));
     }},
    {{"linalg_cond(Tensor input, Scalar? p=None)", "linalg_cond(Tensor input, str p)"}, kFunction,
     [](const Parsed& p) -> Result {
       if (p.index == 1) return ops::linalg_cond(p.tensor(0), p.string(1), std::nullopt);
       std::optional<double> ord;
       if (p.has(1)) ord = p.scalar(1).as_double();
       return ops::linalg_cond(p.tensor(0), "", ord);
     }},
    {{"linalg_lu_factor(Tensor A, *, bool pivot=True)"}, kFunction,
     LOOM_BODY(named_pair("linalg_lu_factor",
                          ops::linalg_lu_factor(p.tensor(0), p.boolean(1), true, "torch.linalg.lu_factor"), "LU",
                          "pivots"))},
    {{"linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False)"}, kFunction,
     [](const Parsed& p) -> Result {
       auto [lu, piv] = ops::linalg_lu_factor(p.tensor(0), p.boolean(1), p.boolean(2), "torch.linalg.lu_factor_ex");
       return named_tuple("linalg_lu_factor_ex", {lu, piv, ops::linalg_lu_factor_ex_info(p.tensor(0))},
                          {"LU", "pivots", "info"});
     }},
    {{"linalg_lu(Tensor A, *, bool pivot=True)"}, kFunction,
     LOOM_BODY(named_tuple("linalg_lu", tensors_of(ops::linalg_lu(p.tensor(0), p.boolean(1))), {"P", "L", "U"}))},
    {{"linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False)"}, kFunction,
     LOOM_BODY(ops::linalg_lu_solve(p.tensor(0), p.tensor(1), p.tensor(2), p.boolean(3), p.boolean(4)))},
    {{"lu_solve(Tensor input, Tensor LU_data, Tensor LU_pivots)"}, kBoth, [](const Parsed& p) -> Result {
       warn_deprecated(kLuSolveDeprecated);
       return ops::linalg_lu_solve(p.tensor(1), p.tensor(2), p.tensor(0), true, false, "torch.lu_solve");
     }},
    {{"symeig(Tensor input, bool eigenvectors=False, bool upper=True)"}, kBoth, [](const Parsed& p) -> Result {
       warn_deprecated(kSymeigDeprecated);
       Tensor a = p.tensor(0);
       auto [w, v] = ops::linalg_eigh(a, p.boolean(2) ? "U" : "L");
       if (!p.boolean(1)) v = ops::full(Dims{0}, Scalar(int64_t{0}), a->dtype(), placement_of(a));
       return named_pair("symeig", {w, v}, "eigenvalues", "eigenvectors");
     },
     "Deprecated, as in PyTorch: linalg.eigh; eigenvectors an empty tensor unless asked for."},
    {{"lu(Tensor input, bool pivot=True, bool get_infos=False)"}, kBoth, lu_row,
     "Deprecated, as in PyTorch: (LU, pivots), with get_infos (LU, pivots, infos)."},
    {{"linalg_lstsq(Tensor input, Tensor b, float? rcond=None, *, str? driver=None)"}, kFunction,
     [](const Parsed& p) -> Result {
       std::optional<std::string> driver;
       if (p.has(3)) driver = p.string(3);
       std::optional<std::string_view> dv;
       if (driver) dv = *driver;
       return named_tuple("linalg_lstsq", ops::linalg_lstsq(p.tensor(0), p.tensor(1), p.optional_real(2), dv),
                          {"solution", "residuals", "rank", "singular_values"});
     },
     "driver 'gelsy' (the default), 'gels', 'gelsd' or 'gelss'; residuals with gelsd / gelss read the ranks (a sync)."},
};

}  // namespace

// loom.linalg.LinAlgError (torch.linalg.LinAlgError): ErrorKind::LinAlg, a RuntimeError.
PyObject* LinAlgError = nullptr;

void register_linalg_types(PyObject* module) {
  LinAlgError = check(PyErr_NewExceptionWithDoc(
      "loom.linalg.LinAlgError",
      "A matrix LAPACK found singular or not positive-definite (torch.linalg.LinAlgError).", PyExc_RuntimeError,
      nullptr));
  check_status(PyModule_AddObjectRef(module, "_LinAlgError", LinAlgError));
}

void add_linalg_rows(MethodDefs& defs) { add_rows(kRows, defs); }

}  // namespace loom::py
