// FlatIndex: the hash index a sync builds over a trace's nodes while it interns them
// (TraceBuilder, lazy/sync.cpp) and over its leaves' storages (trace_key): from a 64-bit key to
// small integers, several values per key allowed, in one open-addressed block.
//
// A sync indexes every node it records (hundreds per training step, every step); a node-based
// std::unordered_multimap made one allocation per node (with the trace's growing vectors, 365 of
// the 961 allocations of a lazy mlp training step).
// This table makes one, grows by doubling at half full, and never erases (a trace only grows).
//
// Reuse (ScratchIndex below): a table of one sync is empty again in O(1) for the next, by a
// generation number per slot: a slot holds an entry only when its generation is the table's.
// Making a fresh table per sync cost a lazy mlp step about 30 k instructions (a 16 KiB block from
// malloc's slow path, and every slot written empty) for a table the next sync needs again.
//
// Keys must be hashes (runtime/hash.h): the table uses their low bits as they are. Values under
// one key are offered to find() in no particular order; callers that need one answer per key add
// a value only when find() accepted none.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace loom {

class FlatIndex {
 public:
  // Room for about `expected` entries before the first growth.
  explicit FlatIndex(size_t expected = 64) { slots_.resize(capacity_for(expected)); }

  // Empties the table, keeping its block when it has room for about `expected` entries and is not
  // much bigger than that needs (one huge trace must not keep its table for the thread's life).
  void reset(size_t expected) {
    size_t want = capacity_for(expected);
    size_ = 0;
    if (slots_.size() < want || slots_.size() > 16 * want) {
      std::vector<Slot>(want).swap(slots_);
      generation_ = 1;
      return;
    }
    if (++generation_ == 0) {  // wrapped: older entries could look current again
      std::fill(slots_.begin(), slots_.end(), Slot{});
      generation_ = 1;
    }
  }

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
      if (s.generation != generation_) return -1;
      if (s.key == key && fn(s.value)) return s.value;
    }
  }

  size_t size() const noexcept { return size_; }

 private:
  struct Slot {
    uint64_t key = 0;
    int32_t value = -1;
    uint32_t generation = 0;  // the entry is current when equal to the table's (never 0)
  };

  static size_t capacity_for(size_t entries) {
    size_t c = 16;
    while (c < 2 * entries) c *= 2;
    return c;
  }

  void place(uint64_t key, int32_t value) {
    size_t mask = slots_.size() - 1;
    size_t i = key & mask;
    while (slots_[i].generation == generation_) i = (i + 1) & mask;
    slots_[i] = Slot{key, value, generation_};
  }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    uint32_t current = generation_;
    generation_ = 1;  // the new block is all empty (generation 0)
    for (const Slot& s : old)
      if (s.generation == current) place(s.key, s.value);
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
  uint32_t generation_ = 1;
};

// A FlatIndex for the time of one trace build or key, reset for `expected` entries: the calling
// thread's kept table (one per `Tag`) when it is free, else a new one (a build inside a build:
// not done today, but then correct, not shared).
template <typename Tag>
class ScratchIndex {
 public:
  explicit ScratchIndex(size_t expected) {
    Kept& k = kept();
    if (!k.busy) {
      k.busy = true;
      index_ = &k.index;
      index_->reset(expected);
    } else {
      index_ = &own_.emplace(expected);
    }
  }
  ~ScratchIndex() {
    if (!own_) kept().busy = false;
  }
  ScratchIndex(const ScratchIndex&) = delete;
  ScratchIndex& operator=(const ScratchIndex&) = delete;

  FlatIndex& operator*() noexcept { return *index_; }
  FlatIndex* operator->() noexcept { return index_; }

 private:
  struct Kept {
    FlatIndex index;
    bool busy = false;
  };
  static Kept& kept() {
    thread_local Kept k;
    return k;
  }
  FlatIndex* index_;
  std::optional<FlatIndex> own_;  // the new table, when the kept one is in use
};

}  // namespace loom
