// Definitions of the elementwise ops: the shape and dtype rule shared by all of them, the CPU
// kernel generated from each op's expression (lazy/elementwise.h), and Cast.
#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "lazy/elementwise.h"
#include "runtime/cpu/map.h"
#include "runtime/error.h"

namespace loom {
namespace {

template <typename S>
using compute_t = std::conditional_t<std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>, float, S>;

// An op's name as the Python function that runs it is spelled: BitwiseAnd -> bitwise_and.
std::string snake_name(const char* name) {
  std::string s;
  for (const char* c = name; *c; ++c) {
    if (std::isupper(static_cast<unsigned char>(*c)) && c != name) s += '_';
    s += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
  }
  return s;
}

template <typename F>
DType promoted(std::span<const InputMeta> in) {
  return promoted_dtype<F>(in);
}

template <typename F>
OutputMeta infer(std::span<const InputMeta> in, const Attrs&) {
  LOOM_CHECK(static_cast<int>(in.size()) == F::arity, Runtime, snake_name(op_name(F::id)), " expects ", F::arity,
             " operands, got ", in.size());
  // The broadcast shape: most ops meet operands of one shape, which need no broadcasting.
  Dims shape;
  bool first = true;
  for (const InputMeta& m : in) {
    if (m.is_scalar) continue;
    if (first) shape = Dims(m.shape);
    else if (!std::ranges::equal(shape, m.shape)) shape = broadcast_shapes(shape, m.shape);
    first = false;
  }
  if constexpr (F::rule == DTypeRule::Select) {
    LOOM_CHECK(!in[0].is_scalar && in[0].dtype == DType::Bool, Runtime,
               "where expected condition to be a boolean tensor, but got a tensor with dtype ",
               in[0].is_scalar ? "scalar" : dtype_name(in[0].dtype));
  }
  // PyTorch has no kernel of these ops for such dtypes: it says so in its dispatch message.
  auto not_implemented = [](DType d) {
    return detail::concat("\"", snake_name(op_name(F::id)), "\" not implemented for '",
                          dtype_info(d).scalar_type_name, "'");
  };
  if constexpr (F::rule == DTypeRule::Float) {
    for (const InputMeta& m : in) LOOM_CHECK(m.is_scalar || is_floating(m.dtype), Runtime, not_implemented(m.dtype));
  }
  DType p = promoted<F>(in);
  if constexpr (F::rule == DTypeRule::Integral) LOOM_CHECK(!is_floating(p), Runtime, not_implemented(p));
  if constexpr (F::rule == DTypeRule::Select) {
    // PyTorch converts a number operand of where to the result dtype with an overflow check.
    for (size_t i = 1; i < in.size(); ++i)
      if (in[i].is_scalar) in[i].value.check_fits(p);
  }
  if constexpr (F::id == OpId::FloorDiv || F::id == OpId::Remainder) {
    // A number divisor that is 0 in an integral result dtype (256 is 0 in uint8) needs no data to
    // be found: raise here, as eager mode does, not when a lazy trace runs.
    LOOM_CHECK(!is_integral(p, true) || !in[1].is_scalar || in[1].value.stored_as(p).as_int() != 0, Runtime,
               "ZeroDivisionError");
  }
  if constexpr (!F::allow_bool) {
    // PyTorch has no bool kernel of these either; negation and relu have messages of their own.
    if constexpr (F::id == OpId::Neg)
      LOOM_CHECK(p != DType::Bool, Runtime, "Negation, the `-` operator, on a bool tensor is not supported. If you "
                 "are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
    if constexpr (F::id == OpId::Relu) LOOM_CHECK(p != DType::Bool, Runtime, "Boolean inputs not supported for relu");
    LOOM_CHECK(p != DType::Bool, Runtime, not_implemented(p));
  }
  bool bool_out = F::rule == DTypeRule::Compare || F::rule == DTypeRule::Logical;
  return {bool_out ? DType::Bool : p, std::move(shape)};
}

// Integer floor division and remainder by a tensor holding a zero (in the compute dtype p: 256 is
// 0 in uint8) raise, as in PyTorch. A number divisor was checked when the op was recorded (infer).
void check_no_zero_divisor(const Operand& divisor, DType p) {
  if (!divisor.is_array()) return;
  Array nonzero = copy_to(copy_to(*divisor.array, p, kCPU), DType::Bool, kCPU);
  const bool* b = static_cast<const bool*>(nonzero.data());
  for (int64_t i = 0; i < nonzero.numel(); ++i) LOOM_CHECK(b[i], Runtime, "ZeroDivisionError");
}

// The storage type operand k is read as: bool for logical ops and where's condition, else S.
template <typename F, typename S, size_t K>
using input_t = std::conditional_t<F::rule == DTypeRule::Logical || (F::rule == DTypeRule::Select && K == 0), bool, S>;

template <typename F, typename S, size_t... K>
void run_typed(std::span<const Operand> in, const Array& out, std::index_sequence<K...>) {
  using C = compute_t<S>;
  using Out = std::conditional_t<F::rule == DTypeRule::Compare || F::rule == DTypeRule::Logical, bool, S>;
  constexpr size_t N = sizeof...(K);
  std::array<Array, N> converted;  // keeps dtype-converted inputs alive
  std::array<double, N> scalars;   // scalar operands, stored in their input type (<= 8 bytes)
  std::array<cpu::MapInput, N> inputs;
  auto prepare = [&]<size_t k>(std::integral_constant<size_t, k>) {
    using In = input_t<F, S, k>;
    const Operand& op = in[k];
    if (!op.is_array()) {
      *reinterpret_cast<In*>(&scalars[k]) = op.scalar.template to<In>();
      inputs[k] = {reinterpret_cast<const char*>(&scalars[k]), Dims(out.sizes().size(), 0)};
      return;
    }
    const Array* a = op.array;
    if (a->dtype != dtype_of<In>) {
      converted[k] = copy_to(*a, dtype_of<In>, kCPU);
      a = &converted[k];
    }
    // Broadcasting keeps the offset: the expanded view starts at the same element.
    inputs[k] = {static_cast<const char*>(a->data()), cpu::byte_strides(expand(a->layout, out.sizes()), sizeof(In))};
  };
  (prepare(std::integral_constant<size_t, K>{}), ...);
  if constexpr (F::rule == DTypeRule::Logical) {
    cpu::map<Out, input_t<F, S, K>...>(out, inputs, [](input_t<F, S, K>... v) { return F::f(v...); });
  } else if constexpr (F::rule == DTypeRule::Select) {
    cpu::map<Out, input_t<F, S, K>...>(out, inputs, [](bool c, S a, S b) {
      return convert<Out>(F::template f<C>(c, convert<C>(a), convert<C>(b)));
    });
  } else {
    cpu::map<Out, input_t<F, S, K>...>(out, inputs, [](input_t<F, S, K>... v) {
      return convert<Out>(F::template f<C>(convert<C>(v)...));
    });
  }
}

template <typename F>
void run_cpu(std::span<const Operand> in, const Attrs&, const Array& out) {
  std::array<InputMeta, F::arity> metas;
  for (int i = 0; i < F::arity; ++i) {
    if (in[i].is_array()) metas[i] = {false, ScalarKind::Float, in[i].array->dtype, in[i].array->sizes()};
    else metas[i] = {true, in[i].scalar.kind(), DType::Float32, {}, in[i].scalar};
  }
  DType p = promoted<F>(metas);
  if constexpr (F::id == OpId::FloorDiv || F::id == OpId::Remainder) {
    if (is_integral(p, true)) check_no_zero_divisor(in[1], p);
  }
  visit_dtype(p, [&](auto tag) {
    using S = decltype(tag);
    if constexpr (supports<F, S>()) run_typed<F, S>(in, out, std::make_index_sequence<F::arity>{});
    else LOOM_FAIL(Runtime, snake_name(op_name(F::id)), ": no CPU kernel for ", dtype_name(p));
  });
}

template <typename F>
void define() {
  define_op(F::id, OpDef{op_name(F::id), OpClass::Elementwise, infer<F>, run_cpu<F>});
}

// Cast: the input converted to attrs[0] (a DType).
OutputMeta infer_cast(std::span<const InputMeta> in, const Attrs& attrs) {
  return {static_cast<DType>(attrs[0]), Dims(in[0].shape)};
}
void run_cast(std::span<const Operand> in, const Attrs&, const Array& out) { copy_(out, *in[0].array); }

const bool registered = [] {
  for (int i = 0; i < kNumOps; ++i)
    visit_elementwise(static_cast<OpId>(i), [](auto op) { define<decltype(op)>(); });
  define_op(OpId::Cast, OpDef{"Cast", OpClass::Elementwise, infer_cast, run_cast});
  return true;
}();

}  // namespace

}  // namespace loom
