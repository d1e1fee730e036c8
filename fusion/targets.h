// What the C++ and CUDA renderings of a kernel differ in, as data (tinygrad-style tables).
#pragma once

#include <string>

#include "fusion/expr.h"
#include "fusion/render.h"

namespace loom::fusion {

struct TargetTable {
  TargetKind kind;
  const char* prelude;          // header-free helper definitions, compiled before the kernels
  const char* kernel_decl;      // the declaration prefix of a kernel
  const char* float_acc;        // accumulator of float32 sums and products
  // The C code of a math function call; %a and %b are the operands.
  std::string call(Fn fn, DType type) const;
};

const TargetTable& target_table(TargetKind kind);

// Whether a call of fn costs far more than reading its result back from L1 (a transcendental:
// tens of instructions per element, on both targets); the same table as the calls' names.
bool costly(Fn fn);

// C type names of compute and storage types.
const char* compute_ctype(DType t);
const char* storage_ctype(DType t);

}  // namespace loom::fusion
