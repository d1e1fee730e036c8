// Array: a materialized tensor, i.e. storage + layout + dtype.
//
// This is what a tensor is once its value exists: on the CPU or a GPU, possibly a view sharing
// storage with others. The lazy layer's Tensor handle holds an Array when materialized and an IR
// node while pending. The functions here are the data-movement primitives every layer needs
// (allocation, copies with dtype conversion across devices, fills, random fills); compute ops live
// in the op library.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/layout.h"
#include "runtime/random.h"
#include "runtime/scalar.h"
#include "runtime/storage.h"

namespace loom {

struct Array {
  Ref<Storage> storage;
  Layout layout;
  DType dtype = DType::Float32;

  Device device() const noexcept { return storage->device(); }
  int64_t ndim() const noexcept { return layout.ndim(); }
  int64_t numel() const noexcept { return layout.numel(); }
  IntSpan sizes() const noexcept { return layout.sizes; }
  IntSpan strides() const noexcept { return layout.strides; }
  bool is_contiguous() const noexcept { return layout.is_contiguous(); }
  // Address of the element at index (0, ..., 0).
  void* data() const noexcept {
    return static_cast<char*>(storage->data()) + layout.offset * static_cast<int64_t>(itemsize(dtype));
  }
  // The same storage seen through another layout (a view).
  Array view_as(Layout l) const { return Array{storage, std::move(l), dtype}; }
};

// How a new array made from another lays out its elements: row-major, or in the other's dim
// order (PyTorch's preserve_format, the default of clone, to and the *_like functions).
enum class MemoryFormat : uint8_t { Contiguous, Preserve };

// A new contiguous array with uninitialized contents.
Array empty(IntSpan sizes, DType dtype, Device device);
// Raises what empty(sizes, dtype, device) raises before it asks the device for memory: a negative
// size, a byte count int64 cannot hold ("Storage size calculation overflowed", as PyTorch), more
// bytes than any device has (out of memory). Lazy mode checks every op's result with it when the
// op is recorded, so a size eager mode refuses fails at the same line there too.
void check_allocatable(IntSpan sizes, DType dtype, Device device);
// Whether check_allocatable(sizes, dtype, ...) passes (the check every lazy op makes, inline).
inline bool allocatable(IntSpan sizes, DType dtype) noexcept {
  if (sizes.size() > kMaxDims) return false;
  int64_t bytes = static_cast<int64_t>(itemsize(dtype));
  for (int64_t s : sizes)
    if (s < 0 || __builtin_mul_overflow(bytes, s, &bytes)) return false;
  return bytes <= (int64_t{1} << 60);  // runtime/allocator.h check_allocation_size
}
// A new array with like's sizes and strides from preserved_strides, uninitialized.
Array empty_like(const Array& like, DType dtype, Device device);

// Writes src into dst element by element: src broadcasts to dst's shape, converts to dst's dtype
// and may live on another device. dst must not overlap src unless they are the same view.
void copy_(const Array& dst, const Array& src);
// A new array holding src's values as `dtype` on `device`.
Array copy_to(const Array& src, DType dtype, Device device, MemoryFormat format = MemoryFormat::Contiguous);
// src itself when already contiguous, else a contiguous copy.
Array contiguous(const Array& src);
// Whether a and b may address common memory: their byte ranges intersect on one device. Storage
// identity is not enough: the same memory can be wrapped twice (two from_numpy of one array).
// Conservative for interleaved views (t[::2] and t[1::2] report an overlap).
bool may_overlap(const Array& a, const Array& b) noexcept;

// Raises RuntimeError, as PyTorch's fill_ does, when the value overflows dst's dtype
// (Scalar::check_fits).
void fill_(const Array& dst, Scalar value);
// dst (contiguous, 1-d) = start + i * step; in integers when dst is integral and both are ints.
void arange_(const Array& dst, Scalar start, Scalar step);
// dst (contiguous, 1-d) = `steps` points evenly from start to end inclusive.
void linspace_(const Array& dst, double start, double end);

// Random fills follow runtime/random.h; each draws one state from the device's generator.
void uniform_(const Array& dst, double low, double high, Generator& gen);
void normal_(const Array& dst, double mean, double std, Generator& gen);
void random_int_(const Array& dst, int64_t low, int64_t high, Generator& gen);  // [low, high)
// The same at an explicit state (lazy random nodes carry theirs).
void uniform_at(const Array& dst, double low, double high, PhiloxState state);
void normal_at(const Array& dst, double mean, double std, PhiloxState state);
void random_int_at(const Array& dst, int64_t low, int64_t high, PhiloxState state);

// The single element of a one-element array.
Scalar item(const Array& a);

}  // namespace loom
