#include "lazy/autograd.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <queue>
#include <unordered_map>

#include "lazy/capture.h"
#include "lazy/dispatch.h"
#include "lazy/ops.h"
#include "lazy/region_gradients.h"
#include "runtime/error.h"
#include "runtime/small_vector.h"

namespace loom {
namespace {

thread_local bool grad_mode = true;
// Sequence 0 is every AccumulateGrad's (GradFn::sequence's default: they are made on first use,
// not by set_history), so the functions that set_history numbers start at 1. Were the first one a
// process records numbered 0 as well, it would tie with the accumulators in the engine's queue on
// that step only: the first step of a loop would run its leaves' accumulations in another order
// than every later step, so its gradients would be made (and registered for the sync) in another
// order and the step would lower a different trace (another key, other kernels) than the second.
// It also keeps accumulators out of `sequence >= next_function_sequence()` ("made since").
std::atomic<uint64_t> next_sequence{1};

std::string describe(const TensorImpl& t) {
  return std::string(t.is_lazy() ? "lazy " : "") + dtype_name(t.dtype()) + format_dims(t.sizes());
}

// A gradient summed down to the shape of the input it belongs to (undoing broadcasting), in its
// dtype.
Tensor reduce_to(const Tensor& grad, IntSpan shape, DType dtype) { return ops::cast(ops::sum_to(grad, shape), dtype); }

// Ops whose number arguments PyTorch wraps into tensors, so that its grad_fn lists them in
// next_functions (as (None, 0)): x * 2, x + 2, x - 2, x / 2, where(c, x, 2.0). Elsewhere
// (x ** 2, softplus's beta, clamp's bounds) a number is not an input of the backward graph.
bool lists_numbers(OpId op) {
  return op == OpId::Add || op == OpId::Sub || op == OpId::Mul || op == OpId::Div || op == OpId::Where;
}

// The backward of a primitive op: OpDef::backward over the saved inputs. The derivative sees
// every argument; `next` has edges only for the arguments PyTorch lists (edge_arg_ maps them).
class OpBackward final : public GradFn {
 public:
  OpBackward(OpId op, const Attrs& attrs) : op_(op), attrs_(attrs) {}
  // One per op recorded with autograd, dropped by the hundred at each backward
  // (runtime/free_list.h).
  static void* operator new(size_t size) { return FreeList<OpBackward>::allocate(size); }
  static void operator delete(void* p, size_t size) noexcept { FreeList<OpBackward>::release(p, size); }

  std::string name() const override {
    IntSpan shape = shapes_.empty() ? IntSpan() : IntSpan(shapes_[0]);
    DType dtype = dtypes_.empty() ? out_dtype_ : dtypes_[0];
    return backward_name(op_, attrs_, tensor_args_, shape, dtype, out_dtype_);
  }

  std::vector<Tensor> apply(const Tensor& grad) override {
    BackwardContext ctx{op_, attrs_, {}, {}, scalars_, tensor_args_, shapes_, dtypes_,
                        std::vector<bool>(saved_.size(), false), column_major_, grad, out_dtype_, out_shape_};
    for (size_t k = 0; k < next.size(); ++k)
      if (next[k].fn) ctx.needs_grad[edge_arg_[k]] = true;
    ctx.inputs.reserve(saved_.size());
    for (const SavedTensor& s : saved_) ctx.inputs.push_back(s.defined() ? s.unpack(*this) : Tensor());
    if (result_.defined()) ctx.result = result_.unpack(*this);
    std::vector<Tensor> grads(saved_.size());
    op_def(op_).backward(ctx, grads);
    std::vector<Tensor> out(next.size());
    for (size_t k = 0; k < next.size(); ++k) {
      size_t i = edge_arg_[k];
      if (grads[i] && next[k].fn) out[k] = reduce_to(grads[i], shapes_[i], dtypes_[i]);
    }
    return out;
  }

  // Argument `arg` gets an entry in `next`.
  void add_edge(size_t arg, Edge edge) {
    next.push_back(std::move(edge));
    edge_arg_.push_back(static_cast<uint32_t>(arg));
  }

  void release_saved() override {
    for (SavedTensor& s : saved_) s.release();
    result_.release();
  }

  // Keeps argument `a`: a number always, a tensor's value only where the derivative reads it
  // (`value`), its shape and dtype always.
  void save(const Arg& a, bool value) {
    if (a.is_tensor()) {
      tensor_args_ |= uint64_t{1} << std::min<size_t>(saved_.size(), 63);
      saved_.push_back(value ? SavedTensor(a.tensor, false) : SavedTensor());
      scalars_.push_back(Scalar(int64_t{0}));
      shapes_.emplace_back(a.tensor->sizes());
      dtypes_.push_back(a.tensor->dtype());
    } else {
      saved_.emplace_back();
      scalars_.push_back(a.scalar);
      shapes_.emplace_back();
      dtypes_.push_back(DType::Float32);
    }
  }

  void save_result(TensorImpl& output) { result_ = SavedTensor(Tensor(&output), true); }

  // Room for `n` arguments, made once: growing each list one argument at a time cost about as
  // much as the rest of recording the op.
  void reserve(size_t n) {
    saved_.reserve(n);
    shapes_.reserve(n);
    next.reserve(n);
  }

  std::vector<SavedTensor>& saved() { return saved_; }
  SavedTensor& saved_result() { return result_; }
  DType out_dtype_ = DType::Float32;
  Dims out_shape_;
  uint64_t column_major_ = 0;  // BackwardContext::column_major

 private:
  OpId op_;
  Attrs attrs_;
  std::vector<SavedTensor> saved_;
  SavedTensor result_;
  SmallVec<Scalar, 3> scalars_;
  std::vector<Dims> shapes_;
  SmallVec<DType, 4> dtypes_;
  uint64_t tensor_args_ = 0;        // bit i: argument i was a tensor (for the name)
  SmallVec<uint32_t, 4> edge_arg_;  // the argument of each entry of `next`
};

// A composite op's own derivative (record_composite): inputs and result saved as OpBackward
// saves them, plus the forward's private intermediates.
class CompositeBackward final : public GradFn {
 public:
  CompositeBackward(const char* name, CompositeDerivative fn) : name_(name), fn_(std::move(fn)) {}
  std::string name() const override { return name_; }

  std::vector<Tensor> apply(const Tensor& grad) override {
    CompositeSaved saved{{}, {}, extras_, std::vector<bool>(next.size(), false)};
    for (size_t i = 0; i < next.size(); ++i) saved.needs_grad[i] = static_cast<bool>(next[i].fn);
    saved.inputs.reserve(inputs_.size());
    for (const SavedTensor& s : inputs_) saved.inputs.push_back(s.defined() ? s.unpack(*this) : Tensor());
    if (result_.defined()) saved.result = result_.unpack(*this);
    std::vector<Tensor> grads = fn_(grad, saved);
    LOOM_CHECK(grads.size() == next.size(), Runtime, "internal: ", name_, " returned ", grads.size(),
               " gradients for ", next.size(), " inputs");
    for (size_t i = 0; i < grads.size(); ++i)
      grads[i] = grads[i] && next[i].fn ? reduce_to(grads[i], shapes_[i], dtypes_[i]) : Tensor();
    return grads;
  }

  void release_saved() override {
    for (SavedTensor& s : inputs_) s.release();
    result_.release();
    extras_.clear();
  }

  std::vector<SavedTensor> inputs_;
  std::vector<Dims> shapes_;
  std::vector<DType> dtypes_;
  SavedTensor result_;
  std::vector<Tensor> extras_;
  // Views that select a region of their input without overlap (mark_region_view): where. The
  // engine then gathers the gradients of views of one tensor (lazy/region_gradients.h).
  std::optional<Layout> region_;

 private:
  const char* name_;
  CompositeDerivative fn_;
};

// Whether a gradient is seen by no one but the `holders` references to it (the backward engine's,
// AccumulateGrad's): no other tensor handle, no Python object, not a view and no tensor sharing
// its value (its storage, or its pending node, which a sync would give them both), so a later
// in-place accumulation into it changes nothing anyone else holds. PyTorch's AccumulateGrad takes
// the incoming gradient as .grad on the same condition (its reference count).
bool unshared(const TensorImpl& g, int32_t holders) {
  if (g.use_count() != holders || g.is_view() || g.view_info() || g.autograd_meta()) return false;
  if (g.is_pending()) return g.node()->use_count() == 1 && !g.destination();
  return g.array().storage && g.array().storage->use_count() == 1;
}

// A pending view nothing else sees, of a base that died and that no other view shares (the
// gradient of a linear layer's weight is t() of a product, a bias's a reshape of a sum): its value
// as a tensor of its own, which is not a view (its writes reach no base), without a copy. Null
// where that does not hold.
Tensor sole_view_value(TensorImpl& g, int32_t holders) {
  const auto& info = g.view_info();
  if (g.use_count() != holders || !info || !g.is_pending() || g.autograd_meta() || g.destination()) return {};
  const WeakTensor& base = *info->base;
  // Held twice by g (its view info and its weak base), by nothing else.
  if (base.target || g.weak_base() != &base || base.use_count() != 2) return {};
  refresh_view(g);
  if (g.node()->use_count() != 1) return {};
  return make_ref<TensorImpl>(Ref<Node>(g.node()), g.device());
}

// Adds gradients into a leaf's .grad. It refers to the leaf weakly (the leaf holds it): a leaf
// that died has nobody to read its gradient.
class AccumulateGrad final : public GradFn {
 public:
  explicit AccumulateGrad(TensorImpl& variable) : variable_(variable.weak()) {}
  std::string name() const override { return "AccumulateGrad"; }

  std::vector<Tensor> apply(const Tensor& grad) override {
    TensorImpl* v = variable_->target;
    if (!v) return {};
    AutogradMeta& meta = autograd(*v);
    Tensor g = ops::cast(grad, v->dtype());
    // An errored .grad (made by a step whose sync failed, lazy/sync.h) counts as none: eager
    // mode, where that step raised, would not have made it.
    if (!meta.grad || meta.grad->is_errored()) {
      // A fresh tensor the leaf owns (never an alias of a value the graph still uses): the
      // incoming gradient itself where nothing else can see it (the engine's and this call's
      // references only), else a copy. Later steps add into it in place.
      if (grad_enabled()) meta.grad = g;
      else if (g != grad || unshared(*g, 2)) meta.grad = g;
      else if (Tensor own = sole_view_value(*g, 2)) meta.grad = own;
      else meta.grad = ops::clone(g);
      if (!grad_enabled()) autograd(*meta.grad).grad_fn.reset();
    } else if (grad_enabled()) {
      meta.grad = ops::add(meta.grad, g);  // create_graph: keep the history of the sum
    } else {
      ops::add_(*meta.grad, g);  // in place: .grad keeps its storage across steps
    }
    return {};
  }

 private:
  Ref<WeakTensor> variable_;
};

bool any_requires_grad(std::span<const Arg> args) {
  for (const Arg& a : args)
    if (a.tensor && requires_grad(*a.tensor)) return true;
  return false;
}

// A new handle on a saved value (the same node or array), with no autograd state of its own.
Tensor handle_of(const Tensor& t) {
  if (t->is_pending()) return make_ref<TensorImpl>(Ref<Node>(t->node()), t->device());
  return make_tensor(t->array(), t->is_lazy());
}

}  // namespace

bool grad_enabled() noexcept { return grad_mode; }
void set_grad_enabled(bool enabled) noexcept { grad_mode = enabled; }

// ---- saved tensors ----

SavedTensor::SavedTensor(const Tensor& t, bool is_result)
    : value_(handle_of(t)), origin_(t.get()), counter_(t->version_counter()), version_(t->version()),
      is_result_(is_result) {
  if (!is_result && requires_grad(*t)) history_ = gradient_edge(*t);
}

Tensor SavedTensor::unpack(GradFn& owner) const {
  LOOM_CHECK(!freed_, Runtime,
             "Trying to backward through the graph a second time (or directly access saved tensors after they "
             "have already been freed). Saved intermediate values of the graph are freed when you call .backward() "
             "or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second "
             "time or if you need to access saved tensors after calling backward.");
  Ref<GradFn> producer = is_result_ ? Ref<GradFn>(&owner) : history_.fn;
  if (counter_ && !counter_->current(version_)) {
    bool computed = producer && !dynamic_cast<AccumulateGrad*>(producer.get());
    LOOM_FAIL(Runtime, "one of the variables needed for gradient computation has been modified by an inplace "
              "operation: [", describe(*value_), "]", computed ? ", which is output 0 of " + producer->name() : "",
              ", is at version ", counter_->value, "; expected version ", version_, " instead. Hint: the backward of ",
              owner.name(), " reads it; clone() the tensor before modifying it in place.");
  }
  if (!grad_mode || !producer) return value_;
  // create_graph: the derivative recorded from this value must reach the original's history.
  Tensor with_history = handle_of(value_);
  AutogradMeta& m = autograd(*with_history);
  m.requires_grad = true;
  if (dynamic_cast<AccumulateGrad*>(producer.get())) m.grad_accumulator = producer;
  else m.grad_fn = producer;
  return with_history;
}

void SavedTensor::release() noexcept {
  if (!value_) return;
  value_.reset();
  counter_.reset();
  history_ = Edge{};
  freed_ = true;
}

void SavedTensor::preserve(TensorImpl& self) {
  if (origin_ != &self || !counter_ || counter_ != self.version_counter() || version_ != self.version()) return;
  if (!value_->is_lazy()) value_ = make_tensor(copy_to(value_->array(), value_->dtype(), value_->device(), MemoryFormat::Preserve));
  else if (!value_->is_pending()) value_ = detail::copy_pending(value_);
  counter_.reset();  // what backward needs is this value, whatever happens to the original
}

void SavedTensor::become_value_of(TensorImpl& t) {
  if (!value_) return;
  counter_ = t.version_counter();
  version_ = t.version();
}

// ---- tensors ----

AutogradMeta& autograd(TensorImpl& t) {
  auto& slot = t.autograd_slot();
  if (!slot) slot = std::make_unique<AutogradMeta>();
  return *slot;
}

// A stale view answers for what current_grad_fn() will make of it: a view of its base's history.
// (Every op asks of every argument: only views pay for the question.)
bool requires_grad(const TensorImpl& t) noexcept {
  if (t.is_view())
    if (StaleBase base = stale_view_base(t)) return base.requires_grad();
  const AutogradMeta* m = t.autograd_meta();
  return m && (m->requires_grad || m->grad_fn);
}

bool is_leaf(const TensorImpl& t) noexcept {
  if (t.is_view())
    if (StaleBase base = stale_view_base(t)) return !base.requires_grad();
  const AutogradMeta* m = t.autograd_meta();
  return !m || !m->grad_fn;
}

void set_requires_grad(TensorImpl& t, bool value) {
  if (value && !is_leaf(t)) return;  // a non-leaf requires grad already
  LOOM_CHECK(is_leaf(t), Runtime,
             "you can only change requires_grad flags of leaf variables. If you want to use a computed variable in "
             "a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
  LOOM_CHECK(!value || is_floating(t.dtype()), Runtime,
             "only Tensors of floating point dtype can require gradients, got ", dtype_name(t.dtype()));
  autograd(t).requires_grad = value;
}

Edge gradient_edge(TensorImpl& t) {
  AutogradMeta& m = autograd(t);
  if (current_grad_fn(t)) return {m.grad_fn, 0};
  if (!m.requires_grad) return {};
  if (!m.grad_accumulator) m.grad_accumulator = make_ref<AccumulateGrad>(t);
  return {m.grad_accumulator, 0};
}

void set_history(TensorImpl& output, Ref<GradFn> fn) {
  fn->sequence = next_sequence++;
  AutogradMeta& m = autograd(output);
  m.grad_fn = std::move(fn);
  m.requires_grad = true;
}

void set_history(BaseHistory& dead_base, Ref<GradFn> fn) {
  fn->sequence = next_sequence++;
  dead_base.grad_fn = fn;
  dead_base.edge = {std::move(fn), 0};
  dead_base.requires_grad = true;
}

void retain_grad(TensorImpl& t) {
  AutogradMeta& m = autograd(t);
  if (!current_grad_fn(t)) {
    LOOM_CHECK(m.requires_grad, Runtime, "can't retain_grad on Tensor that has requires_grad=False");
    return;  // leaves keep their gradient anyway
  }
  m.retains_grad = true;
  m.grad_fn->retained = t.weak();
}

void add_tensor_hook(TensorImpl& t, std::function<Tensor(const Tensor&)> hook) {
  LOOM_CHECK(requires_grad(t), Runtime, "cannot register a hook on a tensor that doesn't require gradient");
  gradient_edge(t).fn->tensor_hooks.push_back(std::move(hook));
}

void record_op(OpId op, const Attrs& attrs, std::span<const Arg> args, TensorImpl& output) {
  const OpDef& def = op_def(op);
  if (!grad_mode || !def.backward || !is_floating(output.dtype()) || !any_requires_grad(args)) return;
  auto fn = make_ref<OpBackward>(op, attrs);
  auto needs_grad = [&](size_t i) { return args[i].tensor && requires_grad(*args[i].tensor); };
  auto [read, result] = def.saves.wanted(args.size(), needs_grad);
  fn->reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    fn->save(a, SavedValues::reads(read, i));
    if (def.saves.operand_layouts && a.is_tensor() && i < 64 && is_column_major(*a.tensor))
      fn->column_major_ |= uint64_t{1} << i;
    // Integer and bool tensors (indices, conditions) are never inputs of the backward graph.
    bool listed = a.is_tensor() ? is_floating(a.tensor->dtype()) : lists_numbers(op);
    if (listed) fn->add_edge(i, needs_grad(i) ? gradient_edge(*a.tensor) : Edge{});
  }
  fn->out_dtype_ = output.dtype();
  fn->out_shape_ = Dims(output.sizes());
  if (result) fn->save_result(output);
  set_history(output, fn);
}

void record_function(const char* name, TensorImpl& input, TensorImpl& output,
                     std::function<Tensor(const Tensor& grad)> fn) {
  record_composite({name, {&input}, 0, false, {}}, output,
                   [fn = std::move(fn)](const Tensor& g, const CompositeSaved&) -> std::vector<Tensor> {
                     return {fn(g)};
                   });
}

void record_composite(CompositeRecord record, TensorImpl& output, CompositeDerivative fn) {
  if (!grad_mode || !is_floating(output.dtype())) return;
  bool any = false;
  for (TensorImpl* t : record.inputs) any = any || (t && requires_grad(*t));
  if (!any) return;
  auto f = make_ref<CompositeBackward>(record.name, std::move(fn));
  for (size_t i = 0; i < record.inputs.size(); ++i) {
    TensorImpl* t = record.inputs[i];
    bool save = t && i < 64 && (record.save_inputs >> i & 1);
    f->inputs_.push_back(save ? SavedTensor(Tensor(t), false) : SavedTensor());
    f->shapes_.emplace_back(t ? Dims(t->sizes()) : Dims());
    f->dtypes_.push_back(t ? t->dtype() : output.dtype());
    f->next.push_back(t && requires_grad(*t) ? gradient_edge(*t) : Edge{});
  }
  if (record.save_result) f->result_ = SavedTensor(Tensor(&output), true);
  f->extras_ = std::move(record.extras);
  set_history(output, f);
}

void record_zero_derivative(const char* name, const std::vector<TensorImpl*>& inputs, TensorImpl& output) {
  struct Like {
    Dims shape;
    DType dtype;
    Placement where;
  };
  std::vector<Like> like;
  for (TensorImpl* t : inputs)
    like.push_back(t ? Like{Dims(t->sizes()), t->dtype(), placement_of(*t)} : Like{{}, output.dtype(), {}});
  record_composite({name, inputs, 0, false, {}}, output,
                   [like = std::move(like)](const Tensor&, const CompositeSaved& s) -> std::vector<Tensor> {
                     std::vector<Tensor> grads(like.size());
                     for (size_t i = 0; i < like.size(); ++i)
                       if (s.needs_grad[i]) grads[i] = ops::full(like[i].shape, Scalar(int64_t{0}), like[i].dtype, like[i].where);
                     return grads;
                   });
}

void mark_region_view(TensorImpl& output, const Layout& region) {
  AutogradMeta* m = output.autograd_meta();
  if (!m || !m->grad_fn) return;
  auto* f = dynamic_cast<CompositeBackward*>(m->grad_fn.get());
  if (f && f->next.size() == 1) f->region_ = region;
}

void record_composite(const char* name, TensorImpl& input, TensorImpl& output,
                      std::function<Tensor(const Tensor& grad, const Tensor& result)> fn) {
  record_composite({name, {&input}, 0, true, {}}, output,
                   [fn = std::move(fn)](const Tensor& g, const CompositeSaved& s) -> std::vector<Tensor> {
                     return {fn(g, s.result)};
                   });
}

void preserve_saved(GradFn& fn, TensorImpl& self) {
  if (auto* op = dynamic_cast<OpBackward*>(&fn))
    for (SavedTensor& s : op->saved()) s.preserve(self);
}

void result_written_into(GradFn& fn, TensorImpl& t) {
  if (auto* op = dynamic_cast<OpBackward*>(&fn)) op->saved_result().become_value_of(t);
}

uint64_t next_function_sequence() noexcept { return next_sequence.load(); }

// ---- the engine ----

namespace {

struct Run {
  // Gradients reaching each function, and how many edges into it are still to come.
  std::unordered_map<GradFn*, Tensor> pending;
  std::unordered_map<GradFn*, int> dependencies;
  std::unordered_map<GradFn*, Tensor>* captured = nullptr;  // autograd.grad: record the gradient here
  // autograd.grad: the functions from which a captured one can be reached. Only they run (a leaf
  // that is not an input keeps its .grad as it was; an input between others and the roots is
  // recorded and passed through).
  std::unordered_map<GradFn*, bool> leads_to_capture;
  // Gradients of views that select regions of a function's output (CompositeBackward::region_),
  // gathered until the function runs and then assembled at once (lazy/region_gradients.h).
  struct Regions {
    Dims shape;
    DType dtype = DType::Float32;
    std::vector<RegionGradient> parts;
  };
  std::unordered_map<GradFn*, Regions> regions;
};

// The view selecting a region of its input whose gradient `fn` computes, or null.
const CompositeBackward* region_view(GradFn* fn) {
  auto* f = dynamic_cast<CompositeBackward*>(fn);
  return f && f->region_ && f->next.size() == 1 && f->next[0].fn ? f : nullptr;
}

// Fills run.leads_to_capture for the functions reachable from `roots`: a post-order walk
// (iterative: graphs of long loops are deep).
void mark_paths_to_captured(const std::vector<GradFn*>& roots, Run& run) {
  std::unordered_map<GradFn*, bool> visited;
  std::vector<std::pair<GradFn*, size_t>> stack;
  for (GradFn* root : roots) {
    if (visited[root]) continue;
    visited[root] = true;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [fn, next_edge] = stack.back();
      if (next_edge < fn->next.size()) {
        GradFn* child = fn->next[next_edge++].fn.get();
        if (child && !visited[child]) {
          visited[child] = true;
          stack.emplace_back(child, 0);
        }
        continue;
      }
      bool leads = false;
      for (const Edge& e : fn->next)
        if (e.fn && (run.captured->count(e.fn.get()) || run.leads_to_capture[e.fn.get()])) leads = true;
      run.leads_to_capture[fn] = leads;
      stack.pop_back();
    }
  }
}

void add_grad(Tensor& slot, const Tensor& g) { slot = slot ? ops::add(slot, g) : g; }

void execute(std::vector<std::pair<GradFn*, Tensor>> seeds, bool retain_graph, bool create_graph, Run& run) {
  // Dependencies: the number of edges into each function from functions reachable from the seeds.
  std::vector<GradFn*> stack;
  std::unordered_map<GradFn*, bool> seen;
  for (auto& [fn, g] : seeds) {
    if (!seen[fn]) stack.push_back(fn);
    seen[fn] = true;
  }
  while (!stack.empty()) {
    GradFn* fn = stack.back();
    stack.pop_back();
    for (const Edge& e : fn->next) {
      if (!e.fn) continue;
      run.dependencies[e.fn.get()]++;
      if (!seen[e.fn.get()]) {
        seen[e.fn.get()] = true;
        stack.push_back(e.fn.get());
      }
    }
  }
  for (auto& [fn, g] : seeds) add_grad(run.pending[fn], g);
  if (run.captured) {
    std::vector<GradFn*> roots;
    for (auto& [fn, g] : seeds) roots.push_back(fn);
    mark_paths_to_captured(roots, run);
  }
  // Later functions first (PyTorch's order), among those whose gradients are complete.
  auto later = [](GradFn* a, GradFn* b) { return a->sequence < b->sequence; };
  std::priority_queue<GradFn*, std::vector<GradFn*>, decltype(later)> ready(later);
  std::unordered_map<GradFn*, bool> queued;
  for (auto& [fn, g] : seeds)
    if (run.dependencies[fn] == 0 && !queued[fn]) {
      ready.push(fn);
      queued[fn] = true;
    }
  GradModeGuard mode(create_graph);
  while (!ready.empty()) {
    GradFn* fn = ready.top();
    ready.pop();
    Tensor grad = std::move(run.pending[fn]);
    run.pending.erase(fn);
    if (auto it = run.regions.find(fn); it != run.regions.end()) {
      Tensor assembled = assemble_regions(it->second.parts, it->second.shape, it->second.dtype);
      grad = grad ? ops::add(grad, assembled) : assembled;
      run.regions.erase(it);
    }
    if (grad && !fn->tensor_hooks.empty()) {
      auto hooks = fn->tensor_hooks;  // a hook may add or remove hooks
      for (auto& hook : hooks)
        if (Tensor replaced = hook(grad)) grad = replaced;
    }
    if (fn->retained && fn->retained->target) {
      AutogradMeta& m = autograd(*fn->retained->target);
      m.grad = m.grad ? ops::add(m.grad, grad) : (grad_enabled() ? grad : ops::clone(grad));
    }
    if (run.captured) {
      if (auto it = run.captured->find(fn); it != run.captured->end()) it->second = grad;
      if (!run.leads_to_capture[fn]) continue;
    }
    std::vector<Tensor> grads;
    if (const CompositeBackward* view = grad ? region_view(fn) : nullptr) {
      // Kept for the input's function, which assembles it with its other views' gradients.
      Run::Regions& r = run.regions[view->next[0].fn.get()];
      r.shape = view->shapes_[0];
      r.dtype = view->dtypes_[0];
      r.parts.push_back({*view->region_, grad});
    } else {
      grads = fn->apply(grad);
    }
    if (!retain_graph) fn->release_saved();
    for (size_t i = 0; i < fn->next.size(); ++i) {
      GradFn* next = fn->next[i].fn.get();
      if (!next) continue;
      if (i < grads.size() && grads[i]) add_grad(run.pending[next], grads[i]);
      if (--run.dependencies[next] == 0 && !queued[next]) {
        ready.push(next);
        queued[next] = true;
      }
    }
  }
}

std::vector<std::pair<GradFn*, Tensor>> seeds_of(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads) {
  std::vector<std::pair<GradFn*, Tensor>> seeds;
  for (size_t i = 0; i < roots.size(); ++i) {
    TensorImpl& r = *roots[i];
    LOOM_CHECK(requires_grad(r), Runtime, "element ", i, " of tensors does not require grad and does not have a grad_fn");
    Tensor g = i < grads.size() ? grads[i] : Tensor();
    if (!g) {
      LOOM_CHECK(r.numel() == 1, Runtime, "grad can be implicitly created only for scalar outputs");
      g = ops::full(r.sizes(), Scalar(int64_t{1}), r.dtype(), {r.device(), r.is_lazy()});
    } else {
      LOOM_CHECK(Dims(g->sizes()) == Dims(r.sizes()), Runtime, "Mismatch in shape: grad_output[", i,
                 "] has a shape of ", format_dims(g->sizes()), " and output[", i, "] has a shape of ",
                 format_dims(r.sizes()), ".");
      // An eager gradient for a lazy output would make the leaves' .grad eager (and the other
      // way round): rejected, as PyTorch rejects a gradient on another device.
      LOOM_CHECK(g->device() == r.device() && g->is_lazy() == r.is_lazy(), Runtime, "invalid gradient at index ", i,
                 " - expected device ", placement_name(r), " but got ", placement_name(*g));
    }
    seeds.emplace_back(gradient_edge(r).fn.get(), g);
  }
  return seeds;
}

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, bool retain_graph,
              bool create_graph) {
  Run run;
  auto seeds = seeds_of(roots, grad_roots);
  if (StepRecording* r = recording(); r && !retain_graph && !create_graph) r->note_backward(roots);  // lazy/capture.h
  // retain_grad() on non-leaves: their gradient is what reaches their grad_fn.
  execute(std::move(seeds), retain_graph || create_graph, create_graph, run);
}

std::vector<Tensor> grad(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                         const std::vector<Tensor>& inputs, bool retain_graph, bool create_graph, bool allow_unused) {
  std::unordered_map<GradFn*, Tensor> captured;
  std::vector<GradFn*> targets;
  for (const Tensor& in : inputs) {
    LOOM_CHECK(requires_grad(*in), Runtime, "One of the differentiated Tensors does not require grad");
    GradFn* fn = gradient_edge(*in).fn.get();
    captured[fn] = Tensor();
    targets.push_back(fn);
  }
  Run run;
  run.captured = &captured;
  execute(seeds_of(roots, grad_roots), retain_graph || create_graph, create_graph, run);
  std::vector<Tensor> out;
  for (size_t i = 0; i < targets.size(); ++i) {
    Tensor g = captured[targets[i]];
    LOOM_CHECK(g || allow_unused, Runtime,
               "One of the differentiated Tensors appears to not have been used in the graph. Set allow_unused=True "
               "if this is the desired behavior.");
    out.push_back(g ? ops::cast(g, inputs[i]->dtype()) : g);
  }
  return out;
}

}  // namespace loom
