#include "rtc/nvrtc.h"

#include <nvrtc.h>

#include <vector>

#include "runtime/error.h"

namespace loom::rtc {
namespace {

void check(nvrtcResult r, const char* what) {
  LOOM_CHECK(r == NVRTC_SUCCESS, Runtime, "NVRTC error in ", what, ": ", nvrtcGetErrorString(r));
}

}  // namespace

bool nvrtc_available() noexcept { return true; }

std::string compile_cuda(const std::string& source, int arch, const std::string& name) {
  nvrtcProgram prog = nullptr;
  check(nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  std::string arch_flag = "--gpu-architecture=sm_" + std::to_string(arch);
  const char* options[] = {arch_flag.c_str(), "--std=c++17", "--use_fast_math=false"};
  nvrtcResult result = nvrtcCompileProgram(prog, 2, options);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) nvrtcGetProgramLog(prog, log.data());
  LOOM_CHECK(result == NVRTC_SUCCESS, Runtime, "NVRTC failed to compile ", name, " for sm_", arch, ":\n", log);
  size_t size = 0;
  check(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
  std::string cubin(size, '\0');
  check(nvrtcGetCUBIN(prog, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

}  // namespace loom::rtc
