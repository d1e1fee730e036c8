// Element types and PyTorch's type promotion.
//
// One table (kDTypeInfo in dtype.cpp) describes every dtype; everything else (names, sizes,
// buffer formats, promotion) reads it, so adding a dtype touches the enum and that table.
//
// Promotion follows PyTorch: bool < integers < floating point as categories; within a category the
// wider type wins; uint8 with int8 gives int16 and float16 with bfloat16 gives float32 (the pairs
// where neither holds the other). ResultType adds PyTorch's "weak" operands:
// Python scalars and 0-d tensors only raise the result's category, never its width inside one, so
// `int32_tensor + 1` stays int32 and `float16_tensor * 2.5` stays float16.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "runtime/half.h"

namespace loom {

// The values are codes that generated kernels and the CUDA runtime kernels switch on (and that
// DLPack and serialization never see): a new dtype is appended, so existing codes keep their meaning.
enum class DType : uint8_t { Bool, UInt8, Int32, Int64, Float16, BFloat16, Float32, Float64, Int8, Int16 };
inline constexpr int kNumDTypes = 10;

enum class DTypeCategory : uint8_t { Bool, Integral, Floating };

struct DTypeInfo {
  const char* name;           // "float32": the canonical name, also loom.<name>
  uint8_t itemsize;           // bytes per element
  DTypeCategory category;
  uint8_t mantissa_digits;    // significant bits (floating) or value bits (integral): exact-integer range
  const char* buffer_format;  // PEP 3118 format for the buffer protocol, nullptr if it has none
  const char* scalar_type_name;  // PyTorch's C++ name ("Long"), which some of its messages use
};

const DTypeInfo& dtype_info(DType dtype) noexcept;
inline const char* dtype_name(DType d) noexcept { return dtype_info(d).name; }
inline size_t itemsize(DType d) noexcept { return dtype_info(d).itemsize; }
inline bool is_floating(DType d) noexcept { return dtype_info(d).category == DTypeCategory::Floating; }
inline bool is_integral(DType d, bool include_bool = false) noexcept {
  auto c = dtype_info(d).category;
  return c == DTypeCategory::Integral || (include_bool && c == DTypeCategory::Bool);
}

// Accepts canonical names and PyTorch's aliases: "float", "double", "half", "long", "int", "short",
// "byte".
std::optional<DType> dtype_from_name(std::string_view name) noexcept;
// Inverse of DTypeInfo::buffer_format, accepting the equivalent native formats ("l" for int64...).
std::optional<DType> dtype_from_buffer_format(std::string_view format) noexcept;

// The smallest dtype both operands convert to without losing their category.
DType promote_types(DType a, DType b) noexcept;

// The default dtype of Python floats and of floating creation ops (float32 unless changed).
DType default_float_dtype() noexcept;
void set_default_float_dtype(DType dtype);  // floating dtypes only

// The kind of a Python scalar operand, which promotes as the default dtype of its kind.
enum class ScalarKind : uint8_t { Bool, Int, Float };

// Accumulates the operands of one op and yields its result dtype, as torch.result_type does.
class ResultType {
 public:
  void add_tensor(DType dtype, int64_t ndim) noexcept;
  void add_scalar(ScalarKind kind) noexcept;
  DType get() const noexcept;

 private:
  std::optional<DType> dim_;      // tensors with at least one dimension
  std::optional<DType> zero_dim_;  // 0-d tensors
  std::optional<DType> scalar_;   // Python numbers
};

// Calls f(T{}) with the C++ storage type of dtype: bool, uint8_t, int8_t, int16_t, int32_t,
// int64_t, Half, BFloat16, float, double. The one place a dtype turns into a type.
template <typename F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Bool: return f(bool{});
    case DType::UInt8: return f(uint8_t{});
    case DType::Int8: return f(int8_t{});
    case DType::Int16: return f(int16_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Float16: return f(Half{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
  }
  __builtin_unreachable();
}

template <typename T>
inline constexpr DType dtype_of = [] {
  if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::UInt8;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::Int8;
  else if constexpr (std::is_same_v<T, int16_t>) return DType::Int16;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::Int32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::Int64;
  else if constexpr (std::is_same_v<T, Half>) return DType::Float16;
  else if constexpr (std::is_same_v<T, BFloat16>) return DType::BFloat16;
  else if constexpr (std::is_same_v<T, float>) return DType::Float32;
  else return DType::Float64;
}();

// Converts between storage types as a cast does in PyTorch: to bool is `!= 0`, float to integer
// truncates toward zero, and 16-bit floats convert through float.
template <typename To, typename From>
inline To convert(From v) noexcept {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) return float(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return convert<To>(float(v));
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace loom
