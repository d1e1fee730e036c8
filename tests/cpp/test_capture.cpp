// loom.compile's C++ side without Python: what a StepRecording (lazy/capture.h) collects while a
// step records, and how a CapturedStep (graph/captured_step.h) resolves a later call's inputs,
// guards them and replays. The Python side (argument specs, Python guards, optimizers) is tested
// in tests/python/test_compile*.py.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "graph/captured_step.h"
#include "graph/interpreter.h"
#include "lazy/autograd.h"
#include "lazy/capture.h"
#include "lazy/ops.h"
#include "lazy/sync.h"
#include "runtime/error.h"
#include "runtime/random.h"

using namespace loom;
using graph::CapturedStep;

namespace {

struct CaptureFixture {
  CaptureFixture() { install_executor(std::make_unique<graph::Interpreter>()); }
  ~CaptureFixture() { install_executor(std::make_unique<graph::Interpreter>()); }
};

Dims D(std::initializer_list<int64_t> v) { return Dims(v); }

// A materialized lazy tensor holding `v` (an Input leaf of the traces that read it).
Tensor lazy_of(const std::vector<double>& v, DType dtype = DType::Float32) {
  Array a = empty(D({static_cast<int64_t>(v.size())}), DType::Float64, kCPU);
  std::memcpy(a.data(), v.data(), v.size() * sizeof(double));
  return make_tensor(copy_to(a, dtype, kCPU), true);
}

std::vector<double> values(const Tensor& t) {
  materialize(*t);
  Array c = copy_to(t->array(), DType::Float64, kCPU);
  const double* p = static_cast<const double*>(c.data());
  return std::vector<double>(p, p + c.numel());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One recorded call, as loom.compile's extension records it (pyext/compile_bindings.cpp record):
// the step runs under a StepRecording, its own sync ends it, and the captured step is made from
// what was collected. `owners`: tensors whose .grad the step may read or set.
struct Recorded {
  std::unique_ptr<StepRecording> rec = std::make_unique<StepRecording>(nullptr, false);
  std::vector<Tensor> returned;
  std::unique_ptr<CapturedStep> step;
  std::string why;  // when no step could be made
};

using Step = std::function<std::vector<Tensor>(StepRecording&, const std::vector<Tensor>& args)>;

Recorded record(const std::vector<Tensor>& args, const Step& step, const std::vector<Tensor>& owners = {}) {
  Recorded r;
  graph::StepContext ctx;
  ctx.arguments = args;
  for (const Tensor& p : owners) {
    AutogradMeta* m = p->autograd_meta();
    ctx.grads_at_start.emplace_back(p, m ? m->grad : Tensor());
  }
  ctx.random_offset_at_start = default_generator(kCPU).offset();
  {
    StepRecording::Scope scope(*r.rec);
    r.returned = step(*r.rec, args);
    r.rec->finish(kCPU);
  }
  ctx.returned = r.returned;
  auto made = CapturedStep::make(*r.rec, ctx);
  if (auto* s = std::get_if<std::unique_ptr<CapturedStep>>(&made)) r.step = std::move(*s);
  else r.why = std::get<std::string>(made);
  return r;
}

// check() then replay() for a call with these tensor arguments and numbers: the returned
// tensors, or the guard's message (`missed`).
std::vector<Tensor> replay(CapturedStep& step, const std::vector<Tensor>& args, const std::vector<double>& numbers,
                           std::string* missed = nullptr) {
  std::vector<TensorImpl*> impls;
  for (const Tensor& a : args) impls.push_back(a.get());
  graph::ReplayInputs in{impls, numbers};
  CapturedStep::Resolved resolved;
  std::string miss = step.check(in, resolved);
  if (missed) *missed = miss;
  if (!miss.empty()) return {};
  bool busy = false;
  std::vector<Tensor> out = step.replay(in, resolved, busy);
  BOOST_TEST(!busy);
  return out;
}

// The check() message for a call with these arguments ("" if it may replay).
std::string guard(const CapturedStep& step, const std::vector<Tensor>& args) {
  std::vector<TensorImpl*> impls;
  for (const Tensor& a : args) impls.push_back(a.get());
  CapturedStep::Resolved resolved;
  return step.check(graph::ReplayInputs{impls, {}}, resolved);
}

// An SGD-like step: loss = sum(x * p); p -= lr * x, with lr a number of the call (tag `lr_tag`,
// or an untagged constant when 0). Returns the loss.
Step sgd_like(Tensor p, double lr, bool tagged = true) {
  return [p, lr, tagged](StepRecording& rec, const std::vector<Tensor>& args) {
    const Tensor& x = args[0];
    Scalar s(lr);
    if (tagged) s = s.with_source(rec.add_number({NumberSource::Argument, 0, 0, lr}));
    Tensor loss = ops::sum(ops::mul(x, p));
    ops::sub_(*p, ops::mul(x, s));
    return std::vector<Tensor>{loss};
  };
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(capture, CaptureFixture)

// ---- StepRecording: what the hooks collect ----

BOOST_AUTO_TEST_CASE(hooks_note_each_read_once_creations_and_first_writes) {
  Tensor x = lazy_of({1, 2, 3}), p = lazy_of({4, 5, 6}), q = lazy_of({7, 8, 9}), later = lazy_of({0, 0, 0});
  uint64_t p_version = p->version();
  StepRecording rec(nullptr, false);
  Tensor made, y;
  {
    StepRecording::Scope scope(rec);
    y = ops::add(ops::mul(x, p), x);  // x read twice: one read
    made = lazy_of({1, 1, 1});        // made in the step: a constant, not a tensor a replay finds
    ops::add_(*p, Scalar(1.0));       // the first write notes p's counter and its version before
    ops::add_(*p, Scalar(1.0));       // p is pending now: no second note
    ops::mul_(*ops::narrow(q, 0, 1, 1), Scalar(2.0));  // through a view made in the step: its base too
  }
  (void)ops::add(later, Scalar(1.0));  // after the scope: nothing noted
  BOOST_TEST_REQUIRE(rec.reads().size() == 3u);
  BOOST_TEST((rec.reads()[0] == x));
  BOOST_TEST((rec.reads()[1] == p));
  BOOST_TEST(rec.created(rec.reads()[2].get()));  // the view of q, which mul_ read
  BOOST_TEST(rec.created(made.get()));
  BOOST_TEST(!rec.created(x.get()));
  BOOST_TEST(!rec.created(later.get()));
  BOOST_TEST_REQUIRE(rec.writes().size() == 2u);  // p's counter, and q's (shared with its view)
  BOOST_TEST((rec.writes()[0].first == p->version_counter()));
  BOOST_TEST(rec.writes()[0].second == p_version);
  BOOST_TEST((rec.writes()[1].first == q->version_counter()));
  bool q_written = false;
  for (const Tensor& w : rec.written()) q_written = q_written || w == q;
  BOOST_TEST(q_written);
  BOOST_TEST((rec.written().front() == p));
  BOOST_TEST(recording() == nullptr);
  sync_all();
  BOOST_TEST((values(p) == std::vector<double>{6, 7, 8}));
  BOOST_TEST((values(q) == std::vector<double>{7, 16, 9}));
}

BOOST_AUTO_TEST_CASE(a_thread_records_one_step_at_a_time) {
  StepRecording a(nullptr, false), b(nullptr, false);
  StepRecording::Scope scope(a);
  BOOST_TEST(recording() == &a);
  BOOST_TEST(contains(error_of([&] { StepRecording::Scope inner(b); }), "one compiled step at a time"));
  BOOST_TEST(recording() == &a);
}

BOOST_AUTO_TEST_CASE(sync_points_name_their_line_once_per_read) {
  int line = 7;
  StepRecording rec([&] { return "step.py:" + std::to_string(line); }, false);
  Tensor x = lazy_of({1, 2});
  {
    StepRecording::Scope scope(rec);
    Tensor y = ops::mul(x, Scalar(2.0));
    BOOST_TEST((values(y) == std::vector<double>{2, 4}));  // the read syncs: one sync point, not two
    line = 9;
    BOOST_TEST((values(ops::add(y, Scalar(1.0))) == std::vector<double>{3, 5}));
  }
  BOOST_TEST_REQUIRE(rec.syncs().size() == 2u);
  BOOST_TEST(rec.syncs()[0].where == "step.py:7");
  BOOST_TEST(rec.syncs()[0].what == "reads a tensor's value");
  BOOST_TEST(rec.syncs()[1].where == "step.py:9");
  BOOST_TEST((rec.syncs()[0].device == kCPU));
}

BOOST_AUTO_TEST_CASE(fullgraph_raises_at_the_sync_point_before_computing) {
  StepRecording rec([] { return std::string("step.py:12"); }, true);
  Tensor x = lazy_of({1, 2});
  Tensor y;
  std::string message;
  {
    StepRecording::Scope scope(rec);
    y = ops::mul(x, Scalar(2.0));
    message = error_of([&] { values(y); });
  }
  BOOST_TEST(contains(message, "fullgraph=True"));
  BOOST_TEST(contains(message, "step.py:12"));
  BOOST_TEST(contains(message, "reads a tensor's value"));
  BOOST_TEST(y->is_pending());  // nothing was computed
  BOOST_TEST(rec.syncs().empty());
  BOOST_TEST((values(y) == std::vector<double>{2, 4}));  // outside the recording it computes
}

BOOST_AUTO_TEST_CASE(numbers_are_tagged_with_their_source_and_place) {
  StepRecording rec(nullptr, false);
  BOOST_TEST(rec.add_number({NumberSource::Argument, 2, 0, 0.5}) == 1u);
  BOOST_TEST(rec.optimizer_number(0.1) == 0u);  // outside an optimizer call: untagged
  {
    StepRecording::OptimizerCall call(&rec, 3);
    BOOST_TEST(rec.optimizer_number(0.1) == 2u);
    BOOST_TEST(rec.optimizer_number(0.9) == 3u);
    BOOST_TEST(call.numbers() == 2);
  }
  BOOST_TEST(rec.optimizer_number(0.2) == 0u);
  {
    StepRecording::OptimizerCall none(nullptr, 4);  // no recording: nothing happens
    BOOST_TEST(none.numbers() == 0);
  }
  const auto& n = rec.numbers();
  BOOST_TEST_REQUIRE(n.size() == 3u);
  BOOST_TEST((n[0].kind == NumberSource::Argument && n[0].index == 2 && n[0].value == 0.5));
  BOOST_TEST((n[1].kind == NumberSource::Optimizer && n[1].index == 3 && n[1].position == 0 && n[1].value == 0.1));
  BOOST_TEST((n[2].kind == NumberSource::Optimizer && n[2].index == 3 && n[2].position == 1 && n[2].value == 0.9));
}

BOOST_AUTO_TEST_CASE(finish_hands_the_step_trace_over_once) {
  Tensor x = lazy_of({1, 2, 3}), p = lazy_of({1, 1, 1});
  Recorded r = record({x}, sgd_like(p, 0.5));
  const auto& st = r.rec->step_trace();
  BOOST_TEST_REQUIRE(st.has_value());
  BOOST_TEST((r.rec->phase() == StepRecording::Phase::Done));
  BOOST_TEST_REQUIRE(!st->roots.empty());
  BOOST_TEST((std::ranges::find(st->roots, r.returned[0]) != st->roots.end()));  // the loss is an output
  bool writes_p = false;
  for (const Trace::Output& o : st->trace.outputs)
    writes_p = writes_p || (o.destination && o.destination->storage == p->array().storage);
  BOOST_TEST(writes_p);
  BOOST_TEST(contains(error_of([&] { r.rec->finish(kCPU); }), "finished twice"));
  BOOST_TEST((values(r.returned[0]) == std::vector<double>{6}));
  BOOST_TEST((values(p) == std::vector<double>{0.5, 0, -0.5}));
}

BOOST_AUTO_TEST_CASE(a_step_without_lazy_work_cannot_be_captured) {
  Recorded r = record({lazy_of({1})}, [](StepRecording&, const std::vector<Tensor>&) { return std::vector<Tensor>{}; });
  BOOST_TEST(!r.step);
  BOOST_TEST(r.why == "the step recorded no lazy work");
}

// ---- CapturedStep: replay-input resolution, guards, replay ----

BOOST_AUTO_TEST_CASE(a_replay_reads_this_calls_arguments_numbers_and_parameters) {
  Tensor p = lazy_of({1, 1, 1});
  Recorded r = record({lazy_of({1, 2, 3})}, sgd_like(p, 0.5));
  BOOST_TEST_REQUIRE(r.step, r.why);
  BOOST_TEST((r.step->numbers_used() == std::vector<int32_t>{0}));
  BOOST_TEST((values(p) == std::vector<double>{0.5, 0, -0.5}));
  // Another batch, another learning rate: the parameter as it is now, found by identity.
  uint64_t version = p->version();
  std::vector<Tensor> out = replay(*r.step, {lazy_of({2, 0, 4})}, {0.25});
  BOOST_TEST_REQUIRE(out.size() == 1u);
  BOOST_TEST((out[0] != r.returned[0]));  // a fresh result: the recorded one is left as it was
  BOOST_TEST((values(out[0]) == std::vector<double>{1 + 0 - 2}));
  BOOST_TEST((values(r.returned[0]) == std::vector<double>{6}));
  BOOST_TEST((values(p) == std::vector<double>{0, 0, -1.5}));
  BOOST_TEST(p->version() == version + 1);  // moved as the step moved it
  // A third call with a new argument tensor: the slots are filled again.
  out = replay(*r.step, {lazy_of({1, 1, 1})}, {1.0});
  BOOST_TEST((values(out[0]) == std::vector<double>{-1.5}));
  BOOST_TEST((values(p) == std::vector<double>{-1, -1, -2.5}));
}

BOOST_AUTO_TEST_CASE(an_untagged_number_is_a_constant_of_the_step) {
  Tensor p = lazy_of({0, 0});
  Recorded r = record({lazy_of({1, 1})}, sgd_like(p, 0.5, false));
  BOOST_TEST_REQUIRE(r.step, r.why);
  BOOST_TEST(r.step->numbers_used().empty());
  replay(*r.step, {lazy_of({1, 2})}, {});
  BOOST_TEST((values(p) == std::vector<double>{-1, -1.5}));
}

BOOST_AUTO_TEST_CASE(an_argument_sliced_at_another_offset_is_read_there) {
  // Captured with a batch at offset 0 of a larger tensor, replayed with the next batch.
  Tensor data = lazy_of({1, 2, 3, 4, 5, 6});
  Tensor p = lazy_of({0, 0, 0});
  Recorded r = record({ops::narrow(data, 0, 0, 3)}, sgd_like(p, 1.0));
  BOOST_TEST_REQUIRE(r.step, r.why);
  BOOST_TEST((values(p) == std::vector<double>{-1, -2, -3}));
  std::vector<Tensor> out = replay(*r.step, {ops::narrow(data, 0, 3, 3)}, {1.0});
  BOOST_TEST((values(out[0]) == std::vector<double>{-4 - 10 - 18}));
  BOOST_TEST((values(p) == std::vector<double>{-5, -7, -9}));
  out = replay(*r.step, {ops::narrow(data, 0, 0, 3)}, {1.0});  // and back
  BOOST_TEST((values(out[0]) == std::vector<double>{-5 - 14 - 27}));
}

BOOST_AUTO_TEST_CASE(guards_name_what_differs) {
  Tensor p = lazy_of({0, 0, 0});
  Recorded r = record({lazy_of({1, 2, 3})}, sgd_like(p, 1.0));
  BOOST_TEST_REQUIRE(r.step, r.why);
  BOOST_TEST(guard(*r.step, {lazy_of({4, 5, 6})}) == "");
  BOOST_TEST(guard(*r.step, {}) == "an argument is missing");
  BOOST_TEST(guard(*r.step, {lazy_of({1, 2, 3, 4})}) == "argument 0 is float32 [4], was float32 [3]");
  BOOST_TEST(guard(*r.step, {lazy_of({1, 2, 3}, DType::Float64)}) == "argument 0 is float64 [3], was float32 [3]");
  Tensor strided = make_tensor(lazy_of({1, 2, 3, 4, 5, 6})->array().view_as(Layout{D({3}), D({2}), 0}), true);
  BOOST_TEST(guard(*r.step, {strided}) == "argument 0 is float32 [3] (strided), was float32 [3]");
  Tensor eager = make_tensor(lazy_of({1, 2, 3})->array(), false);
  BOOST_TEST(contains(guard(*r.step, {eager}), "is not on cpu"));
  Tensor wants_grad = lazy_of({1, 2, 3});
  set_requires_grad(*wants_grad, true);
  BOOST_TEST(contains(guard(*r.step, {wants_grad}), "changed its requires_grad"));
  // Nothing was replayed by a failed guard.
  BOOST_TEST((values(p) == std::vector<double>{-1, -2, -3}));
}

BOOST_AUTO_TEST_CASE(tensors_must_share_memory_as_at_capture) {
  auto step = [](StepRecording&, const std::vector<Tensor>& args) {
    return std::vector<Tensor>{ops::add(args[0], args[1])};
  };
  Tensor a = lazy_of({1, 2}), b = lazy_of({3, 4});
  Recorded distinct = record({a, b}, step);
  BOOST_TEST_REQUIRE(distinct.step, distinct.why);
  BOOST_TEST(guard(*distinct.step, {b, a}) == "");
  BOOST_TEST(contains(guard(*distinct.step, {a, a}), "share memory differently"));
  Recorded same = record({a, a}, step);
  BOOST_TEST_REQUIRE(same.step, same.why);
  BOOST_TEST(guard(*same.step, {b, b}) == "");
  BOOST_TEST(contains(guard(*same.step, {a, b}), "share memory differently"));
  // The same with an argument that views another's memory.
  Tensor whole = lazy_of({1, 2, 3, 4});
  Recorded view = record({whole, ops::narrow(whole, 0, 2, 2)}, [](StepRecording&, const std::vector<Tensor>& args) {
    return std::vector<Tensor>{ops::mul(args[1], Scalar(2.0))};  // its data found through args[0]
  });
  BOOST_TEST_REQUIRE(view.step, view.why);
  BOOST_TEST((values(view.returned[0]) == std::vector<double>{6, 8}));
  BOOST_TEST(contains(guard(*view.step, {lazy_of({0, 0, 0, 0}), b}), "share memory differently"));
  Tensor other = lazy_of({5, 6, 7, 8});
  BOOST_TEST((values(replay(*view.step, {other, ops::narrow(other, 0, 2, 2)}, {})[0]) == std::vector<double>{14, 16}));
  BOOST_TEST((values(replay(*distinct.step, {b, lazy_of({10, 20})}, {})[0]) == std::vector<double>{13, 24}));
  BOOST_TEST((values(replay(*same.step, {b, b}, {})[0]) == std::vector<double>{6, 8}));
}

BOOST_AUTO_TEST_CASE(a_pending_argument_is_computed_before_the_replay) {
  Tensor p = lazy_of({0, 0});
  Recorded r = record({lazy_of({1, 1})}, sgd_like(p, 1.0));
  BOOST_TEST_REQUIRE(r.step, r.why);
  Tensor pending = ops::mul(lazy_of({1, 2}), Scalar(3.0));
  BOOST_TEST(pending->is_pending());
  std::vector<Tensor> out = replay(*r.step, {pending}, {1.0});
  BOOST_TEST((values(out[0]) == std::vector<double>{-9}));
  BOOST_TEST((values(p) == std::vector<double>{-4, -7}));
}

BOOST_AUTO_TEST_CASE(two_recordings_agree_only_on_the_same_constants) {
  Tensor p = lazy_of({0, 0});
  Recorded a = record({lazy_of({1, 1})}, sgd_like(p, 0.5, false));
  Recorded b = record({lazy_of({1, 1})}, sgd_like(p, 0.5, false));
  Recorded c = record({lazy_of({1, 1})}, sgd_like(p, 0.7, false));  // a number Python computed anew
  Recorded tagged = record({lazy_of({1, 1})}, sgd_like(p, 0.7, true));
  BOOST_TEST_REQUIRE((a.step && b.step && c.step && tagged.step));
  BOOST_TEST(a.step->agrees_with(*b.step) == "");
  BOOST_TEST(!a.step->agrees_with(*c.step).empty());
  BOOST_TEST(!a.step->agrees_with(*tagged.step).empty());
}

BOOST_AUTO_TEST_CASE(what_a_replay_could_not_follow_is_refused) {
  // A tensor made in the step and written in place.
  Recorded made = record({lazy_of({1})}, [](StepRecording&, const std::vector<Tensor>& args) {
    Tensor c = lazy_of({5});
    ops::add_(*c, args[0]);
    return std::vector<Tensor>{};
  });
  BOOST_TEST(made.why == "the step writes in place into a tensor it made from Python data");
  // A result the step computed but neither returned nor set as a .grad.
  Tensor kept;
  Recorded lost = record({lazy_of({1})}, [&](StepRecording&, const std::vector<Tensor>& args) {
    kept = ops::mul(args[0], Scalar(2.0));
    return std::vector<Tensor>{};
  });
  BOOST_TEST(contains(lost.why, "leaves a tensor it computed"));
  // A result that requires grad whose backward the step did not run.
  Tensor w = lazy_of({2});
  set_requires_grad(*w, true);
  Recorded no_backward = record({lazy_of({1})}, [&](StepRecording&, const std::vector<Tensor>& args) {
    return std::vector<Tensor>{ops::mul(args[0], w)};
  });
  BOOST_TEST(contains(no_backward.why, "did not run its backward"));
}

BOOST_AUTO_TEST_CASE(a_training_step_sets_grads_and_its_loss_keeps_no_graph) {
  Tensor w = lazy_of({1, 2});
  set_requires_grad(*w, true);
  auto step = [&](StepRecording&, const std::vector<Tensor>& args) {
    autograd(*w).grad.reset();  // zero_grad(set_to_none=True)
    Tensor loss = ops::sum(ops::mul(args[0], w));
    backward({loss}, {}, false, false);
    {
      GradModeGuard off(false);
      ops::sub_(*w, ops::mul(autograd(*w).grad, Scalar(0.5)));
    }
    return std::vector<Tensor>{loss};
  };
  Recorded r = record({lazy_of({3, 4})}, step, {w});
  BOOST_TEST_REQUIRE(r.step, r.why);
  BOOST_TEST((values(w) == std::vector<double>{-0.5, 0}));
  Tensor grad_before = autograd(*w).grad;
  std::vector<Tensor> out = replay(*r.step, {lazy_of({1, -2})}, {});
  BOOST_TEST((values(out[0]) == std::vector<double>{-0.5}));
  Tensor g = autograd(*w).grad;
  BOOST_TEST_REQUIRE(static_cast<bool>(g));
  BOOST_TEST((g != grad_before));  // a fresh .grad: the one the user may hold is unchanged
  BOOST_TEST((values(g) == std::vector<double>{1, -2}));
  BOOST_TEST((values(grad_before) == std::vector<double>{3, 4}));
  BOOST_TEST((values(w) == std::vector<double>{-1, 1}));
  BOOST_TEST(requires_grad(*out[0]));
  BOOST_TEST(contains(error_of([&] { backward({out[0]}, {}, false, false); }), "backward through the graph a second time"));
}

BOOST_AUTO_TEST_CASE(random_ops_draw_fresh_numbers_each_replay) {
  Recorded r = record({lazy_of({0, 0, 0, 0})}, [](StepRecording&, const std::vector<Tensor>& args) {
    return std::vector<Tensor>{ops::add(args[0], ops::rand(D({4}), DType::Float32, {kCPU, true}))};
  });
  BOOST_TEST_REQUIRE(r.step, r.why);
  Generator& g = default_generator(kCPU);
  uint64_t before = g.offset();
  std::vector<double> first = values(replay(*r.step, {lazy_of({0, 0, 0, 0})}, {})[0]);
  BOOST_TEST(g.offset() == before + 1);  // as a lazy step draws
  std::vector<double> second = values(replay(*r.step, {lazy_of({0, 0, 0, 0})}, {})[0]);
  BOOST_TEST(first != second);
  BOOST_TEST(first != values(r.returned[0]));
  // The same state draws the same numbers as the lazy op would.
  g.manual_seed(5);
  std::vector<double> replayed = values(replay(*r.step, {lazy_of({0, 0, 0, 0})}, {})[0]);
  g.manual_seed(5);
  BOOST_TEST(replayed == values(ops::rand(D({4}), DType::Float32, {kCPU, true})));
}

BOOST_AUTO_TEST_CASE(a_failed_replay_changes_nothing) {
  // p += p[index]: an index out of range in a later call's data fails inside the run.
  Tensor p = lazy_of({1, 2});
  auto step = [&](StepRecording&, const std::vector<Tensor>& args) {
    ops::add_(*p, ops::gather(p, 0, args[0]));
    return std::vector<Tensor>{};
  };
  auto index = [](std::vector<double> v) { return lazy_of(v, DType::Int64); };
  Recorded r = record({index({1, 0})}, step);
  BOOST_TEST_REQUIRE(r.step, r.why);
  BOOST_TEST((values(p) == std::vector<double>{3, 3}));
  uint64_t version = p->version();
  std::string message = error_of([&] { replay(*r.step, {index({7, 0})}, {}); });
  BOOST_TEST(contains(message, "out of"));
  BOOST_TEST((values(p) == std::vector<double>{3, 3}));
  BOOST_TEST(p->version() == version);
  replay(*r.step, {index({0, 0})}, {});  // and the step replays after
  BOOST_TEST((values(p) == std::vector<double>{6, 6}));
  BOOST_TEST(p->version() == version + 1);
}

BOOST_AUTO_TEST_SUITE_END()
