// Data movement on GPU arrays: copies, fills, arange, linspace and random numbers, each one
// kernel of the runtime's module (or one copy command) queued on the device's stream.
#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "runtime/cpu/kernels.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/kernel_source.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/staging.h"
#include "runtime/cuda/stream.h"
#include "runtime/error.h"

namespace loom::cuda {
namespace {

int index_of(const Array& a) { return a.device().index; }

// A walk of one strided array (fills and random numbers).
std::vector<int64_t> walk(const Array& a) { return strided_ip(a.sizes(), a.strides()); }

const Kernel& runtime_kernel(int device, const std::string& name) { return runtime_module(device).kernel(name); }

// Launches a runtime kernel writing one array.
void launch_on(const Array& dst, const std::string& name, std::span<const int64_t> ip, std::span<const int64_t> sp) {
  int device = index_of(dst);
  const void* bufs[] = {dst.data()};
  launch_staged(device, runtime_kernel(device, name), dst.numel(), ip, sp, bufs, name);
}

// dst <- src, both on the same GPU, same sizes.
void copy_on_device(const Array& dst, const Array& src) {
  int device = index_of(dst);
  if (dst.numel() == 0) return;
  if (dst.dtype == src.dtype && same_dense_order(dst.layout, src.layout)) {
    memcpy(dst.data(), dst.device(), src.data(), src.device(), static_cast<size_t>(dst.numel()) * itemsize(dst.dtype));
    return;
  }
  std::vector<int64_t> ip = strided_ip(dst.sizes(), dst.strides(), src.strides());
  const void* bufs[] = {src.data(), dst.data()};
  int64_t sp[] = {dtype_code(dst.dtype), dtype_code(src.dtype)};
  std::string name = copy_kernel(dst.dtype, src.dtype);
  launch_staged(device, runtime_kernel(device, name), dst.numel(), ip, sp, bufs, name);
}

}  // namespace

const Module& runtime_module(int device) {
  static auto* loaded = new std::shared_ptr<const Module>[64];  // never destroyed: never unloaded
  LOOM_CHECK(device >= 0 && device < 64, Runtime, "device ordinal ", device, " is out of range");
  std::shared_ptr<const Module>& m = loaded[device];
  if (!m) m = module_for(device, runtime_kernel_source(), "loom runtime kernels", 0);
  return *m;
}

void launch_staged(int device, const Kernel& kernel, int64_t n, std::span<const int64_t> ip,
                   std::span<const int64_t> sp, std::span<const void* const> bufs, const std::string& what) {
  size_t words = ip.size() + sp.size() + bufs.size();
  Staged s = stage(device, std::max<size_t>(words, 1) * sizeof(int64_t), what.c_str());
  auto* w = static_cast<int64_t*>(s.host);
  std::copy(ip.begin(), ip.end(), w);
  std::copy(sp.begin(), sp.end(), w + ip.size());
  std::memcpy(w + ip.size() + sp.size(), bufs.data(), bufs.size() * sizeof(void*));
  auto* table = static_cast<const int64_t*>(upload(device, s));
  launch(device, kernel, grid_for(device, kernel, n, kRuntimeBlock), kRuntimeBlock, table, table + ip.size(),
         table + ip.size() + sp.size(), what);
}

void copy(const Array& dst, const Array& src) {
  Device dd = dst.device(), sd = src.device();
  if (dst.numel() == 0) return;
  if (dd == sd) return copy_on_device(dst, src);
  if (dst.dtype == src.dtype && same_dense_order(dst.layout, src.layout))
    return memcpy(dst.data(), dd, src.data(), sd, static_cast<size_t>(dst.numel()) * itemsize(dst.dtype));
  if (dd.is_cuda() && sd.is_cpu()) {
    // Convert and gather on the host, send one dense block, scatter on the device if dst is strided.
    Array host = empty(dst.sizes(), dst.dtype, kCPU);
    cpu::copy(host, src);
    if (dst.is_contiguous()) return memcpy(dst.data(), dd, host.data(), kCPU, static_cast<size_t>(host.numel()) * itemsize(host.dtype));
    Array staged = empty(dst.sizes(), dst.dtype, dd);
    memcpy(staged.data(), dd, host.data(), kCPU, static_cast<size_t>(host.numel()) * itemsize(host.dtype));
    return copy_on_device(dst, staged);
  }
  if (dd.is_cpu() && sd.is_cuda()) {
    // Gather on the device into one dense block, bring it back, convert and scatter on the host.
    Array dense = empty(src.sizes(), src.dtype, sd);
    copy_on_device(dense, src);
    Array host = empty(src.sizes(), src.dtype, kCPU);
    memcpy(host.data(), kCPU, dense.data(), sd, static_cast<size_t>(host.numel()) * itemsize(host.dtype));
    return cpu::copy(dst, host);
  }
  // Between two GPUs: through a dense block on the destination's.
  Array dense = empty(src.sizes(), src.dtype, sd);
  copy_on_device(dense, src);
  Array moved = empty(src.sizes(), src.dtype, dd);
  memcpy(moved.data(), dd, dense.data(), sd, static_cast<size_t>(dense.numel()) * itemsize(dense.dtype));
  copy_on_device(dst, moved);
}

void fill(const Array& dst, Scalar value) {
  if (dst.numel() == 0) return;
  int device = index_of(dst);
  int64_t bits = 0;
  visit_dtype(dst.dtype, [&](auto tag) {
    auto v = value.to<decltype(tag)>();
    std::memcpy(&bits, &v, sizeof v);
  });
  if (bits == 0 && dst.layout.is_non_overlapping_and_dense()) {
    set_device(device);
    check(cudaMemsetAsync(dst.data(), 0, static_cast<size_t>(dst.numel()) * itemsize(dst.dtype), stream(device)),
          "cudaMemsetAsync", "fill with zeros");
    return;
  }
  int64_t sp[] = {bits};
  launch_on(dst, fill_kernel(dst.dtype), walk(dst), sp);
}

void arange(const Array& dst, Scalar start, Scalar step) {
  LOOM_CHECK(dst.is_contiguous(), Runtime, "arange: output must be contiguous");
  if (dst.numel() == 0) return;
  // Integer results are computed in integers, exact beyond 2^53 where doubles are not (as the CPU).
  bool integral = is_integral(dst.dtype) && !start.is_float() && !step.is_float();
  int64_t sp[] = {dtype_code(dst.dtype), start.as_int(), step.as_int(), double_bits(start.as_double()),
                  double_bits(step.as_double()), integral};
  int64_t ip[] = {dst.numel()};
  launch_on(dst, "loom_arange", ip, sp);
}

void linspace(const Array& dst, double start, double end) {
  LOOM_CHECK(dst.is_contiguous(), Runtime, "linspace: output must be contiguous");
  if (dst.numel() == 0) return;
  int64_t sp[] = {dtype_code(dst.dtype), double_bits(start), double_bits(end)};
  int64_t ip[] = {dst.numel()};
  launch_on(dst, "loom_linspace", ip, sp);
}

void uniform(const Array& dst, double low, double high, PhiloxState s) {
  if (dst.numel() == 0) return;
  int64_t sp[] = {dtype_code(dst.dtype), static_cast<int64_t>(s.seed), static_cast<int64_t>(s.offset),
                  double_bits(low), double_bits(high), dtype_info(dst.dtype).mantissa_digits};
  launch_on(dst, "loom_uniform", walk(dst), sp);
}

void normal(const Array& dst, double mean, double std, PhiloxState s) {
  if (dst.numel() == 0) return;
  int64_t sp[] = {dtype_code(dst.dtype), static_cast<int64_t>(s.seed), static_cast<int64_t>(s.offset),
                  double_bits(mean), double_bits(std)};
  launch_on(dst, "loom_normal", walk(dst), sp);
}

void random_int(const Array& dst, int64_t low, int64_t high, PhiloxState s) {
  if (dst.numel() == 0) return;
  int64_t sp[] = {dtype_code(dst.dtype), static_cast<int64_t>(s.seed), static_cast<int64_t>(s.offset), low, high};
  launch_on(dst, "loom_randint", walk(dst), sp);
}

}  // namespace loom::cuda
