// The linear-algebra family (lazy/ops_linalg.h) but einsum (lazy/einsum.cpp): composites with
// PyTorch's checks and messages.
#include "lazy/ops_linalg.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "lazy/autograd.h"
#include "lazy/ops_movement.h"
#include "runtime/error.h"

namespace loom::ops {
namespace {

const char* type_name(const Tensor& t) { return dtype_info(t->dtype()).scalar_type_name; }

void require_same_dtype(const Tensor& a, const Tensor& b) {
  LOOM_CHECK(a->dtype() == b->dtype(), Runtime, "expected scalar type ", type_name(a), " but found ", type_name(b));
}

// beta * input + alpha * product with PyTorch's rules for the two numbers: beta 0 ignores input
// (NaN included) and 1s scale nothing; integer products take them truncated to integers, except
// addr's, which refuse floating ones (`strict`).
Tensor scaled_sum(const Tensor& input, const Tensor& product, Scalar beta, Scalar alpha, bool strict = false) {
  if (product->dtype() == DType::Bool && input->dtype() == DType::Bool) {
    // bool inputs stay bool, as in PyTorch: beta * input + alpha * product is
    // (beta && input) || (alpha && product) (scaling by an integer would promote to int64)
    LOOM_CHECK(!beta.is_float() && !alpha.is_float(), Runtime,
               "Boolean beta and alpha only supported for Boolean results.");
    Tensor p = alpha.as_double() != 0 ? product : binary(OpId::LogicalAnd, product, Scalar(false));
    if (!(Dims(input->sizes()) == Dims(p->sizes()))) (void)loom::expand(Layout::contiguous(input->sizes()), p->sizes());
    if (beta.as_double() == 0.0) return p;
    return binary(OpId::LogicalOr, input, p);
  }
  if (!is_floating(product->dtype())) {
    LOOM_CHECK(!strict || !beta.is_float(), Runtime,
               "For integral input tensors, argument beta must not be a floating point number.");
    LOOM_CHECK(!strict || !alpha.is_float(), Runtime,
               "For integral input tensors, argument alpha must not be a floating point number.");
    beta = Scalar(beta.as_int());
    alpha = Scalar(alpha.as_int());
  }
  Tensor p = alpha.as_double() == 1.0 ? product : mul(product, alpha);
  // input broadcasts to the product, not the other way: checked with expand's words, without the
  // view node an expand would record (the add broadcasts it).
  if (!(Dims(input->sizes()) == Dims(p->sizes()))) (void)loom::expand(Layout::contiguous(input->sizes()), p->sizes());
  if (beta.as_double() == 0.0) return p;
  return add(beta.as_double() == 1.0 ? input : mul(input, beta), p);
}

void require_1d(const Tensor& t, const char* op, const char* what) {
  LOOM_CHECK(t->ndim() == 1, Runtime, op, ": Expected 1-D argument ", what, ", but got ", t->ndim(), "-D");
}

}  // namespace

Tensor tensordot(const Tensor& a, const Tensor& b, IntSpan dims_a, IntSpan dims_b) {
  LOOM_CHECK(dims_a.size() == dims_b.size(), Runtime, "both dimension lists should have same length");
  require_same_dtype(a, b);
  int64_t na = a->ndim(), nb = b->ndim();
  std::vector<bool> in_a(static_cast<size_t>(na), false), in_b(static_cast<size_t>(nb), false);
  Dims ca, cb;
  int64_t k = 1;
  for (size_t i = 0; i < dims_a.size(); ++i) {
    int64_t da = wrap_dim(dims_a[i], na), db = wrap_dim(dims_b[i], nb);
    LOOM_CHECK(a->sizes()[da] == b->sizes()[db], Runtime, "contracted dimensions need to match, but first has size ",
               a->sizes()[da], " in dim ", da, " and second has size ", b->sizes()[db], " in dim ", db);
    LOOM_CHECK(!in_a[da] && !in_b[db], Runtime, "dim ", in_a[da] ? da : db, " appears multiple times in the list of dims");
    in_a[da] = in_b[db] = true;
    ca.push_back(da);
    cb.push_back(db);
    k *= a->sizes()[da];
  }
  // a as [free, contracted], b as [contracted, free]: one matrix product.
  Dims order_a, order_b = cb, shape;
  int64_t m = 1, n = 1;
  for (int64_t d = 0; d < na; ++d)
    if (!in_a[d]) {
      order_a.push_back(d);
      shape.push_back(a->sizes()[d]);
      m *= a->sizes()[d];
    }
  for (int64_t d : ca) order_a.push_back(d);
  for (int64_t d = 0; d < nb; ++d)
    if (!in_b[d]) {
      order_b.push_back(d);
      shape.push_back(b->sizes()[d]);
      n *= b->sizes()[d];
    }
  Tensor left = reshape(permute(a, order_a), Dims{m, k});
  Tensor right = reshape(permute(b, order_b), Dims{k, n});
  return reshape(mm(left, right), shape);
}

Tensor tensordot(const Tensor& a, const Tensor& b, int64_t n) {
  LOOM_CHECK(n >= 0, Runtime, "tensordot expects dims >= 0, but got dims=", n);
  Dims da, db;
  for (int64_t i = 0; i < n; ++i) {
    da.push_back(i - n);
    db.push_back(i);
  }
  return tensordot(a, b, da, db);
}

// a's elements times the blocks of b: a viewed as [a0, 1, a1, 1, ...] times b as [1, b0, 1, b1, ...]
// (both padded to the same rank), merged pairwise.
Tensor kron(const Tensor& a, const Tensor& b) {
  size_t n = static_cast<size_t>(std::max(a->ndim(), b->ndim()));
  Dims sa(n - static_cast<size_t>(a->ndim()), 1), sb(n - static_cast<size_t>(b->ndim()), 1);
  for (int64_t s : a->sizes()) sa.push_back(s);
  for (int64_t s : b->sizes()) sb.push_back(s);
  Dims va, vb, merged;
  for (size_t i = 0; i < n; ++i) {
    va.push_back(sa[i]);
    va.push_back(1);
    vb.push_back(1);
    vb.push_back(sb[i]);
    merged.push_back(sa[i] * sb[i]);
  }
  return reshape(mul(reshape(a, va), reshape(b, vb)), merged);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  require_1d(a, "outer", "self");
  require_1d(b, "outer", "vec2");
  return mul(unsqueeze(a, 1), unsqueeze(b, 0));
}

Tensor inner(const Tensor& a, const Tensor& b) {
  if (a->ndim() == 0 || b->ndim() == 0) return mul(a, b);
  int64_t ka = a->sizes()[a->ndim() - 1], kb = b->sizes()[b->ndim() - 1];
  LOOM_CHECK(ka == kb, Runtime, "inner() the last dimension must match on both input tensors but got shapes ",
             format_dims(a->sizes()), " and ", format_dims(b->sizes()));
  return tensordot(a, b, Dims{-1}, Dims{-1});
}

Tensor dot(const Tensor& a, const Tensor& b, const char* name) {
  LOOM_CHECK(a->ndim() == 1 && b->ndim() == 1, Runtime, "1D tensors expected, but got ", a->ndim(), "D and ", b->ndim(),
             "D tensors");
  LOOM_CHECK(a->dtype() == b->dtype(), Runtime, name, " : expected both vectors to have same dtype, but found ",
             type_name(a), " and ", type_name(b));
  return matmul(a, b);  // its size check words PyTorch's dot message
}

Tensor mv(const Tensor& m, const Tensor& v) {
  LOOM_CHECK(m->ndim() == 2 && v->ndim() == 1, Runtime, "vector + matrix @ vector expected, got 1, ", m->ndim(), ", ",
             v->ndim());
  require_same_dtype(m, v);
  return matmul(m, v);
}

Tensor addbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, Scalar beta, Scalar alpha) {
  LOOM_CHECK(b1->ndim() == 3, Runtime, "batch1 must be a 3D tensor");
  LOOM_CHECK(b2->ndim() == 3, Runtime, "batch2 must be a 3D tensor");
  LOOM_CHECK(b1->sizes()[0] == b2->sizes()[0], Runtime, "batch1 and batch2 must have same number of batches, got ",
             b1->sizes()[0], " and ", b2->sizes()[0]);
  // The sum over the batch of b1[i] @ b2[i] is one product: [n, B*k] @ [B*k, p].
  int64_t batches = b1->sizes()[0], n = b1->sizes()[1], k = b1->sizes()[2], p = b2->sizes()[2];
  LOOM_CHECK(b2->sizes()[1] == k, Runtime, "Expected size for first two dimensions of batch2 tensor to be: [", batches,
             ", ", k, "] but got: [", batches, ", ", b2->sizes()[1], "].");
  Tensor left = reshape(permute(b1, Dims{1, 0, 2}), Dims{n, batches * k});
  Tensor right = reshape(b2, Dims{batches * k, p});
  return scaled_sum(input, mm(left, right), beta, alpha);
}

Tensor addmm(const Tensor& input, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
  return scaled_sum(input, mm(a, b), beta, alpha);
}

Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, Scalar beta, Scalar alpha) {
  return scaled_sum(input, bmm(b1, b2), beta, alpha);
}

Tensor addmv(const Tensor& input, const Tensor& m, const Tensor& v, Scalar beta, Scalar alpha) {
  LOOM_CHECK(m->ndim() == 2 && v->ndim() == 1 && m->sizes()[1] == v->sizes()[0], Runtime, "size mismatch, got ",
             input->ndim() ? input->sizes()[0] : 1, ", ", m->ndim() == 2 ? m->sizes()[0] : 0, "x",
             m->ndim() == 2 ? m->sizes()[1] : 0, ",", v->ndim() == 1 ? v->sizes()[0] : 0);
  return scaled_sum(input, mv(m, v), beta, alpha);
}

Tensor addr(const Tensor& input, const Tensor& v1, const Tensor& v2, Scalar beta, Scalar alpha) {
  require_1d(v1, "addr", "vec1");
  require_1d(v2, "addr", "vec2");
  return scaled_sum(input, outer(v1, v2), beta, alpha, true);
}

// The cheapest order of a chain of products (the classic dynamic program over split points),
// then the products in that order.
Tensor multi_dot(const std::vector<Tensor>& xs, const char* name) {
  size_t n = xs.size();
  LOOM_CHECK(n >= 2, Runtime, name, "(): expected at least 2 tensors but got ", n);
  bool chain = std::string_view(name) == "chain_matmul";
  std::vector<Tensor> ms;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = xs[i];
    bool end = i == 0 || i + 1 == n;
    if (chain) {
      LOOM_CHECK(t->ndim() == 2, Runtime, "Tensor dimension is ", t->ndim(), ", expected 2 instead.");
    } else if (i == 0) {
      LOOM_CHECK(t->ndim() == 1 || t->ndim() == 2, Runtime, name, "(): the first tensor must be 1D or 2D but got ",
                 t->ndim(), "D");
    } else if (i + 1 == n) {
      LOOM_CHECK(t->ndim() == 1 || t->ndim() == 2, Runtime, name, "(): the last tensor must be 1D or 2D but got ",
                 t->ndim(), "D");
    } else {
      LOOM_CHECK(t->ndim() == 2, Runtime, name, "(): tensor ", i, " must be 2D but got ", t->ndim(), "D");
    }
    LOOM_CHECK(t->dtype() == xs[0]->dtype(), Runtime, name, "(): all tensors must have be the same dtype but tensor 0 is ",
               dtype_name(xs[0]->dtype()), " and tensor ", i, " ", dtype_name(t->dtype()));
    // Vectors at the ends as a row and a column.
    ms.push_back(t->ndim() == 1 && end ? (i == 0 ? unsqueeze(t, 0) : unsqueeze(t, 1)) : t);
  }
  for (size_t i = 0; i + 1 < n; ++i)
    LOOM_CHECK(ms[i]->sizes()[1] == ms[i + 1]->sizes()[0], Runtime, name, "(): tensors ", i, " and ", i + 1,
               " with shapes ", format_dims(xs[i]->sizes()), " and ", format_dims(xs[i + 1]->sizes()),
               " cannot be multiplied");
  // dims[i] x dims[i + 1] is matrix i.
  std::vector<int64_t> dims{ms[0]->sizes()[0]};
  for (const Tensor& m : ms) dims.push_back(m->sizes()[1]);
  std::vector<std::vector<int64_t>> cost(n, std::vector<int64_t>(n, 0)), split(n, std::vector<int64_t>(n, 0));
  for (size_t len = 1; len < n; ++len)
    for (size_t i = 0; i + len < n; ++i) {
      size_t j = i + len;
      cost[i][j] = std::numeric_limits<int64_t>::max();
      for (size_t k = i; k < j; ++k) {
        int64_t c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1];
        if (c < cost[i][j]) {
          cost[i][j] = c;
          split[i][j] = static_cast<int64_t>(k);
        }
      }
    }
  auto product = [&](auto&& self, size_t i, size_t j) -> Tensor {
    if (i == j) return ms[i];
    auto k = static_cast<size_t>(split[i][j]);
    return mm(self(self, i, k), self(self, k + 1, j));
  };
  Tensor out = product(product, 0, n - 1);
  if (xs[0]->ndim() == 1) out = squeeze(out, DimList{0});
  if (xs[n - 1]->ndim() == 1) out = squeeze(out, DimList{-1});
  return out;
}

// An order as PyTorch's messages print it: inf, -inf, -1, 0.5.
static std::string order_text(double ord) {
  if (std::isinf(ord)) return ord > 0 ? "inf" : "-inf";
  if (ord == std::trunc(ord) && std::fabs(ord) < 1e15) return std::to_string(static_cast<int64_t>(ord));
  std::ostringstream out;
  out << ord;
  return out.str();
}

Tensor vector_norm(const Tensor& x0, double ord, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  LOOM_CHECK(is_floating(x0->dtype()), Runtime,
             "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ", type_name(x0));
  if (dtype)
    LOOM_CHECK(is_floating(*dtype), Runtime, "linalg.vector_norm: dtype should be floating point or complex, but got ",
               dtype_info(*dtype).scalar_type_name);
  Tensor x = dtype ? cast(x0, *dtype) : x0;
  // Negative orders have no identity either (PyTorch refuses them too); nan and positive ones give 0.
  LOOM_CHECK(!(std::isinf(ord) || ord < 0) || reduced_count(x->sizes(), dims) > 0, Runtime,
             "linalg.vector_norm cannot compute the ", order_text(ord), " norm on an empty tensor because the operation does not have an identity");
  return norm(x, ord, dims, keepdim);
}

Tensor matrix_norm(const Tensor& x, std::string_view ord, double number_ord, IntSpan dims, bool keepdim,
                   std::optional<DType> dtype) {
  LOOM_CHECK(x->ndim() >= 2, Runtime, "linalg.matrix_norm: The input tensor A must have at least 2 dimensions.");
  LOOM_CHECK(dims.size() == 2, Runtime, "linalg.matrix_norm: dim must be a 2-tuple. Got ", format_dims(dims));
  int64_t d0 = wrap_dim(dims[0], x->ndim()), d1 = wrap_dim(dims[1], x->ndim());
  LOOM_CHECK(d0 != d1, Runtime, "linalg.matrix_norm: dims must be different. Got (", dims[0], ", ", dims[1], ")");
  if (ord == "fro") return vector_norm(x, 2, DimList{d0, d1}, keepdim, dtype);
  if (ord == "nuc" || (ord.empty() && std::abs(number_ord) == 2)) {
    // The singular values of the matrices over (d0, d1): their sum, largest or smallest.
    LOOM_CHECK(is_floating(x->dtype()), Runtime,
               "linalg.matrix_norm: Expected a floating point or complex tensor as input. Got ", type_name(x));
    Tensor a = dtype ? cast(x, *dtype) : x;
    Tensor s = linalg_svdvals(movedim(a, Dims{d0, d1}, Dims{-2, -1}));
    Tensor out = ord == "nuc" ? sum(s, DimList{-1}) : number_ord > 0 ? amax(s, DimList{-1}) : amin(s, DimList{-1});
    if (keepdim) {
      out = unsqueeze(out, std::min(d0, d1));
      out = unsqueeze(out, std::max(d0, d1));
    }
    return out;
  }
  LOOM_CHECK(ord.empty() && (std::abs(number_ord) == 1 || std::isinf(number_ord)), Runtime,
             "linalg.matrix_norm: Order ", ord.empty() ? std::to_string(static_cast<int64_t>(number_ord)) : std::string(ord),
             " not supported.");
  LOOM_CHECK(is_floating(x->dtype()), Runtime,
             "linalg.matrix_norm: Expected a floating point or complex tensor as input. Got ", type_name(x));
  Tensor a = unary(OpId::Abs, dtype ? cast(x, *dtype) : x);
  // ord 1: the largest column sum (summed over the rows d0), inf: the largest row sum; negative
  // orders the smallest.
  bool columns = std::abs(number_ord) == 1;
  int64_t summed = columns ? d0 : d1, kept = columns ? d1 : d0;
  Tensor sums = sum(a, DimList{summed}, true);
  Tensor out = number_ord > 0 ? amax(sums, DimList{kept}, true) : amin(sums, DimList{kept}, true);
  if (!keepdim) out = squeeze(out, DimList{std::max(d0, d1), std::min(d0, d1)});
  return out;
}

// Distances through matrix products (p = 2): |x|^2 + |y|^2 - 2 x.y, clamped at 0 (rounding can
// make it negative); the root's gradient is 0 where the distance is 0, as PyTorch's
// _euclidean_dist_backward, not the infinity of sqrt at 0.
static Tensor euclidean_by_products(const Tensor& x1, const Tensor& x2) {
  Tensor n1 = sum(mul(x1, x1), DimList{-1}, true);                    // [..., P, 1]
  Tensor n2 = transpose(sum(mul(x2, x2), DimList{-1}, true), -2, -1);  // [..., 1, R]
  Tensor squared = sub(add(n1, n2), mul(matmul(x1, transpose(x2, -2, -1)), Scalar(2.0)));
  Tensor positive = binary(OpId::Gt, squared, Scalar(int64_t{0}));
  Tensor safe = where(positive, squared, Scalar(int64_t{1}));
  return where(positive, unary(OpId::Sqrt, safe), Scalar(int64_t{0}));
}

Tensor cdist(const Tensor& x1, const Tensor& x2, double p, int64_t compute_mode) {
  LOOM_CHECK(x1->ndim() >= 2, Runtime, "cdist only supports at least 2D tensors, X1 got: ", x1->ndim(), "D");
  LOOM_CHECK(x2->ndim() >= 2, Runtime, "cdist only supports at least 2D tensors, X2 got: ", x2->ndim(), "D");
  int64_t c1 = x1->sizes()[x1->ndim() - 1], c2 = x2->sizes()[x2->ndim() - 1];
  LOOM_CHECK(c1 == c2, Runtime, "X1 and X2 must have the same number of columns. X1: ", c1, " X2: ", c2);
  LOOM_CHECK(is_floating(x1->dtype()), Runtime, "cdist only supports floating-point dtypes, X1 got: ", type_name(x1));
  LOOM_CHECK(is_floating(x2->dtype()), Runtime, "cdist only supports floating-point dtypes, X2 got: ", type_name(x2));
  LOOM_CHECK(p >= 0, Runtime, "cdist only supports non-negative p values");
  require_same_dtype(x1, x2);
  int64_t rows1 = x1->sizes()[x1->ndim() - 2], rows2 = x2->sizes()[x2->ndim() - 2];
  // The batch dims broadcast.
  Dims batch = broadcast_shapes(x1->sizes().first(static_cast<size_t>(x1->ndim() - 2)),
                                x2->sizes().first(static_cast<size_t>(x2->ndim() - 2)));
  auto batched = [&](const Tensor& t, int64_t rows) {
    Dims shape = batch;
    shape.push_back(rows);
    shape.push_back(c1);
    return expand(t, shape);
  };
  Tensor a = batched(x1, rows1), b = batched(x2, rows2);
  if (c1 == 0) {  // no coordinates: every distance is 0
    Dims shape = batch;
    shape.push_back(rows1);
    shape.push_back(rows2);
    Tensor zeros = full(shape, Scalar(int64_t{0}), x1->dtype(), {x1->device(), x1->is_lazy()});
    record_zero_derivative("CdistBackward0", {x1.get(), x2.get()}, *zeros);
    return zeros;
  }
  if (p == 2 && (compute_mode == 1 || (compute_mode == 0 && (rows1 > 25 || rows2 > 25))))
    return euclidean_by_products(a, b);
  // Every pair's difference [..., P, R, M], reduced by the p-norm over M (one fused row kernel
  // in lazy mode).
  return norm(sub(unsqueeze(a, -2), unsqueeze(b, -3)), p, DimList{-1}, false);
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  ResultType type;
  type.add_tensor(x1->dtype(), x1->ndim());
  type.add_tensor(x2->dtype(), x2->ndim());
  DType common = type.get();
  LOOM_CHECK(is_floating(common), Runtime, "expected common dtype to be floating point, yet common dtype is ",
             dtype_info(common).scalar_type_name);
  Dims shape = broadcast_shapes(x1->sizes(), x2->sizes());
  Tensor a = expand(cast(x1, common), shape), b = expand(cast(x2, common), shape);
  auto unit = [&](const Tensor& t) {
    return div(t, clamp(norm(t, 2, DimList{dim}, true), Arg(Scalar(eps)), std::nullopt));
  };
  return sum(mul(unit(a), unit(b)), DimList{dim});
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  int64_t last = std::max(x1->ndim(), x2->ndim()) - 1;
  Tensor diff = add(sub(x1, x2), Scalar(eps));
  if (last < 0) return norm(diff, p, DimList{}, keepdim);
  return norm(diff, p, DimList{last}, keepdim);
}

Tensor vecdot(const Tensor& x, const Tensor& y, int64_t dim) {
  return sum(mul(x, y), DimList{dim});
}

}  // namespace loom::ops
