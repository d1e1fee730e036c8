#include "runtime/array.h"

#include <utility>

#include "runtime/cpu/kernels.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/error.h"

namespace loom {
namespace {

// Until the CUDA backend has its own kernels, work on GPU arrays runs on a host mirror: the
// storage range the array touches is copied to the host, processed there and copied back. Slow,
// but exact, and only creation ops and transfers use it.
struct HostMirror {
  Array host;            // same layout (shifted to offset 0) over host memory
  const Array* device;   // the GPU array mirrored
  int64_t first = 0;     // first storage element of the mirrored range
  int64_t count = 0;     // elements in it

  explicit HostMirror(const Array& a, bool download) : device(&a) {
    first = a.layout.offset;
    count = a.layout.storage_end() - first;
    size_t item = itemsize(a.dtype);
    Layout l = a.layout;
    l.offset = 0;
    host = Array{Storage::allocate(static_cast<size_t>(count) * item, kCPU), std::move(l), a.dtype};
    if (download && count > 0)
      cuda::memcpy(host.storage->data(), kCPU, a.data(), a.device(), static_cast<size_t>(count) * item);
  }
  void upload() const {
    if (count > 0)
      cuda::memcpy(device->data(), device->device(), host.storage->data(), kCPU,
                   static_cast<size_t>(count) * itemsize(device->dtype));
  }
};

// Runs a CPU fill on dst wherever it lives.
template <typename Fill>
void fill_anywhere(const Array& dst, Fill&& fill) {
  if (dst.device().is_cpu()) return fill(dst);
  // A fill overwrites every element it addresses, but a strided dst may have holes in its range
  // that must survive the upload, so download first unless the array is dense.
  HostMirror m(dst, !dst.layout.is_non_overlapping_and_dense());
  fill(m.host);
  m.upload();
}

// Fresh storage for a layout at offset 0 whose sizes passed check_sizes.
Array allocate(Layout layout, DType dtype, Device device) {
  int64_t nbytes = 0;
  LOOM_CHECK(!__builtin_mul_overflow(layout.storage_end(), static_cast<int64_t>(itemsize(dtype)), &nbytes), Runtime,
             "Storage size calculation overflowed with sizes=", format_dims(layout.sizes));
  return Array{Storage::allocate(static_cast<size_t>(nbytes), device), std::move(layout), dtype};
}

}  // namespace

Array empty(IntSpan sizes, DType dtype, Device device) {
  check_sizes(sizes);
  return allocate(Layout::contiguous(sizes), dtype, device);
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
  // A plain transfer: same dtype, both dense in the same order.
  if (dst.dtype == src.dtype && same_dense_order(dst.layout, from.layout)) {
    cuda::memcpy(dst.data(), dd, from.data(), sd, static_cast<size_t>(dst.numel()) * itemsize(dst.dtype));
    return;
  }
  std::optional<HostMirror> src_mirror, dst_mirror;
  Array host_src = from, host_dst = dst;
  if (sd.is_cuda()) {
    src_mirror.emplace(from, true);
    host_src = src_mirror->host;
  }
  if (dd.is_cuda()) {
    dst_mirror.emplace(dst, !dst.layout.is_non_overlapping_and_dense());
    host_dst = dst_mirror->host;
  }
  cpu::copy(host_dst, host_src);
  if (dst_mirror) dst_mirror->upload();
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
  fill_anywhere(dst, [&](const Array& a) { cpu::fill(a, value); });
}

void arange_(const Array& dst, Scalar start, Scalar step) {
  fill_anywhere(dst, [&](const Array& a) { cpu::arange(a, start, step); });
}

void linspace_(const Array& dst, double start, double end) {
  fill_anywhere(dst, [&](const Array& a) { cpu::linspace(a, start, end); });
}

void uniform_at(const Array& dst, double low, double high, PhiloxState s) {
  fill_anywhere(dst, [&](const Array& a) { cpu::uniform(a, low, high, s); });
}

void normal_at(const Array& dst, double mean, double std, PhiloxState s) {
  fill_anywhere(dst, [&](const Array& a) { cpu::normal(a, mean, std, s); });
}

void random_int_at(const Array& dst, int64_t low, int64_t high, PhiloxState s) {
  LOOM_CHECK(low < high, Runtime, "random_ expects 'from' to be less than 'to', but got from=", low,
             " >= to=", high);
  fill_anywhere(dst, [&](const Array& a) { cpu::random_int(a, low, high, s); });
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
