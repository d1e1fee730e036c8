#include "lazy/region_gradients.h"

#include <algorithm>
#include <optional>

#include "lazy/dispatch.h"
#include "lazy/ops.h"

namespace loom {
namespace {

// A region that is a slab of the tensor along one dim: indices [start, start + length) of dim
// `dim` and every index of the others. `order` permutes the gradient's dims into the tensor's
// dim order (its size-1 dims that step along no dim last).
struct Slab {
  int64_t dim = 0, start = 0, length = 0;
  Dims order;
};

// The slab `region` is, or nullopt. A dim of size 1 is covered by any region: the slab is then
// along the first dim the region does not cover whole, or along dim 0 when it covers all.
std::optional<Slab> slab_of(const Layout& region, IntSpan shape) {
  std::optional<StepsInBase> steps = steps_in_base(shape, region);
  if (!steps || shape.empty()) return std::nullopt;
  auto n = static_cast<int64_t>(shape.size());
  Dims extent(n, 1), stepping_dim(n, -1);  // per tensor dim: the region's extent, its dim along it
  for (int64_t r = 0; r < region.ndim(); ++r) {
    int64_t d = steps->along[r];
    if (d < 0) {
      if (region.sizes[r] != 1) return std::nullopt;  // a broadcast dim: elements seen twice
      continue;
    }
    if (stepping_dim[d] >= 0 || steps->step[r] != 1) return std::nullopt;
    stepping_dim[d] = r;
    extent[d] = region.sizes[r];
  }
  std::optional<int64_t> partial;
  for (int64_t d = 0; d < n; ++d) {
    if (steps->start[d] == 0 && extent[d] == shape[d]) continue;
    if (partial) return std::nullopt;  // partial in two dims: a box, not a slab
    partial = d;
  }
  Slab s;
  s.dim = partial.value_or(0);
  s.start = steps->start[s.dim];
  s.length = extent[s.dim];
  for (int64_t d = 0; d < n; ++d)
    if (stepping_dim[d] >= 0) s.order.push_back(stepping_dim[d]);
  for (int64_t r = 0; r < region.ndim(); ++r)
    if (steps->along[r] < 0) s.order.push_back(r);
  return s;
}

}  // namespace

Tensor assemble_regions(const std::vector<RegionGradient>& parts, IntSpan shape, DType dtype) {
  // The slabs along the first part's slab dim that overlap none taken before them.
  std::vector<std::pair<Slab, const RegionGradient*>> slabs;
  std::vector<const RegionGradient*> others;
  for (const RegionGradient& p : parts) {
    std::optional<Slab> s = parts.size() > 1 ? slab_of(p.region, shape) : std::nullopt;
    bool fits = s && s->length > 0 && (slabs.empty() || s->dim == slabs.front().first.dim);
    for (auto& [taken, _] : slabs)
      if (fits && s->start < taken.start + taken.length && taken.start < s->start + s->length) fits = false;
    if (fits) slabs.emplace_back(std::move(*s), &p);
    else others.push_back(&p);
  }
  if (slabs.size() == 1) {
    others.push_back(slabs.front().second);
    slabs.clear();
  }
  const Tensor& like = parts.front().grad;
  Placement where = placement_of(like);
  Tensor sum;
  auto add = [&sum](Tensor t) { sum = sum ? ops::add(sum, t) : std::move(t); };
  if (!slabs.empty()) {
    std::sort(slabs.begin(), slabs.end(), [](const auto& a, const auto& b) { return a.first.start < b.first.start; });
    int64_t dim = slabs.front().first.dim;
    std::vector<Tensor> pieces;
    auto zeros_along = [&](int64_t length) {
      Dims sizes(shape);
      sizes[dim] = length;
      pieces.push_back(ops::full(sizes, Scalar(int64_t{0}), dtype, where));
    };
    int64_t at = 0;
    for (auto& [s, part] : slabs) {
      if (s.start > at) zeros_along(s.start - at);
      Dims sizes(shape);
      sizes[dim] = s.length;
      pieces.push_back(ops::reshape(ops::cast(ops::permute(part->grad, s.order), dtype), sizes));
      at = s.start + s.length;
    }
    if (at < shape[dim]) zeros_along(shape[dim] - at);
    add(ops::cat(pieces, dim));
  }
  for (const RegionGradient* p : others) {
    // A view of every element in order (x[:], a full narrow) passes its gradient through.
    if (p->region == Layout::contiguous(shape)) add(ops::cast(p->grad, dtype));
    else add(ops::view_scatter(ops::full(shape, Scalar(int64_t{0}), dtype, where), p->region, ops::cast(p->grad, dtype)));
  }
  return sum;
}

}  // namespace loom
