#include "graph/cuda_step_profile.h"

#include "graph/step_profile.h"
#include "lazy/provenance.h"

namespace loom::graph {
namespace {

// "gather -> %12" (a launch's `what`, graph/cuda_lowering.cpp) without the trace position, so a
// profile's rows group the same op across steps.
std::string op_of(const std::string& what) {
  size_t arrow = what.find(" -> %");
  return arrow == std::string::npos ? what : what.substr(0, arrow);
}

}  // namespace

void describe_cuda_step(profiler::Event& e, const fusion::Program& p, const CudaProgram& lowered, const Trace& t,
                        const CudaStep& step) {
  if (step.kind == CudaStep::MatMul) {
    const Gemm& g = lowered.gemms[static_cast<size_t>(step.index)];
    e.category = "blas";
    e.name = op_name(OpId::MatMul);
    e.args.emplace_back("m x n x k", std::to_string(g.m) + " x " + std::to_string(g.n) + " x " + std::to_string(g.k));
    e.args.emplace_back("batches", std::to_string(g.batches));
    int64_t size = static_cast<int64_t>(itemsize(g.dtype));
    e.bytes_read = (g.m * g.k + g.k * g.n) * g.batches * size;
    e.bytes_written = g.m * g.n * g.batches * size;
    return;
  }
  const Launch& l = lowered.launches[static_cast<size_t>(step.index)];
  if (l.module == CudaModule::Fused) {
    for (size_t k = 0; k < p.kernels.size(); ++k) {
      if (p.kernels[k].name != l.what) continue;
      fusion::Step as_step;
      as_step.kind = fusion::Step::RunKernel;
      as_step.kernel = static_cast<int32_t>(k);
      describe_step(e, p, t, as_step);
      return;
    }
  }
  e.category = "library";
  e.name = op_of(l.what);
  e.args.emplace_back("kernel", l.kernel);
}

}  // namespace loom::graph
