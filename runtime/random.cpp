#include "runtime/random.h"

#include <array>

#include "runtime/error.h"

namespace loom {
namespace {

// Slot 0 is the CPU, slot 1 + i is cuda:i. Generators are never destroyed (see allocator_for).
constexpr size_t kMaxGenerators = 65;

std::array<Generator*, kMaxGenerators>& generators() {
  static auto* g = [] {
    auto* all = new std::array<Generator*, kMaxGenerators>();
    for (auto& slot : *all) slot = new Generator();
    return all;
  }();
  return *g;
}

}  // namespace

Generator& default_generator(Device device) {
  size_t slot = device.is_cpu() ? 0 : 1 + static_cast<size_t>(device.index);
  LOOM_CHECK(slot < kMaxGenerators, Runtime, "no random generator for device ", device.str());
  return *generators()[slot];
}

void manual_seed_all(uint64_t seed) {
  for (Generator* g : generators()) g->manual_seed(seed);
}

}  // namespace loom
