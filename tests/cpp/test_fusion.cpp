// Fusion: affine index maps through views, partitioning into kernels, and rendered sources that
// do not depend on sizes.
#include <algorithm>

#include <boost/test/unit_test.hpp>

#include "fusion/affine.h"
#include "fusion/program.h"
#include "fusion/render.h"
#include "graph/interpreter.h"
#include "lazy/ops.h"
#include "lazy/sync.h"

using namespace loom;
using namespace loom::fusion;

namespace {

Dims D(std::initializer_list<int64_t> v) { return Dims(v); }

Tensor lazy_input(IntSpan sizes) {
  Array a = empty(sizes, DType::Float32, kCPU);
  fill_(a, Scalar(1.0));
  return make_tensor(std::move(a), true);
}

// Captures the trace of the next sync instead of running it (the interpreter still computes it).
struct TraceCapture final : Executor {
  std::vector<Program> programs;
  std::vector<std::string> descriptions;
  std::vector<std::string> sources;
  graph::Interpreter inner;
  std::vector<Array> run(const Trace& t) override {
    programs.push_back(partition(t, {}));
    descriptions.push_back(describe(programs.back(), t));
    sources.push_back(render(programs.back(), TargetKind::Cpu).source);
    return inner.run(t);
  }
  void synchronize(Device) override {}
};

struct CaptureFixture {
  TraceCapture* capture;
  CaptureFixture() {
    auto c = std::make_unique<TraceCapture>();
    capture = c.get();
    install_executor(std::move(c));
  }
  ~CaptureFixture() { install_executor(std::make_unique<graph::Interpreter>()); }
  int kernels() const { return static_cast<int>(capture->programs.back().kernels.size()); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(fusion)

BOOST_AUTO_TEST_CASE(affine_maps_through_views) {
  // A transpose of a [3, 4] value: view (j, i) reads input (i, j).
  Layout t = transpose(Layout::contiguous(D({3, 4})), 0, 1);
  auto m = through_view(AffineMap::identity(2), t, D({3, 4}));
  BOOST_TEST_REQUIRE(m.has_value());
  BOOST_TEST(m->at(0, 1) == 1);
  BOOST_TEST(m->at(1, 0) == 1);
  // Splitting a dim is affine: view [2, 3] of a [6] value reads 3 * i + j.
  auto split = through_view(AffineMap::identity(2), Layout::contiguous(D({2, 3})), D({6}));
  BOOST_TEST_REQUIRE(split.has_value());
  BOOST_TEST(split->at(0, 0) == 3);
  BOOST_TEST(split->at(0, 1) == 1);
  // Merging the dims of a [2, 3] value is not (it needs a division): the value must be stored.
  BOOST_TEST(!through_view(AffineMap::identity(1), Layout::contiguous(D({6})), D({2, 3})).has_value());
  // A slice with a step and an offset: rows 1, 3 of a [4, 5] value.
  Layout s = slice(Layout::contiguous(D({4, 5})), 0, 1, std::nullopt, 2);
  auto sm = through_view(AffineMap::identity(2), s, D({4, 5}));
  BOOST_TEST_REQUIRE(sm.has_value());
  BOOST_TEST(sm->offset[0] == 1);
  BOOST_TEST(sm->at(0, 0) == 2);
  // Broadcasting a [3, 1] input to [2, 3, 4]: dim 0 follows domain dim 1, dim 1 reads 0.
  AffineMap b = broadcast(AffineMap::identity(3), D({2, 3, 4}), D({3, 1}));
  BOOST_TEST(b.at(0, 1) == 1);
  BOOST_TEST(b.at(1, 2) == 0);
}

BOOST_FIXTURE_TEST_CASE(an_elementwise_chain_is_one_kernel, CaptureFixture) {
  Tensor x = lazy_input(D({100}));
  Tensor y = x;
  for (int i = 0; i < 20; ++i) y = ops::unary(i % 2 ? OpId::Tanh : OpId::Exp, ops::mul(y, Scalar(0.5)));
  materialize(*y);
  BOOST_TEST(kernels() == 1);
}

BOOST_FIXTURE_TEST_CASE(softmax_and_layer_norm_take_one_kernel_each, CaptureFixture) {
  Tensor x = lazy_input(D({8, 16}));
  Tensor s = ops::softmax(x, -1);
  materialize(*s);
  BOOST_TEST(kernels() == 1);
  Tensor l = ops::log_softmax(x, -1);
  materialize(*l);
  BOOST_TEST(kernels() == 1);
  Tensor mean = ops::mean(x, {-1}, true);
  Tensor centered = ops::sub(x, mean);
  Tensor var = ops::mean(ops::mul(centered, centered), {-1}, true);
  Tensor y = ops::div(centered, ops::unary(OpId::Sqrt, ops::add(var, Scalar(1e-5))));
  mean.reset();
  centered.reset();
  var.reset();
  materialize(*y);
  BOOST_TEST(kernels() == 1);
  // Both statistics in one row kernel, the normalized elements its epilogue (fusion/program.h).
  const Kernel& k = capture->programs.back().kernels[0];
  BOOST_TEST(k.stages.size() == 2u);
  BOOST_TEST(std::count_if(k.stores.begin(), k.stores.end(),
                           [](const Store& st) { return st.access.space == Space::Inner; }) == 1);
}

BOOST_FIXTURE_TEST_CASE(sources_do_not_depend_on_sizes, CaptureFixture) {
  for (int64_t batch : {4, 9}) {
    Tensor x = lazy_input(D({batch, 16}));
    Tensor y = ops::add(ops::softmax(x, -1), Scalar(1.0));
    materialize(*y);
  }
  BOOST_TEST_REQUIRE(capture->sources.size() == 2u);
  BOOST_TEST(capture->sources[0] == capture->sources[1]);
}

BOOST_FIXTURE_TEST_CASE(library_ops_are_steps_between_kernels, CaptureFixture) {
  Tensor a = lazy_input(D({4, 8}));
  Tensor w = lazy_input(D({8, 3}));
  Tensor h = ops::matmul(ops::unary(OpId::Relu, a), w);
  Tensor s = ops::sum(ops::unary(OpId::Exp, h), {1});  // the temporaries die here, h does not
  materialize(*s);
  const Program& p = capture->programs.back();
  int ops_steps = 0;
  for (const Step& s : p.steps) ops_steps += s.kind == Step::RunOp;
  BOOST_TEST(ops_steps == 1);  // the matmul
  BOOST_TEST(p.kernels.size() == 2u, capture->descriptions.back());  // relu before it, exp + sum after it
}

BOOST_AUTO_TEST_SUITE_END()
