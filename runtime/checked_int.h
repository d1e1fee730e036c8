// Integer arithmetic on a caller's numbers that notices when a result leaves int64.
//
// Output sizes of convolutions, pooling and sliding windows are formulas over the caller's kernel
// sizes, strides, paddings and dilations: (extent + 2 * pad - dilation * (kernel - 1) - 1) / stride
// + 1 and the like. With hostile values (2^62) a product wraps around, silently (or as undefined
// behaviour: UBSan flags signed overflow), and the wrapped size passes or fails later checks at
// random: a negative "size", a division by a wrapped 0 (F.fold's SIGFPE), or, worst, a plausible
// shape and a wrong result (conv_transpose1d with stride 2^62 computed a 3-wide output). Every such
// formula is written with CheckedInt instead, and the caller raises its own error, naming its
// parameters, when the result is not representable. One helper for the whole class, so a new op's
// size formula gets the check by being written with it.
#pragma once

#include <cstdint>

namespace loom {

class CheckedInt {
 public:
  constexpr CheckedInt(int64_t v = 0) : value_(v) {}  // NOLINT: implicit, so formulas read as arithmetic

  // False once any step of the formula left int64 (or divided by zero); the result is then
  // meaningless and value() must not be used.
  constexpr bool ok() const { return ok_; }
  constexpr int64_t value() const { return value_; }

  friend CheckedInt operator+(CheckedInt a, CheckedInt b) {
    CheckedInt r;
    r.ok_ = a.ok_ && b.ok_ && !__builtin_add_overflow(a.value_, b.value_, &r.value_);
    return r;
  }
  friend CheckedInt operator-(CheckedInt a, CheckedInt b) {
    CheckedInt r;
    r.ok_ = a.ok_ && b.ok_ && !__builtin_sub_overflow(a.value_, b.value_, &r.value_);
    return r;
  }
  friend CheckedInt operator*(CheckedInt a, CheckedInt b) {
    CheckedInt r;
    r.ok_ = a.ok_ && b.ok_ && !__builtin_mul_overflow(a.value_, b.value_, &r.value_);
    return r;
  }
  // Division rounding toward minus infinity (Python's //, PyTorch's div_rtn in pooling shapes).
  friend CheckedInt floor_div(CheckedInt a, CheckedInt b) {
    CheckedInt r;
    r.ok_ = a.ok_ && b.ok_ && b.value_ != 0 && !(a.value_ == INT64_MIN && b.value_ == -1);
    if (!r.ok_) return r;
    int64_t q = a.value_ / b.value_;
    if ((a.value_ % b.value_ != 0) && ((a.value_ < 0) != (b.value_ < 0))) --q;
    r.value_ = q;
    return r;
  }

 private:
  int64_t value_ = 0;
  bool ok_ = true;
};

}  // namespace loom
