// The CUDA back end of run-time compilation: NVRTC, source -> cubin (or PTX) for one architecture.
//
// Available when loom is built with the CUDA toolkit; compiling needs no GPU, so CI compiles the
// CUDA rendering of every fused module the tests produce, the runtime's kernels and the library
// kernels (DESIGN: one renderer, two targets). rtc/cuda_compiler.cpp adds the disk cache and
// installs the result as the runtime's module compiler (runtime/cuda/module.h).
#pragma once

#include <string>
#include <vector>

namespace loom::rtc {

// True when this build has NVRTC.
bool nvrtc_available() noexcept;

// What identifies this NVRTC in a module's key: its version and the real path of the library.
std::string nvrtc_identity();
// The options compile_cuda passes for a target (part of a module's key).
std::vector<std::string> nvrtc_options(int arch, bool ptx);

// Compiles CUDA C++ to a cubin for sm_<arch> (e.g. 90), or to PTX for compute_<arch> when `ptx`.
// Throws loom::Error with NVRTC's log on failure, naming `name`.
std::string compile_cuda(const std::string& source, int arch, const std::string& name, bool ptx = false);

// The architectures this NVRTC compiles for (e.g. 75, 80, ..., 120); empty without NVRTC.
std::vector<int> nvrtc_architectures();

// What a device of compute capability `capability` gets: a cubin for its own architecture when
// NVRTC knows it, else PTX for the newest architecture NVRTC knows below it (the driver compiles
// that for the device). Returns {arch, ptx}; throws if NVRTC knows no architecture at or below.
std::pair<int, bool> cuda_target(int capability);

}  // namespace loom::rtc
