// DType table, PyTorch's promotion rules (checked against torch.promote_types /
// torch.result_type), and the float16 / bfloat16 conversions.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/dtype.h"
#include "runtime/error.h"

using namespace loom;

BOOST_AUTO_TEST_SUITE(dtype)

BOOST_AUTO_TEST_CASE(table) {
  BOOST_TEST(itemsize(DType::Bool) == 1u);
  BOOST_TEST(itemsize(DType::BFloat16) == 2u);
  BOOST_TEST(itemsize(DType::Int64) == 8u);
  BOOST_TEST(itemsize(DType::Int8) == 1u);
  BOOST_TEST(itemsize(DType::Int16) == 2u);
  BOOST_TEST(is_integral(DType::Int8));
  BOOST_TEST(is_floating(DType::Float16));
  BOOST_TEST(!is_floating(DType::Int32));
  BOOST_TEST(is_integral(DType::UInt8));
  BOOST_TEST(!is_integral(DType::Bool));
  BOOST_TEST(is_integral(DType::Bool, true));
  BOOST_TEST(std::string(dtype_name(DType::BFloat16)) == "bfloat16");
}

BOOST_AUTO_TEST_CASE(names) {
  BOOST_TEST((dtype_from_name("float32") == DType::Float32));
  BOOST_TEST((dtype_from_name("float") == DType::Float32));
  BOOST_TEST((dtype_from_name("double") == DType::Float64));
  BOOST_TEST((dtype_from_name("half") == DType::Float16));
  BOOST_TEST((dtype_from_name("long") == DType::Int64));
  BOOST_TEST((dtype_from_name("int") == DType::Int32));
  BOOST_TEST(!dtype_from_name("floot32").has_value());
  BOOST_TEST((dtype_from_buffer_format("<f") == DType::Float32));
  BOOST_TEST((dtype_from_buffer_format("l") == DType::Int64));
  BOOST_TEST(!dtype_from_buffer_format(">f").has_value());
  BOOST_TEST((dtype_from_buffer_format("h") == DType::Int16));
  BOOST_TEST((dtype_from_buffer_format("b") == DType::Int8));
  BOOST_TEST((dtype_from_name("short") == DType::Int16));
  BOOST_TEST(!dtype_from_buffer_format("H").has_value());  // uint16: no such dtype
}

BOOST_AUTO_TEST_CASE(promote_types_matches_pytorch) {
  using D = DType;
  struct Case {
    D a, b, expected;
  };
  // Values from torch.promote_types (PyTorch 1.13).
  const Case cases[] = {
      {D::Bool, D::Bool, D::Bool},          {D::Bool, D::UInt8, D::UInt8},
      {D::Bool, D::Float16, D::Float16},    {D::UInt8, D::Int32, D::Int32},
      {D::UInt8, D::Int64, D::Int64},       {D::Int32, D::Int64, D::Int64},
      {D::Int64, D::Float16, D::Float16},   {D::Int64, D::BFloat16, D::BFloat16},
      {D::Int32, D::Float32, D::Float32},   {D::Float16, D::BFloat16, D::Float32},
      {D::BFloat16, D::Float32, D::Float32}, {D::Float16, D::Float64, D::Float64},
      {D::Float32, D::Float64, D::Float64}, {D::UInt8, D::Float16, D::Float16},
      {D::UInt8, D::Int8, D::Int16},        {D::UInt8, D::Int16, D::Int16},
      {D::Int8, D::Int16, D::Int16},        {D::Int8, D::Int32, D::Int32},
      {D::Bool, D::Int8, D::Int8},          {D::Int16, D::Float16, D::Float16},
      {D::Int8, D::BFloat16, D::BFloat16},
  };
  for (const Case& c : cases) {
    BOOST_TEST((promote_types(c.a, c.b) == c.expected), dtype_name(c.a) << " + " << dtype_name(c.b));
    BOOST_TEST((promote_types(c.b, c.a) == c.expected), dtype_name(c.b) << " + " << dtype_name(c.a));
  }
}

BOOST_AUTO_TEST_CASE(weak_scalars_do_not_widen) {
  auto result = [](DType t, int64_t ndim, std::initializer_list<ScalarKind> scalars) {
    ResultType r;
    r.add_tensor(t, ndim);
    for (ScalarKind k : scalars) r.add_scalar(k);
    return r.get();
  };
  // torch.result_type(torch.ones(2, dtype=...), scalar)
  BOOST_TEST((result(DType::Int32, 1, {ScalarKind::Int}) == DType::Int32));
  BOOST_TEST((result(DType::Int32, 1, {ScalarKind::Float}) == DType::Float32));
  BOOST_TEST((result(DType::Float16, 1, {ScalarKind::Float}) == DType::Float16));
  BOOST_TEST((result(DType::BFloat16, 1, {ScalarKind::Int}) == DType::BFloat16));
  BOOST_TEST((result(DType::Bool, 1, {ScalarKind::Int}) == DType::Int64));
  BOOST_TEST((result(DType::Bool, 1, {ScalarKind::Float}) == DType::Float32));
  BOOST_TEST((result(DType::Bool, 1, {ScalarKind::Bool}) == DType::Bool));
  BOOST_TEST((result(DType::UInt8, 1, {ScalarKind::Int}) == DType::UInt8));
  BOOST_TEST((result(DType::Float64, 1, {ScalarKind::Float}) == DType::Float64));
}

BOOST_AUTO_TEST_CASE(zero_dim_tensors_are_weak_within_a_category) {
  // A float64 0-d tensor does not widen a float32 tensor; an int 0-d tensor cannot lift floats.
  ResultType a;
  a.add_tensor(DType::Float32, 2);
  a.add_tensor(DType::Float64, 0);
  BOOST_TEST((a.get() == DType::Float32));
  ResultType b;
  b.add_tensor(DType::Int32, 1);
  b.add_tensor(DType::Float64, 0);
  BOOST_TEST((b.get() == DType::Float64));  // category lift takes the 0-d tensor's own dtype
  ResultType c;
  c.add_tensor(DType::Float64, 0);
  c.add_tensor(DType::Float16, 0);
  BOOST_TEST((c.get() == DType::Float64));  // among 0-d tensors alone, ordinary promotion
  ResultType d;
  d.add_tensor(DType::Int64, 0);
  d.add_scalar(ScalarKind::Float);
  BOOST_TEST((d.get() == DType::Float32));
}

BOOST_AUTO_TEST_CASE(default_dtype) {
  BOOST_TEST((default_float_dtype() == DType::Float32));
  set_default_float_dtype(DType::Float64);
  ResultType r;
  r.add_tensor(DType::Int64, 1);
  r.add_scalar(ScalarKind::Float);
  BOOST_TEST((r.get() == DType::Float64));
  BOOST_CHECK_THROW(set_default_float_dtype(DType::Int32), Error);
  set_default_float_dtype(DType::Float32);
}

// Every half value survives half -> float -> half unchanged, and float -> half rounds to nearest
// even: checked against the exact midpoints between neighbouring halves.
BOOST_AUTO_TEST_CASE(half_round_trip_and_rounding) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    Half h = Half::from_bits(static_cast<uint16_t>(bits));
    float f = h;
    if (std::isnan(f)) {
      BOOST_TEST(std::isnan(float(Half(f))));
      continue;
    }
    BOOST_TEST_REQUIRE(Half(f).bits == bits);
    // The midpoint to the next larger magnitude rounds to whichever of the two is even.
    uint16_t next = static_cast<uint16_t>(bits + 1);
    if ((bits & 0x7fffu) >= 0x7c00u - 1) continue;  // no finite neighbour above
    double mid = (double(f) + double(float(Half::from_bits(next)))) / 2.0;
    uint16_t even = (bits & 1u) ? next : static_cast<uint16_t>(bits);
    BOOST_TEST_REQUIRE(Half(static_cast<float>(mid)).bits == even);
  }
  BOOST_TEST(float(Half(65504.0f)) == 65504.0f);
  BOOST_TEST(std::isinf(float(Half(65520.0f))));           // ties to even: rounds up to inf
  BOOST_TEST(float(Half(65519.0f)) == 65504.0f);
  BOOST_TEST(float(Half(5.9604644775390625e-8f)) > 0.0f);  // smallest subnormal
  BOOST_TEST(float(Half(2.9802322387695312e-8f)) == 0.0f);  // half of it ties to even (zero)
}

BOOST_AUTO_TEST_CASE(bfloat16_rounding) {
  BOOST_TEST(float(BFloat16(1.0f)) == 1.0f);
  // 1 + 2^-8 is exactly between 1 and 1 + 2^-7: ties to even gives 1.
  BOOST_TEST(float(BFloat16(1.0f + 0.00390625f)) == 1.0f);
  BOOST_TEST(float(BFloat16(1.0f + 3 * 0.00390625f)) == 1.0f + 4 * 0.00390625f);
  BOOST_TEST(std::isnan(float(BFloat16(std::numeric_limits<float>::quiet_NaN()))));
  BOOST_TEST(std::isinf(float(BFloat16(std::numeric_limits<float>::infinity()))));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    BFloat16 b = BFloat16::from_bits(static_cast<uint16_t>(bits));
    if (!std::isnan(float(b))) BOOST_TEST_REQUIRE(BFloat16(float(b)).bits == bits);
  }
}

BOOST_AUTO_TEST_CASE(convert_semantics) {
  BOOST_TEST(convert<bool>(0.5) == true);
  BOOST_TEST(convert<bool>(Half(0.0f)) == false);
  BOOST_TEST(convert<int32_t>(-2.7) == -2);  // truncation toward zero
  BOOST_TEST(convert<uint8_t>(int64_t{258}) == 2);  // wraps like a C cast
  BOOST_TEST(float(convert<Half>(int64_t{3})) == 3.0f);
  BOOST_TEST(convert<double>(BFloat16(2.5f)) == 2.5);
}

BOOST_AUTO_TEST_SUITE_END()
