// Device descriptors: where a tensor's memory lives.
//
// A Device names physical memory: the host ("cpu") or one GPU ("cuda:N"). Laziness is not a
// device here; a lazy tensor still lives on (or will be materialized on) one of these.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace loom {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int16_t index = 0;  // GPU ordinal; always 0 for the CPU

  constexpr Device() = default;
  constexpr Device(DeviceType t, int16_t i = 0) : type(t), index(i) {}

  bool is_cpu() const noexcept { return type == DeviceType::CPU; }
  bool is_cuda() const noexcept { return type == DeviceType::CUDA; }
  std::string str() const;  // "cpu", "cuda:0"
  friend bool operator==(Device a, Device b) noexcept = default;
};

inline constexpr Device kCPU{};

// A parsed device string. The index is optional ("cuda" means the current GPU), as in PyTorch.
struct DeviceSpec {
  DeviceType type;
  int index;  // -1 when the string named no index
  Device resolve() const noexcept { return Device(type, static_cast<int16_t>(index < 0 ? 0 : index)); }
};

// Parses "cpu", "cuda", "cuda:N". Throws RuntimeError naming the string otherwise.
DeviceSpec parse_device(std::string_view text);

}  // namespace loom
