// What the files of derivatives (lazy/derivatives*.cpp) share: reading a derivative's saved
// values, and small gradient builders. Internal to lazy/.
//
// A derivative reads only what its SavedValues entry saves (lazy/op.h); `saved` and `result`
// turn a mistake in an entry into an "internal:" error instead of a wrong gradient.
#pragma once

#include <vector>

#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "runtime/error.h"

namespace loom::derivative {

using Grads = std::vector<Tensor>;

// Input i's saved value.
inline const Tensor& saved(const BackwardContext& c, size_t i) {
  LOOM_CHECK(c.inputs[i], Runtime, "internal: the derivative of ", op_name(c.op), " reads input ", i,
             ", which its SavedValues entry does not save");
  return c.inputs[i];
}
inline const Tensor& result(const BackwardContext& c) {
  LOOM_CHECK(c.result, Runtime, "internal: the derivative of ", op_name(c.op),
             " reads the result, which its SavedValues entry does not save");
  return c.result;
}
// Input i: its saved value, or the Python number it was.
inline Arg in(const BackwardContext& c, size_t i) { return c.is_number(i) ? Arg(c.scalars[i]) : Arg(saved(c, i)); }
inline const Tensor& x(const BackwardContext& c) { return saved(c, 0); }

inline Tensor zeros(IntSpan shape, DType dtype, const Tensor& like) {
  return ops::full(shape, Scalar(int64_t{0}), dtype, {like->device(), like->is_lazy()});
}

// g where cond holds, 0 elsewhere.
inline Tensor mask(const Tensor& cond, const Tensor& g) { return ops::where(cond, g, Scalar(int64_t{0})); }

// Masks for SavedValues entries.
constexpr uint64_t kIn0 = input_bit(0), kIn1 = input_bit(1);
constexpr SavedValues kNothing{};
constexpr SavedValues kSelf{.inputs_for = {kIn0}};  // f(x): f'(x) reads x
constexpr SavedValues kResult{.result_for = 1};     // f(x): f'(x) reads f(x)
constexpr SavedValues kBoth{.inputs_for = {kIn0 | kIn1, kIn0 | kIn1}};

}  // namespace loom::derivative

#define DERIVATIVE(Op) void d_##Op(const BackwardContext& c, ::loom::derivative::Grads& g)
