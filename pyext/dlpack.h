// The DLPack data structures (https://dmlc.github.io/dlpack/latest/), declared here from the
// specification: the ABI is fixed by the standard, so loom does not vendor a header for it.
// Versions: the legacy unversioned DLManagedTensor (capsule "dltensor") that numpy 1.x and
// PyTorch 1.x speak, and DLManagedTensorVersioned 1.x (capsule "dltensor_versioned").
#pragma once

#include <cstdint>

namespace loom::dlpack {

enum DeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLCUDAManaged = 13,
};

struct Device {
  int32_t device_type;
  int32_t device_id;
};

enum TypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
};

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null means compact row-major
  uint64_t byte_offset;
};

struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

struct Version {
  uint32_t major;
  uint32_t minor;
};

inline constexpr uint64_t kFlagReadOnly = 1ull << 0;
inline constexpr uint64_t kFlagIsCopied = 1ull << 1;

struct ManagedTensorVersioned {
  Version version;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned* self);
  uint64_t flags;
  Tensor dl_tensor;
};

// The DLPack version loom produces for consumers that ask for a versioned capsule.
inline constexpr Version kVersion{1, 0};

}  // namespace loom::dlpack
