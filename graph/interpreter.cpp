#include "graph/interpreter.h"

#include "graph/compiled.h"
#include "graph/cuda_executor.h"
#include "graph/device_router.h"

#include <variant>

#include "runtime/error.h"
#include "runtime/metrics.h"

namespace loom::graph {
namespace {

// The value of one node during interpretation.
struct Value {
  Array array;
  Scalar scalar{int64_t{0}};
  bool is_scalar = false;
  bool fresh = false;  // computed by this run (not an input's storage)
};

// A View node's layout is relative to its input's elements in row-major order: apply it to a
// contiguous input (copying a strided input leaf first).
Array apply_view(const Node& node, const Array& input) {
  Array base = contiguous(input);
  const Attrs& a = node.attrs();
  Layout l{Dims(node.shape()), Dims(a.begin() + 1, a.end()), base.layout.offset + a[0]};
  return base.view_as(std::move(l));
}

}  // namespace

std::vector<Array> Interpreter::run(const Trace& trace) {
  size_t n = trace.nodes.size();
  std::vector<Value> values(n);
  // Remaining uses of each value, so intermediates are freed as soon as they are dead.
  std::vector<int32_t> uses(n, 0);
  for (const auto& ins : trace.inputs)
    for (int32_t i : ins) ++uses[i];
  for (const Trace::Output& o : trace.outputs) ++uses[o.node];

  for (size_t i = 0; i < n; ++i) {
    const Node& node = *trace.nodes[i];
    Value& v = values[i];
    switch (node.op()) {
      case OpId::Input: v.array = node.array(); break;
      case OpId::Scalar:
      case OpId::Constant:
        v.scalar = node.scalar();
        v.is_scalar = true;
        break;
      case OpId::View: {
        const Value& in = values[trace.inputs[i][0]];
        v.array = apply_view(node, in.array);
        v.fresh = in.fresh || v.array.storage != in.array.storage;
        break;
      }
      default: {
        SmallVec<Operand, 4> operands;
        for (int32_t in : trace.inputs[i]) {
          const Value& iv = values[in];
          operands.push_back(iv.is_scalar ? Operand::of(iv.scalar) : Operand::of(iv.array));
        }
        v.array = empty(node.shape(), node.dtype(), trace.device);
        v.fresh = true;
        const OpDef& def = op_def(node.op());
        LOOM_CHECK(def.run_cpu, NotImplemented, "no CPU kernel for ", def.name);
        try {
          def.run_cpu({operands.data(), operands.size()}, node.attrs(), v.array);
        } catch (const Error& e) {
          // A kernel's error is this node's (its data), except running out of memory: the sync
          // then fails as a whole and can be retried.
          if (e.kind() == ErrorKind::OutOfMemory) throw;
          throw NodeError(e, static_cast<int>(i), node.op());
        }
        count(metrics().kernel_launches);
      }
    }
    for (int32_t in : trace.inputs[i])
      if (--uses[in] == 0) values[in] = Value{};
  }

  // Results. In-place outputs are written last, after every read of the old values. A value
  // that is still an input's memory (b.copy_(a) of a materialized a, a view of a leaf) is read
  // now, into memory of its own, before any destination is written: another in-place output of
  // the trace may write that memory (a.mul_(3) after b.copy_(a)), and b must get a's old value.
  std::vector<Array> results;
  std::vector<Array> written(trace.outputs.size());
  results.reserve(trace.outputs.size());
  for (size_t k = 0; k < trace.outputs.size(); ++k) {
    const Trace::Output& o = trace.outputs[k];
    const Value& v = values[o.node];
    Array own = v.fresh ? v.array : copy_to(v.array, v.array.dtype, trace.device);  // never alias an input's storage
    if (o.destination) {
      results.push_back(*o.destination);
      written[k] = std::move(own);
    } else {
      results.push_back(std::move(own));
    }
  }
  for (size_t k = 0; k < trace.outputs.size(); ++k)
    if (const Trace::Output& o = trace.outputs[k]; o.destination) copy_(*o.destination, written[k]);
  return results;
}

void install_default_executor() {
  install_executor(std::make_unique<DeviceRouter>(std::make_shared<CompiledExecutor>(options_from_environment()),
                                                  make_cuda_executor(cuda_options_from_environment())));
}

}  // namespace loom::graph
