// A build without NCCL (no CUDA toolkit, or a toolkit without nccl.h): the nccl backend says so
// when asked for.
#include "runtime/distributed/group.h"
#include "runtime/error.h"

namespace loom::distributed {

std::string nccl_unavailable_reason() {
  return "this build of loom has no NCCL (it needs the CUDA toolkit with nccl.h at build time)";
}

std::unique_ptr<Group> make_nccl_group(const Rendezvous&, int, int, int, std::chrono::milliseconds) {
  LOOM_FAIL(Runtime, "the nccl backend is not available: ", nccl_unavailable_reason());
}

}  // namespace loom::distributed
