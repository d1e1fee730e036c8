// torch.nn.functional.pad's modes other than "constant": reflect, replicate and circular, written
// as slices (views), flips and one concatenation per padded dim, so both devices, fusion and
// autograd come with them. ops::pad(x, pads, value) in ops.cpp is the constant mode.
#include <string>

#include "lazy/ops.h"

namespace loom::ops {
namespace {

// x padded along dim d by `before` and `after` (negative amounts crop). Reflection and
// replication read the input as it is, also where the other side is cropped (PyTorch indexes
// them from the input); circular padding wraps the cropped input, as PyTorch copies it.
Tensor pad_dim(Tensor x, int64_t d, int64_t before, int64_t after, std::string_view mode) {
  auto crop = [&](Tensor t) {
    if (before < 0) t = narrow(t, d, -before, t->sizes()[d] + before);
    if (after < 0) t = narrow(t, d, 0, t->sizes()[d] + after);
    return t;
  };
  if (mode == "circular") x = crop(x);
  int64_t extent = x->sizes()[d];
  std::vector<Tensor> parts;
  auto side = [&](int64_t amount, bool left) {
    if (amount <= 0) return;
    if (mode == "reflect") {
      // The mirror image without the edge element: x[amount], ..., x[1] on the left.
      Tensor s = left ? narrow(x, d, 1, amount) : narrow(x, d, extent - 1 - amount, amount);
      parts.push_back(flip(s, Dims{d}));
    } else if (mode == "replicate") {
      Dims sizes(x->sizes());
      sizes[d] = amount;
      parts.push_back(expand(narrow(x, d, left ? 0 : extent - 1, 1), sizes));
    } else {  // circular: the other end
      parts.push_back(left ? narrow(x, d, extent - amount, amount) : narrow(x, d, 0, amount));
    }
  };
  side(before, true);
  parts.push_back(x);
  side(after, false);
  Tensor out = parts.size() > 1 ? cat(parts, d) : x;
  return mode == "circular" ? out : crop(out);
}

}  // namespace

Tensor pad(const Tensor& x, IntSpan pads, std::string_view mode, std::optional<double> value) {
  if (mode == "constant") return pad(x, pads, value.value_or(0.0));
  LOOM_CHECK(mode == "reflect" || mode == "replicate" || mode == "circular", NotImplemented,
             "Unrecognised padding mode ", mode);
  LOOM_CHECK(!value || *value == 0.0, Runtime, "Padding mode \"", mode, "\" doesn't take in value argument");
  LOOM_CHECK(pads.size() % 2 == 0, Runtime, "Padding length must be divisible by 2");
  auto dims = static_cast<int64_t>(pads.size() / 2);
  int64_t n = x->ndim();
  LOOM_CHECK(dims >= 1 && dims <= 3 && (n == dims + 1 || n == dims + 2), NotImplemented,
             "Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now");
  if (mode == "circular")
    LOOM_CHECK(dims == n - 2, Runtime, "Invalid padding size, expected ", 2 * (n - 2), " but got ", pads.size());
  else
    LOOM_CHECK(is_floating(x->dtype()), Runtime, "\"", mode == "reflect" ? "reflection_pad" : "replication_pad", dims,
               "d", mode == "reflect" ? "" : "_cpu", "\" not implemented for '", dtype_info(x->dtype()).scalar_type_name, "'");
  bool nonempty = true;
  for (int64_t d = n - dims - 1; d < n; ++d) nonempty = nonempty && x->sizes()[d] > 0;
  if (mode != "circular")
    LOOM_CHECK(nonempty, Runtime, "Expected ", dims + 1, "D or ", dims + 2, "D (batch mode) tensor with possibly 0 "
               "batch size and other non-zero dimensions for input, but got: ", format_dims(x->sizes()));
  Tensor out = x;
  for (int64_t i = 0; i < dims; ++i) {
    int64_t d = n - 1 - i, before = pads[2 * i], after = pads[2 * i + 1], extent = x->sizes()[d];
    if (mode == "reflect")
      LOOM_CHECK(before < extent && after < extent, Runtime, "Argument #", 4 + 2 * i,
                 ": Padding size should be less than the corresponding input dimension, but got: padding (", before,
                 ", ", after, ") at dimension ", d, " of input ", format_dims(x->sizes()));
    if (mode == "circular")
      LOOM_CHECK(before <= extent && after <= extent, Runtime, "Padding value causes wrapping around more than once.");
    out = pad_dim(out, d, before, after, mode);
  }
  return out;
}

}  // namespace loom::ops
