#include "runtime/matmul_precision.h"

#include <atomic>

namespace loom {
namespace {

std::atomic<bool> allow_tf32{false};

}  // namespace

bool matmul_allow_tf32() noexcept { return allow_tf32.load(std::memory_order_relaxed); }
void set_matmul_allow_tf32(bool allow) noexcept { allow_tf32.store(allow, std::memory_order_relaxed); }

}  // namespace loom
