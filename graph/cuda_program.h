// A fused program (fusion/program.h) lowered for a GPU: the kernel launches and matrix products
// it runs, in order, and the argument table they read. Pure host data, built without the CUDA
// toolkit (graph/cuda_lowering.cpp), so the tests check it on any machine; graph/cuda_executor
// resolves it on a device, fills the table and launches.
//
// The argument table is how a cached plan runs on new memory without rebuilding anything. Every
// kernel takes (ip, sp, bufs) pointing into one device array of 64-bit words, the plan's table,
// whose address never changes; matrix products read their per-batch pointers from it too. What
// differs between runs (the addresses of inputs, outputs, destinations and scratch, the values
// of the trace's scalar parameters, the strides of in-place destinations) is only ever in the
// table: `patches` say which words to rewrite before each run. A captured CUDA Graph therefore
// replays correctly after one host-to-device copy of the table, whatever moved (DESIGN
// decision 9).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fusion/program.h"
#include "fusion/render.h"
#include "runtime/distributed/collective.h"
#include "runtime/error.h"

namespace loom::graph {

// Where a pointer of the table points, resolved at every run.
struct Address {
  enum Kind : uint8_t {
    Buffer,       // element 0 of the program's buffer `index`
    Scratch,      // the plan's scratch region `index` (contiguous copies for cuBLAS)
    Destination,  // element 0 of the destination of trace output `index`
    Table,        // the table's own word `index` (pointer arrays handed to a kernel)
    ErrorWord,    // the device's error word (runtime/cuda/stream.h)
    Null,         // an unused pointer argument
  } kind = Null;
  int32_t index = -1;
  int64_t byte_offset = 0;  // added to the address
};

// A word of the table rewritten before every run.
struct Patch {
  enum Kind : uint8_t {
    Pointer,       // `address`
    ScalarAbi,     // the Scalar leaf `node` as fused kernels take it: a double's bits, an integer's value
    ScalarInt,     // that scalar as an integer
    ScalarDouble,  // that scalar as a double's bits
    ScalarIn,      // that scalar converted to `dtype`, its bit pattern zero-extended
    Walk,          // the copy ip of the write-back of trace output `index` (words reserved for its
                   // rank): its destination's strides, read at every run, and `strides`, its source's
    GemmPointers,  // the three per-batch pointer arrays of gemm `index`
  } kind = Pointer;
  int64_t word = 0;
  Address address;
  int32_t node = -1;
  DType dtype = DType::Float32;
  int32_t index = -1;
  Dims strides;
};

// Which module a launch's kernel is in.
enum class CudaModule : uint8_t {
  Fused,    // the program's rendered module (fusion/render.h)
  Runtime,  // runtime/cuda/kernel_source.h
  Library,  // graph/cuda_library_source.h
};

struct Launch {
  CudaModule module = CudaModule::Fused;
  std::string kernel;
  int64_t items = 0;        // iterations of its grid-stride loop; row kernels: rows
  int64_t row_inner = -1;   // row kernels: elements reduced per row (one block per row); else -1
  int64_t ip = 0, sp = 0, bufs = 0;  // table words where its three arrays start
  std::string what;         // names it in errors: the fused kernel, or the op and its trace node
  bool second_pass = false; // a split reduction's combine (fusion/program.h, Kernel::split_block)
  // A data error the kernel can report, and the table word that takes its code (in ip).
  std::optional<std::pair<ErrorKind, std::string>> data_error;
  int64_t error_code_word = -1;
};

// out[b] = left[b] @ right[b] for every batch b: row-major products of M x K by K x N matrices,
// each operand a strided matrix per batch (row-major or column-major: BLAS-friendly).
struct Gemm {
  DType dtype = DType::Float32;
  bool tf32 = false;
  int64_t m = 0, n = 0, k = 0, batches = 0;
  struct Operand {
    Address address;                     // batch 0's element (0, 0)
    int64_t row_stride = 0, col_stride = 0;
    std::vector<int64_t> batch_offsets;  // elements from `address`, one per batch
  };
  Operand left, right, out;  // out: row-major, row_stride n
  int64_t pointers = 0;      // table word of three arrays of `padded` pointers: left, right, out
  int64_t padded = 0;        // batches rounded up (cuBLAS may read pointer arrays in 16-byte pieces)
  std::string what;
};

// A collective (lazy/collectives.h): runtime/distributed/collective.h's run of `call` on the
// process group `group`, from scratch region `in` to scratch region `out` (the same region for
// the collectives that work in place). Scratch keeps its address for the plan's life, which a
// captured NCCL call needs (it takes its pointers by value, not from the table): a copy kernel
// moves the operand in before, another the result out after.
struct CollectiveCall {
  distributed::Call call;
  int64_t group = 0;
  Address in, out;  // Scratch
  std::string what;
};

struct CudaStep {
  enum Kind : uint8_t { Kernel, MatMul, Collective } kind;
  int32_t index;  // into launches, gemms or collectives
};

struct CudaProgram {
  std::vector<int64_t> table;  // constant words set; patched words are rewritten every run
  std::vector<Patch> patches;
  std::vector<Launch> launches;
  std::vector<Gemm> gemms;
  std::vector<CollectiveCall> collectives;
  std::vector<CudaStep> steps;
  std::vector<int64_t> scratch;  // byte offset of each scratch region in the plan's scratch block
  int64_t scratch_bytes = 0;
};

// Lowers `program` (partitioned from `trace`, its fused kernels rendered for CUDA as `rendered`):
// fused kernels, library steps, then the write-backs of in-place outputs, last, after every
// read of the old values. Float matrix products use tensor-float-32 when `allow_tf32`. Throws
// NotImplementedError naming an op the GPU has no kernel for.
CudaProgram lower_for_cuda(const Trace& trace, const fusion::Program& program, const fusion::RenderedModule& rendered,
                           bool allow_tf32);

// The words a write-back's copy ip needs for a value of rank r (strided_ip: n, r, sizes, two
// stride lists).
inline int64_t walk_words(int64_t rank) { return 2 + 3 * rank; }

// A Gemm in BLAS's column-major terms, as cuBLAS is called: C' = op(A') op(B') with C' = out^T
// (m' = N, n' = M), A' the right operand and B' the left one. A row-major operand is its own
// transpose stored column-major: no transpose, leading dimension its row stride; a
// column-major one is transposed, leading dimension its column stride.
struct BlasShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
};
BlasShape blas_shape(const Gemm& g);

// Alignment every pointer of a product must have for a captured graph to use it (cuBLAS cannot
// check pointers it reads from device memory; graph/cuda_blas.h).
inline constexpr uintptr_t kGemmPointerAlign = 16;

// Where a plan's memory is on this run, for patch_table.
struct TableBases {
  uintptr_t table = 0;       // the table itself (word 0)
  uintptr_t scratch = 0;     // the scratch block
  uintptr_t error_word = 0;  // the device's error word
};

// The table of one run: the constant words with every patch applied, given the run's arrays
// (graph/binding.h) and bases. `aligned` says whether every pointer a float product reads is
// kGemmPointerAlign-aligned.
std::vector<int64_t> patch_table(const CudaProgram& lowered, const Trace& trace,
                                 const std::vector<Array>& arrays, const TableBases& bases, bool& aligned);

}  // namespace loom::graph
