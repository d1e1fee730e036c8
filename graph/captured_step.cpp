#include "graph/captured_step.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <string_view>

#include "lazy/autograd.h"
#include "lazy/collectives.h"
#include "lazy/sync.h"
#include "runtime/blocking.h"
#include "runtime/environment.h"
#include "runtime/error.h"
#include "runtime/metrics.h"
#include "runtime/random.h"

namespace loom::graph {
namespace {

std::string describe_array(DType dtype, IntSpan sizes) { return std::string(dtype_name(dtype)) + " " + format_dims(sizes); }

// The bytes a layout of `dtype` spans in its storage: [first, end).
std::pair<int64_t, int64_t> byte_span(const Layout& l, DType dtype) {
  auto size = static_cast<int64_t>(itemsize(dtype));
  return {l.offset * size, l.storage_end() * size};
}

bool contains(const Array& outer, const Array& inner) {
  if (outer.storage != inner.storage) return false;
  auto [olo, ohi] = byte_span(outer.layout, outer.dtype);
  auto [ilo, ihi] = byte_span(inner.layout, inner.dtype);
  return inner.numel() == 0 || (ilo >= olo && ihi <= ohi);
}

// A layout moved by `bytes` (the root it lies on moved), or nullopt if that is no whole element.
std::optional<Layout> moved(const Layout& l, DType dtype, int64_t bytes) {
  auto size = static_cast<int64_t>(itemsize(dtype));
  if (bytes % size != 0) return std::nullopt;
  Layout out = l;
  out.offset += bytes / size;
  return out;
}

std::string hex(uint64_t key) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(key));
  return buf;
}

std::string host_bytes(const Array& a) {
  Array host = copy_to(a, a.dtype, kCPU);
  return std::string(static_cast<const char*>(host.data()), static_cast<size_t>(host.numel()) * itemsize(a.dtype));
}

bool same_bits(const Scalar& a, const Scalar& b) {
  if (a.kind() != b.kind()) return false;
  if (!a.is_float()) return a.as_int() == b.as_int();
  double x = a.as_double(), y = b.as_double();
  return std::memcmp(&x, &y, sizeof x) == 0;
}

const char* ref_kind(TensorRef::Kind k) {
  switch (k) {
    case TensorRef::Argument: return "argument";
    case TensorRef::Identity: return "tensor";
    case TensorRef::GradOf: return ".grad of tensor";
  }
  return "?";
}

// Builds a captured step from a recording (CapturedStep::make).
class Builder {
 public:
  Builder(CapturedStep& step, const StepRecording& rec, const StepContext& ctx, std::vector<CapturedStep::Root>& roots)
      : step_(step), rec_(rec), ctx_(ctx), roots_(roots) {}

  // The tensor a root refers to, as it was at capture.
  TensorImpl* tensor_of(const TensorRef& ref) const {
    switch (ref.kind) {
      case TensorRef::Argument: return ctx_.arguments[static_cast<size_t>(ref.argument)].get();
      case TensorRef::Identity: return ref.tensor.get();
      case TensorRef::GradOf:
        for (const auto& [p, g] : ctx_.grads_at_start)
          if (p == ref.tensor) return g.get();
        return nullptr;
    }
    return nullptr;
  }

  // The root of a tensor found at capture, added once.
  int32_t root(TensorRef ref) {
    for (size_t i = 0; i < roots_.size(); ++i)
      if (roots_[i].ref.kind == ref.kind && roots_[i].ref.argument == ref.argument && roots_[i].ref.tensor == ref.tensor)
        return static_cast<int32_t>(i);
    TensorImpl* t = tensor_of(ref);
    if (!t || !t->is_lazy() || t->is_pending() || t->is_errored() || t->device() != step_trace().device)
      return fail("a tensor the step reads is not a materialized lazy tensor of its device");
    CapturedStep::Root r;
    r.ref = std::move(ref);
    r.dtype = t->dtype();
    r.sizes = Dims(t->array().sizes());
    r.strides = Dims(t->array().strides());
    r.offset = t->array().layout.offset;
    r.requires_grad = requires_grad(*t);
    r.leaf = is_leaf(*t);
    r.storage = t->array().storage.get();
    for (size_t i = 0; i < roots_.size() && r.same_storage_as < 0; ++i)
      if (roots_[i].storage == r.storage) r.same_storage_as = static_cast<int32_t>(i);
    roots_.push_back(std::move(r));
    return static_cast<int32_t>(roots_.size() - 1);
  }

  // How a replay finds a tensor the step did not make: as an argument, or by identity (the
  // .grad of another when it is one at the call's start).
  TensorRef ref_of(const Tensor& t) const {
    for (size_t k = 0; k < ctx_.arguments.size(); ++k)
      if (ctx_.arguments[k] == t) return {TensorRef::Argument, static_cast<int32_t>(k), {}};
    for (const auto& [p, g] : ctx_.grads_at_start)
      if (g && g == t) return {TensorRef::GradOf, -1, p};
    return {TensorRef::Identity, -1, t};
  }

  // The root whose memory holds `a` (-1: a constant, made in the step; -2: none, failed).
  int32_t root_holding(const Array& a) {
    for (size_t k = 0; k < ctx_.arguments.size(); ++k) {
      const Tensor& arg = ctx_.arguments[k];
      if (arg->is_lazy() && !arg->is_pending() && !arg->is_errored() && contains(arg->array(), a))
        return root({TensorRef::Argument, static_cast<int32_t>(k), {}});
    }
    bool constant = false;
    auto consider = [&](const Tensor& found) -> int32_t {
      // A tensor made in the step stands for what it views (its base, if found before the step).
      TensorImpl* t = found.get();
      if (rec_.created(t)) {
        TensorImpl* base = t->view_base();
        if (!base || rec_.created(base)) {
          if (!t->is_pending() && t->array().storage == a.storage) constant = true;
          return -2;
        }
        t = base;
      }
      if (!t->is_lazy() || t->is_pending() || t->is_errored() || !contains(t->array(), a)) return -2;
      return root(ref_of(Tensor(t)));
    };
    for (const Tensor& r : rec_.reads())
      if (int32_t i = consider(r); i >= 0) return i;
    for (const Tensor& w : rec_.written())
      if (int32_t i = consider(w); i >= 0) return i;
    for (const auto& [p, g] : ctx_.grads_at_start)
      if (g && g->is_lazy() && !g->is_pending() && contains(g->array(), a)) return root({TensorRef::GradOf, -1, p});
    return constant ? -1 : -2;
  }

  int32_t fail(std::string why) {
    if (failure_.empty()) failure_ = std::move(why);
    return -2;
  }
  const std::string& failure() const { return failure_; }
  const Trace& step_trace() const { return rec_.step_trace()->trace; }

 private:
  CapturedStep& step_;
  const StepRecording& rec_;
  const StepContext& ctx_;
  std::vector<CapturedStep::Root>& roots_;
  std::string failure_;
};

// The grad_fn of a replayed result whose backward the step ran: its graph is freed, as the
// recorded call's was; a backward through it raises what a second backward would.
class FreedGraph final : public GradFn {
 public:
  explicit FreedGraph(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> apply(const Tensor&) override {
    LOOM_FAIL(Runtime, "Trying to backward through the graph a second time: this tensor is the result of a "
              "replayed loom.compile step, which ran its backward already (inside the step) and keeps no graph. "
              "Call backward() inside the compiled function only, or compile the forward pass alone.");
  }

 private:
  std::string name_;
};

bool is_random(OpId op) { return op == OpId::RandUniform || op == OpId::RandNormal || op == OpId::RandInt; }

}  // namespace

std::variant<std::unique_ptr<CapturedStep>, std::string> CapturedStep::make(const StepRecording& rec,
                                                                           const StepContext& ctx) {
  const auto& st = rec.step_trace();
  if (!st) return std::string("the step recorded no lazy work");
  std::unique_ptr<CapturedStep> step(new CapturedStep());
  CapturedStep& s = *step;
  s.trace_ = st->trace;
  s.nodes_ = st->nodes;
  Builder b(s, rec, ctx, s.roots_);
  Trace& t = s.trace_;

  // Random ops: which Scalar leaves are seeds and offsets.
  std::vector<int8_t> random_role(t.nodes.size(), 0);  // 1: seed, 2: offset
  for (size_t i = 0; i < t.nodes.size(); ++i)
    if (is_random(t.nodes[i]->op()) && t.inputs[i].size() >= 2) {
      random_role[static_cast<size_t>(t.inputs[i][0])] = 1;
      random_role[static_cast<size_t>(t.inputs[i][1])] = 2;
    }
  uint64_t offset_now = default_generator(t.device).offset();
  s.random_ops_ = offset_now - ctx.random_offset_at_start;

  // Leaves.
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    Node* n = t.nodes[i];
    if (n->op() == OpId::Input) {
      const Array& a = n->array();
      int32_t r = b.root_holding(a);
      if (r == -2)
        return b.failure().empty() ? "the step reads a tensor (" + describe_array(a.dtype, a.sizes()) +
                                         ") that is neither an argument nor one it can find again by identity"
                                   : b.failure();
      if (r == -1) {
        s.inputs_.push_back({static_cast<int32_t>(i), -1, a.layout});
        s.constants_.push_back(host_bytes(a));
        continue;
      }
      Ref<Node> leaf = Node::input(a);
      t.nodes[i] = leaf.get();
      s.private_leaves_.push_back(std::move(leaf));
      s.inputs_.push_back({static_cast<int32_t>(i), r, a.layout});
    } else if (n->op() == OpId::Scalar) {
      ScalarSlot slot;
      slot.node = static_cast<int32_t>(i);
      slot.recorded = n->scalar();
      if (random_role[i] == 1) {
        slot.kind = ScalarSlot::Seed;
      } else if (random_role[i] == 2) {
        slot.kind = ScalarSlot::Offset;
        slot.delta = n->scalar().as_int() - static_cast<int64_t>(ctx.random_offset_at_start);
        if (slot.delta < 0 || static_cast<uint64_t>(slot.delta) >= s.random_ops_)
          return std::string("a random op of the step drew from its generator outside the step's block (another "
                             "thread drew at the same time?)");
      } else if (uint32_t tag = n->scalar().source(); tag > 0 && tag <= rec.numbers().size()) {
        const NumberSource& src = rec.numbers()[tag - 1];
        double v = n->scalar().as_double();
        if (n->scalar().is_float() && std::memcmp(&v, &src.value, sizeof v) == 0) {
          slot.kind = ScalarSlot::Number;
          slot.number = static_cast<int32_t>(tag - 1);
          if (std::ranges::find(s.numbers_used_, slot.number) == s.numbers_used_.end())
            s.numbers_used_.push_back(slot.number);
        }
      }
      if (slot.kind != ScalarSlot::Fixed) {
        Ref<Node> leaf = Node::scalar(n->scalar(), false);
        t.nodes[i] = leaf.get();
        s.private_leaves_.push_back(std::move(leaf));
      }
      s.scalars_.push_back(slot);
    }
  }

  // Destinations, fresh results and where they go.
  size_t n_roots = st->roots.size();
  std::vector<int32_t> fresh_of_output(t.outputs.size(), -1);
  for (size_t o = 0; o < t.outputs.size(); ++o) {
    const Trace::Output& out = t.outputs[o];
    if (out.destination) {
      int32_t r = b.root_holding(*out.destination);
      if (r < 0)
        return r == -1 ? std::string("the step writes in place into a tensor it made from Python data")
                       : b.failure().empty() ? std::string("the step writes in place into a tensor it cannot find "
                                                           "again (neither an argument nor a tensor by identity)")
                                             : b.failure();
      s.destinations_.push_back({static_cast<int32_t>(o), r, out.destination->layout});
      continue;
    }
    LOOM_CHECK(o < n_roots, Runtime, "internal: an orphan write without a destination");
    const Tensor& r = st->roots[o];
    Fresh f;
    f.output = static_cast<int32_t>(o);
    f.version = r->version();
    if (requires_grad(*r)) {
      if (!rec.graph_consumed(*r))
        return "the step returns or keeps a tensor that requires grad (" + describe_array(r->dtype(), r->sizes()) +
               ") and did not run its backward: a backward outside the step could not replay. Call backward() "
               "inside the compiled function, or compile an inference step under loom.no_grad()";
      f.freed_grad_fn = current_grad_fn(*r)->name();
    }
    for (size_t j = 0; j < ctx.returned.size(); ++j)
      if (ctx.returned[j] == r) f.returned.push_back(static_cast<int32_t>(j));
    fresh_of_output[o] = static_cast<int32_t>(s.fresh_.size());
    s.fresh_.push_back(std::move(f));
  }
  // .grad: set to a fresh result, dropped, or kept. The tensors that can have one are the roots
  // found so far and the tensors whose .grad the caller listed.
  std::vector<Tensor> owners;
  for (const auto& [p, g] : ctx.grads_at_start) owners.push_back(p);
  for (const Root& r : s.roots_)
    if (TensorImpl* x = b.tensor_of(r.ref); x && r.ref.kind != TensorRef::GradOf) owners.emplace_back(x);
  for (const Tensor& p : owners) {
    AutogradMeta* m = p->autograd_meta();
    if (!m || !m->requires_grad || m->grad_fn) continue;
    const Tensor& g = m->grad;
    if (!g) {
      int32_t r = b.root(b.ref_of(p));
      if (r < 0) return b.failure();
      if (std::ranges::find(s.grads_dropped_, r) == s.grads_dropped_.end()) s.grads_dropped_.push_back(r);
      continue;
    }
    bool fresh = false;
    for (size_t o = 0; o < n_roots; ++o)
      if (st->roots[o] == g && fresh_of_output[o] >= 0) {
        int32_t r = b.root(b.ref_of(p));
        if (r < 0) return b.failure();
        std::vector<int32_t>& to = s.fresh_[static_cast<size_t>(fresh_of_output[o])].grad_of;
        if (std::ranges::find(to, r) == to.end()) to.push_back(r);
        fresh = true;
      }
    if (fresh) continue;
    // Kept: the .grad it had when the call began (a tensor the step did not make).
    bool known = false, kept = !rec.created(g.get());
    for (const auto& [q, start] : ctx.grads_at_start)
      if (q == p) {
        known = true;
        kept = start == g;
      }
    if (!kept)
      return "the step sets the .grad of a tensor (" + describe_array(p->dtype(), p->sizes()) + ") to a tensor " +
             (known ? "that is not its result" : "it made");
  }
  for (size_t i = 0; i < s.fresh_.size(); ++i) {
    const Fresh& f = s.fresh_[i];
    if (f.returned.empty() && f.grad_of.empty()) {
      const Tensor& r = st->roots[static_cast<size_t>(f.output)];
      if (collectives::is_token(*r)) continue;  // run for the collective alone: a replay drops it
      return "the step leaves a tensor it computed (" + describe_array(r->dtype(), r->sizes()) +
             ") in Python state that loom.compile cannot follow (only the return value and .grad are): return it, "
             "or keep it out of the compiled function";
    }
  }
  for (const StepRecording::View& v : st->views) {
    std::vector<int32_t> returned;
    for (size_t j = 0; j < ctx.returned.size(); ++j)
      if (ctx.returned[j] == v.tensor) returned.push_back(static_cast<int32_t>(j));
    if (returned.empty())
      return "the step leaves a view of a tensor it computed (" + describe_array(v.tensor->dtype(), v.tensor->sizes()) +
             ") in Python state that loom.compile cannot follow";
    if (v.base < 0) return std::string("the step returns a view whose base is not one of its results");
    s.views_.push_back({v.base, v.relative, std::move(returned)});
  }
  for (size_t j = 0; j < ctx.returned.size(); ++j) {
    const Tensor& r = ctx.returned[j];
    if (rec.created(r.get()) && !r->is_pending()) {
      bool produced = false;
      for (const Fresh& f : s.fresh_) produced = produced || std::ranges::find(f.returned, j) != f.returned.end();
      if (!produced) return std::string("the step returns a tensor it made from Python data");
    }
  }
  s.returned_count_ = ctx.returned.size();

  // Version counters: moved by as many writes as the step made.
  for (const auto& [counter, before] : rec.writes()) {
    uint64_t by = counter->value - before;
    if (by == 0) continue;
    int32_t found = -1;
    for (size_t r = 0; r < s.roots_.size() && found < 0; ++r) {
      TensorImpl* x = b.tensor_of(s.roots_[r].ref);
      if (x && x->version_counter() == counter) found = static_cast<int32_t>(r);
    }
    if (found < 0) {
      for (const Tensor& w : rec.written())
        if (!rec.created(w.get()) && w->version_counter() == counter && found < 0) found = b.root(b.ref_of(w));
    }
    if (found < 0)
      return std::string("the step writes in place into a tensor it made, or one it cannot find again");
    s.bumps_.push_back({found, by});
  }
  // An argument on the memory of a root is a root too, read or not: the step found its data
  // through the other one (f(a, a), or a and a view of it), so a call passing two separate
  // tensors there must fail the storage guard rather than read the first one twice.
  for (size_t k = 0; k < ctx.arguments.size(); ++k) {
    const Tensor& arg = ctx.arguments[k];
    if (!arg->is_lazy() || arg->is_pending() || arg->is_errored()) continue;
    const Storage* storage = arg->array().storage.get();
    if (std::ranges::any_of(s.roots_, [&](const Root& r) { return r.storage == storage; }))
      b.root({TensorRef::Argument, static_cast<int32_t>(k), {}});
  }
  if (!b.failure().empty()) return b.failure();
  // A .grad the step set to None stays None unless a result of the step became it.
  std::erase_if(s.grads_dropped_, [&](int32_t r) {
    return std::ranges::any_of(s.fresh_, [&](const Fresh& f) { return std::ranges::find(f.grad_of, r) != f.grad_of.end(); });
  });
  for (const Root& r : s.roots_) s.bound_.push_back({r.storage, r.offset});
  return step;
}

std::string CapturedStep::check(const ReplayInputs& in, Resolved& out) const {
  out.roots.resize(roots_.size());
  for (size_t i = 0; i < roots_.size(); ++i) {
    const Root& r = roots_[i];
    Tensor x;
    switch (r.ref.kind) {
      case TensorRef::Argument:
        if (static_cast<size_t>(r.ref.argument) >= in.arguments.size()) return "an argument is missing";
        x = Tensor(in.arguments[static_cast<size_t>(r.ref.argument)]);
        break;
      case TensorRef::Identity: x = r.ref.tensor; break;
      case TensorRef::GradOf: {
        AutogradMeta* m = r.ref.tensor->autograd_meta();
        if (!m || !m->grad) return "a tensor's .grad that the step reads is None";
        x = m->grad;
        break;
      }
    }
    x->check_usable();
    if (!x->is_lazy() || x->device() != trace_.device)
      return std::string(ref_kind(r.ref.kind)) + " " + std::to_string(i) + " is not on " + trace_.device.str();
    if (x->is_pending() || x->in_flight.load(std::memory_order_relaxed) || pending_write_overlaps(x->array()))
      materialize(*x);
    const Array& a = x->array();
    if (a.dtype != r.dtype || !std::ranges::equal(a.sizes(), r.sizes) || !std::ranges::equal(a.strides(), r.strides))
      return std::string(ref_kind(r.ref.kind)) + " " +
             (r.ref.kind == TensorRef::Argument ? std::to_string(r.ref.argument) : std::to_string(i)) + " is " +
             describe_array(a.dtype, a.sizes()) + (a.is_contiguous() ? "" : " (strided)") + ", was " +
             describe_array(r.dtype, r.sizes) + (Layout{r.sizes, r.strides, 0}.is_contiguous() ? "" : " (strided)");
    if (requires_grad(*x) != r.requires_grad || is_leaf(*x) != r.leaf)
      return std::string(ref_kind(r.ref.kind)) + " " + std::to_string(i) + " changed its requires_grad";
    out.roots[i] = std::move(x);
  }
  // Storage shared exactly as at capture (the trace key depends on it): each root's first root on
  // the same storage is the one it had then. O(n log n): a step reads hundreds of tensors.
  std::vector<std::pair<const Storage*, int32_t>> by_storage(roots_.size());
  for (size_t i = 0; i < roots_.size(); ++i) by_storage[i] = {out.roots[i]->array().storage.get(), static_cast<int32_t>(i)};
  std::ranges::sort(by_storage);
  for (size_t k = 0, first = 0; k < by_storage.size(); ++k) {
    if (by_storage[k].first != by_storage[first].first) first = k;
    auto i = static_cast<size_t>(by_storage[k].second);
    int32_t now = by_storage[first].second;
    int32_t then = roots_[i].same_storage_as < 0 ? static_cast<int32_t>(i) : roots_[i].same_storage_as;
    if (now != then) {
      size_t j = static_cast<size_t>(now == static_cast<int32_t>(i) ? then : now);
      return std::string("tensors share memory differently than when the step was captured (") +
             ref_kind(roots_[i].ref.kind) + " " + std::to_string(i) + " and " + ref_kind(roots_[j].ref.kind) + " " +
             std::to_string(j) + ")";
    }
  }
  return {};
}

std::vector<Tensor> CapturedStep::replay(const ReplayInputs& in, const Resolved& resolved, bool& busy) {
  std::unique_lock lock(replaying_, std::try_to_lock);
  busy = !lock.owns_lock();
  if (busy) return {};
  Trace& t = trace_;
  // Slots: this call's arrays, numbers and random states.
  auto root_array = [&](int32_t r) -> const Array& { return resolved.roots[static_cast<size_t>(r)]->array(); };
  auto moved_by = [&](int32_t r) {
    return (root_array(r).layout.offset - roots_[static_cast<size_t>(r)].offset) *
           static_cast<int64_t>(itemsize(roots_[static_cast<size_t>(r)].dtype));
  };
  std::vector<Bound> now(roots_.size());
  std::vector<bool> moved_roots(roots_.size());
  for (size_t r = 0; r < roots_.size(); ++r) {
    const Array& a = resolved.roots[r]->array();
    now[r] = {a.storage.get(), a.layout.offset};
    moved_roots[r] = now[r].storage != bound_[r].storage || now[r].offset != bound_[r].offset;
  }
  for (const InputSlot& slot : inputs_) {
    if (slot.root < 0 || !moved_roots[static_cast<size_t>(slot.root)]) continue;
    Node* leaf = t.nodes[static_cast<size_t>(slot.node)];
    std::optional<Layout> l = moved(slot.layout, leaf->dtype(), moved_by(slot.root));
    LOOM_CHECK(l, Runtime, "loom.compile: an argument moved by a part of an element since the step was captured");
    leaf->set_leaf_value(root_array(slot.root).view_as(std::move(*l)));
  }
  for (const DestinationSlot& slot : destinations_) {
    if (!moved_roots[static_cast<size_t>(slot.root)]) continue;
    std::optional<Array>& d = t.outputs[static_cast<size_t>(slot.output)].destination;
    std::optional<Layout> l = moved(slot.layout, d->dtype, moved_by(slot.root));
    LOOM_CHECK(l, Runtime, "loom.compile: an argument moved by a part of an element since the step was captured");
    d = root_array(slot.root).view_as(std::move(*l));
  }
  bound_ = std::move(now);  // every slot on a moved root is filled
  Generator& generator = default_generator(t.device);
  PhiloxState random = random_ops_ > 0 ? generator.draw(random_ops_) : PhiloxState{generator.seed(), 0};
  for (const ScalarSlot& slot : scalars_) {
    Node* leaf = t.nodes[static_cast<size_t>(slot.node)];
    switch (slot.kind) {
      case ScalarSlot::Fixed: break;
      case ScalarSlot::Number:
        leaf->set_leaf_value(Scalar(in.numbers[static_cast<size_t>(slot.number)]).with_source(slot.recorded.source()));
        break;
      case ScalarSlot::Seed: leaf->set_leaf_value(Scalar(static_cast<int64_t>(random.seed))); break;
      case ScalarSlot::Offset:
        leaf->set_leaf_value(Scalar(static_cast<int64_t>(random.offset + static_cast<uint64_t>(slot.delta))));
        break;
    }
  }
  // The run, as a sync runs a trace (lazy/sync.h): without the embedding's lock on the CPU.
  std::vector<Array> results;
  {
    std::shared_ptr<Executor> executor = shared_executor();
    refresh_environment();  // what a recompile after an eviction reads (runtime/environment.h)
    std::optional<BlockingRegion> unlocked;
    if (t.device.is_cpu()) unlocked.emplace();
    auto start = std::chrono::steady_clock::now();
    results = executor->run(t);
    count(metrics().compiled_plan_nanoseconds,
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  }
  // Committed: versions move, fresh results become tensors where the step put them.
  for (const Bump& bump : bumps_) {
    VersionCounter& c = *resolved.roots[static_cast<size_t>(bump.root)]->version_counter();
    c.value += bump.by;
    c.same_since = c.value;
  }
  std::vector<Tensor> returned(returned_count_);
  std::vector<Tensor> fresh(fresh_.size());
  for (size_t i = 0; i < fresh_.size(); ++i) {
    const Fresh& f = fresh_[i];
    Tensor out = make_tensor(std::move(results[static_cast<size_t>(f.output)]), true);
    if (f.version > 0) {
      VersionCounter& c = *out->version_counter();
      c.value = c.same_since = f.version;
    }
    if (!f.freed_grad_fn.empty()) set_history(*out, make_ref<FreedGraph>(f.freed_grad_fn));
    for (int32_t j : f.returned) returned[static_cast<size_t>(j)] = out;
    for (int32_t r : f.grad_of) autograd(*resolved.roots[static_cast<size_t>(r)]).grad = out;
    fresh[i] = std::move(out);
  }
  for (const ReturnedView& v : views_) {
    const Trace::Output& base_output = t.outputs[static_cast<size_t>(v.base)];
    Tensor base;
    for (size_t i = 0; i < fresh_.size(); ++i)
      if (fresh_[i].output == v.base) base = fresh[i];
    const Array& base_array = base ? base->array() : *base_output.destination;
    std::optional<Layout> l = place_within(base_array.layout, v.relative);
    Tensor view = make_tensor(l ? base_array.view_as(std::move(*l)) : Array{}, true);
    if (base) view->mark_view_of(*base);
    for (int32_t j : v.returned) returned[static_cast<size_t>(j)] = view;
  }
  for (int32_t r : grads_dropped_)
    if (AutogradMeta* m = resolved.roots[static_cast<size_t>(r)]->autograd_meta()) m->grad.reset();
  return returned;
}

std::string CapturedStep::agrees_with(const CapturedStep& o) const {
  if (key() != o.key()) return "the two recorded calls made different traces";
  if (roots_.size() != o.roots_.size()) return "the two recorded calls read different tensors";
  for (size_t i = 0; i < roots_.size(); ++i) {
    const Root &a = roots_[i], &b = o.roots_[i];
    if (a.ref.kind != b.ref.kind || a.ref.argument != b.ref.argument || a.ref.tensor != b.ref.tensor ||
        a.same_storage_as != b.same_storage_as)
      return "the two recorded calls read different tensors";
  }
  if (inputs_.size() != o.inputs_.size() || destinations_.size() != o.destinations_.size())
    return "the two recorded calls read or write different tensors";
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i].root != o.inputs_[i].root || inputs_[i].layout != o.inputs_[i].layout)
      return "the two recorded calls read different tensors";
  for (size_t i = 0; i < constants_.size(); ++i)
    if (i >= o.constants_.size() || constants_[i] != o.constants_[i])
      return "a tensor the step makes from Python data (a constant of the step) differs between the two recorded calls";
  for (size_t i = 0; i < destinations_.size(); ++i)
    if (destinations_[i].root != o.destinations_[i].root || destinations_[i].layout != o.destinations_[i].layout)
      return "the two recorded calls write different tensors";
  if (scalars_.size() != o.scalars_.size()) return "the two recorded calls take different numbers";
  for (size_t i = 0; i < scalars_.size(); ++i) {
    const ScalarSlot &a = scalars_[i], &b = o.scalars_[i];
    if (a.kind != b.kind || a.number != b.number || a.delta != b.delta)
      return "a number of the step comes from different places in the two recorded calls";
    if (a.kind == ScalarSlot::Fixed && !same_bits(a.recorded, b.recorded)) {
      // Named by the first op that takes it.
      const char* user = "a leaf";
      for (size_t n = 0; n < trace_.nodes.size() && std::string_view(user) == "a leaf"; ++n)
        if (std::ranges::find(trace_.inputs[n], a.node) != trace_.inputs[n].end()) user = op_name(trace_.nodes[n]->op());
      char buf[200];
      std::snprintf(buf, sizeof buf, "a number the step uses (taken by %s: %.17g, then %.17g)", user,
                    a.recorded.as_double(), b.recorded.as_double());
      return std::string(buf) +
             " changed between the two recorded calls, and it is neither an argument nor an optimizer's "
             "hyperparameter: Python state the trace does not see (a number computed in Python, a global, an "
             "attribute). Pass it as an argument, or keep it constant";
    }
  }
  if (fresh_.size() != o.fresh_.size() || views_.size() != o.views_.size())
    return "the two recorded calls return different results";
  for (size_t i = 0; i < fresh_.size(); ++i)
    if (fresh_[i].output != o.fresh_[i].output || fresh_[i].returned != o.fresh_[i].returned ||
        fresh_[i].grad_of != o.fresh_[i].grad_of || fresh_[i].version != o.fresh_[i].version ||
        fresh_[i].freed_grad_fn != o.fresh_[i].freed_grad_fn)
      return "the two recorded calls return or set different results";
  if (bumps_.size() != o.bumps_.size() || grads_dropped_ != o.grads_dropped_ || random_ops_ != o.random_ops_)
    return "the two recorded calls write different tensors";
  for (size_t i = 0; i < bumps_.size(); ++i)
    if (bumps_[i].root != o.bumps_[i].root || bumps_[i].by != o.bumps_[i].by)
      return "the two recorded calls write different tensors";
  return {};
}

std::string CapturedStep::describe() const {
  std::ostringstream s;
  s << "captured step " << hex(key()) << " on " << trace_.device.str() << ": " << trace_.nodes.size()
    << " nodes, one plan (the executor's for this key)\n";
  s << "  reads " << roots_.size() << " tensors:\n";
  for (size_t i = 0; i < roots_.size(); ++i) {
    const Root& r = roots_[i];
    s << "    [" << i << "] " << ref_kind(r.ref.kind);
    if (r.ref.kind == TensorRef::Argument) s << " " << r.ref.argument;
    s << ": " << describe_array(r.dtype, r.sizes) << (r.requires_grad ? " requires_grad" : "");
    if (r.same_storage_as >= 0) s << " (memory of [" << r.same_storage_as << "])";
    s << "\n";
  }
  size_t constants = 0;
  for (const InputSlot& in : inputs_) constants += in.root < 0;
  if (constants) s << "  " << constants << " constant tensors made in the step from Python data\n";
  size_t fixed = 0, numbers = 0, seeds = 0, offsets = 0;
  for (const ScalarSlot& sc : scalars_) {
    fixed += sc.kind == ScalarSlot::Fixed;
    numbers += sc.kind == ScalarSlot::Number;
    seeds += sc.kind == ScalarSlot::Seed;
    offsets += sc.kind == ScalarSlot::Offset;
  }
  s << "  numbers: " << numbers << " from arguments and optimizer updates (read at every call), " << fixed
    << " constants, " << offsets << " random ops (" << random_ops_ << " drawn a call)\n";
  s << "  writes " << destinations_.size() << " tensors in place:";
  for (const DestinationSlot& d : destinations_) s << " [" << d.root << "]";
  s << "\n  version counters moved:";
  for (const Bump& b : bumps_) s << " [" << b.root << "]+" << b.by;
  s << "\n  results: " << fresh_.size() << " fresh tensors (";
  size_t grads = 0, returned = 0;
  for (const Fresh& f : fresh_) {
    grads += f.grad_of.size();
    returned += f.returned.size();
  }
  s << returned << " returned, " << grads << " set as .grad), " << views_.size() << " returned views; .grad set to None: "
    << grads_dropped_.size() << "\n";
  return s.str();
}

}  // namespace loom::graph
