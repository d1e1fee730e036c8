// How an op runs: one entry point for every primitive, eager or lazy.
//
// apply() checks that the tensors agree on mode (eager / lazy) and device, runs the op's shape
// and dtype rule (so bad input raises here, at the line that called the op, in both modes),
// then either runs the CPU kernel at once (eager) or records a node (lazy, O(1): no trace walk,
// no hashing beyond the new node).
#pragma once

#include <array>
#include <optional>

#include "lazy/autograd.h"
#include "lazy/op.h"
#include "lazy/tensor.h"

namespace loom {

// An argument of an op: a tensor or a Python number. It holds a reference to its tensor, so an
// Arg built from a temporary (cast(x, Bool)) stays valid.
struct Arg {
  Tensor tensor;
  Scalar scalar{int64_t{0}};
  bool foldable = true;  // lazy mode may fold 0 and 1 into the trace (not for random states)

  Arg(Tensor t) : tensor(std::move(t)) {}
  Arg(TensorImpl* t) : tensor(t) {}
  Arg(Scalar s) : scalar(s) {}
  Arg(double v) : scalar(v) {}
  Arg(int64_t v) : scalar(v) {}
  Arg(int v) : scalar(static_cast<int64_t>(v)) {}
  Arg(bool v) : scalar(v) {}
  bool is_tensor() const noexcept { return static_cast<bool>(tensor); }
  // A number that must stay a trace parameter whatever its value.
  static Arg param(Scalar s) {
    Arg a(s);
    a.foldable = false;
    return a;
  }
};

// Where an op with no tensor arguments (a creation op) runs.
struct Placement {
  Device device;
  bool lazy = false;
};

// Where t lives: what a creation op made for t (zeros_like, a mask for t) must use.
inline Placement placement_of(const TensorImpl& t) { return {t.device(), t.is_lazy()}; }
inline Placement placement_of(const Tensor& t) { return placement_of(*t); }

// torch.result_type of op arguments: tensors by dimensionality, Python numbers as weak operands.
inline DType result_type(std::initializer_list<Arg> args) {
  ResultType r;
  for (const Arg& a : args) {
    if (a.is_tensor()) r.add_tensor(a.tensor->dtype(), a.tensor->ndim());
    else r.add_scalar(a.scalar.kind());
  }
  return r.get();
}

Tensor apply(OpId op, std::span<const Arg> args, Attrs attrs = {}, std::optional<Placement> placement = {});
inline Tensor apply(OpId op, std::initializer_list<Arg> args, Attrs attrs = {}) {
  return apply(op, std::span<const Arg>(args.begin(), args.size()), std::move(attrs));
}

// Args for one apply() that borrow the tensors of Args their caller holds for the call: copying
// an Arg retains its tensor and dropping it releases it, two atomic read-modify-writes (15-20
// cycles each) per tensor, and the elementwise entry points (ops::unary, ops::binary) are on
// the path of nearly every recorded op. apply() only reads its span (whatever it keeps, it
// copies), so the borrowed references are given back without a release.
template <size_t N>
class BorrowedArgs {
 public:
  template <typename... From>
    requires(sizeof...(From) == N)
  explicit BorrowedArgs(const From&... from) : args_{borrow(from)...} {}
  ~BorrowedArgs() {
    for (Arg& a : args_) a.tensor.leak();
  }
  BorrowedArgs(const BorrowedArgs&) = delete;
  BorrowedArgs& operator=(const BorrowedArgs&) = delete;

  std::span<const Arg> span() const noexcept { return args_; }

 private:
  static Arg borrow(const Arg& from) {
    Arg a(from.scalar);
    a.foldable = from.foldable;
    a.tensor = Ref<TensorImpl>::adopt(from.tensor.get());
    return a;
  }
  static Arg borrow(const Tensor& from) {
    Arg a(Scalar(int64_t{0}));
    a.tensor = Ref<TensorImpl>::adopt(from.get());
    return a;
  }

  std::array<Arg, N> args_;
};

// A view of t: `transform` maps a layout to the view's layout (runtime/layout.h's view algebra),
// returning std::optional<Layout>. Eager and materialized tensors get a view of their storage;
// pending tensors a View node that remembers its base, so in-place writes through the view reach
// the base. A transform returns nullopt only for reshape, when the layout cannot express the
// result without a copy: the result is then a copy, as in PyTorch.
template <typename Transform>
Tensor view_of(const Tensor& t, Transform&& transform);

// In-place writes. self's value becomes the new value (broadcast to self's shape, cast to self's
// dtype) and its version counter moves by one. They raise if the value's shape does not broadcast
// to self's or its dtype cannot be cast safely, if either is errored (lazy/tensor.h), and where
// autograd cannot record the write (autograd.h InplaceWrite, which says what it records).
//
// write_into: the common path of the two below; `kind` says how the value relates to the old one.
void write_into(TensorImpl& self, const Tensor& value, const InplaceWrite::Kind& kind);
// update: the value is `compute()`, computed from self's old value (add_, exp_, clamp_, t[i] *= 2).
template <typename Compute>
void update(TensorImpl& self, Compute&& compute) {
  uint64_t since = next_function_sequence();  // what compute() makes is part of this write
  Tensor value = compute();
  write_into(self, value, InplaceWrite::Kind{.since = since});
}
// overwrite: `value` replaces the old value (copy_, t[i] = v); `backward_name` is PyTorch's name
// of the write's backward ("CopyBackwards").
inline void overwrite(TensorImpl& self, const Tensor& value, const char* backward_name) {
  write_into(self, value, InplaceWrite::Kind{.overwrite = backward_name});
}

// PyTorch's check before an op writes self in place element by element (arithmetic, unary ops,
// clamp_, copy_, ...; not fill_, masked_fill_ or index_put_): no two of self's indices may share
// memory (an expanded tensor), since each write would clobber the others' inputs.
void check_no_internal_overlap(const TensorImpl& self);

// The trace cut, as PyTorch's lazy tensors do it. A program that records many ops without a sync
// (a loop of a million `x = x * w`) would make one trace of them all, and lowering a trace costs
// memory and time in proportion to it. So when this thread has recorded LOOM_MAX_TRACE_NODES
// ops (default 100,000; 0: no limit) on a device since its last sync, the next op syncs the
// device first: the pending tensors are materialized as they stand and the op records on top of
// them. The values are the same; the program runs as several traces. A sync of the device
// restarts the count (note_synced), so a training loop that syncs every step is never cut. The
// cost per op is one counter compare. An invalid LOOM_MAX_TRACE_NODES raises at every lazy op.
void note_synced(Device device) noexcept;

// Re-derives a view of a pending tensor from its base if the base changed since (a no-op
// otherwise). Reads of views and syncs call it, so a view always shows its base's value.
void refresh_view(TensorImpl& t);

// The mode and device of a tensor as PyTorch would print it: "cpu", "cuda:0", "lazy:cpu".
std::string placement_name(const TensorImpl& t);

namespace detail {
Tensor view_of_pending(const Tensor& t, Layout relative);
Tensor copy_pending(const Tensor& t);
}  // namespace detail

template <typename Transform>
Tensor view_of(const Tensor& t, Transform&& transform) {
  t->check_usable();
  if (!t->is_pending()) {
    const Array& a = t->array();
    std::optional<Layout> l = transform(a.layout);
    if (l) {
      Tensor v = make_tensor(a.view_as(std::move(*l)), t->is_lazy());
      v->mark_view_of(*t);
      return v;
    }
    // Only reshape gets here: the layout needs a copy.
    Array c = contiguous(a);
    return make_tensor(c.view_as(*transform(c.layout)), t->is_lazy());
  }
  const auto& info = t->view_info();
  Layout base_layout = info && info->base->target ? info->relative : Layout::contiguous(t->sizes());
  if (std::optional<Layout> l = transform(base_layout)) {
    // Functionalized over the pending base the chain started from; a view of t all the same.
    Tensor v = detail::view_of_pending(info && info->base->target ? Tensor(info->base->target) : t, std::move(*l));
    v->mark_view_of(*t);
    return v;
  }
  // Only reshape gets here: a view of a copy is a copy.
  Tensor copy = detail::copy_pending(t);
  return detail::view_of_pending(copy, *transform(Layout::contiguous(copy->sizes())));
}

}  // namespace loom
