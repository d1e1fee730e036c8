#include "fusion/affine.h"

namespace loom::fusion {

AffineMap AffineMap::select_dims(int64_t domain_rank, IntSpan positions) {
  AffineMap m;
  m.domain_rank = domain_rank;
  m.offset.assign(positions.size(), 0);
  m.coeff.assign(positions.size() * static_cast<size_t>(domain_rank), 0);
  for (size_t t = 0; t < positions.size(); ++t)
    if (positions[t] >= 0) m.at(static_cast<int64_t>(t), positions[t]) = 1;
  return m;
}

AffineMap AffineMap::identity(int64_t rank) {
  Dims positions;
  for (int64_t d = 0; d < rank; ++d) positions.push_back(d);
  return select_dims(rank, positions);
}

void normalize(AffineMap& m, IntSpan shape) {
  for (int64_t t = 0; t < m.rank(); ++t) {
    if (shape[t] != 1) continue;
    m.offset[t] = 0;
    for (int64_t d = 0; d < m.domain_rank; ++d) m.at(t, d) = 0;
  }
}

AffineMap broadcast(const AffineMap& out, IntSpan out_shape, IntSpan in_shape) {
  auto n_in = static_cast<int64_t>(in_shape.size());
  int64_t shift = out.rank() - n_in;
  AffineMap m;
  m.domain_rank = out.domain_rank;
  m.offset.assign(static_cast<size_t>(n_in), 0);
  m.coeff.assign(static_cast<size_t>(n_in * out.domain_rank), 0);
  for (int64_t t = 0; t < n_in; ++t) {
    if (in_shape[t] == 1 && out_shape[t + shift] != 1) continue;  // broadcast: index 0
    m.offset[t] = out.offset[t + shift];
    for (int64_t d = 0; d < out.domain_rank; ++d) m.at(t, d) = out.at(t + shift, d);
  }
  normalize(m, in_shape);
  return m;
}

std::optional<AffineMap> through_view(const AffineMap& view_map, const Layout& relative, IntSpan in_shape) {
  std::optional<StepsInBase> steps = steps_in_base(in_shape, relative);
  if (!steps) return std::nullopt;
  AffineMap m;
  m.domain_rank = view_map.domain_rank;
  m.offset.assign(steps->start.begin(), steps->start.end());
  m.coeff.assign(in_shape.size() * static_cast<size_t>(view_map.domain_rank), 0);
  for (int64_t v = 0; v < relative.ndim(); ++v) {
    int64_t target = steps->along[v], c = steps->step[v];
    if (target < 0) continue;
    m.offset[target] += c * view_map.offset[v];
    for (int64_t d = 0; d < view_map.domain_rank; ++d) m.at(target, d) += c * view_map.at(v, d);
  }
  normalize(m, in_shape);
  return m;
}

void dense_access(const AffineMap& m, const Layout& relative, Dims& strides, int64_t& offset) {
  strides = Dims(static_cast<size_t>(m.domain_rank), 0);
  offset = relative.offset;
  for (int64_t v = 0; v < relative.ndim(); ++v) {
    if (relative.sizes[v] == 1) continue;
    offset += relative.strides[v] * m.offset[v];
    for (int64_t d = 0; d < m.domain_rank; ++d) strides[d] += relative.strides[v] * m.at(v, d);
  }
}

void buffer_access(const AffineMap& m, const Layout& layout, Dims& strides, int64_t& offset) {
  strides = Dims(static_cast<size_t>(m.domain_rank), 0);
  offset = 0;
  for (int64_t t = 0; t < m.rank(); ++t) {
    if (layout.sizes[t] == 1) continue;
    offset += layout.strides[t] * m.offset[t];
    for (int64_t d = 0; d < m.domain_rank; ++d) strides[d] += layout.strides[t] * m.at(t, d);
  }
}

}  // namespace loom::fusion
