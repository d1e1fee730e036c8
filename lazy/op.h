// The primitive ops of loom's IR and the table that defines each one.
//
// An op is defined once, in one place (its family's file under lazy/ops_*.cpp), by an OpDef:
// its name, its family, its shape and dtype rule (`infer`, which raises the user-facing errors),
// and its CPU kernel (`run_cpu`); its derivative (`backward`, with the values it reads) is added to
// the same OpDef by lazy/derivatives.cpp. An elementwise op's kernel expression is one struct in
// lazy/elementwise.h, both the CPU kernel and fusion's generator. Composite ops (softmax, var, linear, ...) are not here: they
// are written in terms of primitives in lazy/ops.h, so they get every backend, fusion and
// derivatives for free.
//
// Attributes are a short list of int64 (dims, flags, dtypes, doubles bit-cast), part of a node's
// hash, so two nodes with equal op, dtype, shape, attributes and inputs compute the same value.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "runtime/array.h"
#include "runtime/small_vector.h"

namespace loom {

#define LOOM_FOR_EACH_OP(X)                                                                         \
  /* leaves */                                                                                      \
  X(Input) X(Scalar) X(Constant)                                                                    \
  /* elementwise, unary */                                                                          \
  X(Neg) X(Abs) X(Exp) X(Exp2) X(Log) X(Log2) X(Log1p) X(Expm1) X(Sqrt) X(Rsqrt) X(Sin) X(Cos)     \
  X(Tan) X(Tanh) X(Sigmoid) X(Relu) X(Gelu) X(GeluTanh) X(Silu) X(Softplus) X(Erf) X(Floor) X(Ceil) \
  X(Round) X(Sign) X(Reciprocal) X(Square) X(LogicalNot) X(IsNan) X(IsInf) X(Cast) X(NanToNum)     \
  X(BitwiseNot)                                                                                     \
  /* elementwise, binary */                                                                         \
  X(Add) X(Sub) X(Mul) X(Div) X(FloorDiv) X(Remainder) X(Pow) X(Maximum) X(Minimum) X(Eq) X(Ne)   \
  X(Lt) X(Le) X(Gt) X(Ge) X(LogicalAnd) X(LogicalOr) X(BitwiseAnd) X(BitwiseOr) X(BitwiseXor)      \
  /* elementwise, ternary */                                                                        \
  X(Where)                                                                                          \
  /* elementwise: more math, shifts and activations (lazy/elementwise.h) */                         \
  X(Log10) X(Asin) X(Acos) X(Atan) X(Sinh) X(Cosh) X(Asinh) X(Acosh) X(Atanh) X(Erfc) X(Erfinv)    \
  X(Trunc) X(Atan2) X(Hypot) X(Copysign) X(Xlogy) X(Fmod) X(Lshift) X(Rshift) X(Elu) X(Celu)         \
  X(LeakyRelu) X(Hardtanh) X(Hardsigmoid) X(Hardswish) X(LogSigmoid) X(Mish) X(Hardshrink)         \
  X(Softshrink) X(Threshold)                                                                        \
  /* elementwise: special functions (lazy/special_math.h) */                                       \
  X(I0) X(I1) X(I0e) X(I1e) X(K0) X(K1) X(K0e) X(K1e) X(Erfcx) X(Zeta)                             \
  /* reductions */                                                                                  \
  X(Sum) X(Prod) X(Amax) X(Amin) X(Argmax) X(Argmin)                                                \
  /* scans, sorting and sampling (lazy/ops_scan.cpp, ops_sort.cpp, ops_random.cpp) */               \
  X(Cumprod) X(Logcumsumexp) X(CumArgmax) X(CumArgmin) X(Sort) X(SearchSorted) X(Poisson)           \
  /* data movement */                                                                               \
  X(View) X(Cat) X(Cumsum) X(Index) X(Gather) X(ScatterAdd) X(IndexPut) X(ViewScatter)        \
  /* data movement: scatters by replacement and by reduction, bytes read as another dtype */       \
  X(Scatter) X(ScatterReduce) X(ViewDtype)                                                          \
  /* matrix products */                                                                             \
  X(MatMul)                                                                                         \
  /* convolution: windows summed into place (col2im, lazy/ops_windows.cpp) */                        \
  X(Col2Im)                                                                                         \
  /* creation */                                                                                    \
  X(Full) X(Arange) X(RandUniform) X(RandNormal) X(RandInt)                                         \
  /* collectives (lazy/collectives.h) */                                                            \
  X(AllReduce) X(Broadcast) X(AllGather) X(ReduceScatter) X(ReduceToRoot) X(GatherToRoot)          \
  X(ScatterFromRoot)                                                                                \
  /* LAPACK steps: factorizations and solvers (lazy/ops_lapack.cpp) */                             \
  X(LinalgCholeskyEx) X(LinalgSolveEx) X(LinalgSolveTriangular) X(LinalgDet) X(LinalgInfo) X(LinalgEigh) \
  X(LinalgSvd) X(LinalgQr) X(LinalgLu) X(LinalgLuSolve) X(LinalgLstsq)                             \
  /* elementwise: the optimizers' fused updates (lazy/elementwise.h, lazy/optimizer_steps.cpp) */   \
  X(AddScaled) X(EmaUpdate) X(EmaSquareUpdate) X(StepAlong) X(AdamUpdate)

enum class OpId : uint16_t {
#define LOOM_OP_ENUM(name) name,
  LOOM_FOR_EACH_OP(LOOM_OP_ENUM)
#undef LOOM_OP_ENUM
      kCount
};
inline constexpr int kNumOps = static_cast<int>(OpId::kCount);

enum class OpClass : uint8_t {
  Leaf,         // Input (a materialized tensor), Scalar (a Python number, a parameter), Constant
  Elementwise,  // broadcasting map over its inputs
  Reduction,    // over a set of dims (attrs: dim mask, keepdim)
  View,         // a strided view of its input: no data movement once fused
  Other,        // library calls and irregular data movement: fusion barriers
};

using Attrs = SmallVec<int64_t, 4>;

// What an op sees of an input before anything runs: a tensor's dtype and shape, or a scalar's kind
// and value (so that checks of numbers, a zero integer divisor or a fill value that does not fit,
// raise where the op is called, in lazy mode too).
struct InputMeta {
  bool is_scalar = false;
  ScalarKind kind = ScalarKind::Float;  // scalars only
  DType dtype = DType::Float32;         // tensors only
  IntSpan shape;                        // tensors only
  Scalar value{int64_t{0}};             // scalars only
};

// The result of an op's shape and dtype rule.
struct OutputMeta {
  DType dtype;
  Dims shape;
};

// An operand of a kernel: an array, or a Python number (converted to the compute dtype on use).
struct Operand {
  const Array* array = nullptr;
  Scalar scalar{int64_t{0}};

  static Operand of(const Array& a) { return Operand{&a, Scalar(int64_t{0})}; }
  static Operand of(Scalar s) { return Operand{nullptr, s}; }
  bool is_array() const noexcept { return array != nullptr; }
};

struct BackwardContext;  // lazy/autograd.h
class TensorImpl;
template <typename T>
class Ref;

// What an op's derivative reads of its inputs and its result. Autograd saves only that (an input
// not read leaves its shape and dtype), as PyTorch's derivatives.yaml does: writing an unread
// value in place later is no error, and a graph that saved nothing can be run backward again. Bit
// j of an input mask stands for input j (inputs past 63 share bit 63, see `inputs_from`). Numbers
// are always kept. Where PyTorch's formula reads the result (exp, tanh, sqrt, ...), so does
// loom's, so that the same in-place writes invalidate the same gradients.
struct SavedValues {
  // Inputs read when input i's gradient is wanted (i < 3; the inputs past the third, Cat's and
  // the index tensors, have no gradient that reads anything).
  std::array<uint64_t, 3> inputs_for{};
  uint8_t result_for = 0;  // bit i: the result is read when input i's gradient is wanted
  // The derivative reads which tensor inputs are column-major matrices (their layout, not their
  // values, as PyTorch's mm saves its operands' strides): BackwardContext::column_major.
  bool operand_layouts = false;

  // The inputs to save, and whether to save the result, when `needs_grad(i)` says which gradients
  // are wanted.
  template <typename NeedsGrad>
  std::pair<uint64_t, bool> wanted(size_t n_inputs, NeedsGrad&& needs_grad) const {
    uint64_t inputs = 0;
    bool result = false;
    for (size_t i = 0; i < n_inputs && i < inputs_for.size(); ++i)
      if (needs_grad(i)) {
        inputs |= inputs_for[i];
        result = result || (result_for >> i & 1);
      }
    return {inputs, result};
  }
  static bool reads(uint64_t mask, size_t input) noexcept { return mask >> (input < 63 ? input : 63) & 1; }
};
// Masks for SavedValues: input i, and every input from i on.
constexpr uint64_t input_bit(int i) { return uint64_t{1} << i; }
constexpr uint64_t inputs_from(int i) { return ~uint64_t{0} << i; }

struct OpDef {
  const char* name = nullptr;
  OpClass cls = OpClass::Other;
  // Shape and dtype of the result; raises loom::Error naming shapes and dtypes on bad input.
  OutputMeta (*infer)(std::span<const InputMeta> inputs, const Attrs& attrs) = nullptr;
  // Computes the result into `out` (allocated with the inferred meta, contiguous) on the CPU.
  void (*run_cpu)(std::span<const Operand> inputs, const Attrs& attrs, const Array& out) = nullptr;
  // The derivative: gradients of the inputs from the gradient of the output, written in loom ops
  // (so it runs eagerly or records lazily like any op). nullptr: not differentiable.
  void (*backward)(const BackwardContext& ctx, std::vector<Ref<TensorImpl>>& grads) = nullptr;
  // run_cpu cannot raise on any data it is given (no index to check, no integer division): a
  // sync cannot fail once it has run, so an executor may write in-place results into their
  // destinations before it (graph/compiled.cpp). Unset, an op is assumed to be able to fail.
  bool data_safe = false;
  // The values `backward` reads, saved when the op is recorded.
  SavedValues saves;
};

const OpDef& op_def(OpId op) noexcept;
inline const char* op_name(OpId op) noexcept { return op_def(op).name; }

// Registration, used by the ops_*.cpp files at static-initialization time. define_backward adds
// an op's derivative and what it reads (in lazy/derivatives.cpp, beside the op library's
// composites).
void define_op(OpId op, const OpDef& def);
void define_backward(OpId op, void (*backward)(const BackwardContext&, std::vector<Ref<TensorImpl>>&),
                     SavedValues saves);

}  // namespace loom
