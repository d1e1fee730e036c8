// The caching allocator: size classes, reuse, private pools, statistics, out-of-memory, and no
// leaks. Most cases run over a counting backend so system calls can be observed exactly.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <iterator>
#include <map>
#include <thread>

#include "runtime/allocator.h"
#include "runtime/error.h"

using namespace loom;

namespace {

// Host memory that counts what the allocator asks of the system and can be given a capacity.
struct CountingMemory final : MemoryBackend {
  size_t capacity;
  size_t* in_use;
  CountingMemory(size_t cap, size_t* counter) : capacity(cap), in_use(counter) {}
  Device device() const override { return kCPU; }
  void* allocate(size_t n) override {
    if (*in_use + n > capacity) return nullptr;
    *in_use += n;
    return std::malloc(n);
  }
  void free(void* p, size_t n) noexcept override {
    *in_use -= n;
    std::free(p);
  }
};

struct Fixture {
  size_t system_bytes = 0;
  CachingAllocator alloc{std::make_unique<CountingMemory>(size_t{1} << 30, &system_bytes)};
};

}  // namespace

BOOST_AUTO_TEST_SUITE(allocator)

BOOST_AUTO_TEST_CASE(size_classes) {
  BOOST_TEST(CachingAllocator::round_size(0) == 64u);
  BOOST_TEST(CachingAllocator::round_size(1) == 64u);
  BOOST_TEST(CachingAllocator::round_size(64) == 64u);
  BOOST_TEST(CachingAllocator::round_size(65) == 128u);
  BOOST_TEST(CachingAllocator::round_size(1025) == 1280u);
  BOOST_TEST(CachingAllocator::round_size(1 << 20) == size_t{1} << 20);
  for (size_t n = 1; n < (1u << 22); n = n * 5 / 4 + 7) {
    size_t r = CachingAllocator::round_size(n);
    BOOST_TEST_REQUIRE(r >= n);
    BOOST_TEST_REQUIRE(r % 64 == 0);
    BOOST_TEST_REQUIRE(r <= n + n / 4 + 64);  // waste bounded by a quarter (plus alignment)
    BOOST_TEST_REQUIRE(CachingAllocator::round_size(r) == r);
  }
}

BOOST_FIXTURE_TEST_CASE(reuses_freed_blocks, Fixture) {
  auto a = alloc.allocate(1000);
  void* p = a.ptr;
  alloc.free(a.block);
  auto b = alloc.allocate(1000);
  BOOST_TEST(b.ptr == p);
  auto c = alloc.allocate(900);  // same size class (1024): served by a new block, the old one is taken
  BOOST_TEST(c.ptr != p);
  alloc.free(b.block);
  alloc.free(c.block);
  auto d = alloc.allocate(1020);  // same class as 1000: a cached block
  BOOST_TEST((d.ptr == p || d.ptr == c.ptr));
  MemoryStats s = alloc.stats();
  BOOST_TEST(s.num_allocations == 4);
  BOOST_TEST(s.num_cache_hits == 2);
  BOOST_TEST(s.num_system_allocations == 2);
  alloc.free(d.block);
}

BOOST_FIXTURE_TEST_CASE(statistics_and_no_leaks, Fixture) {
  auto a = alloc.allocate(100);    // 128
  auto b = alloc.allocate(5000);   // 5120
  MemoryStats s = alloc.stats();
  BOOST_TEST(s.allocated_bytes == 128 + 5120);
  BOOST_TEST(s.requested_bytes == 100 + 5000);
  BOOST_TEST(s.reserved_bytes == 128 + 5120);
  BOOST_TEST(s.active_blocks == 2);
  alloc.free(a.block);
  s = alloc.stats();
  BOOST_TEST(s.allocated_bytes == 5120);
  BOOST_TEST(s.reserved_bytes == 128 + 5120);  // cached, not returned
  BOOST_TEST(s.peak_allocated_bytes == 128 + 5120);
  alloc.free(b.block);
  alloc.reset_peak_stats();
  BOOST_TEST(alloc.stats().peak_allocated_bytes == 0);
  BOOST_TEST(system_bytes == 128u + 5120u);
  alloc.empty_cache();
  s = alloc.stats();
  BOOST_TEST(s.allocated_bytes == 0);
  BOOST_TEST(s.reserved_bytes == 0);
  BOOST_TEST(s.active_blocks == 0);
  BOOST_TEST(s.num_system_frees == 2);
  BOOST_TEST(system_bytes == 0u);
}

BOOST_FIXTURE_TEST_CASE(private_pools_are_isolated, Fixture) {
  PoolId pool = alloc.create_pool();
  auto in_pool = alloc.allocate(4096, pool);
  void* pool_ptr = in_pool.ptr;
  alloc.free(in_pool.block);
  // The default pool never receives the pool's free block...
  auto outside = alloc.allocate(4096);
  BOOST_TEST(outside.ptr != pool_ptr);
  // ...and the pool gets it back.
  auto again = alloc.allocate(4096, pool);
  BOOST_TEST(again.ptr == pool_ptr);
  // A second pool is isolated from the first.
  PoolId other = alloc.create_pool();
  alloc.free(again.block);
  auto in_other = alloc.allocate(4096, other);
  BOOST_TEST(in_other.ptr != pool_ptr);
  BOOST_TEST(alloc.pool_stats(pool).reserved_bytes == 4096);
  BOOST_TEST(alloc.pool_stats(pool).allocated_bytes == 0);
  // empty_cache leaves private pools alone.
  alloc.free(outside.block);
  alloc.empty_cache();
  BOOST_TEST(alloc.pool_stats(pool).reserved_bytes == 4096);
  // Releasing returns cached blocks at once and live ones when freed.
  alloc.release_pool(pool);
  BOOST_CHECK_THROW(alloc.allocate(64, pool), Error);
  alloc.release_pool(other);
  BOOST_TEST(system_bytes == 4096u);  // in_other is still live
  alloc.free(in_other.block);
  BOOST_TEST(system_bytes == 0u);
  BOOST_TEST(alloc.stats().reserved_bytes == 0);
  BOOST_CHECK_THROW(alloc.pool_stats(other), Error);
  BOOST_CHECK_THROW(alloc.release_pool(kDefaultPool), Error);
}

BOOST_FIXTURE_TEST_CASE(pool_scope_routes_allocations, Fixture) {
  PoolId pool = alloc.create_pool();
  CachingAllocator::Allocation a{}, b{};
  {
    PoolScope scope(alloc, pool);
    a = alloc.allocate(256);
    {
      PoolScope inner(alloc, kDefaultPool);
      b = alloc.allocate(256);
    }
  }
  BOOST_TEST(alloc.pool_stats(pool).active_blocks == 1);
  BOOST_TEST(alloc.pool_stats(kDefaultPool).active_blocks == 1);
  // Another thread has no scope: its allocations go to the default pool.
  CachingAllocator::Allocation c{};
  {
    PoolScope scope(alloc, pool);
    std::thread([&] { c = alloc.allocate(256); }).join();
  }
  BOOST_TEST(alloc.pool_stats(kDefaultPool).active_blocks == 2);
  for (auto* x : {&a, &b, &c}) alloc.free(x->block);
  alloc.release_pool(pool);
}

BOOST_AUTO_TEST_CASE(out_of_memory_frees_cache_then_raises) {
  size_t system_bytes = 0;
  CachingAllocator alloc(std::make_unique<CountingMemory>(8192, &system_bytes));
  auto a = alloc.allocate(4096);
  alloc.free(a.block);  // cached: 4096 of the 8192 are held
  auto b = alloc.allocate(6000);  // needs the cache back to fit
  BOOST_TEST(alloc.stats().num_system_frees == 1);
  try {
    alloc.allocate(6000);
    BOOST_FAIL("expected out of memory");
  } catch (const Error& e) {
    BOOST_TEST((e.kind() == ErrorKind::OutOfMemory));
    BOOST_TEST(std::string(e.what()).find("out of memory on cpu") != std::string::npos);
  }
  // Absurd sizes are refused before any arithmetic on them can overflow.
  BOOST_CHECK_THROW(alloc.allocate(~size_t{0} - 5), Error);
  // The failures left the allocator consistent.
  BOOST_TEST(alloc.stats().active_blocks == 1);
  alloc.free(b.block);
  auto c = alloc.allocate(6000);
  alloc.free(c.block);
}

// A thread recording a CUDA Graph (CaptureGuard): its allocations raise, naming the capture and
// its step; other threads may allocate, but nothing goes back to the system (cudaFree would break
// the capture) until the capture ends, and out of memory does not empty the cache meanwhile.
BOOST_AUTO_TEST_CASE(capture_refuses_allocations_and_defers_frees) {
  size_t system_bytes = 0;
  CachingAllocator alloc(std::make_unique<CountingMemory>(size_t{1} << 16, &system_bytes));
  PoolId pool = alloc.create_pool();
  auto held = alloc.allocate(4096, pool);  // a plan's memory, allocated before its capture
  alloc.free(alloc.allocate(8192).block);  // cached in the default pool
  {
    CaptureGuard capture(alloc, "the CUDA Graph of trace 7");
    std::string step = "exp of node 3";
    capture.set_step(step);
    BOOST_CHECK_EXCEPTION(alloc.allocate(8192), Error, [](const Error& e) {
      return std::string(e.what()).find("cannot allocate 8.00 KiB on cpu while capturing the CUDA Graph of trace 7 "
                                        "(recording exp of node 3)") != std::string::npos;
    });
    std::string out_of_memory;  // what another thread's allocation raised (checked here: Boost.Test is not thread-safe)
    std::thread([&] {
      alloc.release_pool(pool);
      alloc.free(held.block);  // the released pool's last block: its system free waits
      try {
        alloc.allocate(size_t{1} << 16);  // needs the cached 8192 back, which may not go now
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::OutOfMemory) out_of_memory = e.what();
      }
    }).join();
    BOOST_TEST(out_of_memory.find("a CUDA Graph capture is underway") != std::string::npos, out_of_memory);
    BOOST_TEST(alloc.stats().num_system_frees == 0);
    BOOST_TEST(system_bytes == 4096u + 8192u);
  }
  BOOST_TEST(alloc.stats().num_system_frees == 1);  // the released pool's block, once the capture ended
  BOOST_TEST(system_bytes == 8192u);
  int64_t hits = alloc.stats().num_cache_hits;
  auto again = alloc.allocate(8192);  // the cache survived the out-of-memory during the capture
  BOOST_TEST(alloc.stats().num_cache_hits == hits + 1);
  alloc.free(again.block);
  {
    CaptureGuard capture(alloc, "another graph");
    alloc.empty_cache();
    BOOST_TEST(system_bytes == 8192u);
  }
  BOOST_TEST(system_bytes == 0u);
  BOOST_TEST(alloc.stats().reserved_bytes == 0);
}

BOOST_AUTO_TEST_CASE(host_allocator_alignment) {
  CachingAllocator& host = allocator_for(kCPU);
  const size_t sizes[] = {1, 3, 17, 64, 100, 1000, 4097, 1 << 16};
  for (size_t n : sizes) host.free(host.allocate(n).block);  // so that the blocks below come from the cache
  std::map<uintptr_t, size_t> live;  // start address -> requested size, of blocks held at once
  std::vector<CachingAllocator::Block*> blocks;
  for (size_t n : sizes) {
    auto a = host.allocate(n);
    auto start = reinterpret_cast<uintptr_t>(a.ptr);
    BOOST_TEST(start % 64 == 0u);
    BOOST_TEST(live.emplace(start, n).second, "two live blocks start at " << a.ptr);
    blocks.push_back(a.block);
  }
  // Blocks held at the same time never share a byte.
  for (auto it = live.begin(), next = std::next(it); next != live.end(); ++it, ++next)
    BOOST_TEST(it->first + it->second <= next->first, "the block at " << it->first << " (" << it->second
                                                      << " bytes) overlaps the one at " << next->first);
  for (auto* b : blocks) host.free(b);
}

BOOST_AUTO_TEST_SUITE_END()
