#include "runtime/blocking.h"

#include "runtime/error.h"

namespace loom {
namespace {

EmbeddingHooks hooks;
thread_local int depth = 0;  // regions this thread is inside

}  // namespace

void install_embedding_hooks(EmbeddingHooks h) { hooks = h; }

BlockingRegion::BlockingRegion() : outermost_(depth++ == 0) {
  if (outermost_ && hooks.release) state_ = hooks.release();
}

BlockingRegion::~BlockingRegion() {
  --depth;
  if (outermost_ && state_ && hooks.reacquire) hooks.reacquire(state_);
}

bool in_blocking_region() noexcept { return depth > 0; }

bool holds_embedding_lock() noexcept { return hooks.holds_lock && hooks.holds_lock(); }

void check_interrupt() {
  if (depth > 0 && hooks.interrupt_requested && hooks.interrupt_requested())
    LOOM_FAIL(Interrupted, "interrupted (KeyboardInterrupt) while loom was computing");
}

}  // namespace loom
