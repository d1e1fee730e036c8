// The linear-algebra family as Python: the op table's rows (pyext/op_table.h) of
// lazy/ops_linalg.h, named as PyTorch's C++ functions are (so their TypeErrors are the same):
// loom.linalg (pyext/loom/linalg.py) names the `linalg_*` rows as torch.linalg does, and
// einsum(equation, *operands), tensordot's dims forms and chain_matmul(*matrices) wrap rows in
// pyext/loom/_functional.py.
#include <cmath>

#include "lazy/ops_linalg.h"
#include "pyext/op_table.h"
#include "runtime/error.h"

namespace loom::py {
namespace {


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
    {{"linalg_vecdot(Tensor x, Tensor y, *, int dim=-1)"}, kFunction,
     LOOM_BODY(ops::vecdot(p.tensor(0), p.tensor(1), p.int64(2)))},
};

}  // namespace

void add_linalg_rows(MethodDefs& defs) { add_rows(kRows, defs); }

}  // namespace loom::py
