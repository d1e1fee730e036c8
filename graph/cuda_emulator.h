// A reference executor for the CUDA lowering (graph/cuda_program.h) that runs on the host, so
// the lowering is checked on machines without a GPU: the same programs, argument tables and
// kernel sources as on a GPU, executed one thread at a time.
//
// How each step runs: fused kernels through their C++ rendering (the same kernels, the same
// ip arrays: both targets render them from one writer, fusion/render.h); the runtime's and the
// library's CUDA kernels compiled for the host by the host compiler behind a shim that makes a
// launch one block of one thread (their grid-stride loops then cover every item; none of them
// synchronizes threads); matrix products in cuBLAS's column-major convention (blas_shape),
// reading their per-batch pointers from the table as a captured graph does. Data errors reach
// the error word as on a GPU and raise after the run.
//
// What it cannot check: anything about threads and devices (block reductions, atomics under
// contention, launch geometry, streams, graphs, cuBLAS itself). tests/gpu/ does.
//
// Runs traces of the CPU device: loom._C._set_executor("cuda-emulated").
#pragma once

#include <memory>

#include "lazy/executor.h"

namespace loom::graph {

std::shared_ptr<Executor> make_cuda_emulator(bool fuse);

// The runtime and library kernel sources as the emulator compiles them (tests read it).
std::string emulated_kernel_source();

}  // namespace loom::graph
