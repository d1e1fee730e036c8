// The host back end of run-time compilation: C++ source -> a loaded shared object.
//
// One module per graph (DESIGN decision 7), compiled by the system C++ compiler ($LOOM_CXX,
// default `c++`) with -O2 -fPIC -shared for the native architecture, cached in memory and on
// disk (rtc/disk_cache.h), loaded with dlopen. Modules stay loaded for the life of the process:
// cached graphs hold pointers into them. Thread safety: any thread may compile; the memory cache
// is locked for the whole compile, so two threads compile one at a time (syncs compile without
// the GIL, lazy/sync.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace loom::rtc {

class HostModule {
 public:
  explicit HostModule(void* handle) : handle_(handle) {}
  // The address of an exported function; throws naming the symbol if it is missing.
  void* symbol(const std::string& name) const;

 private:
  void* handle_;
};

// Compiles (or finds in a cache) a module. `kernels` is the number of kernels in it (for
// loom.metrics()). Throws loom::Error with the compiler's message and the source's path when
// compilation fails; the caches are left consistent and the same source may be compiled again.
std::shared_ptr<HostModule> compile_host(const std::string& source, int kernels);

// "g++ (Debian 12.2.0-14) 12.2.0" for the compiler in use; throws if there is none.
const std::string& host_compiler_identity();

}  // namespace loom::rtc
