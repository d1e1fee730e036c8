#include "lazy/tensor.h"

#include "lazy/autograd.h"
#include "lazy/sync.h"
#include "runtime/error.h"
#include "runtime/free_list.h"

namespace loom {

TensorImpl::TensorImpl(Array value, bool lazy) : value_(std::move(value)), lazy_(lazy) {
  device_ = value_.device();
}

TensorImpl::TensorImpl(Ref<Node> node, Device device) : node_(std::move(node)), device_(device), lazy_(true) {
  register_pending(this);
}

void* TensorImpl::operator new(size_t size) { return FreeList<TensorImpl>::allocate(size); }
void TensorImpl::operator delete(void* p, size_t size) noexcept { FreeList<TensorImpl>::release(p, size); }

TensorImpl::~TensorImpl() {
  if (weak_) weak_->target = nullptr;
  if (in_registry) unregister_pending(this);
  // An in-place result nobody can see through this tensor may still be visible through other
  // views of the destination storage: it must be written anyway.
  if (node_ && destination_) register_orphan_write(std::move(node_), std::move(*destination_));
}

Ref<Node> TensorImpl::read_node() {
  check_usable();
  if (node_) return node_;
  if (!input_leaf_) input_leaf_ = Node::input(value_);
  return input_leaf_;
}

void TensorImpl::rebind(Ref<Node> node) {
  LOOM_CHECK(lazy_, Runtime, "internal: rebind of an eager tensor");
  if (!node_) {
    // Materialized until now: the new value goes into the existing storage at the sync. The
    // storage's version moves now, so values saved for backward from any view of it are stale.
    destination_ = value_;
    value_.storage->add_pending_write();
    value_.storage->bump_version();
    value_ = Array{};
    input_leaf_.reset();
  }
  node_ = std::move(node);
  ++version_;
  if (!in_registry) register_pending(this);
}

void TensorImpl::materialize(Array value) {
  if (destination_) {
    destination_->storage->remove_pending_write();
    destination_.reset();
  }
  value_ = std::move(value);
  node_.reset();
  input_leaf_.reset();
  view_.reset();  // a materialized view aliases its base's storage: no bookkeeping needed anymore
  if (in_registry) unregister_pending(this);
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
  error_ = std::move(error);
  if (in_registry) unregister_pending(this);
}

Ref<WeakTensor> TensorImpl::weak() {
  if (!weak_) {
    weak_ = make_ref<WeakTensor>();
    weak_->target = this;
  }
  return weak_;
}

}  // namespace loom
