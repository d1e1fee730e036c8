// The elementwise reductions of collectives on host memory: out[i] = a[i] op b[i], and
// reduce_into's acc[i] = acc[i] op x[i]. Gloo's
// reduction functions (gloo.cpp) and the direct all-reduce (collective.cpp) both use them, so
// every path reduces alike. Integers are exact in their own type; float16 and bfloat16 are
// computed in float and rounded once; MIN and MAX propagate NaN; on bool, SUM and MAX are "or",
// PRODUCT and MIN "and", as in PyTorch. Every op is commutative, so acc may be either operand.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "runtime/distributed/group.h"

namespace loom::distributed {

// One vectorized loop per op (a switch inside one loop kept it scalar: the direct all-reduce of
// BENCH mlp's 41k float gradients spent 17 us of each step here).
template <typename T>
void combine(T* out, const T* a, const T* b, size_t n, ReduceOp op) {
  auto each = [&](auto f) {
    // out, a and b are each the same buffer as another or disjoint (CMakeLists.txt: -fopenmp-simd).
#pragma omp simd
    for (size_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (op == ReduceOp::Sum || op == ReduceOp::Max) each([](bool a, bool b) { return a || b; });
    else each([](bool a, bool b) { return a && b; });
  } else if constexpr (std::is_integral_v<T> || std::is_floating_point_v<T>) {
    switch (op) {
      case ReduceOp::Product: return each([](T a, T b) { return static_cast<T>(a * b); });
      case ReduceOp::Min: return each([](T a, T b) { return a != a ? a : b != b ? b : std::min(a, b); });
      case ReduceOp::Max: return each([](T a, T b) { return a != a ? a : b != b ? b : std::max(a, b); });
      default: return each([](T a, T b) { return static_cast<T>(a + b); });
    }
  } else {  // float16, bfloat16
    auto in_float = [&](auto f) {
      each([f](T a, T b) { return convert<T>(f(convert<float>(a), convert<float>(b))); });
    };
    switch (op) {
      case ReduceOp::Product: return in_float([](float a, float b) { return a * b; });
      case ReduceOp::Min: return in_float([](float a, float b) { return a != a ? a : b != b ? b : std::min(a, b); });
      case ReduceOp::Max: return in_float([](float a, float b) { return a != a ? a : b != b ? b : std::max(a, b); });
      default: return in_float([](float a, float b) { return a + b; });
    }
  }
}

template <typename T>
void reduce_into(T* acc, const T* x, size_t n, ReduceOp op) {
  combine(acc, acc, x, n, op);
}

inline void combine(void* out, const void* a, const void* b, size_t n, DType dtype, ReduceOp op) {
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    combine(static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), n, op);
  });
}

inline void reduce_into(void* acc, const void* x, size_t n, DType dtype, ReduceOp op) {
  combine(acc, acc, x, n, dtype, op);
}

}  // namespace loom::distributed
