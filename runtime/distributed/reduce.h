// The elementwise reductions of collectives on host memory: acc[i] = acc[i] op x[i]. Gloo's
// reduction functions (gloo.cpp) and the direct all-reduce (collective.cpp) both use them, so
// every path reduces alike. Integers are exact in their own type; float16 and bfloat16 are
// computed in float and rounded once; MIN and MAX propagate NaN; on bool, SUM and MAX are "or",
// PRODUCT and MIN "and", as in PyTorch. Every op is commutative, so acc may be either operand.
#pragma once

#include <algorithm>
#include <cstddef>

#include "runtime/distributed/group.h"

namespace loom::distributed {

template <typename T>
void reduce_into(T* acc, const T* x, size_t n, ReduceOp op) {
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      acc[i] = op == ReduceOp::Sum || op == ReduceOp::Max ? (acc[i] || x[i]) : (acc[i] && x[i]);
    } else if constexpr (std::is_integral_v<T> || std::is_floating_point_v<T>) {
      T a = acc[i], b = x[i];
      switch (op) {
        case ReduceOp::Product: acc[i] = static_cast<T>(a * b); break;
        case ReduceOp::Min: acc[i] = a != a ? a : b != b ? b : std::min(a, b); break;
        case ReduceOp::Max: acc[i] = a != a ? a : b != b ? b : std::max(a, b); break;
        default: acc[i] = static_cast<T>(a + b); break;
      }
    } else {  // float16, bfloat16
      float a = convert<float>(acc[i]), b = convert<float>(x[i]), r;
      switch (op) {
        case ReduceOp::Product: r = a * b; break;
        case ReduceOp::Min: r = a != a ? a : b != b ? b : std::min(a, b); break;
        case ReduceOp::Max: r = a != a ? a : b != b ? b : std::max(a, b); break;
        default: r = a + b; break;
      }
      acc[i] = convert<T>(r);
    }
  }
}

inline void reduce_into(void* acc, const void* x, size_t n, DType dtype, ReduceOp op) {
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    reduce_into(static_cast<T*>(acc), static_cast<const T*>(x), n, op);
  });
}

}  // namespace loom::distributed
