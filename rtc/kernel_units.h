// Kernels compiled a few to a unit, each kernel once per process (and once per disk cache).
//
// A plan's module (fusion::RenderedModule) names every function after a hash of its text, so a
// kernel is the same function in every module it appears in: a model's first step and its
// steady-state step share most of their kernels, and a new batch size or a changed tail of a
// trace shares nearly all. compile_host_kernels() takes the module's functions, finds each one
// already loaded (compiled for an earlier module of this process and still held by some plan),
// and compiles only the others: split into up to one unit per thread asked for (at most 8; a unit is
// the prelude and some of the functions, compiled and cached on disk as a host module of its
// own: rtc/host_compiler.h), the units compiled in parallel. Units are deterministic for the
// same missing functions and thread count, so a new process with a warm disk cache loads them.
//
// Two levels (rtc/host_compiler.h OptLevel): a unit is compiled at -O1 (Quick) unless its -O3
// twin (the same source at Full) is loaded or on disk already, and optimize_host_kernels()
// compiles the Quick units of kernels that keep running again at -O3, in the background
// (graph/compiled.cpp): the index then finds the Full unit for those kernels, and a new process
// with a warm disk cache loads the Full units at once. LOOM_QUICK_KERNELS=0 compiles every unit
// at Full at once (no Quick level, nothing to optimize later).
//
// A kernel stays findable while some plan holds a unit containing it (the index holds units
// weakly, as the module cache does). Thread safety: any thread may call; two threads needing the
// same missing kernel at once may both compile it (the disk cache stores one).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rtc/host_compiler.h"

namespace loom::rtc {

struct HostKernels {
  std::vector<std::shared_ptr<HostModule>> units;  // every unit a kernel below lives in (hold them)
  std::vector<void*> functions;                    // per symbol asked for: its address
  std::vector<int32_t> unit_of;                    // per symbol asked for: its unit in `units`
  // Whether every unit is at OptLevel::Full (nothing for optimize_host_kernels to do).
  bool optimized() const;
};

// `functions[i]` defines the function named `symbols[i]`, and needs only `prelude` before it.
// Throws as compile_host() does; nothing is registered for a unit that failed.
HostKernels compile_host_kernels(const std::string& prelude, const std::vector<std::string>& functions,
                                 const std::vector<std::string>& symbols);

// What optimize_host_kernels needs of a HostKernels, holding none of its units: each unit's
// source, level and kernel count, and the unit itself weakly. A background -O3 compile keeps
// this, not the HostKernels, so the -O1 units are unloaded with the last plan that holds them
// even while their -O3 twins are being compiled (loom.clear_plan_cache() unloads every module of
// the plans it drops at once, whatever is in flight: graph/compiled.cpp).
struct HostKernelSources {
  struct Unit {
    std::string source;
    int kernels = 0;
    OptLevel level = OptLevel::Quick;
    std::weak_ptr<HostModule> loaded;
  };
  std::vector<Unit> units;
  std::vector<int32_t> unit_of;  // as HostKernels::unit_of
};
HostKernelSources sources_of(const HostKernels& kernels);

// The same kernels at OptLevel::Full: each Quick unit of `current` compiled again at Full (or
// found loaded or on disk), one after the other; `symbols` are those `current` was made for.
// Later lookups of those kernels find the Full units. Nothing (and nothing registered) when a unit
// of `current` that was at Full already is no longer loaded: whoever ran these kernels is gone,
// and loading it again would only keep a module nobody uses (the Full units compiled here are
// on disk for the next plan anyway). Throws as optimize_host() does (`stop`).
std::optional<HostKernels> optimize_host_kernels(const HostKernelSources& current, const std::vector<std::string>& symbols,
                                                 const std::function<bool()>& stop);

// LOOM_QUICK_KERNELS: whether kernels are compiled at Quick first (default; "0" turns it off).
bool quick_kernels_enabled();

}  // namespace loom::rtc
