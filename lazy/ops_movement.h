// The data-movement family of the op library (PyTorch's names and semantics): views that pick
// diagonals and windows, copies that roll, rotate, repeat and tile, scatters and index updates,
// and the ops whose result size depends on the data.
//
// Nearly all of them are composites of the primitives (View, Index, IndexPut, Gather, ScatterAdd,
// Cat, elementwise ops), so both modes, fusion and autograd come with them; the two primitives of
// their own (ScatterReduce, ViewDtype: lazy/ops_data.cpp) say why they are primitives.
//
// Data-dependent sizes. nonzero, argwhere, where(cond), masked_select, repeat_interleave with a
// tensor of repeats and boolean-mask indexing return a tensor whose size depends on the values of
// an input: on the lazy device they are sync points (the input is computed, as item() computes
// it), and every one of them reads those values through values_for_shape(), the one place such a
// sync is made.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "lazy/ops.h"

namespace loom::ops {

// The reduction of a ScatterReduce node (its attrs[1]; lazy/ops_data.cpp).
enum ScatterKind : int64_t { kScatterProd = 1, kScatterAmax = 2, kScatterAmin = 3 };

// ---- data-dependent sizes ----

// The values of t, computed (a sync point for a pending lazy tensor) and on the host, for an op
// whose result size depends on them; `cause` names the op (what a sync counter by cause counts).
Array values_for_shape(const Tensor& t, const char* cause);
// The coordinates of the nonzero elements of x: an int64 tensor [count, ndim] (torch.nonzero,
// argwhere), or one int64 tensor [count] per dim (nonzero(as_tuple=True), where(cond)).
Tensor nonzero(const Tensor& x);
std::vector<Tensor> nonzero_tuple(const Tensor& x, const char* cause = "nonzero");
// The elements of x where mask (broadcast with x) is true, in row-major order: 1-d.
Tensor masked_select(const Tensor& x, const Tensor& mask);

// ---- views ----

// The diagonal `offset` of the plane (dim1, dim2), as the last dim (a view).
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
// Tensor.unfold: the windows of `size` elements every `step` along dim, as a new last dim (a view).
Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step);
// Moves dims `source` to positions `destination`, the others keeping their order (a view).
Tensor movedim(const Tensor& x, IntSpan source, IntSpan destination);
// The same bytes read as another dtype (Tensor.view(dtype)): a view of a stored tensor; of a
// pending lazy tensor, a copy of its bytes (a view's writes would not reach it). The last dim
// scales by the ratio of the item sizes. Not differentiable, as in PyTorch.
Tensor view_dtype(const Tensor& x, DType dtype);

// ---- copies ----

Tensor narrow_copy(const Tensor& x, int64_t dim, int64_t start, int64_t length);
// diag: a 1-d x becomes a matrix with x on diagonal `diagonal`; a 2-d x gives that diagonal (a copy).
Tensor diag(const Tensor& x, int64_t diagonal = 0);
// x's last dim on diagonal `offset` of a new plane (dim1, dim2) of zeros.
Tensor diag_embed(const Tensor& x, int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1);
// The sum of the main diagonal of a matrix (int64 for integers and bool, as torch.trace).
Tensor trace(const Tensor& x);
// Elements shifted by shifts[i] along dims[i], wrapping around; no dims: over the flattened x.
Tensor roll(const Tensor& x, IntSpan shifts, IntSpan dims);
// k quarter turns in the plane dims, from the first dim towards the second.
Tensor rot90(const Tensor& x, int64_t k = 1, IntSpan dims = Dims{0, 1});
// Each element (or slice along dim) repeated `repeats` times; without dim, over the flattened x.
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = {},
                         std::optional<int64_t> output_size = {});
// Element i repeated repeats[i] times (a sync point: the result size is the sum of repeats).
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = {},
                         std::optional<int64_t> output_size = {});
// repeat_interleave(repeats): index i repeated repeats[i] times.
Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> output_size = {});
// indexing: "ij" (matrix) or "xy" (Cartesian: the first two outputs' dims swapped).
std::vector<Tensor> meshgrid(const std::vector<Tensor>& xs, std::string_view indexing = "ij");
Tensor cartesian_prod(const std::vector<Tensor>& xs);
Tensor combinations(const Tensor& x, int64_t r = 2, bool with_replacement = false);
Tensor block_diag(const std::vector<Tensor>& xs);
// tril_indices / triu_indices: the coordinates [2, count] of a row x col triangle.
Tensor tri_indices(int64_t row, int64_t col, int64_t offset, bool lower, DType dtype, Placement where);

// ---- splitting, stacking, shape helpers ----

std::vector<Tensor> tensor_split(const Tensor& x, int64_t sections, int64_t dim = 0);
std::vector<Tensor> tensor_split_at(const Tensor& x, IntSpan indices, int64_t dim = 0);
// hsplit / vsplit / dsplit (`name`): tensor_split along dim of an x of at least min_dims dims
// into `sections` equal parts, or at `indices`.
std::vector<Tensor> directional_split(const Tensor& x, const char* name, int64_t min_dims, int64_t dim,
                                      std::optional<int64_t> sections, IntSpan indices);
Tensor atleast(const Tensor& x, int64_t ndim);  // atleast_1d / 2d / 3d
Tensor hstack(const std::vector<Tensor>& xs);
Tensor vstack(const std::vector<Tensor>& xs);
Tensor dstack(const std::vector<Tensor>& xs);
Tensor column_stack(const std::vector<Tensor>& xs);

// ---- scatters and index updates (x is not modified; the in-place forms write the result) ----

// reduce: "" (replace), "add" or "multiply"; src a tensor or a number.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Arg& src, std::string_view reduce = "");
// reduce: "sum", "prod", "mean", "amax" or "amin"; include_self: x's values take part.
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                      bool include_self = true);
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 Scalar alpha = Scalar(int64_t{1}));
Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source);
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Arg& value);
// x flattened, at index (negative indices count from the end).
Tensor take(const Tensor& x, const Tensor& index);
// x with x.flatten()[index] = source (or += with accumulate).
Tensor put(const Tensor& x, const Tensor& index, const Tensor& source, bool accumulate = false);

}  // namespace loom::ops
