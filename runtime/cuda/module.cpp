#include "runtime/cuda/module.h"

#include <algorithm>
#include <mutex>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/stream.h"
#include "runtime/error.h"

namespace loom::cuda {
namespace {

ModuleCompiler& compiler() {
  static ModuleCompiler c = nullptr;
  return c;
}

struct Cache {
  std::mutex mu;
  // Keyed by the device ordinal and the whole source (a module is per device: its context). Held
  // weakly (module.h); entries of unloaded modules are swept when the map has doubled.
  std::unordered_map<std::string, std::weak_ptr<const Module>> modules;
  size_t swept_size = 0;
};

Cache& cache() {
  static auto* c = new Cache();  // never destroyed
  return *c;
}

std::shared_ptr<const Module> load(int device, const Image& image, const std::string& name) {
  const DriverApi& d = driver();
  set_device(device);
  // The JIT's error log says why PTX did not compile (a driver older than the PTX, say).
  char log[4096] = {0};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof log))};
  CUmodule handle = nullptr;
  CUresult r = d.cuModuleLoadDataEx(&handle, image.bytes.data(), 2, options, values);
  if (r != CUDA_SUCCESS) {
    log[sizeof log - 1] = 0;
    check(r, "cuModuleLoadDataEx",
          name + (image.ptx ? " (PTX)" : " (cubin)") + " on cuda:" + std::to_string(device) + (log[0] ? ": " : "") + log);
  }
  return std::make_shared<const Module>(device, handle, name);
}

}  // namespace

void set_module_compiler(ModuleCompiler c) { compiler() = c; }

Module::~Module() {
  // From its own device's context. Nothing to do if this fails: the module is gone to us.
  try {
    set_device(device_);
    driver().cuModuleUnload(handle_);
  } catch (const Error&) {
  }
}

const Kernel& Module::kernel(const std::string& name) const {
  auto it = kernels_.find(name);
  if (it != kernels_.end()) return *it->second;
  const DriverApi& d = driver();
  set_device(device_);
  auto k = std::make_unique<Kernel>();
  k->name = name;
  check(d.cuModuleGetFunction(&k->handle, handle_, name.c_str()), "cuModuleGetFunction", name + " in " + name_);
  check(d.cuFuncGetAttribute(&k->max_block, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->handle), "cuFuncGetAttribute",
        name);
  int min_grid = 0;
  check(d.cuOccupancyMaxPotentialBlockSize(&min_grid, &k->occupancy_block, k->handle, nullptr, 0, k->max_block),
        "cuOccupancyMaxPotentialBlockSize", name);
  check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&k->blocks_per_sm, k->handle, k->occupancy_block, 0),
        "cuOccupancyMaxActiveBlocksPerMultiprocessor", name);
  LOOM_CHECK(k->occupancy_block > 0 && k->blocks_per_sm > 0, Runtime, "CUDA kernel ", name, " in ", name_,
             " cannot be launched on cuda:", device_, " (the occupancy calculator found no block size)");
  return *kernels_.emplace(name, std::move(k)).first->second;
}

std::shared_ptr<const Module> module_for(int device, const std::string& source, const std::string& name, int kernels) {
  std::string key = std::to_string(device);
  key.push_back('\0');
  key += source;
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  if (auto it = c.modules.find(key); it != c.modules.end())
    if (std::shared_ptr<const Module> m = it->second.lock()) return m;
  LOOM_CHECK(compiler(), Runtime, "internal: no CUDA module compiler is installed (rtc/ installs NVRTC)");
  Image image = compiler()(source, name, compute_capability(device), kernels);
  std::shared_ptr<const Module> m = load(device, image, name);
  c.modules[std::move(key)] = m;
  if (c.modules.size() >= 2 * c.swept_size + 16) {
    std::erase_if(c.modules, [](const auto& entry) { return entry.second.expired(); });
    c.swept_size = c.modules.size();
  }
  return m;
}

void launch(int device, const Kernel& k, unsigned grid, unsigned block, const void* ip, const void* sp,
            const void* bufs, const std::string& what) {
  LOOM_CHECK(grid > 0 && block > 0 && static_cast<int>(block) <= k.max_block, Runtime, "internal: launch of ", k.name,
             " (", what, ") with grid ", grid, " and block ", block, " (at most ", k.max_block, ")");
  // cuLaunchKernel reads each argument through a pointer to it and copies the values, so these
  // locals may go when it returns (a capture records the copies).
  void* args[] = {const_cast<void**>(&ip), const_cast<void**>(&sp), const_cast<void**>(&bufs)};
  set_device(device);
  CUresult r = driver().cuLaunchKernel(k.handle, grid, 1, 1, block, 1, 1, 0, stream(device), args, nullptr);
  if (r != CUDA_SUCCESS) check(r, "cuLaunchKernel", k.name + " (" + what + ")");
  after_launch(device, what);
}

unsigned grid_for(int device, const Kernel& k, int64_t n, int block) {
  int64_t wanted = (std::max<int64_t>(n, 1) + block - 1) / block;
  // As many threads as are resident at the kernel's occupancy, whatever the block size.
  int64_t resident = static_cast<int64_t>(k.blocks_per_sm) * k.occupancy_block;
  int64_t full = static_cast<int64_t>(multiprocessor_count(device)) * std::max<int64_t>(resident / block, 1);
  return static_cast<unsigned>(std::clamp<int64_t>(wanted, 1, std::max<int64_t>(full, 1)));
}

}  // namespace loom::cuda
