// One eager op as a trace of its own: leaves for its operands (arrays become Input leaves,
// numbers Scalar leaves, never folded constants, so every value reuses the same plan) and the
// op's node, its only output. The CUDA executor runs eager GPU ops this way (DESIGN decision 11:
// one kernel per op), through the same plan cache as lazy traces (graph/plan_cache.h): an op on
// operands of a description seen before reuses its plan and compiles nothing, and its plans are
// evicted under the cache's bounds like any other.
#pragma once

#include <span>
#include <vector>

#include "lazy/executor.h"

namespace loom::graph {

struct OpTrace {
  std::vector<Ref<Node>> nodes;  // own the trace's nodes (the trace borrows them)
  Trace trace;
};

OpTrace op_trace(OpId op, std::span<const Operand> inputs, const Attrs& attrs, const OutputMeta& meta, Device device);

}  // namespace loom::graph
