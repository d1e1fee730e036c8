#include "runtime/determinism.h"

#include <atomic>

namespace loom {
namespace {

std::atomic<bool> enabled{false}, warn_only{false};

}  // namespace

DeterministicMode deterministic_algorithms() noexcept {
  return {enabled.load(std::memory_order_relaxed), warn_only.load(std::memory_order_relaxed)};
}

void set_deterministic_algorithms(DeterministicMode mode) noexcept {
  enabled.store(mode.enabled, std::memory_order_relaxed);
  warn_only.store(mode.warn_only, std::memory_order_relaxed);
}

}  // namespace loom
