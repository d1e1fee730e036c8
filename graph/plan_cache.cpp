#include "graph/plan_cache.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "runtime/environment.h"
#include "runtime/error.h"
#include "runtime/hash.h"
#include "runtime/metrics.h"

namespace loom::graph {
namespace {

constexpr int64_t kDefaultMegabytes = 1024;
constexpr int64_t kDefaultEntries = 512;
constexpr int64_t kMaxMegabytes = int64_t{1} << 40;  // keeps bytes = MiB << 20 in range

// A non-negative integer knob of the environment, or `fallback` when it is unset or empty.
int64_t knob(const char* name, int64_t fallback, int64_t max) {
  std::string text = environment_value(name);
  if (text.empty()) return fallback;
  const char* v = text.c_str();
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v, &end, 10);
  LOOM_CHECK(errno == 0 && end != v && *end == '\0' && n >= 0 && n <= max, Value, name,
             " must be a non-negative integer (at most ", max, "), got '", v, "'");
  return n;
}

uint32_t device_slot(Device d) noexcept {
  return (static_cast<uint32_t>(d.type) << 16) | static_cast<uint16_t>(d.index);
}

}  // namespace

PlanCache::Limits PlanCache::limits_from_environment() {
  return {knob("LOOM_PLAN_CACHE_MB", kDefaultMegabytes, kMaxMegabytes) << 20,
          knob("LOOM_PLAN_CACHE_ENTRIES", kDefaultEntries, INT64_MAX)};
}

PlanCache::Owner PlanCache::new_owner() noexcept {
  static std::atomic<Owner> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

size_t PlanCache::IdHash::operator()(const Id& id) const noexcept { return hash_combine(id.owner, id.key); }

PlanCache::PlanCache(Limits limits) : limits_(limits) {}

PlanCache& plan_cache() {
  static PlanCache* cache = new PlanCache(PlanCache::limits_from_environment());  // never destroyed
  return *cache;
}

PlanMemory::PlanMemory(Device device) : allocator_(allocator_for(device)), pool_(allocator_.create_pool()) {}

PlanMemory::~PlanMemory() { allocator_.release_pool(pool_); }

Array PlanMemory::allocate(IntSpan sizes, DType dtype) {
  PoolScope scope(allocator_, pool_);
  return empty(sizes, dtype, allocator_.device());
}

int64_t PlanMemory::bytes() const { return allocator_.pool_stats(pool_).reserved_bytes; }

std::shared_ptr<CachedPlan> PlanCache::find(Owner owner, uint64_t key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(Id{owner, key});
  if (it == index_.end()) {
    count(metrics().graph_cache_misses);
    return nullptr;
  }
  count(metrics().graph_cache_hits);
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->plan;
}

std::shared_ptr<CachedPlan> PlanCache::insert(Owner owner, uint64_t key, Device device, Lowered lowered,
                                              std::vector<std::shared_ptr<CachedPlan>>& evicted) {
  LOOM_CHECK(lowered.plan, Runtime, "internal: an executor lowered a trace into no plan");
  std::lock_guard lock(mu_);
  auto [it, fresh] = index_.try_emplace(Id{owner, key});
  if (!fresh) {
    // Another thread lowered the same trace first: run its plan, drop ours (after the lock).
    evicted.push_back(std::move(lowered.plan));
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->plan;
  }
  lru_.push_front(Entry{owner, key, device, lowered.bytes, std::move(lowered.plan)});
  it->second = lru_.begin();
  device_bytes_locked(device) += lowered.bytes;
  bytes_ += lowered.bytes;
  evict_locked(&lru_.front(), evicted);
  publish_locked();
  return lru_.front().plan;
}

int64_t& PlanCache::device_bytes_locked(Device device) { return device_bytes_[device_slot(device)]; }

bool PlanCache::over_locked(Device device) {
  return static_cast<int64_t>(lru_.size()) > limits_.entries || device_bytes_locked(device) > limits_.bytes_per_device;
}

void PlanCache::erase_locked(std::list<Entry>::iterator it, std::vector<std::shared_ptr<CachedPlan>>& evicted) {
  device_bytes_locked(it->device) -= it->bytes;
  bytes_ -= it->bytes;
  index_.erase(Id{it->owner, it->key});
  evicted.push_back(std::move(it->plan));
  lru_.erase(it);
}

void PlanCache::evict_locked(const Entry* keep, std::vector<std::shared_ptr<CachedPlan>>& evicted) {
  // From the least recently used: an entry goes while a bound it counts toward is exceeded (the
  // number of entries, or the bytes of its device).
  for (auto it = lru_.end(); it != lru_.begin();) {
    --it;
    if (&*it == keep || !over_locked(it->device)) continue;
    auto newer = std::next(it);
    erase_locked(it, evicted);
    count(metrics().plan_cache_evictions);
    it = newer;
  }
}

void PlanCache::publish_locked() const {
  metrics().plan_cache_entries.store(static_cast<int64_t>(lru_.size()), std::memory_order_relaxed);
  metrics().plan_cache_bytes.store(bytes_, std::memory_order_relaxed);
}

void PlanCache::clear() {
  std::vector<std::shared_ptr<CachedPlan>> dropped;
  {
    std::lock_guard lock(mu_);
    dropped.reserve(lru_.size());
    for (Entry& e : lru_) dropped.push_back(std::move(e.plan));
    lru_.clear();
    index_.clear();
    device_bytes_.clear();
    bytes_ = 0;
    publish_locked();
  }
}

PlanCache::Limits PlanCache::limits() const {
  std::lock_guard lock(mu_);
  return limits_;
}

void PlanCache::set_limits(Limits limits) {
  LOOM_CHECK(limits.bytes_per_device >= 0 && limits.entries >= 0, Value,
             "plan cache limits must be non-negative, got ", limits.bytes_per_device, " bytes and ", limits.entries,
             " entries");
  std::vector<std::shared_ptr<CachedPlan>> evicted;
  {
    std::lock_guard lock(mu_);
    limits_ = limits;
    evict_locked(nullptr, evicted);
    publish_locked();
  }
}

}  // namespace loom::graph
