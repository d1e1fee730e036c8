// FlatIndex: the hash index a sync builds over a trace's nodes while it interns them
// (TraceBuilder, lazy/sync.cpp) and over its leaves' storages (trace_key): from a 64-bit key to
// small integers, several values per key allowed, in one open-addressed block.
//
// A sync indexes every node it records (hundreds per training step, every step); a node-based
// std::unordered_multimap made one allocation per node (with the trace's growing vectors, 365 of
// the 961 allocations of a lazy mlp training step).
// This table makes one, grows by doubling at half full, and never erases (a trace only grows).
//
// Keys must be hashes (runtime/hash.h): the table uses their low bits as they are. Values under
// one key are offered to find() in no particular order; callers that need one answer per key add
// a value only when find() accepted none.
#pragma once

#include <cstdint>
#include <vector>

namespace loom {

class FlatIndex {
 public:
  // Room for about `expected` entries before the first growth.
  explicit FlatIndex(size_t expected = 64) { slots_.resize(capacity_for(expected)); }

  // Adds (key, value); value >= 0.
  void add(uint64_t key, int32_t value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    place(key, value);
    ++size_;
  }

  // Calls fn(value) for the values added under `key` (the full 64 bits) until fn returns true;
  // returns that value, or -1 when fn accepted none.
  template <typename Fn>
  int32_t find(uint64_t key, Fn&& fn) const {
    size_t mask = slots_.size() - 1;
    for (size_t i = key & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.value < 0) return -1;
      if (s.key == key && fn(s.value)) return s.value;
    }
  }

  size_t size() const noexcept { return size_; }

 private:
  struct Slot {
    uint64_t key = 0;
    int32_t value = -1;  // -1: empty
  };

  static size_t capacity_for(size_t entries) {
    size_t c = 16;
    while (c < 2 * entries) c *= 2;
    return c;
  }

  void place(uint64_t key, int32_t value) {
    size_t mask = slots_.size() - 1;
    size_t i = key & mask;
    while (slots_[i].value >= 0) i = (i + 1) & mask;
    slots_[i] = Slot{key, value};
  }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old)
      if (s.value >= 0) place(s.key, s.value);
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace loom
