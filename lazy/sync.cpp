#include "lazy/sync.h"

#include "lazy/capture.h"
#include "lazy/dispatch.h"
#include "lazy/provenance.h"
#include "lazy/sync_index.h"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <unordered_set>
#include <vector>

#include "runtime/blocking.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/environment.h"
#include "runtime/error.h"
#include "runtime/hash.h"
#include "runtime/metrics.h"

namespace loom {

namespace detail {
thread_local SyncCause sync_reason = SyncCause::Other;
thread_local int sync_reason_depth = 0;
}  // namespace detail

struct OrphanWrite {
  Ref<Node> node;
  Array destination;
  Ref<VersionCounter> counter;  // what a failed sync undoes (TensorImpl::roll_back)
  uint64_t version = 0;
};

struct ThreadRegistries;

// The pending tensors one thread recorded on one device, and the orphan writes among them.
struct Registry {
  Device device;
  ThreadRegistries* owner;  // null once the thread ended (its tensors may live on in others)
  pthread_t thread;         // the owner (compared without a thread-local lookup: every op asks)
  TensorImpl* head = nullptr;
  int64_t count = 0;
  std::vector<OrphanWrite> orphans;
  // While a sync computes some of this registry's tensors (under flight_mutex()): how many syncs,
  // and the destinations of the orphan writes the registry's sync in flight makes.
  int64_t in_flight = 0;
  std::vector<Array> orphans_in_flight;
};

namespace {

// Slot 0 is the CPU backend, slot 1 + i is cuda:i.
constexpr size_t kSlots = 65;

size_t slot_of(Device d) {
  size_t slot = d.is_cpu() ? 0 : 1 + static_cast<size_t>(d.index);
  LOOM_CHECK(slot < kSlots, Runtime, "no lazy registry for device ", d.str());
  return slot;
}

}  // namespace

struct ThreadRegistries {
  std::array<Registry*, kSlots> slots{};
};

namespace {

// Every registry of every thread, for the searches across threads (under `mu`). A registry of an
// ended thread stays while it holds pending tensors or orphan writes.
struct AllRegistries {
  std::mutex mu;
  std::vector<Registry*> list;
};

AllRegistries& all_registries() {
  static auto* a = new AllRegistries();  // never destroyed: tensors may die at process exit
  return *a;
}

thread_local ThreadRegistries* mine = nullptr;  // this thread's, made on first use
thread_local bool thread_ended = false;

// A live registry's thread is alive, so its id is no other live thread's.
bool is_mine(const Registry& r) noexcept { return r.owner && pthread_equal(r.thread, pthread_self()); }

bool holds_nothing(const Registry& r) noexcept {
  return !r.head && r.orphans.empty() && r.in_flight == 0 && r.orphans_in_flight.empty();
}

// Frees a registry whose thread ended once nothing is left in it (all_registries().mu held).
void free_if_abandoned_locked(Registry* r) {
  if (r->owner || !holds_nothing(*r)) return;
  auto& list = all_registries().list;
  list.erase(std::remove(list.begin(), list.end(), r), list.end());
  delete r;
}

// When a thread ends, its registries lose their owner: the empty ones are freed, the others stay
// for the tensors other threads still hold (those are foreign to every thread from then on).
struct ThreadEnd {
  bool armed = false;
  ~ThreadEnd() {
    thread_ended = true;
    if (!mine) return;
    std::lock_guard lock(all_registries().mu);
    for (Registry*& r : mine->slots) {
      if (!r) continue;
      r->owner = nullptr;
      free_if_abandoned_locked(r);
      r = nullptr;
    }
    delete mine;
    mine = nullptr;
  }
};
thread_local ThreadEnd thread_end;

Registry& my_registry(Device d) {
  if (!mine) [[unlikely]] {
    mine = new ThreadRegistries();
    if (!thread_ended) thread_end.armed = true;  // makes the thread's ThreadEnd
  }
  Registry*& r = mine->slots[slot_of(d)];
  if (!r) [[unlikely]] {
    r = new Registry{d, mine, pthread_self()};
    std::lock_guard lock(all_registries().mu);
    all_registries().list.push_back(r);
  }
  return *r;
}

Registry* my_registry_if_any(Device d) { return mine ? mine->slots[slot_of(d)] : nullptr; }

// ---- flights: syncs in progress, and waiting for them ----

std::mutex& flight_mutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::condition_variable& flight_landed() {
  static auto* cv = new std::condition_variable();
  return *cv;
}

thread_local int bookkeeping = 0;  // > 0 while this thread prepares a sync: no foreign reads are adopted
thread_local int running = 0;      // > 0 while this thread's sync runs a trace (it cannot wait for itself)

struct Scoped {
  int& depth;
  explicit Scoped(int& d) : depth(d) { ++depth; }
  ~Scoped() { --depth; }
};

// Waits (the embedding's lock released) until `done()`, which reads flight state under
// flight_mutex(). Interruptible: nothing has changed when it throws.
template <typename Done>
void wait_for_flights(Done&& done) {
  {
    std::lock_guard lock(flight_mutex());
    if (done()) return;
  }
  LOOM_CHECK(running == 0, Runtime,
             "a lazy tensor was used while this thread's own sync computes it (from a signal handler?)");
  BlockingRegion unlocked;
  std::unique_lock lock(flight_mutex());
  while (!done()) {
    flight_landed().wait_for(lock, std::chrono::milliseconds(50));
    lock.unlock();
    check_interrupt();
    lock.lock();
  }
}

// Marks a sync's tensors in flight for its lifetime (the registry's orphan writes too, when it
// is the registry's sync), then lands them and wakes the waiters.
class Flight {
 public:
  Flight(Registry& r, const std::vector<Tensor>& roots, const std::vector<Tensor>& views,
         const std::vector<OrphanWrite>& orphans)
      : r_(r), owns_orphans_(!orphans.empty()) {
    members_.reserve(roots.size() + views.size());
    members_.insert(members_.end(), roots.begin(), roots.end());
    members_.insert(members_.end(), views.begin(), views.end());
    std::lock_guard lock(flight_mutex());
    for (const Tensor& t : members_) t->in_flight.store(true, std::memory_order_relaxed);
    ++r_.in_flight;
    for (const OrphanWrite& o : orphans) r_.orphans_in_flight.push_back(o.destination);
  }
  ~Flight() {
    {
      std::lock_guard lock(flight_mutex());
      for (const Tensor& t : members_) t->in_flight.store(false, std::memory_order_relaxed);
      --r_.in_flight;
      if (owns_orphans_) r_.orphans_in_flight.clear();
    }
    flight_landed().notify_all();
    if (!r_.owner) {
      std::lock_guard lock(all_registries().mu);
      free_if_abandoned_locked(&r_);
    }
  }
  Flight(const Flight&) = delete;
  Flight& operator=(const Flight&) = delete;

 private:
  Registry& r_;
  std::vector<Tensor> members_;
  bool owns_orphans_;
};

std::atomic<uint64_t> last_key{0};

std::mutex& executor_mutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::shared_ptr<Executor>& installed() {
  static auto* e = new std::shared_ptr<Executor>();
  return *e;
}
// The installed executor, held by the sync that runs it (another thread may install another).
std::shared_ptr<Executor> current_executor() {
  std::lock_guard lock(executor_mutex());
  LOOM_CHECK(installed(), Runtime, "no lazy executor is installed (graph/ registers one when loom._C loads)");
  return installed();
}

// Builds the trace of a set of root nodes: iterative post-order (chains can be 100k deep), with
// structurally equal nodes merged. Stamps each node it visits with the build's epoch and the
// node's index (Node::trace_index), which stay valid until the next build.
class TraceBuilder {
 public:
  explicit TraceBuilder(Trace& trace)
      : trace_(trace), epoch_(next_epoch().fetch_add(1) + 1), by_structure_(expected_nodes()) {
    trace_.nodes.reserve(expected_nodes());
    trace_.inputs.reserve(expected_nodes());
  }
  ~TraceBuilder() { expected_nodes() = std::max<size_t>(trace_.nodes.size(), 64); }

  uint64_t epoch() const noexcept { return epoch_; }

  int add(Node* root) {
    if (seen(root)) return root->trace_index;
    stack_.assign(1, {root, 0});
    while (!stack_.empty()) {
      auto& [node, next] = stack_.back();
      if (next < node->inputs().size()) {
        Node* in = node->input(next++);
        if (!seen(in)) stack_.push_back({in, 0});
        continue;
      }
      node->trace_index = intern(node);
      node->trace_epoch = epoch_;
      stack_.pop_back();
    }
    return root->trace_index;
  }

 private:
  static std::atomic<uint64_t>& next_epoch() {
    static std::atomic<uint64_t> e{0};
    return e;
  }
  // The size of this thread's last trace: a training loop's syncs build traces of one size, so
  // the next one reserves that much at once instead of growing by doubling.
  static size_t& expected_nodes() {
    thread_local size_t n = 64;
    return n;
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
    // folded constants merge. (No two indexed nodes are equal: a node equal to one indexed
    // already is merged with it, not indexed.)
    bool mergeable = node->op() == OpId::Constant || !node->is_leaf();
    if (mergeable) {
      int32_t same = by_structure_->find(key, [&](int32_t i) {
        const Node* other = trace_.nodes[static_cast<size_t>(i)];
        return other->op() == node->op() && other->dtype() == node->dtype() && other->attrs() == node->attrs() &&
               std::ranges::equal(other->shape(), node->shape()) && trace_.inputs[static_cast<size_t>(i)] == ins &&
               (node->op() != OpId::Constant || other->scalar().as_double() == node->scalar().as_double());
      });
      if (same >= 0) return same;
    }
    int index = static_cast<int>(trace_.nodes.size());
    trace_.nodes.push_back(node);
    trace_.inputs.push_back(std::move(ins));
    if (mergeable) by_structure_->add(key, index);
    return index;
  }

  Trace& trace_;
  uint64_t epoch_;
  ScratchIndex<struct StructureIndexTag> by_structure_;  // the thread's table, kept between syncs
  std::vector<std::pair<Node*, size_t>> stack_;  // add()'s walk, kept between roots
};

}  // namespace

// The trace key: every node's hash and wiring, which Input leaves share storage, and where each
// output goes. Equal keys mean the same computation on inputs of the same description.
uint64_t trace_key(const Trace& t) {
  uint64_t k = hash_combine(0x10014, static_cast<uint64_t>(t.device.type) * 64 + t.device.index);
  // Leaf storages by the position of the first leaf on each (a hash index: a trace may read 100k
  // leaves).
  std::vector<const Storage*> leaf_storages;  // every Input leaf's, in order
  leaf_storages.reserve(t.nodes.size());       // one allocation, not one per doubling
  ScratchIndex<struct LeafStorageIndexTag> leaf_storage(64);  // storage -> its first leaf's position
  auto storage_index = [&](const Storage* s) -> int64_t {
    return leaf_storage->find(mix64(reinterpret_cast<uintptr_t>(s)),
                             [&](int32_t leaf) { return leaf_storages[static_cast<size_t>(leaf)] == s; });
  };
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node* n = t.nodes[i];
    k = hash_combine(k, n->hash());
    for (int32_t in : t.inputs[i]) k = hash_combine(k, static_cast<uint64_t>(in));
    if (n->op() == OpId::Input) {
      const Storage* s = n->array().storage.get();
      int64_t first = storage_index(s);
      k = hash_combine(k, static_cast<uint64_t>(first + 1));  // aliasing pattern
      if (first < 0) leaf_storage->add(mix64(reinterpret_cast<uintptr_t>(s)), static_cast<int32_t>(leaf_storages.size()));
      leaf_storages.push_back(s);
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

// The base of a pending view, while it lives.
TensorImpl* live_base(const TensorImpl& t) {
  const auto& v = t.view_info();
  return v ? v->base->target : nullptr;
}

// A view of a pending base that will be materialized in the same sync is not an output of its
// own: it becomes a view of the base's storage afterwards, the base's new contiguous storage or
// the destination an in-place base is written into (so later writes through the view reach the
// base, as in eager mode). Where no strides place the view in a strided destination, it stays
// an output of its own.
TensorImpl* aliasable_base(const TensorImpl& t) {
  const auto& v = t.view_info();
  if (!v || !v->base->target) return nullptr;
  TensorImpl* base = v->base->target;
  if (!base->is_pending() || base->registry != t.registry || base->generation() != v->base_generation) return nullptr;
  if (base->destination() && !place_within(base->destination()->layout, v->relative)) return nullptr;
  if (aliasable_base(*base)) return nullptr;  // the base is derived itself: not materialized first
  return base;
}

// The trace computing `roots` (outputs first, in order) and then the orphan writes.
Trace build_trace(Device device, const std::vector<Tensor>& roots, const std::vector<OrphanWrite>& orphans,
                  uint64_t& epoch) {
  profiler::Span span("trace", "build trace and key");
  Trace trace;
  trace.device = device;
  TraceBuilder builder(trace);
  epoch = builder.epoch();
  trace.outputs.reserve(roots.size() + orphans.size());  // an Output holds an Array: no regrowth copies
  for (const Tensor& t : roots) trace.outputs.push_back({builder.add(t->node()), t->destination()});
  for (const OrphanWrite& o : orphans) trace.outputs.push_back({builder.add(o.node.get()), o.destination});
  trace.key = trace_key(trace);
  if (profiler::Event* e = span.event()) e->args.emplace_back("nodes", std::to_string(trace.nodes.size()));
  return trace;
}

// Per node of `trace` (in post-order): whether it depends on node `failed`.
std::vector<bool> nodes_reached(const Trace& trace, int failed) {
  std::vector<bool> reached(trace.nodes.size(), false);
  reached[static_cast<size_t>(failed)] = true;
  for (size_t i = static_cast<size_t>(failed) + 1; i < trace.nodes.size(); ++i)
    for (int32_t in : trace.inputs[i]) reached[i] = reached[i] || reached[static_cast<size_t>(in)];
  return reached;
}

// Whether node n's value depends on a node `reached` marks in the trace built with `epoch`; n
// need not be in that trace (the value a tensor had before an overwrite is not read by it).
bool depends_on(Node* n, uint64_t epoch, const std::vector<bool>& reached) {
  std::vector<Node*> stack{n};
  std::unordered_set<Node*> seen{n};
  while (!stack.empty()) {
    Node* x = stack.back();
    stack.pop_back();
    if (x->trace_epoch == epoch) {
      if (reached[static_cast<size_t>(x->trace_index)]) return true;
      continue;  // in the trace: its inputs are in it too
    }
    for (Node* in : x->inputs())
      if (seen.insert(in).second) stack.push_back(in);
  }
  return false;
}

// A failed sync drops an orphan write: its storage keeps its old values.
void drop(const OrphanWrite& o) {
  o.destination.storage->remove_pending_write();
  if (o.counter) o.counter->undo_writes_since(o.version);
}

std::shared_ptr<const Error> error_of_current_exception() {
  try {
    throw;
  } catch (const Error& e) {
    return std::make_shared<const Error>(e);
  } catch (const std::bad_alloc&) {
    return std::make_shared<const Error>(ErrorKind::OutOfMemory, "out of memory while a lazy sync ran its trace");
  } catch (const std::exception& e) {
    return std::make_shared<const Error>(ErrorKind::Runtime, e.what());
  } catch (...) {
    return std::make_shared<const Error>(ErrorKind::Runtime, "unknown C++ exception in a lazy sync");
  }
}

// A pending view among a sync's tensors, once its base is settled: errored with an errored base,
// a view of a materialized base's storage where strides place it there; otherwise it stays
// pending and re-derives itself from its base when next read, if its base's value changed since
// it was derived (refresh_view). `error`: its own computation failed (it is errored if nothing
// else gives it a value); null: it was not computed on its own (a derived view of a root).
void follow_base(TensorImpl& v, const std::shared_ptr<const Error>& error) {
  TensorImpl* base = live_base(v);
  if (base && base->is_errored()) {
    v.set_error(base->error());
    return;
  }
  bool rederives = base && base->generation() != v.view_info()->base_generation;
  if (base && !base->is_pending()) {
    if (std::optional<Layout> l = place_within(base->array().layout, v.view_info()->relative)) {
      v.materialize(base->array().view_as(std::move(*l)));
      return;
    }
    // Derived views are chosen where strides place them: only a base that changed gets here.
    LOOM_CHECK(rederives || error, Runtime, "internal: a view cannot be placed in its materialized base");
  }
  if (!rederives && error) v.set_error(error);
}

// Note [A failed sync changes nothing] (lazy/sync.h). Computes `roots` (tensors of registry r),
// then places `views` (derived views of roots) and lands `orphans` (r's orphan writes). On a
// failure: the writes are undone, the fresh results computed from the failure are errored, the
// others computed again without them; then the first failure (an interrupt: that one) is raised.
// Note [Sync causes] (lazy/sync.h): every call is one sync, counted for the reason its thread gave.
void run_sync(Registry& r, std::vector<Tensor> roots, std::vector<Tensor> views, std::vector<OrphanWrite> orphans) {
  StepRecording* recorded = recording();  // loom.compile (lazy/capture.h): a sync in a step, or the step's own
  if (recorded) recorded->note_sync_point(r.device, "syncs");
  if (!roots.empty() || !orphans.empty()) count_sync(detail::sync_reason);
  SyncScope scope(detail::sync_reason, !roots.empty() || !orphans.empty());  // its site and span (lazy/provenance.h)
  std::shared_ptr<const Error> raised;
  {
    Flight flight(r, roots, views, orphans);
    std::vector<Array> results;
    std::vector<std::pair<Tensor, std::shared_ptr<const Error>>> follow;  // failed views: as their bases
    bool done = false;
    while (!roots.empty() || !orphans.empty()) {
      Trace trace;
      uint64_t epoch = 0;
      std::shared_ptr<const Error> error;
      int failed = -1;  // the node that failed; -1: the trace as a whole
      try {
        trace = build_trace(r.device, roots, orphans, epoch);
        std::shared_ptr<Executor> executor = current_executor();
        {
          // The GIL is released while a CPU trace runs. (GPU traces keep it for now: the CUDA
          // runtime's staging ring and module caches, which eager GPU ops use too, take no lock.)
          // What the trace's compiles read of the environment: a copy made here, where the
          // program cannot be changing it (runtime/environment.h).
          refresh_environment();
          std::optional<BlockingRegion> unlocked;
          if (r.device.is_cpu()) unlocked.emplace();
          Scoped run(running);
          results = executor->run(trace);
        }
        if (recorded) {
          std::vector<Array> written(orphans.size());
          for (size_t i = 0; i < orphans.size(); ++i) written[i] = orphans[i].destination;
          recorded->trace_ran(trace, roots, views, written);
        }
        count(metrics().traces);
        last_key.store(trace.key, std::memory_order_relaxed);
        done = true;
        break;
      } catch (const NodeError& e) {
        error = std::make_shared<const Error>(e);
        if (e.node() >= 0 && static_cast<size_t>(e.node()) < trace.nodes.size()) failed = e.node();
      } catch (...) {
        error = error_of_current_exception();
      }
      if (!raised || error->kind() == ErrorKind::Interrupted) raised = error;
      // Nothing is written: destinations keep their storage, orphan writes are dropped.
      for (const OrphanWrite& o : orphans) drop(o);
      orphans.clear();
      std::vector<bool> reached = failed >= 0 ? nodes_reached(trace, failed) : std::vector<bool>();
      std::vector<Tensor> again;
      for (size_t i = 0; i < roots.size(); ++i) {
        Tensor& t = roots[i];
        bool depends = failed < 0 || reached[static_cast<size_t>(trace.outputs[i].node)];
        if (t->destination()) {
          t->roll_back();  // its storage was not written
        } else if (live_base(*t)) {
          follow.emplace_back(std::move(t), depends ? error : nullptr);
        } else if (Node* before = t->node_before_writes()) {
          // Made since the last sync, then written in place: back to its value before the first
          // write, if that value can be computed (computed again now, after a node's failure).
          if (failed >= 0 && depends_on(before, epoch, reached)) {
            t->set_error(error);
          } else {
            t->rewind();
            if (failed >= 0) again.push_back(std::move(t));
          }
        } else if (!depends) {
          again.push_back(std::move(t));  // a fresh result independent of the failure: computed again
        } else {
          t->set_error(error);
        }
      }
      roots = std::move(again);
    }
    if (done) {
      for (size_t i = 0; i < roots.size(); ++i) roots[i]->materialize(std::move(results[i]));
      for (const OrphanWrite& o : orphans) o.destination.storage->remove_pending_write();  // written
    }
    for (const Tensor& v : views) follow_base(*v, nullptr);
    for (const auto& [v, error] : follow) follow_base(*v, error);
  }
  if (raised) throw Error(*raised);
}

// Computes every pending tensor of registry r (this thread's, or another's: lazy/sync.h), once no
// sync of r is in flight.
void sync_registry(Registry& r) {
  if (pthread_equal(r.thread, pthread_self())) note_synced(r.device);  // the trace cut counts from here (dispatch.h)
  wait_for_flights([&] { return r.in_flight == 0; });
  if (!r.head && r.orphans.empty()) return;
  std::vector<Tensor> roots;
  std::vector<Tensor> views;
  {
    Scoped quiet(bookkeeping);  // r may be another thread's: its views' bases are read as they are
    for (TensorImpl* t = r.head; t; t = t->next_pending) refresh_view(*t);
  }
  for (TensorImpl* t = r.head; t; t = t->next_pending) (aliasable_base(*t) ? views : roots).emplace_back(t);
  std::vector<OrphanWrite> orphans = std::move(r.orphans);
  r.orphans.clear();
  run_sync(r, std::move(roots), std::move(views), std::move(orphans));
}

// A pending tensor that another thread recorded, or that a sync computes now, made usable here:
// waited for, or computed (alone when it is a fresh value; with its registry when it is an
// in-place write or a view of another pending tensor).
void settle_foreign(TensorImpl& t) {
  Tensor keep(&t);
  for (;;) {
    if (t.in_flight.load(std::memory_order_relaxed)) {
      wait_for_flights([&] { return !t.in_flight.load(std::memory_order_relaxed); });
      continue;
    }
    if (!t.is_pending() || is_mine(*t.registry)) return;
    Registry& r = *t.registry;
    if (t.destination() || live_base(t)) {
      sync_registry(r);
    } else {
      run_sync(r, {keep}, {}, {});
    }
  }
}

// Where a pending write into `region` is: the registry holding it, and whether a sync in flight
// is writing it. The caller's own registry is searched first.
struct WriteHolder {
  Registry* registry = nullptr;
  bool in_flight = false;
};

WriteHolder find_write_in(Registry& r, const Array& region) {
  for (TensorImpl* t = r.head; t; t = t->next_pending)
    if (t->destination() && t->destination()->storage == region.storage && may_overlap(*t->destination(), region))
      return {&r, t->in_flight.load(std::memory_order_relaxed)};
  for (const OrphanWrite& o : r.orphans)
    if (o.destination.storage == region.storage && may_overlap(o.destination, region)) return {&r, false};
  for (const Array& d : r.orphans_in_flight)
    if (d.storage == region.storage && may_overlap(d, region)) return {&r, true};
  return {};
}

WriteHolder find_write(const Array& region) {
  Registry* own = my_registry_if_any(region.device());
  if (own)
    if (WriteHolder h = find_write_in(*own, region); h.registry) return h;
  std::lock_guard lock(all_registries().mu);
  for (Registry* r : all_registries().list)
    if (r != own && r->device == region.device())
      if (WriteHolder h = find_write_in(*r, region); h.registry) return h;
  return {};
}

}  // namespace

Array Executor::run_op(OpId op, std::span<const Operand>, const Attrs&, const OutputMeta&, Device device) {
  LOOM_FAIL(NotImplemented, "eager ", op_name(op), " on ", device.str(), " is not implemented by this executor");
}

NodeError::NodeError(const Error& cause, int node, OpId op)
    : Error(cause.kind(), detail::concat(cause.what(), " (computed by the lazy op ", op_name(op), " at a sync)")),
      node_(node) {}

void register_pending(TensorImpl* t) {
  Registry& r = my_registry(t->device());
  t->prev_pending = nullptr;
  t->next_pending = r.head;
  if (r.head) r.head->prev_pending = t;
  r.head = t;
  t->registry = &r;
  ++r.count;
}

namespace {

void unlink(Registry& r, TensorImpl* t) {
  if (t->prev_pending) t->prev_pending->next_pending = t->next_pending;
  else r.head = t->next_pending;
  if (t->next_pending) t->next_pending->prev_pending = t->prev_pending;
  t->prev_pending = t->next_pending = nullptr;
  t->registry = nullptr;
  --r.count;
}

}  // namespace

void unregister_pending(TensorImpl* t) {
  Registry& r = *t->registry;
  if (is_mine(r)) {
    unlink(r, t);
    return;
  }
  std::lock_guard lock(all_registries().mu);  // another thread's, maybe ending
  unlink(r, t);
  free_if_abandoned_locked(&r);
}

void register_orphan_write(TensorImpl& t, Ref<Node> node, Array destination, Ref<VersionCounter> counter,
                           uint64_t version) {
  Registry& r = *t.registry;
  OrphanWrite o{std::move(node), std::move(destination), std::move(counter), version};
  if (is_mine(r)) {
    r.orphans.push_back(std::move(o));
    return;
  }
  std::lock_guard lock(all_registries().mu);
  r.orphans.push_back(std::move(o));
}

int64_t pending_count(Device device) {
  Registry* r = my_registry_if_any(device);
  return r ? r->count : 0;
}

std::vector<Device> pending_devices() {
  std::vector<Device> out;
  if (mine)
    for (Registry* r : mine->slots)
      if (r && (r->head || !r->orphans.empty())) out.push_back(r->device);
  return out;
}

bool recorded_here(const TensorImpl& t) noexcept { return t.registry && is_mine(*t.registry); }

void prepare_foreign_read(TensorImpl& t) {
  if (bookkeeping) return;
  settle_foreign(t);
}

bool find_overlapping_pending_write(const Array& region) { return find_write(region).registry != nullptr; }

void sync_writes_into(const Array& region) {
  for (;;) {
    WriteHolder h = find_write(region);
    if (!h.registry) return;
    Registry& r = *h.registry;
    if (h.in_flight) wait_for_flights([&] { return r.in_flight == 0; });
    else sync_registry(r);
  }
}

uint64_t last_trace_key() { return last_key.load(std::memory_order_relaxed); }

void sync(Device device) {
  if (Registry* r = my_registry_if_any(device)) sync_registry(*r);
}

void sync_all() {
  if (!mine) return;
  // Every device is synced even when one fails; the first failure is raised after.
  std::exception_ptr first;
  for (Registry* r : mine->slots) {
    if (!r) continue;
    try {
      sync_registry(*r);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

void synchronize_all() {
  sync_all();
  std::shared_ptr<Executor> e;
  {
    std::lock_guard lock(executor_mutex());
    e = installed();
  }
  if (e) {
    e->synchronize(kCPU);
    // Eager GPU work is queued too, not only traces: wait for every GPU loom has used.
    for (int i = 0; i < cuda::device_count(); ++i)
      if (cuda::used(i)) e->synchronize(Device(DeviceType::CUDA, static_cast<int16_t>(i)));
  }
}

void materialize(TensorImpl& t) {
  if (t.is_lazy())
    if (StepRecording* r = recording()) [[unlikely]] r->note_sync_point(t.device(), "reads a tensor's value");
  Tensor keep(&t);  // another thread may drop its last other reference while this one waits
  for (;;) {
    t.check_usable();
    if (t.in_flight.load(std::memory_order_relaxed) || (t.is_pending() && !is_mine(*t.registry))) {
      settle_foreign(t);
    } else if (t.is_pending()) {
      sync_registry(*t.registry);
    } else if (t.is_lazy() && pending_write_overlaps(t.array())) {
      // A materialized lazy tensor whose storage a pending in-place op will write (through an
      // alias) is not up to date either.
      sync_writes_into(t.array());
    } else {
      return;
    }
  }
}

void install_executor(std::unique_ptr<Executor> e) {
  std::shared_ptr<Executor> next(std::move(e));
  std::lock_guard lock(executor_mutex());
  installed() = std::move(next);  // a sync running the previous one holds it until it returns
}

std::shared_ptr<Executor> shared_executor() { return current_executor(); }

Executor& executor() {
  std::lock_guard lock(executor_mutex());
  LOOM_CHECK(installed(), Runtime, "no lazy executor is installed (graph/ registers one when loom._C loads)");
  return *installed();
}

}  // namespace loom
