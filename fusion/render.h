// Rendering fused kernels to source: one C-style emitter, two targets (DESIGN decision 8).
//
// The emitter walks a kernel's expressions and writes C; a Target table supplies what differs:
// type names, math functions, the kernel qualifier and how the domain is walked (C++: nested
// loops the compiler can vectorize; CUDA: grid-stride loops and block reductions).
//
// Sizes, strides and offsets are launch parameters, never literals, so a kernel's source depends
// only on its structure, dtypes, ranks and which accesses are linear: a new batch size renders
// the same source and compiles nothing (DESIGN decision 6).
#pragma once

#include <string>
#include <vector>

#include "fusion/program.h"

namespace loom::fusion {

enum class TargetKind : uint8_t { Cpu, Cuda };

// How a CPU kernel's outermost loop divides among threads: `extent` iterations of `work`
// elements each (1 and 1 when it cannot be split), cut only at multiples of `align`. A linear
// loop is cut at multiples of 64 elements so that each piece vectorizes exactly the elements a
// single thread's loop vectorizes: vector and scalar math may differ in the last bit, and the
// result must not depend on the thread count.
struct Split {
  int64_t extent;
  int64_t work;
  int64_t align = 1;
};

// Every kernel of a program, rendered into one module (DESIGN decision 7). A function is named
// after a hash of its text (`loom_k<16 hex digits>`), so a kernel of the same text has the same
// name in every module: the host compiler's kernel cache (rtc/kernel_units.h) finds a kernel
// compiled for an earlier module by its name.
struct RenderedModule {
  std::string source;                              // prelude, then every function
  std::string prelude;                             // the target's helpers every function needs
  std::vector<std::string> functions;              // each distinct function's definition
  std::vector<std::string> function_symbols;       // the name each of them defines
  std::vector<std::string> symbols;                // per kernel: the function it runs (kernels
                                                   // whose text is the same share one)
  std::vector<std::string> combine_symbols;        // per kernel: a split reduction's second pass
                                                   // (program.h, Kernel::split_block), or empty
  std::vector<std::vector<int64_t>> int_params;    // per kernel: the ip[] array of its launch
  std::vector<Split> splits;                       // per kernel (CPU)
};

RenderedModule render(const Program& program, TargetKind target);

// Kernel ABI, for both targets: void k(const long long* ip, const long long* sp, void* const* bufs)
// and on the CPU two more arguments, (long long lo, long long hi): the range of the outermost
// loop to run (RenderedModule::splits), so that threads can share a kernel.
//   ip    sizes, strides and offsets (RenderedModule::int_params of the kernel)
//   sp    the kernel's scalar parameters, in Kernel::params order, as 64-bit patterns: a double's
//         bits for float scalars, the value for integer and bool ones (no precision is lost)
//   bufs  one pointer per load, then one per store, each the address of its buffer's element 0;
//         a split reduction's two passes take one more, to split_scratch_bytes(kernel) of scratch
//
// Rows of a CUDA row kernel are reduced by a block of kCudaBlock threads.
inline constexpr int kCudaBlock = 256;

}  // namespace loom::fusion
