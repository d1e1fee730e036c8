// The host back end of run-time compilation: C++ source -> a loaded shared object.
//
// One module per graph (DESIGN decision 7), compiled by the system C++ compiler ($LOOM_CXX,
// default `c++`; a command with arguments such as "ccache g++" is split into words, never given
// to a shell: rtc/process.h) with -O1 or -O3 (OptLevel) -fPIC -shared for the native
// architecture, cached in memory and on disk (rtc/disk_cache.h), loaded with dlopen. A kernel is
// first compiled at -O1, which takes about half the compiler's time of -O3 and runs slower
// (perf/RESULTS.md, 2026-12-02 11:25), and again at -O3 in the background once its plan keeps
// running (rtc/kernel_units.h); the level is one of the flags, so part of the key. A compile
// that takes longer than LOOM_COMPILE_TIMEOUT seconds (default 300) is killed with everything it
// started, and raises.
// Each module exports its full key as the string `loom_module_key`, checked right after dlopen,
// before any kernel of it runs (DESIGN decision 15). A module stays loaded while someone holds it
// (the plans that point into it: graph/plan_cache.h); the memory cache holds it weakly, so a
// source compiled again while its module is loaded costs a lookup, and once it is unloaded, a
// load from the disk cache. Thread safety: any thread may compile; the caches are locked for
// lookups, not for the compile, so threads compile different modules at once (syncs compile
// without the GIL, lazy/sync.h; rtc/kernel_units.h compiles a module's units in parallel); two
// threads compiling the same source both compile it, and the first to finish serves both.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace loom::rtc {

// -O1 for kernels that may run only once (a first step, a trace seen once), -O3 for the rest.
enum class OptLevel : uint8_t { Quick, Full };

class HostModule {
 public:
  HostModule(void* handle, std::string source, OptLevel level, int kernels)
      : handle_(handle), source_(std::move(source)), level_(level), kernels_(kernels) {}
  ~HostModule();  // dlclose: no pointer into the module may outlive it
  HostModule(const HostModule&) = delete;
  HostModule& operator=(const HostModule&) = delete;
  // The address of an exported function; throws naming the symbol if it is missing.
  void* symbol(const std::string& name) const;
  // The source it was compiled from (without its key), at which level, and its kernel count.
  const std::string& source() const noexcept { return source_; }
  OptLevel level() const noexcept { return level_; }
  int kernels() const noexcept { return kernels_; }

 private:
  void* handle_;
  std::string source_;
  OptLevel level_;
  int kernels_;
};

// Compiles (or finds in a cache) a module. `kernels` is the number of kernels in it (for
// loom.metrics()). Throws loom::Error with the compiler's message and the source's path when
// compilation fails or times out; the caches are left consistent (no entry is stored) and the
// same source may be compiled again.
std::shared_ptr<HostModule> compile_host(const std::string& source, int kernels, OptLevel level = OptLevel::Full);

// The module of `source` at `level` if it is loaded or in the disk cache (loaded from there), else
// nullptr; never compiles. Throws only as loading does.
std::shared_ptr<HostModule> find_host(const std::string& source, OptLevel level, int kernels);

// compile_host at OptLevel::Full for a module that runs already at Quick: counted as
// kernels_optimized, not kernels_compiled, and stopped (Error, Interrupted) when `stop` returns
// true, checked about every 100 ms while the compiler runs (a background compile at exit).
std::shared_ptr<HostModule> optimize_host(const std::string& source, int kernels, const std::function<bool()>& stop);

// What identifies the compiler in use in a module's key: its command, the real path of the
// program it runs and its full --version output; throws if it does not run.
const std::string& host_compiler_identity();

}  // namespace loom::rtc
