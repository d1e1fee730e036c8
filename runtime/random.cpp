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

thread_local Generator* scoped_generator = nullptr;
thread_local Device scoped_device = kCPU;

}  // namespace

GeneratorScope::GeneratorScope(Generator* generator, Device device) noexcept
    : previous_(scoped_generator), previous_device_(scoped_device) {
  if (!generator) return;
  scoped_generator = generator;
  scoped_device = device;
}

GeneratorScope::~GeneratorScope() {
  scoped_generator = previous_;
  scoped_device = previous_device_;
}

Generator& current_generator(Device device) {
  if (!scoped_generator) return default_generator(device);
  LOOM_CHECK(scoped_device.type == device.type, Runtime, "Expected a '", device.is_cpu() ? "cpu" : "cuda",
             "' device type for generator but found '", scoped_device.is_cpu() ? "cpu" : "cuda", "'");
  return *scoped_generator;
}

bool generator_overridden() noexcept { return scoped_generator != nullptr; }

Generator& default_generator(Device device) {
  size_t slot = device.is_cpu() ? 0 : 1 + static_cast<size_t>(device.index);
  LOOM_CHECK(slot < kMaxGenerators, Runtime, "no random generator for device ", device.str());
  return *generators()[slot];
}

void manual_seed_all(uint64_t seed) {
  for (Generator* g : generators()) g->manual_seed(seed);
}

}  // namespace loom
