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

// The GPU that "cuda" without an index means (torch.cuda.set_device / current_device): per
// thread, as PyTorch's, and 0 until set. Setting it does not check the device: callers do
// (loom.cuda.set_device requires a usable GPU).
int16_t current_cuda_device() noexcept;
void set_current_cuda_device(int16_t index) noexcept;

// A parsed device string. The index is optional ("cuda" means the current GPU), as in PyTorch.
struct DeviceSpec {
  DeviceType type;
  int index;  // -1 when the string named no index
  Device resolve() const noexcept {
    if (index >= 0) return Device(type, static_cast<int16_t>(index));
    return Device(type, type == DeviceType::CUDA ? current_cuda_device() : int16_t{0});
  }
};

// Parses "cpu", "cuda", "cuda:N". Throws RuntimeError naming the string otherwise.
DeviceSpec parse_device(std::string_view text);

}  // namespace loom
