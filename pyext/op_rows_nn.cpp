// The op table's rows of convolution and pooling (lazy/ops_conv.cpp, ops_pool.cpp,
// ops_windows.cpp): torch.conv2d, torch.max_pool2d, torch.nn.functional.avg_pool2d, ... with
// PyTorch's signatures; and the nn composites' (normalization, cross-entropy, attention). loom.nn.functional wraps the few that PyTorch wraps in Python
// (max_pool2d's return_indices, adaptive pools' None sizes, unfold / fold). Rows named with a
// leading underscore are loom's own helpers for those wrappers, not PyTorch names.
#include "pyext/op_table.h"

namespace loom::py {
namespace {

const Tensor* optional(const Tensor& t) { return t ? &t : nullptr; }

// conv{K}d(input, weight, bias, stride, padding, dilation, groups), padding a number or "same" / "valid".
template <int64_t K>
Result conv(const Parsed& p) {
  Tensor bias = p.tensor(2);
  if (p.index == 0)
    return ops::conv(p.tensor(0), p.tensor(1), optional(bias), p.int_list(3), p.int_list(4), p.int_list(5), p.int64(6), K);
  return ops::conv(p.tensor(0), p.tensor(1), optional(bias), p.int_list(3), p.string(4), p.int_list(5), p.int64(6), K);
}

template <int64_t K>
Result conv_transpose(const Parsed& p) {
  Tensor bias = p.tensor(2);
  return ops::conv_transpose(p.tensor(0), p.tensor(1), optional(bias), p.int_list(3), p.int_list(4), p.int_list(5),
                             p.int64(6), p.int_list(7), K);
}

template <size_t K, bool WithIndices>
Result max_pool(const Parsed& p) {
  auto [values, indices] = ops::max_pool(p.tensor(0), K, p.int_list(1), p.int_list(2), p.int_list(3), p.int_list(4),
                                         p.boolean(5), WithIndices);
  if (!WithIndices) return values;
  return std::vector<Tensor>{values, indices};
}

template <size_t K>
Result avg_pool(const Parsed& p) {
  return ops::avg_pool(p.tensor(0), K, p.int_list(1), p.int_list(2), p.int_list(3), p.boolean(4), p.boolean(5),
                       p.optional_int64(6));
}

template <size_t K>
Result adaptive_avg_pool(const Parsed& p) {
  return ops::adaptive_avg_pool(p.tensor(0), K, p.int_list(1));
}

template <size_t K>
Result adaptive_max_pool(const Parsed& p) {
  auto [values, indices] = ops::adaptive_max_pool(p.tensor(0), K, p.int_list(1), true);
  return std::vector<Tensor>{values, indices};
}

template <size_t K>
Result max_unpool(const Parsed& p) {
  return ops::max_unpool(p.tensor(0), p.tensor(1), K, p.int_list(2));
}

const Row kRows[] = {
    {{"conv1d(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=[1], int[1] padding=[0], "
      "int[1] dilation=[1], int groups=1)",
      "conv1d(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=[1], str padding='valid', "
      "int[1] dilation=[1], int groups=1)"},
     kFunction, conv<1>},
    {{"conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=[1, 1], int[2] padding=[0, 0], "
      "int[2] dilation=[1, 1], int groups=1)",
      "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=[1, 1], str padding='valid', "
      "int[2] dilation=[1, 1], int groups=1)"},
     kFunction, conv<2>},
    {{"conv3d(Tensor input, Tensor weight, Tensor? bias=None, int[3] stride=[1, 1, 1], "
      "int[3] padding=[0, 0, 0], int[3] dilation=[1, 1, 1], int groups=1)",
      "conv3d(Tensor input, Tensor weight, Tensor? bias=None, int[3] stride=[1, 1, 1], str padding='valid', "
      "int[3] dilation=[1, 1, 1], int groups=1)"},
     kFunction, conv<3>},
    {{"conv_transpose1d(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=[1], int[1] padding=[0], "
      "int[1] output_padding=[0], int groups=1, int[1] dilation=[1])"},
     kFunction, conv_transpose<1>},
    {{"conv_transpose2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=[1, 1], "
      "int[2] padding=[0, 0], int[2] output_padding=[0, 0], int groups=1, int[2] dilation=[1, 1])"},
     kFunction, conv_transpose<2>},
    {{"conv_transpose3d(Tensor input, Tensor weight, Tensor? bias=None, int[3] stride=[1, 1, 1], "
      "int[3] padding=[0, 0, 0], int[3] output_padding=[0, 0, 0], int groups=1, int[3] dilation=[1, 1, 1])"},
     kFunction, conv_transpose<3>},

    // stride None (or left out): the kernel size.
    {{"max_pool1d(Tensor input, int[1] kernel_size, int[1]? stride=None, int[1] padding=[0], int[1] dilation=[1], "
      "bool ceil_mode=False)"},
     kFunction, max_pool<1, false>},
    {{"max_pool2d(Tensor input, int[2] kernel_size, int[2]? stride=None, int[2] padding=[0, 0], "
      "int[2] dilation=[1, 1], bool ceil_mode=False)"},
     kFunction, max_pool<2, false>},
    {{"max_pool3d(Tensor input, int[3] kernel_size, int[3]? stride=None, int[3] padding=[0, 0, 0], "
      "int[3] dilation=[1, 1, 1], bool ceil_mode=False)"},
     kFunction, max_pool<3, false>},
    {{"max_pool1d_with_indices(Tensor input, int[1] kernel_size, int[1]? stride=None, int[1] padding=[0], "
      "int[1] dilation=[1], bool ceil_mode=False)"},
     kFunction, max_pool<1, true>, "(values, indices): indices are flat positions in the input's spatial plane."},
    {{"max_pool2d_with_indices(Tensor input, int[2] kernel_size, int[2]? stride=None, int[2] padding=[0, 0], "
      "int[2] dilation=[1, 1], bool ceil_mode=False)"},
     kFunction, max_pool<2, true>, "(values, indices): indices are flat positions in the input's spatial plane."},
    {{"max_pool3d_with_indices(Tensor input, int[3] kernel_size, int[3]? stride=None, int[3] padding=[0, 0, 0], "
      "int[3] dilation=[1, 1, 1], bool ceil_mode=False)"},
     kFunction, max_pool<3, true>, "(values, indices): indices are flat positions in the input's spatial plane."},
    {{"avg_pool1d(Tensor input, int[1] kernel_size, int[1]? stride=None, int[1] padding=[0], bool ceil_mode=False, "
      "bool count_include_pad=True)"},
     kFunction, [](const Parsed& p) -> Result {
       return ops::avg_pool(p.tensor(0), 1, p.int_list(1), p.int_list(2), p.int_list(3), p.boolean(4), p.boolean(5),
                            std::nullopt);
     }},
    {{"avg_pool2d(Tensor input, int[2] kernel_size, int[2]? stride=None, int[2] padding=[0, 0], "
      "bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None)"},
     kFunction, avg_pool<2>},
    {{"avg_pool3d(Tensor input, int[3] kernel_size, int[3]? stride=None, int[3] padding=[0, 0, 0], "
      "bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None)"},
     kFunction, avg_pool<3>},
    {{"adaptive_avg_pool1d(Tensor input, int[1] output_size)"}, kFunction, adaptive_avg_pool<1>},
    {{"adaptive_max_pool1d(Tensor input, int[1] output_size)"}, kFunction, adaptive_max_pool<1>,
     "(values, indices)."},
    // Python wraps these in PyTorch (None in output_size, return_indices): loom.nn.functional too.
    {{"_adaptive_avg_pool2d(Tensor input, int[2] output_size)"}, kFunction, adaptive_avg_pool<2>},
    {{"_adaptive_avg_pool3d(Tensor input, int[3] output_size)"}, kFunction, adaptive_avg_pool<3>},
    {{"_adaptive_max_pool2d(Tensor input, int[2] output_size)"}, kFunction, adaptive_max_pool<2>},
    {{"_adaptive_max_pool3d(Tensor input, int[3] output_size)"}, kFunction, adaptive_max_pool<3>},
    {{"_max_unpool1d(Tensor input, Tensor indices, int[1] output_size)"}, kFunction, max_unpool<1>},
    {{"_max_unpool2d(Tensor input, Tensor indices, int[2] output_size)"}, kFunction, max_unpool<2>},
    {{"_max_unpool3d(Tensor input, Tensor indices, int[3] output_size)"}, kFunction, max_unpool<3>},
    // Composites with derivatives of their own (lazy/ops_norm.cpp, ops_loss.cpp, ops_attention.cpp);
    // loom.nn.functional checks the arguments first, in PyTorch's words.
    {{"_layer_norm(Tensor input, int normalized_ndim, Tensor? weight=None, Tensor? bias=None, float eps=1e-05)"},
     kFunction, [](const Parsed& p) -> Result {
       Tensor w = p.tensor(2), b = p.tensor(3);
       return ops::layer_norm(p.tensor(0), p.int64(1), optional(w), optional(b), p.real(4));
     }},
    {{"_rms_norm(Tensor input, int normalized_ndim, Tensor? weight, float eps)"}, kFunction,
     [](const Parsed& p) -> Result {
       Tensor w = p.tensor(2);
       return ops::rms_norm(p.tensor(0), p.int64(1), optional(w), p.real(3));
     }},
    {{"_cross_entropy(Tensor input, Tensor target, Tensor? weight, int ignore_index, str reduction, "
      "float label_smoothing)"},
     kFunction, [](const Parsed& p) -> Result {
       Tensor w = p.tensor(2);
       return ops::cross_entropy(p.tensor(0), p.tensor(1), optional(w), p.int64(3), p.string(4), p.real(5));
     }},
    {{"_scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask, float dropout_p, "
      "bool is_causal, float? scale)"},
     kFunction, [](const Parsed& p) -> Result {
       Tensor mask = p.tensor(3);
       return ops::scaled_dot_product_attention(p.tensor(0), p.tensor(1), p.tensor(2), optional(mask), p.real(4),
                                                p.boolean(5), p.optional_real(6));
     }},
    {{"_im2col(Tensor input, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride)"}, kFunction,
     LOOM_BODY(ops::im2col(p.tensor(0), p.int_list(1), p.int_list(2), p.int_list(3), p.int_list(4)))},
    {{"_col2im(Tensor input, int[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride)"},
     kFunction,
     LOOM_BODY(ops::col2im(p.tensor(0), p.int_list(1), p.int_list(2), p.int_list(3), p.int_list(4), p.int_list(5)))},
};

}  // namespace

void add_nn_rows(MethodDefs& defs) { add_rows(kRows, defs); }

}  // namespace loom::py
