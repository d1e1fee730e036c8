// The runtime's module compiler (runtime/cuda/module.h): NVRTC for the device's architecture,
// through the disk cache (DESIGN decision 7), installed when libloom loads.
#include <chrono>
#include <fstream>
#include <sstream>

#include <nvrtc.h>

#include "rtc/disk_cache.h"
#include "rtc/nvrtc.h"
#include "runtime/cuda/module.h"
#include "runtime/error.h"
#include "runtime/hash.h"
#include "runtime/metrics.h"

namespace loom::rtc {
namespace {

// Everything the image depends on besides the source: NVRTC's version, the target, the flags
// compile_cuda passes (part of its own text, so a change there is a change here too).
uint64_t image_key(const std::string& source, int arch, bool ptx) {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  uint64_t k = hash_combine(hash_text(source), static_cast<uint64_t>(major * 1000 + minor));
  k = hash_combine(k, static_cast<uint64_t>(arch) * 2 + ptx);
  return hash_combine(k, hash_text("--std=c++17"));
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

cuda::Image compile_for_device(const std::string& source, const std::string& name, int capability, int kernels) {
  auto [arch, ptx] = cuda_target(capability);
  uint64_t key = image_key(source, arch, ptx);
  DiskCache disk("cuda", ptx ? ".ptx" : ".cubin");
  if (auto path = disk.find(key)) {
    if (auto bytes = read_file(*path)) {
      count(metrics().modules_loaded_from_disk);
      return {std::move(*bytes), ptx};
    }
  }
  auto start = std::chrono::steady_clock::now();
  std::string image = compile_cuda(source, arch, name, ptx);
  std::string tmp = disk.temporary_path(key);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << image;
    LOOM_CHECK(out.good(), Runtime, "cannot write the compiled module ", tmp);
  }
  disk.commit(key, tmp, source);
  count(metrics().kernels_compiled, kernels);
  count(metrics().compile_nanoseconds,
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  return {std::move(image), ptx};
}

const bool installed = (cuda::set_module_compiler(&compile_for_device), true);

}  // namespace
}  // namespace loom::rtc
