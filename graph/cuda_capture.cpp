#include "graph/cuda_capture.h"

#include <atomic>
#include <cstdlib>

#include "runtime/metrics.h"
#include "runtime/warning.h"

namespace loom::graph {
namespace {

std::atomic<bool>& strict() {
  static std::atomic<bool> s = [] {
    const char* v = std::getenv("LOOM_CUDA_GRAPHS");
    return v && std::string(v) == "strict";
  }();
  return s;
}

std::atomic<CaptureFault> injected{CaptureFault::None};
std::atomic<bool> warned{false};

}  // namespace

bool strict_cuda_graphs() noexcept { return strict().load(std::memory_order_relaxed); }
bool set_strict_cuda_graphs(bool on) noexcept { return strict().exchange(on); }

void inject_capture_fault(CaptureFault fault) noexcept { injected.store(fault); }
CaptureFault take_capture_fault() noexcept { return injected.exchange(CaptureFault::None); }

void GraphLife::capture_failed(const std::string& plan, const Error& e) {
  if (strict_cuda_graphs()) throw;
  failure_ = e.what();
  count(metrics().graph_capture_failures);
  if (warned.exchange(true)) return;
  warn("capturing the CUDA Graph of " + plan + " failed (" + failure_ +
       "); that plan now launches its steps directly, with the same results. Later failures are not warned "
       "about: loom.metrics()['graph_capture_failures'] counts them; LOOM_CUDA_GRAPHS=strict raises instead.");
}

}  // namespace loom::graph
