#include "rtc/nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <vector>

#include "runtime/error.h"

namespace loom::rtc {
namespace {

void check(nvrtcResult r, const char* what) {
  LOOM_CHECK(r == NVRTC_SUCCESS, Runtime, "NVRTC error in ", what, ": ", nvrtcGetErrorString(r));
}

}  // namespace

bool nvrtc_available() noexcept { return true; }

std::string nvrtc_identity() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  std::string library = "?";
  Dl_info info{};
  char real[PATH_MAX];
  if (::dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) && info.dli_fname)
    library = ::realpath(info.dli_fname, real) ? real : info.dli_fname;
  return "nvrtc " + std::to_string(major) + "." + std::to_string(minor) + " (" + library + ")";
}

std::vector<std::string> nvrtc_options(int arch, bool ptx) {
  return {std::string("--gpu-architecture=") + (ptx ? "compute_" : "sm_") + std::to_string(arch), "--std=c++17"};
}

std::string compile_cuda(const std::string& source, int arch, const std::string& name, bool ptx) {
  nvrtcProgram prog = nullptr;
  check(nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  std::vector<std::string> words = nvrtc_options(arch, ptx);
  std::vector<const char*> options;
  for (const std::string& w : words) options.push_back(w.c_str());
  nvrtcResult result = nvrtcCompileProgram(prog, static_cast<int>(options.size()), options.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) nvrtcGetProgramLog(prog, log.data());
  LOOM_CHECK(result == NVRTC_SUCCESS, Runtime, "NVRTC failed to compile ", name, " for ", ptx ? "compute_" : "sm_", arch,
             ":\n", log);
  size_t size = 0;
  if (ptx) {
    check(nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize");
    std::string text(size, '\0');  // size counts the terminating NUL
    check(nvrtcGetPTX(prog, text.data()), "nvrtcGetPTX");
    if (!text.empty() && text.back() == '\0') text.pop_back();
    return text;
  }
  check(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
  std::string cubin(size, '\0');
  check(nvrtcGetCUBIN(prog, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

std::vector<int> nvrtc_architectures() {
  int n = 0;
  check(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(static_cast<size_t>(n));
  if (n > 0) check(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  std::sort(archs.begin(), archs.end());
  return archs;
}

std::pair<int, bool> cuda_target(int capability) {
  std::vector<int> archs = nvrtc_architectures();
  if (std::find(archs.begin(), archs.end(), capability) != archs.end()) return {capability, false};
  int best = 0;
  for (int a : archs)
    if (a <= capability) best = a;
  LOOM_CHECK(best > 0, Runtime, "this NVRTC cannot compile for a GPU of compute capability ", capability / 10, ".",
             capability % 10, " (it knows sm_", archs.empty() ? 0 : archs.front(), " and newer)");
  return {best, true};
}

}  // namespace loom::rtc
