// The op library as C++ functions: what the Python bindings, autograd and tests call.
//
// Primitives go through apply() (lazy/dispatch.h); composites (mean, var, softmax, linear,
// clamp, ...) are written here in terms of primitives, so every backend, fusion and autograd
// handle them without code of their own. Names, arguments and semantics follow PyTorch's; where
// an argument is "a tensor or a number" it is an Arg.
#pragma once

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "lazy/dispatch.h"

namespace loom::ops {

// ---- elementwise ----
Tensor unary(OpId op, const Tensor& x);
Tensor square(const Tensor& x);
Tensor binary(OpId op, const Arg& a, const Arg& b);
Tensor add(const Arg& a, const Arg& b, Scalar alpha = Scalar(int64_t{1}));
Tensor sub(const Arg& a, const Arg& b, Scalar alpha = Scalar(int64_t{1}));
Tensor mul(const Arg& a, const Arg& b);
// rounding_mode: "" (true division), "trunc" or "floor".
Tensor div(const Arg& a, const Arg& b, std::string_view rounding_mode = "");
Tensor pow(const Arg& a, const Arg& b);
Tensor where(const Tensor& cond, const Arg& a, const Arg& b);
Tensor clamp(const Tensor& x, const std::optional<Arg>& min, const std::optional<Arg>& max);
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
Tensor softplus(const Tensor& x, Scalar beta = Scalar(int64_t{1}), Scalar threshold = Scalar(int64_t{20}));
Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf);
Tensor lerp(const Tensor& start, const Tensor& end, const Arg& weight);
Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value = Scalar(int64_t{1}));
Tensor addcdiv(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value = Scalar(int64_t{1}));
Tensor logical_xor(const Arg& a, const Arg& b);
// decimals: none rounds to an integer (any dtype); a number of decimals needs a floating tensor.
Tensor round(const Tensor& x, std::optional<int64_t> decimals = {});

// ---- more elementwise math and the activations (lazy/ops_elementwise_more.cpp) ----
// Floating results where PyTorch gives them; dtype errors in PyTorch's words.
Tensor trunc(const Tensor& x);
Tensor frac(const Tensor& x);
Tensor fmod(const Tensor& a, const Arg& b);
Tensor copysign(const Tensor& a, const Arg& b);
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor hypot(const Tensor& a, const Tensor& b);
Tensor logaddexp(const Tensor& a, const Tensor& b);
Tensor logaddexp2(const Tensor& a, const Tensor& b);
Tensor xlogy(const Arg& a, const Arg& b);
Tensor ldexp(const Tensor& a, const Tensor& b);
Tensor float_power(const Arg& a, const Arg& b);
// fmax / fmin: maximum / minimum that ignore a NaN operand (NaN only where both are).
Tensor fmax(const Tensor& a, const Tensor& b);
Tensor fmin(const Tensor& a, const Tensor& b);
Tensor heaviside(const Tensor& x, const Tensor& values);
Tensor shift_left(const Arg& a, const Arg& b);   // bitwise_left_shift, <<
Tensor shift_right(const Arg& a, const Arg& b);  // bitwise_right_shift, >>
Tensor isfinite(const Tensor& x);
Tensor isposinf(const Tensor& x);
Tensor isneginf(const Tensor& x);
Tensor isreal(const Tensor& x);
Tensor signbit(const Tensor& x);
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
Tensor deg2rad(const Tensor& x);
Tensor rad2deg(const Tensor& x);
Tensor sinc(const Tensor& x);
Tensor logit(const Tensor& x, std::optional<double> eps = {});
Tensor positive(const Tensor& x);
// Activations: elu covers selu (scale, input_scale); celu has its own op (its own grad_fn).
Tensor elu(const Tensor& x, Scalar alpha = Scalar(1.0), Scalar scale = Scalar(int64_t{1}),
           Scalar input_scale = Scalar(int64_t{1}));
Tensor celu(const Tensor& x, Scalar alpha = Scalar(1.0));
Tensor selu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, Scalar negative_slope = Scalar(0.01));
Tensor hardtanh(const Tensor& x, Scalar min_val = Scalar(-1.0), Scalar max_val = Scalar(1.0));
Tensor hardsigmoid(const Tensor& x);
Tensor hardswish(const Tensor& x);
Tensor log_sigmoid(const Tensor& x);
Tensor mish(const Tensor& x);
Tensor hardshrink(const Tensor& x, Scalar lambd = Scalar(0.5));
Tensor softshrink(const Tensor& x, Scalar lambd = Scalar(0.5));
Tensor threshold(const Tensor& x, Scalar threshold, Scalar value);
// x where x > 0, weight * x elsewhere; weight has one element or one per channel (dim 1).
Tensor prelu(const Tensor& x, const Tensor& weight);

// ---- reductions. `dims` empty means all dims. ----
using DimList = SmallVec<int64_t, 4>;
Tensor reduce(OpId op, const Tensor& x, const DimList& dims, bool keepdim);
Tensor sum(const Tensor& x, const DimList& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor mean(const Tensor& x, const DimList& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor prod(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor amax(const Tensor& x, const DimList& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const DimList& dims = {}, bool keepdim = false);
// max() / min(): the extreme element (RuntimeError for an empty tensor, as PyTorch).
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
// max(dim) / min(dim): (values, indices).
std::pair<Tensor, Tensor> max_dim(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min_dim(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor var(const Tensor& x, const DimList& dims = {}, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const DimList& dims = {}, double correction = 1, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const DimList& dims, bool keepdim = false);
Tensor all(const Tensor& x, const DimList& dims = {}, bool keepdim = false);
Tensor any(const Tensor& x, const DimList& dims = {}, bool keepdim = false);
// p: 2 (default, also "fro"), 1, inf, -inf, 0 or any other number.
Tensor norm(const Tensor& x, double p = 2, const DimList& dims = {}, bool keepdim = false);
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});

// ---- composites with derivatives of their own (record_composite, lazy/autograd.h) ----
// Each is a short unrecorded chain forward and a closed-form derivative backward, with PyTorch's
// grad_fn names. normalized_ndim: the trailing dims normalized (normalized_shape's length; the
// caller checks the sizes). lazy/ops_norm.cpp:
Tensor layer_norm(const Tensor& x, int64_t normalized_ndim, const Tensor* weight, const Tensor* bias, double eps);
Tensor rms_norm(const Tensor& x, int64_t normalized_ndim, const Tensor* weight, double eps);
// Class-index targets: input (C), (N, C) or (N, C, d1, ...), target () / (N) / (N, d1, ...)
// int64 (the caller checks their shapes and the weight's); reduction "none", "mean" or "sum".
// A class out of range adds nothing to the loss (checking would need the data). lazy/ops_loss.cpp.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor* weight, int64_t ignore_index,
                     std::string_view reduction, double label_smoothing);
// softmax(q k^T * scale + mask) v; a bool mask marks where a query may attend; dropout_p drops
// attention probabilities (a random op of the trace in lazy mode). lazy/ops_attention.cpp.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* attn_mask,
                                    double dropout_p, bool is_causal, std::optional<double> scale);

// ---- matrix products ----
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& input, const Tensor& a, const Tensor& b, Scalar beta = Scalar(int64_t{1}),
             Scalar alpha = Scalar(int64_t{1}));
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor* bias);

// ---- views (no copy) ----
Tensor view(const Tensor& x, IntSpan shape);
Tensor reshape(const Tensor& x, IntSpan shape);
Tensor permute(const Tensor& x, IntSpan dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
// Tensor.t(): transposes a 2-d tensor, returns 0-d and 1-d ones as they are (grad_fn TBackward0).
Tensor t(const Tensor& x);
Tensor expand(const Tensor& x, IntSpan sizes);
Tensor squeeze(const Tensor& x, std::optional<DimList> dims = {});
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unflatten(const Tensor& x, int64_t dim, IntSpan sizes);
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor alias(const Tensor& x);   // the same values, a view (with autograd history)
// The same values, no autograd history, not a view; sharing x's version counter, or (`.data`) not.
Tensor detach(const Tensor& x, bool share_version_counter = true);
// Regions: `region` is a layout over x's elements in row-major order (a view's place in its base).
// The elements of x at region (a view of x, or of its contiguous copy).
Tensor region_of(const Tensor& x, const Layout& region);
// base with the elements at region replaced by src (of the region's shape).
Tensor view_scatter(const Tensor& base, const Layout& region, const Tensor& src);
// A view of x whose layout `layout_of` makes from x's (a strided view such as diagonal or
// Tensor.unfold; it returns a layout for any layout it is given), recorded for autograd as `name`
// with `backward` (x's gradient from the view's). region_backward(x, region) is that backward for
// a view selecting the elements at `region` of x's row-major order without overlap.
Tensor strided_view(const Tensor& x, const std::function<std::optional<Layout>(const Layout&)>& layout_of,
                    const char* name, std::function<Tensor(const Tensor&)> backward);
std::function<Tensor(const Tensor&)> region_backward(const Tensor& x, const Layout& region);
// Sums a gradient down to `shape`, undoing broadcasting (used by derivatives).
Tensor sum_to(const Tensor& grad, IntSpan shape);
// Ops returning one tensor per piece (split, chunk, tensor_split, unbind) refuse more than
// kMaxPieces pieces with a clear error: a hostile count (2^62 sections of an empty dim, unbind of
// an expanded dim of 2^62) would otherwise build objects until memory ran out, for hours.
inline constexpr int64_t kMaxPieces = int64_t{1} << 24;
void check_piece_count(int64_t pieces, const char* op);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split_sections(const Tensor& x, IntSpan sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);

// ---- copies and data movement ----
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
Tensor cast(const Tensor& x, DType dtype);
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// The elements in reverse order along each of dims (a copy, as PyTorch's flip).
Tensor flip(const Tensor& x, IntSpan dims);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// x[..., i_0, ..., i_{k-1}, ...] with integer index tensors at dims [first, first + k).
Tensor index(const Tensor& x, int64_t first, const std::vector<Tensor>& indices);
Tensor index_put(const Tensor& x, int64_t first, const std::vector<Tensor>& indices, const Arg& values,
                 bool accumulate = false);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Arg& value);
Tensor one_hot(const Tensor& index, int64_t num_classes = -1);
// pad: pairs (before, after) from the last dim backwards, as torch.nn.functional.pad.
Tensor pad(const Tensor& x, IntSpan pad, double value = 0);
Tensor repeat(const Tensor& x, IntSpan repeats);
// Converts x to dtype / device / mode, returning x itself when nothing changes and !copy.
Tensor to(const Tensor& x, DType dtype, Device device, bool lazy, bool copy = false);

// ---- creation, eager or lazy ----
Tensor full(IntSpan sizes, Scalar value, DType dtype, Placement where);
Tensor arange(int64_t n, Scalar start, Scalar step, DType dtype, Placement where);
// Uniform on [low, high) and normal of mean and std, computed in double then rounded to dtype.
Tensor rand(IntSpan sizes, DType dtype, Placement where, double low = 0, double high = 1);
Tensor randn(IntSpan sizes, DType dtype, Placement where, double mean = 0, double std = 1);
Tensor randint(IntSpan sizes, int64_t low, int64_t high, DType dtype, Placement where);

// ---- in-place: self's value becomes op(self, ...) or a new value (see dispatch.h update) ----
void add_(TensorImpl& self, const Arg& other, Scalar alpha = Scalar(int64_t{1}));
void sub_(TensorImpl& self, const Arg& other, Scalar alpha = Scalar(int64_t{1}));
void mul_(TensorImpl& self, const Arg& other);
void div_(TensorImpl& self, const Arg& other);
void fill_(TensorImpl& self, const Arg& value);
// t[...] = number: a fill that autograd records as PyTorch does, as a copy_ of the number.
void fill_as_copy_(TensorImpl& self, Scalar value);
void zero_(TensorImpl& self);
void copy_(TensorImpl& self, const Tensor& src);

// Sizes of the reduced result of a bitmask reduction, for composites that need the count.
int64_t reduced_count(IntSpan shape, const DimList& dims);


// ---- sliding windows, convolution, pooling, padding modes (lazy/ops_windows.cpp, ops_conv.cpp,
// ops_pool.cpp, ops_pad.cpp). Spatial dims are the last k of (N, C, spatial...) or, unbatched,
// (C, spatial...); one int for a per-dim parameter stands for every dim, as in PyTorch. ----

// Windows over the consecutive dims [first, first + size.size()) of x, as Tensor.unfold on each:
// dim first + i becomes the number of windows, (extent - dilation * (size - 1) - 1) / stride + 1,
// and each window's extent size[i] is appended at the end. A view (overlapping when stride <
// size); its gradient sums the windows back (windows_sum).
Tensor sliding_windows(const Tensor& x, int64_t first, IntSpan size, IntSpan stride, IntSpan dilation);
// col2im: windows shaped as sliding_windows returns them, each element added where
// sliding_windows would have read it, into a tensor of `shape` (zeros elsewhere).
Tensor windows_sum(const Tensor& windows, IntSpan shape, int64_t first, IntSpan size, IntSpan stride,
                   IntSpan dilation);
// The row-major index in `plane` of every element of every window: int64 (counts..., size...),
// window o's element j at sum_i (offset_i + o_i * stride_i + j_i * dilation_i) * plane_stride_i
// (offset empty: zeros).
Tensor window_positions(IntSpan plane, IntSpan counts, IntSpan size, IntSpan stride, IntSpan dilation,
                        IntSpan offset, Placement where);
// torch.nn.functional.unfold / fold on (N, C, H, W) / (N, C * kh * kw, L) or unbatched input.
Tensor im2col(const Tensor& x, IntSpan kernel_size, IntSpan dilation, IntSpan padding, IntSpan stride);
Tensor col2im(const Tensor& x, IntSpan output_size, IntSpan kernel_size, IntSpan dilation, IntSpan padding,
              IntSpan stride);
// conv{k}d with numeric padding, or "same" / "valid".
Tensor conv(const Tensor& x, const Tensor& weight, const Tensor* bias, IntSpan stride, IntSpan padding,
            IntSpan dilation, int64_t groups, int64_t k);
Tensor conv(const Tensor& x, const Tensor& weight, const Tensor* bias, IntSpan stride, std::string_view padding,
            IntSpan dilation, int64_t groups, int64_t k);
Tensor conv_transpose(const Tensor& x, const Tensor& weight, const Tensor* bias, IntSpan stride, IntSpan padding,
                      IntSpan output_padding, int64_t groups, IntSpan dilation, int64_t k);
// max_pool{k}d: (values, indices), the indices (flat positions in the input's spatial plane)
// only when want_indices. An empty stride means the kernel size.
std::pair<Tensor, Tensor> max_pool(const Tensor& x, size_t k, IntSpan kernel_size, IntSpan stride, IntSpan padding,
                                   IntSpan dilation, bool ceil_mode, bool want_indices);
Tensor avg_pool(const Tensor& x, size_t k, IntSpan kernel_size, IntSpan stride, IntSpan padding, bool ceil_mode,
                bool count_include_pad, std::optional<int64_t> divisor_override);
Tensor adaptive_avg_pool(const Tensor& x, size_t k, IntSpan output_size);
std::pair<Tensor, Tensor> adaptive_max_pool(const Tensor& x, size_t k, IntSpan output_size, bool want_indices);
Tensor max_unpool(const Tensor& x, const Tensor& indices, size_t k, IntSpan output_size);
// torch.nn.functional.pad in every mode: "constant" (value, default 0), "reflect", "replicate",
// "circular".
Tensor pad(const Tensor& x, IntSpan pad, std::string_view mode, std::optional<double> value);

}  // namespace loom::ops
