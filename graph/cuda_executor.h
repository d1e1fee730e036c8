// The CUDA executor: runs traces of GPU devices (DESIGN decision 9).
//
// A new trace is lowered once: partitioned and planned as on the CPU (fusion/, graph/memory_plan),
// its fused kernels rendered for CUDA and compiled by NVRTC into one module, its library steps
// mapped to cuBLAS and loom's own kernels, all reading one argument table
// (graph/cuda_program.h). The plan's arena, scratch and table live in a private memory pool.
// Plans, eager ops' one-node plans included, live in the bounded plan cache (graph/plan_cache.h):
// an evicted plan waits for the stream, then releases its graph, pool and unused modules.
// Every run rewrites the table and copies it to the device, then launches the program on the
// device's stream. The first run launches directly (and lets cuBLAS and the driver finish their
// lazy set-up); the second captures the program as a CUDA Graph; later runs replay it with one
// cudaGraphLaunch. Outputs are fresh blocks from the default pool at every run, so a replay
// never overwrites what a live tensor holds, and inputs, outputs, scalar parameters (learning
// rates, the Philox seed and offset of random ops) and destinations may all differ from run to
// run without recapture: they are only in the table.
//
// LOOM_CUDA_GRAPHS=0 runs every run directly (the same launches, no graph); so does a run whose
// matrix-product operands are not 16-byte aligned (graph/cuda_blas.h), and every run under
// LOOM_LAUNCH_BLOCKING=1, which waits after each launch so a fault names its kernel. A plan whose
// capture fails runs directly from then on, counted and warned about; LOOM_CUDA_GRAPHS=strict
// raises instead (graph/cuda_capture.h).
//
// Errors: a failed launch or cuBLAS call raises RuntimeError naming the kernel and the op; a
// fault inside a kernel, or a data error a kernel reports (an index out of range), raises at the
// next wait for the device (synchronize(), a copy to the host), not at the sync that queued it.
#pragma once

#include <memory>

#include "lazy/executor.h"

namespace loom::graph {

struct CudaOptions {
  bool fuse = true;    // LOOM_FUSION=0: one kernel per op
  bool graphs = true;  // LOOM_CUDA_GRAPHS=0: direct launches ("strict": graph/cuda_capture.h)
};

CudaOptions cuda_options_from_environment();

// The executor of GPU traces, or nullptr in a build without the CUDA toolkit.
std::shared_ptr<Executor> make_cuda_executor(CudaOptions options);

}  // namespace loom::graph
