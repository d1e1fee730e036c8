#include "graph/binding.h"

#include "runtime/hash.h"

namespace loom::graph {

uint64_t plan_key(const Trace& t) {
  uint64_t k = t.key;
  for (const Node* n : t.nodes)
    if (n->op() == OpId::Input && !n->array().is_contiguous())
      for (int64_t s : n->array().strides()) k = hash_combine(k, static_cast<uint64_t>(s));
  return k;
}

void mark_outputs(fusion::Program& p, const Trace& t) {
  for (const Trace::Output& o : t.outputs) {
    fusion::Buffer& b = p.buffers[p.buffer_of[o.node]];
    if (b.kind == fusion::BufferKind::Intermediate) b.kind = fusion::BufferKind::Output;
  }
}

fusion::Program partition_for_run(const Trace& t, bool fuse) {
  fusion::Program p = fusion::partition(t, fusion::PartitionOptions{fuse});
  mark_outputs(p, t);
  return p;
}

std::vector<Array> bind_buffers(const fusion::Program& p, const Trace& t, const MemoryPlan& memory, const Array& arena) {
  std::vector<Array> arrays(p.buffers.size());
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const fusion::Buffer& buf = p.buffers[b];
    switch (buf.kind) {
      case fusion::BufferKind::Input: arrays[b] = t.nodes[buf.value]->array(); break;
      case fusion::BufferKind::Output: arrays[b] = empty(t.nodes[buf.value]->shape(), buf.dtype, t.device); break;
      case fusion::BufferKind::Destination: break;
      case fusion::BufferKind::Intermediate: {
        Layout l = buf.layout;
        l.offset = memory.offset[b] / static_cast<int64_t>(itemsize(buf.dtype));
        arrays[b] = Array{arena.storage, std::move(l), buf.dtype};
        break;
      }
    }
  }
  return arrays;
}

ResultPlan plan_results(const fusion::Program& p, const Trace& t, const std::vector<Array>& arrays) {
  ResultPlan plan;
  plan.arrays.reserve(t.outputs.size());
  std::vector<bool> handed_out(p.buffers.size(), false);
  for (const Trace::Output& o : t.outputs) {
    int32_t b = p.buffer_of[o.node];
    const Array& value = arrays[b];
    if (o.destination) {
      plan.arrays.push_back(*o.destination);
    } else if (p.buffers[b].kind != fusion::BufferKind::Output || handed_out[b]) {
      // Never alias an input or another output: a copy.
      plan.copies.emplace_back(b, plan.arrays.size());
      plan.arrays.push_back(empty(value.sizes(), value.dtype, t.device));
    } else {
      plan.arrays.push_back(value);
      handed_out[b] = true;
    }
  }
  return plan;
}

void fill_results(const ResultPlan& results, const std::vector<Array>& arrays) {
  for (auto [buffer, output] : results.copies) copy_(results.arrays[output], arrays[buffer]);
}

std::vector<Array> collect_results(const fusion::Program& p, const Trace& t, const std::vector<Array>& arrays) {
  ResultPlan results = plan_results(p, t, arrays);
  fill_results(results, arrays);
  return std::move(results.arrays);
}

std::vector<bool> write_backs_to_take_aside(const fusion::Program& p, const Trace& t) {
  std::vector<bool> aside(t.outputs.size(), false);
  for (size_t o = 0; o < t.outputs.size(); ++o) {
    const Trace::Output& out = t.outputs[o];
    int32_t b = p.buffer_of[out.node];
    if (!out.destination || b < 0 || p.buffers[b].kind != fusion::BufferKind::Input) continue;
    const Storage* storage = t.nodes[p.buffers[b].value]->array().storage.get();
    for (size_t other = 0; other < t.outputs.size() && !aside[o]; ++other)
      aside[o] = other != o && t.outputs[other].destination && t.outputs[other].destination->storage.get() == storage;
  }
  return aside;
}

}  // namespace loom::graph
