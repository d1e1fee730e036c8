// The CUDA back end of run-time compilation: NVRTC, source -> cubin for one architecture.
//
// Available when loom is built with the CUDA toolkit; compiling needs no GPU, so CI compiles the
// CUDA rendering of every fused module the tests produce (DESIGN: one renderer, two targets).
#pragma once

#include <string>

namespace loom::rtc {

// True when this build has NVRTC.
bool nvrtc_available() noexcept;

// Compiles CUDA C++ to a cubin for sm_<arch> (e.g. 90). Throws loom::Error with NVRTC's log on
// failure, naming `name`.
std::string compile_cuda(const std::string& source, int arch, const std::string& name);

}  // namespace loom::rtc
