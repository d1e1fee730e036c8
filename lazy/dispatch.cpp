#include "lazy/dispatch.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <vector>

#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "lazy/sync.h"
#include "runtime/error.h"
#include "runtime/metrics.h"

namespace loom {
namespace {

bool same_placement(const TensorImpl& a, const TensorImpl& b) {
  return a.is_lazy() == b.is_lazy() && a.device() == b.device();
}

// The trace cut. Nodes recorded on this thread per device since its last sync: slot 0 is the CPU
// backend, 1 + i is cuda:i (as the pending registries, lazy/sync.cpp).
constexpr size_t kDeviceSlots = 65;
thread_local int64_t recorded_since_sync[kDeviceSlots] = {};

size_t slot_of(Device d) noexcept {
  return d.is_cpu() ? 0 : std::min<size_t>(1 + static_cast<size_t>(d.index), kDeviceSlots - 1);
}

int64_t read_max_trace_nodes() {
  const char* v = std::getenv("LOOM_MAX_TRACE_NODES");
  if (!v || !*v) return 100'000;
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v, &end, 10);
  LOOM_CHECK(errno == 0 && end != v && *end == '\0' && n >= 0, Value,
             "LOOM_MAX_TRACE_NODES must be a number of nodes (0: no limit), got '", v, "'");
  return n == 0 ? INT64_MAX : n;
}

int64_t max_trace_nodes() {
  static const int64_t n = read_max_trace_nodes();  // a bad value raises at every lazy op
  return n;
}

}  // namespace

void note_synced(Device device) noexcept { recorded_since_sync[slot_of(device)] = 0; }

// A view of a pending base whose base changed since the view was taken re-derives its node, so
// it reads the base's current value (functionalization of views).
// A base that died leaves its last value for its views (WeakTensor::last_node).
void refresh_view(TensorImpl& t) {
  const auto& info = t.view_info();
  if (!info) return;
  const WeakTensor& weak = *info->base;
  uint64_t generation = weak.target ? weak.target->generation() : weak.last_generation;
  if (generation == info->base_generation || (!weak.target && !weak.last_node)) return;
  Ref<Node> base_node = weak.target ? weak.target->read_node() : weak.last_node;
  Attrs attrs;
  attrs.push_back(info->relative.offset);
  for (int64_t s : info->relative.strides) attrs.push_back(s);
  Node* in = base_node.get();
  Ref<Node> node =
      Node::make(OpId::View, {base_node->dtype(), Dims(info->relative.sizes)}, std::move(attrs), {&in, 1});
  ViewInfo fresh = *info;
  fresh.base_generation = generation;
  t.rebind(std::move(node), /*write=*/false);
  t.set_view_info(std::move(fresh));
}

namespace {

Attrs view_attrs(const Layout& relative) {
  Attrs attrs;
  attrs.push_back(relative.offset);
  for (int64_t s : relative.strides) attrs.push_back(s);
  return attrs;
}

// The node through which an op reads t, which t keeps (its pending node, or the input leaf over
// its value that it caches): TensorImpl::read_node() without taking a reference where t is
// pending and this thread's (the common case).
Node* node_to_read(TensorImpl& t) {
  if (t.is_pending() && !t.in_flight.load(std::memory_order_relaxed) && recorded_here(t) && !t.is_errored())
    [[likely]]
    return t.node();
  return t.read_node().get();
}

}  // namespace

std::string placement_name(const TensorImpl& t) {
  return t.is_lazy() ? "lazy:" + t.device().str() : t.device().str();
}

namespace {

// PyTorch's CPU scalars: a zero-dim tensor of the eager CPU joins an op on another placement as
// the number it holds, as in PyTorch a zero-dim CPU tensor joins a CUDA op (nanoGPT compares the
// best loss it resumed with map_location="lazy" against a fresh CPU mean; a script on "lazy"
// multiplies by a CPU scalar it built without a device). Only that case: any other tensor on
// another placement still fails. The scalar moves through ops::to, so autograd reaches it back.
bool is_cpu_scalar(const TensorImpl& t) noexcept { return !t.is_lazy() && t.device().is_cpu() && t.ndim() == 0; }

// apply() found two placements among its tensors (the rare path, kept out of apply's loop).
Tensor apply_moving_cpu_scalars(OpId op, std::span<const Arg> args, Attrs attrs, std::optional<Placement> placement) {
  const TensorImpl* target = nullptr;  // the first tensor that is no CPU scalar: the op's placement
  for (const Arg& a : args)
    if (a.tensor && !is_cpu_scalar(*a.tensor)) {
      target = a.tensor.get();
      break;
    }
  std::vector<Arg> moved;  // (SmallVec holds trivially copyable items only)
  moved.reserve(args.size());
  for (const Arg& a : args) {
    if (a.tensor && !same_placement(*target, *a.tensor)) {
      if (!is_cpu_scalar(*a.tensor))
        LOOM_FAIL(Runtime, "Expected all tensors to be on the same device, but found at least two devices, ",
                  placement_name(*target), " and ", placement_name(*a.tensor), "!");
      Arg b = a;
      b.tensor = ops::to(a.tensor, a.tensor->dtype(), target->device(), target->is_lazy());
      moved.push_back(std::move(b));
    } else {
      moved.push_back(a);
    }
  }
  return apply(op, std::span<const Arg>(moved.data(), moved.size()), std::move(attrs), placement);
}

}  // namespace

Tensor apply(OpId op, std::span<const Arg> args, Attrs attrs, std::optional<Placement> placement) {
  const OpDef& def = op_def(op);
  // Mode and device come from the first tensor argument; all others must agree.
  TensorImpl* first = nullptr;
  for (const Arg& a : args) {
    if (!a.tensor) continue;
    a.tensor->check_usable();
    if (!first) {
      first = a.tensor.get();
    } else if (!same_placement(*first, *a.tensor)) {
      return apply_moving_cpu_scalars(op, args, std::move(attrs), placement);
    }
  }
  LOOM_CHECK(first || placement, Runtime, "internal: op ", def.name, " has no tensor argument and no placement");
  bool lazy = first ? first->is_lazy() : placement->lazy;
  Device device = first ? first->device() : placement->device;

  int64_t* recorded = nullptr;  // this thread's count of the device's nodes (read once: a TLS access)
  if (lazy) {
    // A trace past the limit is synced now, as it stands, and recording goes on on top of its
    // results (dispatch.h, note_synced).
    recorded = &recorded_since_sync[slot_of(device)];
    if (*recorded >= max_trace_nodes()) sync(device);
    // A read of memory that a pending in-place op will overwrite must see the write: sync
    // first (rare: it takes an alias of a tensor modified in place).
    for (const Arg& a : args)
      if (a.tensor && !a.tensor->is_pending() && pending_write_overlaps(a.tensor->array()))
        sync_writes_into(a.tensor->array());
    for (const Arg& a : args)
      if (a.tensor) refresh_view(*a.tensor);
  }

  SmallVec<InputMeta, 4> metas;
  for (const Arg& a : args) {
    if (a.tensor) metas.push_back({false, ScalarKind::Float, a.tensor->dtype(), a.tensor->sizes()});
    else metas.push_back({true, a.scalar.kind(), DType::Float32, {}, a.scalar});
  }
  OutputMeta meta = def.infer(std::span<const InputMeta>(metas.data(), metas.size()), attrs);
  // Eager mode raises this when it allocates the result; lazy mode may never allocate it (a fused
  // ones(2**62).sum() would run for years), so it raises here, at the same line.
  if (lazy && !allocatable(meta.shape, meta.dtype)) check_allocatable(meta.shape, meta.dtype, device);
  // Autograd needs the attributes after the node took them.
  std::optional<Attrs> grad_attrs;
  if (def.backward && grad_enabled())
    for (const Arg& a : args)
      if (a.tensor && requires_grad(*a.tensor)) {
        grad_attrs = attrs;
        break;
      }

  if (lazy) {
    // A tensor's node is held by the tensor (which `args` keeps alive) until the new node has
    // taken its own reference: only a number's fresh leaf needs holding here. (Two reference
    // count changes fewer per tensor argument: atomic, several nanoseconds each.)
    SmallVec<Node*, 4> inputs;
    for (const Arg& a : args) inputs.push_back(a.tensor ? node_to_read(*a.tensor) : nullptr);
    // A read that settled another thread's pending tensor (rare) may have moved a pending
    // argument read before it on: read it again.
    for (bool again = true; again;) {
      again = false;
      for (size_t i = 0; i < args.size(); ++i)
        if (args[i].tensor && args[i].tensor->is_pending() && args[i].tensor->node() != inputs[i]) {
          inputs[i] = node_to_read(*args[i].tensor);
          again = true;
        }
    }
    for (size_t i = 0; i < args.size(); ++i)
      if (!args[i].tensor) inputs[i] = Node::scalar(args[i].scalar, args[i].foldable).leak();
    auto release_numbers = [&] {
      for (size_t i = 0; i < args.size(); ++i)
        if (!args[i].tensor) Ref<Node>::adopt(inputs[i]);
    };
    Ref<Node> node;
    try {
      node = Node::make(op, std::move(meta), std::move(attrs), {inputs.data(), inputs.size()});
    } catch (...) {
      release_numbers();
      throw;
    }
    release_numbers();
    ++*recorded;
    Tensor out = make_ref<TensorImpl>(std::move(node), device);
    if (grad_attrs) record_op(op, *grad_attrs, args, *out);
    return out;
  }

  SmallVec<Operand, 4> operands;
  for (const Arg& a : args) operands.push_back(a.tensor ? Operand::of(a.tensor->array()) : Operand::of(a.scalar));
  Array out;
  if (device.is_cpu()) {
    out = empty(meta.shape, meta.dtype, device);
    def.run_cpu({operands.data(), operands.size()}, attrs, out);
    count(metrics().kernel_launches);
  } else {
    // A GPU's kernels are the executor's: it runs the op as a one-node trace (graph/cuda_executor.h).
    out = executor().run_op(op, {operands.data(), operands.size()}, attrs, meta, device);
  }
  Tensor result = make_tensor(std::move(out));
  if (grad_attrs) record_op(op, *grad_attrs, args, *result);
  return result;
}

namespace detail {

Tensor view_of_pending(const Tensor& base, Layout relative) {
  refresh_view(*base);
  Ref<Node> in = base->read_node();
  Node* raw = in.get();
  Dims sizes = relative.sizes;
  Ref<Node> node = Node::make(OpId::View, {base->dtype(), std::move(sizes)}, view_attrs(relative), {&raw, 1});
  Tensor view = make_ref<TensorImpl>(std::move(node), base->device());
  view->set_view_info(ViewInfo{base->weak(), std::move(relative), base->generation()});
  return view;
}

Tensor copy_pending(const Tensor& t) {
  Attrs attrs;
  attrs.push_back(static_cast<int64_t>(t->dtype()));
  return apply(OpId::Cast, {Arg(t)}, std::move(attrs));
}

}  // namespace detail

void check_no_internal_overlap(const TensorImpl& self) {
  const Layout* layout = self.known_layout();
  LOOM_CHECK(!layout || !layout->has_internal_overlap(), Runtime,
             "unsupported operation: more than one element of the written-to tensor refers to a single memory "
             "location. Please clone() the tensor before performing the operation.");
}

namespace {

// Writes into one storage through different tensors apply in program order: the first pending
// write of a tensor into memory that another tensor will write at the next sync syncs that write
// first (rare: two overlapping views of one tensor, both written in place). Writes into
// disjoint parts (x[:2] = a; x[2:] = b through two views) stay in one trace.
void sync_before_aliased_write(TensorImpl& self) {
  const auto& info = self.view_info();
  TensorImpl& target = info && info->base->target ? *info->base->target : self;
  if (!target.is_pending() && pending_write_overlaps(target.array())) sync_writes_into(target.array());
}

}  // namespace

void write_into(TensorImpl& self, const Tensor& value, const InplaceWrite::Kind& kind) {
  // An errored tensor overwritten whole (zero_, fill_, copy_) reads nothing of its old value: it
  // is usable again (a .grad errored by a failed step, zeroed by zero_grad(set_to_none=False)).
  if (self.is_errored() && kind.overwrite && !self.is_view() && self.is_lazy() && !value->is_errored())
    self.revive(ops::full(self.sizes(), Scalar(int64_t{0}), self.dtype(), {self.device(), true})->read_node());
  self.check_usable();
  value->check_usable();
  // A tensor another thread recorded, or that a sync computes now, is settled first (lazy/sync.h).
  if (self.is_lazy()) {
    if (self.is_pending()) prepare_foreign_read(self);
    if (TensorImpl* base = self.view_info() ? self.view_info()->base->target : nullptr; base && base->is_pending())
      prepare_foreign_read(*base);
  }
  LOOM_CHECK(same_placement(self, *value), Runtime, "Expected all tensors to be on the same device, but found at "
             "least two devices, ", placement_name(self), " and ", placement_name(*value), "!");
  Dims target(self.sizes());
  Dims got(value->sizes());
  LOOM_CHECK(broadcast_shapes(target, got) == target, Runtime, "output with shape ", format_dims(target),
             " doesn't match the broadcast shape ", format_dims(broadcast_shapes(target, got)));
  // PyTorch's can_cast: no float -> integer, no number -> bool.
  DType from = value->dtype(), to = self.dtype();
  bool ok = !(is_floating(from) && !is_floating(to)) && !(from != DType::Bool && to == DType::Bool);
  LOOM_CHECK(ok, Runtime, "result type ", dtype_name(from), " can't be cast to the desired output type ",
             dtype_name(to));
  InplaceWrite history(self, value, kind);
  // The new value in self's dtype and shape, through ops so autograd sees the conversion.
  Tensor v = ops::cast(value, to);
  if (got != target) v = ops::expand(v, target);
  history.before(v);
  if (!self.is_lazy()) {
    // Copying overlapping memory element by element would read values already overwritten
    // (t[1:] = t[:-1]): read from a snapshot instead.
    const Array& src = v->array();
    if (may_overlap(src, self.array())) copy_(self.array(), copy_to(src, src.dtype, src.device()));
    else copy_(self.array(), src);
  } else {
    sync_before_aliased_write(self);
    const auto& info = self.view_info();
    if (info && info->base->target) {
      // Write through to the base, then re-derive self from it.
      TensorImpl& base = *info->base->target;
      refresh_view(base);
      Ref<Node> b = base.read_node();
      Ref<Node> n = v->read_node();
      Node* ins[2] = {b.get(), n.get()};
      Ref<Node> scattered = Node::make(OpId::ViewScatter, {base.dtype(), Dims(base.sizes())},
                                       view_attrs(info->relative), {ins, 2});
      base.rebind(std::move(scattered));
      ViewInfo fresh = *info;
      self.rebind(std::move(n));
      fresh.base_generation = base.generation();  // self already holds the value the base now shows
      self.set_view_info(std::move(fresh));
    } else if (info && info->base->last_node) {
      // The base died: the write goes into what its views share of it, as into a live base.
      WeakTensor& weak = *info->base;
      Ref<Node> n = v->read_node();
      Node* ins[2] = {weak.last_node.get(), n.get()};
      weak.last_node = Node::make(OpId::ViewScatter, {weak.last_node->dtype(), Dims(weak.last_node->shape())},
                                  view_attrs(info->relative), {ins, 2});
      ViewInfo fresh = *info;
      self.rebind(std::move(n));
      fresh.base_generation = ++weak.last_generation;
      self.set_view_info(std::move(fresh));
    } else {
      self.rebind(v->read_node());
    }
  }
  self.bump_version();
  history.after();
}

}  // namespace loom
