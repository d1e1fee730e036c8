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
// Each op saves only the values its derivative reads (OpDef::saves): inputs, or its result where
// PyTorch's formula reads the result. Saved values are checked against version counters
// (lazy/version_counter.h): a tensor modified in place after it was saved makes backward raise,
// as in PyTorch. Backward frees the saved values unless retain_graph; a second backward through
// freed values raises.
//
// In-place writes and views (lazy/autograd_inplace.cpp): a write gives the written tensor the
// history of its new value; a write through a view gives the view's base a CopySlices, and the
// views of that base re-derive their grad_fn from the base's when they are next used.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lazy/tensor.h"
#include "runtime/free_list.h"

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
// not the handle. The version check (the counter the original shares with its views and
// detach()es, lazy/version_counter.h) then reports that the original changed.
//
// It also keeps the original's place in the graph (its grad_fn, or its AccumulateGrad for a
// leaf): a backward with create_graph unpacks the value with that history, so the derivative
// computed from it is itself differentiable (double backward). The result of the function that
// saves it (`is_result`) has that function as its history, which it does not hold (a cycle):
// unpack is given it.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_result);
  // The saved value; raises if the tensor was modified in place since it was saved, or if the
  // graph was freed by an earlier backward. In grad mode (a backward with create_graph) the
  // value comes with the original's history. `owner` is the function that saved it.
  Tensor unpack(GradFn& owner) const;
  void release() noexcept;
  bool defined() const noexcept { return static_cast<bool>(value_) || freed_; }
  // An in-place write into `self` is about to give it a new value, and this value was saved from
  // self by the write's own computation (y.sin_() saved y, y.clamp_(0, 1) saved it in its
  // Maximum): keep the value as it is now instead of failing the version check at backward, as
  // PyTorch's in-place ops save the original self. Only self itself: another view of its data
  // saved by the write (y[1:].mul_(y[:-1])) fails, as in PyTorch. An eager value is copied; a
  // pending lazy value is a node, which never changes; a materialized lazy value becomes a
  // pending copy, which the next sync computes before it writes (graph/ orders writes after
  // every read).
  void preserve(TensorImpl& self);
  // The saved result was written into `t` (y.exp_(): exp's result becomes y's value): from now
  // on it is t's value, which later writes into t invalidate, as PyTorch's in-place ops save self.
  void become_value_of(TensorImpl& t);

  Tensor value_;
  const TensorImpl* origin_ = nullptr;  // the tensor it was saved from (compared, never read)
  Ref<VersionCounter> counter_;  // of the tensor it was saved from; null once preserved
  uint64_t version_ = 0;         // the counter's value when saved
  bool freed_ = false;
  bool is_result_ = false;
  Edge history_;  // the original's gradient edge, if it required grad when saved (inputs only)
};

class GradFn : public RefCounted {
 public:
  // The backward graph of a loop is a chain of functions (through `next` and saved values) as
  // long as the loop: released without recursion (runtime/ref.h).
  static constexpr bool kReleaseIteratively = true;
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
  // Creation order: later functions run first in backward. 0 for an AccumulateGrad (made on first
  // use, so its number would depend on when that was): among the functions ready, a leaf's
  // accumulation runs last; every other function is numbered from 1 (set_history).
  uint64_t sequence = 0;
  Ref<WeakTensor> retained;  // the non-leaf output whose .grad retain_grad() asked for
  // Tensor.register_hook: hooks of the tensor this function produced (for an AccumulateGrad, of
  // its leaf), run in order on the gradient that reached it before anything uses it (retain_grad's
  // .grad, autograd.grad's result, the function itself, a leaf's .grad); each may return a
  // replacement (an empty Tensor keeps it).
  std::vector<std::function<Tensor(const Tensor&)>> tensor_hooks;
};

// A view's history: the version of the counter it shares with its base when its grad_fn was
// made, so that a write anywhere in the base (which may change the view's value) re-derives it.
// Views that require grad when made have one (their AutogradMeta exists anyway); the others get
// one when their grad_fn is first derived from the base's (lazy/autograd_inplace.cpp). Where a
// view lies in its base is derived from their layouts when a write needs it (region_in_base), so
// making a view costs no layout arithmetic.
struct ViewHistory {
  uint64_t version = 0;
};

struct AutogradMeta {
  // Every result of an op recorded with autograd has one (runtime/free_list.h).
  static void* operator new(size_t size) { return FreeList<AutogradMeta>::allocate(size); }
  static void operator delete(void* p, size_t size) noexcept { FreeList<AutogradMeta>::release(p, size); }

  bool requires_grad = false;
  bool retains_grad = false;
  Ref<GradFn> grad_fn;         // null for leaves
  Ref<GradFn> grad_accumulator;  // leaves: the AccumulateGrad, made on first use
  Tensor grad;
  std::optional<ViewHistory> view;  // views only
};

// Autograd state of a tensor (created on demand).
AutogradMeta& autograd(TensorImpl& t);
// The grad_fn of t (null for leaves), re-derived first if t is a view whose base was written
// since (PyTorch's AsStridedBackward0).
const Ref<GradFn>& current_grad_fn(TensorImpl& t);
bool requires_grad(const TensorImpl& t) noexcept;
// Sets requires_grad of a leaf; raises for integer dtypes, and for turning it off on a non-leaf
// (turning it on there is a no-op, as in PyTorch).
void set_requires_grad(TensorImpl& t, bool value);
bool is_leaf(const TensorImpl& t) noexcept;
// The edge a tensor contributes to a GradFn that uses it.
Edge gradient_edge(TensorImpl& t);

// Makes `output` the result of `fn` (which already has its `next` edges): sets its grad_fn.
void set_history(TensorImpl& output, Ref<GradFn> fn);
// Tensor.register_hook: adds `hook` to the tensor's gradient function (a leaf's AccumulateGrad);
// raises for a tensor that does not require grad. The hook stays with that function: a tensor
// written in place later gets a new history, whose gradient the hook does not see (as PyTorch).
void add_tensor_hook(TensorImpl& t, std::function<Tensor(const Tensor&)> hook);
// Tensor.retain_grad(): a non-leaf keeps its gradient in .grad after backward.
void retain_grad(TensorImpl& t);
// An in-place write is about to change `self`: the values of it that `fn` saved at the current
// version keep it (SavedTensor::preserve).
void preserve_saved(GradFn& fn, TensorImpl& self);
// `fn` made the value just written into `t`: the result it saved is t's value from now on
// (SavedTensor::become_value_of).
void result_written_into(GradFn& fn, TensorImpl& t);

// loom.autograd.backward / Tensor.backward: accumulates into the .grad of the leaves reached.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, bool retain_graph,
              bool create_graph);
// loom.autograd.grad: the gradients of roots with respect to inputs (not accumulated).
std::vector<Tensor> grad(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                         const std::vector<Tensor>& inputs, bool retain_graph, bool create_graph,
                         bool allow_unused);

// What an op's derivative sees: its saved values, its attributes and the output's gradient. The
// spans and references point into the GradFn, which outlives the derivative's call.
struct BackwardContext {
  OpId op;
  const Attrs& attrs;
  std::vector<Tensor> inputs;       // the tensor inputs its OpDef::saves names; empty elsewhere
  Tensor result;                    // the op's result, where its OpDef::saves names it
  std::span<const Scalar> scalars;  // the numbers (where is_number(i))
  uint64_t tensor_args;             // bit min(i, 63): argument i was a tensor
  std::span<const Dims> shapes;     // of every tensor argument, saved or not
  std::span<const DType> dtypes;
  std::vector<bool> needs_grad;
  uint64_t column_major = 0;        // bit i: input i is a column-major matrix (OpDef::saves.operand_layouts)
  Tensor grad;                      // of the output
  DType out_dtype;
  const Dims& out_shape;

  // Numbers only come before the 64th argument (ops with many arguments take only tensors).
  bool is_number(size_t i) const noexcept { return !(tensor_args >> std::min<size_t>(i, 63) & 1); }
};

// PyTorch's name for the backward of a primitive op, such as "MulBackward0": the op's name as
// PyTorch spells it and the number of the overload PyTorch would have called (x.sum() gives
// SumBackward0, x.sum(1) SumBackward1; a cast ToCopyBackward0, a same-dtype copy CloneBackward0).
// Bit i of `tensor_args` is set where argument i was a tensor; `input` is argument 0's shape
// and dtype (lazy/derivatives.cpp, beside the derivatives).
std::string backward_name(OpId op, const Attrs& attrs, uint64_t tensor_args, IntSpan input_shape, DType input_dtype,
                          DType out_dtype);
// Whether a matrix is laid out column-major: a transpose of a row-major matrix, as the weight.t()
// of linear is (a matmul's derivative computes that operand's gradient transposed, so that it
// reaches the weight in its own row-major order; lazy/derivatives.cpp).
bool is_column_major(const TensorImpl& t) noexcept;

// Records the primitive op that made `output` from `args` if autograd is on and an input
// requires grad (called by dispatch for every op).
void record_op(OpId op, const Attrs& attrs, std::span<const struct Arg> args, TensorImpl& output);

// Records a hand-written backward (views, which are not primitive ops): `fn` maps the output's
// gradient to the input's. Outputs of integer or bool dtype get none (they cannot require grad).
void record_function(const char* name, TensorImpl& input, TensorImpl& output,
                     std::function<Tensor(const Tensor& grad)> fn);

// Gives `output`, computed from `inputs` by something without a derivative (a count of nonzeros,
// an identity matrix, an empty or all-zero tensor made by a creation op), the history PyTorch
// gives it: it requires grad when an input does, and its gradient to every input is zero. A
// loss that goes through it can be differentiated (torch.norm(x, 0), cdist(p=0), matrix_power
// of 0, combinations of an empty vector); without this, backward raises that nothing requires
// grad. Nothing is recorded where record_composite records nothing.
void record_zero_derivative(const char* name, const std::vector<TensorImpl*>& inputs, TensorImpl& output);

// Marks the function record_function just gave `output`, a view of its input that selects
// `region` of it (a layout over the input's elements in row-major order addressing each at most
// once), so that the engine may assemble the gradients of several such views of one tensor at
// once (lazy/region_gradients.h) instead of adding them as zero-filled tensors. The function's
// own derivative must place its gradient at `region` of zeros.
void mark_region_view(TensorImpl& output, const Layout& region);

// A composite op's own derivative, where it is simpler than the chain of its primitives'
// derivatives (softmax: PyTorch's y * (g - sum(g * y)) instead of three reductions, one counting
// ties of the max; layer_norm: PyTorch's formula over the saved mean and rstd). The contract:
// - The forward is computed without recording (GradModeGuard(false)); then record_composite
//   gives `output` one GradFn named `name` whose `next` has one edge per entry of `inputs`, in
//   order (an empty edge where an input is null, an absent optional such as layer_norm's bias,
//   or needs no gradient). Only floating inputs are listed (not targets or bool masks). Nothing
//   is recorded when grad mode is off, no input requires grad, or the output is not floating.
// - Saved values: the inputs named by `save_inputs` (bit i: input i) and the result (when
//   `save_result`) are saved as a primitive saves them: version-checked at backward (an in-place
//   write in between raises PyTorch's error), released after a backward without retain_graph,
//   and with create_graph unpacked with their history. `extras` (intermediates of the forward:
//   mean and rstd, attention probabilities, a dropout mask) are private values kept as they
//   are, without history.
// - The derivative returns one gradient per input (an empty Tensor where none is needed:
//   CompositeSaved::needs_grad); each is summed down to its input's shape (broadcasting) and
//   cast to its dtype. Under create_graph it runs in grad mode and must be differentiable in
//   the inputs: what it reads from `extras` it then recomputes from the inputs (recompute()).
struct CompositeSaved {
  std::vector<Tensor> inputs;        // saved inputs (an empty Tensor where not saved)
  Tensor result;                     // the output, where saved
  const std::vector<Tensor>& extras;
  std::vector<bool> needs_grad;      // per input: its edge leads somewhere
  // Whether the derivative must be differentiable (a backward with create_graph): intermediates
  // are then recomputed from the inputs instead of read from `extras`.
  bool recompute() const noexcept { return grad_enabled(); }
};
using CompositeDerivative = std::function<std::vector<Tensor>(const Tensor& grad, const CompositeSaved& saved)>;

struct CompositeRecord {
  const char* name;                 // PyTorch's grad_fn name; kept as a pointer: a string literal
  std::vector<TensorImpl*> inputs;  // the differentiable inputs; null for an absent optional one
  uint64_t save_inputs = 0;         // bit i: the derivative reads input i
  bool save_result = false;
  std::vector<Tensor> extras;
};
void record_composite(CompositeRecord record, TensorImpl& output, CompositeDerivative fn);

// The one-input form (softmax, log_softmax): `fn(grad, result)` maps the output's gradient to the
// input's and reads the saved result.
void record_composite(const char* name, TensorImpl& input, TensorImpl& output,
                      std::function<Tensor(const Tensor& grad, const Tensor& result)> fn);

// The sequence the next GradFn made will have: the functions made from here on (an in-place op
// notes it before computing its new value, to know which functions that computation made).
uint64_t next_function_sequence() noexcept;

// ---- views and in-place writes (lazy/autograd_inplace.cpp) ----

// A base's autograd history as it died (WeakTensor::last_history): a pending base is held weakly
// by its views, and one written through a view, then dropped (a function returning a slice of a
// local tensor it scaled in place), must still give those views the write's history.
struct BaseHistory {
  Dims sizes;
  bool requires_grad = false;
  Ref<GradFn> grad_fn;  // null for a leaf
  Edge edge;            // what a view of it passes its gradient to
};
// `base`'s, for the weak reference that outlives it (TensorImpl's destructor).
std::unique_ptr<BaseHistory> last_history_of(TensorImpl& base);
// A write through a view of a dead base: `fn` (its CopySlices) is the base's history now.
void set_history(BaseHistory& dead_base, Ref<GradFn> fn);

// The base a view re-derives its history from: alive, or its history as it died.
struct StaleBase {
  TensorImpl* alive = nullptr;
  const BaseHistory* dead = nullptr;
  explicit operator bool() const noexcept { return alive || dead; }
  bool requires_grad() const noexcept;
};
// The base of a view whose grad_fn is out of date and that current_grad_fn() will re-derive from
// the base's (PyTorch's AsStridedBackward0): their shared version counter moved since the view's
// grad_fn was made (a write into the base, another view of it, or this view), or the view never
// had a history and its base now has one. Empty for views made in no_grad mode, of integer dtype,
// and whose base died without a history.
StaleBase stale_view_base(const TensorImpl& t) noexcept;
// Where t lies in its base, as a layout over the base's elements in row-major order, from their
// layouts (or, for a pending view, the functionalized layout it was derived with); all of t when
// t is not a view; none when not known (runtime/layout.h region_within's exceptions, a
// materialized view whose base is gone, a pending view derived from another tensor than its base).
std::optional<Layout> region_in_base(const TensorImpl& t);
// A view op made `view` of a tensor that requires grad, in grad mode.
void record_view(TensorImpl& view);

// The autograd side of one in-place write into `self` (dispatch.h update / overwrite), in three
// steps around the write of the data. The write is recorded when grad mode is on and self, its
// base or the new value requires grad:
// - a value computed from self's old value (add_, exp_, clamp_) gives self the value's history
//   (y.add_(1): y.grad_fn is AddBackward0, whose edge leads to y's old history);
// - a value that replaces the old one (copy_, fill_, y[i] = v) gives self a function named as
//   PyTorch's (CopyBackwards, FillBackward2, ...) whose gradient goes to the value and zeros to
//   the old value;
// - a write through a view gives the view's base a CopySlices, which runs that function on the
//   view's region of the base's gradient and passes the rest to the base's old history; the view
//   itself (and every other view of the base) then re-derives its grad_fn from the base's.
class InplaceWrite {
 public:
  struct Kind {
    // null: the value is computed from the old one; else the name of the function that replaces it.
    const char* overwrite = nullptr;
    // Overwrites: whether next_functions lists the value (not for fill_ / zero_ with a number).
    bool lists_value = true;
    // Computed values: next_function_sequence() before the value was computed.
    uint64_t since = 0;
  };

  // `value` is the value as given: its gradient, for an overwrite, is summed to its shape (null
  // for a fill with a number). Raises PyTorch's errors for writes autograd cannot record: into a
  // leaf that requires grad or a view of one, through a view made in no_grad mode, through a view
  // whose place in its base is not known.
  InplaceWrite(TensorImpl& self, Tensor value, Kind kind);
  bool tracked() const noexcept { return tracked_; }
  // Before the data is written; `value` is the new value in self's dtype and shape. Reads the
  // histories the write needs, and values that the functions computing it saved from self keep
  // their current value (SavedTensor::preserve).
  void before(const Tensor& value);
  // After the data is written and the version bumped: the new histories.
  void after();

 private:
  TensorImpl& self_;
  Tensor source_;
  Kind kind_;
  bool tracked_ = false;
  std::optional<Layout> region_;  // self's place in its base (views)
  BaseHistory* dead_base_ = nullptr;  // the history a dead base left its views (WeakTensor)
  // Read by before():
  uint64_t version_before_ = 0;
  Edge old_;          // self's history
  Edge value_edge_;   // the value's history
  Dims value_shape_;  // and its shape and dtype
  DType value_dtype_ = DType::Float32;
  Ref<GradFn> adopt_;  // the value's function, when it stands for the write
};


}  // namespace loom
