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
// Graphs: a plan's runs go as the executor's do (graph/cuda_capture.h: direct, capture, replays,
// or direct for good after a failed capture), with the same counters. An emulated capture
// records the steps without running them, under the allocator's CaptureGuard (an allocation
// raises), on a stream that refuses to be waited for while it captures; the test hook of
// graph/cuda_capture.h makes a capture fail, so the fallback is checked without a GPU.
//
// What it cannot check: anything about threads and devices (block reductions, atomics under
// contention, launch geometry, streams, the driver's graphs, cuBLAS itself). tests/gpu/ does.
//
// Runs traces of the CPU device: loom._C._set_executor("cuda-emulated"). `graphs`: false under
// LOOM_CUDA_GRAPHS=0, as for the executor.
#pragma once

#include <memory>

#include "lazy/executor.h"

namespace loom::graph {

std::shared_ptr<Executor> make_cuda_emulator(bool fuse, bool graphs = true);

// The runtime and library kernel sources as the emulator compiles them (tests read it).
std::string emulated_kernel_source();

}  // namespace loom::graph
