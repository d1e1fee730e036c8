// Materialized arrays: allocation, copies with dtype conversion over strided and broadcast
// layouts, fills, and storage lifetime.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/array.h"
#include "runtime/error.h"

using namespace loom;

namespace {

Dims D(std::initializer_list<int64_t> v) { return Dims(v); }

template <typename T>
std::vector<T> values(const Array& a) {
  Array c = copy_to(a, dtype_of<T>, kCPU);
  const T* p = static_cast<const T*>(c.data());
  return std::vector<T>(p, p + c.numel());
}

Array iota(IntSpan sizes, DType dtype) {
  Array a = empty(sizes, dtype, kCPU);
  arange_(a.view_as(Layout::contiguous(D({a.numel()}))), Scalar(0), Scalar(1));
  return a;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(array)

BOOST_AUTO_TEST_CASE(empty_is_contiguous_and_aligned) {
  Array a = empty(D({3, 5}), DType::Float32, kCPU);
  BOOST_TEST(a.is_contiguous());
  BOOST_TEST(a.storage->nbytes() == 60u);
  BOOST_TEST(reinterpret_cast<uintptr_t>(a.data()) % 64 == 0u);
  BOOST_CHECK_THROW(empty(D({2, -3}), DType::Float32, kCPU), Error);
  // numel fits int64 but the byte count does not.
  BOOST_CHECK_THROW(empty(D({int64_t{1} << 31, int64_t{1} << 31}), DType::Float64, kCPU), Error);
}

BOOST_AUTO_TEST_CASE(copy_transposed_with_conversion) {
  Array a = iota(D({2, 3}), DType::Int64);  // [[0 1 2] [3 4 5]]
  Array t = a.view_as(transpose(a.layout, 0, 1));
  Array c = copy_to(t, DType::Float64, kCPU);
  BOOST_TEST(c.is_contiguous());
  BOOST_TEST((values<double>(c) == std::vector<double>{0, 3, 1, 4, 2, 5}));
  BOOST_TEST((c.storage.get() != a.storage.get()));
  BOOST_TEST((contiguous(a).storage.get() == a.storage.get()));  // already contiguous: no copy
  BOOST_TEST((contiguous(t).storage.get() != a.storage.get()));
}

BOOST_AUTO_TEST_CASE(copies_can_preserve_the_source_dim_order) {
  Array a = iota(D({2, 3}), DType::Int64);
  Array t = a.view_as(transpose(a.layout, 0, 1));
  Array c = copy_to(t, DType::Float32, kCPU, MemoryFormat::Preserve);
  BOOST_TEST((c.layout.strides == D({1, 3})));
  BOOST_TEST(c.layout.offset == 0);
  BOOST_TEST(c.storage->nbytes() == 24u);
  BOOST_TEST((values<float>(c) == std::vector<float>{0, 3, 1, 4, 2, 5}));
  // Not dense: dense strides in the source's order, storage for exactly its elements.
  Array every_other_row = t.view_as(slice(t.layout, 0, std::nullopt, std::nullopt, 2));
  Array d = copy_to(every_other_row, DType::Int64, kCPU, MemoryFormat::Preserve);
  BOOST_TEST((d.layout.strides == D({1, 2})));
  BOOST_TEST(d.storage->nbytes() == 32u);
  BOOST_TEST((values<int64_t>(d) == std::vector<int64_t>{0, 3, 2, 5}));
  Array e = empty_like(a.view_as(expand(Layout::contiguous(D({1})), D({4, 5}))), DType::Bool, kCPU);
  BOOST_TEST(e.is_contiguous());
  BOOST_TEST(e.storage->nbytes() == 20u);
  // Random fills give element i (row-major) the same value whatever the strides.
  Generator g1(3), g2(3);
  Array permuted = empty_like(t, DType::Float32, kCPU);
  Array plain = empty(D({3, 2}), DType::Float32, kCPU);
  normal_(permuted, 0.0, 1.0, g1);
  normal_(plain, 0.0, 1.0, g2);
  BOOST_TEST((values<float>(permuted) == values<float>(plain)));
}

BOOST_AUTO_TEST_CASE(copy_broadcasts_source) {
  Array dst = empty(D({2, 3}), DType::Float32, kCPU);
  Array row = iota(D({3}), DType::Int32);
  copy_(dst, row);
  BOOST_TEST((values<float>(dst) == std::vector<float>{0, 1, 2, 0, 1, 2}));
  Array bad = iota(D({4}), DType::Int32);
  BOOST_CHECK_THROW(copy_(dst, bad), Error);
}

BOOST_AUTO_TEST_CASE(strided_destination) {
  Array a = empty(D({4, 4}), DType::Float64, kCPU);
  fill_(a, Scalar(0.0));
  Array diag = a.view_as(Layout{D({4}), D({5}), 0});
  fill_(diag, Scalar(int64_t{1}));
  std::vector<double> v = values<double>(a);
  for (int i = 0; i < 16; ++i) BOOST_TEST(v[i] == (i % 5 == 0 ? 1.0 : 0.0));
  Array every_other = a.view_as(slice(a.layout, 1, 0, std::nullopt, 2));
  copy_(every_other, iota(D({4, 2}), DType::Int64));
  v = values<double>(a);
  BOOST_TEST(v[0] == 0.0);
  BOOST_TEST(v[2] == 1.0);
  BOOST_TEST(v[1] == 0.0);
  BOOST_TEST(v[5] == 1.0);  // untouched diagonal element at (1, 1)
  BOOST_TEST(v[14] == 7.0);
}

BOOST_AUTO_TEST_CASE(conversions_follow_cast_rules) {
  Array f = empty(D({4}), DType::Float32, kCPU);
  float* p = static_cast<float*>(f.data());
  p[0] = -1.7f;
  p[1] = 0.0f;
  p[2] = 2.5f;
  p[3] = 300.0f;
  BOOST_TEST((values<int32_t>(f) == std::vector<int32_t>{-1, 0, 2, 300}));
  std::vector<bool> b;
  for (bool x : values<bool>(f)) b.push_back(x);
  BOOST_TEST((b == std::vector<bool>{true, false, true, true}));
  std::vector<float> h;
  for (Half x : values<Half>(f)) h.push_back(float(x));
  BOOST_TEST((h == std::vector<float>{-1.7001953125f, 0.0f, 2.5f, 300.0f}));
}

BOOST_AUTO_TEST_CASE(overlap_is_found_by_address) {
  Array a = iota(D({10}), DType::Float64);
  auto view = [&](const Array& base, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step = 1) {
    return base.view_as(slice(base.layout, 0, start, stop, step));
  };
  // A second Storage over the same memory, as from_numpy twice of one array makes.
  Array alias{Storage::wrap(a.data(), a.storage->nbytes(), kCPU, nullptr, nullptr), a.layout, a.dtype};
  BOOST_TEST(may_overlap(view(a, 2, std::nullopt, 2), view(alias, std::nullopt, -2, 2)));
  BOOST_TEST(!may_overlap(view(a, std::nullopt, 5), view(alias, 5, std::nullopt)));
  BOOST_TEST(may_overlap(view(a, 4, 5), view(alias, 4, 6)));
  BOOST_TEST(!may_overlap(view(a, 4, 4), a));  // empty views address nothing
  BOOST_TEST(!may_overlap(a, iota(D({10}), DType::Float64)));
  // Conservative: interleaved views share a range but no element.
  BOOST_TEST(may_overlap(view(a, 0, std::nullopt, 2), view(a, 1, std::nullopt, 2)));
  // Reinterpreting the bytes with another dtype still overlaps.
  Array bytes{a.storage, Layout::contiguous(D({8})), DType::UInt8};
  BOOST_TEST(may_overlap(bytes, a));
}

BOOST_AUTO_TEST_CASE(fill_checks_the_value_range_like_pytorch) {
  // Ints: the type's range, but negative ints wrap into uint8 while their magnitude fits.
  BOOST_TEST(!Scalar(int64_t{-1}).overflows(DType::UInt8));
  BOOST_TEST(!Scalar(int64_t{-255}).overflows(DType::UInt8));
  BOOST_TEST(Scalar(int64_t{-256}).overflows(DType::UInt8));
  BOOST_TEST(Scalar(int64_t{256}).overflows(DType::UInt8));
  BOOST_TEST(Scalar(int64_t{INT64_MIN}).overflows(DType::UInt8));
  BOOST_TEST(Scalar(int64_t{2147483648}).overflows(DType::Int32));
  BOOST_TEST(!Scalar(int64_t{INT64_MAX}).overflows(DType::Int64));
  BOOST_TEST(Scalar(int64_t{65505}).overflows(DType::Float16));
  BOOST_TEST(!Scalar(int64_t{INT64_MAX}).overflows(DType::BFloat16));
  // Floats: exactly [lowest, max]; integer types take no NaN or infinity, floating ones both.
  BOOST_TEST(Scalar(-0.5).overflows(DType::UInt8));
  BOOST_TEST(Scalar(255.5).overflows(DType::UInt8));
  BOOST_TEST(!Scalar(255.0).overflows(DType::UInt8));
  BOOST_TEST(Scalar(2147483647.5).overflows(DType::Int32));
  BOOST_TEST(Scalar(0x1p63).overflows(DType::Int64));
  BOOST_TEST(!Scalar(-0x1p63).overflows(DType::Int64));
  BOOST_TEST(Scalar(std::nan("")).overflows(DType::Int32));
  BOOST_TEST(!Scalar(std::nan("")).overflows(DType::Float16));
  BOOST_TEST(!Scalar(-HUGE_VAL).overflows(DType::Float32));
  BOOST_TEST(Scalar(65519.0).overflows(DType::Float16));  // would round to 65504, but is above it
  BOOST_TEST(Scalar(3.4e38).overflows(DType::BFloat16));
  BOOST_TEST(Scalar(3.5e38).overflows(DType::Float32));
  BOOST_TEST(!Scalar(1e300).overflows(DType::Float64));
  BOOST_TEST(!Scalar(1e300).overflows(DType::Bool));
  BOOST_TEST(!Scalar(true).overflows(DType::UInt8));

  Array u8 = empty(D({3}), DType::UInt8, kCPU);
  fill_(u8, Scalar(int64_t{-1}));
  BOOST_TEST((values<uint8_t>(u8) == std::vector<uint8_t>{255, 255, 255}));
  try {
    fill_(u8, Scalar(int64_t{300}));
    BOOST_FAIL("fill_ should reject 300 for uint8");
  } catch (const Error& e) {
    BOOST_TEST((e.kind() == ErrorKind::Runtime));
    BOOST_TEST(std::string(e.what()) == "value cannot be converted to type uint8 without overflow");
  }
  BOOST_TEST((values<uint8_t>(u8) == std::vector<uint8_t>{255, 255, 255}));  // nothing written
  BOOST_CHECK_THROW(fill_(empty(D({0}), DType::Float16, kCPU), Scalar(1e5)), Error);
}

BOOST_AUTO_TEST_CASE(arange_and_linspace) {
  Array a = empty(D({5}), DType::Float32, kCPU);
  arange_(a, Scalar(1.0), Scalar(0.5));
  BOOST_TEST((values<float>(a) == std::vector<float>{1.0f, 1.5f, 2.0f, 2.5f, 3.0f}));
  Array big = empty(D({2}), DType::Int64, kCPU);
  arange_(big, Scalar(int64_t{9007199254740992}), Scalar(1));  // 2^53 + 1 is no double: integers stay exact
  BOOST_TEST(values<int64_t>(big)[1] == 9007199254740993LL);
  Array l = empty(D({5}), DType::Float64, kCPU);
  linspace_(l, 0.0, 1.0);
  BOOST_TEST((values<double>(l) == std::vector<double>{0.0, 0.25, 0.5, 0.75, 1.0}));
  Array l1 = empty(D({1}), DType::Float64, kCPU);
  linspace_(l1, 2.0, 10.0);
  BOOST_TEST(values<double>(l1)[0] == 2.0);  // a single point is the start, as in PyTorch
  Array l3 = empty(D({3}), DType::Float32, kCPU);
  linspace_(l3, -1.0, 0.1);
  BOOST_TEST(values<float>(l3)[2] == 0.1f);  // the end point is exact
}

BOOST_AUTO_TEST_CASE(random_fills_are_reproducible) {
  Generator g1(7), g2(7);
  Array a = empty(D({1000}), DType::Float32, kCPU), b = empty(D({1000}), DType::Float32, kCPU);
  uniform_(a, 0.0, 1.0, g1);
  uniform_(b, 0.0, 1.0, g2);
  BOOST_TEST((values<float>(a) == values<float>(b)));
  uniform_(b, 0.0, 1.0, g2);  // next draw differs
  BOOST_TEST((values<float>(a) != values<float>(b)));
  for (float v : values<float>(a)) BOOST_TEST_REQUIRE((v >= 0.0f && v < 1.0f));
  Array h = empty(D({5000}), DType::Float16, kCPU);
  uniform_(h, 0.0, 1.0, g1);
  for (Half v : values<Half>(h)) BOOST_TEST_REQUIRE(float(v) < 1.0f);
  Array r = empty(D({1000}), DType::Int64, kCPU);
  random_int_(r, -3, 4, g1);
  std::vector<int> seen(7, 0);
  for (int64_t v : values<int64_t>(r)) {
    BOOST_TEST_REQUIRE((v >= -3 && v < 4));
    seen[static_cast<size_t>(v + 3)]++;
  }
  for (int count : seen) BOOST_TEST(count > 0);
  BOOST_CHECK_THROW(random_int_(r, 4, 4, g1), Error);
}

BOOST_AUTO_TEST_CASE(item_of_one_element) {
  Array a = empty(D({1, 1}), DType::BFloat16, kCPU);
  fill_(a, Scalar(1.5));
  Scalar s = item(a);
  BOOST_TEST(s.is_float());
  BOOST_TEST(s.as_double() == 1.5);
  BOOST_CHECK_THROW(item(empty(D({2}), DType::Float32, kCPU)), Error);
}

BOOST_AUTO_TEST_CASE(storage_returns_to_allocator) {
  CachingAllocator& host = allocator_for(kCPU);
  int64_t before = host.stats().allocated_bytes;
  {
    Array a = empty(D({1024}), DType::Float32, kCPU);
    Array view = a.view_as(slice(a.layout, 0, 10, 20));
    a = Array{};
    BOOST_TEST(host.stats().allocated_bytes >= before + 4096);  // the view keeps the storage alive
  }
  BOOST_TEST(host.stats().allocated_bytes == before);
}

BOOST_AUTO_TEST_SUITE_END()
