#include "lazy/capture.h"

#include <algorithm>

#include "lazy/sync.h"
#include "runtime/error.h"

namespace loom {

namespace detail {
thread_local StepRecording* active_recording = nullptr;
}

StepRecording::StepRecording(std::function<std::string()> where, bool forbid_syncs)
    : where_(std::move(where)), forbid_syncs_(forbid_syncs) {}

StepRecording::Scope::Scope(StepRecording& r) : previous_(detail::active_recording) {
  LOOM_CHECK(!previous_, Runtime, "internal: a thread records one compiled step at a time");
  detail::active_recording = &r;
}

StepRecording::Scope::~Scope() { detail::active_recording = previous_; }

uint32_t StepRecording::add_number(NumberSource source) {
  numbers_.push_back(source);
  return static_cast<uint32_t>(numbers_.size());
}

StepRecording::OptimizerCall::OptimizerCall(StepRecording* r, int32_t call) : r_(r) {
  if (!r_) return;
  r_->optimizer_call_ = call;
  r_->optimizer_position_ = 0;
}

StepRecording::OptimizerCall::~OptimizerCall() {
  if (r_) r_->optimizer_call_ = -1;
}

int32_t StepRecording::OptimizerCall::numbers() const noexcept { return r_ ? r_->optimizer_position_ : 0; }

uint32_t StepRecording::optimizer_number(double value) {
  if (optimizer_call_ < 0 || phase_ != Phase::Running) return 0;
  return add_number({NumberSource::Optimizer, optimizer_call_, optimizer_position_++, value});
}

void StepRecording::note_read(TensorImpl& t) {
  if (phase_ != Phase::Running || !read_set_.insert(&t).second) return;
  reads_.emplace_back(&t);
}

void StepRecording::note_first_write(TensorImpl& t) {
  if (phase_ != Phase::Running) return;
  const Ref<VersionCounter>& counter = t.version_counter();
  if (written_set_.insert(counter.get()).second) writes_.emplace_back(counter, counter->value);
  written_.emplace_back(&t);
  if (TensorImpl* base = t.view_base()) written_.emplace_back(base);
}

Generator& generator_for_draw(Device device, bool lazy) {
  Generator& g = current_generator(device);
  if (lazy && generator_overridden())
    if (StepRecording* r = recording()) r->note_sync_point(device, "draws from a loom.Generator (generator=)");
  return g;
}

void StepRecording::note_sync_point(Device device, const char* what) {
  if (phase_ != Phase::Running) return;
  std::string where = where_ ? where_() : std::string();
  LOOM_CHECK(!forbid_syncs_, Runtime, "loom.compile(fullgraph=True): the step ", what, " at ",
             where.empty() ? std::string("an unknown line") : where,
             ". A compiled step cannot contain a sync point (item(), print(tensor), bool(tensor), .tolist(), "
             ".numpy(), data-dependent Python control flow): its replay runs no Python, so it could not act on the "
             "value. Move the read after the step, or compile without fullgraph=True to run such steps uncompiled.");
  if (!syncs_.empty() && syncs_.back().where == where) return;  // one read that syncs: one sync point
  syncs_.push_back({device, what, std::move(where)});
}

void StepRecording::note_backward(std::span<const Tensor> roots) {
  if (phase_ != Phase::Running) return;
  for (const Tensor& r : roots)
    if (const Ref<GradFn>& fn = current_grad_fn(*r)) consumed_.push_back(fn);
}

bool StepRecording::graph_consumed(TensorImpl& t) const {
  const Ref<GradFn>& fn = current_grad_fn(t);
  return fn && std::ranges::find(consumed_, fn) != consumed_.end();
}

void StepRecording::finish(Device device) {
  LOOM_CHECK(phase_ == Phase::Running, Runtime, "internal: a step recording finished twice");
  phase_ = Phase::Finishing;
  struct Done {
    Phase& phase;
    ~Done() { phase = Phase::Done; }
  } done{phase_};
  sync(device);
}

void StepRecording::trace_ran(const Trace& trace, std::span<const Tensor> roots, std::span<const Tensor> views,
                              std::span<const Array> orphans) {
  if (phase_ != Phase::Finishing || step_trace_) return;
  StepTrace s;
  s.trace = trace;
  s.nodes.reserve(trace.nodes.size());
  for (Node* n : trace.nodes) s.nodes.emplace_back(n);
  s.roots.assign(roots.begin(), roots.end());
  s.orphans.assign(orphans.begin(), orphans.end());
  for (const Tensor& v : views) {
    const auto& info = v->view_info();
    TensorImpl* base = info && info->base->target ? info->base->target : nullptr;
    int32_t index = -1;
    for (size_t i = 0; i < roots.size() && base; ++i)
      if (roots[i].get() == base) index = static_cast<int32_t>(i);
    s.views.push_back({v, index, info ? info->relative : Layout{}});
  }
  step_trace_ = std::move(s);
}

}  // namespace loom
