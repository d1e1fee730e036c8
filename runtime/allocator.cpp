#include "runtime/allocator.h"

#include <bit>
#include <cstdio>
#include <string>

#include "runtime/error.h"

namespace loom {

namespace {

constexpr size_t kMinBlock = 64;
// Class index of a rounded size: 0 for 64 bytes, then (k - 6) * 4 + step for sizes in
// (2^k, 2^(k+1)]. Sizes up to 2^63 fit in 4 * 58 + 1 slots.
constexpr size_t kNumClasses = 4 * 58 + 1;

size_t class_index(size_t rounded) noexcept {
  if (rounded <= kMinBlock) return 0;
  unsigned k = std::bit_width(rounded - 1) - 1;  // 2^k < rounded <= 2^(k+1)
  size_t step = size_t{1} << (k - 2);
  return (k - 6) * 4 + (rounded - (size_t{1} << k)) / step;
}

std::string format_bytes(int64_t n) {
  char buf[32];
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(n));
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

struct ScopeEntry {
  const CachingAllocator* allocator;
  PoolId pool;
};
thread_local std::vector<ScopeEntry> pool_scopes;
thread_local std::vector<const CaptureGuard*> capture_guards;  // this thread's, innermost last

}  // namespace

struct CachingAllocator::Block {
  void* ptr;
  size_t size;       // rounded size, what the system gave
  size_t requested;  // what the current owner asked for
  Pool* pool;
  Block* next_free;  // free-list link while cached: freeing never allocates
};

struct CachingAllocator::Pool {
  PoolId id;
  bool released = false;
  MemoryStats stats;  // the per-pool subset: allocated, requested, reserved, active
  std::array<Block*, kNumClasses> free{};  // singly linked lists of cached blocks, per size class
};

size_t CachingAllocator::round_size(size_t nbytes) noexcept {
  if (nbytes <= kMinBlock) return kMinBlock;
  unsigned k = std::bit_width(nbytes - 1) - 1;
  // Steps below 64 bytes would break host alignment; small classes just merge.
  size_t step = std::max(kMinBlock, size_t{1} << (k - 2));
  return (nbytes + step - 1) / step * step;
}

CachingAllocator::CachingAllocator(std::unique_ptr<MemoryBackend> backend) : backend_(std::move(backend)) {
  auto pool = std::make_unique<Pool>();
  pool->id = kDefaultPool;
  pools_.emplace(kDefaultPool, std::move(pool));
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(mu_);
  for (auto& [id, pool] : pools_) release_cached_locked(*pool);
}

Device CachingAllocator::device() const { return backend_->device(); }

CachingAllocator::Pool& CachingAllocator::pool_locked(PoolId id) {
  auto it = pools_.find(id);
  LOOM_CHECK(it != pools_.end() && !it->second->released, Runtime, "memory pool ", id,
             " does not exist or was released");
  return *it->second;
}

void* CachingAllocator::system_allocate_locked(size_t size) {
  void* ptr = backend_->allocate(size);
  if (!ptr && captures_ == 0) {
    // Out of memory: give the cache of the default pool back and try once more (not while a
    // graph is captured: those frees would have to wait for its end, see CaptureGuard).
    release_cached_locked(*pools_.at(kDefaultPool));
    ptr = backend_->allocate(size);
  }
  LOOM_CHECK(ptr, OutOfMemory, "out of memory on ", device().str(), ": tried to allocate ",
             format_bytes(static_cast<int64_t>(size)), " (", format_bytes(stats_.allocated_bytes),
             " allocated, ", format_bytes(stats_.reserved_bytes), " reserved by loom",
             captures_ ? "; a CUDA Graph capture is underway, so cached blocks were not freed" : "", ")");
  stats_.num_system_allocations++;
  stats_.reserved_bytes += static_cast<int64_t>(size);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  return ptr;
}

void CachingAllocator::system_free_locked(void* ptr, size_t size) {
  if (captures_ > 0) {
    deferred_frees_.push_back({ptr, size});  // freed when the last capture ends
    return;
  }
  backend_->free(ptr, size);
  stats_.num_system_frees++;
  stats_.reserved_bytes -= static_cast<int64_t>(size);
}

void CachingAllocator::release_cached_locked(Pool& pool) {
  for (Block*& head : pool.free) {
    while (Block* b = head) {
      head = b->next_free;
      system_free_locked(b->ptr, b->size);
      pool.stats.reserved_bytes -= static_cast<int64_t>(b->size);
      delete b;
    }
  }
}

void check_allocation_size(size_t nbytes, Device device) {
  LOOM_CHECK(nbytes <= (size_t{1} << 60), OutOfMemory, "out of memory on ", device.str(), ": tried to allocate ",
             format_bytes(static_cast<int64_t>(nbytes)));
}

CachingAllocator::Allocation CachingAllocator::allocate(size_t nbytes) {
  for (auto it = pool_scopes.rbegin(); it != pool_scopes.rend(); ++it)
    if (it->allocator == this) return allocate(nbytes, it->pool);
  return allocate(nbytes, kDefaultPool);
}

CachingAllocator::Allocation CachingAllocator::allocate(size_t nbytes, PoolId pool_id) {
  check_allocation_size(nbytes, device());
  if (!capture_guards.empty()) [[unlikely]] {
    for (const CaptureGuard* g : capture_guards)
      LOOM_CHECK(&g->allocator_ != this, Runtime, "cannot allocate ", format_bytes(static_cast<int64_t>(nbytes)), " on ",
                 device().str(), " while capturing ", g->what_, g->step_ ? " (recording " + *g->step_ + ")" : "",
                 ": a CUDA Graph replays fixed addresses, so a plan allocates its memory before its capture");
  }
  size_t size = round_size(nbytes);
  std::lock_guard lock(mu_);
  Pool& pool = pool_locked(pool_id);
  Block*& head = pool.free[class_index(size)];
  Block* block;
  stats_.num_allocations++;
  if (head) {
    block = head;
    head = block->next_free;
    stats_.num_cache_hits++;
  } else {
    auto fresh = std::make_unique<Block>(Block{nullptr, size, 0, &pool, nullptr});
    fresh->ptr = system_allocate_locked(size);
    block = fresh.release();
    pool.stats.reserved_bytes += static_cast<int64_t>(size);
  }
  block->requested = nbytes;
  for (MemoryStats* s : {&stats_, &pool.stats}) {
    s->allocated_bytes += static_cast<int64_t>(size);
    s->requested_bytes += static_cast<int64_t>(nbytes);
    s->active_blocks++;
  }
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return {block->ptr, block};
}

void CachingAllocator::free(Block* block) noexcept {
  std::lock_guard lock(mu_);
  Pool& pool = *block->pool;
  for (MemoryStats* s : {&stats_, &pool.stats}) {
    s->allocated_bytes -= static_cast<int64_t>(block->size);
    s->requested_bytes -= static_cast<int64_t>(block->requested);
    s->active_blocks--;
  }
  if (!pool.released) {
    Block*& head = pool.free[class_index(block->size)];
    block->next_free = head;
    head = block;
    return;
  }
  system_free_locked(block->ptr, block->size);
  pool.stats.reserved_bytes -= static_cast<int64_t>(block->size);
  delete block;
  if (pool.stats.active_blocks == 0) pools_.erase(pool.id);
}

PoolId CachingAllocator::create_pool() {
  std::lock_guard lock(mu_);
  auto pool = std::make_unique<Pool>();
  pool->id = next_pool_++;
  PoolId id = pool->id;
  pools_.emplace(id, std::move(pool));
  return id;
}

void CachingAllocator::release_pool(PoolId id) {
  LOOM_CHECK(id != kDefaultPool, Value, "the default memory pool cannot be released");
  std::lock_guard lock(mu_);
  Pool& pool = pool_locked(id);
  release_cached_locked(pool);
  pool.released = true;
  if (pool.stats.active_blocks == 0) pools_.erase(id);
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mu_);
  release_cached_locked(*pools_.at(kDefaultPool));
  backend_->trim();
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

MemoryStats CachingAllocator::pool_stats(PoolId id) const {
  std::lock_guard lock(mu_);
  auto it = pools_.find(id);
  LOOM_CHECK(it != pools_.end(), Runtime, "memory pool ", id, " does not exist");
  return it->second->stats;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

void CachingAllocator::end_capture() {
  std::lock_guard lock(mu_);
  if (--captures_ > 0) return;
  std::vector<Deferred> frees = std::move(deferred_frees_);
  deferred_frees_.clear();
  for (const Deferred& d : frees) system_free_locked(d.ptr, d.size);
}

CaptureGuard::CaptureGuard(CachingAllocator& allocator, std::string what)
    : allocator_(allocator), what_(std::move(what)) {
  {
    std::lock_guard lock(allocator_.mu_);
    ++allocator_.captures_;
  }
  capture_guards.push_back(this);
}

CaptureGuard::~CaptureGuard() {
  capture_guards.pop_back();
  allocator_.end_capture();
}

PoolScope::PoolScope(CachingAllocator& allocator, PoolId pool) { pool_scopes.push_back({&allocator, pool}); }
PoolScope::~PoolScope() { pool_scopes.pop_back(); }

}  // namespace loom
