// TensorImpl: the identity behind a user-visible tensor, eager or lazy.
//
// Python objects, views and autograd records refer to a TensorImpl, not to its value, so an
// in-place op can rebind what a tensor is (DESIGN decision 5) and every holder sees it.
//
// States:
//   eager        always materialized: `array()` is the value; ops on it run at once.
//   lazy, materialized   `array()` holds the value; ops on it record nodes that read it.
//   lazy, pending        `node()` will produce the value at the next sync of its device.
//   lazy, errored        computing the value failed at a sync (an index out of range, ...):
//                        reading or using the tensor raises that error; dtype and shape remain.
// A lazy tensor is pending from the op that made it until a sync point materializes it. While
// pending it is linked into the registry of live pending tensors of the thread that recorded it
// and of its device (lazy/sync.h), and while a sync computes it, it is in flight: other threads
// that need it wait for that sync.
//
// In-place on a lazy tensor rebinds it to a new node. If it was materialized, the node's result
// is written back into its existing storage at the sync (`destination()`), so parameters and
// optimizer state keep their addresses across steps. The first in-place write since the tensor
// was last materialized (or made) also notes what it replaced: the value (the storage's, or the
// pending node), the version and the autograd history. A sync that fails puts them back (lazy/
// sync.h: roll_back, rewind), so a failed step leaves its tensors as they were.
//
// Views of a pending tensor are pending tensors over a View node. Each remembers its base (weakly)
// and its layout relative to the base, so an in-place op on the view writes through to the base,
// and a view read after its base changed re-derives itself from the base (functionalization).
#pragma once

#include <atomic>
#include <memory>
#include <optional>

#include "lazy/node.h"
#include "lazy/version_counter.h"
#include "runtime/array.h"
#include "runtime/error.h"
#include "runtime/ref.h"

namespace loom {

class TensorImpl;
class GradFn;
struct AutogradMeta;
struct Registry;  // lazy/sync.cpp

// A reference to a TensorImpl that does not keep it alive (views of pending tensors hold one to
// their base). The impl clears `target` when it dies.
struct BaseHistory;  // lazy/autograd.h

struct WeakTensor final : RefCounted {
  WeakTensor();
  ~WeakTensor();
  TensorImpl* target = nullptr;
  // target's version counter once it has one, kept after target dies: the views holding this
  // reference share it (TensorImpl::version_counter).
  Ref<VersionCounter> counter;
  // When target dies while something else holds this reference (its views), what they keep of
  // it so that target stays one value for them, as a live base is: its last value, which they
  // re-derive themselves from after a write through one of them (refresh_view) and which such a
  // write goes into (write_into), with its generation; and its autograd history, which such a
  // write extends and a stale view's history is re-derived from (lazy/autograd_inplace.cpp).
  // Kept until a sync: the views then materialize apart from one another (lazy/sync.h).
  Ref<Node> last_node;
  uint64_t last_generation = 0;
  std::unique_ptr<BaseHistory> last_history;
};

struct ViewInfo {
  Ref<WeakTensor> base;
  Layout relative;           // over the base's elements in row-major order
  uint64_t base_generation;  // the base's generation this view was derived from
};

class TensorImpl final : public RefCounted {
 public:
  // A materialized tensor; `lazy` makes it a lazy tensor on the array's device.
  explicit TensorImpl(Array value, bool lazy = false);
  // A pending lazy tensor on `device` (its backend).
  TensorImpl(Ref<Node> node, Device device);
  // A tensor owns autograd functions that own tensors (saved values, gradients), chains as deep
  // as the program's loops: released without recursion (runtime/ref.h).
  static constexpr bool kReleaseIteratively = true;
  ~TensorImpl();
  // Every op makes one and most die at the next step (runtime/free_list.h).
  static void* operator new(size_t size);
  static void operator delete(void* p, size_t size) noexcept;

  bool is_lazy() const noexcept { return lazy_; }
  bool is_pending() const noexcept { return static_cast<bool>(node_); }
  Device device() const noexcept { return device_; }
  DType dtype() const noexcept { return node_ ? node_->dtype() : value_.dtype; }
  IntSpan sizes() const noexcept { return node_ ? node_->shape() : value_.sizes(); }
  int64_t ndim() const noexcept { return static_cast<int64_t>(sizes().size()); }
  int64_t numel() const noexcept { return numel_of(sizes()); }

  // The materialized value. Pending tensors must be materialized first (lazy/sync.h); an errored
  // tensor has none (an array of its dtype and shape without storage).
  const Array& array() const noexcept { return value_; }
  Node* node() const noexcept { return node_.get(); }

  // The node through which a new op reads this tensor: the pending node, or an Input leaf over
  // the materialized value (made once and reused, so a trace reads each tensor once). Raises
  // the error of an errored tensor.
  Ref<Node> read_node();
  // In-place update of a lazy tensor: from now on its value is what `node` computes. A
  // materialized tensor keeps its storage (the result is written into it at the sync). `write`:
  // a user-visible write (false when a view re-derives itself from its base), whose first one
  // since the tensor was materialized notes what a failed sync puts back (see the top).
  void rebind(Ref<Node> node, bool write = true);
  // How many times rebind() gave this tensor a new node: views of a pending tensor compare it to
  // know when to re-derive themselves (internal to lazy mode; Tensor._version is version()).
  uint64_t generation() const noexcept { return generation_; }

  // Tensor._version: in-place writes seen by this tensor's data (lazy/version_counter.h).
  uint64_t version() const noexcept;
  // The counter, made on first use (most tensors are never written in place, saved or viewed).
  // A view shares its base's, found through the base when first asked for: making a view makes
  // no counter.
  const Ref<VersionCounter>& version_counter();
  // An in-place write (eager or lazy) happened: one step per user-visible op.
  void bump_version() { version_counter()->bump(); }
  // Where a pending in-place result must be written: the storage it had when materialized.
  const std::optional<Array>& destination() const noexcept { return destination_; }

  // Called by the sync that computed this tensor's value.
  void materialize(Array value);
  // Called by a sync that failed: the pending in-place writes since the tensor was last
  // materialized are undone. roll_back: a tensor with a destination is materialized with it
  // again (its storage was never written); rewind: a tensor made pending since (no destination)
  // goes back to the node it had before its first write (`node_before_writes()`). Both put back
  // the autograd history, and move the version counter on (VersionCounter::undo_writes_since).
  void roll_back();
  void rewind();
  Node* node_before_writes() const noexcept { return written_ && written_->noted ? written_->node.get() : nullptr; }

  // Whether this tensor was made by a view op (of any tensor, eager or lazy), and its base: the
  // tensor the chain of views started from (PyTorch's Tensor._base), never itself a view. A view
  // of a tensor that was not pending keeps its base alive, as in PyTorch. A view of a pending
  // tensor holds it weakly (a pending tensor kept alive would be computed by every sync, lazy/
  // sync.h): view_base() is null once such a base died; its views then share what it left in
  // the weak reference (WeakTensor::last_node) until they are computed.
  bool is_view() const noexcept { return base_ || weak_base_; }
  TensorImpl* view_base() const noexcept { return base_ ? base_.get() : weak_base_ ? weak_base_->target : nullptr; }
  // The weak reference to a pending base (null for other tensors): what it leaves once it died.
  const WeakTensor* weak_base() const noexcept { return weak_base_.get(); }
  WeakTensor* weak_base() noexcept { return weak_base_.get(); }
  // Makes this tensor a view of t (of t's base when t is a view).
  void mark_view_of(TensorImpl& t);
  // Autograd refuses to record writes through views made in no_grad mode, as PyTorch does (the
  // view ops mark them, lazy/ops.cpp).
  bool made_in_no_grad_mode() const noexcept { return made_in_no_grad_mode_; }
  void mark_made_in_no_grad_mode() noexcept { made_in_no_grad_mode_ = true; }
  // Ends being a view (detach() and `.data` are the same data, but not views, as in PyTorch).
  // With `keep_version_counter` the counter stays shared (detach()); without, this tensor starts
  // a counter of its own (`.data`, whose writes autograd does not see).
  void unmark_view(bool keep_version_counter);
  // Called by the sync whose computation of this tensor failed: from now on reading or using it
  // raises `error`. A pending in-place write it carried is dropped (its destination keeps the old
  // values).
  void set_error(std::shared_ptr<const Error> error);
  bool is_errored() const noexcept { return static_cast<bool>(error_); }
  const std::shared_ptr<const Error>& error() const noexcept { return error_; }
  // Raises the error of an errored tensor; a no-op for the others. Every read and use of a
  // tensor's value goes through it (materialize, read_node, apply, views, in-place writes).
  void check_usable() const {
    if (error_) [[unlikely]] throw Error(*error_);
  }
  // An errored tensor that is about to be overwritten whole (zero_, fill_, copy_: nothing of its
  // old value is read) becomes a usable pending tensor again, of the value `node` computes.
  void revive(Ref<Node> node);

  // Views of pending tensors.
  const std::optional<ViewInfo>& view_info() const noexcept { return view_; }
  // The strides of this tensor's elements where they are known: a materialized array's layout,
  // or a pending view's layout over its base's elements; null for other pending tensors (they
  // are produced dense).
  const Layout* known_layout() const noexcept {
    return !is_pending() ? &value_.layout : view_ ? &view_->relative : nullptr;
  }
  void set_view_info(ViewInfo info) { view_ = std::move(info); }
  Ref<WeakTensor> weak();

  // Autograd state (lazy/autograd.h); null until the tensor takes part in autograd.
  AutogradMeta* autograd_meta() const noexcept { return autograd_.get(); }
  std::unique_ptr<AutogradMeta>& autograd_slot() noexcept { return autograd_; }

  // The registry this pending tensor is linked into (null when not pending) and its links, and
  // whether a sync is computing it (lazy/sync.cpp owns them).
  Registry* registry = nullptr;
  TensorImpl* prev_pending = nullptr;
  TensorImpl* next_pending = nullptr;
  std::atomic<bool> in_flight{false};

 private:
  // What the first in-place write since the last materialization replaced (see the top).
  struct BeforeWrites {
    bool noted = false;  // false between windows (the allocation is kept: parameters are written every step)
    Ref<Node> node;      // the pending value it replaced; null when the tensor was materialized
    uint64_t version = 0;
    Ref<GradFn> grad_fn;
    bool requires_grad = false;
  };
  void restore_before_writes();
  Ref<Node> read_node_slow();

  Array value_;
  Ref<Node> node_;
  Ref<Node> input_leaf_;  // cached read_node() of a materialized lazy tensor
  std::optional<Array> destination_;
  std::optional<ViewInfo> view_;
  Ref<WeakTensor> weak_;
  Ref<TensorImpl> base_;        // views of tensors that were not pending
  Ref<WeakTensor> weak_base_;   // views of pending tensors
  Ref<VersionCounter> counter_;  // null until first used; a view's is its base's
  std::unique_ptr<AutogradMeta> autograd_;
  std::shared_ptr<const Error> error_;
  std::unique_ptr<BeforeWrites> written_;  // null until the first write since materialized
  Device device_;
  uint64_t generation_ = 0;
  bool lazy_ = false;
  bool made_in_no_grad_mode_ = false;
};

using Tensor = Ref<TensorImpl>;

inline Tensor make_tensor(Array value, bool lazy = false) { return make_ref<TensorImpl>(std::move(value), lazy); }

}  // namespace loom
