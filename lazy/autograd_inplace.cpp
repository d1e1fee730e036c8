// Autograd of in-place writes and of views, as PyTorch does it (lazy/autograd.h InplaceWrite).
//
// An in-place op computes its new value out of place (add(y, 1) for y.add_(1)) and writes it into
// the tensor (dispatch.h update / overwrite). Autograd then makes the tensor's history the new
// value's: y.grad_fn becomes that AddBackward0, whose edge leads to y's old history.
//
// A write through a view also changes the view's base. The base's new grad_fn is a CopySlices
// around the write's function: of the base's gradient, the view's region goes through that
// function (whose gradient for the view's old value lands back in the region, for the base's old
// history) and the rest to the base's old history. Every view of that base may hold new values,
// so a view remembers the version of the (shared) counter when its grad_fn was made; a view whose
// counter has moved on re-derives its grad_fn as a view of its base's current history
// (AsStridedBackward0) the next time it is used.
//
// The values that an in-place op's own computation saved from the tensor it overwrites (y.sin_()
// saves y, y.clamp_(0, 1) saves it in its Maximum) are kept as they were (SavedTensor::preserve)
// rather than failing backward's version check: PyTorch's in-place ops save the original self.
// Values saved by earlier ops are not: y.add_(y.sin()) fails at backward, as in PyTorch. (One
// difference: y.mul_(y) saved y as both operands, and loom keeps both where PyTorch keeps only
// self and fails; loom's gradient is exact.)
#include <unordered_set>

#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "runtime/error.h"

namespace loom {
namespace {

// When region_in_base knows nothing, for the errors that say so.
constexpr const char* kUnknownRegion =
    "a view merging dims that its base orders otherwise, a lazy view of a view written in place since it was taken, "
    "or a lazy view computed after its base was dropped";

// Zeros of `shape`, in the dtype and placement of a gradient.
Tensor zeros(IntSpan shape, const Tensor& grad) {
  return ops::full(shape, Scalar(int64_t{0}), grad->dtype(), {grad->device(), grad->is_lazy()});
}

// A view's history re-derived from its base's: the gradient lands in the view's region of zeros
// of the base's shape.
class AsStridedBackward final : public GradFn {
 public:
  AsStridedBackward(IntSpan base_shape, Layout region) : shape_(base_shape), region_(std::move(region)) {}
  std::string name() const override { return "AsStridedBackward0"; }
  std::vector<Tensor> apply(const Tensor& grad) override { return {ops::view_scatter(zeros(shape_, grad), region_, grad)}; }

 private:
  Dims shape_;
  Layout region_;
};

// The base after a write through its view. `fn` is the write's function over the view's elements,
// whose first edge is the view's old value; next = {the base's old history, fn's other edges}.
class CopySlices final : public GradFn {
 public:
  CopySlices(Layout region, Ref<GradFn> fn) : region_(std::move(region)), fn_(std::move(fn)) {}
  std::string name() const override { return "CopySlices"; }

  std::vector<Tensor> apply(const Tensor& grad) override {
    std::vector<Tensor> res = fn_->apply(ops::region_of(grad, region_));
    std::vector<Tensor> grads(next.size());
    // The view's old value took part in the base's old value: its gradient goes there, in place
    // of the region's (zeros where fn gives it none: an overwrite).
    if (next[0].fn)
      grads[0] = ops::view_scatter(grad, region_, !res.empty() && res[0] ? res[0] : zeros(region_.sizes, grad));
    for (size_t i = 1; i < next.size() && i < res.size(); ++i) grads[i] = res[i];
    return grads;
  }
  void release_saved() override { fn_->release_saved(); }

 private:
  Layout region_;
  Ref<GradFn> fn_;
};

// A write whose new value is not computed from the old one (copy_, fill_, zero_, y[i] = v): next =
// {the old value's history, the value's (where listed)}. The value takes the gradient (summed to
// its shape, as it was broadcast); the old value gets zeros, as PyTorch's CopyBackwards gives them
// (so its leaves end with a zero .grad).
class OverwriteBackward final : public GradFn {
 public:
  OverwriteBackward(const char* name, Dims value_shape, DType value_dtype)
      : name_(name), shape_(std::move(value_shape)), dtype_(value_dtype) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> apply(const Tensor& grad) override {
    std::vector<Tensor> grads(next.size());
    if (next[0].fn) grads[0] = zeros(grad->sizes(), grad);
    if (next.size() > 1 && next[1].fn) grads[1] = ops::cast(ops::sum_to(grad, shape_), dtype_);
    return grads;
  }

 private:
  const char* name_;
  Dims shape_;
  DType dtype_;
};

}  // namespace

std::optional<Layout> region_in_base(const TensorImpl& t) {
  if (!t.is_view()) return Layout::contiguous(t.sizes());
  const TensorImpl* base = t.view_base();
  // A pending view functionalized over this very base knows its place (also once it died).
  if (const auto& info = t.view_info(); info && info->base.get() == t.weak_base()) return info->relative;
  if (!base) return std::nullopt;
  // Else both must have storage: their array, or the array a pending write will go into.
  auto array_of = [](const TensorImpl& x) -> const Array* {
    const Array* a = x.is_pending() ? (x.destination() ? &*x.destination() : nullptr) : &x.array();
    return a && a->storage ? a : nullptr;
  };
  const Array* view = array_of(t);
  const Array* whole = array_of(*base);
  if (!view || !whole || view->storage != whole->storage) return std::nullopt;
  return region_within(whole->layout, view->layout);
}

std::unique_ptr<BaseHistory> last_history_of(TensorImpl& base) {
  auto h = std::make_unique<BaseHistory>();
  h->sizes = Dims(base.sizes());
  h->requires_grad = requires_grad(base);
  if (const AutogradMeta* m = base.autograd_meta()) h->grad_fn = m->grad_fn;
  if (h->requires_grad) h->edge = gradient_edge(base);
  return h;
}

bool StaleBase::requires_grad() const noexcept { return alive ? loom::requires_grad(*alive) : dead->requires_grad; }

StaleBase stale_view_base(const TensorImpl& t) noexcept {
  if (!t.is_view() || t.made_in_no_grad_mode() || !is_floating(t.dtype())) return {};
  StaleBase base{t.view_base(), nullptr};
  if (!base.alive) {
    const WeakTensor* weak = t.weak_base();
    if (!weak || !weak->last_history) return {};
    base.dead = weak->last_history.get();
  }
  const AutogradMeta* m = t.autograd_meta();
  if (m && m->view) return m->view->version != t.version() ? base : StaleBase{};
  // Never had a history: its base did not require grad when it was made. Only a write gives the
  // base a grad_fn later.
  const AutogradMeta* bm = base.alive ? base.alive->autograd_meta() : nullptr;
  bool has_history = base.alive ? bm && bm->grad_fn : static_cast<bool>(base.dead->grad_fn);
  return has_history ? base : StaleBase{};
}

const Ref<GradFn>& current_grad_fn(TensorImpl& t) {
  static const Ref<GradFn> none;
  StaleBase base = stale_view_base(t);
  if (!base) {
    const AutogradMeta* m = t.autograd_meta();
    return m ? m->grad_fn : none;
  }
  AutogradMeta& m = autograd(t);
  if (base.requires_grad()) {
    IntSpan base_shape = base.alive ? base.alive->sizes() : IntSpan(base.dead->sizes);
    std::optional<Layout> region = region_in_base(t);
    LOOM_CHECK(region, NotImplemented, "a view of shape ", format_dims(t.sizes()), " is used after its base of shape ",
               format_dims(base_shape), " was modified in place, and autograd cannot tell where its elements lie in "
               "the base (", kUnknownRegion, "); clone() the view before the write, or use the base");
    auto fn = make_ref<AsStridedBackward>(base_shape, *region);
    fn->next.push_back(base.alive ? gradient_edge(*base.alive) : base.dead->edge);
    set_history(t, std::move(fn));
  } else {
    m.grad_fn.reset();
    m.requires_grad = false;
  }
  m.view = ViewHistory{t.version()};
  return m.grad_fn;
}

void record_view(TensorImpl& view) { autograd(view).view = ViewHistory{view.version()}; }

// ---- in-place writes ----

InplaceWrite::InplaceWrite(TensorImpl& self, Tensor value, Kind kind)
    : self_(self), source_(std::move(value)), kind_(kind) {
  if (!grad_enabled() || !is_floating(self.dtype())) return;
  TensorImpl* base = self.is_view() ? self.view_base() : nullptr;
  // A write through a view of a base that died goes into what the base left its views
  // (dispatch.cpp write_into), and so into the history it left them: made here when the base
  // died outside autograd and the write is the first that autograd tracks.
  WeakTensor* dead = !base && self.is_view() && self.weak_base() && self.weak_base()->last_node ? self.weak_base()
                                                                                                 : nullptr;
  dead_base_ = dead ? dead->last_history.get() : nullptr;
  tracked_ = requires_grad(self) || (source_ && requires_grad(*source_)) || (base && requires_grad(*base)) ||
             (dead_base_ && dead_base_->requires_grad);
  if (!tracked_) return;
  if (dead && !dead_base_) {
    dead->last_history = std::make_unique<BaseHistory>();
    dead->last_history->sizes = Dims(dead->last_node->shape());
    dead_base_ = dead->last_history.get();
  }
  LOOM_CHECK(!(self.is_view() && self.made_in_no_grad_mode()), Runtime,
             "A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that "
             "this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both "
             "the view and the inplace either both inside the no_grad block (if you don't want the inplace to be "
             "tracked) or both outside (if you want the inplace to be tracked).");
  LOOM_CHECK(!(is_leaf(self) && requires_grad(self)), Runtime,
             "a leaf Variable that requires grad is being used in an in-place operation.");
  if (!base && !dead_base_) return;
  LOOM_CHECK(base ? !(is_leaf(*base) && requires_grad(*base)) : !(!dead_base_->grad_fn && dead_base_->requires_grad),
             Runtime, "a view of a leaf Variable that requires grad is being used in an in-place operation.");
  region_ = region_in_base(self);
  LOOM_CHECK(region_, NotImplemented, "in-place write through a view of shape ", format_dims(self.sizes()),
             ": autograd cannot tell where its elements lie in its base of shape ",
             format_dims(base ? base->sizes() : IntSpan(dead_base_->sizes)), " (",
             kUnknownRegion, "); write into the base, or clone() the view first");
}

void InplaceWrite::before(const Tensor& value) {
  if (!tracked_) return;
  // Every history is read before the write: a view of self (a source, self itself) re-derives
  // its grad_fn from the old value's history now, and again after the write.
  version_before_ = self_.version();
  old_ = requires_grad(self_) ? gradient_edge(self_) : Edge{};
  const Tensor& given = kind_.overwrite ? source_ : value;
  if (given && requires_grad(*given)) value_edge_ = gradient_edge(*given);
  value_shape_ = Dims(given ? given->sizes() : self_.sizes());
  value_dtype_ = given ? given->dtype() : self_.dtype();
  if (kind_.overwrite || !value_edge_.fn) return;
  // The write may stand as the value's own function: one computed from self, which inside a
  // CopySlices must start at self's old value (a primitive op on self does; a composite's last op
  // may not).
  GradFn* own = value_edge_.fn.get();
  bool starts_at_old = !own->next.empty() && own->next[0].fn == old_.fn && own->next[0].input_nr == old_.input_nr;
  if (own->sequence >= kind_.since && (!self_.is_view() || !region_ || starts_at_old)) adopt_ = value_edge_.fn;
  // The functions that computed value (made since kind_.since, reachable from its grad_fn) and
  // saved self's current value keep it.
  if (own->sequence < kind_.since) return;
  std::vector<GradFn*> stack{own};
  std::unordered_set<GradFn*> seen{own};
  while (!stack.empty()) {
    GradFn* fn = stack.back();
    stack.pop_back();
    preserve_saved(*fn, self_);
    for (const Edge& e : fn->next)
      if (e.fn && e.fn->sequence >= kind_.since && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
}

void InplaceWrite::after() {
  if (!tracked_) return;
  // The write's function over self's elements: the value's own (add_: its AddBackward0), or one
  // made here, for an overwrite or a computed value whose function cannot stand for the write (its
  // dependence on the old value is then in its own history).
  Ref<GradFn> fn = adopt_;
  if (fn) {
    result_written_into(*fn, self_);
  } else {
    fn = make_ref<OverwriteBackward>(kind_.overwrite ? kind_.overwrite : "CopyBackwards", value_shape_, value_dtype_);
    fn->next.push_back(old_);
    if (!kind_.overwrite || kind_.lists_value) fn->next.push_back(value_edge_);
  }
  TensorImpl* base = self_.is_view() ? self_.view_base() : nullptr;
  if ((base || dead_base_) && region_) {
    auto slices = make_ref<CopySlices>(*region_, fn);
    if (base) slices->next.push_back(requires_grad(*base) ? gradient_edge(*base) : Edge{});
    else slices->next.push_back(dead_base_->requires_grad ? dead_base_->edge : Edge{});
    slices->next.insert(slices->next.end(), fn->next.begin() + 1, fn->next.end());
    if (base) {
      set_history(*base, std::move(slices));
    } else {
      set_history(*dead_base_, std::move(slices));
    }
    // self shows the base's new value: its grad_fn is re-derived from the base's now, while
    // self's place in the base is known (a sync may materialize self apart from a base that
    // dies, lazy/sync.h).
    AutogradMeta& m = autograd(self_);
    if (!m.view) m.view = ViewHistory{version_before_};
    current_grad_fn(self_);
    return;
  }
  if (adopt_) {
    // value's own function, made before the write: self is now another name for its result.
    AutogradMeta& m = autograd(self_);
    m.grad_fn = std::move(fn);
    m.requires_grad = true;
  } else {
    set_history(self_, std::move(fn));
  }
  // A view whose base is gone stands alone: its history is current.
  if (AutogradMeta* m = self_.autograd_meta(); m->view) m->view->version = self_.version();
}

}  // namespace loom
