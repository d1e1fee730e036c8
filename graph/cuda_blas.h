// Matrix products of CUDA plans on cuBLAS (graph/cuda_program.h's Gemm).
//
// One cuBLAS handle per device, on the device's stream, with a workspace taken once from loom's
// allocator (cuBLAS must not allocate while a graph is being captured). float32 multiplies in
// float32 (tensor-float-32 only when the plan allows it: loom.backends.cuda.matmul.allow_tf32),
// float16 and bfloat16 accumulate in float32 with reduced-precision reductions disallowed, float64
// in float64.
//
// Two forms of the same product:
//   direct         the per-batch pointers given by value: one cublasGemmEx, one strided-batched
//                  call when every operand's batches are evenly spaced, else one call per batch.
//                  cuBLAS sees every pointer and picks kernels for their alignment. Eager mode,
//                  LOOM_CUDA_GRAPHS=0 and the first run of a plan use it.
//   pointer arrays cublasGemmBatchedEx reading the per-batch pointers from device memory (the
//                  plan's table), so a captured graph stays correct when the operands move: only
//                  the table changes. cuBLAS cannot see those pointers, so the executor uses this
//                  form only when every one of them is 16-byte aligned.
//
// Only files compiled with the CUDA toolkit include this header.
#pragma once

#include <vector>

#include "graph/cuda_program.h"

namespace loom::graph {

void gemm_direct(int device, const Gemm& g, const std::vector<const void*>& left, const std::vector<const void*>& right,
                 const std::vector<void*>& out);

// `arrays`: device address of the table's three pointer arrays (left, right, out; g.padded each).
void gemm_pointer_arrays(int device, const Gemm& g, const void* const* arrays);

// Creates the device's handle now (plan creation), so that a capture never does.
void prepare_blas(int device);

}  // namespace loom::graph
