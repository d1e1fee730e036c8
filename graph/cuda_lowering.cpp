// Lowering a fused program for CUDA (graph/cuda_program.h): one table of words, launches that
// point into it, and matrix products.
#include <algorithm>
#include <cstring>
#include <tuple>

#include "graph/binding.h"
#include "graph/cuda_program.h"
#include "lazy/collectives.h"
#include "runtime/cuda/kernel_source.h"
#include "runtime/determinism.h"
#include "runtime/warning.h"

namespace loom::graph {
namespace {

// A strided view of memory the lowering hands to a kernel.
struct View {
  Address address;
  DType dtype = DType::Float32;
  Dims sizes;
  Dims strides;
};

// A word of an sp array: a constant, or a scalar leaf of the trace patched every run.
struct Word {
  int64_t value = 0;
  Patch::Kind patch = Patch::Pointer;  // Pointer: a constant
  int32_t node = -1;
  DType dtype = DType::Float32;
};

Word constant(int64_t v) { return {v}; }

std::string node_name(const Trace& t, int32_t node) {
  return std::string(op_name(t.nodes[node]->op())) + " -> %" + std::to_string(node);
}

// Row-major strides of a matrix operand with those of size-1 dims set to values BLAS accepts.
std::pair<int64_t, int64_t> matrix_strides(IntSpan sizes, IntSpan strides) {
  size_t nd = sizes.size();
  int64_t rows = sizes[nd - 2], cols = sizes[nd - 1];
  int64_t rs = strides[nd - 2], cs = strides[nd - 1];
  if (cols == 1) cs = 1;
  if (rows == 1) rs = std::max<int64_t>(cols, 1);
  return {rs, cs};
}

bool blas_friendly(IntSpan sizes, IntSpan strides) {
  size_t nd = sizes.size();
  int64_t rows = sizes[nd - 2], cols = sizes[nd - 1];
  auto [rs, cs] = matrix_strides(sizes, strides);
  return (cs == 1 && rs >= cols) || (rs == 1 && cs >= rows);
}

// The element offset of every index of `sizes` under `strides`, in row-major order.
std::vector<int64_t> offsets_of(IntSpan sizes, IntSpan strides) {
  std::vector<int64_t> out(static_cast<size_t>(numel_of(sizes)));
  Dims index(sizes.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < sizes.size(); ++d) o += index[d] * strides[d];
    out[i] = o;
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

class Lowering {
 public:
  Lowering(const Trace& t, const fusion::Program& p, bool tf32) : t_(t), p_(p), tf32_(tf32) {}

  CudaProgram run(const fusion::RenderedModule& rendered) {
    for (const fusion::Step& step : p_.steps) {
      if (step.kind == fusion::Step::RunKernel) fused(step.kernel, rendered);
      else if (step.kind == fusion::Step::RunOp) library(step);
    }
    write_backs();
    return std::move(out_);
  }

 private:
  // ---- the table ----

  int64_t put(std::span<const int64_t> words) {
    int64_t at = static_cast<int64_t>(out_.table.size());
    out_.table.insert(out_.table.end(), words.begin(), words.end());
    return at;
  }
  int64_t reserve(int64_t words, int64_t align = 1) {
    while (out_.table.size() % static_cast<size_t>(align)) out_.table.push_back(0);
    int64_t at = static_cast<int64_t>(out_.table.size());
    out_.table.resize(out_.table.size() + static_cast<size_t>(words), 0);
    return at;
  }
  int64_t put_words(const std::vector<Word>& words) {
    int64_t at = reserve(static_cast<int64_t>(words.size()));
    for (size_t i = 0; i < words.size(); ++i) {
      const Word& w = words[i];
      int64_t word = at + static_cast<int64_t>(i);
      if (w.patch == Patch::Pointer) out_.table[static_cast<size_t>(word)] = w.value;
      else out_.patches.push_back({w.patch, word, {}, w.node, w.dtype, -1});
    }
    return at;
  }
  int64_t put_pointers(const std::vector<Address>& addresses) {
    int64_t at = reserve(static_cast<int64_t>(addresses.size()));
    for (size_t i = 0; i < addresses.size(); ++i)
      if (addresses[i].kind != Address::Null)
        out_.patches.push_back({Patch::Pointer, at + static_cast<int64_t>(i), addresses[i]});
    return at;
  }

  // A scalar leaf as a sp word: folded constants are known now, parameters are patched.
  Word scalar(int32_t node, Patch::Kind how, DType dtype = DType::Float32) {
    const Node& n = *t_.nodes[node];
    if (n.op() == OpId::Scalar) return {0, how, node, dtype};
    LOOM_CHECK(n.op() == OpId::Constant, Runtime, "internal: ", op_name(n.op()), " is not a scalar leaf");
    const Scalar& v = n.scalar();
    switch (how) {
      case Patch::ScalarAbi: return constant(v.is_float() ? cuda::double_bits(v.as_double()) : v.as_int());
      case Patch::ScalarInt: return constant(v.as_int());
      case Patch::ScalarDouble: return constant(cuda::double_bits(v.as_double()));
      default: break;
    }
    int64_t bits = 0;
    visit_dtype(dtype, [&](auto tag) {
      auto x = v.to<decltype(tag)>();
      std::memcpy(&bits, &x, sizeof x);
    });
    return constant(bits);
  }

  Launch& launch(CudaModule module, std::string kernel, int64_t items, const std::vector<int64_t>& ip,
                 const std::vector<Word>& sp, const std::vector<Address>& bufs, std::string what) {
    Launch l;
    l.module = module;
    l.kernel = std::move(kernel);
    l.items = items;
    l.ip = put(ip);
    l.sp = put_words(sp.empty() ? std::vector<Word>{constant(0)} : sp);
    l.bufs = put_pointers(bufs);
    l.what = std::move(what);
    out_.steps.push_back({CudaStep::Kernel, static_cast<int32_t>(out_.launches.size())});
    out_.launches.push_back(std::move(l));
    return out_.launches.back();
  }

  // A launch whose ip ends with a data error's code (its last word).
  void reports(Launch& l, ErrorKind kind, std::string message) {
    l.data_error = {{kind, std::move(message)}};
    l.error_code_word = l.sp - 1;  // ip is written right before sp; its last word is the code
  }

  // ---- views of the program's values ----

  const Node& node(int32_t i) const { return *t_.nodes[i]; }
  bool is_scalar(int32_t i) const { return node(i).op() == OpId::Scalar || node(i).op() == OpId::Constant; }

  View stored(int32_t value) const {
    int32_t b = p_.buffer_of[value];
    LOOM_CHECK(b >= 0, Runtime, "internal: value %", value, " has no buffer");
    const fusion::Buffer& buf = p_.buffers[b];
    return {{Address::Buffer, b, 0}, buf.dtype, Dims(node(value).shape()), Dims(buf.layout.strides)};
  }
  View operand(const fusion::Operand& o) const {
    View v = stored(o.value);
    if (o.view) {
      v.address.byte_offset = o.view->offset * static_cast<int64_t>(itemsize(v.dtype));
      v.sizes = o.view->sizes;
      v.strides = o.view->strides;
    }
    return v;
  }
  static View narrowed(View v, int64_t dim, int64_t start, int64_t length) {
    v.address.byte_offset += start * v.strides[dim] * static_cast<int64_t>(itemsize(v.dtype));
    v.sizes[dim] = length;
    return v;
  }

  // dst <- src (same sizes, src broadcast already), converting the dtype.
  void copy(const View& dst, const View& src, const std::string& what) {
    if (numel_of(dst.sizes) == 0) return;
    launch(CudaModule::Runtime, cuda::copy_kernel(dst.dtype, src.dtype), numel_of(dst.sizes),
           cuda::strided_ip(dst.sizes, dst.strides, src.strides),
           {constant(cuda::dtype_code(dst.dtype)), constant(cuda::dtype_code(src.dtype))}, {src.address, dst.address},
           what);
  }
  void fill_zero(const View& dst, const std::string& what) {
    if (numel_of(dst.sizes) == 0) return;
    launch(CudaModule::Runtime, cuda::fill_kernel(dst.dtype), numel_of(dst.sizes), cuda::strided_ip(dst.sizes, dst.strides),
           {constant(0)}, {dst.address}, what);
  }

  // ---- fused kernels ----

  void fused(int32_t k, const fusion::RenderedModule& rendered) {
    const fusion::Kernel& kernel = p_.kernels[k];
    int64_t rows = numel_of(kernel.outer), inner = numel_of(kernel.inner);
    if (rows == 0 && kernel.split_block == 0) return;  // nothing to store (a row kernel over empty rows still stores per row)
    std::vector<Word> sp;
    for (int32_t n : kernel.params) sp.push_back(scalar(n, Patch::ScalarAbi));
    std::vector<Address> bufs;
    for (const fusion::Load& l : kernel.loads) bufs.push_back(stored(l.access.value).address);
    for (const fusion::Store& s : kernel.stores) bufs.push_back(stored(s.access.value).address);
    std::vector<int64_t> ip = rendered.int_params[k];
    if (ip.empty()) ip.push_back(0);
    if (kernel.split_block > 0) {
      // A split reduction: a block per split block, then one block combining the partials.
      bufs.push_back({Address::Scratch, scratch(fusion::split_scratch_bytes(kernel)), 0});
      int64_t blocks = (rows + kernel.split_block - 1) / kernel.split_block;
      if (blocks > 0) launch(CudaModule::Fused, rendered.symbols[k], blocks, ip, sp, bufs, kernel.name).row_inner =
          kernel.split_block;
      Launch& second = launch(CudaModule::Fused, rendered.combine_symbols[k], 1, ip, sp, bufs, kernel.name);
      second.row_inner = blocks;
      second.second_pass = true;
      return;
    }
    Launch& l = launch(CudaModule::Fused, rendered.symbols[k], rows, ip, sp, bufs, kernel.name);
    // A row per block; a column reduction walks its rows a thread each (fusion/program.h).
    if (kernel.row && !fusion::reduces_columns(kernel)) l.row_inner = inner;
  }

  // ---- library steps ----

  void library(const fusion::Step& step) {
    const Node& n = node(step.node);
    View out = stored(step.node);
    std::string what = node_name(t_, step.node);
    const Attrs& a = n.attrs();
    auto& ops = step.operands;
    switch (n.op()) {
      case OpId::View: return copy(out, operand(ops[0]), what);
      case OpId::Cat: {
        int64_t start = 0;
        for (const fusion::Operand& o : ops) {
          View in = operand(o);
          if (in.sizes.size() == 1 && in.sizes[0] == 0) continue;  // legacy empty tensors add nothing
          int64_t len = in.sizes[a[0]];
          copy(narrowed(out, a[0], start, len), in, what);
          start += len;
        }
        return;
      }
      case OpId::ViewScatter: {
        copy(out, operand(ops[0]), what);
        View src = operand(ops[1]);
        View region = out;
        region.sizes = src.sizes;
        region.strides = Dims(a.begin() + 1, a.end());
        region.address.byte_offset += a[0] * static_cast<int64_t>(itemsize(out.dtype));
        return copy(region, src, what);
      }
      case OpId::Arange: return arange(step, out, what);
      case OpId::RandUniform:
      case OpId::RandNormal:
      case OpId::RandInt: return random(step, out, what);
      case OpId::MatMul: return matmul(step, out, what);
      case OpId::Gather: return gather(step, out, what);
      case OpId::ScatterAdd: return scatter_add(step, out, what);
      case OpId::Index: return index(step, out, what);
      case OpId::IndexPut: return index_put(step, out, what);
      case OpId::Cumsum: return cumsum(step, out, what);
      case OpId::Col2Im: return col2im(step, out, what);
      case OpId::Scatter:
      case OpId::ScatterReduce: return scatter(step, out, what);
      case OpId::ViewDtype: return view_dtype(step, out, what);
      case OpId::Cumprod:
      case OpId::Logcumsumexp:
      case OpId::CumArgmax:
      case OpId::CumArgmin: return scan(step, out, what);
      case OpId::Sort: return sort(step, out, what);
      case OpId::SearchSorted: return searchsorted(step, out, what);
      case OpId::Poisson: return poisson(step, out, what);
      case OpId::FloorDiv:
      case OpId::Remainder: return int_divmod(step, out, what);
      default: break;
    }
    if (collectives::is_collective(n.op())) return collective(step, out, what);
    // torch.linalg's LAPACK steps (lazy/ops_lapack.cpp) have no GPU kernels (cuSOLVER) yet: say
    // which op and where, rather than lowering something no GPU has run.
    switch (n.op()) {
      case OpId::LinalgCholeskyEx:
      case OpId::LinalgSolveEx:
      case OpId::LinalgSolveTriangular:
      case OpId::LinalgDet:
      case OpId::LinalgInfo:
      case OpId::LinalgEigh:
      case OpId::LinalgSvd:
      case OpId::LinalgQr:
      case OpId::LinalgLu:
      case OpId::LinalgLuSolve:
      case OpId::LinalgLstsq:
        LOOM_FAIL(NotImplemented, "torch.linalg's ", op_name(n.op()),
                  " is not implemented on CUDA devices (lazy:cuda) yet: it runs on cpu and lazy:cpu (LAPACK); "
                  "move its input there (", what, ")");
      default: break;
    }
    LOOM_FAIL(NotImplemented, "the CUDA backend has no kernel for ", op_name(n.op()), " yet");
  }

  void arange(const fusion::Step& step, const View& out, const std::string& what) {
    if (numel_of(out.sizes) == 0) return;
    int32_t start = step.operands[0].value, stride = step.operands[1].value;
    bool integral = is_integral(out.dtype) && !node(start).scalar().is_float() && !node(stride).scalar().is_float();
    launch(CudaModule::Runtime, "loom_arange", numel_of(out.sizes), {numel_of(out.sizes)},
           {constant(cuda::dtype_code(out.dtype)), scalar(start, Patch::ScalarInt), scalar(stride, Patch::ScalarInt),
            scalar(start, Patch::ScalarDouble), scalar(stride, Patch::ScalarDouble), constant(integral)},
           {out.address}, what);
  }

  void random(const fusion::Step& step, const View& out, const std::string& what) {
    if (numel_of(out.sizes) == 0) return;
    OpId op = node(step.node).op();
    auto& o = step.operands;
    std::vector<Word> sp = {constant(cuda::dtype_code(out.dtype)), scalar(o[0].value, Patch::ScalarInt),
                            scalar(o[1].value, Patch::ScalarInt)};
    Patch::Kind bounds = op == OpId::RandInt ? Patch::ScalarInt : Patch::ScalarDouble;
    sp.push_back(scalar(o[2].value, bounds));
    sp.push_back(scalar(o[3].value, bounds));
    if (op == OpId::RandUniform) sp.push_back(constant(dtype_info(out.dtype).mantissa_digits));
    const char* kernel = op == OpId::RandUniform ? "loom_uniform" : op == OpId::RandNormal ? "loom_normal" : "loom_randint";
    launch(CudaModule::Runtime, kernel, numel_of(out.sizes), cuda::strided_ip(out.sizes, out.strides), sp, {out.address},
           what);
  }

  void matmul(const fusion::Step& step, const View& out, const std::string& what) {
    View a = operand(step.operands[0]), b = operand(step.operands[1]);
    size_t nd = out.sizes.size();
    Gemm g;
    g.dtype = out.dtype;
    g.tf32 = tf32_ && out.dtype == DType::Float32;
    g.m = out.sizes[nd - 2];
    g.n = out.sizes[nd - 1];
    g.k = a.sizes[a.sizes.size() - 1];
    Dims batch(IntSpan(out.sizes).first(nd - 2));
    g.batches = numel_of(batch);
    g.what = what;
    if (g.m == 0 || g.n == 0 || g.batches == 0) return;
    if (g.k == 0) return fill_zero(out, what);  // an empty sum
    bool integer = !is_floating(g.dtype);
    auto operand_of = [&](View v, const char* side) {
      // cuBLAS reads row- or column-major matrices; anything else is first copied contiguous.
      if (!integer && !blas_friendly(v.sizes, v.strides)) {
        View dense{{Address::Scratch, scratch(numel_of(v.sizes) * static_cast<int64_t>(itemsize(v.dtype))), 0},
                   v.dtype, v.sizes, contiguous_strides(v.sizes)};
        copy(dense, v, what + " (" + side + " operand made contiguous)");
        v = dense;
      }
      Dims target = batch;
      target.push_back(v.sizes[v.sizes.size() - 2]);
      target.push_back(v.sizes[v.sizes.size() - 1]);
      Layout l = expand(Layout{v.sizes, v.strides, 0}, target);
      Gemm::Operand op;
      op.address = v.address;
      std::tie(op.row_stride, op.col_stride) = matrix_strides(l.sizes, l.strides);
      op.batch_offsets = offsets_of(batch, IntSpan(l.strides).first(nd - 2));
      return op;
    };
    g.left = operand_of(a, "left");
    g.right = operand_of(b, "right");
    g.out.address = out.address;
    g.out.row_stride = g.n;
    g.out.col_stride = 1;
    g.out.batch_offsets = offsets_of(batch, IntSpan(out.strides).first(nd - 2));
    g.padded = (g.batches + 3) / 4 * 4;
    g.pointers = reserve(3 * g.padded, 2);
    int32_t index = static_cast<int32_t>(out_.gemms.size());
    out_.patches.push_back({Patch::GemmPointers, g.pointers, {}, -1, g.dtype, index});
    if (integer) {
      launch(CudaModule::Library, "loom_int_matmul", g.batches * g.m * g.n,
             {g.batches, g.m, g.n, g.k, g.left.row_stride, g.left.col_stride, g.right.row_stride, g.right.col_stride,
              g.n, cuda::dtype_code(g.dtype)},
             {}, {{Address::Table, static_cast<int32_t>(g.pointers), 0},
                  {Address::Table, static_cast<int32_t>(g.pointers + g.padded), 0},
                  {Address::Table, static_cast<int32_t>(g.pointers + 2 * g.padded), 0}},
             what);
      out_.gemms.push_back(std::move(g));  // its pointers are patched; no cuBLAS call
      return;
    }
    out_.steps.push_back({CudaStep::MatMul, index});
    out_.gemms.push_back(std::move(g));
  }

  int32_t scratch(int64_t bytes) {
    int64_t at = (out_.scratch_bytes + 255) / 256 * 256;
    out_.scratch.push_back(at);
    out_.scratch_bytes = at + std::max<int64_t>(bytes, 1);
    return static_cast<int32_t>(out_.scratch.size() - 1);
  }

  void gather(const fusion::Step& step, const View& out, const std::string& what) {
    int64_t n = numel_of(out.sizes);
    if (n == 0) return;
    View x = operand(step.operands[0]), idx = operand(step.operands[1]);
    int64_t dim = node(step.node).attrs()[0];
    auto r = static_cast<int64_t>(idx.sizes.size());
    Dims xs = x.sizes.empty() ? Dims(static_cast<size_t>(r), 0) : x.strides;
    int64_t dim_size = x.sizes.empty() ? 1 : x.sizes[dim];
    std::vector<int64_t> ip{n, r};
    ip.insert(ip.end(), idx.sizes.begin(), idx.sizes.end());
    ip.insert(ip.end(), xs.begin(), xs.end());
    ip.insert(ip.end(), idx.strides.begin(), idx.strides.end());
    ip.insert(ip.end(), {dim, dim_size, static_cast<int64_t>(itemsize(x.dtype)), 0});
    Launch& l = launch(CudaModule::Library, "loom_gather", n, ip, {}, {x.address, idx.address, out.address, error()}, what);
    reports(l, ErrorKind::Runtime,
            "gather(): index out of bounds for dimension " + std::to_string(dim) + " with size " + std::to_string(dim_size));
  }

  // loom_col2im's ip: output elements, k, B, R, then per window dim extent, size, count, stride,
  // dilation (k each), the input's strides over (B, size..., count..., R), its dtype code.
  void col2im(const fusion::Step& step, const View& out, const std::string& what) {
    int64_t n = numel_of(out.sizes);
    if (n == 0) return;
    View in = operand(step.operands[0]);
    const Attrs& a = node(step.node).attrs();
    int64_t k = a[0];
    std::vector<int64_t> ip{n, k, in.sizes[0], in.sizes.back()};
    for (int64_t part : {0, 1})  // extent, size
      for (int64_t i = 0; i < k; ++i) ip.push_back(a[1 + part * k + i]);
    for (int64_t i = 0; i < k; ++i) ip.push_back(in.sizes[1 + k + i]);  // count
    for (int64_t part : {2, 3})  // stride, dilation
      for (int64_t i = 0; i < k; ++i) ip.push_back(a[1 + part * k + i]);
    ip.insert(ip.end(), in.strides.begin(), in.strides.end());
    ip.push_back(cuda::dtype_code(out.dtype));
    launch(CudaModule::Library, "loom_col2im", n, ip, {}, {in.address, out.address}, what);
  }

  void scatter_add(const fusion::Step& step, const View& out, const std::string& what) {
    View x = operand(step.operands[0]), idx = operand(step.operands[1]), src = operand(step.operands[2]);
    copy(out, x, what);
    int64_t n = numel_of(idx.sizes);
    if (n == 0) return;
    if (is_floating(out.dtype) && deterministic_algorithms().enabled)
      warn_once("scatter_add deterministic",
                "scatter_add (index_add, the gradients of gathers and embeddings) accumulates floating values with "
                "atomics on a GPU: the order of its sums, and so its last bits, can differ between runs although "
                "loom.use_deterministic_algorithms(True) was set (loom has no deterministic form of it yet)");
    int64_t dim = node(step.node).attrs()[0];
    auto r = static_cast<int64_t>(idx.sizes.size());
    int64_t dim_size = out.sizes.empty() ? 1 : out.sizes[dim];
    std::vector<int64_t> ip{n, r};
    ip.insert(ip.end(), idx.sizes.begin(), idx.sizes.end());
    ip.insert(ip.end(), out.strides.begin(), out.strides.end());
    ip.insert(ip.end(), idx.strides.begin(), idx.strides.end());
    ip.insert(ip.end(), src.strides.begin(), src.strides.begin() + r);  // src is read at index's positions
    ip.insert(ip.end(), {dim, dim_size, cuda::dtype_code(out.dtype), 0});
    Launch& l = launch(CudaModule::Library, "loom_scatter_add", n, ip, {}, {idx.address, src.address, out.address, error()},
                       what);
    reports(l, ErrorKind::Runtime, "scatter_add(): index out of bounds for dimension " + std::to_string(dim) +
                                       " with size " + std::to_string(dim_size));
  }

  // Scatter and ScatterReduce: out is x, then (include_self=False) a pass that resets the
  // targets, then src combined into them (loom_scatter_reduce; its ip: the header and strides of
  // loom_scatter_add, then kind, reset, the error code).
  void scatter(const fusion::Step& step, const View& out, const std::string& what) {
    View x = operand(step.operands[0]), idx = operand(step.operands[1]), src = operand(step.operands[2]);
    copy(out, x, what);
    int64_t n = numel_of(idx.sizes);
    if (n == 0) return;
    const Node& nd = node(step.node);
    const Attrs& a = nd.attrs();
    int64_t dim = a[0], kind = nd.op() == OpId::Scatter ? 0 : a[1];
    bool include_self = kind == 0 || a[2] != 0;
    auto r = static_cast<int64_t>(idx.sizes.size());
    int64_t dim_size = out.sizes.empty() ? 1 : out.sizes[dim];
    std::string message = "scatter(): index out of bounds for dimension " + std::to_string(dim) + " with size " +
                          std::to_string(dim_size);
    for (int64_t reset : {int64_t{1}, int64_t{0}}) {
      if (reset && include_self) continue;
      std::vector<int64_t> ip{n, r};
      ip.insert(ip.end(), idx.sizes.begin(), idx.sizes.end());
      ip.insert(ip.end(), out.strides.begin(), out.strides.end());
      ip.insert(ip.end(), idx.strides.begin(), idx.strides.end());
      ip.insert(ip.end(), src.strides.begin(), src.strides.begin() + r);  // src is read at index's positions
      ip.insert(ip.end(), {dim, dim_size, cuda::dtype_code(out.dtype), kind, reset, 0});
      Launch& l = launch(CudaModule::Library, "loom_scatter_reduce", n, ip, {},
                         {idx.address, src.address, out.address, error()}, what);
      reports(l, ErrorKind::Runtime, message);
    }
  }

  // ViewDtype: the input's bytes copied dense into the output, whose buffer seen in the input's
  // dtype and shape receives them unchanged.
  void view_dtype(const fusion::Step& step, const View& out, const std::string& what) {
    View in = operand(step.operands[0]);
    LOOM_CHECK(out.strides == contiguous_strides(out.sizes), Runtime, "internal: ViewDtype into a strided buffer");
    copy(View{out.address, in.dtype, in.sizes, contiguous_strides(in.sizes)}, in, what);
  }

  // The ip of loom_index / loom_index_put from its header to the index blocks: the index space
  // `sizes` (pre dims, broadcast index dims, post dims), the indexed tensor's strides over it,
  // then per index its strides over it, the indexed dim's stride and size, and its width.
  std::vector<int64_t> index_ip(const View& target, const std::vector<View>& indices, int64_t first, Dims& space) {
    auto k = static_cast<int64_t>(indices.size());
    Dims b;
    for (const View& i : indices) b = broadcast_shapes(b, i.sizes);
    space = Dims(IntSpan(target.sizes).first(static_cast<size_t>(first)));
    for (int64_t s : b) space.push_back(s);
    for (size_t d = static_cast<size_t>(first + k); d < target.sizes.size(); ++d) space.push_back(target.sizes[d]);
    auto R = static_cast<int64_t>(space.size());
    auto nb = static_cast<int64_t>(b.size());
    Dims base;  // the target's strides over the space: 0 along the index dims
    for (int64_t d = 0; d < first; ++d) base.push_back(target.strides[d]);
    for (int64_t d = 0; d < nb; ++d) base.push_back(0);
    for (size_t d = static_cast<size_t>(first + k); d < target.sizes.size(); ++d) base.push_back(target.strides[d]);
    std::vector<int64_t> ip{numel_of(space), R, k};
    ip.insert(ip.end(), space.begin(), space.end());
    ip.insert(ip.end(), base.begin(), base.end());
    for (int64_t t = 0; t < k; ++t) {
      const View& i = indices[static_cast<size_t>(t)];
      Layout e = expand(Layout{i.sizes, i.strides, 0}, b);
      for (int64_t d = 0; d < R; ++d) ip.push_back(d >= first && d < first + nb ? e.strides[d - first] : 0);
      ip.push_back(target.strides[first + t]);
      ip.push_back(target.sizes[first + t]);
      ip.push_back(i.dtype == DType::Int64);
    }
    return ip;
  }

  void index(const fusion::Step& step, const View& out, const std::string& what) {
    int64_t n = numel_of(out.sizes);
    if (n == 0) return;
    const Attrs& a = node(step.node).attrs();
    View x = operand(step.operands[0]);
    std::vector<View> indices;
    std::vector<Address> bufs{x.address};
    for (size_t j = 1; j < step.operands.size(); ++j) {
      indices.push_back(operand(step.operands[j]));
      bufs.push_back(indices.back().address);
    }
    bufs.push_back(out.address);
    bufs.push_back(error());
    bool select = a.size() > 1 && a[1] != 0;
    Dims space;
    std::vector<int64_t> ip = index_ip(x, indices, a[0], space);
    ip.insert(ip.end(), {select ? 0 : 1, static_cast<int64_t>(itemsize(x.dtype)), 0});
    Launch& l = launch(CudaModule::Library, "loom_index", n, ip, {}, bufs, what);
    reports(l, ErrorKind::Index, select ? "index out of range in self" : "index out of bounds of the indexed dimension");
  }

  void index_put(const fusion::Step& step, const View& out, const std::string& what) {
    const Attrs& a = node(step.node).attrs();
    copy(out, operand(step.operands[0]), what);
    const fusion::Operand& values = step.operands[1];
    bool has_values = !is_scalar(values.value);
    std::vector<View> indices;
    std::vector<Address> bufs{has_values ? operand(values).address : Address{}};
    for (size_t j = 2; j < step.operands.size(); ++j) {
      indices.push_back(operand(step.operands[j]));
      bufs.push_back(indices.back().address);
    }
    bufs.push_back(out.address);
    bufs.push_back(error());
    Dims space;
    std::vector<int64_t> ip = index_ip(out, indices, a[0], space);
    if (numel_of(space) == 0) return;
    DType value_type = out.dtype;
    if (has_values) {
      View v = operand(values);
      value_type = v.dtype;
      Layout e = expand(Layout{v.sizes, v.strides, 0}, space);
      ip.insert(ip.end(), e.strides.begin(), e.strides.end());
    } else {
      ip.insert(ip.end(), space.size(), 0);
    }
    bool select = a.size() > 2 && a[2] != 0;  // index_select's rule: negative indices are out of range
    ip.insert(ip.end(), {has_values, a[1] != 0, cuda::dtype_code(out.dtype), cuda::dtype_code(value_type), !select, 0});
    std::vector<Word> sp{has_values ? constant(0) : scalar(values.value, Patch::ScalarIn, out.dtype)};
    Launch& l = launch(CudaModule::Library, "loom_index_put", numel_of(space), ip, sp, bufs, what);
    reports(l, ErrorKind::Index, select ? "index out of range in self" : "index out of bounds of the indexed dimension");
  }

  // The ip of a kernel over the lines along dim attrs[0] of `out` (x of out's shape): lines, rank,
  // sizes, x's strides, out's strides, dim, x's and out's dtypes. `lines` is set to their count.
  std::vector<int64_t> lines_ip(const fusion::Step& step, const View& x, const View& out, int64_t& lines) {
    auto r = static_cast<int64_t>(out.sizes.size());
    int64_t dim = r > 0 ? node(step.node).attrs()[0] : 0;
    lines = r > 0 ? numel_of(out.sizes) / out.sizes[dim] : 1;
    std::vector<int64_t> ip{lines, r};
    ip.insert(ip.end(), out.sizes.begin(), out.sizes.end());
    ip.insert(ip.end(), x.strides.begin(), x.strides.end());
    ip.insert(ip.end(), out.strides.begin(), out.strides.end());
    ip.insert(ip.end(), {dim, cuda::dtype_code(x.dtype), cuda::dtype_code(out.dtype)});
    return ip;
  }

  void cumsum(const fusion::Step& step, const View& out, const std::string& what) {
    if (numel_of(out.sizes) == 0) return;
    View x = operand(step.operands[0]);
    int64_t lines = 0;
    std::vector<int64_t> ip = lines_ip(step, x, out, lines);
    launch(CudaModule::Library, "loom_cumsum", lines, ip, {}, {x.address, out.address}, what);
  }

  // Cumprod, Logcumsumexp, CumArgmax, CumArgmin: loom_scan, one thread per line; its last ip word
  // says which.
  void scan(const fusion::Step& step, const View& out, const std::string& what) {
    if (numel_of(out.sizes) == 0) return;
    View x = operand(step.operands[0]);
    int64_t lines = 0;
    std::vector<int64_t> ip = lines_ip(step, x, out, lines);
    OpId op = node(step.node).op();
    ip.push_back(op == OpId::Cumprod ? 0 : op == OpId::Logcumsumexp ? 1 : op == OpId::CumArgmax ? 2 : 3);
    launch(CudaModule::Library, "loom_scan", lines, ip, {}, {x.address, out.address}, what);
  }

  // loom_sort: one block per line, a bitonic sort of (key, index) pairs padded to a power of two,
  // in shared memory up to kSortShared elements, else in scratch memory.
  void sort(const fusion::Step& step, const View& out, const std::string& what) {
    if (numel_of(out.sizes) == 0) return;
    View x = operand(step.operands[0]);
    int64_t lines = 0;
    std::vector<int64_t> ip = lines_ip(step, x, out, lines);
    int64_t n = out.sizes.empty() ? 1 : out.sizes[node(step.node).attrs()[0]];
    int64_t padded = 1;
    while (padded < n) padded *= 2;
    ip.push_back(node(step.node).attrs()[1]);  // descending
    ip.push_back(padded);
    std::vector<Address> bufs{x.address, out.address};
    if (padded > kSortShared) {
      bufs.push_back({Address::Scratch, scratch(lines * padded * 8), 0});
      bufs.push_back({Address::Scratch, scratch(lines * padded * 4), 0});
    }
    Launch& l = launch(CudaModule::Library, "loom_sort", lines, ip, {}, bufs, what);
    l.row_inner = padded / 2;  // a block per line, a thread per compared pair
  }
  static constexpr int64_t kSortShared = 2048;  // LOOM_SORT_SHARED in the kernel

  // loom_searchsorted: a thread per value. The sorted tensor's (and the sorter's) strides over the
  // values' dims pick each value's row: 0 along the last dim, and along every dim for a 1-d one.
  void searchsorted(const fusion::Step& step, const View& out, const std::string& what) {
    int64_t n = numel_of(out.sizes);
    if (n == 0) return;
    const Attrs& a = node(step.node).attrs();
    View sorted = operand(step.operands[0]), values = operand(step.operands[1]);
    bool has_sorter = step.operands.size() > 2;
    View sorter = has_sorter ? operand(step.operands[2]) : sorted;
    auto r = static_cast<int64_t>(out.sizes.size());
    auto row_strides = [&](const View& v) {
      Dims s(static_cast<size_t>(r), 0);
      if (v.sizes.size() > 1)
        for (int64_t d = 0; d + 1 < r; ++d) s[static_cast<size_t>(d)] = v.strides[static_cast<size_t>(d)];
      return s;
    };
    Dims bs = row_strides(sorted), ss = row_strides(sorter);
    std::vector<int64_t> ip{n, r};
    ip.insert(ip.end(), out.sizes.begin(), out.sizes.end());
    ip.insert(ip.end(), values.strides.begin(), values.strides.end());
    ip.insert(ip.end(), bs.begin(), bs.end());
    ip.insert(ip.end(), ss.begin(), ss.end());
    ip.insert(ip.end(), out.strides.begin(), out.strides.end());
    DType common = promote_types(sorted.dtype, values.dtype);
    ip.insert(ip.end(), {sorted.sizes.back(), sorted.strides.back(), sorter.strides.back(), a[0],
                         cuda::dtype_code(sorted.dtype), cuda::dtype_code(values.dtype), cuda::dtype_code(out.dtype),
                         has_sorter, is_floating(common), 0});
    Launch& l = launch(CudaModule::Library, "loom_searchsorted", n, ip, {},
                       {sorted.address, values.address, has_sorter ? sorter.address : Address{}, out.address, error()},
                       what);
    reports(l, ErrorKind::Runtime, "torch.searchsorted(): sorter index out of range");
  }

  // loom_poisson: a thread per element, Philox of (seed, offset, element) as the CPU's sampler.
  void poisson(const fusion::Step& step, const View& out, const std::string& what) {
    int64_t n = numel_of(out.sizes);
    if (n == 0) return;
    View rates = operand(step.operands[0]);
    std::vector<int64_t> ip = cuda::strided_ip(out.sizes, out.strides, rates.strides);
    ip.insert(ip.end(), {cuda::dtype_code(rates.dtype), cuda::dtype_code(out.dtype), 0});
    std::vector<Word> sp{scalar(step.operands[1].value, Patch::ScalarInt), scalar(step.operands[2].value, Patch::ScalarInt)};
    Launch& l = launch(CudaModule::Library, "loom_poisson", n, ip, sp, {rates.address, out.address, error()}, what);
    reports(l, ErrorKind::Runtime, "invalid Poisson rate, expected rate to be non-negative");
  }

  void int_divmod(const fusion::Step& step, const View& out, const std::string& what) {
    int64_t n = numel_of(out.sizes);
    if (n == 0) return;
    auto r = static_cast<int64_t>(out.sizes.size());
    std::vector<int64_t> ip{n, r};
    ip.insert(ip.end(), out.sizes.begin(), out.sizes.end());
    std::vector<Address> bufs;
    std::vector<Word> sp;
    std::vector<int64_t> types, scalars;
    for (const fusion::Operand& o : step.operands) {
      if (is_scalar(o.value)) {
        ip.insert(ip.end(), static_cast<size_t>(r), 0);
        bufs.push_back({});
        sp.push_back(scalar(o.value, Patch::ScalarIn, out.dtype));
        types.push_back(cuda::dtype_code(out.dtype));
        scalars.push_back(1);
        continue;
      }
      View v = operand(o);
      Layout e = expand(Layout{v.sizes, v.strides, 0}, out.sizes);
      ip.insert(ip.end(), e.strides.begin(), e.strides.end());
      bufs.push_back(v.address);
      sp.push_back(constant(0));
      types.push_back(cuda::dtype_code(v.dtype));
      scalars.push_back(0);
    }
    ip.push_back(node(step.node).op() == OpId::Remainder);
    ip.insert(ip.end(), {types[0], types[1], cuda::dtype_code(out.dtype), scalars[0], scalars[1], 0});
    bufs.push_back(out.address);
    bufs.push_back(error());
    Launch& l = launch(CudaModule::Library, "loom_int_divmod", n, ip, sp, bufs, what);
    reports(l, ErrorKind::Runtime, "ZeroDivisionError");
  }

  // A collective between fixed scratch regions (CollectiveCall): operand in, call, result out.
  void collective(const fusion::Step& step, const View& out, const std::string& what) {
    const Node& n = node(step.node);
    View x = operand(step.operands[0]);
    CollectiveCall c;
    c.call = collectives::call(n.op(), n.attrs(), x.dtype, x.sizes);
    c.group = n.attrs()[0];
    c.what = what;
    auto group = distributed::group(c.group);
    int64_t size = static_cast<int64_t>(itemsize(x.dtype));
    int64_t in_count = distributed::input_count(c.call, *group), out_count = distributed::output_count(c.call, *group);
    View in{{Address::Scratch, scratch(in_count * size), 0}, x.dtype, x.sizes, contiguous_strides(x.sizes)};
    if (in_count > 0) copy(in, x, what + " (its operand, to a fixed address)");
    c.in = in.address;
    bool in_place = c.call.kind == distributed::Kind::AllReduce || c.call.kind == distributed::Kind::Broadcast ||
                    c.call.kind == distributed::Kind::Reduce;
    c.out = in_place ? in.address : Address{Address::Scratch, scratch(out_count * size), 0};
    out_.steps.push_back({CudaStep::Collective, static_cast<int32_t>(out_.collectives.size())});
    out_.collectives.push_back(std::move(c));
    copy(out, View{out_.collectives.back().out, out.dtype, out.sizes, contiguous_strides(out.sizes)},
         what + " (its result, from a fixed address)");
  }

  static Address error() { return {Address::ErrorWord, -1, 0}; }

  // ---- in-place results, last ----

  void write_backs() {
    // Old values another write-back overwrites are copied aside first (binding.h).
    std::vector<bool> take_aside = write_backs_to_take_aside(p_, t_);
    std::vector<std::optional<View>> source(t_.outputs.size());
    for (size_t o = 0; o < t_.outputs.size(); ++o) {
      const Trace::Output& out = t_.outputs[o];
      if (!out.destination) continue;
      View value = stored(out.node);
      source[o] = value;
      if (!take_aside[o] || numel_of(value.sizes) == 0) continue;
      View aside{{Address::Scratch, scratch(numel_of(value.sizes) * static_cast<int64_t>(itemsize(value.dtype))), 0},
                 value.dtype, value.sizes, contiguous_strides(value.sizes)};
      copy(aside, value, "the old value of in-place output " + std::to_string(o) + " (" + node_name(t_, out.node) + ")");
      source[o] = aside;
    }
    for (size_t o = 0; o < t_.outputs.size(); ++o) {
      const Trace::Output& out = t_.outputs[o];
      if (!out.destination) continue;
      View value = *source[o];
      int64_t n = numel_of(value.sizes);
      if (n == 0) continue;
      DType dst = out.destination->dtype;
      Launch l;
      l.module = CudaModule::Runtime;
      l.kernel = cuda::copy_kernel(dst, value.dtype);
      l.items = n;
      l.ip = reserve(walk_words(static_cast<int64_t>(value.sizes.size())));
      out_.patches.push_back({Patch::Walk, l.ip, {}, -1, dst, static_cast<int32_t>(o), value.strides});
      l.sp = put(std::vector<int64_t>{cuda::dtype_code(dst), cuda::dtype_code(value.dtype)});
      l.bufs = put_pointers({value.address, {Address::Destination, static_cast<int32_t>(o), 0}});
      l.what = "the write-back of in-place output " + std::to_string(o) + " (" + node_name(t_, out.node) + ")";
      out_.steps.push_back({CudaStep::Kernel, static_cast<int32_t>(out_.launches.size())});
      out_.launches.push_back(std::move(l));
    }
  }

  const Trace& t_;
  const fusion::Program& p_;
  bool tf32_;
  CudaProgram out_;
};

}  // namespace

CudaProgram lower_for_cuda(const Trace& trace, const fusion::Program& program, const fusion::RenderedModule& rendered,
                           bool allow_tf32) {
  return Lowering(trace, program, allow_tf32).run(rendered);
}

}  // namespace loom::graph
