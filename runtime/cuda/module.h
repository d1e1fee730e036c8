// Loaded GPU code: modules made from CUDA source at run time, their kernels, and launching them.
//
// Source becomes a binary image through the module compiler, which rtc/ installs (NVRTC, with
// its disk cache: rtc/cuda_compiler.cpp); the runtime loads images with the driver
// (runtime/cuda/driver.h). module_for() caches loaded modules per device and source, weakly: a
// source whose module is loaded costs a hash and a lookup, never a compile or a load; a module is
// unloaded when its last holder lets it go (the plans launching from it: graph/plan_cache.h),
// and loaded again from the disk cache when needed again.
//
// Every kernel loom launches has one ABI (fusion/render.h):
//   extern "C" __global__ void k(const long long* ip, const long long* sp, void* const* bufs)
// where ip, sp and bufs point to device memory (an argument table the host filled and uploaded).
//
// Only files compiled with the CUDA toolkit include this header.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>
#include <unordered_map>

namespace loom::cuda {

// A compiled image for the driver: a cubin, or PTX text (NUL-terminated) it compiles itself.
struct Image {
  std::string bytes;
  bool ptx = false;
};

// Compiles CUDA C++ `source` for a device of compute capability `capability` (10 * major +
// minor). `name` names the module in errors; `kernels` is how many kernels it holds (metrics).
using ModuleCompiler = Image (*)(const std::string& source, const std::string& name, int capability, int kernels);
void set_module_compiler(ModuleCompiler compiler);

struct Kernel {
  CUfunction handle = nullptr;
  std::string name;
  int max_block = 0;       // the most threads per block it can be launched with
  int occupancy_block = 0; // the block size the occupancy calculator suggests (<= max_block)
  int blocks_per_sm = 0;   // resident blocks per multiprocessor at occupancy_block
};

class Module {
 public:
  Module(int device, CUmodule handle, std::string name) : device_(device), handle_(handle), name_(std::move(name)) {}
  // Unloads the module. Its holders make sure no work queued from it is still running (a plan
  // waits for its stream) and never let it go in a static destructor, when the driver may be
  // gone (the plan cache and the runtime modules are never destroyed).
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The kernel named `name`, with its launch limits; throws naming the module if it is missing.
  const Kernel& kernel(const std::string& name) const;
  int device() const noexcept { return device_; }

 private:
  int device_;
  CUmodule handle_;
  std::string name_;
  mutable std::unordered_map<std::string, std::unique_ptr<Kernel>> kernels_;
};

// The module of `source` on `device`: from the process's cache, else compiled (rtc) and loaded.
// Throws RuntimeError naming `name` when compiling or loading fails.
std::shared_ptr<const Module> module_for(int device, const std::string& source, const std::string& name, int kernels);

// Queues kernel(ip, sp, bufs) on the device's stream with a 1-d grid and block. `what` names the
// launch in errors (kernel, op, trace). Checks the launch and does after_launch's bookkeeping.
void launch(int device, const Kernel& kernel, unsigned grid, unsigned block, const void* ip, const void* sp,
            const void* bufs, const std::string& what);

// A grid for a grid-stride loop over n items with `block` threads: enough blocks to cover n,
// at most what fills the device once at the kernel's occupancy; at least 1.
unsigned grid_for(int device, const Kernel& kernel, int64_t n, int block);

}  // namespace loom::cuda
