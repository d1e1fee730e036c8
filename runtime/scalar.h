// Scalar: one number as Python has it (bool, int, float), before it meets a dtype.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"

namespace loom {

class Scalar {
 public:
  Scalar(bool v) noexcept : kind_(ScalarKind::Bool) { i_ = v; }
  Scalar(int64_t v) noexcept : kind_(ScalarKind::Int) { i_ = v; }
  Scalar(int v) noexcept : Scalar(static_cast<int64_t>(v)) {}
  Scalar(double v) noexcept : kind_(ScalarKind::Float) { d_ = v; }

  ScalarKind kind() const noexcept { return kind_; }
  bool is_float() const noexcept { return kind_ == ScalarKind::Float; }

  // The value as storage type T, converted as a cast would.
  template <typename T>
  T to() const noexcept {
    if (kind_ == ScalarKind::Float) return convert<T>(d_);
    if (kind_ == ScalarKind::Bool) return convert<T>(i_ != 0);
    return convert<T>(i_);
  }
  // Whether storing the value as dtype overflows, by PyTorch's rule (c10's checked_convert):
  // ints must fit the type's range, except that negative ints wrap into uint8 down to -255;
  // floats must lie in [lowest, max] (integer types take no NaN or infinity, floating types
  // both). Nothing overflows bool, and bools overflow nothing.
  bool overflows(DType dtype) const noexcept;
  // Raises RuntimeError "value cannot be converted to type <dtype> without overflow", as
  // PyTorch's fill_ and tensor() do, when the value overflows dtype.
  void check_fits(DType dtype) const;
  // The value as dtype stores it (converted as a cast would: -1 becomes 255 in uint8), as a
  // number of dtype's kind, so that it promotes like a number of that dtype.
  Scalar stored_as(DType dtype) const noexcept;

  double as_double() const noexcept { return kind_ == ScalarKind::Float ? d_ : static_cast<double>(i_); }

  // Where the number came from, for loom.compile: 0 for nowhere known, else a tag that the
  // recording of a compiled step gave it (lazy/capture.h, Note [Where a step's numbers come
  // from]). Copies keep it; a number computed from it (-x, x.stored_as(...)) has none.
  uint32_t source() const noexcept { return source_; }
  Scalar with_source(uint32_t source) const noexcept {
    Scalar s = *this;
    s.source_ = source;
    return s;
  }
  int64_t as_int() const noexcept { return kind_ == ScalarKind::Float ? static_cast<int64_t>(d_) : i_; }

  // Reads element 0 of a buffer of the given dtype.
  static Scalar load(const void* p, DType dtype) noexcept {
    return visit_dtype(dtype, [p](auto t) -> Scalar {
      using T = decltype(t);
      T v = *static_cast<const T*>(p);
      if constexpr (std::is_same_v<T, bool>) return Scalar(v);
      else if constexpr (std::is_integral_v<T>) return Scalar(static_cast<int64_t>(v));
      else return Scalar(static_cast<double>(v));
    });
  }

 private:
  ScalarKind kind_;
  uint32_t source_ = 0;  // in the padding: a Scalar stays 16 bytes
  union {
    int64_t i_;
    double d_;
  };
};

}  // namespace loom
