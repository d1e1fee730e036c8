#include "runtime/dtype.h"

#include <array>

#include "runtime/error.h"

namespace loom {
namespace {

using C = DTypeCategory;

// Indexed by DType. Buffer formats are the native PEP 3118 codes numpy produces for these types.
constexpr std::array<DTypeInfo, kNumDTypes> kDTypeInfo = {{
    {"bool", 1, C::Bool, 1, "?", "Bool"},
    {"uint8", 1, C::Integral, 8, "B", "Byte"},
    {"int32", 4, C::Integral, 31, "i", "Int"},
    {"int64", 8, C::Integral, 63, "q", "Long"},
    {"float16", 2, C::Floating, 11, "e", "Half"},
    {"bfloat16", 2, C::Floating, 8, nullptr, "BFloat16"},
    {"float32", 4, C::Floating, 24, "f", "Float"},
    {"float64", 8, C::Floating, 53, "d", "Double"},
    {"int8", 1, C::Integral, 7, "b", "Char"},
    {"int16", 2, C::Integral, 15, "h", "Short"},
}};

struct Alias {
  std::string_view name;
  DType dtype;
};
constexpr Alias kAliases[] = {
    {"float", DType::Float32}, {"double", DType::Float64}, {"half", DType::Float16},
    {"long", DType::Int64},    {"int", DType::Int32},      {"short", DType::Int16},
    {"byte", DType::UInt8},
};

DType default_float = DType::Float32;

}  // namespace

const DTypeInfo& dtype_info(DType dtype) noexcept { return kDTypeInfo[static_cast<int>(dtype)]; }

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  for (int i = 0; i < kNumDTypes; ++i)
    if (name == kDTypeInfo[i].name) return static_cast<DType>(i);
  for (const Alias& a : kAliases)
    if (name == a.name) return a.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_from_buffer_format(std::string_view format) noexcept {
  // '@' and '=' mean native order (all loom hosts are little-endian); '<' is explicit little-endian.
  if (!format.empty() && (format[0] == '@' || format[0] == '=' || format[0] == '<')) format.remove_prefix(1);
  if (format.size() != 1) return std::nullopt;
  switch (format[0]) {
    case '?': return DType::Bool;
    case 'B': return DType::UInt8;
    case 'b': return DType::Int8;
    case 'h': return DType::Int16;
    case 'i': return DType::Int32;
    case 'l':  // C long and long long are both 64-bit on the LP64 systems loom supports
    case 'q': return DType::Int64;
    case 'e': return DType::Float16;
    case 'f': return DType::Float32;
    case 'd': return DType::Float64;
    default: return std::nullopt;
  }
}

DType promote_types(DType a, DType b) noexcept {
  if (a == b) return a;
  const DTypeInfo& ia = dtype_info(a);
  const DTypeInfo& ib = dtype_info(b);
  if (ia.category != ib.category) return ia.category > ib.category ? a : b;
  // Same category, different types. The pairs where neither holds the other: fp16 / bf16, and
  // uint8 / int8 (whose smallest common type is int16).
  auto pair = [a, b](DType x, DType y) { return (a == x && b == y) || (a == y && b == x); };
  if (pair(DType::Float16, DType::BFloat16)) return DType::Float32;
  if (pair(DType::UInt8, DType::Int8)) return DType::Int16;
  return ia.mantissa_digits > ib.mantissa_digits ? a : b;
}

DType default_float_dtype() noexcept { return default_float; }

void set_default_float_dtype(DType dtype) {
  LOOM_CHECK(is_floating(dtype), Type, "only floating-point types are supported as the default type, got ",
             dtype_name(dtype));
  default_float = dtype;
}

namespace {

void accumulate(std::optional<DType>& slot, DType dtype) {
  slot = slot ? promote_types(*slot, dtype) : dtype;
}

// PyTorch's rule for combining a stronger operand group with a weaker one: the weaker group may
// lift the category (int tensor + float scalar -> float), never the width within a category.
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating(*higher)) return higher;
  if (*higher == DType::Bool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}

}  // namespace

void ResultType::add_tensor(DType dtype, int64_t ndim) noexcept {
  accumulate(ndim == 0 ? zero_dim_ : dim_, dtype);
}

void ResultType::add_scalar(ScalarKind kind) noexcept {
  DType as = kind == ScalarKind::Bool ? DType::Bool : kind == ScalarKind::Int ? DType::Int64 : default_float;
  accumulate(scalar_, as);
}

DType ResultType::get() const noexcept {
  return combine(dim_, combine(zero_dim_, scalar_)).value_or(default_float);
}

}  // namespace loom
