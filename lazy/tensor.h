// TensorImpl: the identity behind a user-visible tensor.
//
// Python objects, views and (later) autograd records refer to a TensorImpl, not to its value, so
// that an in-place op can rebind what a tensor is (DESIGN decision 5) and every holder sees it.
// Today a TensorImpl is always materialized and holds an Array; the lazy IR issue adds the pending
// state (an IR node that will produce the value at the next sync point).
#pragma once

#include "runtime/array.h"
#include "runtime/ref.h"

namespace loom {

class TensorImpl final : public RefCounted {
 public:
  explicit TensorImpl(Array value) : value_(std::move(value)) {}

  const Array& array() const noexcept { return value_; }
  DType dtype() const noexcept { return value_.dtype; }
  Device device() const noexcept { return value_.device(); }
  IntSpan sizes() const noexcept { return value_.sizes(); }
  int64_t ndim() const noexcept { return value_.ndim(); }
  int64_t numel() const noexcept { return value_.numel(); }

 private:
  Array value_;
};

using Tensor = Ref<TensorImpl>;

inline Tensor make_tensor(Array value) { return make_ref<TensorImpl>(std::move(value)); }

}  // namespace loom
