#include "runtime/array.h"

#include <utility>

#include "runtime/allocator.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/error.h"

namespace loom {
namespace {

// The bytes of `elements` elements of dtype, for a tensor of `sizes`.
int64_t storage_bytes(int64_t elements, DType dtype, IntSpan sizes) {
  int64_t nbytes = 0;
  LOOM_CHECK(!__builtin_mul_overflow(elements, static_cast<int64_t>(itemsize(dtype)), &nbytes), Runtime,
             "Storage size calculation overflowed with sizes=", format_dims(sizes));
  return nbytes;
}

// Fresh storage for a layout at offset 0 whose sizes passed check_sizes.
Array allocate(Layout layout, DType dtype, Device device) {
  int64_t nbytes = storage_bytes(layout.storage_end(), dtype, layout.sizes);
  return Array{Storage::allocate(static_cast<size_t>(nbytes), device), std::move(layout), dtype};
}

}  // namespace

Array empty(IntSpan sizes, DType dtype, Device device) {
  check_sizes(sizes);
  return allocate(Layout::contiguous(sizes), dtype, device);
}

void check_allocatable(IntSpan sizes, DType dtype, Device device) {
  check_sizes(sizes);
  check_allocation_size(static_cast<size_t>(storage_bytes(numel_of(sizes), dtype, sizes)), device);
}

Array empty_like(const Array& like, DType dtype, Device device) {
  check_sizes(like.sizes());  // expanded views may claim more elements than int64 counts
  return allocate(Layout{Dims(like.sizes()), preserved_strides(like.layout), 0}, dtype, device);
}

void copy_(const Array& dst, const Array& src) {
  if (dst.storage == src.storage && dst.layout == src.layout && dst.dtype == src.dtype) return;
  Array from = src.view_as(expand(src.layout, dst.sizes()));
  Device dd = dst.device(), sd = src.device();
  if (dd.is_cpu() && sd.is_cpu()) return cpu::copy(dst, from);
  cuda::copy(dst, from);  // at least one side is a GPU: transfers, conversions, strided gathers
}

Array copy_to(const Array& src, DType dtype, Device device, MemoryFormat format) {
  Array out = format == MemoryFormat::Preserve ? empty_like(src, dtype, device) : empty(src.sizes(), dtype, device);
  copy_(out, src);
  return out;
}

Array contiguous(const Array& src) {
  return src.is_contiguous() ? src : copy_to(src, src.dtype, src.device());
}

bool may_overlap(const Array& a, const Array& b) noexcept {
  if (a.device() != b.device()) return false;
  auto bytes = [](const Array& x) {
    auto begin = reinterpret_cast<uintptr_t>(x.data());
    auto size = static_cast<uintptr_t>(x.layout.storage_end() - x.layout.offset) * itemsize(x.dtype);
    return std::pair{begin, begin + size};
  };
  auto [a_begin, a_end] = bytes(a);
  auto [b_begin, b_end] = bytes(b);
  return a_begin < a_end && b_begin < b_end && a_begin < b_end && b_begin < a_end;
}

void fill_(const Array& dst, Scalar value) {
  value.check_fits(dst.dtype);
  if (dst.layout.has_internal_overlap()) {
    // The indices of a stride-0 dim all address one element: it is written once (zero_ of an
    // expand of 2^62 elements wrote the same few bytes 2^62 times).
    Array once = dst;
    for (size_t d = 0; d < once.layout.sizes.size(); ++d)
      if (once.layout.strides[d] == 0) once.layout.sizes[d] = std::min<int64_t>(once.layout.sizes[d], 1);
    return fill_(once, value);
  }
  if (dst.device().is_cpu()) cpu::fill(dst, value);
  else cuda::fill(dst, value);
}

void arange_(const Array& dst, Scalar start, Scalar step) {
  if (dst.device().is_cpu()) cpu::arange(dst, start, step);
  else cuda::arange(dst, start, step);
}

void linspace_(const Array& dst, double start, double end) {
  if (dst.device().is_cpu()) cpu::linspace(dst, start, end);
  else cuda::linspace(dst, start, end);
}

void uniform_at(const Array& dst, double low, double high, PhiloxState s) {
  if (dst.device().is_cpu()) cpu::uniform(dst, low, high, s);
  else cuda::uniform(dst, low, high, s);
}

void normal_at(const Array& dst, double mean, double std, PhiloxState s) {
  if (dst.device().is_cpu()) cpu::normal(dst, mean, std, s);
  else cuda::normal(dst, mean, std, s);
}

void random_int_at(const Array& dst, int64_t low, int64_t high, PhiloxState s) {
  LOOM_CHECK(low < high, Runtime, "random_ expects 'from' to be less than 'to', but got from=", low,
             " >= to=", high);
  if (dst.device().is_cpu()) cpu::random_int(dst, low, high, s);
  else cuda::random_int(dst, low, high, s);
}

void uniform_(const Array& dst, double low, double high, Generator& gen) { uniform_at(dst, low, high, gen.draw()); }
void normal_(const Array& dst, double mean, double std, Generator& gen) { normal_at(dst, mean, std, gen.draw()); }
void random_int_(const Array& dst, int64_t low, int64_t high, Generator& gen) {
  LOOM_CHECK(low < high, Runtime, "random_ expects 'from' to be less than 'to', but got from=", low,
             " >= to=", high);
  random_int_at(dst, low, high, gen.draw());
}

Scalar item(const Array& a) {
  LOOM_CHECK(a.numel() == 1, Value, "a Tensor with ", a.numel(),
             " elements cannot be converted to Scalar");
  if (a.device().is_cpu()) return Scalar::load(a.data(), a.dtype);
  alignas(8) unsigned char buf[8];
  cuda::memcpy(buf, kCPU, a.data(), a.device(), itemsize(a.dtype));
  return Scalar::load(buf, a.dtype);
}

}  // namespace loom
