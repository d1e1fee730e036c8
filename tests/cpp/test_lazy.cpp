// The lazy IR end to end through the C++ op library: recording, sync, trace keys, in-place
// donation, views of pending tensors, and lazy results equal to eager ones.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "graph/interpreter.h"
#include "lazy/ops.h"
#include "lazy/sync.h"
#include "lazy/sync_index.h"
#include "runtime/error.h"
#include "runtime/hash.h"
#include "runtime/metrics.h"

using namespace loom;

namespace {

// The interpreter is the reference executor; these tests pin it (tests/python/test_fusion.py
// checks the compiled executor against it).
struct LazyFixture {
  LazyFixture() { install_executor(std::make_unique<graph::Interpreter>()); }
  ~LazyFixture() { install_executor(std::make_unique<graph::Interpreter>()); }
};

Dims D(std::initializer_list<int64_t> v) { return Dims(v); }

// A tensor with values 0, 1, 2, ... (eager, or lazy but materialized).
Tensor iota(IntSpan sizes, DType dtype, bool lazy) {
  Array a = empty(sizes, dtype, kCPU);
  arange_(a.view_as(Layout::contiguous(D({a.numel()}))), Scalar(0), Scalar(1));
  return make_tensor(std::move(a), lazy);
}

std::vector<double> values(const Tensor& t) {
  materialize(*t);
  Array c = copy_to(t->array(), DType::Float64, kCPU);
  const double* p = static_cast<const double*>(c.data());
  return std::vector<double>(p, p + c.numel());
}

// The key and node count of the trace the next sync runs (observed with a recording executor).
struct SyncedTrace {
  uint64_t key = 0;
  size_t nodes = 0;
};
SyncedTrace next_sync(const std::function<void()>& program) {
  struct Recorder final : Executor {
    SyncedTrace seen;
    graph::Interpreter inner;
    std::vector<Array> run(const Trace& t) override {
      seen = {t.key, t.nodes.size()};
      return inner.run(t);
    }
    void synchronize(Device) override {}
  };
  auto recorder = std::make_unique<Recorder>();
  Recorder* r = recorder.get();
  install_executor(std::move(recorder));
  program();
  sync_all();
  SyncedTrace seen = r->seen;
  install_executor(std::make_unique<graph::Interpreter>());
  return seen;
}

uint64_t key_of_next_sync(const std::function<void()>& program) { return next_sync(program).key; }

}  // namespace

BOOST_FIXTURE_TEST_SUITE(lazy, LazyFixture)

BOOST_AUTO_TEST_CASE(recording_is_deferred_until_sync) {
  Tensor x = iota(D({2, 3}), DType::Float32, true);
  int64_t launches = metrics().kernel_launches;
  Tensor y = ops::add(ops::mul(x, Scalar(2.0)), Scalar(1.0));
  BOOST_TEST(y->is_pending());
  BOOST_TEST(metrics().kernel_launches == launches);  // nothing ran
  BOOST_TEST(pending_count(kCPU) >= 1);
  BOOST_TEST((values(y) == std::vector<double>{1, 3, 5, 7, 9, 11}));
  BOOST_TEST(!y->is_pending());
  BOOST_TEST(metrics().kernel_launches > launches);
}

// One program of reductions, a product, views and an in-place write through a view, recorded
// lazily and run by the interpreter, gives eager's values (same float32 kernels: equal to a few
// ulps).
BOOST_AUTO_TEST_CASE(lazy_equals_eager) {
  auto program = [](bool lazy) {
    Tensor x = iota(D({3, 4}), DType::Float32, lazy);
    Tensor y = ops::softmax(ops::sub(x, Scalar(5.0)), -1);
    Tensor s = ops::sum(ops::mul(y, x), {1});
    Tensor p = ops::matmul(ops::transpose(x, 0, 1), y);  // (4, 3) @ (3, 4) through a view
    Tensor c = ops::cumsum(ops::unary(OpId::Exp, ops::mul(x, Scalar(-0.25))), 0);
    ops::add_(*ops::select(c, 1, 2), s);  // writes column 2 of c through a view
    return std::vector<std::vector<double>>{values(s), values(p), values(c)};
  };
  std::vector<std::vector<double>> eager = program(false), lazy = program(true);
  // Row r of x is 4r..4r+3: softmax weights are the same for every row, the weighted sum shifts
  // by 4 (the eager values are right, not only equal).
  BOOST_TEST_REQUIRE(eager[0].size() == 3u);
  BOOST_TEST(std::abs((eager[0][1] - eager[0][0]) - 4.0) < 1e-5);
  BOOST_TEST(std::abs((eager[0][2] - eager[0][1]) - 4.0) < 1e-5);
  BOOST_TEST_REQUIRE(lazy.size() == eager.size());
  for (size_t k = 0; k < eager.size(); ++k) {
    BOOST_TEST_REQUIRE(lazy[k].size() == eager[k].size());
    for (size_t i = 0; i < eager[k].size(); ++i)
      BOOST_TEST(std::abs(lazy[k][i] - eager[k][i]) <= 1e-6 * std::max(1.0, std::abs(eager[k][i])),
                 "result " << k << " element " << i << ": lazy " << lazy[k][i] << ", eager " << eager[k][i]);
  }
}

BOOST_AUTO_TEST_CASE(errors_raise_at_record_time) {
  Tensor a = iota(D({2, 3}), DType::Float32, true);
  Tensor b = iota(D({4}), DType::Float32, true);
  BOOST_CHECK_THROW(ops::add(a, b), Error);
  BOOST_CHECK_THROW(ops::matmul(a, b), Error);
  Tensor e = iota(D({2, 3}), DType::Float32, false);
  BOOST_CHECK_THROW(ops::add(a, e), Error);  // lazy mixed with eager
}

BOOST_AUTO_TEST_CASE(trace_keys) {
  auto program = [](double lr, int64_t n) {
    return [lr, n] {
      Tensor p = iota(D({n}), DType::Float32, true);
      Tensor g = iota(D({n}), DType::Float32, true);
      ops::sub_(*p, ops::mul(g, Scalar(lr)));
      Tensor keep = p;  // p is live at the sync
      sync_all();
    };
  };
  uint64_t a = key_of_next_sync(program(0.1, 8));
  uint64_t b = key_of_next_sync(program(0.1, 8));
  uint64_t c = key_of_next_sync(program(0.05, 8));  // another learning rate: same trace
  uint64_t d = key_of_next_sync(program(0.1, 9));   // another shape: another trace
  BOOST_TEST(a != 0u);
  BOOST_TEST(a == b);
  BOOST_TEST(a == c);
  BOOST_TEST(a != d);
}

// A sync interns its nodes: structurally equal interior nodes become one node of the trace,
// leaves never merge, and this holds past the index's first growths (hundreds of nodes).
BOOST_AUTO_TEST_CASE(traces_merge_equal_nodes_and_keep_leaves_apart) {
  constexpr int kLength = 300;
  auto chain = [](const Tensor& x) {  // -|x| after kLength alternating Abs and Neg
    Tensor c = x;
    for (int i = 0; i < kLength; ++i) c = ops::unary(i % 2 ? OpId::Neg : OpId::Abs, c);
    return c;
  };
  auto program = [&](int copies, std::vector<Tensor>& kept) {
    return [&, copies] {
      Tensor x = ops::sub(iota(D({4}), DType::Float32, true), Scalar(2.0));
      Tensor y = ops::sub(iota(D({4}), DType::Float32, true), Scalar(2.0));  // like x, another leaf
      for (int k = 0; k < copies; ++k) kept.push_back(chain(x));
      kept.push_back(ops::add(x, y));
    };
  };
  std::vector<Tensor> once, twice, small;
  next_sync(program(0, small));  // a small trace first: the next one grows its index from the start
  size_t nodes_twice = next_sync(program(2, twice)).nodes;
  size_t nodes_once = next_sync(program(1, once)).nodes;
  BOOST_TEST(nodes_once > static_cast<size_t>(kLength));
  BOOST_TEST(nodes_twice == nodes_once);  // the second chain is the first one's nodes
  std::vector<double> minus_abs{-2, -1, 0, -1};
  BOOST_TEST(values(twice[0]) == minus_abs);
  BOOST_TEST(values(twice[1]) == minus_abs);
  BOOST_TEST((values(twice[2]) == std::vector<double>{-4, -2, 0, 2}));  // x and y stayed two leaves
}

// Which leaves share storage is part of a trace's key: x + x on one storage differs from x + y
// on two, and each pattern gives one key again.
BOOST_AUTO_TEST_CASE(trace_keys_see_which_leaves_share_storage) {
  auto program = [](bool shared) {
    return [shared] {
      Tensor x = iota(D({2, 4}), DType::Float32, true);
      Tensor y = iota(D({2, 4}), DType::Float32, true);
      Tensor a = ops::select(x, 0, 0);
      Tensor b = ops::select(shared ? x : y, 0, 1);
      Tensor keep = ops::add(a, b);
      sync_all();
    };
  };
  uint64_t one = key_of_next_sync(program(true)), one_again = key_of_next_sync(program(true));
  uint64_t two = key_of_next_sync(program(false)), two_again = key_of_next_sync(program(false));
  BOOST_TEST(one == one_again);
  BOOST_TEST(two == two_again);
  BOOST_TEST(one != two);
}

BOOST_AUTO_TEST_CASE(inplace_keeps_storage) {
  Tensor p = iota(D({4}), DType::Float32, true);
  void* address = p->array().data();
  for (int step = 0; step < 100; ++step) {
    ops::sub_(*p, ops::mul(ops::full(D({4}), Scalar(1.0), DType::Float32, {kCPU, true}), Scalar(0.5)));
    materialize(*p);
    BOOST_TEST_REQUIRE(p->array().data() == address);
  }
  BOOST_TEST((values(p) == std::vector<double>{-50, -49, -48, -47}));
}

BOOST_AUTO_TEST_CASE(reads_of_aliases_see_pending_writes) {
  Tensor base = iota(D({2, 3}), DType::Float32, true);
  Tensor row = ops::select(base, 0, 1);  // a materialized view: shares storage
  ops::add_(*base, Scalar(10.0));         // pending write into the shared storage
  Tensor doubled = ops::mul(row, Scalar(2.0));
  BOOST_TEST((values(doubled) == std::vector<double>{26, 28, 30}));
}

BOOST_AUTO_TEST_CASE(inplace_through_a_view_of_a_pending_tensor) {
  Tensor x = ops::add(iota(D({2, 3}), DType::Float32, true), Scalar(0.0));
  BOOST_TEST(x->is_pending());
  Tensor row = ops::select(x, 0, 0);
  ops::mul_(*row, Scalar(-1.0));  // writes through to x
  BOOST_TEST((values(x) == std::vector<double>{0, -1, -2, 3, 4, 5}));
  BOOST_TEST((values(row) == std::vector<double>{0, -1, -2}));
  // A view taken before the write re-derives itself from the base.
  Tensor y = ops::add(iota(D({3}), DType::Float32, true), Scalar(0.0));
  Tensor head = ops::narrow(y, 0, 0, 2);
  ops::add_(*y, Scalar(100.0));
  BOOST_TEST((values(head) == std::vector<double>{100, 101}));
}

BOOST_AUTO_TEST_CASE(writes_through_temporary_views_are_not_lost) {
  Tensor x = iota(D({3}), DType::Float32, true);
  ops::fill_(*ops::narrow(x, 0, 1, 1), Arg(Scalar(7.0)));  // the view dies at once
  sync_all();
  BOOST_TEST((values(x) == std::vector<double>{0, 7, 2}));
}

BOOST_AUTO_TEST_CASE(views_of_pending_tensors_alias_after_sync) {
  Tensor x = ops::mul(iota(D({2, 3}), DType::Float32, true), Scalar(1.0));
  Tensor t = ops::transpose(x, 0, 1);
  sync_all();
  BOOST_TEST(!t->is_pending());
  BOOST_TEST((t->array().storage.get() == x->array().storage.get()));
  BOOST_TEST((values(t) == std::vector<double>{0, 3, 1, 4, 2, 5}));
}

BOOST_AUTO_TEST_CASE(long_chains_sync_and_free_without_recursion) {
  Tensor x = iota(D({1}), DType::Float64, true);
  Tensor y = x;
  for (int i = 0; i < 200000; ++i) y = ops::add(y, Scalar(1.0));
  BOOST_TEST(values(y)[0] == 200000.0);
  Tensor z = x;
  for (int i = 0; i < 200000; ++i) z = ops::add(z, Scalar(1.0));
  z.reset();  // dropping an unsynced chain frees it iteratively
}

BOOST_AUTO_TEST_CASE(a_failed_execution_changes_nothing) {
  // A failure of the trace as a whole (not a node's): the sync raises it, the write it would have
  // made is undone, the fresh results fail with it.
  struct Failing final : Executor {
    std::vector<Array> run(const Trace&) override { LOOM_FAIL(Runtime, "injected failure"); }
    void synchronize(Device) override {}
  };
  Tensor p = iota(D({2}), DType::Float32, true);
  ops::add_(*p, Scalar(1.0));
  Tensor fresh = ops::mul(p, Scalar(2.0));
  install_executor(std::make_unique<Failing>());
  BOOST_CHECK_THROW(sync_all(), Error);
  install_executor(std::make_unique<graph::Interpreter>());
  BOOST_TEST(!p->is_pending());
  BOOST_TEST((values(p) == std::vector<double>{0, 1}));
  BOOST_TEST(fresh->is_errored());
  ops::add_(*p, Scalar(1.0));  // usable as before
  BOOST_TEST((values(p) == std::vector<double>{1, 2}));
}

// ---- failures that depend on the data (lazy/sync.h) ----

namespace {

// A lazy tensor holding `v` (materialized: an Input leaf of the traces that read it).
Tensor lazy_values(std::initializer_list<int64_t> v, DType dtype = DType::Int64) {
  Array a = empty(D({static_cast<int64_t>(v.size())}), DType::Int64, kCPU);
  int64_t* p = static_cast<int64_t*>(a.data());
  for (int64_t x : v) *p++ = x;
  return make_tensor(copy_to(a, dtype, kCPU), true);
}

// The message of the error `f` raises (empty if it does not raise loom::Error).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_CASE(a_data_error_fails_only_the_tensors_computed_from_it) {
  Tensor x = lazy_values({4, 5});
  Tensor q = ops::binary(OpId::FloorDiv, x, lazy_values({0, 1}));  // 4 // 0
  Tensor after = ops::add(q, Scalar(int64_t{1}));
  Tensor unrelated = ops::mul(x, Scalar(int64_t{2}));
  BOOST_CHECK_THROW(sync_all(), Error);  // the sync raises the failure, and computes the rest
  BOOST_TEST(pending_count(kCPU) == 0);
  BOOST_TEST((values(unrelated) == std::vector<double>{8, 10}));
  BOOST_TEST(q->is_errored());
  BOOST_TEST(after->is_errored());
  // Reads raise the failure, naming the op; dtype and shape remain.
  std::string message = error_of([&] { values(after); });
  BOOST_TEST(contains(message, "ZeroDivisionError"));
  BOOST_TEST(contains(message, "FloorDiv"));
  BOOST_TEST(error_of([&] { materialize(*q); }) == message);
  BOOST_TEST((q->dtype() == DType::Int64 && Dims(q->sizes()) == D({2})));
  // So do uses: ops, views, in-place writes into it or from it.
  BOOST_TEST(error_of([&] { ops::add(q, Scalar(int64_t{1})); }) == message);
  BOOST_TEST(error_of([&] { ops::select(q, 0, 0); }) == message);
  BOOST_TEST(error_of([&] { ops::add_(*q, Scalar(int64_t{1})); }) == message);
  BOOST_TEST(error_of([&] { ops::copy_(*x, q); }) == message);
  // Everything else keeps working.
  BOOST_TEST((values(ops::add(x, Scalar(int64_t{1}))) == std::vector<double>{5, 6}));
}

BOOST_AUTO_TEST_CASE(a_failed_inplace_write_leaves_the_tensor_as_it_was) {
  Tensor p = lazy_values({1, 2});
  Tensor alias = ops::narrow(p, 0, 0, 2);  // a materialized view: shares p's storage
  Array storage = p->array();
  ops::add_(*p, ops::gather(p, 0, lazy_values({7, 0})));  // index 7 is out of range
  BOOST_TEST(p->is_pending());
  std::string message = error_of([] { sync_all(); });
  BOOST_TEST(contains(message, "index 7 is out of bounds for dimension 0 with size 2"));
  BOOST_TEST(contains(message, "Gather"));
  BOOST_TEST(!p->is_pending());
  BOOST_TEST(!p->is_errored());  // readable, with its value from before the sync, in its storage
  BOOST_TEST((p->array().storage == storage.storage));
  BOOST_TEST((values(p) == std::vector<double>{1, 2}));
  BOOST_TEST(alias->array().storage->pending_writes() == 0);
  Tensor pending = ops::add(lazy_values({0}), Scalar(int64_t{1}));
  int64_t traces = metrics().traces;
  materialize(*alias);  // current already: no sync (which would run `pending`)
  BOOST_TEST(metrics().traces == traces);
  BOOST_TEST(pending->is_pending());
  BOOST_TEST((values(alias) == std::vector<double>{1, 2}));
}

BOOST_AUTO_TEST_CASE(a_failed_write_through_a_dead_view_is_dropped) {
  Tensor p = lazy_values({1, 2, 3});
  {
    Tensor v = ops::narrow(p, 0, 1, 2);
    ops::add_(*v, ops::gather(p, 0, lazy_values({0, 5})));
  }  // v dies with its write pending: an orphan write into p's storage
  BOOST_CHECK_THROW(sync_all(), Error);
  BOOST_TEST(p->array().storage->pending_writes() == 0);
  BOOST_TEST((values(p) == std::vector<double>{1, 2, 3}));
  BOOST_CHECK_NO_THROW(sync_all());  // nothing is left to fail again
}

BOOST_AUTO_TEST_CASE(orphan_writes_that_land_release_their_storage) {
  Tensor p = lazy_values({1, 2, 3});
  ops::fill_(*ops::narrow(p, 0, 0, 1), Arg(Scalar(int64_t{9})));  // the view dies at once
  sync_all();
  BOOST_TEST(p->array().storage->pending_writes() == 0);  // later reads of p need no sync
  BOOST_TEST((values(p) == std::vector<double>{9, 2, 3}));
}

BOOST_AUTO_TEST_CASE(views_of_a_failed_tensor_fail_with_it) {
  Tensor q = ops::binary(OpId::Remainder, lazy_values({4, 5}), lazy_values({1, 0}));
  Tensor head = ops::narrow(q, 0, 0, 1);  // a pending view, aliased to q after the sync
  BOOST_CHECK_THROW(sync_all(), Error);
  BOOST_TEST(head->is_errored());
  BOOST_TEST(contains(error_of([&] { values(head); }), "Remainder"));
}

BOOST_AUTO_TEST_CASE(executors_report_the_failing_node) {
  // An executor whose first run fails at the first Mul node, as a kernel's data error would.
  struct FailingMul final : Executor {
    graph::Interpreter inner;
    int* runs;
    explicit FailingMul(int* r) : runs(r) {}
    std::vector<Array> run(const Trace& t) override {
      if ((*runs)++ == 0)
        for (size_t i = 0; i < t.nodes.size(); ++i)
          if (t.nodes[i]->op() == OpId::Mul) throw NodeError(Error(ErrorKind::Index, "injected"), static_cast<int>(i), OpId::Mul);
      return inner.run(t);
    }
    void synchronize(Device) override {}
  };
  int runs = 0;
  auto executor = std::make_unique<FailingMul>(&runs);
  Tensor x = lazy_values({1, 2}, DType::Float32);
  Tensor a = ops::mul(x, Scalar(3.0));
  Tensor b = ops::add(x, Scalar(1.0));
  Tensor c = ops::add(a, b);
  install_executor(std::move(executor));
  BOOST_CHECK_THROW(sync_all(), Error);
  graph::install_default_executor();
  BOOST_TEST(runs == 2);  // once with the failure, once for what it does not reach
  BOOST_TEST((values(b) == std::vector<double>{2, 3}));
  BOOST_TEST(c->is_errored());
  try {
    values(c);
    BOOST_FAIL("an errored tensor was read");
  } catch (const Error& err) {
    BOOST_TEST(std::string(err.what()) == "injected (computed by the lazy op Mul at a sync)");
    BOOST_TEST((err.kind() == ErrorKind::Index));  // the cause's kind: IndexError in Python
  }
}

BOOST_AUTO_TEST_CASE(checks_of_numbers_raise_at_the_call) {
  Tensor t = lazy_values({1, 2}, DType::UInt8);
  BOOST_CHECK_THROW(ops::fill_(*t, Arg(Scalar(int64_t{300}))), Error);  // does not fit uint8
  BOOST_CHECK_THROW(ops::binary(OpId::FloorDiv, t, Scalar(int64_t{256})), Error);  // 0 in uint8
  BOOST_TEST(!t->is_pending());
  BOOST_TEST(pending_count(kCPU) == 0);
  BOOST_TEST((values(t) == std::vector<double>{1, 2}));
}

// The sync's hash tables are kept per thread and emptied by a generation number (lazy/sync_index.h):
// after a reset no entry of an earlier trace may be found, growth keeps the current entries only,
// and a table borrowed while the thread's own is in use is a different one.
BOOST_AUTO_TEST_CASE(flat_index_reset_forgets_earlier_entries) {
  FlatIndex index(4);
  auto any = [](int32_t) { return true; };
  for (int round = 0; round < 3; ++round) {
    for (int32_t v = 0; v < 40; ++v) index.add(mix64(static_cast<uint64_t>(v + 100 * round)), v);  // grows
    BOOST_TEST(index.size() == 40u);
    for (int32_t v = 0; v < 40; ++v) BOOST_TEST(index.find(mix64(static_cast<uint64_t>(v + 100 * round)), any) == v);
    if (round > 0) BOOST_TEST(index.find(mix64(static_cast<uint64_t>(5 + 100 * (round - 1))), any) == -1);
    index.reset(4);
    BOOST_TEST(index.size() == 0u);
    BOOST_TEST(index.find(mix64(static_cast<uint64_t>(7 + 100 * round)), any) == -1);
  }
}

BOOST_AUTO_TEST_CASE(scratch_index_in_use_is_not_shared) {
  struct Tag;
  auto any = [](int32_t) { return true; };
  ScratchIndex<Tag> outer(8);
  outer->add(mix64(1), 1);
  {
    ScratchIndex<Tag> inner(8);
    BOOST_TEST(&*inner != &*outer);
    BOOST_TEST(inner->find(mix64(1), any) == -1);
    inner->add(mix64(2), 2);
  }
  BOOST_TEST(outer->find(mix64(1), any) == 1);
  BOOST_TEST(outer->find(mix64(2), any) == -1);
}

BOOST_AUTO_TEST_SUITE_END()
