// Definitions of the creation primitives, which make tensors from Python numbers only:
// Full(value), Arange(start, step), RandUniform(seed, offset, low, high),
// RandNormal(seed, offset, mean, std), RandInt(seed, offset, low, high).
//
// attrs = [dtype, sizes...]. Every number is a Scalar input (a trace parameter), so the seed and
// offset of a random op change at every step without changing the trace: a replayed graph draws
// new numbers each step, reproducibly (runtime/random.h).
#include "lazy/op.h"
#include "runtime/error.h"

namespace loom {
namespace {

OutputMeta infer_creation(std::span<const InputMeta>, const Attrs& attrs) {
  Dims sizes(attrs.begin() + 1, attrs.end());
  check_sizes(sizes);
  return {static_cast<DType>(attrs[0]), std::move(sizes)};
}

PhiloxState state_of(std::span<const Operand> in) {
  return {static_cast<uint64_t>(in[0].scalar.as_int()), static_cast<uint64_t>(in[1].scalar.as_int())};
}

void run_full(std::span<const Operand> in, const Attrs&, const Array& out) { fill_(out, in[0].scalar); }
void run_arange(std::span<const Operand> in, const Attrs&, const Array& out) { arange_(out, in[0].scalar, in[1].scalar); }

void run_uniform(std::span<const Operand> in, const Attrs&, const Array& out) {
  uniform_at(out, in[2].scalar.as_double(), in[3].scalar.as_double(), state_of(in));
}
void run_normal(std::span<const Operand> in, const Attrs&, const Array& out) {
  normal_at(out, in[2].scalar.as_double(), in[3].scalar.as_double(), state_of(in));
}
void run_randint(std::span<const Operand> in, const Attrs&, const Array& out) {
  random_int_at(out, in[2].scalar.as_int(), in[3].scalar.as_int(), state_of(in));
}

const bool registered = [] {
  define_op(OpId::Full, OpDef{.name = "Full", .cls = OpClass::Other, .infer = infer_creation, .run_cpu = run_full, .data_safe = true});
  define_op(OpId::Arange, OpDef{.name = "Arange", .cls = OpClass::Other, .infer = infer_creation, .run_cpu = run_arange, .data_safe = true});
  define_op(OpId::RandUniform, OpDef{.name = "RandUniform", .cls = OpClass::Other, .infer = infer_creation, .run_cpu = run_uniform, .data_safe = true});
  define_op(OpId::RandNormal, OpDef{.name = "RandNormal", .cls = OpClass::Other, .infer = infer_creation, .run_cpu = run_normal, .data_safe = true});
  define_op(OpId::RandInt, OpDef{.name = "RandInt", .cls = OpClass::Other, .infer = infer_creation, .run_cpu = run_randint, .data_safe = true});
  return true;
}();

}  // namespace
}  // namespace loom
