// The argument table of one run of a lowered CUDA program (graph/cuda_program.h), and the BLAS
// form of its matrix products. Host code only: the CUDA executor and the host emulator
// (graph/cuda_emulator.h) write tables the same way.
#include <algorithm>
#include <cstring>

#include "graph/cuda_program.h"
#include "runtime/cuda/kernel_source.h"

namespace loom::graph {

BlasShape blas_shape(const Gemm& g) {
  BlasShape b;
  b.trans_a = g.right.col_stride != 1;
  b.lda = b.trans_a ? g.right.col_stride : g.right.row_stride;
  b.trans_b = g.left.col_stride != 1;
  b.ldb = b.trans_b ? g.left.col_stride : g.left.row_stride;
  b.ldc = g.out.row_stride;
  b.m = g.n;
  b.n = g.m;
  b.k = g.k;
  return b;
}

std::vector<int64_t> patch_table(const CudaProgram& lowered, const Trace& t,
                                 const std::vector<Array>& arrays, const TableBases& bases, bool& aligned) {
  std::vector<int64_t> words = lowered.table;
  auto resolve = [&](const Address& a) -> uintptr_t {
    uintptr_t base = 0;
    switch (a.kind) {
      case Address::Buffer: base = reinterpret_cast<uintptr_t>(arrays[static_cast<size_t>(a.index)].data()); break;
      case Address::Scratch: base = bases.scratch + static_cast<uintptr_t>(lowered.scratch[static_cast<size_t>(a.index)]); break;
      case Address::Destination:
        base = reinterpret_cast<uintptr_t>(t.outputs[static_cast<size_t>(a.index)].destination->data());
        break;
      case Address::Table: base = bases.table + static_cast<uintptr_t>(a.index) * sizeof(int64_t); break;
      case Address::ErrorWord: base = bases.error_word; break;
      case Address::Null: return 0;
    }
    return base + static_cast<uintptr_t>(a.byte_offset);
  };
  aligned = true;
  for (const Patch& p : lowered.patches) {
    int64_t* w = words.data() + p.word;
    switch (p.kind) {
      case Patch::Pointer: *w = static_cast<int64_t>(resolve(p.address)); break;
      case Patch::ScalarAbi: {
        const Scalar& v = t.nodes[p.node]->scalar();
        *w = v.is_float() ? cuda::double_bits(v.as_double()) : v.as_int();
        break;
      }
      case Patch::ScalarInt: *w = t.nodes[p.node]->scalar().as_int(); break;
      case Patch::ScalarDouble: *w = cuda::double_bits(t.nodes[p.node]->scalar().as_double()); break;
      case Patch::ScalarIn: {
        const Scalar& v = t.nodes[p.node]->scalar();
        *w = 0;
        visit_dtype(p.dtype, [&](auto tag) {
          auto x = v.to<decltype(tag)>();
          std::memcpy(w, &x, sizeof x);
        });
        break;
      }
      case Patch::Walk: {
        const Array& dst = *t.outputs[static_cast<size_t>(p.index)].destination;
        std::vector<int64_t> ip = cuda::strided_ip(dst.sizes(), dst.strides(), p.strides);
        LOOM_CHECK(static_cast<int64_t>(ip.size()) <= walk_words(dst.ndim()), Runtime, "internal: write-back walk");
        std::copy(ip.begin(), ip.end(), w);
        break;
      }
      case Patch::GemmPointers: {
        const Gemm& g = lowered.gemms[static_cast<size_t>(p.index)];
        auto item = static_cast<int64_t>(itemsize(g.dtype));
        const Gemm::Operand* ops[] = {&g.left, &g.right, &g.out};
        for (int which = 0; which < 3; ++which) {
          uintptr_t base = resolve(ops[which]->address);
          int64_t* array = w + which * g.padded;
          for (int64_t b = 0; b < g.padded; ++b) {
            // Padding repeats the last pointer: a valid address, whatever cuBLAS reads ahead.
            int64_t offset = ops[which]->batch_offsets[static_cast<size_t>(std::min(b, g.batches - 1))];
            uintptr_t ptr = base + static_cast<uintptr_t>(offset * item);
            array[b] = static_cast<int64_t>(ptr);
            if (is_floating(g.dtype) && ptr % kGemmPointerAlign != 0) aligned = false;
          }
        }
        break;
      }
    }
  }
  return words;
}

}  // namespace loom::graph
