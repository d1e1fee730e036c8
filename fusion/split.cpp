// Split reductions: the helpers the partitioner, the renderer and the executors share
// (program.h, Kernel::split_block).
#include <algorithm>

#include "fusion/program.h"

namespace loom::fusion {

bool written_after_reduction(const Store& s) {
  return std::ranges::all_of(s.access.strides, [](int64_t st) { return st == 0; });
}

int64_t split_scratch_bytes(const Kernel& k) {
  if (k.split_block <= 0) return 0;
  int64_t blocks = (numel_of(k.outer) + k.split_block - 1) / k.split_block;
  return std::max<int64_t>(blocks, 1) * 8 * static_cast<int64_t>(k.stages.size());
}

}  // namespace loom::fusion
