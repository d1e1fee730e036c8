// Affine index maps: how a kernel's domain index reaches a value's own multi-index.
//
// node_index[t] = offset[t] + sum_d coeff(t, d) * domain_index[d]
//
// Broadcasts, permutes, slices, selects, unsqueezes and the reshapes that only split or merge
// dims compatibly are all affine, so a fused kernel reads any such view of a value with one
// multiply-add per domain dim. A view that is not affine (merging dims of a value that is
// computed, not stored) makes the partitioner store that value first.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/layout.h"

namespace loom::fusion {

struct AffineMap {
  int64_t domain_rank = 0;
  std::vector<int64_t> offset;  // one per node dim
  std::vector<int64_t> coeff;   // node dims x domain dims, row-major

  int64_t rank() const noexcept { return static_cast<int64_t>(offset.size()); }
  int64_t& at(int64_t t, int64_t d) { return coeff[static_cast<size_t>(t * domain_rank + d)]; }
  int64_t at(int64_t t, int64_t d) const { return coeff[static_cast<size_t>(t * domain_rank + d)]; }

  // node dim t = domain dim positions[t] (positions may be -1: that node dim is always 0).
  static AffineMap select_dims(int64_t domain_rank, IntSpan positions);
  static AffineMap identity(int64_t rank);

  friend bool operator==(const AffineMap&, const AffineMap&) = default;
};

// The map of an input broadcast to an output: dims align from the right; broadcast dims (size 1
// in the input) always read index 0.
AffineMap broadcast(const AffineMap& out, IntSpan out_shape, IntSpan in_shape);

// The map of a View's input, given the map of the view: the view's layout is relative to the
// input's row-major element order. nullopt when the result is not affine.
std::optional<AffineMap> through_view(const AffineMap& view_map, const Layout& relative, IntSpan in_shape);

// Zeroes the rows of size-1 dims (their index is always 0), so equal accesses compare equal.
void normalize(AffineMap& m, IntSpan shape);

// Element strides and offset over the domain for a buffer with `layout`, read through `m`.
void buffer_access(const AffineMap& m, const Layout& layout, Dims& strides, int64_t& offset);

// The element offsets read through `m` from a view whose layout `relative` is over a dense
// (row-major) input: strides per domain dim and an offset. Works for every view, including the
// ones through_view cannot express as an index map over the input's dims (a reshape merging
// dims that a transpose then splits), because a dense input's dims need not be recovered.
void dense_access(const AffineMap& m, const Layout& relative, Dims& strides, int64_t& offset);

}  // namespace loom::fusion
