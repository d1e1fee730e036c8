#include "graph/step_profile.h"

#include <algorithm>
#include <cstdio>
#include <unordered_set>

#include "lazy/collectives.h"
#include "lazy/node.h"
#include "lazy/provenance.h"
#include "runtime/dtype.h"
#include "runtime/metrics.h"

namespace loom::graph {
namespace {

bool is_leaf(const Node& n) { return n.op() == OpId::Input || n.op() == OpId::Scalar || n.op() == OpId::Constant; }

int64_t value_bytes(const Trace& t, int32_t value, DType dtype) {
  return numel_of(t.nodes[value]->shape()) * static_cast<int64_t>(itemsize(dtype));
}

std::string hex(uint64_t key) {
  char text[24];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(key));
  return text;
}

// "mul+add+tanh": the distinct ops, in order, at most six of them.
std::string summary(const std::vector<profiler::FusedOp>& ops) {
  std::vector<const char*> distinct;
  for (const profiler::FusedOp& o : ops)
    if (std::ranges::find(distinct, o.op) == distinct.end()) distinct.push_back(o.op);
  std::string s;
  for (size_t i = 0; i < distinct.size() && i < 6; ++i) s += (i ? "+" : "") + std::string(distinct[i]);
  if (distinct.size() > 6) s += "+...";
  return s;
}

}  // namespace

std::vector<profiler::FusedOp> fused_ops(const fusion::Program& p, const Trace& t, int32_t kernel) {
  const fusion::Kernel& k = p.kernels[static_cast<size_t>(kernel)];
  std::unordered_set<int32_t> loaded, seen;
  for (const fusion::Load& l : k.loads) loaded.insert(l.access.value);
  std::vector<int32_t> stack, found;
  for (const fusion::Store& s : k.stores) stack.push_back(s.access.value);
  for (const fusion::Stage& s : k.stages) stack.push_back(s.node);
  while (!stack.empty()) {
    int32_t v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second || loaded.contains(v) || is_leaf(*t.nodes[v])) continue;
    found.push_back(v);
    for (int32_t in : t.inputs[static_cast<size_t>(v)]) stack.push_back(in);
  }
  std::ranges::sort(found);
  std::vector<profiler::FusedOp> ops;
  ops.reserve(found.size());
  for (int32_t v : found) ops.push_back({op_name(t.nodes[v]->op()), node_source(t.nodes[v])});
  return ops;
}

void describe_step(profiler::Event& e, const fusion::Program& p, const Trace& t, const fusion::Step& step) {
  switch (step.kind) {
    case fusion::Step::RunKernel: {
      const fusion::Kernel& k = p.kernels[static_cast<size_t>(step.kernel)];
      e.category = "kernel";
      e.fused = fused_ops(p, t, step.kernel);
      e.name = k.name + ": " + summary(e.fused);
      e.bytes_read = e.bytes_written = 0;
      for (const fusion::Load& l : k.loads) e.bytes_read += value_bytes(t, l.access.value, l.storage);
      for (const fusion::Store& s : k.stores) e.bytes_written += value_bytes(t, s.access.value, s.storage);
      e.args.emplace_back("domain", format_dims(k.outer) + (k.row ? " x " + format_dims(k.inner) : ""));
      return;
    }
    case fusion::Step::RunOp: {
      const Node& n = *t.nodes[step.node];
      e.category = n.op() == OpId::MatMul ? "blas" : collectives::is_collective(n.op()) ? "collective" : "library";
      e.name = op_name(n.op());
      e.source = node_source(&n);
      e.bytes_read = 0;
      for (const fusion::Operand& o : step.operands)
        if (!is_leaf(*t.nodes[o.value]) || t.nodes[o.value]->op() == OpId::Input)
          e.bytes_read += numel_of(o.view ? IntSpan(o.view->sizes) : t.nodes[o.value]->shape()) *
                          static_cast<int64_t>(itemsize(t.nodes[o.value]->dtype()));
      e.bytes_written = value_bytes(t, step.node, n.dtype());
      e.args.emplace_back("shape", format_dims(n.shape()));
      return;
    }
    case fusion::Step::CopyToDestination:
      e.category = "copy";
      e.name = "copy to destination";
      e.bytes_read = e.bytes_written = value_bytes(t, step.node, t.nodes[step.node]->dtype());
      return;
  }
}

void RunSpan::describe(profiler::Event& e, const char* executor, const Trace& t) {
  e.args.emplace_back("executor", executor);
  e.args.emplace_back("key", hex(t.key));
  e.args.emplace_back("nodes", std::to_string(t.nodes.size()));
}

void RunSpan::describe_plan(profiler::Event& e, size_t steps, bool graph_replay) {
  e.args.emplace_back("steps", std::to_string(steps));
  if (graph_replay) e.args.emplace_back("graph", "replay");
}

void LookupSpan::describe(profiler::Event& e, uint64_t key) { e.args.emplace_back("key", hex(key)); }

CompileSpan::CompileSpan(const char* target, const fusion::Program& p) : span_("compile", "compile module") {
  profiler::Event* e = span_.event();
  if (!e) [[likely]]
    return;
  const Metrics& m = metrics();
  compiled_before_ = m.kernels_compiled.load(std::memory_order_relaxed);
  loaded_before_ = m.modules_loaded_from_disk.load(std::memory_order_relaxed);
  nanoseconds_before_ = m.compile_nanoseconds.load(std::memory_order_relaxed);
  e->name = std::string("compile ") + target + " module";
  std::string names;
  for (const fusion::Kernel& k : p.kernels) names += (names.empty() ? "" : " ") + k.name;
  e->args.emplace_back("kernels", std::to_string(p.kernels.size()));
  e->args.emplace_back("kernel names", names);
}

CompileSpan::~CompileSpan() {
  profiler::Event* e = span_.event();
  if (!e) [[likely]]
    return;
  const Metrics& m = metrics();
  int64_t compiled = m.kernels_compiled.load(std::memory_order_relaxed) - compiled_before_;
  int64_t loaded = m.modules_loaded_from_disk.load(std::memory_order_relaxed) - loaded_before_;
  double seconds = static_cast<double>(m.compile_nanoseconds.load(std::memory_order_relaxed) - nanoseconds_before_) * 1e-9;
  e->args.emplace_back("from", compiled > 0 ? "compiler" : loaded > 0 ? "disk cache" : "memory cache");
  char text[32];
  std::snprintf(text, sizeof text, "%.6f", seconds);
  e->args.emplace_back("compiler seconds", text);
}

}  // namespace loom::graph
