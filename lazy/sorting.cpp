#include "lazy/sorting.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "lazy/sync.h"
#include "runtime/error.h"

namespace loom::ops {
namespace {

Attrs attrs_of(std::initializer_list<int64_t> values) {
  Attrs a;
  for (int64_t v : values) a.push_back(v);
  return a;
}

}  // namespace

// ---- sorting and selection ----

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  return apply(OpId::Sort, {Arg(x)}, attrs_of({x->ndim() == 0 ? 0 : wrap_dim(dim, x->ndim()), descending}));
}

std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  Tensor indices = argsort(x, dim, descending);
  return {gather(x, dim, indices), indices};
}

Tensor msort(const Tensor& x) { return sort(x, 0).first; }

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  return detail::along(x, dim, [&](const Tensor& v, int64_t d) {
    LOOM_CHECK(k >= 0 && k <= v->sizes()[d], Runtime, "selected index k out of range");
    Tensor indices = narrow(argsort(v, d, largest), d, 0, k);
    return std::pair{gather(v, d, indices), indices};
  });
}

std::pair<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  return detail::along(x, dim, [&](const Tensor& v, int64_t d) {
    LOOM_CHECK(v->sizes()[d] > 0, Index, "kthvalue(): Expected reduction dim ", d, " to have non-zero size.");
    LOOM_CHECK(k >= 1 && k <= v->sizes()[d], Runtime, "kthvalue(): selected number k out of range for dimension ",
               d);
    Tensor indices = narrow(argsort(v, d), d, k - 1, 1);
    Tensor values = gather(v, d, indices);
    if (keepdim || x->ndim() == 0) return std::pair{values, indices};
    return std::pair{squeeze(values, DimList{d}), squeeze(indices, DimList{d})};
  });
}

// ---- binary search ----

Tensor searchsorted(const Tensor& sorted, const Arg& values, bool out_int32, bool right, const Tensor* sorter) {
  // A number is searched as a 0-d tensor of its own kind; the kernel compares in the common dtype.
  Tensor v = values.is_tensor() ? values.tensor
                                : full(Dims{}, values.scalar, values.scalar.is_float() ? DType::Float64 : DType::Int64,
                                       {sorted->device(), sorted->is_lazy()});
  std::vector<Arg> args{Arg(sorted), Arg(v)};
  if (sorter) args.emplace_back(*sorter);
  return apply(OpId::SearchSorted, args, attrs_of({right, out_int32}));
}

Tensor bucketize(const Arg& input, const Tensor& boundaries, bool out_int32, bool right) {
  LOOM_CHECK(boundaries->ndim() == 1, Runtime, "boundaries tensor must be 1 dimension, but got dim(",
             boundaries->ndim(), ")");
  return searchsorted(boundaries, input, out_int32, right);
}

// ---- unique: on the host, after a sync (the result's size depends on the values) ----

namespace {

// The input as host rows to compare: `count` rows of `width` values (double for floats, int64
// otherwise); a row is one element, or one slice along dim.
struct Rows {
  Array host;       // the compared values, rows contiguous
  Array original;   // the input's own values, rows contiguous (copied into the results)
  int64_t count = 0, width = 1;
  Dims moved;       // the shape of `original` (dim first when there is one)
  bool floating = false;
};

Rows rows_of(const Tensor& x, std::optional<int64_t> dim) {
  sync_for(SyncCause::DataDependentShape, *x);
  Rows r;
  r.floating = is_floating(x->dtype());
  Array a = x->array();
  if (dim) a = a.view_as(loom::permute(a.layout, [&] {
    Dims order{wrap_dim(*dim, a.ndim())};
    for (int64_t d = 0; d < a.ndim(); ++d)
      if (d != order[0]) order.push_back(d);
    return order;
  }()));
  r.original = copy_to(a, a.dtype, kCPU);
  r.host = copy_to(a, r.floating ? DType::Float64 : DType::Int64, kCPU);
  r.moved = Dims(a.sizes());
  r.count = dim ? (a.ndim() ? a.sizes()[0] : 1) : a.numel();
  r.width = dim ? a.numel() / std::max<int64_t>(r.count, 1) : 1;
  return r;
}

// Compares rows i and j lexicographically: < 0, 0 (equal; NaN equals nothing) or > 0.
template <typename T>
int compare_rows(const T* v, int64_t width, int64_t i, int64_t j) {
  for (int64_t k = 0; k < width; ++k) {
    T a = v[i * width + k], b = v[j * width + k];
    if (a < b) return -1;
    if (a > b) return 1;
    if (!(a == b)) {  // a NaN: after every number, and unequal to everything
      if constexpr (std::is_floating_point_v<T>) {
        bool an = std::isnan(a), bn = std::isnan(b);
        if (an != bn) return an ? 1 : -1;
        return i < j ? -1 : 1;
      }
    }
  }
  return 0;
}

// The results from groups: `first[g]` is a row of group g, `group[i]` row i's group.
Unique results(const Tensor& x, const Rows& r, std::optional<int64_t> dim, const std::vector<int64_t>& first,
               const std::vector<int64_t>& group) {
  auto groups = static_cast<int64_t>(first.size());
  Dims value_shape = r.moved;
  if (dim) value_shape[0] = groups;
  else value_shape = Dims{groups};
  Array values = empty(value_shape, x->dtype(), kCPU);
  size_t row_bytes = static_cast<size_t>(r.width) * itemsize(x->dtype());
  for (int64_t g = 0; g < groups; ++g)
    std::memcpy(static_cast<char*>(values.data()) + static_cast<size_t>(g) * row_bytes,
                static_cast<const char*>(r.original.data()) + static_cast<size_t>(first[static_cast<size_t>(g)]) * row_bytes,
                row_bytes);
  if (dim) {  // dim back in its place
    int64_t d = wrap_dim(*dim, x->ndim());
    Dims order;  // the moved dims' positions in x's order: dim d was moved first
    for (int64_t k = 0; k < x->ndim(); ++k) order.push_back(k < d ? k + 1 : k == d ? 0 : k);
    values = values.view_as(loom::permute(values.layout, order));
  }
  Array inverse = empty(dim ? Dims{r.count} : Dims(x->sizes()), DType::Int64, kCPU);
  std::copy(group.begin(), group.end(), static_cast<int64_t*>(inverse.data()));
  Array counts = empty(Dims{groups}, DType::Int64, kCPU);
  int64_t* c = static_cast<int64_t*>(counts.data());
  std::fill(c, c + groups, 0);
  for (int64_t g : group) ++c[g];
  auto place = [&](const Array& a) {
    return make_tensor(copy_to(a, a.dtype, x->device()), x->is_lazy());
  };
  return {place(values), place(inverse), place(counts)};
}

template <typename Visit>
void visit_rows(const Rows& r, Visit&& visit) {
  if (r.floating) visit(static_cast<const double*>(r.host.data()));
  else visit(static_cast<const int64_t*>(r.host.data()));
}

}  // namespace

Unique unique(const Tensor& x, std::optional<int64_t> dim) {
  Rows r = rows_of(x, dim);
  std::vector<int64_t> first, group(static_cast<size_t>(r.count));
  visit_rows(r, [&](const auto* v) {
    std::vector<int64_t> order(static_cast<size_t>(r.count));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t i, int64_t j) { return compare_rows(v, r.width, i, j) < 0; });
    for (size_t k = 0; k < order.size(); ++k) {
      if (k == 0 || compare_rows(v, r.width, order[k - 1], order[k]) != 0) first.push_back(order[k]);
      group[static_cast<size_t>(order[k])] = static_cast<int64_t>(first.size()) - 1;
    }
  });
  return results(x, r, dim, first, group);
}

Unique unique_consecutive(const Tensor& x, std::optional<int64_t> dim) {
  Rows r = rows_of(x, dim);
  std::vector<int64_t> first, group(static_cast<size_t>(r.count));
  visit_rows(r, [&](const auto* v) {
    for (int64_t i = 0; i < r.count; ++i) {
      if (i == 0 || compare_rows(v, r.width, i - 1, i) != 0) first.push_back(i);
      group[static_cast<size_t>(i)] = static_cast<int64_t>(first.size()) - 1;
    }
  });
  return results(x, r, dim, first, group);
}

}  // namespace loom::ops
