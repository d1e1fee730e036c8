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

// More random numbers for one element than its block holds, for samplers that loop (Poisson's):
// draw j of element i is the Philox block of counter {j, 0, b2, b3} and key {b0, b1}, b being
// element i's block, so every draw is a function of (seed, offset, i) alone, as the block is.
inline Philox4x32 random_substream(const Philox4x32& b, uint64_t draw) noexcept {
  Philox4x32 counter{{static_cast<uint32_t>(draw), static_cast<uint32_t>(draw >> 32), b.x[2], b.x[3]}};
  return philox4x32_10(counter, b.x[0], b.x[1]);
}

// A Poisson sample of mean `rate` (finite, >= 0) from element block b, drawing from its
// substreams: products of uniforms below 10 (Knuth), else Hormann's transformed rejection with
// squeeze (PTRS, "The transformed rejection method for generating Poisson random variables",
// 1993), as PyTorch and numpy sample. The CUDA kernel loom_poisson (graph/cuda_library_source.cpp)
// repeats this function step for step: both must give every element the same value.
inline double random_poisson(const Philox4x32& b, double rate) noexcept {
  if (rate == 0) return 0;
  uint64_t draw = 0;
  if (rate < 10) {
    // The number of uniforms whose running product stays above e^-rate.
    double limit = std::exp(-rate), product = 1, count = 0;
    for (;;) {
      Philox4x32 d = random_substream(b, draw++);
      for (int pair = 0; pair < 2; ++pair) {
        product *= random_unit(random_u64(d, pair), 53);
        if (product <= limit) return count;
        count += 1;
      }
    }
  }
  double root = std::sqrt(rate), log_rate = std::log(rate);
  double spread = 0.931 + 2.53 * root, shift = -0.059 + 0.02483 * spread;
  double inv_alpha = 1.1239 + 1.1328 / (spread - 3.4), v_accept = 0.9277 - 3.6224 / (spread - 2);
  for (;;) {
    Philox4x32 d = random_substream(b, draw++);
    double u = random_unit(random_u64(d, 0), 53) - 0.5, v = random_unit(random_u64(d, 1), 53);
    double us = 0.5 - std::fabs(u);
    double k = std::floor((2 * shift / us + spread) * u + rate + 0.43);
    if (us >= 0.07 && v <= v_accept) return k;  // the squeeze: accepted without the density
    if (k < 0 || (us < 0.013 && v > us)) continue;
    double lhs = std::log(v) + std::log(inv_alpha) - std::log(shift / (us * us) + spread);
    if (lhs <= -rate + k * log_rate - std::lgamma(k + 1)) return k;
  }
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
  // Generator.set_state: the generator continues exactly where the one `s` was read from was.
  void set_state(PhiloxState s) noexcept {
    seed_.store(s.seed, std::memory_order_relaxed);
    offset_.store(s.offset, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> seed_;
  std::atomic<uint64_t> offset_{0};
};

// The process-wide generator of a device.
Generator& default_generator(Device device);
// loom.manual_seed: reseeds every device's generator.
void manual_seed_all(uint64_t seed);

// A random op's `generator=` argument (a loom.Generator): while a GeneratorScope lives, random
// ops of this thread on `device` draw from `generator` instead of the device's default one, so
// its stream is independent of the global one. A random op on another device raises, as
// PyTorch's do ("Expected a 'cuda' device type for generator but found 'cpu'").
class GeneratorScope {
 public:
  GeneratorScope(Generator* generator, Device device) noexcept;  // null: no override
  ~GeneratorScope();
  GeneratorScope(const GeneratorScope&) = delete;
  GeneratorScope& operator=(const GeneratorScope&) = delete;

 private:
  Generator* previous_;
  Device previous_device_;
};

// The generator a random op on `device` draws from: the innermost GeneratorScope's, else the
// device's default.
Generator& current_generator(Device device);
// Whether a GeneratorScope is active on this thread (its draws are not the default generator's).
bool generator_overridden() noexcept;

}  // namespace loom
