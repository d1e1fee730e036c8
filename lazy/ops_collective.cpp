// Definitions of the collective primitives (lazy/collectives.h): shape rules that check the group
// and the roots where the op is called, and CPU kernels that hand the bytes to
// runtime/distributed/collective.h. Attributes: [group id, reduce op or root, (root), ...].
#include <array>

#include "lazy/capture.h"
#include "lazy/collectives.h"
#include "lazy/dispatch.h"
#include "runtime/distributed/collective.h"
#include "runtime/error.h"

namespace loom {
namespace {

using distributed::Call;
using distributed::ReduceOp;
using distributed::Kind;

std::shared_ptr<distributed::Group> group_of(const Attrs& a) { return distributed::group(a[0]); }

void check_root(const distributed::Group& g, int64_t root, const char* what, const char* name) {
  LOOM_CHECK(root >= 0 && root < g.size(), Value, what, ": ", name, " ", root, " is not a rank of the process group (",
             "ranks 0 to ", g.size() - 1, ")");
}

void check_avg(ReduceOp op, DType dtype, const char* what) {
  LOOM_CHECK(op != ReduceOp::Avg || is_floating(dtype), Value, what,
             ": ReduceOp.AVG needs a floating-point tensor, got ", dtype_name(dtype));
  LOOM_CHECK(op == ReduceOp::Avg || op == ReduceOp::Sum || op == ReduceOp::Product || op == ReduceOp::Min ||
                 op == ReduceOp::Max, Value, what, ": unknown reduce op ", static_cast<int>(op));
}

// The call the op makes, from its attributes and input.
Call call_of(OpId op, const Attrs& a, DType dtype, IntSpan shape) {
  Call c;
  c.dtype = dtype;
  c.shape = Dims(shape);
  switch (op) {
    case OpId::AllReduce: c.kind = Kind::AllReduce, c.op = static_cast<ReduceOp>(a[1]); break;
    case OpId::Broadcast: c.kind = Kind::Broadcast, c.root = static_cast<int>(a[1]); break;
    case OpId::AllGather: c.kind = Kind::AllGather; break;
    case OpId::ReduceScatter: c.kind = Kind::ReduceScatter, c.op = static_cast<ReduceOp>(a[1]); break;
    case OpId::ReduceToRoot: c.kind = Kind::Reduce, c.op = static_cast<ReduceOp>(a[1]), c.root = static_cast<int>(a[2]); break;
    case OpId::GatherToRoot: c.kind = Kind::Gather, c.root = static_cast<int>(a[1]); break;
    case OpId::ScatterFromRoot:
      c.kind = Kind::Scatter, c.root = static_cast<int>(a[1]);
      c.shape = Dims(a.begin() + 2, a.end());  // the output's: what every rank agrees on
      break;
    default: LOOM_FAIL(Runtime, "internal: ", op_name(op), " is not a collective");
  }
  return c;
}

OutputMeta infer_all_reduce(std::span<const InputMeta> in, const Attrs& a) {
  group_of(a);
  check_avg(static_cast<ReduceOp>(a[1]), in[0].dtype, "all_reduce");
  return {in[0].dtype, Dims(in[0].shape)};
}

OutputMeta infer_broadcast(std::span<const InputMeta> in, const Attrs& a) {
  check_root(*group_of(a), a[1], "broadcast", "src");
  return {in[0].dtype, Dims(in[0].shape)};
}

OutputMeta infer_all_gather(std::span<const InputMeta> in, const Attrs& a) {
  return {in[0].dtype, Dims{numel_of(in[0].shape) * group_of(a)->size()}};
}

OutputMeta infer_reduce_scatter(std::span<const InputMeta> in, const Attrs& a) {
  auto g = group_of(a);
  check_avg(static_cast<ReduceOp>(a[1]), in[0].dtype, "reduce_scatter");
  int64_t n = numel_of(in[0].shape);
  LOOM_CHECK(n % g->size() == 0, Value, "reduce_scatter: the input of shape ", format_dims(in[0].shape), " (", n,
             " elements) cannot be split into ", g->size(), " equal chunks, one per rank");
  return {in[0].dtype, Dims{n / g->size()}};
}

OutputMeta infer_reduce(std::span<const InputMeta> in, const Attrs& a) {
  check_root(*group_of(a), a[2], "reduce", "dst");
  check_avg(static_cast<ReduceOp>(a[1]), in[0].dtype, "reduce");
  return {in[0].dtype, Dims(in[0].shape)};
}

OutputMeta infer_gather(std::span<const InputMeta> in, const Attrs& a) {
  auto g = group_of(a);
  check_root(*g, a[1], "gather", "dst");
  return {in[0].dtype, Dims{g->rank() == a[1] ? numel_of(in[0].shape) * g->size() : 0}};
}

OutputMeta infer_scatter(std::span<const InputMeta> in, const Attrs& a) {
  auto g = group_of(a);
  check_root(*g, a[1], "scatter", "src");
  Dims shape(a.begin() + 2, a.end());
  if (g->rank() == a[1])
    LOOM_CHECK(numel_of(in[0].shape) == numel_of(shape) * g->size(), Value, "scatter: the rank ", a[1],
               " scatters ", numel_of(in[0].shape), " elements, not ", g->size(), " chunks of shape ",
               format_dims(shape));
  return {in[0].dtype, shape};
}

// The kernel of every collective: its input made contiguous, then collective.h. Inputs past the
// first are the ordering token (Note [Collectives run in program order]): never read.
template <OpId op>
void run(std::span<const Operand> in, const Attrs& a, const Array& out) {
  auto g = group_of(a);
  const Array& x = *in[0].array;
  Array dense = x.is_contiguous() ? x : contiguous(x);
  distributed::run(*g, call_of(op, a, x.dtype, x.sizes()), dense.data(), out.data());
}

const bool registered = [] {
  auto def = [](OpId op, auto infer, auto kernel) {
    define_op(op, OpDef{.name = op_name(op), .cls = OpClass::Other, .infer = infer, .run_cpu = kernel});
  };
  def(OpId::AllReduce, infer_all_reduce, run<OpId::AllReduce>);
  def(OpId::Broadcast, infer_broadcast, run<OpId::Broadcast>);
  def(OpId::AllGather, infer_all_gather, run<OpId::AllGather>);
  def(OpId::ReduceScatter, infer_reduce_scatter, run<OpId::ReduceScatter>);
  def(OpId::ReduceToRoot, infer_reduce, run<OpId::ReduceToRoot>);
  def(OpId::GatherToRoot, infer_gather, run<OpId::GatherToRoot>);
  def(OpId::ScatterFromRoot, infer_scatter, run<OpId::ScatterFromRoot>);
  return true;
}();

// The last lazy collective of each device (slot 0: the CPU, 1 + i: cuda:i): the token of the
// next one (Note [Collectives run in program order]).
std::array<Tensor, 65>& last_collectives() {
  static auto* t = new std::array<Tensor, 65>();  // never destroyed, as the registries of lazy/sync.cpp
  return *t;
}
Tensor& last_for(Device d) {
  size_t slot = d.is_cpu() ? 0 : 1 + static_cast<size_t>(d.index);
  LOOM_CHECK(slot < last_collectives().size(), Runtime, "no lazy collectives on ", d.str());
  return last_collectives()[slot];
}

Tensor record(OpId op, const Tensor& x, Attrs attrs) {
  x->check_usable();
  auto g = group_of(attrs);
  LOOM_CHECK(x->device() == g->device(), Runtime, distributed::kind_name(call_of(op, attrs, x->dtype(), x->sizes()).kind),
             ": the ", g->backend(), " process group of this rank works on tensors on ", g->device().str(),
             ", not on a tensor on ", x->device().str());
  if (!x->is_lazy()) {
    // Runs now, in a step loom.compile records too: its replays, which run no Python, would skip
    // it while the other ranks wait for it. So the step is not captured (a sync point of it).
    if (StepRecording* rec = recording())
      rec->note_sync_point(x->device(), "runs a collective on an eager tensor (a replay would not run it)");
    return apply(op, {Arg(x)}, std::move(attrs));
  }
  Tensor& last = last_for(x->device());
  std::array<Arg, 2> args{Arg(x), Arg(last)};
  bool token = last && last->is_pending();
  Tensor r = apply(op, std::span<const Arg>(args.data(), token ? 2 : 1), std::move(attrs));
  // The token is a tensor of its own on r's node, never handed out (Note [The token is no
  // result]).
  last = make_ref<TensorImpl>(Ref<Node>(r->node()), r->device());
  return r;
}

}  // namespace

namespace collectives {

Tensor all_reduce(const Tensor& x, int64_t group, ReduceOp op) {
  return record(OpId::AllReduce, x, {group, static_cast<int64_t>(op)});
}
Tensor broadcast(const Tensor& x, int64_t group, int64_t src) { return record(OpId::Broadcast, x, {group, src}); }
Tensor all_gather(const Tensor& x, int64_t group) { return record(OpId::AllGather, x, {group}); }
Tensor reduce_scatter(const Tensor& x, int64_t group, ReduceOp op) {
  return record(OpId::ReduceScatter, x, {group, static_cast<int64_t>(op)});
}
Tensor gather(const Tensor& x, int64_t group, int64_t dst) { return record(OpId::GatherToRoot, x, {group, dst}); }
Tensor scatter(const Tensor& chunks, IntSpan shape, int64_t group, int64_t src) {
  Attrs a{group, src};
  for (int64_t s : shape) a.push_back(s);
  return record(OpId::ScatterFromRoot, chunks, std::move(a));
}

void all_reduce_(TensorImpl& self, int64_t group, ReduceOp op) {
  update(self, [&] { return all_reduce(Tensor(&self), group, op); });
}
void broadcast_(TensorImpl& self, int64_t group, int64_t src) {
  update(self, [&] { return broadcast(Tensor(&self), group, src); });
}
void reduce_(TensorImpl& self, int64_t group, ReduceOp op, int64_t dst) {
  update(self, [&] { return record(OpId::ReduceToRoot, Tensor(&self), {group, static_cast<int64_t>(op), dst}); });
}

distributed::Call call(OpId op, const Attrs& attrs, DType dtype, IntSpan shape) {
  return call_of(op, attrs, dtype, shape);
}

bool is_collective(OpId op) noexcept {
  switch (op) {
    case OpId::AllReduce:
    case OpId::Broadcast:
    case OpId::AllGather:
    case OpId::ReduceScatter:
    case OpId::ReduceToRoot:
    case OpId::GatherToRoot:
    case OpId::ScatterFromRoot: return true;
    default: return false;
  }
}

bool is_token(const TensorImpl& t) {
  if (!t.is_lazy()) return false;
  Device d = t.device();
  size_t slot = d.is_cpu() ? 0 : 1 + static_cast<size_t>(d.index);
  return slot < last_collectives().size() && last_collectives()[slot].get() == &t;
}

bool pending(Device device) {
  const Tensor& last = last_for(device);
  return last && last->is_pending();
}

}  // namespace collectives
}  // namespace loom
