// Partitioning a trace into fused kernels and library steps (see program.h).
#include <algorithm>
#include <array>
#include <map>
#include <sstream>
#include <utility>

#include "fusion/affine.h"
#include "fusion/program.h"
#include "lazy/elementwise.h"
#include "lazy/node.h"
#include "runtime/error.h"

namespace loom::fusion {
namespace {

// Thrown while building a kernel when a value must be stored before it can be read (a view of
// it is not affine); partitioning restarts with that value materialized.
struct NeedsMaterialization {
  int32_t value;
};

// Thrown when a root cannot join a candidate kernel.
struct CannotJoin {};

bool is_leaf(const Node& n) { return op_def(n.op()).cls == OpClass::Leaf; }

// Bounds on the size of one kernel. A trace may hold a chain of a million elementwise ops, and
// fusing it into one kernel would make a function of a million lines, which no compiler builds in
// reasonable time or memory (and whose loads and stores would no longer fit in registers anyway).
// So a value that inlines kMaxInlinedOps ops is stored, and a kernel takes no more roots once it
// has kMaxKernelExprs expressions or stores: such kernels cost one store and one load per few
// hundred ops, which is noise beside their arithmetic. Real models' kernels stay far below both.
constexpr int64_t kMaxInlinedOps = 256;
constexpr size_t kMaxKernelExprs = 1024;
constexpr size_t kMaxKernelStores = 256;
// Nor more than kMaxKernelStages reductions: each is a pass of its own over the rows, so joining
// them saves only a launch, while the compiler's time grows faster than the function (a GRU
// unrolled over 35 steps summed one bias gradient per step: one kernel of 70 column stages,
// 40 s to compile; in kernels of at most 16, the whole model compiled in 6 s).
constexpr size_t kMaxKernelStages = 16;
// A full reduction (sum, prod, amax, amin over every dim) of at least kSplitMinElements elements
// is a split reduction (program.h, Kernel::split_block): the pointwise kernel of its input's
// shape computes its input and per-block partials in parallel, a second pass combines them.
// Below this size a serial row is as fast (the executor runs smaller kernels on one thread).
// Blocks are a multiple of 64 elements, so each is vectorized as a whole (render.h, Split).
constexpr int64_t kSplitMinElements = int64_t{1} << 15;
constexpr int64_t kSplitBlock = 4096;
// A value read by several consumers is stored once it would be recomputed from this many
// full-size loads in each (initial_materialization).
constexpr int64_t kMaxRecomputedLoads = 3;

// Ops run by their own implementation instead of inside a kernel: library calls and irregular
// data movement, and integer division, which must raise ZeroDivisionError as in eager mode (a
// generated kernel cannot raise).
bool is_library_op(const Node& n) {
  if (n.op() == OpId::FloorDiv || n.op() == OpId::Remainder) return is_integral(n.dtype(), true);

  return op_def(n.op()).cls == OpClass::Other && n.op() != OpId::Full;
}

// An access is linear when it walks its buffer in the domain's row-major order from element 0
// (size-1 domain dims, whose strides are normalized to 0, do not count).
bool is_linear(const Access& a, IntSpan domain) {
  if (a.offset != 0) return false;
  Dims expected = contiguous_strides(domain);
  for (size_t d = 0; d < domain.size(); ++d)
    if (domain[d] != 1 && a.strides[d] != expected[d]) return false;
  return true;
}
bool is_scalar_leaf(const Node& n) { return n.op() == OpId::Scalar || n.op() == OpId::Constant; }
OpClass cls(const Node& n) { return op_def(n.op()).cls; }

Layout view_layout(const Node& view) {
  const Attrs& a = view.attrs();
  return Layout{Dims(view.shape()), Dims(a.begin() + 1, a.end()), a[0]};
}

ReduceKind reduce_kind(OpId op) {
  switch (op) {
    case OpId::Sum: return ReduceKind::Sum;
    case OpId::Prod: return ReduceKind::Prod;
    case OpId::Amax: return ReduceKind::Max;
    case OpId::Amin: return ReduceKind::Min;
    case OpId::Argmax: return ReduceKind::ArgMax;
    default: return ReduceKind::ArgMin;
  }
}

// Whether reduction node n (of input `in`) is a split reduction (kSplitMinElements).
bool is_split_reduction(const Node& n, const Node& in) {
  bool arg = n.op() == OpId::Argmax || n.op() == OpId::Argmin;
  auto every_dim = in.ndim() >= 64 ? ~uint64_t{0} : (uint64_t{1} << in.ndim()) - 1;
  auto mask = static_cast<uint64_t>(n.attrs()[0]);
  return !arg && in.ndim() > 0 && (mask & every_dim) == every_dim && numel_of(in.shape()) >= kSplitMinElements;
}

// Whether expression e reads a reduction stage's result.
bool reads_reduced(const std::vector<Expr>& exprs, int32_t e) {
  std::vector<bool> seen(exprs.size(), false);
  std::vector<int32_t> stack{e};
  while (!stack.empty()) {
    int32_t x = stack.back();
    stack.pop_back();
    if (x < 0 || seen[static_cast<size_t>(x)]) continue;
    seen[static_cast<size_t>(x)] = true;
    const Expr& ex = exprs[static_cast<size_t>(x)];
    if (ex.op == ExprOp::Reduced) return true;
    stack.insert(stack.end(), {ex.a, ex.b, ex.c});
  }
  return false;
}

// The kernel a reduction node belongs to is keyed by its input's shape and its reduced dims.
struct RowKey {
  Dims shape;
  uint64_t mask;
  friend bool operator==(const RowKey&, const RowKey&) = default;

  // Whether the reduced dims are the trailing ones, after at least one kept dim (a softmax's or
  // a layer norm's rows): then elementwise work over the rows' elements that reads the row's
  // results joins the row kernel as an element epilogue, computed while the row is in cache
  // (softmax forward: one kernel, not a statistics kernel and an elementwise one). Column
  // reductions keep their own form; a full reduction is one serial row, and the elementwise
  // work over all of it stays a pointwise kernel that threads share.
  bool reduces_trailing_dims() const {
    auto n = static_cast<int64_t>(shape.size());
    if (n == 0 || (mask & 1) != 0) return false;
    bool reduced = false;
    for (int64_t d = 0; d < n; ++d) {
      bool r = (mask >> d & 1) != 0;
      if (reduced && !r) return false;
      reduced = reduced || r;
    }
    return reduced;
  }
};

class Partitioner {
 public:
  Partitioner(const Trace& t, const PartitionOptions& o, std::vector<bool> materialized)
      : t_(t), opt_(o), materialized_(std::move(materialized)) {}

  Program run();

 private:
  struct Root {
    int32_t expr;
    AffineMap map;
  };
  using MemoKey = std::pair<int32_t, std::vector<int64_t>>;  // (node, map)
  struct KernelState {
    Kernel k;
    ExprBuilder b;
    int32_t step;
    std::optional<RowKey> row;
    Dims pointwise_shape;
    std::map<int32_t, Root> roots;     // trace node -> value in this kernel
    std::map<MemoKey, int32_t> memo;   // (node, map) -> expr
    std::map<int32_t, int32_t> params;  // Scalar node -> Param index
  };
  // A node compute() is building the expression of: its map, and the values of the inputs it
  // needs found so far.
  struct Pending {
    int32_t node;
    AffineMap map;
    std::optional<MemoKey> key;        // where value() memoizes it (not compute()'s own node)
    std::optional<AffineMap> through;  // a view: its input's map
    SmallVec<int32_t, 4> operands;
  };

  const Node& node(int32_t i) const { return *t_.nodes[i]; }
  bool view_needs_copy(int32_t i) const;
  Operand operand(int32_t i) const;
  int32_t row_major_source(int32_t i) const;
  void place(int32_t i);
  bool try_join(KernelState& k, int32_t i);
  void add_root(KernelState& k, int32_t i);
  int32_t value(KernelState& k, int32_t i, const AffineMap& m);
  int32_t compute(KernelState& k, int32_t i, const AffineMap& m);
  std::optional<int32_t> known(KernelState& k, int32_t i, const AffineMap& m, const MemoKey& key);
  std::optional<int32_t> start(KernelState& k, Pending& p);
  std::pair<int32_t, AffineMap> input_map(const Pending& p, size_t j) const;
  size_t inputs_needed(const Pending& p) const;
  int32_t elementwise(KernelState& k, int32_t i, std::span<const int32_t> operands);
  int32_t unrounded_elementwise(KernelState& k, int32_t i, std::span<const int32_t> operands);
  MemoKey memo_key(int32_t i, const AffineMap& m) const;
  int32_t load(KernelState& k, int32_t i, const AffineMap& m);
  int32_t load_access(KernelState& k, Access a);
  Layout buffer_layout(int32_t i) const;
  AffineMap root_map(const KernelState& k, int32_t i) const;
  AffineMap element_map(const KernelState& k, int64_t ndim) const;

  const Trace& t_;
  const PartitionOptions& opt_;
  std::vector<bool> materialized_;
  std::vector<int32_t> producer_step_;  // step that produces a materialized value (-1: a leaf)
  std::vector<KernelState> kernels_;
  std::vector<Step> steps_;
};

Layout Partitioner::buffer_layout(int32_t i) const {
  const Node& n = node(i);
  if (n.op() == OpId::Input) {
    Layout l = n.array().layout;
    l.offset = 0;  // buffers are bound by the address of their first element
    return l;
  }
  return Layout::contiguous(n.shape());
}

// The map from a row kernel's domain to a value of its rows' shape (a reduction's input, an
// element epilogue): kept dims from the outer loop, reduced dims from the inner one.
AffineMap Partitioner::element_map(const KernelState& k, int64_t ndim) const {
  Dims positions;
  int64_t outer = 0, inner = static_cast<int64_t>(k.k.outer.size());
  for (int64_t d = 0; d < ndim; ++d) positions.push_back((k.row->mask >> d & 1) ? inner++ : outer++);
  AffineMap m = AffineMap::select_dims(inner, positions);
  normalize(m, k.row->shape);
  return m;
}

// The map from a kernel's domain to the value a root computes.
AffineMap Partitioner::root_map(const KernelState& k, int32_t i) const {
  const Node& n = node(i);
  if (!k.row && k.k.split_block > 0 && Dims(n.shape()) != k.pointwise_shape) {
    // A split reduction's result, or a value computed from results: one element for the domain.
    AffineMap m = AffineMap::select_dims(static_cast<int64_t>(k.k.outer.size()), Dims(n.ndim(), -1));
    normalize(m, n.shape());
    return m;
  }
  if (!k.row) return AffineMap::identity(n.ndim());
  if (cls(n) != OpClass::Reduction && Dims(n.shape()) == k.row->shape) return element_map(k, n.ndim());
  // Row kernels: the domain is (kept dims, reduced dims) of the reduction input; a reduction
  // result or an epilogue value has the kept dims (and size-1 reduced dims when keepdim).
  auto outer = static_cast<int64_t>(k.k.outer.size());
  int64_t domain = outer + static_cast<int64_t>(k.k.inner.size());
  Dims positions;
  int64_t next = 0;
  for (int64_t s : n.shape()) {
    if (s == 1 && next < outer && k.k.outer[next] != 1 && n.ndim() > outer) {
      positions.push_back(-1);  // a keepdim placeholder
      continue;
    }
    positions.push_back(next < outer ? next++ : -1);
  }
  AffineMap m = AffineMap::select_dims(domain, positions);
  normalize(m, n.shape());
  return m;
}

int32_t Partitioner::load(KernelState& k, int32_t i, const AffineMap& m) {
  Access a{i, Space::Outer, {}, 0, false};
  buffer_access(m, buffer_layout(i), a.strides, a.offset);
  return load_access(k, std::move(a));
}

int32_t Partitioner::load_access(KernelState& k, Access a) {
  int32_t i = a.value;
  // A value stored by this kernel can only be reused at the index it is computed at.
  if (k.roots.count(i)) throw CannotJoin{};
  if (producer_step_[i] >= k.step) throw CannotJoin{};
  auto outer = static_cast<int64_t>(k.k.outer.size());
  for (size_t d = static_cast<size_t>(outer); d < a.strides.size(); ++d)
    if (a.strides[d] != 0) a.space = Space::Inner;
  Dims domain = k.k.outer;
  for (int64_t s : k.k.inner) domain.push_back(s);
  a.linear = is_linear(a, domain);
  int32_t index = -1;
  for (size_t l = 0; l < k.k.loads.size(); ++l)
    if (k.k.loads[l].access == a) index = static_cast<int32_t>(l);
  if (index < 0) {
    index = static_cast<int32_t>(k.k.loads.size());
    k.k.loads.push_back({a, node(i).dtype()});
  }
  Expr e{ExprOp::Load, compute_type(node(i).dtype()), a.space};
  e.index = index;
  return k.b.add(e);
}

// float16 and bfloat16 values are computed in float (compute_type); an op's result is rounded
// to its dtype (a Cast to the narrow type, which fusion/render.cpp renders as a rounding), as an
// unfused op's is when stored and as PyTorch's is: without it `x.to(bfloat16)` would change
// nothing inside a kernel, and a fused chain would drift from eager.
int32_t rounded_to(ExprBuilder& b, int32_t e, DType dtype) {
  if (dtype != DType::Float16 && dtype != DType::BFloat16) return e;
  return b.cast(b.cast(e, dtype), DType::Float32);
}

// The expression of elementwise node i (or Full) from its inputs' values.
int32_t Partitioner::elementwise(KernelState& k, int32_t i, std::span<const int32_t> operands) {
  return rounded_to(k.b, unrounded_elementwise(k, i, operands), node(i).dtype());
}

int32_t Partitioner::unrounded_elementwise(KernelState& k, int32_t i, std::span<const int32_t> operands) {
  const Node& n = node(i);
  SmallVec<InputMeta, 4> metas;
  for (size_t j = 0; j < n.inputs().size(); ++j) {
    const Node& x = node(t_.inputs[i][j]);
    if (is_scalar_leaf(x)) metas.push_back({true, x.scalar().kind(), DType::Float32, {}});
    else metas.push_back({false, ScalarKind::Float, x.dtype(), x.shape()});
  }
  BuilderScope scope(k.b);
  if (n.op() == OpId::Cast || n.op() == OpId::Full) return k.b.cast(operands[0], compute_type(n.dtype()));
  int32_t result = -1;
  bool known = visit_elementwise(n.op(), [&](auto op) {
    using F = decltype(op);
    DType storage = F::rule == DTypeRule::Logical ? DType::Bool : promoted_dtype<F>({metas.data(), metas.size()});
    DType c = compute_type(storage);
    visit_dtype(c, [&](auto tag) {
      using C = decltype(tag);
      if constexpr (std::is_same_v<C, Half> || std::is_same_v<C, BFloat16> || !supports<F, C>()) {
        LOOM_FAIL(Runtime, "internal: no ", op_name(F::id), " expression for ", dtype_name(c));
      } else {
        auto arg = [&](size_t idx) {
          DType want = (F::rule == DTypeRule::Select && idx == 0) ? DType::Bool : c;
          int32_t v = k.b.cast(operands[idx], want);
          // The eager kernel (lazy/ops_elementwise.cpp) stores every operand in the op's dtype
          // before computing in float: a Python number or a tensor of another dtype entering a
          // float16 / bfloat16 op is rounded to it first (x / 70000 in float16 divides by inf,
          // x ** 1.0001 raises to 1.0, as in PyTorch). Without this, a fused kernel used the
          // number's float value and differed from eager.
          if (want == c && (metas[idx].is_scalar || metas[idx].dtype != storage)) v = rounded_to(k.b, v, storage);
          return v;
        };
        if constexpr (F::arity == 1) {
          result = F::template f<Sym<C>>(Sym<C>(arg(0), 0)).id;
        } else if constexpr (F::arity == 2) {
          result = F::template f<Sym<C>>(Sym<C>(arg(0), 0), Sym<C>(arg(1), 0)).id;
        } else if constexpr (F::arity == 3) {
          if constexpr (F::rule == DTypeRule::Select)
            result = F::template f<Sym<C>>(Sym<bool>(arg(0), 0), Sym<C>(arg(1), 0), Sym<C>(arg(2), 0)).id;
          else
            result = F::template f<Sym<C>>(Sym<C>(arg(0), 0), Sym<C>(arg(1), 0), Sym<C>(arg(2), 0)).id;
        } else {  // four operands or more (nan_to_num, elu, the optimizers' updates)
          std::array<int32_t, F::arity> in;  // converted in operand order (a call's arguments have none)
          for (size_t j = 0; j < in.size(); ++j) in[j] = arg(j);
          [&]<size_t... J>(std::index_sequence<J...>) {
            result = F::template f<Sym<C>>(Sym<C>(in[J], 0)...).id;
          }(std::make_index_sequence<F::arity>{});
        }
      }
    });
  });
  LOOM_CHECK(known, Runtime, "internal: ", op_name(n.op()), " is not elementwise");
  return result;
}

Partitioner::MemoKey Partitioner::memo_key(int32_t i, const AffineMap& m) const {
  MemoKey key{i, {}};
  if (!is_scalar_leaf(node(i))) {
    key.second = m.offset;
    key.second.insert(key.second.end(), m.coeff.begin(), m.coeff.end());
  }
  return key;
}

// The value of node i at m if it needs no computing here: a root of this kernel (at the same
// map), a value already built, or a stored value (loaded).
std::optional<int32_t> Partitioner::known(KernelState& k, int32_t i, const AffineMap& m, const MemoKey& key) {
  if (auto r = k.roots.find(i); r != k.roots.end()) {
    if (r->second.map == m) return r->second.expr;
    throw CannotJoin{};
  }
  if (auto it = k.memo.find(key); it != k.memo.end()) return it->second;
  if (!materialized_[i] || is_scalar_leaf(node(i))) return std::nullopt;
  int32_t e = load(k, i, m);
  k.memo[key] = e;
  return e;
}

int32_t Partitioner::value(KernelState& k, int32_t i, const AffineMap& m) {
  MemoKey key = memo_key(i, m);
  if (std::optional<int32_t> e = known(k, i, m, key)) return *e;
  int32_t e = compute(k, i, m);
  k.memo[key] = e;
  return e;
}

// Starts computing p's node: its value when that needs no input's (a leaf, a view read from a
// stored value), else nullopt (a view affine over its input: p.through is the input's map).
std::optional<int32_t> Partitioner::start(KernelState& k, Pending& p) {
  int32_t i = p.node;
  const Node& n = node(i);
  if (n.op() == OpId::Constant) {
    Expr lit{ExprOp::Literal, n.dtype()};
    lit.literal = n.scalar().as_double();
    return k.b.add(lit);
  }
  if (n.op() == OpId::Scalar) {
    auto param = k.params.find(i);
    int32_t index = param != k.params.end() ? param->second : static_cast<int32_t>(k.k.params.size());
    if (param == k.params.end()) {
      k.params[i] = index;
      k.k.params.push_back(i);
    }
    Expr e{ExprOp::Param, n.dtype()};
    e.index = index;
    return k.b.add(e);
  }
  if (cls(n) == OpClass::View) {
    int32_t in = t_.inputs[i][0];
    Layout rel = view_layout(n);
    p.through = through_view(p.map, rel, node(in).shape());
    if (p.through) return std::nullopt;
    int32_t src = row_major_source(in);
    if (materialized_[src] && buffer_layout(src).is_contiguous()) {
      // A stored, dense input is addressed by the view's element offsets directly.
      Access a{src, Space::Outer, {}, 0, false};
      dense_access(p.map, rel, a.strides, a.offset);
      return load_access(k, std::move(a));
    }
    // Not affine over a computed or strided value: store the computed value (dense), or the view
    // itself (a copy) when the value is stored strided.
    throw NeedsMaterialization{materialized_[src] ? i : src};
  }
  LOOM_CHECK(cls(n) == OpClass::Elementwise || n.op() == OpId::Full, Runtime, "internal: ", op_name(n.op()),
             " reached inside a kernel without being stored");
  return std::nullopt;
}

size_t Partitioner::inputs_needed(const Pending& p) const { return p.through ? 1 : t_.inputs[p.node].size(); }

// The input p's node reads as its j-th operand, and the map it is read at.
std::pair<int32_t, AffineMap> Partitioner::input_map(const Pending& p, size_t j) const {
  int32_t in = t_.inputs[p.node][j];
  if (p.through) return {in, *p.through};
  const Node& x = node(in);
  return {in, is_scalar_leaf(x) ? p.map : broadcast(p.map, node(p.node).shape(), x.shape())};
}

// The value of node i computed in kernel k (not read from its buffer), and of the values it is
// computed from that are not stored. A loop over an explicit stack, not a recursion: a kernel
// may inline a chain of views and elementwise ops as deep as the trace (DESIGN decision 14).
// Inputs are visited in order, depth first, as a recursion would, so expressions get the same
// numbers.
int32_t Partitioner::compute(KernelState& k, int32_t i, const AffineMap& m) {
  std::vector<Pending> stack;
  stack.push_back({i, m});
  if (std::optional<int32_t> e = start(k, stack.back())) return *e;
  for (;;) {
    Pending& p = stack.back();
    if (p.operands.size() < inputs_needed(p)) {
      auto [in, map] = input_map(p, p.operands.size());
      MemoKey key = memo_key(in, map);
      std::optional<int32_t> e = known(k, in, map, key);
      if (!e) {
        Pending next{in, std::move(map), std::move(key)};
        e = start(k, next);
        if (!e) {
          stack.push_back(std::move(next));  // p is invalid from here
          continue;
        }
        k.memo[*next.key] = *e;
      }
      p.operands.push_back(*e);
      continue;
    }
    int32_t e = p.through ? p.operands[0] : elementwise(k, p.node, {p.operands.data(), p.operands.size()});
    if (p.key) k.memo[*p.key] = e;
    stack.pop_back();
    if (stack.empty()) return e;
    stack.back().operands.push_back(e);
  }
}

void Partitioner::add_root(KernelState& k, int32_t i) {
  const Node& n = node(i);
  AffineMap m = root_map(k, i);
  int32_t e;
  if (cls(n) == OpClass::Reduction) {
    int32_t in = t_.inputs[i][0];
    const Node& x = node(in);
    // The input is read over the whole domain: kept dims from the outer loop, reduced dims from
    // the inner one (a split reduction's domain is its input's shape).
    int32_t input = value(k, in, k.row ? element_map(k, x.ndim()) : AffineMap::identity(x.ndim()));
    // A split kernel's first pass cannot read a result of its second (x - x.mean()).
    if (!k.row && reads_reduced(k.b.exprs(), input)) throw CannotJoin{};
    DType type = k.b.exprs()[input].type;
    Stage stage{reduce_kind(n.op()), type, input, i};
    if (stage.kind == ReduceKind::Sum || stage.kind == ReduceKind::Prod) {
      // Sums of integers and bools accumulate in int64, as the result's dtype says.
      DType acc = compute_type(n.dtype());
      stage.input = k.b.cast(input, acc);
      stage.input_type = acc;
    }
    bool arg = stage.kind == ReduceKind::ArgMax || stage.kind == ReduceKind::ArgMin;
    Expr r{ExprOp::Reduced, arg ? DType::Int64 : stage.input_type};
    r.index = static_cast<int32_t>(k.k.stages.size());
    k.k.stages.push_back(stage);
    e = rounded_to(k.b, k.b.add(r), n.dtype());
  } else {
    e = compute(k, i, m);
    if (k.k.split_block > 0 && Dims(n.shape()) == k.pointwise_shape && reads_reduced(k.b.exprs(), e))
      throw CannotJoin{};  // an element of the domain that reads a result of the second pass
  }
  k.roots[i] = {e, m};
  Access a{i, Space::Outer, {}, 0, false};
  buffer_access(m, buffer_layout(i), a.strides, a.offset);
  for (size_t d = k.k.outer.size(); d < a.strides.size(); ++d)
    if (a.strides[d] != 0) a.space = Space::Inner;  // an element epilogue's store
  Dims domain = k.k.outer;
  for (int64_t s : k.k.inner) domain.push_back(s);
  a.linear = !k.row && is_linear(a, domain);
  k.k.stores.push_back({a, n.dtype(), k.b.cast(e, compute_type(n.dtype()))});
}

bool Partitioner::try_join(KernelState& k, int32_t i) {
  // A failed join is undone rather than the kernel copied before every join (which made joining
  // n roots quadratic). Until it fails, add_root only adds expressions, loads, parameters and
  // memo entries; memo entries naming expressions that existed before stay true.
  size_t exprs = k.b.exprs().size(), loads = k.k.loads.size(), params = k.k.params.size();
  try {
    add_root(k, i);
    return true;
  } catch (const CannotJoin&) {
    k.b.truncate(exprs);
    k.k.loads.resize(loads);
    k.k.params.resize(params);
    std::erase_if(k.memo, [&](const auto& entry) { return entry.second >= static_cast<int32_t>(exprs); });
    std::erase_if(k.params, [&](const auto& entry) { return entry.second >= static_cast<int32_t>(params); });
    return false;
  }
}

void Partitioner::place(int32_t i) {
  const Node& n = node(i);
  bool reduction = cls(n) == OpClass::Reduction;
  std::optional<RowKey> key;
  if (reduction) key = RowKey{Dims(node(t_.inputs[i][0]).shape()), static_cast<uint64_t>(n.attrs()[0])};
  bool split = reduction && is_split_reduction(n, node(t_.inputs[i][0]));
  if (opt_.fuse) {
    // The most recent kernel of the same domain: a row kernel of the same key for reductions;
    // for other values a pointwise kernel of their shape, or a row kernel whose results have it.
    for (auto it = kernels_.rbegin(); it != kernels_.rend(); ++it) {
      KernelState& k = *it;
      bool fits = false;
      if (split) {
        fits = !k.row && k.pointwise_shape == key->shape;  // the kernel computing its input
      } else if (reduction) {
        fits = k.row && *k.row == *key;
      } else if (k.row) {
        for (const Stage& s : k.k.stages) fits = fits || Dims(node(s.node).shape()) == Dims(n.shape());
        fits = fits || (k.row->reduces_trailing_dims() && Dims(n.shape()) == k.row->shape);
      } else {
        fits = k.pointwise_shape == Dims(n.shape());
        for (const Stage& s : k.k.stages) fits = fits || Dims(node(s.node).shape()) == Dims(n.shape());
      }
      if (fits) {
        bool full = k.b.exprs().size() >= kMaxKernelExprs || k.k.stores.size() >= kMaxKernelStores ||
                    (reduction && k.k.stages.size() >= kMaxKernelStages);
        int64_t block = k.k.split_block;
        if (split) k.k.split_block = kSplitBlock;  // root_map maps the result as split
        if (!full && try_join(k, i)) {
          producer_step_[i] = k.step;
          return;
        }
        k.k.split_block = block;
        break;
      }
    }
  }
  KernelState k;
  k.step = static_cast<int32_t>(steps_.size());
  if (split) {
    k.pointwise_shape = key->shape;
    k.k.outer = key->shape;
    k.k.split_block = kSplitBlock;
  } else if (reduction) {
    k.row = key;
    for (int64_t d = 0; d < static_cast<int64_t>(key->shape.size()); ++d)
      ((key->mask >> d & 1) ? k.k.inner : k.k.outer).push_back(key->shape[d]);
    k.k.row = true;
  } else {
    k.pointwise_shape = Dims(n.shape());
    k.k.outer = Dims(n.shape());
  }
  k.k.name = "loom_k" + std::to_string(kernels_.size());
  add_root(k, i);  // a fresh kernel accepts any root (CannotJoin cannot happen)
  producer_step_[i] = k.step;
  steps_.push_back({Step::RunKernel, static_cast<int32_t>(kernels_.size())});
  kernels_.push_back(std::move(k));
}

// How a library step reads value i: stored, or as a view of a stored value. A view of a value
// that was not stored restarts partitioning with the value stored; a view that is neither affine
// over a strided stored value nor over a dense one restarts it with the view itself stored.
Operand Partitioner::operand(int32_t i) const {
  if (materialized_[i] || is_scalar_leaf(node(i))) return {i, std::nullopt};
  AffineMap m = AffineMap::identity(node(i).ndim());
  int32_t at = i;
  while (!materialized_[at]) {
    const Node& n = node(at);
    if (cls(n) != OpClass::View) throw NeedsMaterialization{at};
    int32_t in = t_.inputs[at][0];
    Layout rel = view_layout(n);
    auto inner = through_view(m, rel, node(in).shape());
    if (!inner) {
      // As in kernels (Partitioner::value): a view of a dense stored value is read in place;
      // a view of a computed value stores that value, dense; only a strided one is copied.
      int32_t src = row_major_source(in);
      if (!materialized_[src]) throw NeedsMaterialization{src};
      if (!buffer_layout(src).is_contiguous()) throw NeedsMaterialization{i};
      Layout view{Dims(node(i).shape()), Dims{}, 0};
      dense_access(m, rel, view.strides, view.offset);
      return {src, std::move(view)};
    }
    m = std::move(*inner);
    at = in;
  }
  Layout view{Dims(node(i).shape()), Dims{}, 0};
  buffer_access(m, buffer_layout(at), view.strides, view.offset);
  return {at, std::move(view)};
}

// The value whose row-major elements are i's, in order: i, or the value under the unstored
// reshapes (views whose layout is contiguous over their input) that i is made of. A view over i
// is a view over it with the same element offsets.
int32_t Partitioner::row_major_source(int32_t i) const {
  while (!materialized_[i] && cls(node(i)) == OpClass::View) {
    Layout rel = view_layout(node(i));
    if (rel.offset != 0 || !rel.is_contiguous()) break;
    i = t_.inputs[i][0];
  }
  return i;
}

// A stored view of a strided buffer that no affine index map expresses: the View op copies it.
bool Partitioner::view_needs_copy(int32_t i) const {
  const Node& n = node(i);
  if (cls(n) != OpClass::View) return false;
  int32_t in = t_.inputs[i][0];
  if (!materialized_[in] || buffer_layout(in).is_contiguous()) return false;
  return !through_view(AffineMap::identity(n.ndim()), view_layout(n), node(in).shape());
}

Program Partitioner::run() {
  producer_step_.assign(t_.nodes.size(), -1);
  for (size_t i = 0; i < t_.nodes.size(); ++i) {
    const Node& n = node(static_cast<int32_t>(i));
    if (is_leaf(n) || !materialized_[i]) continue;
    if (is_library_op(n) || view_needs_copy(static_cast<int32_t>(i))) {
      producer_step_[i] = static_cast<int32_t>(steps_.size());
      Step step{Step::RunOp, -1, static_cast<int32_t>(i)};
      for (int32_t in : t_.inputs[i]) step.operands.push_back(operand(in));
      steps_.push_back(std::move(step));
      continue;
    }
    place(static_cast<int32_t>(i));
  }
  Program p;
  for (KernelState& k : kernels_) {
    k.k.exprs = k.b.exprs();
    p.kernels.push_back(std::move(k.k));
  }
  p.steps = std::move(steps_);
  return p;
}

// What recomputing an op costs in the rule of initial_materialization, in simple arithmetic ops.
// erf and erfc are polynomials of about 20 multiply-adds (the CPU prelude's loom_erff, libm's
// erfcf): a value holding one is stored once two kernels would evaluate it (exact GELU's Phi(x),
// read by its forward and its derivative). exp and the other math functions count as one: their
// values are mostly reused inside one row kernel (softmax's exp, kept across the row's passes),
// where storing them would only add traffic.
// The special functions (lazy/special_math.h) are series of tens to hundreds of operations.
int64_t recompute_cost(OpId op) {
  switch (op) {
    case OpId::Erf:
    case OpId::Erfc: return 16;
    case OpId::I0:
    case OpId::I1:
    case OpId::K0:
    case OpId::K1:
    case OpId::I0e:
    case OpId::I1e:
    case OpId::K0e:
    case OpId::K1e:
    case OpId::Erfcx:
    case OpId::Zeta: return 128;
    default: return 1;
  }
}

// Values that must be stored: outputs, reductions, what library ops read, and (with fusion)
// expensive values read by several consumers, and values whose expression would make a kernel
// too long (kMaxInlinedOps); without fusion, every op's result.
std::vector<bool> initial_materialization(const Trace& t, const PartitionOptions& opt) {
  size_t n = t.nodes.size();
  std::vector<bool> m(n, false);
  std::vector<int32_t> uses(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (int32_t in : t.inputs[i]) ++uses[in];
  for (const Trace::Output& o : t.outputs) m[o.node] = true;
  for (size_t i = 0; i < n; ++i) {
    const Node& node = *t.nodes[i];
    OpClass c = cls(node);
    if (node.op() == OpId::Input) m[i] = true;
    if (c == OpClass::Reduction) m[i] = true;
    if (is_library_op(node)) {
      m[i] = true;
      // Views are read in place where they can be (Partitioner::operand).
      for (int32_t in : t.inputs[i])
        if (!is_scalar_leaf(*t.nodes[in]) && cls(*t.nodes[in]) != OpClass::View) m[in] = true;
    }
    if (!opt.fuse && (c == OpClass::Elementwise || node.op() == OpId::Full)) m[i] = true;
  }
  if (opt.fuse) {
    // How expensive each value is to recompute, in one pass in trace order (inputs first),
    // counted once per path (a value read twice counts twice): the elementwise ops inlined into
    // it, and the full-size loads of stored values (a stored value at least half the size of the
    // reader: a broadcast bias or a row statistic stays in cache and does not count). A value
    // read by several consumers is stored when recomputing it in each costs more than a store
    // and a load each: 16 ops (recompute_cost: an erf is 16), or 3 full-size loads (gpt's
    // residual stream, a sum of matmul outputs, embeddings and biases, was recomputed from 13
    // loads in each layer norm kernel).
    std::vector<int64_t> cost(n, 0), loads(n, 0);
    for (size_t i = 0; i < n; ++i) {
      const Node& node = *t.nodes[i];
      if (is_leaf(node)) continue;
      int64_t c = cls(node) == OpClass::View ? 0 : recompute_cost(node.op()), l = 0;
      int64_t size = numel_of(node.shape());
      for (int32_t in : t.inputs[i]) {
        if (!m[in]) c += cost[in], l += loads[in];
        else if (!is_scalar_leaf(*t.nodes[in]) && 2 * numel_of(t.nodes[in]->shape()) >= size) l += 1;
      }
      cost[i] = std::min<int64_t>(c, kMaxInlinedOps);
      loads[i] = std::min<int64_t>(l, kMaxInlinedOps);
      if (m[i] || cls(node) != OpClass::Elementwise) continue;
      if ((uses[i] >= 2 && (cost[i] >= 16 || loads[i] >= kMaxRecomputedLoads)) || cost[i] >= kMaxInlinedOps)
        m[i] = true;
    }
  }
  return m;
}

}  // namespace

Program partition(const Trace& trace, const PartitionOptions& options) {
  std::vector<bool> materialized = initial_materialization(trace, options);
  for (size_t attempt = 0; attempt <= trace.nodes.size(); ++attempt) {
    try {
      Program p = Partitioner(trace, options, materialized).run();
      // Buffers for every stored value.
      p.buffer_of.assign(trace.nodes.size(), -1);
      for (size_t i = 0; i < trace.nodes.size(); ++i) {
        const Node& n = *trace.nodes[i];
        if (!materialized[i] || is_scalar_leaf(n)) continue;
        Buffer b{static_cast<int32_t>(i), n.op() == OpId::Input ? BufferKind::Input : BufferKind::Intermediate,
                 n.op() == OpId::Input ? n.array().layout : Layout::contiguous(n.shape()), n.dtype()};
        b.layout.offset = 0;
        p.buffer_of[i] = static_cast<int32_t>(p.buffers.size());
        p.buffers.push_back(std::move(b));
      }
      return p;
    } catch (const NeedsMaterialization& need) {
      LOOM_CHECK(!materialized[need.value], Runtime, "internal: partition did not converge");
      materialized[need.value] = true;
    }
  }
  LOOM_FAIL(Runtime, "internal: partition did not converge");
}

std::string describe(const Program& p, const Trace& t) {
  std::ostringstream out;
  for (const Step& s : p.steps) {
    if (s.kind == Step::RunOp) {
      out << "op " << op_name(t.nodes[s.node]->op()) << " -> %" << s.node << "\n";
      continue;
    }
    if (s.kind == Step::CopyToDestination) {
      out << "copy %" << s.node << " -> output " << s.output << "\n";
      continue;
    }
    const Kernel& k = p.kernels[s.kernel];
    out << "kernel " << k.name << (k.row ? " (row)" : "") << (k.split_block ? " (split)" : "") << " outer "
        << format_dims(k.outer);
    if (k.row) out << " inner " << format_dims(k.inner);
    out << ": " << k.exprs.size() << " exprs; stores";
    for (const Store& st : k.stores) out << " %" << st.access.value;
    out << "; loads";
    for (const Load& l : k.loads) out << " %" << l.access.value;
    out << "\n";
  }
  return out.str();
}

}  // namespace loom::fusion
