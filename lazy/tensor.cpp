#include "lazy/tensor.h"

#include "lazy/autograd.h"
#include "lazy/capture.h"
#include "lazy/sync.h"
#include "runtime/error.h"
#include "runtime/free_list.h"

namespace loom {

TensorImpl::TensorImpl(Array value, bool lazy) : value_(std::move(value)), lazy_(lazy) {
  device_ = value_.device();
  if (lazy) [[likely]]
    if (StepRecording* r = recording()) [[unlikely]] r->note_created(*this);  // lazy/capture.h
}

TensorImpl::TensorImpl(Ref<Node> node, Device device) : node_(std::move(node)), device_(device), lazy_(true) {
  register_pending(this);
}

void* TensorImpl::operator new(size_t size) { return FreeList<TensorImpl>::allocate(size); }
void TensorImpl::operator delete(void* p, size_t size) noexcept { FreeList<TensorImpl>::release(p, size); }

WeakTensor::WeakTensor() = default;
WeakTensor::~WeakTensor() = default;

TensorImpl::~TensorImpl() {
  if (weak_) {
    // Views outlive this base: they keep what they share of it (WeakTensor). A base without
    // autograd state leaves no history (a write through a view makes one: InplaceWrite).
    if (node_ && !is_view() && weak_->use_count() > 1) {
      weak_->last_node = node_;
      weak_->last_generation = generation_;
      if (autograd_) weak_->last_history = last_history_of(*this);
    }
    weak_->target = nullptr;
  }
  // An in-place result nobody can see through this tensor may still be visible through other
  // views of the destination storage: it must be written anyway, in its program order (with the
  // registry it was recorded in).
  if (node_ && destination_) {
    uint64_t before = written_ && written_->noted ? written_->version : version();
    register_orphan_write(*this, std::move(node_), std::move(*destination_), counter_, before);
  }
  if (registry) unregister_pending(this);
}

Ref<Node> TensorImpl::read_node() {
  check_usable();
  if (node_) {
    if (in_flight.load(std::memory_order_relaxed) || !recorded_here(*this)) [[unlikely]]
      return read_node_slow();
    return node_;
  }
  if (!input_leaf_) input_leaf_ = Node::input(value_);
  if (StepRecording* r = recording()) [[unlikely]] r->note_read(*this);  // lazy/capture.h
  return input_leaf_;
}

// Another thread recorded this tensor, or a sync computes it now: it is computed first (or
// waited for), so that no trace of this thread reads another's pending state (lazy/sync.h).
Ref<Node> TensorImpl::read_node_slow() {
  Tensor keep(this);
  prepare_foreign_read(*this);
  check_usable();
  if (node_) return node_;
  if (!input_leaf_) input_leaf_ = Node::input(value_);
  if (StepRecording* r = recording()) [[unlikely]] r->note_read(*this);
  return input_leaf_;
}

void TensorImpl::rebind(Ref<Node> node, bool write) {
  LOOM_CHECK(lazy_, Runtime, "internal: rebind of an eager tensor");
  // A write into a tensor another thread recorded (or a sync computes now) lands after it.
  if (write && node_ && (in_flight.load(std::memory_order_relaxed) || !recorded_here(*this))) [[unlikely]]
    prepare_foreign_read(*this);
  if (write && !(written_ && written_->noted)) {
    // The first write since the tensor was materialized or made: what a failed sync puts back.
    if (!written_) written_ = std::make_unique<BeforeWrites>();
    written_->noted = true;
    written_->node = node_;
    written_->version = version();
    const AutogradMeta* m = autograd_.get();
    written_->grad_fn = m ? m->grad_fn : Ref<GradFn>();
    written_->requires_grad = m && m->requires_grad;
  }
  if (!node_) {
    if (write)
      if (StepRecording* r = recording()) [[unlikely]] r->note_first_write(*this);  // lazy/capture.h
    // Materialized until now: the new value goes into the existing storage at the sync.
    destination_ = value_;
    value_.storage->add_pending_write();
    value_ = Array{};
    input_leaf_.reset();
  }
  node_ = std::move(node);
  ++generation_;
  if (!registry) register_pending(this);
}

void TensorImpl::materialize(Array value) {
  if (destination_) {
    destination_->storage->remove_pending_write();
    destination_.reset();
  }
  value_ = std::move(value);
  node_.reset();
  input_leaf_.reset();
  // A view of a base that died is computed apart from it (with the base's other views: a sync
  // computes every pending tensor), so the base's last value is not needed anymore, and would
  // keep alive every input it was computed from; a history a write made stale is re-derived
  // while the view's place in the base is known (lazy/autograd_inplace.cpp).
  if (view_ && !view_->base->target) {
    view_->base->last_node.reset();
    if (autograd_) current_grad_fn(*this);
  }
  view_.reset();  // a materialized view aliases its base's storage: no bookkeeping needed anymore
  if (written_) *written_ = BeforeWrites{};
  if (registry) unregister_pending(this);
}

void TensorImpl::restore_before_writes() {
  if (!written_ || !written_->noted) return;
  if (AutogradMeta* m = autograd_.get()) {
    m->grad_fn = std::move(written_->grad_fn);
    m->requires_grad = written_->requires_grad;
  }
  if (counter_) counter_->undo_writes_since(written_->version);
  else if (is_view()) version_counter()->undo_writes_since(written_->version);
  ++generation_;  // views taken of the written value re-derive themselves from this one
  *written_ = BeforeWrites{};
}

void TensorImpl::roll_back() {
  LOOM_CHECK(destination_, Runtime, "internal: roll_back of a tensor with no destination");
  restore_before_writes();
  destination_->storage->remove_pending_write();
  value_ = std::move(*destination_);
  destination_.reset();
  node_.reset();
  input_leaf_.reset();
  view_.reset();
  if (registry) unregister_pending(this);
}

void TensorImpl::rewind() {
  LOOM_CHECK(node_before_writes(), Runtime, "internal: rewind of a tensor with no earlier pending value");
  Ref<Node> before = written_->node;
  restore_before_writes();
  node_ = std::move(before);
}

void TensorImpl::set_error(std::shared_ptr<const Error> error) {
  Layout layout = Layout::contiguous(sizes());
  DType d = dtype();
  if (destination_) {
    destination_->storage->remove_pending_write();
    destination_.reset();
  }
  value_ = Array{Ref<Storage>(), std::move(layout), d};
  node_.reset();
  input_leaf_.reset();
  view_.reset();
  if (written_) *written_ = BeforeWrites{};
  error_ = std::move(error);
  if (registry) unregister_pending(this);
}

void TensorImpl::revive(Ref<Node> node) {
  LOOM_CHECK(error_ && lazy_, Runtime, "internal: revive of a tensor that is not errored");
  error_.reset();
  value_ = Array{};
  node_ = std::move(node);
  ++generation_;
  register_pending(this);
}

uint64_t TensorImpl::version() const noexcept {
  if (counter_) return counter_->value;
  if (TensorImpl* base = view_base()) return base->version();
  return weak_base_ && weak_base_->counter ? weak_base_->counter->value : 0;
}

const Ref<VersionCounter>& TensorImpl::version_counter() {
  if (!counter_) {
    if (TensorImpl* base = view_base()) {
      counter_ = base->version_counter();
    } else if (weak_base_) {
      // The base died: its counter, if it had one, is in the weak reference, which the other
      // views of that base share; the first of them to need one makes it there.
      if (!weak_base_->counter) weak_base_->counter = make_ref<VersionCounter>();
      counter_ = weak_base_->counter;
    } else {
      counter_ = make_ref<VersionCounter>();
    }
    if (weak_) weak_->counter = counter_;  // for the views holding this tensor weakly
  }
  return counter_;
}

void TensorImpl::mark_view_of(TensorImpl& t) {
  if (t.is_view()) {
    base_ = t.base_;
    weak_base_ = t.weak_base_;
  } else if (t.is_pending()) {
    weak_base_ = t.weak();
  } else {
    base_ = Ref<TensorImpl>(&t);
  }
  counter_ = t.counter_;  // shared at once when it exists; else found through the base when needed
}

void TensorImpl::unmark_view(bool keep_version_counter) {
  if (keep_version_counter) version_counter();
  else counter_.reset();
  base_.reset();
  weak_base_.reset();
  made_in_no_grad_mode_ = false;
}

Ref<WeakTensor> TensorImpl::weak() {
  if (!weak_) {
    weak_ = make_ref<WeakTensor>();
    weak_->target = this;
    weak_->counter = counter_;
  }
  return weak_;
}

}  // namespace loom
