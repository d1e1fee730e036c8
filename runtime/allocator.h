// The caching allocator: one per device, over a MemoryBackend that talks to the system.
//
// Why: asking the system (malloc, cudaMalloc) for memory costs microseconds, and on a GPU it
// synchronizes the device. A training step frees and re-allocates the same sizes every
// iteration, so freed blocks go to a free list keyed by size class and are handed out again
// without a system call. Memory only goes back to the system on empty_cache() or when a
// private pool is released.
//
// Size classes: requests round up to 64 bytes, then to one of four steps per power of two
// (e.g. 1024, 1280, 1536, 1792, 2048), so a free block of a class serves any request of that class
// and no block is ever split. Waste is under 25% of a request, and lookup is O(1).
//
// Private pools (DESIGN decision 9): a graph allocates its intermediates under its own pool id.
// Blocks of a pool are reused only by allocations under that pool, and stay reserved while the
// pool lives (a cached graph replays into the same addresses). release_pool() returns the pool's
// free blocks to the system at once and its live blocks when they are freed.
//
// Graph capture (CaptureGuard, below): while a thread records a CUDA Graph, its allocations
// raise and no memory goes back to the system; frees wait until the last capture has ended.
//
// Thread safety: all members may be called from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/device.h"

namespace loom {

using PoolId = uint64_t;
inline constexpr PoolId kDefaultPool = 0;

struct MemoryStats {
  int64_t allocated_bytes = 0;   // in blocks handed out and not yet freed (rounded sizes)
  int64_t requested_bytes = 0;   // what callers asked for, of those blocks
  int64_t reserved_bytes = 0;    // held from the system: allocated + cached in free lists
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t active_blocks = 0;     // blocks handed out and not yet freed
  int64_t num_allocations = 0;   // allocate() calls
  int64_t num_cache_hits = 0;    // allocate() calls served from a free list
  int64_t num_system_allocations = 0;
  int64_t num_system_frees = 0;
};

// Raw memory of one device. Implementations: host memory (runtime/host_memory.cpp) and
// cudaMalloc (runtime/cuda/cuda_memory.cpp).
class MemoryBackend {
 public:
  virtual ~MemoryBackend() = default;
  virtual Device device() const = 0;
  // Returns nullptr when the system is out of memory; the allocator then frees its cache and
  // retries once before raising.
  virtual void* allocate(size_t nbytes) = 0;
  virtual void free(void* ptr, size_t nbytes) noexcept = 0;
  // Asks the system to take back what free() left with the process (the C heap keeps freed
  // memory for later mallocs): empty_cache() calls it. The default does nothing.
  virtual void trim() noexcept {}
};

std::unique_ptr<MemoryBackend> make_host_memory_backend();

class CachingAllocator {
 public:
  struct Block;  // defined in allocator.cpp; callers hold it only to give it back

  struct Allocation {
    void* ptr;
    Block* block;
  };

  explicit CachingAllocator(std::unique_ptr<MemoryBackend> backend);
  // Returns every cached block to the system. Blocks still handed out are leaked (and counted by
  // stats); owners must free before the allocator goes.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // From the pool of this thread's innermost PoolScope on this allocator, else the default pool.
  Allocation allocate(size_t nbytes);
  Allocation allocate(size_t nbytes, PoolId pool);
  void free(Block* block) noexcept;

  PoolId create_pool();
  void release_pool(PoolId pool);
  // Returns the free blocks of the default pool to the system (and has the backend trim what its
  // system allocator still keeps). Private pools keep theirs; a cached plan's arena is in use
  // until the plan is evicted (graph/plan_cache.h).
  void empty_cache();

  MemoryStats stats() const;
  // Statistics of one pool: allocated/requested/reserved/active of its blocks only.
  MemoryStats pool_stats(PoolId pool) const;
  void reset_peak_stats();
  Device device() const;

  static size_t round_size(size_t nbytes) noexcept;

 private:
  friend class CaptureGuard;
  struct Pool;
  Pool& pool_locked(PoolId id);
  void release_cached_locked(Pool& pool);
  void* system_allocate_locked(size_t size);
  void system_free_locked(void* ptr, size_t size);
  void end_capture();

  std::unique_ptr<MemoryBackend> backend_;
  mutable std::mutex mu_;
  std::unordered_map<PoolId, std::unique_ptr<Pool>> pools_;
  PoolId next_pool_ = 1;
  MemoryStats stats_;
  int captures_ = 0;  // CaptureGuards alive on any thread
  struct Deferred {
    void* ptr;
    size_t size;
  };
  std::vector<Deferred> deferred_frees_;  // system frees that waited for the captures to end
};

// While alive, allocations on this thread from `allocator` that name no pool go to `pool`.
// Scopes nest; graph capture opens one around the program it records.
class PoolScope {
 public:
  PoolScope(CachingAllocator& allocator, PoolId pool);
  ~PoolScope();
  PoolScope(const PoolScope&) = delete;
  PoolScope& operator=(const PoolScope&) = delete;
};

// While alive, this thread records a CUDA Graph on the allocator's device (graph/cuda_executor.cpp
// and its host emulator). A graph replays fixed addresses, so a plan allocates all its memory
// before its capture: an allocation from this allocator on this thread raises, naming the step
// being recorded (set_step). And returning memory to the system (cudaFree) during a capture is
// illegal and would break it, whichever thread does it: until the last guard of the allocator
// ends, blocks that would go back (a released pool's, empty_cache's) wait in a list, and the
// out-of-memory retry that frees the cache is not tried. Construct it before the capture begins
// and let it end after the capture has ended (cudaStreamEndCapture), also when the capture failed.
class CaptureGuard {
 public:
  CaptureGuard(CachingAllocator& allocator, std::string what);
  ~CaptureGuard();
  CaptureGuard(const CaptureGuard&) = delete;
  CaptureGuard& operator=(const CaptureGuard&) = delete;
  // What the capture records now (a kernel and its op), for the error an allocation raises.
  void set_step(const std::string& step) { step_ = &step; }

 private:
  friend class CachingAllocator;
  CachingAllocator& allocator_;
  std::string what_;
  const std::string* step_ = nullptr;
};

// The process-wide allocator of a device, created on first use. Throws if the device does not
// exist (no GPU, ordinal out of range).
CachingAllocator& allocator_for(Device device);

// No device has 2^60 bytes: a larger request fails at once with the allocator's out-of-memory
// error (also what keeps the size-class arithmetic from overflowing). Lazy mode checks every op's
// result against it when the op is recorded (runtime/array.h check_allocatable).
void check_allocation_size(size_t nbytes, Device device);

}  // namespace loom
