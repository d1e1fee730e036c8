// The gradient of a tensor several of whose views select regions of it (q, k, v = qkv.unbind(0);
// x.split(n); x[:, :k] and x[:, k:]): each view's gradient lies in its region of zeros of the
// tensor's shape, and the tensor's gradient is their sum. Adding those zero-filled tensors
// writes and reads the whole tensor once per view; where the regions are disjoint slabs along
// one dim (what split, chunk, unbind, narrow, select and step-1 slices make), the sum is one
// concatenation of the views' gradients, with zeros for the gaps between them, which writes each
// element once. The autograd engine (lazy/autograd.cpp) gathers the gradients of such views
// before it adds them, and calls assemble_regions.
#pragma once

#include <vector>

#include "lazy/tensor.h"
#include "runtime/layout.h"

namespace loom {

// A view's gradient and where the view lies in its input: `region`, a layout over the input's
// elements in row-major order (region_within) that addresses each element at most once.
struct RegionGradient {
  Layout region;
  Tensor grad;  // of the region's shape
};

// The sum over `parts` of zeros of `shape` and `dtype` with each part's gradient at its region.
// Parts whose regions are disjoint slabs along one dim are concatenated; any others (overlapping
// regions, regions strided in several dims) are added as zero-filled tensors, as one view's
// gradient is.
Tensor assemble_regions(const std::vector<RegionGradient>& parts, IntSpan shape, DType dtype);

}  // namespace loom
