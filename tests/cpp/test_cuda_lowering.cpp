// The host side of the CUDA backend: routing traces by device, the strided walks of the runtime's
// kernels, the BLAS form of products, and what a machine without a GPU says. (The lowering as a
// whole is checked against the CPU executor by tests/python/test_cuda_lowering.py.)
#include <boost/test/unit_test.hpp>

#include "graph/cuda_capture.h"
#include "graph/cuda_program.h"
#include "graph/device_router.h"
#include "graph/interpreter.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/kernel_source.h"
#include "runtime/metrics.h"
#include "runtime/warning.h"

using namespace loom;

namespace {

struct Counting final : Executor {
  int runs = 0;
  graph::Interpreter inner;
  std::vector<Array> run(const Trace& t) override {
    ++runs;
    return inner.run(t);
  }
  void synchronize(Device) override {}
};

std::vector<int64_t> V(std::initializer_list<int64_t> v) { return v; }

std::vector<std::string>& warnings_seen() {
  static std::vector<std::string> w;
  return w;
}
void record_warning(const std::string& message) { warnings_seen().push_back(message); }

// Gives `life` a failed capture, as the executors do: from inside the catch.
void fail_capture(graph::GraphLife& life, const std::string& plan, const std::string& why) {
  try {
    throw Error(ErrorKind::Runtime, why);
  } catch (const Error& e) {
    life.capture_failed(plan, e);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_lowering)

BOOST_AUTO_TEST_CASE(router_sends_cpu_traces_to_the_cpu_executor_only) {
  auto cpu = std::make_shared<Counting>();
  auto gpu = std::make_shared<Counting>();
  graph::DeviceRouter router(cpu, gpu);
  Trace t;
  t.device = kCPU;
  router.run(t);
  BOOST_TEST(cpu->runs == 1);
  BOOST_TEST(gpu->runs == 0);
  if (cuda::device_count() == 0) {
    t.device = Device(DeviceType::CUDA, 0);
    BOOST_CHECK_EXCEPTION(router.run(t), Error, [](const Error& e) {
      return std::string(e.what()).find("CUDA is not available") != std::string::npos;
    });
    BOOST_TEST(gpu->runs == 0);
  }
  // Eager ops go to the device's executor too; a CPU executor has none of its own.
  BOOST_CHECK_THROW(router.run_op(OpId::Add, {}, {}, {DType::Float32, Dims{}}, kCPU), Error);
}

BOOST_AUTO_TEST_CASE(strided_walks_merge_dims_contiguous_in_every_operand) {
  // Two row-major operands: one dim.
  BOOST_TEST(cuda::strided_ip(Dims{2, 3, 4}, Dims{12, 4, 1}, Dims{12, 4, 1}) == V({24, 1, 24, 1, 1}),
             boost::test_tools::per_element());
  // A transposed source keeps two dims; size-1 dims go.
  BOOST_TEST(cuda::strided_ip(Dims{3, 1, 4}, Dims{4, 4, 1}, Dims{1, 9, 3}) == V({12, 2, 3, 4, 4, 1, 1, 3}),
             boost::test_tools::per_element());
  // A broadcast (stride 0) merges only with what it is contiguous with.
  BOOST_TEST(cuda::strided_ip(Dims{5, 6}, Dims{6, 1}, Dims{0, 1}) == V({30, 2, 5, 6, 6, 1, 0, 1}),
             boost::test_tools::per_element());
  // A scalar: one element, rank 0.
  BOOST_TEST(cuda::strided_ip(Dims{}, Dims{}) == V({1, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(products_take_blas_column_major_form) {
  graph::Gemm g;
  g.m = 5, g.n = 3, g.k = 7;
  g.left = {{}, 7, 1, {0}};   // row-major 5 x 7
  g.right = {{}, 1, 7, {0}};  // column-major 7 x 3 (a transposed row-major 3 x 7)
  g.out = {{}, 3, 1, {0}};
  graph::BlasShape s = graph::blas_shape(g);
  // C^T (3 x 5) = right^T (3 x 7) @ left^T (7 x 5): cuBLAS's A is the right operand.
  BOOST_TEST(s.m == 3);
  BOOST_TEST(s.n == 5);
  BOOST_TEST(s.k == 7);
  BOOST_TEST(s.trans_a);  // column-major right: transposed, ld = its column stride
  BOOST_TEST(s.lda == 7);
  BOOST_TEST(!s.trans_b);  // row-major left: as it is, ld = its row stride
  BOOST_TEST(s.ldb == 7);
  BOOST_TEST(s.ldc == 3);
}

BOOST_AUTO_TEST_CASE(without_a_gpu_every_entry_says_why) {
  if (cuda::device_count() > 0) return;
  BOOST_TEST(!cuda::unavailable_reason().empty());
  BOOST_TEST(cuda::driver_unavailable_reason().find("CUDA is not available") == 0);
  BOOST_CHECK_THROW(empty(Dims{4}, DType::Float32, Device(DeviceType::CUDA, 0)), Error);
  BOOST_CHECK_THROW(cuda::synchronize(Device(DeviceType::CUDA, 0)), Error);
  BOOST_TEST(!cuda::used(0));
}

// graph/cuda_capture.h: direct, capture, replays; after a failed capture, direct for good (counted,
// warned once per process), or under LOOM_CUDA_GRAPHS=strict, an error at every run that tries.
BOOST_AUTO_TEST_CASE(a_plan_whose_capture_fails_runs_directly_from_then_on) {
  using Run = graph::GraphLife::Run;
  set_warning_handler(&record_warning);
  bool was_strict = graph::set_strict_cuda_graphs(false);
  graph::GraphLife life;
  BOOST_TEST((life.next(true) == Run::Direct));  // the warm-up run
  life.ran();
  BOOST_TEST((life.next(false) == Run::Direct));  // a run that may not use a graph (unaligned operands)
  BOOST_TEST((life.next(true) == Run::Capture));
  int64_t failures = metrics().graph_capture_failures.load();
  fail_capture(life, "trace 1", "CUDA error in cudaStreamEndCapture: cudaErrorStreamCaptureInvalidated");
  life.ran();
  BOOST_TEST(metrics().graph_capture_failures.load() == failures + 1);
  BOOST_TEST(life.failure().find("cudaErrorStreamCaptureInvalidated") != std::string::npos);
  BOOST_TEST((life.next(true) == Run::Direct));  // never captures again
  BOOST_TEST_REQUIRE(warnings_seen().size() == 1u);
  BOOST_TEST(warnings_seen()[0].find("trace 1 failed (CUDA error in cudaStreamEndCapture") != std::string::npos);

  graph::GraphLife other;
  other.ran();
  fail_capture(other, "trace 2", "another reason");
  BOOST_TEST(metrics().graph_capture_failures.load() == failures + 2);
  BOOST_TEST(warnings_seen().size() == 1u);  // once per process

  graph::set_strict_cuda_graphs(true);
  graph::GraphLife strict;
  strict.ran();
  BOOST_CHECK_THROW(fail_capture(strict, "trace 3", "refused"), Error);
  BOOST_TEST(strict.failure().empty());
  BOOST_TEST((strict.next(true) == Run::Capture));  // tries again at the next run
  BOOST_TEST(metrics().graph_capture_failures.load() == failures + 2);

  graph::GraphLife fine;
  fine.ran();
  fine.captured();
  BOOST_TEST((fine.next(true) == Run::Replay));
  BOOST_TEST((fine.next(false) == Run::Direct));
  graph::set_strict_cuda_graphs(was_strict);
  set_warning_handler(nullptr);
}

BOOST_AUTO_TEST_SUITE_END()
