#include "runtime/scalar.h"

#include <cfloat>
#include <cmath>

#include "runtime/error.h"

namespace loom {

bool Scalar::overflows(DType dtype) const noexcept {
  if (kind_ == ScalarKind::Bool || dtype == DType::Bool) return false;
  if (kind_ == ScalarKind::Int) {
    switch (dtype) {
      case DType::UInt8: return i_ > 255 || i_ < -255;  // -1 is 255, as two's complement wraps
      case DType::Int8: return i_ < INT8_MIN || i_ > INT8_MAX;
      case DType::Int16: return i_ < INT16_MIN || i_ > INT16_MAX;
      case DType::Int32: return i_ < INT32_MIN || i_ > INT32_MAX;
      case DType::Float16: return i_ < -65504 || i_ > 65504;
      default: return false;  // int64, bfloat16, float32 and float64 span every int64
    }
  }
  if (!std::isfinite(d_)) return !is_floating(dtype);
  auto outside = [this](double lowest, double max) { return d_ < lowest || d_ > max; };
  switch (dtype) {
    case DType::UInt8: return outside(0.0, 255.0);
    case DType::Int8: return outside(INT8_MIN, INT8_MAX);
    case DType::Int16: return outside(INT16_MIN, INT16_MAX);
    case DType::Int32: return outside(INT32_MIN, INT32_MAX);
    // INT64_MAX is no double, and 2^63 does not fit. (PyTorch compares with INT64_MAX rounded up
    // to 2^63, so it lets 2^63 itself through to an undefined cast.)
    case DType::Int64: return d_ < -0x1p63 || d_ >= 0x1p63;
    case DType::Float16: return outside(-65504.0, 65504.0);
    case DType::BFloat16: return outside(-0x1.fep127, 0x1.fep127);
    case DType::Float32: return outside(-FLT_MAX, FLT_MAX);
    default: return false;  // float64
  }
}

Scalar Scalar::stored_as(DType dtype) const noexcept {
  return visit_dtype(dtype, [this, dtype](auto tag) {
    using T = decltype(tag);
    T v = to<T>();
    return load(&v, dtype);
  });
}

void Scalar::check_fits(DType dtype) const {
  LOOM_CHECK(!overflows(dtype), Runtime, "value cannot be converted to type ", dtype_name(dtype), " without overflow");
}

}  // namespace loom
