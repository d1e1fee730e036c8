// Node: one operation recorded in the lazy IR.
//
// Nodes are immutable once made and form a DAG through their inputs. A node's hash is computed
// when it is made, from (op, dtype, shape, attributes, input hashes), so building a trace's key
// never re-hashes shapes (DESIGN decision 1).
//
// Leaves:
//   Input     a materialized tensor (`array`: storage + layout). Its hash covers dtype, shape and
//             whether the layout is contiguous, never the address or the values: a trace run on
//             new inputs of the same description hits the same cached graph.
//   Scalar    a Python number (`scalar`), a parameter of the trace: its value is not hashed, so
//             a learning rate that changes every step does not change the trace.
//   Constant  a number folded into the trace (0 and 1 only), hashed by value.
#pragma once

#include <cstdint>
#include <memory>

#include "lazy/op.h"
#include "runtime/ref.h"

namespace loom {

class Node final : public RefCounted {
 public:
  // Chains of nodes are as deep as a program's loops: released without recursion (runtime/ref.h).
  static constexpr bool kReleaseIteratively = true;
  ~Node();

  OpId op() const noexcept { return op_; }
  DType dtype() const noexcept { return dtype_; }
  IntSpan shape() const noexcept { return shape_; }
  int64_t ndim() const noexcept { return static_cast<int64_t>(shape_.size()); }
  const Attrs& attrs() const noexcept { return attrs_; }
  uint64_t hash() const noexcept { return hash_; }
  std::span<Node* const> inputs() const noexcept { return {inputs_.data(), inputs_.size()}; }
  Node* input(size_t i) const noexcept { return inputs_[i]; }

  const Array& array() const noexcept { return array_ ? *array_ : no_array(); }  // Input only
  const Scalar& scalar() const noexcept { return scalar_; }  // Scalar and Constant only
  bool is_leaf() const noexcept { return op_def(op_).cls == OpClass::Leaf; }

  static Ref<Node> make(OpId op, OutputMeta meta, Attrs attrs, std::span<Node* const> inputs);
  // Nodes are made and dropped by the hundred every step (runtime/free_list.h).
  static void* operator new(size_t size);
  static void operator delete(void* p, size_t size) noexcept;
  static Ref<Node> input(Array array);
  // A Python number; 0 and 1 become Constants (folded, hashed by value) unless `foldable` is
  // false (random seeds and offsets: every value must reuse the trace), others Scalars.
  static Ref<Node> scalar(Scalar value, bool foldable = true);

  // Scratch of the trace builder (lazy/sync.cpp), the one mutable part of a node: its index in
  // the trace being built, valid while `trace_epoch` equals that build's epoch. Builds run one at
  // a time (under the GIL), so a stamp replaces a hash map from node to index.
  mutable uint64_t trace_epoch = 0;
  mutable int32_t trace_index = -1;

 private:
  Node() = default;

  OpId op_ = OpId::Input;
  DType dtype_ = DType::Float32;
  Dims shape_;
  Attrs attrs_;
  uint64_t hash_ = 0;
  SmallVec<Node*, 3> inputs_;  // each holds a reference (released in ~Node)
  static const Array& no_array() noexcept;

  // Only Input leaves have an array: kept out of line, so that the node every op makes is small
  // (cheaper to make and to walk).
  std::unique_ptr<const Array> array_;
  Scalar scalar_{int64_t{0}};
};

}  // namespace loom
