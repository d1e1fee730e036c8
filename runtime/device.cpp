#include "runtime/device.h"

#include <charconv>

#include "runtime/error.h"

namespace loom {

namespace {
thread_local int16_t current_cuda = 0;
}  // namespace

int16_t current_cuda_device() noexcept { return current_cuda; }
void set_current_cuda_device(int16_t index) noexcept { current_cuda = index; }

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

DeviceSpec parse_device(std::string_view text) {
  std::string_view type = text.substr(0, text.find(':'));
  DeviceSpec spec{};
  if (type == "cpu") {
    spec.type = DeviceType::CPU;
  } else if (type == "cuda") {
    spec.type = DeviceType::CUDA;
  } else {
    LOOM_FAIL(Runtime, "Expected one of cpu, cuda device type at start of device string: ", text);
  }
  spec.index = -1;
  if (type.size() == text.size()) return spec;
  std::string_view digits = text.substr(type.size() + 1);
  int index = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  LOOM_CHECK(!digits.empty() && ec == std::errc() && end == digits.data() + digits.size() && index >= 0 &&
                 index < 32768,
             Runtime, "Invalid device string: '", text, "'");
  LOOM_CHECK(spec.type != DeviceType::CPU || index == 0, Runtime,
             "CPU device index must be 0 (or absent), got '", text, "'");
  spec.index = index;
  return spec;
}

}  // namespace loom
