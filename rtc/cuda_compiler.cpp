// The runtime's module compiler (runtime/cuda/module.h): NVRTC for the device's architecture,
// through the disk cache (DESIGN decisions 7 and 15), installed when libloom loads.
#include <chrono>

#include "rtc/disk_cache.h"
#include "rtc/nvrtc.h"
#include "runtime/cuda/module.h"
#include "runtime/error.h"
#include "runtime/metrics.h"

namespace loom::rtc {
namespace {

// Everything the image depends on (rtc/disk_cache.h): the source, NVRTC (version and library),
// the target and the options compile_cuda passes. The cache returns an image only from an
// entry that holds exactly this key.
std::string image_key(const std::string& source, int arch, bool ptx) {
  std::string key = "loom cuda module\nsource: fnv1a64 " + hex64(hash_text(source)) + ", " +
                    std::to_string(source.size()) + " bytes\ncompiler: " + nvrtc_identity() + "\ntarget: " +
                    (ptx ? "compute_" : "sm_") + std::to_string(arch) + (ptx ? " (ptx)" : " (cubin)") + "\nflags:";
  for (const std::string& o : nvrtc_options(arch, ptx)) key += " " + o;
  return key + "\n";
}

cuda::Image compile_for_device(const std::string& source, const std::string& name, int capability, int kernels) {
  auto [arch, ptx] = cuda_target(capability);
  std::string key = image_key(source, arch, ptx);
  const DiskCache& disk = DiskCache::of("cuda", ptx ? ".ptx" : ".cubin", ".cu");
  if (auto bytes = disk.find(key)) {
    count(metrics().modules_loaded_from_disk);
    return {std::move(*bytes), ptx};
  }
  auto start = std::chrono::steady_clock::now();
  std::string image = compile_cuda(source, arch, name, ptx);
  disk.store(key, image, source);
  count(metrics().kernels_compiled, kernels);
  count(metrics().compile_nanoseconds,
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  return {std::move(image), ptx};
}

const bool installed = (cuda::set_module_compiler(&compile_for_device), true);

}  // namespace
}  // namespace loom::rtc
