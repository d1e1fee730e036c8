#include "lazy/sync.h"

#include "lazy/dispatch.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <unordered_map>
#include <vector>

#include "runtime/cuda/cuda_device.h"
#include "runtime/error.h"
#include "runtime/hash.h"
#include "runtime/metrics.h"

namespace loom {
namespace {

// Slot 0 is the CPU backend, slot 1 + i is cuda:i.
constexpr size_t kSlots = 65;

struct OrphanWrite {
  Ref<Node> node;
  Array destination;
};

struct Registry {
  TensorImpl* head = nullptr;
  int64_t count = 0;
  std::vector<OrphanWrite> orphans;
};

std::array<Registry, kSlots>& registries() {
  static auto* r = new std::array<Registry, kSlots>();  // never destroyed, see allocator_for
  return *r;
}

Registry& registry_for(Device d) {
  size_t slot = d.is_cpu() ? 0 : 1 + static_cast<size_t>(d.index);
  LOOM_CHECK(slot < kSlots, Runtime, "no lazy registry for device ", d.str());
  return registries()[slot];
}

std::atomic<uint64_t> last_key{0};

std::unique_ptr<Executor>& installed() {
  static auto* e = new std::unique_ptr<Executor>();
  return *e;
}

// Builds the trace of a set of root nodes: iterative post-order (chains can be 100k deep), with
// structurally equal nodes merged.
class TraceBuilder {
 public:
  explicit TraceBuilder(Trace& trace) : trace_(trace), epoch_(++last_epoch()) { by_structure_.reserve(256); }

  int add(Node* root) {
    if (seen(root)) return root->trace_index;
    std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->inputs().size()) {
        Node* in = node->input(next++);
        if (!seen(in)) stack.push_back({in, 0});
        continue;
      }
      node->trace_index = intern(node);
      node->trace_epoch = epoch_;
      stack.pop_back();
    }
    return root->trace_index;
  }

 private:
  static uint64_t& last_epoch() {
    static uint64_t e = 0;
    return e;
  }
  bool seen(const Node* n) const { return n->trace_epoch == epoch_; }

  // The index of node in the trace, reusing an earlier structurally equal node.
  int intern(Node* node) {
    SmallVec<int32_t, 3> ins;
    uint64_t key = node->hash();
    for (Node* in : node->inputs()) {
      ins.push_back(in->trace_index);
      key = hash_combine(key, static_cast<uint64_t>(ins.back()));
    }
    // Leaves are distinct values even when their descriptions match; only interior nodes and
    // folded constants merge.
    bool mergeable = node->op() == OpId::Constant || !node->is_leaf();
    if (mergeable) {
      auto [lo, hi] = by_structure_.equal_range(key);
      for (auto it = lo; it != hi; ++it) {
        Node* other = trace_.nodes[it->second];
        if (other->op() == node->op() && other->dtype() == node->dtype() && other->attrs() == node->attrs() &&
            Dims(other->shape()) == Dims(node->shape()) && trace_.inputs[it->second] == ins &&
            (node->op() != OpId::Constant || other->scalar().as_double() == node->scalar().as_double()))
          return it->second;
      }
    }
    int index = static_cast<int>(trace_.nodes.size());
    trace_.nodes.push_back(node);
    trace_.inputs.push_back(std::move(ins));
    if (mergeable) by_structure_.emplace(key, index);
    return index;
  }

  Trace& trace_;
  uint64_t epoch_;
  std::unordered_multimap<uint64_t, int> by_structure_;
};

}  // namespace

// The trace key: every node's hash and wiring, which Input leaves share storage, and where each
// output goes. Equal keys mean the same computation on inputs of the same description.
uint64_t trace_key(const Trace& t) {
  uint64_t k = hash_combine(0x10014, static_cast<uint64_t>(t.device.type) * 64 + t.device.index);
  // Leaf storages by the position of the first leaf on each (a map: a trace may read 100k leaves).
  std::unordered_map<const Storage*, int64_t> leaf_storage;
  int64_t leaves = 0;
  auto storage_index = [&](const Storage* s) -> int64_t {
    auto it = leaf_storage.find(s);
    return it == leaf_storage.end() ? -1 : it->second;
  };
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node* n = t.nodes[i];
    k = hash_combine(k, n->hash());
    for (int32_t in : t.inputs[i]) k = hash_combine(k, static_cast<uint64_t>(in));
    if (n->op() == OpId::Input) {
      const Storage* s = n->array().storage.get();
      k = hash_combine(k, static_cast<uint64_t>(storage_index(s) + 1));  // aliasing pattern
      leaf_storage.emplace(s, leaves++);
    }
  }
  for (const Trace::Output& o : t.outputs) {
    k = hash_combine(k, static_cast<uint64_t>(o.node));
    if (o.destination) {
      k = hash_combine(k, static_cast<uint64_t>(storage_index(o.destination->storage.get()) + 2));
      k = hash_combine(k, o.destination->is_contiguous());
    }
  }
  return k;
}

namespace {

// A view of a pending base that will be materialized in the same sync is not an output of its
// own: it becomes a view of the base's storage afterwards, the base's new contiguous storage or
// the destination an in-place base is written into (so later writes through the view reach the
// base, as in eager mode). Where no strides place the view in a strided destination, it stays
// an output of its own.
TensorImpl* aliasable_base(const TensorImpl& t) {
  const auto& v = t.view_info();
  if (!v || !v->base->target) return nullptr;
  TensorImpl* base = v->base->target;
  if (!base->is_pending() || base->generation() != v->base_generation) return nullptr;
  if (base->destination() && !place_within(base->destination()->layout, v->relative)) return nullptr;
  if (aliasable_base(*base)) return nullptr;  // the base is derived itself: not materialized first
  return base;
}

// The trace computing `roots` (outputs first, in order) and then the orphan writes.
Trace build_trace(Device device, const std::vector<Tensor>& roots, const std::vector<OrphanWrite>& orphans) {
  Trace trace;
  trace.device = device;
  TraceBuilder builder(trace);
  for (const Tensor& t : roots) trace.outputs.push_back({builder.add(t->node()), t->destination()});
  for (const OrphanWrite& o : orphans) trace.outputs.push_back({builder.add(o.node.get()), o.destination});
  trace.key = trace_key(trace);
  return trace;
}

// Whether each output of `trace` depends on node `failed` (nodes are in post-order).
std::vector<bool> outputs_reached(const Trace& trace, int failed) {
  std::vector<bool> reached(trace.nodes.size(), false);
  reached[static_cast<size_t>(failed)] = true;
  for (size_t i = static_cast<size_t>(failed) + 1; i < trace.nodes.size(); ++i)
    for (int32_t in : trace.inputs[i]) reached[i] = reached[i] || reached[static_cast<size_t>(in)];
  std::vector<bool> out;
  for (const Trace::Output& o : trace.outputs) out.push_back(reached[static_cast<size_t>(o.node)]);
  return out;
}

}  // namespace

Array Executor::run_op(OpId op, std::span<const Operand>, const Attrs&, const OutputMeta&, Device device) {
  LOOM_FAIL(NotImplemented, "eager ", op_name(op), " on ", device.str(), " is not implemented by this executor");
}

NodeError::NodeError(const Error& cause, int node, OpId op)
    : Error(cause.kind(), detail::concat(cause.what(), " (computed by the lazy op ", op_name(op), " at a sync)")),
      node_(node) {}

void register_pending(TensorImpl* t) {
  Registry& r = registry_for(t->device());
  t->prev_pending = nullptr;
  t->next_pending = r.head;
  if (r.head) r.head->prev_pending = t;
  r.head = t;
  t->in_registry = true;
  ++r.count;
}

void unregister_pending(TensorImpl* t) {
  Registry& r = registry_for(t->device());
  if (t->prev_pending) t->prev_pending->next_pending = t->next_pending;
  else r.head = t->next_pending;
  if (t->next_pending) t->next_pending->prev_pending = t->prev_pending;
  t->prev_pending = t->next_pending = nullptr;
  t->in_registry = false;
  --r.count;
}

void register_orphan_write(Ref<Node> node, Array destination) {
  registry_for(destination.device()).orphans.push_back({std::move(node), std::move(destination)});
}

int64_t pending_count(Device device) { return registry_for(device).count; }

bool find_overlapping_pending_write(const Array& region) {
  Registry& r = registry_for(region.device());
  for (TensorImpl* t = r.head; t; t = t->next_pending)
    if (t->destination() && t->destination()->storage == region.storage && may_overlap(*t->destination(), region))
      return true;
  return std::ranges::any_of(r.orphans, [&](const OrphanWrite& o) {
    return o.destination.storage == region.storage && may_overlap(o.destination, region);
  });
}

uint64_t last_trace_key() { return last_key.load(std::memory_order_relaxed); }

void sync(Device device) {
  note_synced(device);  // the trace cut counts from here (dispatch.h)
  Registry& r = registry_for(device);
  if (!r.head && r.orphans.empty()) return;
  // Roots: live pending tensors (keeping them alive while the executor runs), then orphan writes.
  std::vector<Tensor> roots;
  std::vector<Tensor> derived_views;
  for (TensorImpl* t = r.head; t; t = t->next_pending) refresh_view(*t);
  for (TensorImpl* t = r.head; t; t = t->next_pending) (aliasable_base(*t) ? derived_views : roots).emplace_back(t);
  std::vector<OrphanWrite> orphans = std::move(r.orphans);
  r.orphans.clear();

  std::vector<Array> results;
  std::vector<Tensor> failed;  // kept alive until their views are told
  while (!roots.empty() || !orphans.empty()) {
    Trace trace = build_trace(device, roots, orphans);
    try {
      results = executor().run(trace);
    } catch (const NodeError& e) {
      if (e.node() < 0 || static_cast<size_t>(e.node()) >= trace.nodes.size()) {
        r.orphans.insert(r.orphans.begin(), orphans.begin(), orphans.end());
        throw;
      }
      // The outputs computed from the failing node fail with it (orphan writes are dropped:
      // their storage keeps its old values); the others run again without them.
      std::vector<bool> reached = outputs_reached(trace, e.node());
      auto error = std::make_shared<const Error>(e);
      std::vector<Tensor> live_roots;
      for (size_t i = 0; i < roots.size(); ++i) {
        if (!reached[i]) {
          live_roots.push_back(std::move(roots[i]));
          continue;
        }
        roots[i]->set_error(error);
        failed.push_back(std::move(roots[i]));
      }
      std::vector<OrphanWrite> live_orphans;
      for (size_t k = 0; k < orphans.size(); ++k) {
        if (reached[roots.size() + k]) orphans[k].destination.storage->remove_pending_write();
        else live_orphans.push_back(std::move(orphans[k]));
      }
      roots = std::move(live_roots);
      orphans = std::move(live_orphans);
      continue;
    } catch (...) {
      r.orphans.insert(r.orphans.begin(), orphans.begin(), orphans.end());  // nothing is lost
      throw;
    }
    count(metrics().traces);
    last_key.store(trace.key, std::memory_order_relaxed);
    break;
  }
  for (size_t i = 0; i < roots.size(); ++i) roots[i]->materialize(std::move(results[i]));
  for (const OrphanWrite& o : orphans) o.destination.storage->remove_pending_write();  // written
  for (const Tensor& v : derived_views) {
    TensorImpl& base = *v->view_info()->base->target;
    if (base.is_errored()) {
      v->set_error(base.error());
      continue;
    }
    std::optional<Layout> l = place_within(base.array().layout, v->view_info()->relative);
    LOOM_CHECK(l, Runtime, "internal: a view cannot be placed in its materialized base");
    v->materialize(base.array().view_as(std::move(*l)));
  }
}

void sync_all() {
  for (size_t slot = 0; slot < kSlots; ++slot) {
    Registry& r = registries()[slot];
    if (r.head || !r.orphans.empty()) sync(slot == 0 ? kCPU : Device(DeviceType::CUDA, static_cast<int16_t>(slot - 1)));
  }
}

void synchronize_all() {
  sync_all();
  if (installed()) {
    executor().synchronize(kCPU);
    // Eager GPU work is queued too, not only traces: wait for every GPU loom has used.
    for (int i = 0; i < cuda::device_count(); ++i)
      if (cuda::used(i)) executor().synchronize(Device(DeviceType::CUDA, static_cast<int16_t>(i)));
  }
}

void materialize(TensorImpl& t) {
  t.check_usable();
  // A materialized lazy tensor whose storage a pending in-place op will write (through an alias)
  // is not up to date either.
  if (t.is_pending() || (t.is_lazy() && pending_write_overlaps(t.array()))) sync(t.device());
  t.check_usable();  // computing it may have failed
}

void install_executor(std::unique_ptr<Executor> e) { installed() = std::move(e); }

Executor& executor() {
  LOOM_CHECK(installed(), Runtime, "no lazy executor is installed (graph/ registers one when loom._C loads)");
  return *installed();
}

}  // namespace loom
