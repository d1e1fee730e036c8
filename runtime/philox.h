// Philox4x32-10, the counter-based random number generator of Salmon et al., "Parallel Random
// Numbers: As Easy as 1, 2, 3" (SC'11).
//
// Counter-based means stateless: the 128 output bits are a pure function of a 128-bit counter and
// a 64-bit key, so any element of a random tensor can be computed independently, in any order, on
// any backend, and a CUDA graph can replay a random op by advancing one offset.
//
// This header is plain arithmetic on uint32_t so the same text serves host code and the kernels
// loom generates for the GPU.
#pragma once

#include <cstdint>

namespace loom {

struct Philox4x32 {
  uint32_t x[4];
};

inline Philox4x32 philox4x32_10(Philox4x32 counter, uint32_t key0, uint32_t key1) noexcept {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t* c = counter.x;
  for (int round = 0; round < 10; ++round) {
    if (round) {
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
    uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
    uint32_t next[4] = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ key0, static_cast<uint32_t>(p1),
                        static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ key1, static_cast<uint32_t>(p0)};
    for (int i = 0; i < 4; ++i) c[i] = next[i];
  }
  return counter;
}

}  // namespace loom
