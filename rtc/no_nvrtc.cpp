// The CUDA back end of a build without the CUDA toolkit.
#include "rtc/nvrtc.h"
#include "runtime/error.h"

namespace loom::rtc {

bool nvrtc_available() noexcept { return false; }

std::string compile_cuda(const std::string&, int, const std::string& name) {
  LOOM_FAIL(Runtime, "cannot compile ", name, ": loom was built without the CUDA toolkit (no NVRTC)");
}

}  // namespace loom::rtc
