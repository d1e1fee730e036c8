#include "fusion/render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "fusion/targets.h"
#include "rtc/disk_cache.h"
#include "runtime/error.h"

namespace loom::fusion {
namespace {

std::string literal(double v, DType type) {
  char buf[64];
  switch (type) {
    case DType::Bool: return v != 0 ? "true" : "false";
    case DType::Float32:
    case DType::Float64: {
      const char* suffix = type == DType::Float32 ? "f" : "";
      if (std::isnan(v)) return type == DType::Float32 ? "(loom_inff() - loom_inff())" : "(loom_inf() - loom_inf())";
      if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + (type == DType::Float32 ? "loom_inff()" : "loom_inf()");
      std::snprintf(buf, sizeof buf, "%.17g", v);
      std::string s = buf;
      if (s.find_first_of(".e") == std::string::npos) s += ".0";
      return "(" + s + suffix + ")";
    }
    default:
      std::snprintf(buf, sizeof buf, "((%s)%lldLL)", compute_ctype(type), static_cast<long long>(v));
      return buf;
  }
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

// The initial accumulator of a reduction, in C.
std::string init_value(ReduceKind kind, DType type) {
  bool max = kind == ReduceKind::Max || kind == ReduceKind::ArgMax;
  switch (kind) {
    case ReduceKind::Sum: return "0";
    case ReduceKind::Prod: return "1";
    default: break;
  }
  switch (type) {
    case DType::Float32: return max ? "-loom_inff()" : "loom_inff()";
    case DType::Float64: return max ? "-loom_inf()" : "loom_inf()";
    case DType::Bool: return max ? "false" : "true";
    case DType::UInt8: return max ? "(u8)0" : "(u8)255";
    case DType::Int8: return max ? "(i8)(-128)" : "(i8)127";
    case DType::Int16: return max ? "(i16)(-32768)" : "(i16)32767";
    case DType::Int32: return max ? "(int)(-2147483647 - 1)" : "(int)2147483647";
    default: return max ? "(i64)(-9223372036854775807LL - 1)" : "(i64)9223372036854775807LL";
  }
}

class KernelWriter {
 public:
  // Writes k as a function named `name`.
  KernelWriter(const Kernel& k, std::string name, const TargetTable& t, std::ostream& out)
      : k_(k), name_(std::move(name)), t_(t), out_(out) {}

  std::vector<int64_t> write() {
    declare();
    if (k_.split_block > 0) t_.kind == TargetKind::Cpu ? split_cpu() : split_cuda();
    else if (!k_.row) pointwise();
    else if (reduces_columns(k_)) t_.kind == TargetKind::Cpu ? columns_cpu() : columns_cuda();
    else if (t_.kind == TargetKind::Cpu) row_cpu();
    else row_cuda();
    out_ << "}\n\n";
    return ints_;
  }

  // A split reduction's second pass (program.h, Kernel::split_block), as a function of the same
  // ABI and ip array as its first; its CPU form runs once, with lo = 0, hi = 1.
  void write_combine() {
    declare();
    t_.kind == TargetKind::Cpu ? combine_cpu() : combine_cuda();
    out_ << "}\n\n";
  }

  Split split() const { return split_; }

 private:
  // An integer parameter read once into a local (a value the loops index with must be visibly
  // loop-invariant for the compiler to vectorize them).
  std::string param(int64_t v) {
    std::string name = "q" + std::to_string(slot(v));
    out_ << "  const i64 " << name << " = ip[" << ints_.size() - 1 << "];\n";
    return name;
  }

  int slot(int64_t v) {
    ints_.push_back(v);
    return static_cast<int>(ints_.size()) - 1;
  }
  int64_t domain_rank() const { return static_cast<int64_t>(k_.outer.size() + k_.inner.size()); }
  Dims domain() const {
    Dims d = k_.outer;
    for (int64_t s : k_.inner) d.push_back(s);
    return d;
  }
  int64_t domain_size(int64_t d) const {
    auto o = static_cast<int64_t>(k_.outer.size());
    return d < o ? k_.outer[d] : k_.inner[d - o];
  }

  void declare() {
    out_ << t_.kernel_decl << " " << name_ << "(const i64* ip, const i64* sp, void* const* bufs"
         << (t_.kind == TargetKind::Cpu ? ", i64 lo, i64 hi" : "") << ") {\n";
    // Buffers are distinct (__restrict__) except an in-place update's source and destination.
    auto restrict = [](bool in_place) { return in_place ? "* " : "* __restrict__ "; };
    for (size_t j = 0; j < k_.loads.size(); ++j)
      out_ << "  const " << storage_ctype(k_.loads[j].storage) << restrict(k_.loads[j].in_place) << "L" << j
           << " = (const " << storage_ctype(k_.loads[j].storage) << "*)bufs[" << j << "];\n";
    for (size_t j = 0; j < k_.stores.size(); ++j)
      out_ << "  " << storage_ctype(k_.stores[j].storage) << restrict(k_.stores[j].in_place) << "S" << j << " = ("
           << storage_ctype(k_.stores[j].storage) << "*)bufs[" << k_.loads.size() + j << "];\n";
    for (int64_t d = 0; d < domain_rank(); ++d) out_ << "  const i64 n" << d << " = ip[" << slot(domain_size(d)) << "];\n";
    // Offsets and strides of every access. Zero strides (broadcasts), zero offsets and unit
    // strides are written into the source, so contiguous loops vectorize; the other values are
    // parameters, so one module serves every size with the same structure.
    auto declare_access = [&](const Access& a, std::string& index) {
      if (a.linear && !k_.row) {
        index = "i";
        return;
      }
      index.clear();
      auto term = [&](const std::string& t) { index += (index.empty() ? "" : " + ") + t; };
      if (a.offset != 0) term(param(a.offset));
      for (size_t d = 0; d < a.strides.size(); ++d) {
        if (a.strides[d] == 0) continue;
        std::string x = "x" + std::to_string(d);
        term(a.strides[d] == 1 ? x : x + " * " + param(a.strides[d]));
      }
      if (index.empty()) index = "0";
    };
    bool all_linear = !k_.row;
    for (const Load& l : k_.loads) all_linear = all_linear && l.access.linear;
    for (const Store& s : k_.stores) all_linear = all_linear && (s.access.linear || second_pass(s));
    all_linear_ = all_linear;
    for (const Load& l : k_.loads) {
      std::string index;
      Access a = l.access;
      if (!all_linear) a.linear = false;
      declare_access(a, index);
      load_index_.push_back(index);
    }
    for (const Store& s : k_.stores) {
      std::string index;
      Access a = s.access;
      if (!all_linear) a.linear = false;
      declare_access(a, index);
      store_index_.push_back(index);
    }
    // Expressions of parameters and literals alone are computed once, before the loops. One pass:
    // an expression's operands come before it.
    std::vector<bool> invariant(k_.exprs.size());
    for (size_t e = 0; e < k_.exprs.size(); ++e) {
      const Expr& x = k_.exprs[e];
      bool inv = x.op != ExprOp::Load && x.op != ExprOp::Reduced;
      for (int32_t o : {x.a, x.b, x.c}) inv = inv && (o < 0 || invariant[static_cast<size_t>(o)]);
      invariant[e] = inv;
      if (inv) emit(static_cast<int32_t>(e), invariant_, "  ");
    }
  }

  std::string var(int32_t e) const { return "v" + std::to_string(e); }

  // Integer +, -, * and negation wrap modulo 2^bits in PyTorch (and in loom's eager kernels),
  // but signed overflow is undefined in C++ and GCC optimizes on it: fused into one kernel, an
  // int32 `(x + 1) > x` folded to true where x + 1 wraps to INT_MIN. So integer arithmetic is
  // written in the unsigned type of its width (defined to wrap) and converted back (modulo 2^bits
  // in GCC and NVCC). u8 / i8 / i16 go through u32: their usual promotion to int overflows too
  // (u16 * u16). Same-width conversions cost nothing and vectorize like the signed form.
  static const char* wrapping_type(DType t) {
    switch (t) {
      case DType::UInt8:
      case DType::Int8:
      case DType::Int16:
      case DType::Int32: return "u32";
      case DType::Int64: return "u64";
      default: return nullptr;
    }
  }
  std::string arith(const Expr& e, const char* op) const {
    std::string T = compute_ctype(e.type);
    if (const char* U = wrapping_type(e.type))
      return "(" + T + ")((" + U + ")" + var(e.a) + op + "(" + U + ")" + var(e.b) + ")";
    return "(" + T + ")(" + var(e.a) + op + var(e.b) + ")";
  }

  std::string code(const Expr& e) const {
    const char* T = compute_ctype(e.type);
    switch (e.op) {
      case ExprOp::Literal: return literal(e.literal, e.type);
      case ExprOp::Param: {
        std::string raw = "sp[" + std::to_string(e.index) + "]";
        if (e.type == DType::Float64 || e.type == DType::Float32) return "(" + std::string(T) + ")loom_sp_double(" + raw + ")";
        if (e.type == DType::Bool) return "(" + raw + " != 0)";
        return "(" + std::string(T) + ")" + raw;
      }
      case ExprOp::Load: {
        const Load& l = k_.loads[e.index];
        std::string at = "L" + std::to_string(e.index) + "[" + load_index_[e.index] + "]";
        switch (l.storage) {
          case DType::Float16: return "loom_h2f(" + at + ")";
          case DType::BFloat16: return "loom_bf2f(" + at + ")";
          case DType::Bool: return "(" + at + " != 0)";
          default: return at;
        }
      }
      case ExprOp::Reduced: return "r" + std::to_string(e.index);
      case ExprOp::Cast:
        if (e.type == DType::Bool) return "(" + var(e.a) + " != 0)";
        // A float16 / bfloat16 value is a float rounded to its type (fusion/partition.cpp).
        if (e.type == DType::BFloat16) return "loom_bf2f(loom_f2bf((float)" + var(e.a) + "))";
        if (e.type == DType::Float16) return "loom_h2f(loom_f2h((float)" + var(e.a) + "))";
        // A bool as a number, written as a select: GCC 12 finds no vector type for a conversion
        // from bool and leaves the whole loop scalar (cross-entropy's one-hot made its backward
        // kernel 10x slower); a select of two constants vectorizes as a masked blend.
        if (k_.exprs[e.a].type == DType::Bool)
          return "(" + var(e.a) + " ? (" + std::string(T) + ")1 : (" + std::string(T) + ")0)";
        return "(" + std::string(T) + ")" + var(e.a);
      case ExprOp::Neg:
        if (const char* U = wrapping_type(e.type)) return "(" + std::string(T) + ")(-(" + U + ")" + var(e.a) + ")";
        return "(" + std::string(T) + ")(-" + var(e.a) + ")";
      case ExprOp::Not: return "(!" + var(e.a) + ")";
      case ExprOp::Add: return arith(e, " + ");
      case ExprOp::Sub: return arith(e, " - ");
      case ExprOp::Mul: return arith(e, " * ");
      case ExprOp::Div: return "(" + std::string(T) + ")(" + var(e.a) + " / " + var(e.b) + ")";
      case ExprOp::Lt: return "(" + var(e.a) + " < " + var(e.b) + ")";
      case ExprOp::Le: return "(" + var(e.a) + " <= " + var(e.b) + ")";
      case ExprOp::Gt: return "(" + var(e.a) + " > " + var(e.b) + ")";
      case ExprOp::Ge: return "(" + var(e.a) + " >= " + var(e.b) + ")";
      case ExprOp::Eq: return "(" + var(e.a) + " == " + var(e.b) + ")";
      case ExprOp::Ne: return "(" + var(e.a) + " != " + var(e.b) + ")";
      case ExprOp::And: return "(" + var(e.a) + " && " + var(e.b) + ")";
      case ExprOp::Or: return "(" + var(e.a) + " || " + var(e.b) + ")";
      case ExprOp::BitAnd: return "(" + std::string(T) + ")(" + var(e.a) + " & " + var(e.b) + ")";
      case ExprOp::BitOr: return "(" + std::string(T) + ")(" + var(e.a) + " | " + var(e.b) + ")";
      case ExprOp::BitXor: return "(" + std::string(T) + ")(" + var(e.a) + " ^ " + var(e.b) + ")";
      case ExprOp::BitNot: return "(" + std::string(T) + ")(~" + var(e.a) + ")";
      case ExprOp::Select: return "(" + var(e.a) + " ? " + var(e.b) + " : " + var(e.c) + ")";
      case ExprOp::Call: {
        DType operand = k_.exprs[e.a].type;
        std::string c = t_.call(e.fn, operand);
        c = replace_all(c, "%a", var(e.a));
        if (e.b >= 0) c = replace_all(c, "%b", var(e.b));
        return c;
      }
    }
    LOOM_FAIL(Runtime, "internal: unknown expression");
  }

  // Calls visit(x) for e and every expression e depends on that `skip` does not reject, operands
  // before their users, each once (it marks them in `skip`), in the order of a depth-first walk
  // over operands a, b, c; a value readable where it is kept (readable_) is a leaf. A loop, not a recursion: a kernel's expressions may form a chain
  // thousands deep (DESIGN decision 14).
  template <typename Visit>
  void post_order(int32_t e, std::set<int32_t>& skip, Visit&& visit) const {
    if (skip.count(e)) return;
    std::vector<std::pair<int32_t, int>> stack{{e, 0}};  // (expression, next operand)
    skip.insert(e);
    while (!stack.empty()) {
      auto& [x, next] = stack.back();
      const Expr& ex = k_.exprs[x];
      if (next == 0 && readable_.count(x)) next = 3;  // read back from where it is kept: no operands
      if (next < 3) {
        int32_t o = next == 0 ? ex.a : next == 1 ? ex.b : ex.c;
        ++next;
        if (o >= 0 && skip.insert(o).second) stack.push_back({o, 0});
        continue;
      }
      visit(x);
      stack.pop_back();
    }
  }

  // Writes e (and what it needs) unless already written in this scope.
  void emit(int32_t e, std::set<int32_t>& done, const std::string& indent) {
    post_order(e, done, [&](int32_t x) {
      out_ << indent << "const " << compute_ctype(k_.exprs[x].type) << " " << var(x) << " = "
           << (readable_.count(x) ? read_kept(x) : code(k_.exprs[x])) << ";\n";
    });
  }

  // Every expression e depends on, e included.
  void reachable(int32_t e, std::set<int32_t>& out) const {
    post_order(e, out, [](int32_t) {});
  }

  std::string store_code(size_t j, int32_t e) const { return write_code(store_at(j), k_.stores[j].storage, e); }
  std::string store_at(size_t j) const { return "S" + std::to_string(j) + "[" + store_index_[j] + "]"; }
  std::string write_code(const std::string& at, DType storage, int32_t e) const {
    switch (storage) {
      case DType::Float16: return at + " = loom_f2h(" + var(e) + ");";
      case DType::BFloat16: return at + " = loom_f2bf(" + var(e) + ");";
      case DType::Bool: return at + " = (u8)(" + var(e) + " ? 1 : 0);";
      default: return at + " = " + var(e) + ";";
    }
  }

  // One element of a pointwise kernel: every value first, then the stores, so that all reads of
  // the element precede its writes (an in-place update may read the element it writes).
  void body(const std::string& indent) { body(indent, invariant_); }
  void body(const std::string& indent, std::set<int32_t> done) {
    for (const Store& s : k_.stores) emit(s.expr, done, indent);
    for (size_t j = 0; j < k_.stores.size(); ++j) out_ << indent << store_code(j, k_.stores[j].expr) << "\n";
  }

  void pointwise() {
    int64_t rank = domain_rank();
    if (t_.kind == TargetKind::Cpu) {
      // Iterations are independent (every store is to a distinct element), which the pragma
      // tells the compiler so that it vectorizes without proving it.
      // The outermost loop runs over [lo, hi): the executor splits it across threads.
      if (all_linear_) {
        out_ << "  #pragma omp simd\n  for (i64 i = lo; i < hi; ++i) {\n";
        split_ = {numel_of(domain()), 1, 64};
        body("    ");
        out_ << "  }\n";
        return;
      }
      std::string indent = "  ";
      if (rank > 0) split_ = {domain_size(0), numel_of(domain()) / std::max<int64_t>(domain_size(0), 1)};
      // Each value is computed in the outermost loop it varies in: a broadcast operand (a row's
      // mean, a log of a row's sum, a power of a row's rstd) once per row, not once per element.
      // Left to the compiler, such work stays in the vector loop (a scalar load there can even
      // keep GCC from vectorizing it at all) and its math calls run per element.
      std::vector<int64_t> level = loop_levels();
      std::set<int32_t> done = invariant_, need = invariant_;
      for (const Store& s : k_.stores) reachable(s.expr, need);
      for (int64_t d = 0; d < rank; ++d) {
        if (d == rank - 1) out_ << indent << "#pragma omp simd\n";
        out_ << indent << "for (i64 x" << d << " = " << (d == 0 ? "lo" : "0") << "; x" << d << " < "
             << (d == 0 ? "hi" : "n" + std::to_string(d)) << "; ++x" << d << ") {\n";
        indent += "  ";
        if (d == rank - 1) break;
        for (size_t e = 0; e < k_.exprs.size(); ++e)
          if (level[e] == d && need.count(static_cast<int32_t>(e)) && !invariant_.count(static_cast<int32_t>(e)))
            emit(static_cast<int32_t>(e), done, indent);
      }
      body(indent, done);
      for (int64_t d = rank; d-- > 0;) {
        indent.resize(indent.size() - 2);
        out_ << indent << "}\n";
      }
      return;
    }
    out_ << "  const i64 n = " << numel_expr() << ";\n";
    out_ << "  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {\n";
    if (!all_linear_) unravel("i", 0, rank, "    ");
    body("    ");
    out_ << "  }\n";
  }

  // Per expression: the outermost loop of a pointwise kernel's nest it can be computed in (the
  // innermost domain dim it varies along; 0 for a value that varies along none). An in-place
  // load stays in the innermost loop, beside the store that overwrites its element.
  std::vector<int64_t> loop_levels() const {
    std::vector<int64_t> level(k_.exprs.size(), 0);
    int64_t innermost = domain_rank() - 1;
    for (size_t e = 0; e < k_.exprs.size(); ++e) {
      const Expr& x = k_.exprs[e];
      if (x.op == ExprOp::Load) {
        const Load& l = k_.loads[x.index];
        if (l.in_place) level[e] = innermost;
        for (size_t d = 0; d < l.access.strides.size(); ++d)
          if (l.access.strides[d] != 0) level[e] = std::max(level[e], static_cast<int64_t>(d));
        continue;
      }
      for (int32_t o : {x.a, x.b, x.c})
        if (o >= 0) level[e] = std::max(level[e], level[static_cast<size_t>(o)]);
    }
    return level;
  }

  std::string numel_expr() const {
    std::string n = "(i64)1";
    for (int64_t d = 0; d < domain_rank(); ++d) n += " * n" + std::to_string(d);
    return n;
  }

  // x_first .. x_{last-1} from a row-major linear index.
  void unravel(const std::string& linear, int64_t first, int64_t last, const std::string& indent) {
    out_ << indent << "i64 rest_" << linear << " = " << linear << ";\n";
    for (int64_t d = last; d-- > first;) {
      out_ << indent << "const i64 x" << d << " = rest_" << linear << " % n" << d << ";\n";
      if (d > first) out_ << indent << "rest_" << linear << " /= n" << d << ";\n";
    }
  }

  std::string acc_type(const Stage& s) const {
    bool float_acc = s.input_type == DType::Float32 && (s.kind == ReduceKind::Sum || s.kind == ReduceKind::Prod);
    return float_acc ? t_.float_acc : compute_ctype(s.input_type);
  }

  std::string combine(const Stage& s, const std::string& acc, const std::string& v) const {
    switch (s.kind) {
      case ReduceKind::Sum: return acc + " = " + acc + " + (" + acc_type(s) + ")" + v + ";";
      case ReduceKind::Prod: return acc + " = " + acc + " * (" + acc_type(s) + ")" + v + ";";
      case ReduceKind::Max: return acc + " = loom_maximum(" + acc + ", " + v + ");";
      case ReduceKind::Min: return acc + " = loom_minimum(" + acc + ", " + v + ");";
      default: break;
    }
    return "";
  }

  // The outer expressions a stage needs, written before its loop; returns the inner ones.
  std::set<int32_t> prepare_stage(const Stage& s, std::set<int32_t>& outer_done, const std::string& indent) {
    std::set<int32_t> need;
    reachable(s.input, need);
    for (int32_t e : need)
      if (k_.exprs[e].space == Space::Outer) emit(e, outer_done, indent);
    return need;
  }

  // `blocked`: a C++ float32 sum in blocks (blocked_sum), accumulating into the block's f<index>.
  void stage_inner(const Stage& s, size_t index, const std::set<int32_t>& outer_done, const std::string& indent,
                   const std::string& position, bool blocked = false) {
    std::set<int32_t> done = outer_done;
    emit(s.input, done, indent);
    std::string a = "a" + std::to_string(index);
    if (s.kind == ReduceKind::ArgMax || s.kind == ReduceKind::ArgMin) {
      // The first extreme wins; NaN counts as the extreme, as in PyTorch.
      std::string v = var(s.input), op = s.kind == ReduceKind::ArgMax ? " > " : " < ";
      out_ << indent << "if (!(" << a << "i >= 0 && loom_isnan(" << a << "v)) && (" << a << "i < 0 || loom_isnan(" << v
           << ") || " << v << op << a << "v)) { " << a << "v = " << v << "; " << a << "i = " << position << "; }\n";
      keep(index, indent);
      return;
    }
    if (blocked) out_ << indent << "f" << index << " = f" << index << " + " << var(s.input) << ";\n";
    else out_ << indent << combine(s, a, var(s.input)) << "\n";
    keep(index, indent);
  }

  void declare_acc(const Stage& s, size_t index, const std::string& indent) {
    std::string a = "a" + std::to_string(index);
    if (s.kind == ReduceKind::ArgMax || s.kind == ReduceKind::ArgMin) {
      out_ << indent << compute_ctype(s.input_type) << " " << a << "v = " << init_value(s.kind, s.input_type) << ";\n";
      out_ << indent << "i64 " << a << "i = -1;\n";
    } else {
      out_ << indent << acc_type(s) << " " << a << " = " << init_value(s.kind, s.input_type) << ";\n";
    }
  }

  std::string result(const Stage& s, size_t index) const {
    std::string a = "a" + std::to_string(index);
    if (s.kind == ReduceKind::ArgMax || s.kind == ReduceKind::ArgMin) return "const i64 r" + std::to_string(index) + " = " + a + "i;";
    return "const " + std::string(compute_ctype(s.input_type)) + " r" + std::to_string(index) + " = (" +
           compute_ctype(s.input_type) + ")" + a + ";";
  }

  // Whether a C++ row stage sums float32 in blocks (cpu_stage): its double accumulator is the sum
  // of float sums over blocks of kSumBlock elements of the innermost dim. Converting every element
  // to double took two conversions and two double adds per vector of 16 floats, a quarter of BENCH
  // softmax's row kernel. A block's float sum is a sum per vector lane over at most 256 / lanes
  // elements (16 with AVX-512), then the lanes': about 20 roundings, where one float accumulator
  // over a row of n elements rounds n / lanes times.
  static constexpr int64_t kSumBlock = 256;
  bool blocked_sum(const Stage& st) const {
    return t_.kind == TargetKind::Cpu && st.kind == ReduceKind::Sum && st.input_type == DType::Float32 &&
           acc_type(st) == std::string("double");
  }

  // One reduction stage over the inner dims of the current row. Sums, products, maxima and minima
  // are declared to the compiler as reductions (#pragma omp simd, -fopenmp-simd), which lets it
  // reorder them into vector lanes; float maxima and minima carry NaN in a separate flag so that
  // the reduction is a plain one. Arg stages keep the first extreme, so they stay sequential.
  // `simd`: mark the loop for the vectorizer (C++); CUDA's sequential per-thread loops go without.
  void cpu_stage(const Stage& st, size_t s, std::set<int32_t>& outer_done, const std::string& indent,
                 bool simd = true) {
    prepare_stage(st, outer_done, indent);
    declare_acc(st, s, indent);
    auto outer = static_cast<int64_t>(k_.outer.size());
    int64_t rank = domain_rank();
    std::string a = "a" + std::to_string(s), kk = "kk" + std::to_string(s);
    bool arg = st.kind == ReduceKind::ArgMax || st.kind == ReduceKind::ArgMin;
    bool extreme = st.kind == ReduceKind::Max || st.kind == ReduceKind::Min;
    bool floating = is_floating(st.input_type);
    std::string pragma;
    if (st.kind == ReduceKind::Sum) pragma = "reduction(+:" + a + ")";
    if (st.kind == ReduceKind::Prod) pragma = "reduction(*:" + a + ")";
    if (extreme && st.input_type != DType::Bool) {
      pragma = std::string("reduction(") + (st.kind == ReduceKind::Max ? "max:" : "min:") + a + ")";
      if (floating) {
        out_ << indent << "int " << a << "n = 0;\n";
        pragma += " reduction(|:" + a + "n)";
      }
    }
    if (arg) out_ << indent << "i64 " << kk << " = 0;\n";
    // A stage with no inner dims (a 0-d input's reduction) has no innermost loop to block, so it
    // accumulates into a<s> directly.
    bool blocked = simd && blocked_sum(st) && rank > outer;
    std::string f = "f" + std::to_string(s);
    std::string inner = indent;
    for (int64_t d = outer; d < rank; ++d) {
      std::string x = "x" + std::to_string(d), n = "n" + std::to_string(d), first = "0", end = n;
      if (d == rank - 1 && blocked) {
        std::string xb = "xb" + std::to_string(s), B = std::to_string(kSumBlock);
        out_ << inner << "for (i64 " << xb << " = 0; " << xb << " < " << n << "; " << xb << " += " << B << ") {\n";
        inner += "  ";
        out_ << inner << "const i64 xe" << s << " = " << n << " - " << xb << " < " << B << " ? " << n << " : " << xb
             << " + " << B << ";\n";
        out_ << inner << "float " << f << " = 0;\n";
        pragma = "reduction(+:" + f + ")";
        first = xb;
        end = "xe" + std::to_string(s);
      }
      if (d == rank - 1 && !pragma.empty() && simd) out_ << inner << "#pragma omp simd " << pragma << "\n";
      out_ << inner << "for (i64 " << x << " = " << first << "; " << x << " < " << end << "; ++" << x << ") {\n";
      inner += "  ";
    }
    if (extreme && !pragma.empty()) {
      std::set<int32_t> done = outer_done;
      emit(st.input, done, inner);
      std::string v = var(st.input), op = st.kind == ReduceKind::Max ? " > " : " < ";
      out_ << inner << a << " = " << v << op << a << " ? " << v << " : " << a << ";\n";
      if (floating) out_ << inner << a << "n |= " << v << " != " << v << ";\n";
      keep(s, inner);
    } else {
      stage_inner(st, s, outer_done, inner, kk, blocked);
    }
    if (arg) out_ << inner << "++" << kk << ";\n";
    for (int64_t d = rank; d-- > outer;) {
      inner.resize(inner.size() - 2);
      out_ << inner << "}\n";
      if (d == rank - 1 && blocked) {
        out_ << inner << a << " = " << a << " + (double)" << f << ";\n";
        inner.resize(inner.size() - 2);
        out_ << inner << "}\n";
      }
    }
    if (extreme && floating)
      out_ << indent << "if (" << a << "n) " << a << " = "
           << literal(NAN, st.input_type == DType::Float64 ? DType::Float64 : DType::Float32) << ";\n";
    out_ << indent << result(st, s) << "\n";
    stage_written(s);
  }

  void row_cpu() {
    auto outer = static_cast<int64_t>(k_.outer.size());
    std::string indent = "  ";
    // Rows are independent: the executor splits the outermost kept dim across threads.
    if (outer > 0)
      split_ = {domain_size(0),
                numel_of(domain()) / std::max<int64_t>(domain_size(0), 1) * static_cast<int64_t>(k_.stages.size())};
    for (int64_t d = 0; d < outer; ++d) {
      out_ << indent << "for (i64 x" << d << " = " << (d == 0 ? "lo" : "0") << "; x" << d << " < "
           << (d == 0 ? "hi" : "n" + std::to_string(d)) << "; ++x" << d << ") {\n";
      indent += "  ";
    }
    plan_kept();
    std::set<int32_t> outer_done = invariant_;
    for (size_t s = 0; s < k_.stages.size(); ++s) cpu_stage(k_.stages[s], s, outer_done, indent);
    for (size_t j = 0; j < k_.stores.size(); ++j) {
      if (k_.stores[j].access.space == Space::Inner) continue;
      emit(k_.stores[j].expr, outer_done, indent);
      out_ << indent << store_code(j, k_.stores[j].expr) << "\n";
    }
    if (has_element_stores()) {
      // The element epilogue: one more pass over the row, which the stages just read (in cache).
      prepare_elements(outer_done, indent);
      std::string inner = indent;
      for (int64_t d = outer; d < domain_rank(); ++d) {
        if (d == domain_rank() - 1) out_ << inner << "#pragma omp simd\n";
        out_ << inner << "for (i64 x" << d << " = 0; x" << d << " < n" << d << "; ++x" << d << ") {\n";
        inner += "  ";
      }
      element_stores(outer_done, inner);
      for (int64_t d = domain_rank(); d-- > outer;) {
        inner.resize(inner.size() - 2);
        out_ << inner << "}\n";
      }
    }
    for (int64_t d = outer; d-- > 0;) {
      indent.resize(indent.size() - 2);
      out_ << indent << "}\n";
    }
  }

  // Whether a row kernel stores values over its rows' elements (an element epilogue: softmax's
  // exp(x - max) / sum), written after every stage of the row.
  bool has_element_stores() const {
    for (const Store& st : k_.stores)
      if (st.access.space == Space::Inner) return true;
    return false;
  }

  // The element epilogue's per-row values (a layer norm's rstd from the row's variance), written
  // once per row before its loop.
  void prepare_elements(std::set<int32_t>& outer_done, const std::string& indent) {
    std::set<int32_t> need;
    for (const Store& st : k_.stores)
      if (st.access.space == Space::Inner) reachable(st.expr, need);
    for (int32_t e : need)
      if (k_.exprs[e].space == Space::Outer) emit(e, outer_done, indent);
  }

  // The element epilogue's values and stores at one element of the row (x_d of every dim known).
  void element_stores(const std::set<int32_t>& outer_done, const std::string& indent) {
    std::set<int32_t> done = outer_done;
    for (const Store& st : k_.stores)
      if (st.access.space == Space::Inner) emit(st.expr, done, indent);
    for (size_t j = 0; j < k_.stores.size(); ++j)
      if (k_.stores[j].access.space == Space::Inner) out_ << indent << store_code(j, k_.stores[j].expr) << "\n";
  }

  // ---- costly values kept across the passes over a row ----
  //
  // A row kernel walks each row once per stage and once more for its element epilogue. A costly
  // value (a transcendental call, fusion/targets.h `costly`) that a later pass needs again is
  // written, in the first pass that computes it, into the element of a row-shaped store of its
  // dtype, and the later passes read it back instead of calling the function again: softmax's
  // exp(x - max) is computed in its sum's pass and read by the epilogue, which overwrites it
  // with exp / sum. The store is free to hold it: a row kernel's loads and stores never share
  // memory (they are __restrict__; graph/compiled.cpp donates no destination a row kernel also
  // reads), the store's index is one element per element of the row, and on both targets the
  // same thread walks the same elements in every pass (C++: the row is one thread's; CUDA: kk
  // from threadIdx.x in steps of blockDim.x), so each element's value is read back by the thread
  // that wrote it, before that thread writes the element's result. A value rounded to float16 /
  // bfloat16 (a Cast to it) is kept in a store of that dtype, which holds it exactly; a value
  // with no free store of its dtype is computed again in each pass.
  struct Kept {
    size_t stage;    // the stage whose pass writes it
    size_t store;    // the store whose element holds it
  };

  // Whether e is a value worth keeping: a costly call, or its rounding to float16 / bfloat16.
  bool keepable(int32_t e) const {
    const Expr& x = k_.exprs[static_cast<size_t>(e)];
    if (x.space != Space::Inner) return false;
    if (x.op == ExprOp::Cast && (x.type == DType::Float16 || x.type == DType::BFloat16)) return keepable(x.a);
    return x.op == ExprOp::Call && costly(x.fn);
  }

  // Whether the pass `pass` (a stage, or the epilogue at stages.size()) computes or reads e, with
  // the values kept by earlier passes read back (their operands not computed).
  bool pass_needs(size_t pass, int32_t e) {
    readable_.clear();
    for (const auto& [f, kept] : kept_)
      if (kept.stage < pass) readable_.insert(f);
    std::set<int32_t> need;
    if (pass < k_.stages.size()) reachable(k_.stages[pass].input, need);
    else
      for (const Store& st : k_.stores)
        if (st.access.space == Space::Inner) reachable(st.expr, need);
    readable_.clear();
    return need.count(e) > 0;
  }

  // A free store that can hold a value of type `type` at every element of the row.
  std::optional<size_t> free_store(DType type, const std::vector<bool>& taken) const {
    auto outer = k_.outer.size();
    for (size_t j = 0; j < k_.stores.size(); ++j) {
      const Store& st = k_.stores[j];
      if (taken[j] || st.access.space != Space::Inner || st.storage != type) continue;
      bool one_per_element = true;
      for (size_t d = 0; d < k_.inner.size(); ++d)
        one_per_element = one_per_element && (st.access.strides[outer + d] != 0 || k_.inner[d] == 1);
      if (one_per_element) return j;
    }
    return std::nullopt;
  }

  // Chooses the kept values. Users before their operands (descending index: an operand has a
  // lower one), so that a kept user spares keeping what it is computed from.
  void plan_kept() {
    size_t passes = k_.stages.size() + (has_element_stores() ? 1 : 0);
    if (passes < 2) return;
    std::vector<bool> taken(k_.stores.size());
    for (auto e = static_cast<int32_t>(k_.exprs.size()); e-- > 0;) {
      if (!keepable(e)) continue;
      std::vector<size_t> needing;
      for (size_t p = 0; p < passes && needing.size() < 2; ++p)
        if (pass_needs(p, e)) needing.push_back(p);
      if (needing.size() < 2 || needing[0] == k_.stages.size()) continue;
      std::optional<size_t> j = free_store(k_.exprs[static_cast<size_t>(e)].type, taken);
      if (!j) continue;
      taken[*j] = true;
      kept_[e] = {needing[0], *j};
    }
  }

  // In the pass of stage `stage`, once its values are computed: the kept values it computes
  // written where they are kept.
  void keep(size_t stage, const std::string& indent) {
    for (const auto& [e, kept] : kept_)
      if (kept.stage == stage) out_ << indent << write_code(store_at(kept.store), k_.stores[kept.store].storage, e) << "\n";
  }

  // After the pass of stage `stage`: what it kept is read back from then on.
  void stage_written(size_t stage) {
    for (const auto& [e, kept] : kept_)
      if (kept.stage == stage) readable_.insert(e);
  }

  std::string read_kept(int32_t e) const {
    const Kept& kept = kept_.at(e);
    std::string at = store_at(kept.store);
    switch (k_.stores[kept.store].storage) {
      case DType::Float16: return "loom_h2f(" + at + ")";
      case DType::BFloat16: return "loom_bf2f(" + at + ")";
      default: return at;
    }
  }

  // ---- column reductions (reduces_columns): rows side by side ----

  // C++: the last kept dim in blocks of kLanes columns; each stage is a pass over the reduced dims
  // whose innermost loop runs across the block, so it reads consecutive addresses and vectorizes.
  // Accumulators and stage results are arrays of one element per column of the block.
  static constexpr int kLanes = 64;

  // Inside a loop over the block's columns `c`: the column's kept index and the results of the
  // stages before `stages`.
  void lane_values(size_t stages, const std::string& indent) {
    out_ << indent << "const i64 x" << k_.outer.size() - 1 << " = xb + c;\n";
    for (size_t j = 0; j < stages; ++j) out_ << indent << result_type(k_.stages[j]) << " r" << j << " = rb" << j << "[c];\n";
  }

  std::string result_type(const Stage& s) const {
    bool arg = s.kind == ReduceKind::ArgMax || s.kind == ReduceKind::ArgMin;
    return std::string("const ") + (arg ? "i64" : compute_ctype(s.input_type));
  }

  void columns_stage(const Stage& st, size_t s, const std::string& indent) {
    auto outer = static_cast<int64_t>(k_.outer.size());
    int64_t rank = domain_rank();
    std::string a = "a" + std::to_string(s), L = std::to_string(kLanes);
    bool arg = st.kind == ReduceKind::ArgMax || st.kind == ReduceKind::ArgMin;
    bool extreme = st.kind == ReduceKind::Max || st.kind == ReduceKind::Min;
    bool flagged = extreme && is_floating(st.input_type);  // NaN carried in a flag, as in cpu_stage
    std::string T = compute_ctype(st.input_type), init = init_value(st.kind, st.input_type);
    if (arg) {
      out_ << indent << T << " " << a << "v[" << L << "]; i64 " << a << "i[" << L << "];\n";
      out_ << indent << "for (int c = 0; c < " << L << "; ++c) { " << a << "v[c] = " << init << "; " << a << "i[c] = -1; }\n";
      out_ << indent << "i64 kk" << s << " = 0;\n";
    } else {
      out_ << indent << acc_type(st) << " " << a << "[" << L << "];\n";
      out_ << indent << "for (int c = 0; c < " << L << "; ++c) " << a << "[c] = " << init << ";\n";
      if (flagged) out_ << indent << "int " << a << "n[" << L << "] = {0};\n";
    }
    std::string inner = indent;
    for (int64_t d = outer; d < rank; ++d) {
      out_ << inner << "for (i64 x" << d << " = 0; x" << d << " < n" << d << "; ++x" << d << ") {\n";
      inner += "  ";
    }
    // What is the same for every column (a per-row rstd) is computed once per step of the walk,
    // before the loop across the columns.
    std::set<int32_t> done = invariant_, need;
    reachable(st.input, need);
    std::vector<bool> same = same_for_all_columns();
    for (int32_t e : need)
      if (same[static_cast<size_t>(e)]) emit(e, done, inner);
    out_ << inner << "#pragma omp simd\n" << inner << "for (i64 c = 0; c < w; ++c) {\n";
    std::string lane = inner + "  ";
    lane_values(s, lane);
    emit(st.input, done, lane);
    std::string v = var(st.input);
    if (arg) {
      // The first extreme wins (the reduced dims are walked in order); NaN counts as the extreme.
      std::string op = st.kind == ReduceKind::ArgMax ? " > " : " < ", av = a + "v[c]", ai = a + "i[c]";
      out_ << lane << "if (!(" << ai << " >= 0 && loom_isnan(" << av << ")) && (" << ai << " < 0 || loom_isnan(" << v
           << ") || " << v << op << av << ")) { " << av << " = " << v << "; " << ai << " = kk" << s << "; }\n";
    } else if (flagged) {
      std::string op = st.kind == ReduceKind::Max ? " > " : " < ", acc = a + "[c]";
      out_ << lane << acc << " = " << v << op << acc << " ? " << v << " : " << acc << ";\n";
      out_ << lane << a << "n[c] |= " << v << " != " << v << ";\n";
    } else {
      out_ << lane << combine(st, a + "[c]", v) << "\n";
    }
    out_ << inner << "}\n";
    if (arg) out_ << inner << "++kk" << s << ";\n";
    for (int64_t d = rank; d-- > outer;) {
      inner.resize(inner.size() - 2);
      out_ << inner << "}\n";
    }
    std::string rb = "rb" + std::to_string(s);
    out_ << indent << (arg ? "i64" : T) << " " << rb << "[" << L << "];\n";
    out_ << indent << "for (i64 c = 0; c < w; ++c) " << rb << "[c] = ";
    if (arg) out_ << a << "i[c];\n";
    else if (flagged)
      out_ << a << "n[c] ? " << literal(NAN, st.input_type == DType::Float64 ? DType::Float64 : DType::Float32) << " : ("
           << T << ")" << a << "[c];\n";
    else out_ << "(" << T << ")" << a << "[c];\n";
  }

  // Per expression of a column reduction: whether it is one value for every column of the
  // walk (reads nothing that varies along the last kept dim, and no stage result).
  std::vector<bool> same_for_all_columns() const {
    size_t last_kept = k_.outer.size() - 1;
    std::vector<bool> same(k_.exprs.size(), true);
    for (size_t e = 0; e < k_.exprs.size(); ++e) {
      const Expr& x = k_.exprs[e];
      if (x.op == ExprOp::Load) same[e] = k_.loads[x.index].access.strides[last_kept] == 0;
      else if (x.op == ExprOp::Reduced) same[e] = false;
      else
        for (int32_t o : {x.a, x.b, x.c})
          if (o >= 0 && !same[static_cast<size_t>(o)]) same[e] = false;
    }
    return same;
  }

  void columns_cpu() {
    auto outer = static_cast<int64_t>(k_.outer.size());
    int64_t c = outer - 1;
    // Threads split the outermost kept dim; the column dim in whole vectors of floats.
    split_ = {domain_size(0),
              numel_of(domain()) / std::max<int64_t>(domain_size(0), 1) * static_cast<int64_t>(k_.stages.size()),
              c == 0 ? 16 : 1};
    std::string indent = "  ";
    for (int64_t d = 0; d < c; ++d) {
      out_ << indent << "for (i64 x" << d << " = " << (d == 0 ? "lo" : "0") << "; x" << d << " < "
           << (d == 0 ? "hi" : "n" + std::to_string(d)) << "; ++x" << d << ") {\n";
      indent += "  ";
    }
    std::string end = c == 0 ? "hi" : "n" + std::to_string(c), L = std::to_string(kLanes);
    out_ << indent << "for (i64 xb = " << (c == 0 ? "lo" : "0") << "; xb < " << end << "; xb += " << L << ") {\n";
    indent += "  ";
    out_ << indent << "const i64 w = " << end << " - xb < " << L << " ? " << end << " - xb : " << L << ";\n";
    for (size_t s = 0; s < k_.stages.size(); ++s) columns_stage(k_.stages[s], s, indent);
    out_ << indent << "#pragma omp simd\n" << indent << "for (i64 c = 0; c < w; ++c) {\n";
    lane_values(k_.stages.size(), indent + "  ");
    std::set<int32_t> done = invariant_;
    for (const Store& st : k_.stores) emit(st.expr, done, indent + "  ");
    for (size_t j = 0; j < k_.stores.size(); ++j) out_ << indent << "  " << store_code(j, k_.stores[j].expr) << "\n";
    out_ << indent << "}\n";
    for (int64_t d = c + 1; d-- > 0;) {
      indent.resize(indent.size() - 2);
      out_ << indent << "}\n";
    }
  }

  // CUDA: a thread per row (consecutive threads, consecutive columns: every load of a warp is one
  // coalesced access), reducing its row sequentially with the C++ form's stages.
  void columns_cuda() {
    auto outer = static_cast<int64_t>(k_.outer.size());
    std::string rows = "(i64)1";
    for (int64_t d = 0; d < outer; ++d) rows += " * n" + std::to_string(d);
    out_ << "  const i64 rows = " << rows << ";\n";
    out_ << "  for (i64 row = blockIdx.x * (i64)blockDim.x + threadIdx.x; row < rows; row += (i64)gridDim.x * blockDim.x) {\n";
    std::string indent = "    ";
    unravel("row", 0, outer, indent);
    std::set<int32_t> outer_done = invariant_;
    for (size_t s = 0; s < k_.stages.size(); ++s) cpu_stage(k_.stages[s], s, outer_done, indent, /*simd=*/false);
    for (size_t j = 0; j < k_.stores.size(); ++j) {
      emit(k_.stores[j].expr, outer_done, indent);
      out_ << indent << store_code(j, k_.stores[j].expr) << "\n";
    }
    out_ << "  }\n";
  }

  // A block-wide reduction of a<s> (and its index for arg stages); the result lands in every thread.
  void block_reduce(const Stage& s, size_t index, const std::string& indent) {
    std::string a = "a" + std::to_string(index);
    bool arg = s.kind == ReduceKind::ArgMax || s.kind == ReduceKind::ArgMin;
    bool floating = s.input_type == DType::Float32 || s.input_type == DType::Float64;
    std::string shared = floating ? "loom_shv" : "loom_shi";
    std::string wide = floating ? "double" : "i64";
    if (!arg) {
      std::string type = acc_type(s);
      std::string shfl = floating ? "loom_shfl_down(" + a + ", o)" : "(" + type + ")loom_shfl_down((i64)" + a + ", o)";
      std::string merge = combine(s, a, "other");
      out_ << indent << "for (int o = 16; o > 0; o >>= 1) { " << type << " other = " << shfl << "; " << merge << " }\n";
      out_ << indent << "if ((threadIdx.x & 31) == 0) " << shared << "[threadIdx.x >> 5] = (" << wide << ")" << a << ";\n";
      out_ << indent << "__syncthreads();\n";
      out_ << indent << "if (threadIdx.x < 32) {\n";
      out_ << indent << "  " << a << " = threadIdx.x < (blockDim.x >> 5) ? (" << type << ")" << shared
           << "[threadIdx.x] : (" << type << ")" << init_value(s.kind, s.input_type) << ";\n";
      out_ << indent << "  for (int o = 16; o > 0; o >>= 1) { " << type << " other = " << shfl << "; " << merge << " }\n";
      out_ << indent << "  if (threadIdx.x == 0) " << shared << "[0] = (" << wide << ")" << a << ";\n";
      out_ << indent << "}\n" << indent << "__syncthreads();\n";
      out_ << indent << a << " = (" << type << ")" << shared << "[0];\n" << indent << "__syncthreads();\n";
      return;
    }
    std::string T = compute_ctype(s.input_type);
    std::string better = s.kind == ReduceKind::ArgMax ? ">" : "<";
    // (value, index) pairs merge keeping the first extreme, NaN first.
    std::string merge = "if (oi >= 0 && (" + a + "i < 0 || (!loom_isnan(" + a + "v) && (loom_isnan(ov) || ov " + better +
                        " " + a + "v || (ov == " + a + "v && oi < " + a + "i))) || (loom_isnan(" + a +
                        "v) && loom_isnan(ov) && oi < " + a + "i))) { " + a + "v = ov; " + a + "i = oi; }";
    std::string vshfl = floating ? "loom_shfl_down(" + a + "v, o)" : "(" + T + ")loom_shfl_down((i64)" + a + "v, o)";
    out_ << indent << "for (int o = 16; o > 0; o >>= 1) { " << T << " ov = " << vshfl << "; i64 oi = loom_shfl_down("
         << a << "i, o); " << merge << " }\n";
    out_ << indent << "if ((threadIdx.x & 31) == 0) { " << shared << "[threadIdx.x >> 5] = (" << wide << ")" << a
         << "v; loom_shi2[threadIdx.x >> 5] = " << a << "i; }\n";
    out_ << indent << "__syncthreads();\n" << indent << "if (threadIdx.x < 32) {\n";
    out_ << indent << "  bool live = threadIdx.x < (blockDim.x >> 5);\n";
    out_ << indent << "  " << a << "v = live ? (" << T << ")" << shared << "[threadIdx.x] : " << a << "v; " << a
         << "i = live ? loom_shi2[threadIdx.x] : -1;\n";
    out_ << indent << "  for (int o = 16; o > 0; o >>= 1) { " << T << " ov = " << vshfl << "; i64 oi = loom_shfl_down("
         << a << "i, o); " << merge << " }\n";
    out_ << indent << "  if (threadIdx.x == 0) { " << shared << "[0] = (" << wide << ")" << a << "v; loom_shi2[0] = " << a
         << "i; }\n";
    out_ << indent << "}\n" << indent << "__syncthreads();\n";
    out_ << indent << a << "v = (" << T << ")" << shared << "[0]; " << a << "i = loom_shi2[0];\n" << indent
         << "__syncthreads();\n";
  }

  void row_cuda() {
    auto outer = static_cast<int64_t>(k_.outer.size());
    int64_t rank = domain_rank();
    out_ << "  __shared__ double loom_shv[32];\n  __shared__ i64 loom_shi[32];\n  __shared__ i64 loom_shi2[32];\n";
    out_ << "  (void)loom_shv; (void)loom_shi; (void)loom_shi2;\n";
    std::string rows = "(i64)1", inner = "(i64)1";
    for (int64_t d = 0; d < outer; ++d) rows += " * n" + std::to_string(d);
    for (int64_t d = outer; d < rank; ++d) inner += " * n" + std::to_string(d);
    out_ << "  const i64 rows = " << rows << ", inner = " << inner << ";\n";
    out_ << "  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {\n";
    std::string indent = "    ";
    unravel("row", 0, outer, indent);
    plan_kept();
    std::set<int32_t> outer_done = invariant_;
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      const Stage& st = k_.stages[s];
      prepare_stage(st, outer_done, indent);
      declare_acc(st, s, indent);
      out_ << indent << "for (i64 kk = threadIdx.x; kk < inner; kk += blockDim.x) {\n";
      unravel("kk", outer, rank, indent + "  ");
      stage_inner(st, s, outer_done, indent + "  ", "kk");
      out_ << indent << "}\n";
      stage_written(s);
      block_reduce(st, s, indent);
      out_ << indent << result(st, s) << "\n";
    }
    if (has_element_stores()) {
      prepare_elements(outer_done, indent);
      out_ << indent << "for (i64 kk = threadIdx.x; kk < inner; kk += blockDim.x) {\n";
      unravel("kk", outer, rank, indent + "  ");
      element_stores(outer_done, indent + "  ");
      out_ << indent << "}\n";
    }
    out_ << indent << "if (threadIdx.x == 0) {\n";
    for (size_t j = 0; j < k_.stores.size(); ++j) {
      if (k_.stores[j].access.space == Space::Inner) continue;
      emit(k_.stores[j].expr, outer_done, indent + "  ");
      out_ << indent << "  " << store_code(j, k_.stores[j].expr) << "\n";
    }
    out_ << indent << "}\n" << indent << "__syncthreads();\n  }\n";
  }

  // ---- split reductions (program.h, Kernel::split_block) ----

  // Whether store s is written by a split kernel's second pass.
  bool second_pass(const Store& s) const { return k_.split_block > 0 && written_after_reduction(s); }

  // The domain's size, its blocks, and each stage's partials in the kernel's scratch (the pointer
  // after the stores'): stage s at 8 * blocks * s bytes.
  void declare_partials(const std::string& indent) {
    std::string B = std::to_string(k_.split_block);
    out_ << indent << "const i64 N = " << numel_expr() << ", blocks = (N + " << B << " - 1) / " << B << ";\n";
    out_ << indent << "char* const scratch = (char*)bufs[" << k_.loads.size() + k_.stores.size() << "];\n";
    for (size_t s = 0; s < k_.stages.size(); ++s)
      out_ << indent << partial_type(k_.stages[s]) << "* const P" << s << " = (" << partial_type(k_.stages[s])
           << "*)(scratch + 8 * blocks * " << s << ");\n";
  }
  std::string partial_type(const Stage& s) const {
    return s.kind == ReduceKind::Sum || s.kind == ReduceKind::Prod ? acc_type(s) : compute_ctype(s.input_type);
  }

  // The value stage s reduces, before its cast to the accumulator (a float32 sum's double).
  int32_t stage_value(const Stage& st) const {
    const Expr& x = k_.exprs[st.input];
    return x.op == ExprOp::Cast && (st.kind == ReduceKind::Sum || st.kind == ReduceKind::Prod) ? x.a : st.input;
  }

  // Accumulates v into stage s's accumulator a<s>; `flags`: maxima and minima as a plain select
  // the vectorizer reduces, NaN carried in a flag (as cpu_stage), else NaN-aware.
  void accumulate(size_t s, const std::string& v, const std::string& indent, bool flags) {
    const Stage& st = k_.stages[s];
    std::string a = "a" + std::to_string(s);
    bool extreme = st.kind == ReduceKind::Max || st.kind == ReduceKind::Min;
    if (flags && extreme && st.input_type != DType::Bool) {
      std::string op = st.kind == ReduceKind::Max ? " > " : " < ";
      out_ << indent << a << " = " << v << op << a << " ? " << v << " : " << a << ";\n";
      if (is_floating(st.input_type)) out_ << indent << a << "n |= " << v << " != " << v << ";\n";
    } else {
      out_ << indent << combine(st, a, v) << "\n";
    }
  }

  // One element of the first pass at linear index i: its stores, then what each stage reduces;
  // `staged`: written to the stage's array at j (C++), else accumulated at once (CUDA).
  // `stores` / `stages`: which of the two this loop writes; a loop of stages alone reads back
  // the stored values the loop of stores wrote before it (where reading gives the same value).
  void split_element(const std::string& indent, bool staged, bool stores = true, bool stages = true) {
    if (!all_linear_) unravel("i", 0, domain_rank(), indent);
    std::set<int32_t> done = invariant_;
    for (size_t j = 0; j < k_.stores.size() && !stores; ++j) {
      const Store& st = k_.stores[j];
      if (second_pass(st) || done.count(st.expr) || storage_ctype(st.storage) != std::string(compute_ctype(st.storage)))
        continue;
      out_ << indent << "const " << compute_ctype(st.storage) << " " << var(st.expr) << " = S" << j << "["
           << store_index_[j] << "];\n";
      done.insert(st.expr);
    }
    for (const Store& st : k_.stores)
      if (stores && !second_pass(st)) emit(st.expr, done, indent);
    for (const Stage& st : k_.stages)
      if (stages) emit(staged ? stage_value(st) : st.input, done, indent);
    for (size_t j = 0; j < k_.stores.size(); ++j)
      if (stores && !second_pass(k_.stores[j])) out_ << indent << store_code(j, k_.stores[j].expr) << "\n";
    for (size_t s = 0; s < k_.stages.size() && stages; ++s) {
      if (staged) out_ << indent << "t" << s << "[j] = " << var(stage_value(k_.stages[s])) << ";\n";
      else accumulate(s, var(k_.stages[s].input), indent, false);
    }
  }

  // C++: threads share the blocks ([lo, hi)). A block is walked in pieces of kStaged elements:
  // one vectorized loop computes the pieces' values (its stores, and what each stage reduces,
  // into small arrays), then a loop per stage reduces them. Each loop vectorizes at its own
  // width: a float32 chain in 16 lanes, its double sum in 8 (in one loop, the double would
  // halve the float math's lanes).
  static constexpr int64_t kStaged = 256;
  void split_cpu() {
    int64_t n = numel_of(domain());
    split_ = {(n + k_.split_block - 1) / k_.split_block, k_.split_block, 1};
    declare_partials("  ");
    for (size_t s = 0; s < k_.stages.size(); ++s)
      out_ << "  " << compute_ctype(k_.exprs[stage_value(k_.stages[s])].type) << " t" << s << "[" << kStaged
           << "];\n";
    out_ << "  for (i64 blk = lo; blk < hi; ++blk) {\n";
    out_ << "    const i64 i1 = N - blk * " << k_.split_block << " < " << k_.split_block << " ? N : (blk + 1) * "
         << k_.split_block << ";\n";
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      const Stage& st = k_.stages[s];
      declare_acc(st, s, "    ");
      if ((st.kind == ReduceKind::Max || st.kind == ReduceKind::Min) && is_floating(st.input_type))
        out_ << "    int a" << s << "n = 0;\n";
    }
    out_ << "    for (i64 i0 = blk * " << k_.split_block << "; i0 < i1; i0 += " << kStaged << ") {\n";
    out_ << "      const i64 m = i1 - i0 < " << kStaged << " ? i1 - i0 : " << kStaged << ";\n";
    // The stores in a loop of their own, when there are some and no load shares their memory:
    // GCC's code for one loop of a long chain of vector math calls (a 20-op chain with tanh, two
    // exp and a log) ran 25% slower than the same work cut in two at a stored value.
    bool in_place = std::ranges::any_of(k_.loads, [](const Load& l) { return l.in_place; });
    bool stores = std::ranges::any_of(k_.stores, [&](const Store& st) { return !second_pass(st); });
    bool apart = stores && !in_place;
    for (int loop = apart ? 0 : 1; loop < 2; ++loop) {
      out_ << "      #pragma omp simd\n      for (i64 j = 0; j < m; ++j) {\n        const i64 i = i0 + j;\n";
      split_element("        ", true, loop == 0 || !apart, loop == 1);
      out_ << "      }\n";
    }
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      const Stage& st = k_.stages[s];
      std::string a = "a" + std::to_string(s);
      std::string pragma;
      if (st.kind == ReduceKind::Sum) pragma = "reduction(+:" + a + ")";
      else if (st.kind == ReduceKind::Prod) pragma = "reduction(*:" + a + ")";
      else if (st.input_type != DType::Bool)  // OpenMP has no bool max: a plain loop
        pragma = std::string("reduction(") + (st.kind == ReduceKind::Max ? "max:" : "min:") + a + ")" +
                 (is_floating(st.input_type) ? " reduction(|:" + a + "n)" : "");
      if (!pragma.empty()) out_ << "      #pragma omp simd " << pragma << "\n";
      out_ << "      for (i64 j = 0; j < m; ++j) {\n";
      accumulate(s, "t" + std::to_string(s) + "[j]", "        ", true);
      out_ << "      }\n";
    }
    out_ << "    }\n";
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      const Stage& st = k_.stages[s];
      std::string a = "a" + std::to_string(s);
      if ((st.kind == ReduceKind::Max || st.kind == ReduceKind::Min) && is_floating(st.input_type))
        out_ << "    if (" << a << "n) " << a << " = "
             << literal(NAN, st.input_type == DType::Float64 ? DType::Float64 : DType::Float32) << ";\n";
      out_ << "    P" << s << "[blk] = " << a << ";\n";
    }
    out_ << "  }\n";
  }

  // The second pass's stores, once the stages' results r<s> are declared.
  void second_pass_stores(const std::string& indent) {
    std::set<int32_t> done = invariant_;
    for (size_t j = 0; j < k_.stores.size(); ++j) {
      if (!second_pass(k_.stores[j])) continue;
      emit(k_.stores[j].expr, done, indent);
      out_ << indent << store_code(j, k_.stores[j].expr) << "\n";
    }
  }

  // C++: each stage's partials reduced in block order.
  void combine_cpu() {
    declare_partials("  ");
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      const Stage& st = k_.stages[s];
      declare_acc(st, s, "  ");
      std::string a = "a" + std::to_string(s);
      out_ << "  for (i64 blk = 0; blk < blocks; ++blk) " << combine(st, a, "P" + std::to_string(s) + "[blk]") << "\n";
      out_ << "  " << result(st, s) << "\n";
    }
    second_pass_stores("  ");
  }

  // CUDA: a block per split block (grid-stride over blocks), reduced as a row kernel's row.
  void split_cuda() {
    out_ << "  __shared__ double loom_shv[32];\n  __shared__ i64 loom_shi[32];\n  __shared__ i64 loom_shi2[32];\n";
    out_ << "  (void)loom_shv; (void)loom_shi; (void)loom_shi2;\n";
    declare_partials("  ");
    out_ << "  for (i64 blk = blockIdx.x; blk < blocks; blk += gridDim.x) {\n";
    out_ << "    const i64 i0 = blk * " << k_.split_block << ", len = N - i0 < " << k_.split_block << " ? N - i0 : "
         << k_.split_block << ";\n";
    for (size_t s = 0; s < k_.stages.size(); ++s) declare_acc(k_.stages[s], s, "    ");
    out_ << "    for (i64 kk = threadIdx.x; kk < len; kk += blockDim.x) {\n      const i64 i = i0 + kk;\n";
    split_element("      ", false);
    out_ << "    }\n";
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      block_reduce(k_.stages[s], s, "    ");
      out_ << "    if (threadIdx.x == 0) P" << s << "[blk] = a" << s << ";\n";
    }
    out_ << "  }\n";
  }

  // CUDA: one block reduces each stage's partials (a thread per partial, then the block), in an
  // order fixed by the number of blocks.
  void combine_cuda() {
    out_ << "  __shared__ double loom_shv[32];\n  __shared__ i64 loom_shi[32];\n  __shared__ i64 loom_shi2[32];\n";
    out_ << "  (void)loom_shv; (void)loom_shi; (void)loom_shi2;\n";
    declare_partials("  ");
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      const Stage& st = k_.stages[s];
      declare_acc(st, s, "  ");
      std::string a = "a" + std::to_string(s);
      out_ << "  for (i64 blk = threadIdx.x; blk < blocks; blk += blockDim.x) "
           << combine(st, a, "P" + std::to_string(s) + "[blk]") << "\n";
      block_reduce(st, s, "  ");
      out_ << "  " << result(st, s) << "\n";
    }
    out_ << "  if (threadIdx.x == 0) {\n";
    second_pass_stores("    ");
    out_ << "  }\n";
  }

  const Kernel& k_;
  std::string name_;
  const TargetTable& t_;
  std::ostream& out_;
  std::vector<int64_t> ints_;
  std::vector<std::string> load_index_, store_index_;
  std::set<int32_t> invariant_;  // written before the loops
  std::map<int32_t, Kept> kept_;  // row kernels: costly values kept across passes (plan_kept)
  std::set<int32_t> readable_;    // the kept values the passes written so far hold
  Split split_{1, 1};            // CPU: how the outermost loop may be split
  bool all_linear_ = false;
};

}  // namespace

RenderedModule render(const Program& program, TargetKind target) {
  const TargetTable& t = target_table(target);
  // Kernels that differ only in their sizes, strides and offsets (launch parameters) have the
  // same text: each text is written once, and the kernels that share it call it by one name (a
  // long trace repeats a few kernels thousands of times, and a model's layers repeat theirs:
  // compile time follows the distinct kernels). The name is a hash of the text, so it is the
  // same in every module the kernel appears in.
  constexpr const char* kName = "loom_kernel_name_";
  std::unordered_map<std::string, std::string> written;  // text under kName -> its symbol
  RenderedModule m;
  for (const Kernel& k : program.kernels) {
    std::ostringstream text;
    KernelWriter writer(k, kName, t, text);
    m.int_params.push_back(writer.write());
    m.splits.push_back(writer.split());
    // A split reduction's second pass is a function of its own, named after the first's text
    // and its own (the pair is one kernel).
    std::string first = text.str(), combine;
    if (k.split_block > 0) {
      std::ostringstream second;
      KernelWriter(k, kName, t, second).write_combine();
      combine = second.str();
    }
    auto [it, fresh] = written.emplace(first + combine, "");
    if (fresh) {
      it->second = "loom_k" + rtc::hex64(rtc::hash_text(it->first));
      m.functions.push_back(replace_all(first, kName, it->second));
      m.function_symbols.push_back(it->second);
      if (!combine.empty()) {
        m.functions.push_back(replace_all(combine, kName, it->second + "_c"));
        m.function_symbols.push_back(it->second + "_c");
      }
    }
    m.symbols.push_back(it->second);
    m.combine_symbols.push_back(combine.empty() ? "" : it->second + "_c");
  }
  m.prelude = t.prelude;
  std::ostringstream out;
  out << "// Generated by loom: " << written.size() << " kernel(s).\n" << t.prelude << "\n";
  for (const std::string& f : m.functions) out << f;
  m.source = out.str();
  return m;
}

}  // namespace loom::fusion
