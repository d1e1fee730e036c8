// Autograd: define-by-run, as in PyTorch, with one difference that is loom's point: backward()
// only records ops, so in lazy mode the backward pass lands in the same trace as the forward
// pass and the optimizer update (DESIGN decision 10).
//
// When grad mode is on and an op's input requires grad, the op's result gets a GradFn: the op's
// derivative (OpDef::backward, written in loom ops next to the op) with the values it needs
// saved, and edges to the GradFns of its inputs. Leaves that require grad end in an
// AccumulateGrad, which adds into `.grad`. backward() walks the GradFns in reverse topological
// order, summing the gradients that reach each one.
//
// Saved values are checked against version counters: a tensor modified in place after it was
// saved makes backward raise, as in PyTorch. Backward frees the saved values unless
// retain_graph; a second backward through freed values raises.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lazy/tensor.h"

namespace loom {

// Whether ops record GradFns (torch.is_grad_enabled); per thread, on by default.
bool grad_enabled() noexcept;
void set_grad_enabled(bool enabled) noexcept;

// Sets grad mode for a scope and restores the previous mode when the scope ends, also when an
// exception leaves it (an op on an errored lazy tensor raises; grad mode must not stay off).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : saved_(grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(saved_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool saved_;
};

class GradFn;

// An input's destination in the backward graph: the GradFn that produced it (or its
// AccumulateGrad, for a leaf), and which of that function's outputs it was.
struct Edge {
  Ref<GradFn> fn;
  int32_t input_nr = 0;
};

// A value saved for backward, and the version of the tensor it came from at the time.
//
// The value is held by a private handle (a TensorImpl of its own): in lazy mode a sync
// materializes it like any live tensor, so a backward after `loss.item()` reads stored values
// instead of recomputing the forward pass; an in-place op on the original rebinds the original,
// not the handle. The version check then reports that the original changed.
//
// It also keeps the original's place in the graph (its grad_fn, or its AccumulateGrad for a
// leaf): a backward with create_graph unpacks the value with that history, so the derivative
// computed from it is itself differentiable (double backward). Only inputs of the function that
// saves them are saved this way; an output would hold its own GradFn (a cycle).
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  // The saved value; raises if the tensor was modified in place since it was saved, or if the
  // graph was freed by an earlier backward. In grad mode (a backward with create_graph) the
  // value comes with the original's history.
  Tensor unpack(const std::string& fn_name) const;
  void release() noexcept;
  bool defined() const noexcept { return static_cast<bool>(value_) || freed_; }
  // An eager in-place op about to overwrite `storage` first gives saved values there a copy.
  void detach_from(const Storage* storage);

  Tensor value_;
  Ref<WeakTensor> original_;
  uint64_t version_ = 0;          // the original's version when saved
  Ref<Storage> storage_;          // the storage the original had when saved (materialized only)
  uint64_t storage_version_ = 0;  // its version then: in-place writes through any view bump it
  bool freed_ = false;
  Edge history_;  // the original's gradient edge, if it required grad when saved
};

class GradFn : public RefCounted {
 public:
  virtual ~GradFn() = default;
  // PyTorch's naming: "MulBackward0", "AccumulateGrad".
  virtual std::string name() const = 0;
  // Gradients of the inputs (an empty Tensor where an input needs none), given the gradient of
  // the output.
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  // Drops the saved values (after a backward without retain_graph).
  virtual void release_saved() {}

  // One per input PyTorch lists in next_functions: tensors of floating dtype, and the numbers
  // that PyTorch wraps into tensors (x * 2, where(c, x, 0.5)); an edge without a function where
  // the input needs no gradient.
  std::vector<Edge> next;
  uint64_t sequence = 0;   // creation order: later functions run first in backward
  Ref<WeakTensor> retained;  // the non-leaf output whose .grad retain_grad() asked for
};

struct AutogradMeta {
  bool requires_grad = false;
  bool retains_grad = false;
  Ref<GradFn> grad_fn;         // null for leaves
  Ref<GradFn> grad_accumulator;  // leaves: the AccumulateGrad, made on first use
  Tensor grad;
};

// Autograd state of a tensor (created on demand).
AutogradMeta& autograd(TensorImpl& t);
bool requires_grad(const TensorImpl& t) noexcept;
// Sets requires_grad of a leaf; raises for integer dtypes, and for turning it off on a non-leaf
// (turning it on there is a no-op, as in PyTorch).
void set_requires_grad(TensorImpl& t, bool value);
bool is_leaf(const TensorImpl& t) noexcept;
// The edge a tensor contributes to a GradFn that uses it.
Edge gradient_edge(TensorImpl& t);

// Makes `output` the result of `fn` (which already has its `next` edges): sets its grad_fn.
void set_history(TensorImpl& output, Ref<GradFn> fn);
// Tensor.retain_grad(): a non-leaf keeps its gradient in .grad after backward.
void retain_grad(TensorImpl& t);
// An eager in-place write into `storage` is about to happen: values that `fn` saved there get a
// copy first (PyTorch saves the original values of tensors modified in place the same way).
void detach_saved_from(GradFn& fn, const Storage* storage);

// loom.autograd.backward / Tensor.backward: accumulates into the .grad of the leaves reached.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, bool retain_graph,
              bool create_graph);
// loom.autograd.grad: the gradients of roots with respect to inputs (not accumulated).
std::vector<Tensor> grad(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                         const std::vector<Tensor>& inputs, bool retain_graph, bool create_graph,
                         bool allow_unused);

// What an op's derivative sees: its saved inputs, its attributes and the output's gradient.
struct BackwardContext {
  OpId op;
  Attrs attrs;
  std::vector<Tensor> inputs;   // saved tensor inputs; empty where the argument was a number
  std::vector<Scalar> scalars;  // the numbers (where inputs[i] is empty)
  std::vector<bool> needs_grad;
  Tensor grad;                  // of the output
  DType out_dtype;
  Dims out_shape;
};

// PyTorch's name for the backward of a primitive op, such as "MulBackward0": the op's name as
// PyTorch spells it and the number of the overload PyTorch would have called (x.sum() gives
// SumBackward0, x.sum(1) SumBackward1; a cast ToCopyBackward0, a same-dtype copy CloneBackward0).
// Bit i of `tensor_args` is set where argument i was a tensor; `input` is argument 0's shape
// and dtype (lazy/derivatives.cpp, beside the derivatives).
std::string backward_name(OpId op, const Attrs& attrs, uint64_t tensor_args, IntSpan input_shape, DType input_dtype,
                          DType out_dtype);

// Records the primitive op that made `output` from `args` if autograd is on and an input
// requires grad (called by dispatch for every op).
void record_op(OpId op, const Attrs& attrs, std::span<const struct Arg> args, TensorImpl& output);

// Records a hand-written backward (views, which are not primitive ops): `fn` maps the output's
// gradient to the input's. Outputs of integer or bool dtype get none (they cannot require grad).
void record_function(const char* name, TensorImpl& input, TensorImpl& output,
                     std::function<Tensor(const Tensor& grad)> fn);

}  // namespace loom
