// Convolution written in primitives: im2col as a view, one matrix product, col2im as a scatter.
//
// The windows a convolution reads are a strided view of its (padded) input (sliding_windows,
// Tensor.unfold on several dims at once): no copy until the product needs its operand as a
// matrix, when one pointwise kernel gathers the columns (im2col). The product is one BLAS /
// cuBLAS call (a batch of images times one weight matrix folds into one product), so fusion,
// OpenBLAS and cuBLAS serve convolutions, and autograd derives their gradients: the weight's
// is a product, the input's the product's gradient summed back over the overlapping windows
// (windows_sum, col2im: one scatter-add). A transposed convolution is the same two steps in the
// other order. Depthwise convolutions skip the product: the windows times the weight, summed
// over the window, is one fused row kernel.
#include <string>

#include "lazy/ops.h"
#include "runtime/checked_int.h"

namespace loom::ops {
namespace {

Dims dims_of(IntSpan s) { return Dims(s.begin(), s.end()); }

// "(8 x 8)", as PyTorch prints spatial sizes in convolution errors.
std::string spatial(IntSpan sizes, const char* sep = " x ") {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? sep : "") + std::to_string(sizes[i]);
  return s + ")";
}

// PyTorch's legacy type name of a CPU tensor ("torch.FloatTensor") for the dtype mismatch error.
std::string legacy_type(DType d) {
  switch (d) {
    case DType::Float32: return "torch.FloatTensor";
    case DType::Float64: return "torch.DoubleTensor";
    case DType::Float16: return "torch.HalfTensor";
    case DType::BFloat16: return "torch.BFloat16Tensor";
    case DType::Int64: return "torch.LongTensor";
    case DType::Int32: return "torch.IntTensor";
    case DType::UInt8: return "torch.ByteTensor";
    case DType::Bool: return "torch.BoolTensor";
    default: return std::string("torch.") + dtype_name(d);
  }
}

// A convolution parameter given as one int or one per spatial dim, as k values.
Dims per_dim(IntSpan given, size_t k, const char* name) {
  if (given.size() == 1) return Dims(k, given[0]);
  LOOM_CHECK(given.size() == k, Runtime, "expected ", name, " to be a single integer value or a list of ", k,
             " values to match the convolution dimensions, but got ", name, "=", format_dims(given));
  return dims_of(given);
}

// "output_padding_height: 0 output_padding_width: 3 ..." (1-d convolutions run as 2-d in PyTorch).
std::string named_per_dim(const char* name, IntSpan values, int64_t one_d_fill) {
  static const char* const names[] = {"depth", "height", "width"};
  Dims v;
  if (values.size() == 1) v.push_back(one_d_fill);
  for (int64_t x : values) v.push_back(x);
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += std::string(i ? " " : "") + name + "_" + names[3 - v.size() + i] + ": " + std::to_string(v[i]);
  return s;
}

struct ConvParams {
  Dims stride, pad_before, pad_after, dilation, output_padding;
  int64_t groups = 1;
  bool transposed = false;
};

// PyTorch's checks of a convolution's arguments, in PyTorch's order and words.
void check_convolution(const Tensor& x, const Tensor& w, const Tensor* bias, const ConvParams& p) {
  size_t k = p.stride.size();
  for (int64_t s : p.stride) LOOM_CHECK(s > 0, Runtime, "non-positive stride is not supported");
  for (size_t i = 0; i < k; ++i)
    LOOM_CHECK(p.pad_before[i] >= 0 && p.pad_after[i] >= 0, Runtime, "negative padding is not supported");
  for (int64_t d : p.dilation) LOOM_CHECK(d > 0, Runtime, "non-positive dilation is not supported");
  LOOM_CHECK(p.groups > 0, Runtime, "non-positive groups is not supported");
  if (p.transposed) {
    for (size_t i = 0; i < k; ++i)
      LOOM_CHECK(p.output_padding[i] < p.stride[i] || p.output_padding[i] < p.dilation[i], Runtime,
                 "output padding must be smaller than either stride or dilation, but got ",
                 named_per_dim("output_padding", p.output_padding, 0), " ", named_per_dim("stride", p.stride, 1), " ",
                 named_per_dim("dilation", p.dilation, 1));
  }
  LOOM_CHECK(x->ndim() == w->ndim(), Runtime, "Expected ", w->ndim(), "-dimensional input for ", w->ndim(),
             "-dimensional weight ", format_dims(w->sizes()), ", but got ", x->ndim(), "-dimensional input of size ",
             format_dims(x->sizes()), " instead");
  LOOM_CHECK(w->sizes()[0] % p.groups == 0, Runtime, "Given groups=", p.groups,
             ", expected weight to be divisible by ", p.groups, " at dimension 0, but got weight of size [",
             format_dims(w->sizes()), "] instead");
  int64_t channels = x->sizes()[1];
  if (!p.transposed) {
    LOOM_CHECK(channels == w->sizes()[1] * p.groups, Runtime, "Given groups=", p.groups, ", weight of size ",
               format_dims(w->sizes()), ", expected input", format_dims(x->sizes()), " to have ",
               w->sizes()[1] * p.groups, " channels, but got ", channels, " channels instead");
  } else {
    LOOM_CHECK(channels == w->sizes()[0], Runtime, "Given transposed=1, weight of size ", format_dims(w->sizes()),
               ", expected input", format_dims(x->sizes()), " to have ", w->sizes()[0], " channels, but got ",
               channels, " channels instead");
  }
  int64_t out_channels = p.transposed ? w->sizes()[1] * p.groups : w->sizes()[0];
  if (bias) {
    LOOM_CHECK((*bias)->ndim() == 1 && (*bias)->sizes()[0] == out_channels, Runtime, "Given ",
               p.transposed ? "transposed=1, " : "", "weight of size ", format_dims(w->sizes()),
               ", expected bias to be 1-dimensional with ", out_channels, " elements, but got bias of size ",
               format_dims((*bias)->sizes()), " instead");
  }
  if (!p.transposed) {
    Dims padded, kernel;
    bool fits = true;
    for (size_t i = 0; i < k; ++i) {
      CheckedInt in_padded = CheckedInt(x->sizes()[2 + i]) + p.pad_before[i] + p.pad_after[i];
      CheckedInt window = CheckedInt(p.dilation[i]) * (w->sizes()[2 + i] - 1) + 1;
      LOOM_CHECK(in_padded.ok() && window.ok(), Runtime, "Given input size per channel: ",
                 spatial(x->sizes().subspan(2)), ", padding ", spatial(p.pad_before), " and ", spatial(p.pad_after),
                 ", kernel size ", spatial(w->sizes().subspan(2)), " and dilation ", spatial(p.dilation),
                 ": the padded input or the dilated kernel is larger than int64 can hold");
      padded.push_back(in_padded.value());
      kernel.push_back(window.value());
      fits = fits && kernel.back() <= padded.back();
    }
    LOOM_CHECK(fits, Runtime, "Calculated padded input size per channel: ", spatial(padded), ". Kernel size: ",
               spatial(kernel), ". Kernel size can't be greater than actual input size");
  }
  LOOM_CHECK(x->dtype() == w->dtype(), Runtime, "Input type (", legacy_type(x->dtype()), ") and weight type (",
             legacy_type(w->dtype()), ") should be the same or input should be a MKLDNN tensor and weight is a dense tensor");
  if (bias)
    LOOM_CHECK((*bias)->dtype() == x->dtype(), Runtime, "Input type (", dtype_name(x->dtype()), ") and bias type (",
               dtype_name((*bias)->dtype()), ") should be the same");
  LOOM_CHECK(x->dtype() != DType::Bool, Runtime, "\"slow_conv", k, "d_cpu\" not implemented for 'Bool'");
}

// (x_0, ..., x_{k-1}) of a convolution's spatial dims as ops::pad wants them: last dim first.
Dims pad_pairs(IntSpan before, IntSpan after) {
  Dims pairs;
  for (size_t i = before.size(); i-- > 0;) {
    pairs.push_back(before[i]);
    pairs.push_back(after[i]);
  }
  return pairs;
}

Tensor add_bias(Tensor out, const Tensor* bias) {
  if (!bias) return out;
  Dims shape(static_cast<size_t>(out->ndim()), 1);
  shape[1] = (*bias)->sizes()[0];
  return add(out, reshape(*bias, shape));
}

// y[n, o, l...] = sum_{c, k} windows(x)[n, c, l..., k...] w[o, c, k...] per group.
Tensor forward_convolution(const Tensor& x, const Tensor& w, const ConvParams& p) {
  auto k = static_cast<int64_t>(p.stride.size());
  int64_t n = x->sizes()[0], channels = x->sizes()[1], out_channels = w->sizes()[0], groups = p.groups;
  int64_t group_channels = channels / groups, group_out = out_channels / groups;
  IntSpan kernel = w->sizes().subspan(2);
  Tensor padded = x;
  for (size_t i = 0; i < p.pad_before.size(); ++i)
    if (p.pad_before[i] || p.pad_after[i]) {
      padded = pad(x, pad_pairs(p.pad_before, p.pad_after));
      break;
    }
  Tensor windows = sliding_windows(padded, 2, kernel, p.stride, p.dilation);  // (N, C, L..., K...)
  Dims out_spatial(windows->sizes().subspan(2, static_cast<size_t>(k)));
  int64_t positions = numel_of(out_spatial), taps = numel_of(kernel);
  Dims out_shape{n, out_channels};
  for (int64_t s : out_spatial) out_shape.push_back(s);

  if (group_channels == 1 && groups > 1) {
    // Depthwise: each output channel reads one input channel; the product with the weight summed
    // over the window is a fused row kernel (no column matrix).
    Dims wshape{1, groups, group_out};
    DimList reduced;
    for (int64_t i = 0; i < k; ++i) wshape.push_back(1);
    for (int64_t i = 0; i < k; ++i) {
      wshape.push_back(kernel[i]);
      reduced.push_back(3 + k + i);
    }
    Tensor prod = mul(unsqueeze(windows, 2), reshape(w, wshape));  // (N, G, G_out, L..., K...)
    return reshape(sum(prod, reduced), out_shape);
  }
  // Columns: (N, G, C_g, K..., L...) as (N, G, C_g * K, L), one gather of the windows whose inner
  // loop runs along the output's positions (long, unit-stride rows for stride 1), then
  // (G, O_g, C_g * K) @ columns: the result is already (N, O, L), no transpose.
  Dims split{n, groups, group_channels};
  for (int64_t s : windows->sizes().subspan(2)) split.push_back(s);
  Dims order{0, 1, 2};
  for (int64_t i = 0; i < k; ++i) order.push_back(3 + k + i);
  for (int64_t i = 0; i < k; ++i) order.push_back(3 + i);
  Tensor columns = reshape(permute(reshape(windows, split), order),
                           groups == 1 ? Dims{n, channels * taps, positions}
                                       : Dims{n, groups, group_channels * taps, positions});
  Tensor weights = groups == 1 ? reshape(w, Dims{out_channels, channels * taps})
                               : reshape(w, Dims{groups, group_out, group_channels * taps});
  return reshape(matmul(weights, columns), out_shape);  // (N, [G,] O_g, L)
}

// The transposed convolution: each input position spreads x[n, c, l...] w[c, o, k...] over its
// window of the output: a product, then the windows summed into place (col2im), then the padding
// cropped.
Tensor transposed_convolution(const Tensor& x, const Tensor& w, const ConvParams& p) {
  auto k = static_cast<size_t>(p.stride.size());
  int64_t n = x->sizes()[0], channels = x->sizes()[1], groups = p.groups;
  int64_t group_channels = channels / groups, group_out = w->sizes()[1], out_channels = group_out * groups;
  IntSpan kernel = w->sizes().subspan(2);
  IntSpan in_spatial = x->sizes().subspan(2);
  int64_t positions = numel_of(in_spatial), taps = numel_of(kernel);
  Dims full_shape{n, out_channels}, out_spatial;
  bool fits = true;
  for (size_t i = 0; i < k; ++i) {
    CheckedInt full_extent = CheckedInt(in_spatial[i] - 1) * p.stride[i] +
                             CheckedInt(p.dilation[i]) * (kernel[i] - 1) + 1 + p.output_padding[i];
    CheckedInt out_extent = full_extent - p.pad_before[i] - p.pad_after[i];
    LOOM_CHECK(full_extent.ok() && out_extent.ok(), Runtime, "Given input size per channel: ", spatial(in_spatial),
               ", stride ", spatial(p.stride), ", kernel size ", spatial(kernel), ", dilation ", spatial(p.dilation),
               ", padding ", spatial(p.pad_before), " and output_padding ", spatial(p.output_padding),
               ": the output size is larger than int64 can hold");
    full_shape.push_back(full_extent.value());
    out_spatial.push_back(out_extent.value());
    fits = fits && out_spatial.back() > 0;
  }
  LOOM_CHECK(fits, Runtime, "Given input size per channel: ", spatial(in_spatial),
             ". Calculated output size per channel: ", spatial(out_spatial), ". Output size is too small");
  // (G, O_g * K, C_g) @ (N, G, C_g, L) -> (N, G, O_g * K, L): the windows in the order
  // windows_sum reads them (window element before position), so no copy between the two.
  Tensor rows = groups == 1 ? reshape(x, Dims{n, channels, positions})
                            : reshape(x, Dims{n, groups, group_channels, positions});
  Tensor weights = groups == 1 ? t(reshape(w, Dims{channels, out_channels * taps}))
                               : transpose(reshape(w, Dims{groups, group_channels, group_out * taps}), 1, 2);
  Tensor out = matmul(weights, rows);
  // -> (N, O, K..., L...) -> (N, O, L..., K...)
  Dims split{n, out_channels};
  for (int64_t s : kernel) split.push_back(s);
  for (int64_t s : in_spatial) split.push_back(s);
  Dims order{0, 1};
  for (size_t i = 0; i < k; ++i) order.push_back(2 + static_cast<int64_t>(k + i));
  for (size_t i = 0; i < k; ++i) order.push_back(2 + static_cast<int64_t>(i));
  Tensor windows = permute(reshape(out, split), order);
  Tensor result = windows_sum(windows, full_shape, 2, kernel, p.stride, p.dilation);
  for (size_t i = 0; i < k; ++i)
    if (p.pad_before[i] || p.pad_after[i])
      result = narrow(result, 2 + static_cast<int64_t>(i), p.pad_before[i], out_spatial[i]);
  return result;
}

// conv{k}d / conv_transpose{k}d on batched or unbatched input.
Tensor convolution(const char* name, const Tensor& input, const Tensor& w, const Tensor* bias, ConvParams p) {
  auto k = static_cast<int64_t>(p.stride.size());
  LOOM_CHECK(input->ndim() == k + 1 || input->ndim() == k + 2, Runtime, "Expected ", k + 1, "D (unbatched) or ",
             k + 2, "D (batched) input to ", name, ", but got input of size: ", format_dims(input->sizes()));
  bool batched = input->ndim() == k + 2;
  Tensor x = batched ? input : unsqueeze(input, 0);
  check_convolution(x, w, bias, p);
  Tensor out = p.transposed ? transposed_convolution(x, w, p) : forward_convolution(x, w, p);
  out = contiguous(add_bias(out, bias));
  return batched ? out : squeeze(out, DimList{0});
}

ConvParams conv_params(const Tensor& w, IntSpan stride, IntSpan dilation, int64_t groups) {
  LOOM_CHECK(w->ndim() >= 3, Runtime, "weight should have at least three dimensions");
  auto k = static_cast<size_t>(w->ndim() - 2);
  ConvParams p;
  p.stride = per_dim(stride, k, "stride");
  p.dilation = per_dim(dilation, k, "dilation");
  p.output_padding = Dims(k, 0);
  p.groups = groups;
  return p;
}

const char* conv_name(int64_t k, bool transposed) {
  static const char* const names[2][3] = {{"conv1d", "conv2d", "conv3d"},
                                          {"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}};
  return names[transposed][k - 1];
}

}  // namespace

Tensor conv(const Tensor& input, const Tensor& weight, const Tensor* bias, IntSpan stride, IntSpan padding,
            IntSpan dilation, int64_t groups, int64_t k) {
  ConvParams p = conv_params(weight, stride, dilation, groups);
  p.pad_before = p.pad_after = per_dim(padding, p.stride.size(), "padding");
  return convolution(conv_name(k, false), input, weight, bias, std::move(p));
}

Tensor conv(const Tensor& input, const Tensor& weight, const Tensor* bias, IntSpan stride, std::string_view padding,
            IntSpan dilation, int64_t groups, int64_t k) {
  LOOM_CHECK(padding == "same" || padding == "valid", Runtime, "Invalid padding string: '", padding, "'");
  ConvParams p = conv_params(weight, stride, dilation, groups);
  size_t dims = p.stride.size();
  p.pad_before = p.pad_after = Dims(dims, 0);
  if (padding == "same") {
    for (int64_t s : p.stride) LOOM_CHECK(s == 1, Runtime, "padding='same' is not supported for strided convolutions");
    // The total padding d * (K - 1), the odd one on the right, as PyTorch pads.
    for (size_t i = 0; i < dims && static_cast<int64_t>(i) + 2 < weight->ndim(); ++i) {
      CheckedInt reach = CheckedInt(p.dilation[i]) * (weight->sizes()[2 + i] - 1);
      LOOM_CHECK(reach.ok(), Runtime, "padding='same': dilation ", spatial(p.dilation), " times kernel size ",
                 spatial(weight->sizes().subspan(2)), " minus one is larger than int64 can hold");
      int64_t total = reach.value();
      p.pad_before[i] = total / 2;
      p.pad_after[i] = total - total / 2;
    }
  }
  return convolution(conv_name(k, false), input, weight, bias, std::move(p));
}

Tensor conv_transpose(const Tensor& input, const Tensor& weight, const Tensor* bias, IntSpan stride, IntSpan padding,
                      IntSpan output_padding, int64_t groups, IntSpan dilation, int64_t k) {
  ConvParams p = conv_params(weight, stride, dilation, groups);
  p.pad_before = p.pad_after = per_dim(padding, p.stride.size(), "padding");
  p.output_padding = per_dim(output_padding, p.stride.size(), "output_padding");
  p.transposed = true;
  return convolution(conv_name(k, true), input, weight, bias, std::move(p));
}

// ---- im2col / col2im (torch.nn.functional.unfold / fold) ----

namespace {

struct BlockParams {
  Dims kernel, dilation, padding, stride;
};

// PyTorch's checks of unfold's and fold's 2-d parameters.
BlockParams block_params(IntSpan kernel, IntSpan dilation, IntSpan padding, IntSpan stride) {
  BlockParams p{per_dim(kernel, 2, "kernel_size"), per_dim(dilation, 2, "dilation"), per_dim(padding, 2, "padding"),
                per_dim(stride, 2, "stride")};
  LOOM_CHECK(p.kernel[0] > 0 && p.kernel[1] > 0, Runtime, "kernel size should be greater than zero, but got kernel_height: ",
             p.kernel[0], " kernel_width: ", p.kernel[1]);
  LOOM_CHECK(p.dilation[0] > 0 && p.dilation[1] > 0, Runtime, "dilation should be greater than zero, but got dilation_height: ",
             p.dilation[0], " dilation_width: ", p.dilation[1]);
  LOOM_CHECK(p.padding[0] >= 0 && p.padding[1] >= 0, Runtime, "padding should be non-negative, but got pad_height: ",
             p.padding[0], " pad_width: ", p.padding[1]);
  LOOM_CHECK(p.stride[0] > 0 && p.stride[1] > 0, Runtime, "stride should be greater than zero, but got stride_height: ",
             p.stride[0], " stride_width: ", p.stride[1]);
  return p;
}

// The number of blocks along each of the two dims of `spatial`, or raises as PyTorch does.
// F.unfold / F.fold take floating dtypes only (PyTorch's CPU kernels dispatch on them; an integer
// convolution or pooling gradient still sums windows: the check is here, not in Col2Im).
void check_floating_blocks(const Tensor& x, const char* kernel_name) {
  LOOM_CHECK(is_floating(x->dtype()), Runtime, "\"", kernel_name, "\" not implemented for '",
             dtype_info(x->dtype()).scalar_type_name, "'");
}

// The sizes are the caller's numbers (fold's output_size, any kernel, dilation, padding): each
// product and sum is checked, as a hostile 2^62 would otherwise wrap around (and a count or tap
// product of 0 then divides by zero).
Dims block_counts(IntSpan extent, const BlockParams& p) {
  Dims counts;
  bool fits = true;
  for (size_t i = 0; i < 2; ++i) {
    CheckedInt window = CheckedInt(p.dilation[i]) * (p.kernel[i] - 1) + 1;
    CheckedInt padded_extent = CheckedInt(extent[i]) + CheckedInt(p.padding[i]) * 2;
    LOOM_CHECK(window.ok() && padded_extent.ok(), Runtime, "Given spatial size ", spatial(extent, ", "), ", kernel_size=",
               spatial(p.kernel, ", "), ", dilation=", spatial(p.dilation, ", "), ", padding=", spatial(p.padding, ", "),
               ": the padded size or the sliding block's extent exceeds the int64 range");
    int64_t padded = padded_extent.value();
    counts.push_back((padded - window.value()) / p.stride[i] + 1);
    fits = fits && padded >= window.value() && counts[i] >= 1;
  }
  LOOM_CHECK(fits, Runtime, "Given input with spatial size ", spatial(extent, ", "), ", kernel_size=",
             spatial(p.kernel, ", "), ", dilation=", spatial(p.dilation, ", "), ", padding=", spatial(p.padding, ", "),
             ", calculated shape of the array of sliding blocks as ", spatial(counts, ", "),
             ", but its components must be at least one.");
  return counts;
}

}  // namespace

Tensor im2col(const Tensor& input, IntSpan kernel_size, IntSpan dilation, IntSpan padding, IntSpan stride) {
  BlockParams p = block_params(kernel_size, dilation, padding, stride);
  bool batched = input->ndim() == 4;
  bool nonempty = input->ndim() >= 3;
  for (int64_t d = input->ndim() - 3; nonempty && d < input->ndim(); ++d) nonempty = input->sizes()[d] > 0;
  LOOM_CHECK((input->ndim() == 3 || batched) && nonempty, Runtime,
             "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for "
             "input, but got: ", format_dims(input->sizes()));
  Tensor x = batched ? input : unsqueeze(input, 0);
  block_counts(x->sizes().subspan(2), p);
  check_floating_blocks(x, "im2col_out_cpu");
  if (p.padding[0] || p.padding[1]) x = pad(x, Dims{p.padding[1], p.padding[1], p.padding[0], p.padding[0]});
  Tensor windows = sliding_windows(x, 2, p.kernel, p.stride, p.dilation);  // (N, C, L_h, L_w, K_h, K_w)
  IntSpan s = windows->sizes();
  Tensor out = reshape(permute(windows, Dims{0, 1, 4, 5, 2, 3}), Dims{s[0], s[1] * s[4] * s[5], s[2] * s[3]});
  return batched ? out : squeeze(out, DimList{0});
}

Tensor col2im(const Tensor& input, IntSpan output_size, IntSpan kernel_size, IntSpan dilation, IntSpan padding,
              IntSpan stride) {
  Dims out_size = per_dim(output_size, 2, "output_size");
  BlockParams p = block_params(kernel_size, dilation, padding, stride);
  bool batched = input->ndim() == 3;
  bool nonempty = input->ndim() >= 2;
  for (int64_t d = input->ndim() - 2; nonempty && d < input->ndim(); ++d) nonempty = input->sizes()[d] > 0;
  LOOM_CHECK((input->ndim() == 2 || batched) && nonempty, Runtime,
             "Expected 2D or 3D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for "
             "input, but got: ", format_dims(input->sizes()));
  Tensor x = batched ? input : unsqueeze(input, 0);
  int64_t rows = x->sizes()[1];
  // A product past int64 cannot divide rows (the same error, not a division by a wrapped 0).
  CheckedInt taps_checked = CheckedInt(p.kernel[0]) * p.kernel[1];
  int64_t taps = taps_checked.value();
  LOOM_CHECK(taps_checked.ok() && rows % taps == 0, Runtime, "Expected size of input's dimension 1 to be divisible by the product of "
             "kernel_size, but got input.size(1)=", rows, " and kernel_size=", spatial(p.kernel, ", "), ".");
  Dims counts = block_counts(out_size, p);
  CheckedInt blocks_checked = CheckedInt(counts[0]) * counts[1];
  bool blocks_fit = blocks_checked.ok();
  int64_t blocks = blocks_checked.value();
  LOOM_CHECK(blocks_fit && x->sizes()[2] == blocks, Runtime, "Given output_size=", spatial(out_size, ", "),
             ", kernel_size=", spatial(p.kernel, ", "), ", dilation=", spatial(p.dilation, ", "), ", padding=",
             spatial(p.padding, ", "), ", stride=", spatial(p.stride, ", "),
             ", expected size of input's dimension 2 to match the calculated number of sliding blocks ", counts[0],
             " * ", counts[1], " = ", (blocks_fit ? std::to_string(blocks) : std::string("more than int64 holds")),
             ", but got input.size(2)=", x->sizes()[2], ".");
  check_floating_blocks(x, "col2im_out_cpu");
  int64_t n = x->sizes()[0], channels = rows / taps;
  Tensor windows = permute(reshape(x, Dims{n, channels, p.kernel[0], p.kernel[1], counts[0], counts[1]}),
                           Dims{0, 1, 4, 5, 2, 3});
  Dims padded{n, channels, out_size[0] + 2 * p.padding[0], out_size[1] + 2 * p.padding[1]};
  Tensor out = windows_sum(windows, padded, 2, p.kernel, p.stride, p.dilation);
  for (int64_t i = 0; i < 2; ++i)
    if (p.padding[i]) out = narrow(out, 2 + i, p.padding[i], out_size[i]);
  return batched ? out : squeeze(out, DimList{0});
}

}  // namespace loom::ops
