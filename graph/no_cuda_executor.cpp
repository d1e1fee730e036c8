// A build without the CUDA toolkit has no GPU devices, so no GPU traces to run.
#include "graph/cuda_executor.h"

namespace loom::graph {

CudaOptions cuda_options_from_environment() { return {}; }

std::shared_ptr<Executor> make_cuda_executor(CudaOptions) { return nullptr; }

}  // namespace loom::graph
