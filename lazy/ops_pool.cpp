// Pooling written in primitives: reductions over sliding windows (lazy/ops_windows.cpp).
//
// max and average pooling are one row kernel each over a window view of the (padded) input: no
// copy of the windows. max pooling's indices (PyTorch's: the first maximum's position in the
// input's spatial plane) are a second row kernel, the least position among the window's maxima;
// with autograd, the values are gathered at those indices, so the gradient goes to that one
// element as in PyTorch (amax's own derivative would share it between tied maxima). Adaptive
// pooling with windows that do not tile the input averages through one matrix per spatial dim
// (a product) or takes its maxima over windows gathered by index.
#include <cmath>
#include <numeric>
#include <limits>
#include <string>

#include "lazy/ops.h"
#include "runtime/checked_int.h"

namespace loom::ops {
namespace {

Dims dims_of(IntSpan s) { return Dims(s.begin(), s.end()); }

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

const char* const kCounted[] = {"one", "two", "three"};

// "kH: 0 kW: 0" / "dilationT: 0 dilationH: 0 dilationW: 0", as PyTorch's pooling checks name values.
std::string lettered(const char* prefix, IntSpan values) {
  static const char* const letters = "THW";
  std::string s;
  for (size_t i = 0; i < values.size(); ++i)
    s += std::string(i ? " " : "") + prefix + letters[3 - values.size() + i] + ": " + std::to_string(values[i]);
  return s;
}

// "(3x8x8)": channels and spatial sizes, as PyTorch's "Output size is too small" prints them.
std::string by_x(int64_t channels, IntSpan spatial) {
  std::string s = "(" + std::to_string(channels);
  for (int64_t v : spatial) s += "x" + std::to_string(v);
  return s + ")";
}

struct Pool {
  const char* name;  // "max_pool2d"
  size_t k;          // spatial dims
  Dims kernel, stride, padding, dilation;
  bool ceil_mode = false;
};

Dims pool_param(IntSpan given, size_t k, const char* op, const char* param, bool may_be_empty = false) {
  if (given.size() == 1) return Dims(k, given[0]);
  if (given.size() == k) return dims_of(given);
  if (k == 1)
    LOOM_FAIL(Runtime, op, "() ", param, " must be an int, list of ints or tuple of ints of size 1 but got size ",
              given.size());
  LOOM_FAIL(Runtime, op, ": ", param, " must ", may_be_empty ? "either be omitted, " : "either be ", "a single int, or a tuple of ",
            kCounted[k - 1], " ints");
  return {};
}

Pool pool_params(const char* name, size_t k, IntSpan kernel, IntSpan stride, IntSpan padding, IntSpan dilation,
                 bool ceil_mode) {
  Pool p{name, k};
  p.kernel = pool_param(kernel, k, name, "kernel_size");
  p.stride = stride.empty() ? p.kernel : pool_param(stride, k, name, "stride", true);
  p.padding = pool_param(padding, k, name, "padding");
  p.dilation = pool_param(dilation, k, name, "dilation");
  p.ceil_mode = ceil_mode;
  return p;
}

// Batched (N, C, spatial...) or unbatched (C, spatial...) input with non-empty non-batch dims.
bool batched_input(const Tensor& x, size_t k, const char* name, bool max_pool) {
  auto dims = static_cast<int64_t>(k);
  bool ok_rank = x->ndim() == dims + 1 || x->ndim() == dims + 2;
  bool nonempty = ok_rank;
  for (int64_t d = x->ndim() - dims - 1; nonempty && d < x->ndim(); ++d) nonempty = x->sizes()[d] > 0;
  if (k == 1 && max_pool)
    LOOM_CHECK(nonempty, Runtime, name, ": Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
               "input, but got:", format_dims(x->sizes()));
  if (k == 1)
    LOOM_CHECK(ok_rank, Runtime, "Expected 2 to 3 dimensions, but got ", x->ndim(), "-dimensional tensor for argument "
               "#1 'self' (while checking arguments for ", name, ")");
  LOOM_CHECK(ok_rank || !max_pool, Runtime, "non-empty ", dims + 1, "D or ", dims + 2,
             "D (batch mode) tensor expected for input");
  LOOM_CHECK(nonempty, Runtime, "Expected ", dims + 1, "D or ", dims + 2,
             "D (batch mode) tensor with optional 0 dim batch size for input, but got:", format_dims(x->sizes()));
  return x->ndim() == dims + 2;
}

// PyTorch's pooling_output_shape: windows starting in the right padding are dropped in ceil_mode.
int64_t pooled_extent(int64_t extent, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  LOOM_CHECK(stride != 0, Runtime, "stride should not be zero");
  LOOM_CHECK(pad >= 0, Runtime, "pad must be non-negative, but got pad: ", pad);
  LOOM_CHECK(pad <= kernel / 2, Runtime, "pad should be at most half of kernel size, but got pad=", pad,
             " and kernel_size=", kernel);
  // CheckedInt (runtime/checked_int.h): hostile sizes must not wrap into a plausible output size.
  // ceil_mode rounds up as -floor(-a / stride), not floor((a + stride - 1) / stride): a stride near
  // 2^63 is a legal (1-window) pooling.
  CheckedInt room = CheckedInt(extent) + CheckedInt(pad) * 2 - CheckedInt(dilation) * (kernel - 1) - 1;
  CheckedInt out = (ceil_mode ? CheckedInt(0) - floor_div(CheckedInt(0) - room, stride) : floor_div(room, stride)) + 1;
  CheckedInt last_start = (out - 1) * stride, padded_end = CheckedInt(extent) + pad;
  LOOM_CHECK(out.ok() && last_start.ok() && padded_end.ok(), Runtime, "pooling over an input of size ", extent,
             " with kernel_size ", kernel, ", stride ", stride, ", padding ", pad, " and dilation ", dilation,
             ": the output size is larger than int64 can hold");
  int64_t n = out.value();
  if (ceil_mode && last_start.value() >= padded_end.value()) --n;
  return n;
}

// The output's spatial sizes, after PyTorch's checks of the parameters and the input.
Dims pooled_shape(const Tensor& x, const Pool& p, bool max_pool) {
  Dims out;
  for (size_t i = 0; i < p.k; ++i) {
    int64_t extent = x->sizes()[2 + i];
    if (p.k == 1 && max_pool) {
      LOOM_CHECK(p.kernel[0] > 0, Runtime, p.name, "() kernel_size must be greater than zero, but got ", p.kernel[0]);
      LOOM_CHECK(p.stride[0] > 0, Runtime, p.name, "() stride must be greater than zero, but got ", p.stride[0]);
      LOOM_CHECK(p.padding[0] >= 0, Runtime, p.name, "() padding must be non-negative, but got ", p.padding[0]);
      LOOM_CHECK(p.padding[0] <= p.kernel[0] / 2, Runtime, p.name,
                 "() padding should be at most half of kernel size, but got padding=", p.padding[0],
                 " and kernel_size=", p.kernel[0]);
      LOOM_CHECK(p.dilation[0] > 0, Runtime, p.name, "() dilation must be greater than zero, but got ", p.dilation[0]);
    }
    out.push_back(pooled_extent(extent, p.kernel[i], p.padding[i], p.stride[i], p.dilation[i], p.ceil_mode));
  }
  bool positive = true;
  for (size_t i = 0; i < p.k; ++i) positive = positive && p.kernel[i] > 0;
  LOOM_CHECK(positive, Runtime, "kernel size should be greater than zero, but got ", lettered("k", p.kernel));
  positive = true;
  for (size_t i = 0; i < p.k; ++i) positive = positive && p.stride[i] > 0;
  LOOM_CHECK(positive, Runtime, "stride should be greater than zero, but got ", lettered("d", p.stride));
  positive = true;
  for (size_t i = 0; i < p.k; ++i) positive = positive && p.dilation[i] > 0;
  LOOM_CHECK(positive, Runtime, "dilation should be greater than zero, but got ", lettered("dilation", p.dilation));
  bool fits = true;
  for (int64_t o : out) fits = fits && (o >= 1 || (p.k == 1 && max_pool && o == 0));
  LOOM_CHECK(fits, Runtime, "Given input size: ", by_x(x->sizes()[1], x->sizes().subspan(2)),
             ". Calculated output size: ", by_x(x->sizes()[1], out), ". Output size is too small");
  return out;
}

// The windows of a pooling, (N, C, out..., kernel...): x padded with `fill` by the padding on
// both sides and, on the right, by what the last window of ceil_mode overhangs.
Tensor pool_windows(const Tensor& x, const Pool& p, IntSpan out, double fill) {
  Dims pads;
  bool padded = false;
  for (size_t i = p.k; i-- > 0;) {
    int64_t extent = x->sizes()[2 + i];
    // pooled_shape checked each term; their sum may still exceed int64 (a stride near 2^63).
    CheckedInt overhang_checked = (CheckedInt(out[i]) - 1) * p.stride[i] + CheckedInt(p.dilation[i]) * (p.kernel[i] - 1) +
                                  1 - (CheckedInt(extent) + CheckedInt(p.padding[i]) * 2);
    LOOM_CHECK(overhang_checked.ok(), Runtime, p.name, ": the last window of stride ", p.stride[i],
               " reaches past what int64 can hold");
    int64_t overhang = std::max<int64_t>(0, overhang_checked.value());
    pads.push_back(p.padding[i]);
    pads.push_back(p.padding[i] + overhang);
    padded = padded || pads[pads.size() - 2] || pads.back();
  }
  Tensor windows = sliding_windows(padded ? pad(x, pads, fill) : x, 2, p.kernel, p.stride, p.dilation);
  for (size_t i = 0; i < p.k; ++i)
    if (windows->sizes()[2 + i] > out[i]) windows = narrow(windows, 2 + static_cast<int64_t>(i), 0, out[i]);
  return windows;
}

// The window dims of (N, C, out..., kernel...).
DimList window_dims(size_t k) {
  DimList dims;
  for (size_t i = 0; i < k; ++i) dims.push_back(2 + static_cast<int64_t>(k + i));
  return dims;
}

// The maxima of windows (N, C, out..., kernel...) and, if wanted or autograd needs them, their
// positions: `positions` (out..., kernel...) holds each window element's index in the input's
// spatial plane, rising with the window's row-major order, so the least position among a
// window's maxima is its first maximum's (NaN counts as the maximum, as in PyTorch).
std::pair<Tensor, Tensor> window_maxima(const Tensor& x, const Tensor& windows, const Tensor& positions, size_t k,
                                        bool want_indices) {
  DimList reduced = window_dims(k);
  Tensor values = amax(windows, reduced);
  bool grad = grad_enabled() && requires_grad(*x);
  if (!want_indices && !grad) return {values, Tensor()};
  Tensor indices;
  {
    GradModeGuard no_grad(false);
    Dims kept(values->sizes());
    for (size_t i = 0; i < k; ++i) kept.push_back(1);
    Tensor hit = binary(OpId::LogicalOr, binary(OpId::Eq, windows, reshape(values, kept)), unary(OpId::IsNan, windows));
    indices = amin(where(hit, positions, Scalar(std::numeric_limits<int64_t>::max())), reduced);
  }
  if (grad) {
    // Gathered at the indices, so the gradient reaches that one element (see the file's comment).
    int64_t n = x->sizes()[0], channels = x->sizes()[1];
    Tensor plane = reshape(x, Dims{n, channels, -1});
    values = reshape(gather(plane, 2, reshape(indices, Dims{n, channels, -1})), values->sizes());
  }
  return {values, indices};
}

void require_floating(const Tensor& x, const char* kernel_name) {
  LOOM_CHECK(is_floating(x->dtype()), Runtime, "\"", kernel_name, "\" not implemented for '",
             dtype_info(x->dtype()).scalar_type_name, "'");
}

Tensor unbatch(const Tensor& t, bool batched) { return batched || !t ? t : squeeze(t, DimList{0}); }

const char* pool_name(const char* family, size_t k) {
  static const std::string names[][3] = {
      {"max_pool1d", "max_pool2d", "max_pool3d"},
      {"avg_pool1d", "avg_pool2d", "avg_pool3d"},
      {"adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"},
      {"adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d"},
      {"max_unpool1d", "max_unpool2d", "max_unpool3d"}};
  std::string f(family);
  size_t row = f == "max" ? 0 : f == "avg" ? 1 : f == "adaptive_avg" ? 2 : f == "adaptive_max" ? 3 : 4;
  return names[row][k - 1].c_str();
}

}  // namespace

std::pair<Tensor, Tensor> max_pool(const Tensor& input, size_t k, IntSpan kernel_size, IntSpan stride,
                                   IntSpan padding, IntSpan dilation, bool ceil_mode, bool want_indices) {
  Pool p = pool_params(pool_name("max", k), k, kernel_size, stride, padding, dilation, ceil_mode);
  bool batched = batched_input(input, k, p.name, true);
  Tensor x = batched ? input : unsqueeze(input, 0);
  Dims out = pooled_shape(x, p, true);
  require_floating(x, k == 1 ? "max_pool1d_impl" : p.name);
  if (numel_of(out) == 0) {  // max_pool1d allows no windows
    Dims shape{x->sizes()[0], x->sizes()[1]};
    for (int64_t o : out) shape.push_back(o);
    Tensor none = full(shape, Scalar(int64_t{0}), x->dtype(), placement_of(x));
    return {unbatch(none, batched), want_indices ? unbatch(full(shape, Scalar(int64_t{0}), DType::Int64, placement_of(x)), batched) : Tensor()};
  }
  Tensor windows = pool_windows(x, p, out, -std::numeric_limits<double>::infinity());
  Tensor positions;
  if (want_indices || (grad_enabled() && requires_grad(*x))) {
    Dims offset;
    for (int64_t pad : p.padding) offset.push_back(-pad);
    positions = window_positions(x->sizes().subspan(2), out, p.kernel, p.stride, p.dilation, offset, placement_of(x));
  }
  auto [values, indices] = window_maxima(x, windows, positions, k, want_indices);
  return {unbatch(values, batched), want_indices ? unbatch(indices, batched) : Tensor()};
}

Tensor avg_pool(const Tensor& input, size_t k, IntSpan kernel_size, IntSpan stride, IntSpan padding, bool ceil_mode,
                bool count_include_pad, std::optional<int64_t> divisor_override) {
  Dims one(k, 1);
  Pool p = pool_params(pool_name("avg", k), k, kernel_size, stride, padding, one, ceil_mode);
  bool batched = batched_input(input, k, p.name, false);
  Tensor x = batched ? input : unsqueeze(input, 0);
  Dims out = pooled_shape(x, p, false);
  LOOM_CHECK(!divisor_override || *divisor_override != 0, Runtime, "divisor must be not zero");
  Tensor sums = sum(pool_windows(x, p, out, 0.0), window_dims(k));
  std::optional<Arg> divisor;
  if (divisor_override) divisor = Arg(*divisor_override);
  bool overhang = false, padded = false;
  for (size_t i = 0; i < k; ++i) {
    padded = padded || p.padding[i] > 0;
    // Each term is checked by pooled_shape / pool_windows already (the window view exists).
    overhang = overhang || ((CheckedInt(out[i]) - 1) * p.stride[i] + p.kernel[i]).value() >
                               x->sizes()[2 + i] + 2 * p.padding[i];
  }
  CheckedInt taps = 1;
  for (int64_t s : p.kernel) taps = taps * s;
  LOOM_CHECK(taps.ok() || divisor, Runtime, p.name, ": the kernel's size ", by_x(1, p.kernel),
             " has more elements than int64 can count");
  if (!divisor && !overhang && (!padded || count_include_pad)) divisor = Arg(taps.value());
  if (!divisor) {
    // Per position, the product over dims of the window's extent: within the padded input
    // (count_include_pad) or within the input, never past the right padding.
    Tensor count;
    for (size_t i = 0; i < k; ++i) {
      int64_t extent = x->sizes()[2 + i];
      Tensor start = arange(out[i], Scalar(-p.padding[i]), Scalar(p.stride[i]), DType::Int64, placement_of(x));
      Tensor end = binary(OpId::Minimum, add(start, Scalar(p.kernel[i])),
                          Scalar(count_include_pad ? extent + p.padding[i] : extent));
      Tensor c = sub(end, count_include_pad ? start : binary(OpId::Maximum, start, Scalar(int64_t{0})));
      Dims shape(k, 1);
      shape[i] = out[i];
      c = reshape(c, shape);
      count = count ? mul(count, c) : c;
    }
    divisor = Arg(count);
  }
  Tensor result = is_floating(x->dtype()) ? div(sums, *divisor) : cast(div(sums, *divisor, "trunc"), x->dtype());
  return unbatch(result, batched);
}

namespace {

// Adaptive windows along one dim of `extent`: window o covers [floor(o * extent / out),
// ceil((o + 1) * extent / out)). Start and end as int64 (out,), computed in float64 (exact for
// any extent below 2^26).
std::pair<Tensor, Tensor> adaptive_bounds(int64_t extent, int64_t out, Placement where) {
  Tensor o = arange(out, Scalar(0.0), Scalar(1.0), DType::Float64, where);
  double ratio_den = static_cast<double>(out);
  Tensor start = cast(unary(OpId::Floor, div(mul(o, Scalar(static_cast<double>(extent))), Scalar(ratio_den))), DType::Int64);
  Tensor end = cast(unary(OpId::Ceil, div(mul(add(o, Scalar(1.0)), Scalar(static_cast<double>(extent))), Scalar(ratio_den))),
                    DType::Int64);
  return {start, end};
}

// The widest window, without visiting the out windows (an output size of 2^62 looped for years,
// and (o + 1) * extent overflowed). With extent = q * out + r: window o is q + ceil((o + 1) r /
// out) - floor(o r / out) wide, q + 2 exactly when (o r mod out) > out - r. The residues o r mod out
// are the multiples of g = gcd(r, out), up to out - g, so some window is q + 2 wide iff g < r (r
// does not divide out); else the widest is q + 1 (r > 0) or q (r = 0).
int64_t largest_window(int64_t extent, int64_t out) {
  if (out == 0) return 0;
  int64_t q = extent / out, r = extent % out;
  if (r == 0) return q;
  return std::gcd(r, out) < r ? q + 2 : q + 1;
}

Dims adaptive_output(IntSpan output_size, size_t k, const char* name) {
  Dims out = pool_param(output_size, k, name, "output_size");
  bool ok = true;
  for (int64_t o : out) ok = ok && o >= 0;
  std::string received = "{";
  for (size_t i = 0; i < out.size(); ++i) received += (i ? ", " : "") + std::to_string(out[i]);
  LOOM_CHECK(ok, Runtime, name, ": elements of output_size must be greater than or equal to 0 but received ",
             received, "}");
  return out;
}

bool adaptive_input(const Tensor& x, size_t k, const char* name) {
  auto dims = static_cast<int64_t>(k);
  if (k == 1)
    LOOM_CHECK(x->ndim() == 2 || x->ndim() == 3, Runtime, "Expected 2 to 3 dimensions, but got ", x->ndim(),
               "-dimensional tensor for argument #1 'self' (while checking arguments for ", name, ")");
  LOOM_CHECK(x->ndim() == dims + 1 || x->ndim() == dims + 2, Runtime, name, "(): Expected ", dims + 1, "D or ",
             dims + 2, "D tensor, but got ", format_dims(x->sizes()));
  for (int64_t d = 1; d < x->ndim(); ++d)
    LOOM_CHECK(x->sizes()[d] > 0, Runtime, name, "(): Expected input to have non-zero size for non-batch dimensions, "
               "but input has sizes ", format_dims(x->sizes()), " with dimension ", d, " being empty");
  return x->ndim() == dims + 2;
}

bool tiles(const Tensor& x, IntSpan out) {
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] == 0 || x->sizes()[2 + i] % out[i] != 0) return false;
  return true;
}

}  // namespace

Tensor adaptive_avg_pool(const Tensor& input, size_t k, IntSpan output_size) {
  const char* name = pool_name("adaptive_avg", k);
  Dims out = adaptive_output(output_size, k, name);
  bool batched = adaptive_input(input, k, name);
  require_floating(input, name);
  Tensor x = batched ? input : unsqueeze(input, 0);
  if (tiles(x, out)) {
    Dims kernel;
    for (size_t i = 0; i < k; ++i) kernel.push_back(x->sizes()[2 + i] / out[i]);
    Dims one(k, 1);
    return unbatch(mean(sliding_windows(x, 2, kernel, kernel, one), window_dims(k)), batched);
  }
  // One averaging matrix per dim, (out, extent): 1 / |window| where the window covers the input.
  Tensor result = x;
  for (size_t i = 0; i < k; ++i) {
    int64_t extent = x->sizes()[2 + i];
    auto [start, end] = adaptive_bounds(extent, out[i], placement_of(x));
    Tensor at = reshape(arange(extent, Scalar(int64_t{0}), Scalar(int64_t{1}), DType::Int64, placement_of(x)), Dims{1, extent});
    Tensor inside = binary(OpId::LogicalAnd, binary(OpId::Ge, at, reshape(start, Dims{out[i], 1})),
                                binary(OpId::Lt, at, reshape(end, Dims{out[i], 1})));
    Tensor weights = div(cast(inside, x->dtype()), cast(reshape(sub(end, start), Dims{out[i], 1}), x->dtype()));
    auto d = static_cast<int64_t>(2 + i);
    int64_t last = result->ndim() - 1;
    Tensor moved = d == last ? result : transpose(result, d, last);
    moved = matmul(moved, t(weights));
    result = d == last ? moved : transpose(moved, d, last);
  }
  return unbatch(contiguous(result), batched);
}

std::pair<Tensor, Tensor> adaptive_max_pool(const Tensor& input, size_t k, IntSpan output_size, bool want_indices) {
  const char* name = pool_name("adaptive_max", k);
  Dims out = adaptive_output(output_size, k, name);
  bool batched = adaptive_input(input, k, name);
  require_floating(input, name);
  Tensor x = batched ? input : unsqueeze(input, 0);
  if (tiles(x, out)) {
    Dims kernel;
    for (size_t i = 0; i < k; ++i) kernel.push_back(x->sizes()[2 + i] / out[i]);
    Dims zero(k, 0), one(k, 1);
    auto [values, indices] = max_pool(x, k, kernel, kernel, zero, one, false, want_indices);
    return {unbatch(values, batched), want_indices ? unbatch(indices, batched) : Tensor()};
  }
  // Windows gathered by index: window o of dim i reads start(o) + j, clamped to its last element
  // (a repeat, which changes neither the maximum nor the first maximum's position).
  std::vector<Tensor> index;
  Tensor positions;
  Dims widths, plane_strides = contiguous_strides(x->sizes().subspan(2));
  for (size_t i = 0; i < k; ++i) {
    int64_t extent = x->sizes()[2 + i], width = largest_window(extent, out[i]);
    widths.push_back(width);
    auto [start, end] = adaptive_bounds(extent, out[i], placement_of(x));
    Tensor j = reshape(arange(width, Scalar(int64_t{0}), Scalar(int64_t{1}), DType::Int64, placement_of(x)), Dims{1, width});
    Tensor at = binary(OpId::Minimum, add(reshape(start, Dims{out[i], 1}), j),
                       reshape(sub(end, Scalar(int64_t{1})), Dims{out[i], 1}));  // (out, width)
    Dims paired(2 * k, 1), split(2 * k, 1);
    paired[2 * i] = out[i];
    paired[2 * i + 1] = width;
    index.push_back(reshape(at, paired));  // (.., out_i, width_i, ..) for the index op
    split[i] = out[i];
    split[k + i] = width;
    Tensor pos = mul(reshape(at, split), Scalar(plane_strides[i]));  // (out..., width...)
    positions = positions ? add(positions, pos) : pos;
  }
  Tensor gathered = ops::index(x, 2, index);  // (N, C, out_0, width_0, out_1, width_1, ...)
  Dims order{0, 1};
  for (size_t i = 0; i < k; ++i) order.push_back(2 + 2 * static_cast<int64_t>(i));
  for (size_t i = 0; i < k; ++i) order.push_back(3 + 2 * static_cast<int64_t>(i));
  auto [values, indices] = window_maxima(x, permute(gathered, order), positions, k, want_indices);
  return {unbatch(values, batched), want_indices ? unbatch(indices, batched) : Tensor()};
}

Tensor max_unpool(const Tensor& input, const Tensor& indices, size_t k, IntSpan output_size) {
  const char* name = pool_name("max_unpool", k);
  LOOM_CHECK(indices->dtype() == DType::Int64, Runtime, "elements in indices should be type int64 but got: ",
             dtype_info(indices->dtype()).scalar_type_name);
  LOOM_CHECK(Dims(indices->sizes()) == Dims(input->sizes()), Runtime, "Expected shape of indices to be same as that of "
             "the input tensor (", format_dims(input->sizes()), ") but got indices tensor with shape: ",
             format_dims(indices->sizes()));
  Dims out = pool_param(output_size, k, name, "output_size");
  auto dims = static_cast<int64_t>(k);
  LOOM_CHECK(input->ndim() == dims + 1 || input->ndim() == dims + 2, Runtime, name, "(): Expected ", dims + 1, "D or ",
             dims + 2, "D tensor, but got ", format_dims(input->sizes()));
  bool batched = input->ndim() == dims + 2;
  Tensor x = batched ? input : unsqueeze(input, 0), idx = batched ? indices : unsqueeze(indices, 0);
  int64_t rows = x->sizes()[0] * x->sizes()[1];
  Tensor row = reshape(arange(rows, Scalar(int64_t{0}), Scalar(int64_t{1}), DType::Int64, placement_of(x)), Dims{rows, 1});
  Tensor zeros = full(Dims{rows, numel_of(out)}, Scalar(int64_t{0}), x->dtype(), placement_of(x));
  Tensor result = index_put(zeros, 0, {row, reshape(idx, Dims{rows, -1})}, Arg(reshape(x, Dims{rows, -1})));
  Dims shape{x->sizes()[0], x->sizes()[1]};
  for (int64_t o : out) shape.push_back(o);
  return unbatch(reshape(result, shape), batched);
}

}  // namespace loom::ops
