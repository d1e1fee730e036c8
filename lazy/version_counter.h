// PyTorch's version counter: how many in-place writes a tensor's data has seen (Tensor._version).
//
// One counter is shared by a tensor, its views and its detach()es, because they are the same data:
// a write through any of them changes what the others hold. `.data` gets a counter of its own (as
// in PyTorch), which is how writes through it escape autograd's checks on purpose.
//
// Autograd reads it twice: a saved value remembers the version it was saved at and refuses to be
// used after a write (the "modified by an inplace operation" error), and a view whose counter moved
// since its grad_fn was made re-derives its grad_fn from its base's (lazy/autograd_inplace.cpp).
//
// Counters are made on first use (a write, a save, a detach()), never for every tensor: most
// tensors are neither written in place nor saved. How views find the counter of their base
// without making it when they are made is TensorImpl's business (lazy/tensor.h).
#pragma once

#include <cstdint>

#include "runtime/ref.h"

namespace loom {

struct VersionCounter final : RefCounted {
  uint64_t value = 0;
  // The data is the same at every version from this one to `value`: a value saved at any of them
  // is still current. Equal to `value` except after a failed sync undid pending writes (lazy/
  // sync.h): the data is then back to what it was at an earlier version, and what was saved since
  // that version still holds (the counter never goes back, so a later write can never make a
  // stale save look current).
  uint64_t same_since = 0;

  // One user-visible in-place op happened.
  void bump() noexcept { same_since = ++value; }
  // The writes since `version` were undone (the data is as it was at `version`).
  void undo_writes_since(uint64_t version) noexcept {
    ++value;  // views re-derive their history (lazy/autograd_inplace.cpp)
    if (version < same_since) same_since = version;
  }
  // Whether a value saved at `version` is still current.
  bool current(uint64_t version) const noexcept { return version >= same_since && version <= value; }
};

}  // namespace loom
