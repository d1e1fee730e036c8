// Definitions of the random primitives beyond creation (lazy/ops_creation.cpp): Poisson(rates,
// seed, offset). A primitive because its sampler loops a number of times that depends on the
// draws (runtime/random.h random_poisson), which elementwise ops cannot express; the other
// distributions (bernoulli, exponential, geometric, normal with tensor arguments, multinomial,
// randperm, ...) are composed of the creation primitives in lazy/sampling.cpp.
//
// Element i takes the Philox block of (seed, offset, i) like every random op, so its value does
// not depend on the backend (the CUDA kernel is loom_poisson, graph/cuda_library_source.cpp).
#include <cmath>

#include "lazy/op.h"
#include "runtime/error.h"

namespace loom {
namespace {

OutputMeta infer_poisson(std::span<const InputMeta> in, const Attrs&) {
  DType d = in[0].dtype;
  LOOM_CHECK(d == DType::Float32 || d == DType::Float64 || d == DType::BFloat16, Runtime,
             "\"poisson_cpu\" not implemented for '", dtype_info(d).scalar_type_name, "'");
  return {d, Dims(in[0].shape)};
}

void run_poisson(std::span<const Operand> in, const Attrs&, const Array& out) {
  Array rates = copy_to(*in[0].array, DType::Float64, kCPU);
  PhiloxState state{static_cast<uint64_t>(in[1].scalar.as_int()), static_cast<uint64_t>(in[2].scalar.as_int())};
  Array samples = empty(rates.sizes(), DType::Float64, kCPU);
  const double* r = static_cast<const double*>(rates.data());
  double* s = static_cast<double*>(samples.data());
  for (int64_t i = 0; i < rates.numel(); ++i) {
    // A NaN fails this test too, as in PyTorch.
    LOOM_CHECK(r[i] >= 0, Runtime, "invalid Poisson rate, expected rate to be non-negative");
    s[i] = std::isinf(r[i]) ? r[i] : random_poisson(random_block(state, static_cast<uint64_t>(i)), r[i]);
  }
  copy_(out, samples);
}

const bool registered = [] {
  define_op(OpId::Poisson, OpDef{.name = "Poisson", .cls = OpClass::Other, .infer = infer_poisson,
                                 .run_cpu = run_poisson});  // rates are checked
  return true;
}();

}  // namespace
}  // namespace loom
