// The profiler's event store (runtime/profiler.h) and the spans a compiled sync records
// (lazy/provenance.h, graph/step_profile.h), without Python: nothing is recorded while no profile
// runs, spans nest, a span that outlives its profile is dropped, deferred events are flushed at
// stop, and a sync's run lists each step of its plan once.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "graph/interpreter.h"
#include "lazy/ops.h"
#include "lazy/provenance.h"
#include "lazy/sync.h"
#include "runtime/metrics.h"
#include "runtime/profiler.h"

using namespace loom;

namespace {

std::vector<profiler::Event> of_category(const std::vector<profiler::Event>& events, const std::string& category) {
  std::vector<profiler::Event> out;
  for (const profiler::Event& e : events)
    if (category == e.category) out.push_back(e);
  return out;
}

int flushes = 0;
void flush_one() {
  ++flushes;
  profiler::Event e;
  e.category = "cuda";
  e.name = "deferred";
  profiler::emit(std::move(e));
}

struct Compiled {
  Compiled() { graph::install_default_executor(); }
  ~Compiled() { install_executor(std::make_unique<graph::Interpreter>()); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(profiler_events)

BOOST_AUTO_TEST_CASE(nothing_is_recorded_while_no_profile_runs) {
  BOOST_TEST(!profiler::active());
  {
    profiler::Span span("user", "off");
    BOOST_TEST(span.event() == nullptr);
  }
  profiler::emit(profiler::Event{});
  profiler::start();
  BOOST_TEST(profiler::stop().empty());
}

BOOST_AUTO_TEST_CASE(spans_nest_and_carry_what_they_are_given) {
  profiler::start();
  {
    profiler::Span outer("user", "outer");
    {
      profiler::Span inner("user", "inner");
      inner.event()->args.emplace_back("k", "v");
    }
    profiler::Span dropped("user", "dropped");
    dropped.cancel();
  }
  std::vector<profiler::Event> events = profiler::stop();
  BOOST_REQUIRE(events.size() == 2u);
  const profiler::Event& inner = events[0];  // emitted when it ends
  const profiler::Event& outer = events[1];
  BOOST_TEST(inner.name == "inner");
  BOOST_TEST(outer.name == "outer");
  BOOST_TEST(outer.start_ns <= inner.start_ns);
  BOOST_TEST(inner.start_ns + inner.duration_ns <= outer.start_ns + outer.duration_ns);
  BOOST_TEST(inner.args.at(0).second == "v");
  BOOST_TEST(inner.thread == profiler::thread_id());
}

BOOST_AUTO_TEST_CASE(a_span_that_outlives_its_profile_is_dropped) {
  profiler::start();
  std::vector<profiler::Event> second;
  {
    profiler::Span early("user", "early");
    BOOST_TEST(profiler::stop().empty());
    profiler::start();
  }
  second = profiler::stop();
  BOOST_TEST(second.empty());
}

BOOST_AUTO_TEST_CASE(deferred_events_are_flushed_into_the_profile_at_stop) {
  static const bool added = (profiler::add_flusher(&flush_one), true);
  BOOST_TEST(added);
  int before = flushes;
  profiler::start();
  std::vector<profiler::Event> events = profiler::stop();
  BOOST_TEST(flushes == before + 1);
  BOOST_TEST(of_category(events, "cuda").size() == 1u);
}

BOOST_FIXTURE_TEST_CASE(a_sync_lists_every_step_of_its_plan_once, Compiled) {
  Tensor x = ops::full(Dims{64, 8}, Scalar(0.5), DType::Float32, {kCPU, true});
  Tensor w = ops::full(Dims{8, 4}, Scalar(0.25), DType::Float32, {kCPU, true});
  materialize(*x);
  materialize(*w);
  auto program = [&] {
    Tensor h = ops::unary(OpId::Tanh, ops::mul(x, Scalar(2.0)));
    return ops::unary(OpId::Exp, ops::matmul(h, w));
  };
  materialize(*program());  // lowered and compiled
  Tensor y = program();
  int64_t launches = metrics().kernel_launches;
  hold_source_capture();
  profiler::start();
  {
    SyncReason reason(SyncCause::Explicit);
    sync_all();
  }
  std::vector<profiler::Event> events = profiler::stop();
  release_source_capture();
  launches = metrics().kernel_launches - launches;
  std::vector<profiler::Event> steps = of_category(events, "kernel");
  std::vector<profiler::Event> products = of_category(events, "blas");
  BOOST_TEST(steps.size() == 2u);  // Mul+Tanh before the product, Exp after it
  BOOST_TEST(products.size() == 1u);
  BOOST_TEST(static_cast<int64_t>(steps.size() + products.size()) == launches);
  for (const profiler::Event& k : steps) {
    BOOST_TEST(!k.fused.empty());
    for (const profiler::FusedOp& op : k.fused) BOOST_TEST(op.source == -1);  // no Python here
  }
  std::vector<std::string> names;
  for (const profiler::Event& k : steps) names.push_back(k.name.substr(k.name.find(": ") + 2));
  std::sort(names.begin(), names.end());
  BOOST_TEST((names == std::vector<std::string>{"Exp", "Mul+Tanh"}));
  BOOST_TEST(products[0].bytes_read == (64 * 8 + 8 * 4) * 4);
  BOOST_TEST(products[0].bytes_written == 64 * 4 * 4);
  std::vector<profiler::Event> syncs = of_category(events, "sync");
  BOOST_REQUIRE(syncs.size() == 1u);
  BOOST_TEST(syncs[0].name == "sync (explicit)");
  BOOST_TEST(of_category(events, "plan").size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
