// map(): the CPU loop of every elementwise kernel.
//
// out[i] = fn(in_0[i], ..., in_{N-1}[i]) over out's index space, where each input is a strided
// view already broadcast to out's shape (stride 0 where broadcast) with storage type In_k, and
// the output has storage type Out. Rows whose operands are all dense take a loop the compiler
// can vectorize.
#pragma once

#include <array>
#include <tuple>
#include <utility>

#include "runtime/array.h"
#include "runtime/cpu/strided_loop.h"

namespace loom::cpu {

// An input of map(): base address and byte strides over out's shape.
struct MapInput {
  const char* base;
  Dims strides;
};

template <typename Out, typename... In, typename Fn, size_t... I>
void map_impl(const Array& out, const std::array<MapInput, sizeof...(In)>& ins, Fn&& fn,
              std::index_sequence<I...>) {
  constexpr size_t K = sizeof...(In) + 1;
  std::array<char*, K> base = {static_cast<char*>(out.data()), const_cast<char*>(ins[I].base)...};
  std::array<Dims, K> strides = {byte_strides(out.layout, sizeof(Out)), ins[I].strides...};
  for_each_row<K>(out.sizes(), base, strides, [&](const Row<K>& r) {
    Out* o = reinterpret_cast<Out*>(r.ptr[0]);
    bool dense = r.stride[0] == sizeof(Out) && ((r.stride[I + 1] == sizeof(In)) && ...);
    if (dense) {
      std::tuple<const In*...> p{reinterpret_cast<const In*>(r.ptr[I + 1])...};
      for (int64_t i = 0; i < r.size; ++i) o[i] = fn(std::get<I>(p)[i]...);
      return;
    }
    for (int64_t i = 0; i < r.size; ++i)
      *reinterpret_cast<Out*>(r.ptr[0] + i * r.stride[0]) =
          fn(*reinterpret_cast<const In*>(r.ptr[I + 1] + i * r.stride[I + 1])...);
  });
}

template <typename Out, typename... In, typename Fn>
void map(const Array& out, const std::array<MapInput, sizeof...(In)>& ins, Fn&& fn) {
  map_impl<Out, In...>(out, ins, std::forward<Fn>(fn), std::index_sequence_for<In...>{});
}

}  // namespace loom::cpu
