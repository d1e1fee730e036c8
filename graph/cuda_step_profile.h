// The steps of a lowered CUDA program as a profile shows them (graph/step_profile.h's names and
// facts for the CPU's steps): a fused kernel's launch lists the ops it fused with their Python
// lines; a product is "MatMul" (category "blas", its M x N x K and batches); a library or runtime
// kernel is its op's name (category "library"). Used by the CUDA executor (spans timed on the
// device's stream: graph/cuda_step_timer.h) and by its host emulator (spans timed on the host,
// which is how the naming is tested without a GPU).
#pragma once

#include "fusion/program.h"
#include "graph/cuda_program.h"
#include "runtime/profiler.h"

namespace loom::graph {

void describe_cuda_step(profiler::Event& e, const fusion::Program& p, const CudaProgram& lowered, const Trace& t,
                        const CudaStep& step);

// A host-timed span of one step (the emulator's).
class HostCudaStepSpan {
 public:
  HostCudaStepSpan(const fusion::Program& p, const CudaProgram& lowered, const Trace& t, const CudaStep& step)
      : span_("kernel", "") {
    if (profiler::Event* e = span_.event()) [[unlikely]] describe_cuda_step(*e, p, lowered, t, step);
  }

 private:
  profiler::Span span_;
};

}  // namespace loom::graph
