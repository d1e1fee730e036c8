// The CUDA back end of a build without the CUDA toolkit.
#include "rtc/nvrtc.h"
#include "runtime/error.h"

namespace loom::rtc {

bool nvrtc_available() noexcept { return false; }

std::string nvrtc_identity() { return "no nvrtc"; }

std::vector<std::string> nvrtc_options(int, bool) { return {}; }

std::string compile_cuda(const std::string&, int, const std::string& name, bool) {
  LOOM_FAIL(Runtime, "cannot compile ", name, ": loom was built without the CUDA toolkit (no NVRTC)");
}

std::vector<int> nvrtc_architectures() { return {}; }

std::pair<int, bool> cuda_target(int) {
  LOOM_FAIL(Runtime, "loom was built without the CUDA toolkit (no NVRTC)");
}

}  // namespace loom::rtc
