// How loom turns Philox output into random tensors, identically on every backend.
//
// A generator holds (seed, offset). Each random op draws the current offset and advances it by
// one. Element i (in row-major order) of that op's result takes the Philox4x32-10 block
//     counter = {lo(i), hi(i), lo(offset), hi(offset)},  key = {lo(seed), hi(seed)}
// so a tensor's values depend only on the seed, the number of random ops before it and its shape,
// never on the backend, the thread count or the kernel's launch shape. Thread safety: any thread
// may draw or reseed (the state is atomic; a draw racing a reseed gets either seed).
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>

#include "runtime/device.h"
#include "runtime/philox.h"

namespace loom {

struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

inline Philox4x32 random_block(PhiloxState s, uint64_t element) noexcept {
  Philox4x32 counter{{static_cast<uint32_t>(element), static_cast<uint32_t>(element >> 32),
                      static_cast<uint32_t>(s.offset), static_cast<uint32_t>(s.offset >> 32)}};
  return philox4x32_10(counter, static_cast<uint32_t>(s.seed), static_cast<uint32_t>(s.seed >> 32));
}

inline uint64_t random_u64(const Philox4x32& b, int pair) noexcept {
  return (static_cast<uint64_t>(b.x[2 * pair + 1]) << 32) | b.x[2 * pair];
}

// Uniform in [0, 1) with `digits` random significant bits, so the value is exactly representable
// in a type with that many mantissa digits and rounding can never produce 1.0.
inline double random_unit(uint64_t bits, int digits) noexcept {
  return static_cast<double>(bits >> (64 - digits)) * std::ldexp(1.0, -digits);
}

// Standard normal by Box-Muller from the block's two 64-bit halves.
inline double random_normal(const Philox4x32& b) noexcept {
  double u1 = 1.0 - random_unit(random_u64(b, 0), 53);  // in (0, 1]: log is finite
  double u2 = random_unit(random_u64(b, 1), 53);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// The default seed of a fresh process, PyTorch's, so unseeded runs start from the same state.
inline constexpr uint64_t kDefaultSeed = 67280421310721ull;

class Generator {
 public:
  explicit Generator(uint64_t seed = kDefaultSeed) : seed_(seed) {}
  uint64_t seed() const noexcept { return seed_.load(std::memory_order_relaxed); }
  uint64_t offset() const noexcept { return offset_.load(std::memory_order_relaxed); }
  void manual_seed(uint64_t seed) noexcept {
    seed_.store(seed, std::memory_order_relaxed);
    offset_.store(0, std::memory_order_relaxed);
  }
  // The state for one random op; advances the offset.
  PhiloxState draw() noexcept {
    return {seed_.load(std::memory_order_relaxed), offset_.fetch_add(1, std::memory_order_relaxed)};
  }
  // The states of `count` random ops at once (a replayed step's, graph/captured_step.h): the
  // first's; the others take the next offsets.
  PhiloxState draw(uint64_t count) noexcept {
    return {seed_.load(std::memory_order_relaxed), offset_.fetch_add(count, std::memory_order_relaxed)};
  }

 private:
  std::atomic<uint64_t> seed_;
  std::atomic<uint64_t> offset_{0};
};

// The process-wide generator of a device.
Generator& default_generator(Device device);
// loom.manual_seed: reseeds every device's generator.
void manual_seed_all(uint64_t seed);

}  // namespace loom
