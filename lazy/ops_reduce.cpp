// Definitions of the reduction ops: sum, prod, amax, amin, argmax, argmin over a set of dims.
//
// Attributes: attrs[0] is a bit mask of the reduced dims, attrs[1] is keepdim. Composite
// reductions (mean, var, std, logsumexp, norm, softmax, all, any) are built from these in
// lazy/ops.cpp.
#include <cmath>
#include <limits>

#include "lazy/math.h"
#include "lazy/op.h"
#include "runtime/cpu/strided_loop.h"
#include "runtime/error.h"

namespace loom {
namespace {

template <typename S>
using compute_t = std::conditional_t<std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>, float, S>;

// Accumulators. Sums and products of floats accumulate in double, of integers in int64, as
// PyTorch's results (int32 sums are int64) require.
template <typename S>
using wide_t = std::conditional_t<std::is_floating_point_v<compute_t<S>>, double, int64_t>;

struct SumR {
  static constexpr OpId id = OpId::Sum;
  template <typename S> using Acc = wide_t<S>;
  template <typename S> static Acc<S> init() { return 0; }
  template <typename S> static void step(Acc<S>& a, compute_t<S> x, int64_t) { a += static_cast<Acc<S>>(x); }
};
struct ProdR {
  static constexpr OpId id = OpId::Prod;
  template <typename S> using Acc = wide_t<S>;
  template <typename S> static Acc<S> init() { return 1; }
  template <typename S> static void step(Acc<S>& a, compute_t<S> x, int64_t) { a *= static_cast<Acc<S>>(x); }
};
template <bool Max>
struct ExtremeR {
  static constexpr OpId id = Max ? OpId::Amax : OpId::Amin;
  static constexpr const char* python_name = Max ? "amax" : "amin";  // in messages
  template <typename S> using Acc = compute_t<S>;
  template <typename S> static Acc<S> init() {
    using C = compute_t<S>;
    if constexpr (std::is_same_v<C, bool>) return !Max;
    else if constexpr (std::numeric_limits<C>::has_infinity)
      return Max ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
    else return Max ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
  }
  template <typename S> static void step(Acc<S>& a, compute_t<S> x, int64_t) {
    a = Max ? math::maximum(a, x) : math::minimum(a, x);
  }
};
// The index of the first extreme value; NaN counts as the extreme, as in PyTorch.
template <bool Max>
struct ArgR {
  static constexpr OpId id = Max ? OpId::Argmax : OpId::Argmin;
  static constexpr const char* python_name = Max ? "argmax" : "argmin";
  template <typename S> struct Acc {
    compute_t<S> value;
    int64_t index;
    operator int64_t() const { return index; }
  };
  template <typename S> static Acc<S> init() { return {ExtremeR<Max>::template init<S>(), -1}; }
  template <typename S> static void step(Acc<S>& a, compute_t<S> x, int64_t i) {
    if (a.index >= 0 && math::isnan(a.value)) return;
    bool better = a.index < 0 || math::isnan(x) || (Max ? x > a.value : x < a.value);
    if (better) a = {x, i};
  }
};

template <typename R>
OutputMeta infer(std::span<const InputMeta> in, const Attrs& attrs) {
  const InputMeta& x = in[0];
  auto mask = static_cast<uint64_t>(attrs[0]);
  bool keepdim = attrs[1] != 0;
  int64_t ndim = static_cast<int64_t>(x.shape.size());
  Dims shape;
  for (int64_t d = 0; d < ndim; ++d) {
    bool reduced = mask >> d & 1;
    if constexpr (R::id != OpId::Sum && R::id != OpId::Prod) {
      LOOM_CHECK(!reduced || x.shape[d] > 0, Index, R::python_name, "(): Expected reduction dim ", d,
                 " to have non-zero size.");
    }
    if (!reduced) shape.push_back(x.shape[d]);
    else if (keepdim) shape.push_back(1);
  }
  DType dtype = x.dtype;
  if (R::id == OpId::Sum || R::id == OpId::Prod) dtype = is_floating(x.dtype) ? x.dtype : DType::Int64;
  if (R::id == OpId::Argmax || R::id == OpId::Argmin) dtype = DType::Int64;
  return {dtype, std::move(shape)};
}

template <typename R, typename S, typename Out>
void reduce_typed(const Array& in, uint64_t mask, const Array& out) {
  using C = compute_t<S>;
  int64_t ndim = in.ndim();
  // Kept dims first (their order is the output's), reduced dims after.
  Dims order, kept_sizes, kept_strides, red_sizes, red_strides;
  for (int64_t d = 0; d < ndim; ++d)
    if (!(mask >> d & 1)) {
      kept_sizes.push_back(in.sizes()[d]);
      kept_strides.push_back(in.strides()[d] * static_cast<int64_t>(sizeof(S)));
    } else {
      red_sizes.push_back(in.sizes()[d]);
      red_strides.push_back(in.strides()[d] * static_cast<int64_t>(sizeof(S)));
    }
  Out* o = static_cast<Out*>(out.data());
  int64_t n_out = numel_of(kept_sizes);
  Dims index(kept_sizes.size(), 0);
  const char* base = static_cast<const char*>(in.data());
  for (int64_t k = 0; k < n_out; ++k) {
    const char* p = base;
    for (size_t d = 0; d < index.size(); ++d) p += index[d] * kept_strides[d];
    auto acc = R::template init<S>();
    int64_t i = 0;
    cpu::for_each_row<1>(red_sizes, {const_cast<char*>(p)}, {red_strides}, [&](const cpu::Row<1>& r) {
      const char* q = r.ptr[0];
      for (int64_t j = 0; j < r.size; ++j, q += r.stride[0], ++i)
        R::template step<S>(acc, static_cast<C>(*reinterpret_cast<const S*>(q)), i);
    });
    o[k] = convert<Out>(acc);
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < kept_sizes[d]) break;
      index[d] = 0;
    }
  }
}

template <typename R>
void run_cpu(std::span<const Operand> in, const Attrs& attrs, const Array& out) {
  const Array& x = *in[0].array;
  auto mask = static_cast<uint64_t>(attrs[0]);
  visit_dtype(x.dtype, [&](auto stag) {
    using S = decltype(stag);
    visit_dtype(out.dtype, [&](auto otag) {
      using Out = decltype(otag);
      if constexpr (std::is_same_v<Out, bool> && !std::is_same_v<S, bool>) {
        LOOM_FAIL(Runtime, "internal: bool result of a reduction over ", dtype_name(x.dtype));
      } else {
        reduce_typed<R, S, Out>(x, mask, out);
      }
    });
  });
}

template <typename R>
void define() {
  define_op(R::id, OpDef{op_def(R::id).name, OpClass::Reduction, infer<R>, run_cpu<R>});
}

const bool registered = [] {
  define<SumR>();
  define<ProdR>();
  define<ExtremeR<true>>();
  define<ExtremeR<false>>();
  define<ArgR<true>>();
  define<ArgR<false>>();
  return true;
}();

}  // namespace
}  // namespace loom
