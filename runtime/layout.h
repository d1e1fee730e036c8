// Layout: how a tensor's elements sit in its storage (sizes, strides, offset, in elements), and
// the view algebra on it.
//
// Views are metadata (DESIGN decision 4): reshape, permute, expand, slicing and friends produce a
// new Layout over the same storage and never copy. These functions are the single definition of
// each view's shape rule and its errors; materialized tensors use them directly and lazy view
// nodes (and fusion's index arithmetic) reuse them.
//
// Invariants of a Layout: sizes and strides have the same length; sizes are >= 0; strides may be
// 0 (broadcast) but are never negative; every element it addresses lies inside its storage.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "runtime/small_vector.h"

namespace loom {

using Dims = SmallVec<int64_t, 6>;
using IntSpan = std::span<const int64_t>;

// "[2, 3]", as PyTorch prints sizes in messages.
std::string format_dims(IntSpan dims);

int64_t numel_of(IntSpan sizes) noexcept;
Dims contiguous_strides(IntSpan sizes);
// The most dimensions a tensor has (numpy's limit): kernels, shape walks and Python conversions
// recurse or keep arrays per dimension, so a shape of 100,000 ones is refused where it is made.
inline constexpr size_t kMaxDims = 64;

// Raises RuntimeError when a shape has more than kMaxDims dimensions, a requested size is
// negative or the element count overflows int64.
void check_sizes(IntSpan sizes);
// Wraps a possibly negative dim into [0, ndim), raising IndexError as PyTorch does. A 0-d
// tensor accepts dims -1 and 0, as PyTorch allows.
int64_t wrap_dim(int64_t dim, int64_t ndim);
// Resolves one -1 in a requested shape against numel; raises on mismatch.
Dims infer_size(IntSpan shape, int64_t numel);
// numpy broadcasting of two shapes; raises RuntimeError naming the mismatched sizes.
Dims broadcast_shapes(IntSpan a, IntSpan b);

struct Layout {
  Dims sizes;
  Dims strides;
  int64_t offset = 0;

  static Layout contiguous(IntSpan sizes, int64_t offset = 0);

  int64_t ndim() const noexcept { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const noexcept { return numel_of(sizes); }
  bool is_contiguous() const noexcept;
  // The elements fill a block of memory exactly, each at its own address, in some dim order
  // (PyTorch's is_non_overlapping_and_dense): a permutation of a contiguous layout.
  bool is_non_overlapping_and_dense() const noexcept;
  // Several indices address one element: a dim of size > 1 with stride 0, as expand() makes
  // (what PyTorch's has_internal_overlap reports as certain; other overlaps it cannot tell).
  bool has_internal_overlap() const noexcept;
  // One past the last storage element this layout touches (offset when it has no elements).
  int64_t storage_end() const noexcept;

  friend bool operator==(const Layout&, const Layout&) = default;
};

// Whether two layouts of the same sizes place every element at the same distance from their
// first element, with no gaps: both row-major, or one dense layout in another dim order. Copying
// numel elements as one block between them then moves each element to its place.
bool same_dense_order(const Layout& a, const Layout& b) noexcept;

// The strides PyTorch's preserve_format gives a new tensor made like l (clone, to, *_like): l's
// own when l is non-overlapping and dense, else dense strides that keep the order of l's strides.
// l's element count must be representable (check_sizes).
Dims preserved_strides(const Layout& l);

Layout permute(const Layout& l, IntSpan dims);
Layout transpose(const Layout& l, int64_t dim0, int64_t dim1);
// sizes may hold -1 to keep a dimension; broadcast dimensions (new ones included) get stride 0.
Layout expand(const Layout& l, IntSpan sizes);
Layout squeeze(const Layout& l);
Layout squeeze(const Layout& l, int64_t dim);
Layout unsqueeze(const Layout& l, int64_t dim);
// Python slice semantics on one dim: negative bounds count from the end, bounds clamp to the
// size, step must be positive (PyTorch does not support negative steps).
Layout slice(const Layout& l, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop,
             int64_t step = 1);
// Strict form: start in range and start + length <= size, as torch.narrow requires.
Layout narrow(const Layout& l, int64_t dim, int64_t start, int64_t length);
Layout select(const Layout& l, int64_t dim, int64_t index);
// The same elements seen with shape `sizes` (already inferred, same numel) without copying, or
// nullopt when the strides cannot express it (then reshape must copy).
std::optional<Layout> view(const Layout& l, IntSpan sizes);

// Where the elements of `view` lie among those of `base`, both layouts over one storage, as a
// layout over base's elements in row-major order (PyTorch's view of a base, as_strided over it).
// Every view the view algebra makes of base is one, except where it merges dims that are
// neighbours in storage but not in base's dim order (base.t().view(-1) of a base stored
// transposed): nullopt then, and when an element of view is not one of base's or base's elements
// overlap.
std::optional<Layout> region_within(const Layout& base, const Layout& view);

// How `relative`, a layout over the elements of a base of `base_sizes` in row-major order (where
// a view lies in its base), steps through the base's dims: the index of its first element in
// each base dim, and for each of its own dims the base dim it steps along (-1 for dims that never
// step: size 1 or stride 0) and by how many of that dim's indices. nullopt where one of its dims
// steps across two base dims, or where it leaves the base.
struct StepsInBase {
  Dims start;  // per base dim
  Dims along;  // per dim of relative: a base dim, or -1
  Dims step;   // per dim of relative
};
std::optional<StepsInBase> steps_in_base(IntSpan base_sizes, const Layout& relative);

// The inverse of region_within: the layout over storage of `relative` (a layout over base's
// elements in row-major order), given base's layout over storage. nullopt where no strides
// express it (steps_in_base).
std::optional<Layout> place_within(const Layout& base, const Layout& relative);

}  // namespace loom
