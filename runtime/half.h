// float16 and bfloat16 as storage types.
//
// Both are stored as 16 raw bits and computed in float32, as every loom backend does (fp16/bf16
// math is fp32 math with narrow loads and stores). Conversions round to nearest, ties to even,
// keep NaN a NaN and saturate to infinity, matching IEEE 754 and the CUDA intrinsics, so values
// written by the CPU backend and by generated kernels are bit-identical.
#pragma once

#include <bit>
#include <cstdint>

namespace loom {

namespace detail {

inline uint16_t float_to_half_bits(float value) noexcept {
  uint32_t f = std::bit_cast<uint32_t>(value);
  uint32_t sign = (f >> 16) & 0x8000u;
  uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN; NaN keeps a quiet payload bit
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero) in half precision: scale so the integer part of the
    // float's value times 2^24 is the half mantissa, rounding to nearest even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half of the smallest subnormal
    uint32_t exponent = abs >> 23;
    uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exponent;  // half mantissa = mantissa * 2^(exponent - 126); 14..24
    uint32_t half_mantissa = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (half_mantissa & 1u))) ++half_mantissa;
    return static_cast<uint16_t>(sign | half_mantissa);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits.
  uint32_t bits = abs - 0x38000000u;
  uint32_t rest = bits & 0x1fffu;
  bits >>= 13;
  if (rest > 0x1000u || (rest == 0x1000u && (bits & 1u))) ++bits;  // may carry into the exponent
  return static_cast<uint16_t>(sign | bits);
}

inline float half_bits_to_float(uint16_t h) noexcept {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return std::bit_cast<float>(sign);
    // Subnormal: value = mantissa * 2^-24, exact in float.
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline uint16_t float_to_bfloat16_bits(float value) noexcept {
  uint32_t f = std::bit_cast<uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);  // quiet NaN
  uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
  return static_cast<uint16_t>((f + rounding) >> 16);
}

inline float bfloat16_bits_to_float(uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

}  // namespace detail

struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float value) noexcept : bits(detail::float_to_half_bits(value)) {}
  operator float() const noexcept { return detail::half_bits_to_float(bits); }
  static Half from_bits(uint16_t b) noexcept {
    Half h;
    h.bits = b;
    return h;
  }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float value) noexcept : bits(detail::float_to_bfloat16_bits(value)) {}
  operator float() const noexcept { return detail::bfloat16_bits_to_float(bits); }
  static BFloat16 from_bits(uint16_t b) noexcept {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

}  // namespace loom
