// What the CPU and CUDA executors do alike around a run: key and partition a trace, turn the
// program's buffers into arrays (inputs as given, outputs in fresh storage, intermediates in the
// arena) and the trace's outputs into result arrays.
#pragma once

#include <vector>

#include "fusion/program.h"
#include "graph/memory_plan.h"

namespace loom::graph {

// An executor's cache key for a trace: the trace key, plus the exact strides of strided inputs
// (the trace key only says "not contiguous"; kernels index them with the real strides).
uint64_t plan_key(const Trace& trace);

// Marks the buffer of every output that is still an Intermediate an Output: fresh storage at
// every run, never the arena. (In-place results an executor writes straight into their
// destination are Destination buffers, left as they are.)
void mark_outputs(fusion::Program& program, const Trace& trace);

// The trace partitioned (fusion/program.h), outputs marked.
fusion::Program partition_for_run(const Trace& trace, bool fuse);

// One array per buffer of the program; Destination buffers are left unbound (the executor binds
// them to their destination). Fresh outputs come from the device's default pool, so a run never
// writes memory a live tensor holds (DESIGN decision 9).
std::vector<Array> bind_buffers(const fusion::Program& program, const Trace& trace, const MemoryPlan& memory,
                                const Array& arena);

// The result of each output of the trace, in order: its destination for in-place outputs (the
// caller writes it back), the buffer's own fresh array for plain outputs, and a copy where an
// output would otherwise alias an input or another output.
std::vector<Array> collect_results(const fusion::Program& program, const Trace& trace, const std::vector<Array>& arrays);

// collect_results in two halves, for an executor that allocates nothing once it has written a
// destination (graph/compiled.cpp): plan_results, before the run, picks the results and
// allocates the copies; fill_results, after it, fills the copies.
struct ResultPlan {
  std::vector<Array> arrays;                        // per output
  std::vector<std::pair<int32_t, size_t>> copies;  // (buffer, output): arrays[output] copies the buffer
};
ResultPlan plan_results(const fusion::Program& program, const Trace& trace, const std::vector<Array>& arrays);
void fill_results(const ResultPlan& results, const std::vector<Array>& arrays);

// Per output: whether its write-back must take its value aside first. In-place results are
// written back after every step, but a result that is a tensor read as it was, on a storage
// another in-place result is written into (a.copy_(x); x.add_(1)), would otherwise be read after
// that write. Which leaves share storage with which destinations is part of the trace key, so
// the answer holds for every run of a plan.
std::vector<bool> write_backs_to_take_aside(const fusion::Program& program, const Trace& trace);

}  // namespace loom::graph
