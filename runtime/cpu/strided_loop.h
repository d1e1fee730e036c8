// Iteration over strided memory for the CPU kernels of the runtime.
//
// for_each_row visits the index space `sizes` shared by K operands, one innermost row at a time,
// after dropping size-1 dims and merging dims that are contiguous in every operand, so a copy of
// two contiguous arrays is a single row however many dims they have.
#pragma once

#include <array>
#include <cstdint>

#include "runtime/layout.h"

namespace loom::cpu {

template <size_t K>
struct Row {
  std::array<char*, K> ptr;        // first element of the row, per operand
  std::array<int64_t, K> stride;  // byte stride along the row, per operand
  int64_t size;
};

// strides are in bytes. body(const Row<K>&) is called once per row.
template <size_t K, typename Body>
void for_each_row(IntSpan sizes, std::array<char*, K> base, std::array<Dims, K> strides, Body&& body) {
  if (numel_of(sizes) == 0) return;
  // Merged dims, outermost first.
  Dims dim_sizes;
  std::array<Dims, K> dim_strides;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool merge = !dim_sizes.empty();
    for (size_t k = 0; k < K && merge; ++k) merge = dim_strides[k].back() == strides[k][d] * sizes[d];
    if (merge) {
      dim_sizes.back() *= sizes[d];
      for (size_t k = 0; k < K; ++k) dim_strides[k].back() = strides[k][d];
    } else {
      dim_sizes.push_back(sizes[d]);
      for (size_t k = 0; k < K; ++k) dim_strides[k].push_back(strides[k][d]);
    }
  }
  Row<K> row;
  if (dim_sizes.empty()) {
    row.ptr = base;
    row.stride.fill(0);
    row.size = 1;
    body(row);
    return;
  }
  size_t inner = dim_sizes.size() - 1;
  row.size = dim_sizes[inner];
  for (size_t k = 0; k < K; ++k) row.stride[k] = dim_strides[k][inner];
  Dims index(inner, 0);  // counters of the outer dims
  for (;;) {
    for (size_t k = 0; k < K; ++k) {
      char* p = base[k];
      for (size_t d = 0; d < inner; ++d) p += index[d] * dim_strides[k][d];
      row.ptr[k] = p;
    }
    body(row);
    size_t d = inner;
    while (d > 0) {
      --d;
      if (++index[d] < dim_sizes[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (inner == 0) return;
  }
}

inline Dims byte_strides(const Layout& l, size_t itemsize) {
  Dims s(l.strides);
  for (auto& v : s) v *= static_cast<int64_t>(itemsize);
  return s;
}

}  // namespace loom::cpu
