// The runtime's CPU kernels: data movement and fills for host arrays. array.cpp routes to these
// for CPU arrays; compute ops belong to the op library, not here.
#pragma once

#include "runtime/array.h"

namespace loom::cpu {

// dst and src have the same sizes (src already broadcast); dtypes may differ.
void copy(const Array& dst, const Array& src);
void fill(const Array& dst, Scalar value);
void arange(const Array& dst, Scalar start, Scalar step);
void linspace(const Array& dst, double start, double end);
void uniform(const Array& dst, double low, double high, PhiloxState state);
void normal(const Array& dst, double mean, double std, PhiloxState state);
void random_int(const Array& dst, int64_t low, int64_t high, PhiloxState state);

}  // namespace loom::cpu
