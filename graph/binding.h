// What the CPU and CUDA executors do alike around a run: turn a program's buffers into arrays
// (inputs as given, outputs in fresh storage, intermediates in the arena) and the trace's
// outputs into result arrays.
#pragma once

#include <vector>

#include "fusion/program.h"
#include "graph/memory_plan.h"

namespace loom::graph {

// One array per buffer of the program. Fresh outputs come from the device's default pool, so a
// run never writes memory a live tensor holds (DESIGN decision 9).
std::vector<Array> bind_buffers(const fusion::Program& program, const Trace& trace, const MemoryPlan& memory,
                                const Array& arena);

// The result of each output of the trace, in order: its destination for in-place outputs (the
// caller writes it back), the buffer's own fresh array for plain outputs, and a copy where an
// output would otherwise alias an input or another output.
std::vector<Array> collect_results(const fusion::Program& program, const Trace& trace, const std::vector<Array>& arrays);

}  // namespace loom::graph
