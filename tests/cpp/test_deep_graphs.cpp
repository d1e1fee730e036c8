// Deep graphs (DESIGN decision 14): walks over the IR and the autograd graph, and the releases of
// chains of nodes, functions and tensors, take constant stack. Each test runs its program on a
// thread with a small stack (kSmallStack), where a recursion by depth at these sizes overflows.
#include <boost/test/unit_test.hpp>

#include <pthread.h>

#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "fusion/program.h"
#include "fusion/render.h"
#include "graph/interpreter.h"
#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "lazy/sync.h"
#include "runtime/error.h"

using namespace loom;

namespace {

constexpr size_t kSmallStack = 256 * 1024;
constexpr int64_t kDepth = 100'000;

// Runs fn on a new thread with a kSmallStack stack; rethrows what it threw.
void on_small_stack(const std::function<void()>& fn) {
  struct Job {
    const std::function<void()>* fn;
    std::exception_ptr error;
  } job{&fn, nullptr};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kSmallStack);
  pthread_t thread;
  auto body = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    try {
      (*j->fn)();
    } catch (...) {
      j->error = std::current_exception();
    }
    return nullptr;
  };
  BOOST_TEST_REQUIRE(pthread_create(&thread, &attr, body, &job) == 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  if (job.error) std::rethrow_exception(job.error);
}

Tensor filled(IntSpan sizes, double value, bool lazy) {
  Array a = empty(sizes, DType::Float32, kCPU);
  fill_(a, Scalar(value));
  return make_tensor(std::move(a), lazy);
}

double first_value(const Tensor& t) {
  materialize(*t);
  Array c = copy_to(t->array(), DType::Float64, kCPU);
  return *static_cast<const double*>(c.data());
}

// Partitions and renders the traces it is given (as the compiled executor does, without the
// compiler), and computes them with the interpreter.
struct PartitionRender final : Executor {
  std::vector<fusion::Program> programs;
  graph::Interpreter inner;
  std::vector<Array> run(const Trace& t) override {
    programs.push_back(fusion::partition(t, {}));
    fusion::render(programs.back(), fusion::TargetKind::Cpu);
    fusion::render(programs.back(), fusion::TargetKind::Cuda);
    return inner.run(t);
  }
  void synchronize(Device) override {}
};

struct Fixture {
  PartitionRender* executor;
  Fixture() {
    auto e = std::make_unique<PartitionRender>();
    executor = e.get();
    install_executor(std::move(e));
  }
  ~Fixture() { install_executor(std::make_unique<graph::Interpreter>()); }
};

// A chain of objects each owning the next, released iteratively.
struct Link final : RefCounted {
  static constexpr bool kReleaseIteratively = true;
  static inline int64_t alive = 0;
  Ref<Link> next;
  Link() { ++alive; }
  ~Link() { --alive; }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(deep_graphs, Fixture)

BOOST_AUTO_TEST_CASE(a_chain_of_a_million_links_is_released_iteratively) {
  on_small_stack([] {
    Ref<Link> head = make_ref<Link>();
    for (int i = 0; i < 1'000'000; ++i) {
      auto l = make_ref<Link>();
      l->next = std::move(head);
      head = std::move(l);
    }
    BOOST_TEST(Link::alive == 1'000'001);
    head.reset();
    BOOST_TEST(Link::alive == 0);  // all gone when the outermost release returns
  });
}

BOOST_AUTO_TEST_CASE(a_long_elementwise_chain_partitions_and_renders) {
  on_small_stack([&] {
    Tensor x = filled(Dims{4}, 0.0, true);
    for (int64_t i = 0; i < kDepth; ++i) x = ops::add(x, Scalar(int64_t{1}));
    BOOST_TEST(first_value(x) == static_cast<double>(kDepth));
  });
  // One trace, whose kernels are bounded in size: a value is stored every 256 ops, and a kernel
  // takes no more values once it has 1,024 expressions (fusion/partition.cpp).
  BOOST_TEST_REQUIRE(executor->programs.size() == 1u);
  const fusion::Program& p = executor->programs.back();
  BOOST_TEST(p.kernels.size() >= static_cast<size_t>(kDepth / 2048));
  for (const fusion::Kernel& k : p.kernels) BOOST_TEST(k.exprs.size() <= 2048u);
}

BOOST_AUTO_TEST_CASE(a_long_chain_through_views_partitions) {
  on_small_stack([&] {
    Tensor x = filled(Dims{2, 2}, 0.0, true);
    for (int64_t i = 0; i < kDepth / 2; ++i) x = ops::add(ops::t(x), Scalar(int64_t{1}));
    BOOST_TEST(first_value(x) == static_cast<double>(kDepth / 2));
  });
}

BOOST_AUTO_TEST_CASE(a_kernel_takes_a_bounded_number_of_values_to_store) {
  on_small_stack([&] {
    std::vector<Tensor> kept{filled(Dims{4}, 0.0, true)};
    for (int64_t i = 0; i < 5000; ++i) kept.push_back(ops::add(kept.back(), Scalar(int64_t{1})));
    BOOST_TEST(first_value(kept.back()) == 5000.0);
  });
  for (const fusion::Kernel& k : executor->programs.back().kernels) BOOST_TEST(k.stores.size() <= 256u);
}

BOOST_AUTO_TEST_CASE(kernels_of_the_same_text_are_rendered_once) {
  // Four kernels (four shapes) of the same structure: sizes are launch parameters, so their text
  // is the same and the module holds one function, which all four run with their own ip arrays.
  std::vector<Tensor> ys;
  for (int64_t n : {3, 5, 7, 9}) ys.push_back(ops::add(ops::mul(filled(Dims{n}, 1.0, true), Scalar(2.0)), Scalar(3.0)));
  sync_all();
  for (const Tensor& y : ys) BOOST_TEST(first_value(y) == 5.0);
  const fusion::Program& p = executor->programs.back();
  BOOST_TEST_REQUIRE(p.kernels.size() == 4u);
  for (auto target : {fusion::TargetKind::Cpu, fusion::TargetKind::Cuda}) {
    fusion::RenderedModule m = fusion::render(p, target);
    for (const std::string& s : m.symbols) BOOST_TEST(s == p.kernels[0].name);
    BOOST_TEST(m.source.find(p.kernels[1].name) == std::string::npos);
    BOOST_TEST(m.int_params[0] != m.int_params[3]);
  }
}

BOOST_AUTO_TEST_CASE(a_long_pending_chain_dies_without_a_sync) {
  on_small_stack([] {
    Tensor x = filled(Dims{4}, 0.0, true);
    for (int64_t i = 0; i < kDepth; ++i) x = ops::mul(x, Scalar(2.0));
    x.reset();
  });
}

BOOST_AUTO_TEST_CASE(a_deep_backward_graph_runs_and_is_released) {
  for (bool lazy : {false, true}) {
    on_small_stack([&] {
      Tensor w = filled(Dims{3}, 1.0, lazy);
      set_requires_grad(*w, true);
      Tensor x = w;
      for (int64_t i = 0; i < kDepth; ++i) x = ops::mul(x, Scalar(i % 2 == 0 ? 2.0 : 0.5));
      backward({ops::sum(x)}, {}, false, false);
      BOOST_TEST(first_value(autograd(*w).grad) == 1.0);
      x.reset();  // the graph: kDepth functions, each holding its saved values
      Tensor y = w;
      for (int64_t i = 0; i < kDepth; ++i) y = ops::mul(y, Scalar(1.0));
      y.reset();  // never run backward
    });
  }
}

BOOST_AUTO_TEST_CASE(lazy_ops_refuse_sizes_eager_mode_cannot_allocate) {
  Dims huge{(int64_t{1} << 62) + 16};
  std::string eager, lazy;
  try {
    ops::full(huge, Scalar(1.0), DType::Float32, {kCPU, false});
  } catch (const Error& e) {
    eager = e.what();
  }
  try {
    ops::full(huge, Scalar(1.0), DType::Float32, {kCPU, true});
  } catch (const Error& e) {
    lazy = e.what();
  }
  BOOST_TEST(!eager.empty());
  BOOST_TEST(lazy == eager);
  // An expanded view of that size is fine; computing it is not.
  Tensor one = filled(Dims{1}, 1.0, true);
  Tensor view = ops::expand(one, huge);
  BOOST_CHECK_THROW(ops::add(view, Scalar(int64_t{1})), Error);
}

BOOST_AUTO_TEST_SUITE_END()
