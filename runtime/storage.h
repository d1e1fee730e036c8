// Storage: a reference-counted run of bytes on one device.
//
// Tensors and views point into a Storage; it owns the memory, either a block of loom's caching
// allocator or memory lent by someone else (a numpy array, a DLPack producer), which is handed
// back through the lender's release function when the last reference goes.
//
// Version counters, which autograd uses to detect writes to saved values, belong to tensors and
// their views, not to storage (lazy/version_counter.h): `.data` shares storage but not the
// counter.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/ref.h"

namespace loom {

class Storage final : public RefCounted {
 public:
  using ReleaseFn = void (*)(void* context) noexcept;

  // nbytes from the device's caching allocator, under the current PoolScope if any.
  static Ref<Storage> allocate(size_t nbytes, Device device);
  // Memory owned elsewhere; release(context) runs when the last reference goes.
  static Ref<Storage> wrap(void* data, size_t nbytes, Device device, ReleaseFn release, void* context);

  ~Storage();

  void* data() const noexcept { return data_; }
  size_t nbytes() const noexcept { return nbytes_; }
  Device device() const noexcept { return device_; }
  // True when loom's allocator owns the memory (false for wrapped numpy / DLPack memory).
  bool owned() const noexcept { return block_ != nullptr; }

  // Lazy in-place ops that will write into this storage at the next sync. While non-zero, a lazy
  // read of the storage through another tensor must sync first to see the write.
  int32_t pending_writes() const noexcept { return pending_writes_; }
  void add_pending_write() noexcept { ++pending_writes_; }
  void remove_pending_write() noexcept { --pending_writes_; }

 private:
  Storage() = default;

  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  int32_t pending_writes_ = 0;
  // Exactly one of these owns data_.
  CachingAllocator* allocator_ = nullptr;
  CachingAllocator::Block* block_ = nullptr;
  ReleaseFn release_ = nullptr;
  void* release_context_ = nullptr;
};

}  // namespace loom
