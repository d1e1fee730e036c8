// The memory plan of a program (fusion/program.h): where its intermediates live, shared by the
// CPU and CUDA executors.
//
// Intermediates share one arena: a buffer takes memory that every buffer alive while it is (from
// the step that first writes it to the last step that touches it) leaves free, placing the
// largest first, at the lowest fitting offset (first fit). Offsets are multiples of kArenaAlign,
// so every buffer's element 0 is as aligned as the arena (vector loads, cuBLAS).
#pragma once

#include <cstdint>
#include <vector>

#include "fusion/program.h"

namespace loom::graph {

inline constexpr int64_t kArenaAlign = 64;

struct MemoryPlan {
  std::vector<int64_t> offset;  // per buffer: its byte offset in the arena, -1 when not in it
  int64_t arena_bytes = 0;      // at least kArenaAlign: every intermediate needs storage to point into
  int64_t live_peak = 0;        // the most bytes of intermediates alive at one step (what any plan needs)
};

MemoryPlan plan_memory(const fusion::Program& program);

// Bytes of a buffer: every element its layout addresses.
int64_t buffer_bytes(const fusion::Buffer& buffer);

}  // namespace loom::graph
