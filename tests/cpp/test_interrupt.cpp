// Interrupts of a sync (runtime/blocking.h, lazy/sync.h): the compiled executor checks between
// steps and between slices of a long kernel until its first write into a destination, and an
// interrupted sync changes nothing.
#include <boost/test/unit_test.hpp>

#include "graph/interpreter.h"
#include "lazy/ops.h"
#include "lazy/sync.h"
#include "runtime/blocking.h"
#include "runtime/error.h"
#include "runtime/metrics.h"

using namespace loom;

namespace {

int checks = 0;
int stop_at = 0;

// The compiled executor (it checks for interrupts); the other suites get their own back.
struct Compiled {
  Compiled() { graph::install_default_executor(); }
  ~Compiled() { install_executor(std::make_unique<graph::Interpreter>()); }
};

// An embedding that asks to stop at the `stop_at`-th check.
struct StopAtCheck {
  explicit StopAtCheck(int n) {
    checks = 0;
    stop_at = n;
    install_embedding_hooks({nullptr, nullptr, [] { return ++checks >= stop_at; }});
  }
  ~StopAtCheck() { install_embedding_hooks({}); }
};

std::vector<double> values(const Tensor& t) {
  materialize(*t);
  Array c = copy_to(t->array(), DType::Float64, kCPU);
  const double* p = static_cast<const double*>(c.data());
  return std::vector<double>(p, p + c.numel());
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(interrupt, Compiled)

// One pointwise kernel over 2^25 elements (several slices, each checked before it runs), and a
// write into `p` recorded after it, so committed last.
Tensor long_kernel_then_write(const Tensor& p) {
  Tensor big = ops::full(Dims{int64_t{1} << 25}, Scalar(0.5), DType::Float32, {kCPU, true});
  Tensor y = ops::unary(OpId::Sin, ops::mul(big, Scalar(1.5)));
  ops::add_(*p, Scalar(1.0));
  return y;
}

BOOST_AUTO_TEST_CASE(a_long_kernel_stops_between_slices_and_the_sync_changes_nothing) {
  Tensor p = ops::full(Dims{2}, Scalar(1.0), DType::Float32, {kCPU, true});
  materialize(*p);
  // The same program once first, so the interrupted sync finds its kernel compiled: a compile
  // polls for interrupts too (rtc/host_compiler.cpp), as often as it takes long, and those polls
  // would count below.
  Tensor warm = long_kernel_then_write(p);
  sync_all();
  ops::sub_(*p, Scalar(1.0));
  materialize(*p);
  Tensor y = long_kernel_then_write(p);
  {
    StopAtCheck stop(3);  // the check before the first step, the first slice's, the second's
    int64_t launches = metrics().kernel_launches;
    try {
      sync_all();
      BOOST_FAIL("the sync was not interrupted");
    } catch (const Error& e) {
      BOOST_TEST((e.kind() == ErrorKind::Interrupted));
    }
    BOOST_TEST(checks == 3);
    BOOST_TEST(metrics().kernel_launches == launches);  // stopped inside the kernel
  }
  BOOST_TEST(y->is_errored());
  BOOST_TEST((values(p) == std::vector<double>{1, 1}));  // not written, readable
  ops::add_(*p, Scalar(1.0));
  BOOST_TEST((values(p) == std::vector<double>{2, 2}));
}

BOOST_AUTO_TEST_CASE(without_a_request_the_sync_runs_to_the_end) {
  Tensor p = ops::full(Dims{2}, Scalar(1.0), DType::Float32, {kCPU, true});
  materialize(*p);
  Tensor y = ops::unary(OpId::Sin, ops::full(Dims{int64_t{1} << 25}, Scalar(0.5), DType::Float32, {kCPU, true}));
  ops::add_(*p, Scalar(1.0));
  {
    StopAtCheck never(1 << 30);
    sync_all();
    BOOST_TEST(checks > 2);  // it was asked between slices
  }
  BOOST_TEST(!y->is_pending());
  BOOST_TEST((values(p) == std::vector<double>{2, 2}));
}

BOOST_AUTO_TEST_SUITE_END()
