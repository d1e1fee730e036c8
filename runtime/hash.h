// 64-bit hashing for IR nodes and trace keys: a strong mixer (splitmix64's finalizer), so keys
// built by combining many small integers still spread over all 64 bits.
#pragma once

#include <bit>
#include <cstdint>

namespace loom {

inline uint64_t mix64(uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

inline uint64_t hash_combine(uint64_t seed, uint64_t value) noexcept {
  return mix64(seed ^ (value + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2)));
}

inline uint64_t hash_double(double d) noexcept { return std::bit_cast<uint64_t>(d); }

}  // namespace loom
