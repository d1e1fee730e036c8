#include "graph/op_trace.h"

namespace loom::graph {

OpTrace op_trace(OpId op, std::span<const Operand> inputs, const Attrs& attrs, const OutputMeta& meta, Device device) {
  OpTrace o;
  SmallVec<Node*, 4> leaves;
  SmallVec<int32_t, 3> wiring;
  for (const Operand& in : inputs) {
    o.nodes.push_back(in.is_array() ? Node::input(*in.array) : Node::scalar(in.scalar, false));
    leaves.push_back(o.nodes.back().get());
    wiring.push_back(static_cast<int32_t>(o.trace.nodes.size()));
    o.trace.nodes.push_back(o.nodes.back().get());
    o.trace.inputs.emplace_back();
  }
  o.nodes.push_back(Node::make(op, meta, attrs, {leaves.data(), leaves.size()}));
  o.trace.device = device;
  o.trace.nodes.push_back(o.nodes.back().get());
  o.trace.inputs.push_back(std::move(wiring));
  o.trace.outputs.push_back({static_cast<int>(o.trace.nodes.size()) - 1, std::nullopt});
  o.trace.key = trace_key(o.trace);
  return o;
}

}  // namespace loom::graph
