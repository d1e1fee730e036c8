// A build without Gloo (Debian: libgloo-dev): the gloo backend says so when asked for.
#include "runtime/distributed/group.h"
#include "runtime/error.h"

namespace loom::distributed {

std::string gloo_unavailable_reason() {
  return "this build of loom has no Gloo (install libgloo-dev and rebuild: scripts/setup does both)";
}

std::unique_ptr<Group> make_gloo_group(const Rendezvous&, int, int, std::chrono::milliseconds) {
  LOOM_FAIL(Runtime, "the gloo backend is not available: ", gloo_unavailable_reason());
}

}  // namespace loom::distributed
