#include "runtime/cuda/driver.h"

#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_device.h"
#include "runtime/error.h"

namespace loom::cuda {
namespace {

// The ABI version every entry of the table is asked for: each typedef above names the version its
// signature dates from, and all of them are unchanged in CUDA 12.0, the oldest runtime loom
// builds with, through 13.x.
constexpr unsigned kAbiVersion = 12000;

struct Lookup {
  DriverApi api;
  std::string error;  // empty when every function was found
};

template <typename Fn>
bool find(const char* symbol, Fn& slot, std::string& error) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &fn, kAbiVersion, cudaEnableDefault, &status);
#else
  cudaError_t err = cudaGetDriverEntryPoint(symbol, &fn, cudaEnableDefault, &status);
#endif
  if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || !fn) {
    cudaGetLastError();  // leave no sticky state for the next runtime call
    error = std::string("the CUDA driver does not provide ") + symbol + " (" +
            (err != cudaSuccess ? cudaGetErrorString(err)
             : status == cudaDriverEntryPointVersionNotSufficent ? "driver too old"
                                                                 : "symbol not found") +
            ")";
    return false;
  }
  slot = reinterpret_cast<Fn>(fn);
  return true;
}

const Lookup& lookup() {
  static const Lookup l = [] {
    Lookup r;
    if (device_count() == 0) {
      r.error = "CUDA is not available (" + unavailable_reason() + ")";
      return r;
    }
    DriverApi& a = r.api;
    std::string& e = r.error;
    // Stops at the first missing function; its message is the one reported.
    (void)(find("cuGetErrorName", a.cuGetErrorName, e) && find("cuGetErrorString", a.cuGetErrorString, e) &&
           find("cuModuleLoadDataEx", a.cuModuleLoadDataEx, e) &&
           find("cuModuleGetFunction", a.cuModuleGetFunction, e) && find("cuModuleUnload", a.cuModuleUnload, e) &&
           find("cuLaunchKernel", a.cuLaunchKernel, e) &&
           find("cuFuncGetAttribute", a.cuFuncGetAttribute, e) &&
           find("cuOccupancyMaxPotentialBlockSize", a.cuOccupancyMaxPotentialBlockSize, e) &&
           find("cuOccupancyMaxActiveBlocksPerMultiprocessor", a.cuOccupancyMaxActiveBlocksPerMultiprocessor, e));
    return r;
  }();
  return l;
}

}  // namespace

const DriverApi& driver() {
  const Lookup& l = lookup();
  LOOM_CHECK(l.error.empty(), Runtime, l.error);
  return l.api;
}

std::string driver_unavailable_reason() { return lookup().error; }

void check(CUresult r, const char* what, const std::string& context) {
  if (r == CUDA_SUCCESS) [[likely]]
    return;
  const char* name = "unknown CUresult";
  const char* text = "";
  const DriverApi& d = driver();
  if (d.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = "unknown CUresult";
  if (d.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = "";
  LOOM_FAIL(Runtime, "CUDA driver error in ", what, context.empty() ? "" : " (", context, context.empty() ? "" : ")",
            ": ", name, " (", static_cast<int>(r), "): ", text);
}

}  // namespace loom::cuda
