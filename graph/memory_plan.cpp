#include "graph/memory_plan.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <map>

namespace loom::graph {
namespace {

int64_t aligned(int64_t bytes) { return (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }

// The last step that reads or writes each buffer, to know when it dies.
std::vector<int32_t> last_use(const fusion::Program& p) {
  std::vector<int32_t> last(p.buffers.size(), -1);
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const fusion::Step& step = p.steps[s];
    auto use = [&](int32_t value) {
      int32_t b = p.buffer_of[value];
      if (b >= 0) last[b] = static_cast<int32_t>(s);
    };
    if (step.kind == fusion::Step::RunKernel) {
      for (const fusion::Load& l : p.kernels[step.kernel].loads) use(l.access.value);
      for (const fusion::Store& st : p.kernels[step.kernel].stores) use(st.access.value);
    } else {
      use(step.node);
      for (const fusion::Operand& o : step.operands) use(o.value);
    }
  }
  return last;
}

// The first step that writes each buffer.
std::vector<int32_t> first_use(const fusion::Program& p) {
  std::vector<int32_t> first(p.buffers.size(), INT32_MAX);
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const fusion::Step& step = p.steps[s];
    auto use = [&](int32_t value) {
      int32_t b = p.buffer_of[value];
      if (b >= 0) first[b] = std::min(first[b], static_cast<int32_t>(s));
    };
    if (step.kind == fusion::Step::RunKernel) {
      for (const fusion::Store& st : p.kernels[step.kernel].stores) use(st.access.value);
    } else if (step.kind == fusion::Step::RunOp) {
      use(step.node);
    }
  }
  return first;
}

// The placed buffers, found by the steps they are alive in: a segment tree over the steps whose
// nodes list the lifetimes covering them (stabbing queries), and the lifetimes by first step.
// Finding the buffers alive with one then costs their number and a logarithm, not a scan of
// every placed buffer (which made planning a trace of 100k steps take seconds).
class Lifetimes {
 public:
  explicit Lifetimes(size_t steps) : leaves_(std::bit_ceil(std::max<size_t>(steps, 1))), cover_(2 * leaves_) {}

  void add(int32_t id, int32_t first, int32_t last) {
    if (first > last) return;  // never alive: overlaps nothing
    by_first_.emplace(first, id);
    for (size_t lo = leaves_ + static_cast<size_t>(first), hi = leaves_ + static_cast<size_t>(last) + 1; lo < hi;
         lo >>= 1, hi >>= 1) {
      if (lo & 1) cover_[lo++].push_back(id);
      if (hi & 1) cover_[--hi].push_back(id);
    }
  }

  // Calls fn(id) once for every lifetime added that shares a step with [first, last]: those
  // alive at `first`, and those starting after it, up to `last`.
  template <typename Fn>
  void overlapping(int32_t first, int32_t last, Fn&& fn) const {
    if (first > last) return;
    for (size_t node = leaves_ + static_cast<size_t>(first); node >= 1; node >>= 1)
      for (int32_t id : cover_[node]) fn(id);
    for (auto it = by_first_.upper_bound(first); it != by_first_.end() && it->first <= last; ++it) fn(it->second);
  }

 private:
  size_t leaves_;
  std::vector<std::vector<int32_t>> cover_;
  std::multimap<int32_t, int32_t> by_first_;
};

}  // namespace

int64_t buffer_bytes(const fusion::Buffer& b) {
  return std::max<int64_t>(b.layout.storage_end(), 0) * static_cast<int64_t>(itemsize(b.dtype));
}

MemoryPlan plan_memory(const fusion::Program& p) {
  std::vector<int32_t> first = first_use(p), last = last_use(p);
  MemoryPlan plan;
  plan.offset.assign(p.buffers.size(), -1);
  std::vector<int32_t> order;
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].kind == fusion::BufferKind::Intermediate) order.push_back(static_cast<int32_t>(b));
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return buffer_bytes(p.buffers[a]) > buffer_bytes(p.buffers[b]); });
  struct Placed {
    int64_t begin, end;
  };
  std::vector<Placed> placed;
  Lifetimes alive(p.steps.size());
  int64_t total = 0;
  std::vector<std::pair<int64_t, int64_t>> busy;
  for (int32_t b : order) {
    int64_t size = aligned(buffer_bytes(p.buffers[b]));
    busy.clear();
    alive.overlapping(first[b], last[b], [&](int32_t q) { busy.push_back({placed[q].begin, placed[q].end}); });
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (auto [lo, hi] : busy) {
      if (at + size <= lo) break;
      at = std::max(at, hi);
    }
    plan.offset[b] = at;
    alive.add(static_cast<int32_t>(placed.size()), first[b], last[b]);
    placed.push_back({at, at + size});
    total = std::max(total, at + size);
  }
  plan.arena_bytes = std::max<int64_t>(total, kArenaAlign);
  // The floor: bytes alive at each step, summed from each buffer's first to its last step.
  std::vector<int64_t> delta(p.steps.size() + 1, 0);
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    if (p.buffers[b].kind != fusion::BufferKind::Intermediate || first[b] == INT32_MAX) continue;
    int64_t size = aligned(buffer_bytes(p.buffers[b]));
    delta[first[b]] += size;
    delta[std::max(first[b], last[b]) + 1] -= size;
  }
  int64_t live = 0;
  for (int64_t d : delta) plan.live_peak = std::max(plan.live_peak, live += d);
  return plan;
}

}  // namespace loom::graph
