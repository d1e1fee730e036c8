#include "lazy/sampling.h"

#include <cmath>
#include <limits>
#include <optional>

#include "lazy/autograd.h"
#include "lazy/capture.h"
#include "lazy/sorting.h"
#include "runtime/error.h"

namespace loom::ops {
namespace {

constexpr double kPi = 3.141592653589793;

// `value` with a zero gradient with respect to `params`, as PyTorch's samplers have: the
// where() routes the whole gradient to the (gradient-free) sample and zeros to the parameters.
Tensor zero_gradient(const Tensor& value, std::initializer_list<Tensor> params) {
  Tensor others;
  for (const Tensor& p : params)
    if (p && grad_enabled() && requires_grad(*p)) others = others ? add(others, p) : p;
  if (!others) return value;
  return where(full(Dims{}, Scalar(true), DType::Bool, placement_of(*value)), value, others);
}

// A tensor argument's values when they are known without a sync (not pending), for the checks
// PyTorch makes on them.
std::optional<Array> known_values(const Tensor& t) {
  if (t->is_pending()) return std::nullopt;
  return copy_to(t->array(), DType::Float64, kCPU);
}

template <typename Pred>
bool all_of(const Array& values, Pred&& pred) {
  const double* p = static_cast<const double*>(values.data());
  for (int64_t i = 0; i < values.numel(); ++i)
    if (!pred(p[i])) return false;
  return true;
}

void require_floating_kernel(DType d, const char* kernel) {
  LOOM_CHECK(is_floating(d), Runtime, "\"", kernel, "\" not implemented for '", dtype_info(d).scalar_type_name, "'");
}

// Uniform doubles in [0, 1) shaped like self.
Tensor unit(const TensorImpl& self) { return rand(self.sizes(), DType::Float64, placement_of(self)); }

void fill_with(TensorImpl& self, const Tensor& value, const char* backward_name) {
  write_into(self, value, InplaceWrite::Kind{.overwrite = backward_name, .lists_value = false});
}

}  // namespace

// ---- distributions ----

Tensor bernoulli(const Tensor& p) {
  require_floating_kernel(p->dtype(), "bernoulli_tensor_cpu_p_");
  if (auto v = known_values(p))
    LOOM_CHECK(all_of(*v, [](double x) { return x >= 0 && x <= 1; }), Runtime,
               "Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
  Tensor u = rand(p->sizes(), p->dtype() == DType::Float64 ? DType::Float64 : DType::Float32, placement_of(*p));
  return zero_gradient(cast(binary(OpId::Lt, u, p), p->dtype()), {p});
}

Tensor bernoulli(const Tensor& like, double p) {
  LOOM_CHECK(p >= 0 && p <= 1, Runtime, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  return cast(binary(OpId::Lt, unit(*like), Scalar(p)), like->dtype());
}

Tensor normal(const Arg& mean, const Arg& std) {
  const Tensor& like = mean.is_tensor() ? mean.tensor : std.tensor;
  LOOM_CHECK(like, Runtime, "normal(): mean or std must be a tensor");
  DType dtype = mean.is_tensor() && std.is_tensor() ? promote_types(mean.tensor->dtype(), std.tensor->dtype())
                                                    : like->dtype();
  require_floating_kernel(dtype, "normal_kernel_cpu");
  if (std.is_tensor()) {
    if (auto v = known_values(std.tensor))
      LOOM_CHECK(all_of(*v, [](double x) { return x >= 0; }), Runtime, "normal expects all elements of std >= 0.0");
  } else {
    LOOM_CHECK(std.scalar.as_double() >= 0, Runtime, "normal expects std >= 0.0, but found std ", std.scalar.as_double());
  }
  Dims shape = broadcast_shapes(mean.is_tensor() ? IntSpan(mean.tensor->sizes()) : IntSpan(),
                                std.is_tensor() ? IntSpan(std.tensor->sizes()) : IntSpan());
  Tensor value;
  {
    GradModeGuard no_grad(false);
    value = add(mean, mul(std, randn(shape, dtype, placement_of(*like))));
  }
  return zero_gradient(value, {mean.tensor, std.tensor});
}

Tensor poisson(const Tensor& rates) {
  PhiloxState s = generator_for_draw(rates->device(), rates->is_lazy()).draw();
  Tensor value;
  {
    GradModeGuard no_grad(false);
    value = apply(OpId::Poisson, {Arg(rates), Arg::param(Scalar(static_cast<int64_t>(s.seed))),
                                  Arg::param(Scalar(static_cast<int64_t>(s.offset)))});
  }
  return zero_gradient(value, {rates});
}

// With replacement: each sample inverts the row's cumulative weights at a uniform point. Without:
// the categories with the smallest exponential races E / w (E ~ Exp(1)), which is sampling one
// category after another, each in proportion to the weights of those left (weight 0: never
// before the others).
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  LOOM_CHECK(probs->ndim() == 1 || probs->ndim() == 2, Runtime, "prob_dist must be 1 or 2 dim");
  LOOM_CHECK(is_floating(probs->dtype()), Runtime, "multinomial only supports floating-point dtypes for input, got: ",
             dtype_info(probs->dtype()).scalar_type_name);
  LOOM_CHECK(num_samples > 0, Runtime, "cannot sample n_sample <= 0 samples");
  int64_t categories = probs->sizes().back();
  LOOM_CHECK(replacement || num_samples <= categories, Runtime,
             "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  LOOM_CHECK(categories <= (int64_t{1} << 24), Runtime, "number of categories cannot exceed 2^24");
  if (auto v = known_values(probs)) {
    LOOM_CHECK(all_of(*v, [](double x) { return std::isfinite(x) && x >= 0; }), Runtime,
               "probability tensor contains either `inf`, `nan` or element < 0");
    const double* p = static_cast<const double*>(v->data());
    // Without replacement, categories of weight 0 are drawn last (as PyTorch's CPU kernel does).
    for (int64_t row = 0; row < v->numel() / std::max<int64_t>(categories, 1); ++row) {
      double total = 0;
      for (int64_t c = 0; c < categories; ++c) total += p[row * categories + c];
      LOOM_CHECK(total > 0, Runtime, "invalid multinomial distribution (sum of probabilities <= 0)");
    }
  }
  Placement place = placement_of(*probs);
  Tensor w = cast(probs->ndim() == 1 ? unsqueeze(probs, 0) : probs, DType::Float64);
  int64_t rows = w->sizes()[0];
  Tensor samples;
  if (replacement) {
    Tensor cdf = cumsum(w, -1);
    Tensor total = narrow(cdf, -1, categories - 1, 1);
    Tensor point = mul(rand(Dims{rows, num_samples}, DType::Float64, place), total);
    // u * total rounds to total once in 2^53 draws: search 0 then (the first category with weight).
    point = where(binary(OpId::Ge, point, total), Scalar(0.0), point);
    samples = searchsorted(cdf, Arg(point), false, true);
  } else {
    Tensor races = unary(OpId::Neg, unary(OpId::Log1p, unary(OpId::Neg, rand(Dims{rows, categories}, DType::Float64, place))));
    samples = narrow(argsort(div(races, w), -1), -1, 0, num_samples);
  }
  return probs->ndim() == 1 ? squeeze(samples, DimList{0}) : samples;
}

Tensor randperm(int64_t n, DType dtype, Placement where) {
  LOOM_CHECK(n >= 0, Runtime, "Trying to create tensor with negative dimension ", n, ": [", n, "]");
  // The order of random 64-bit keys (ties, one in 2^64 per pair, keep the index order).
  Tensor keys = randint(Dims{n}, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                        DType::Int64, where);
  return cast(argsort(keys, 0), dtype);
}

// ---- in-place fills ----
// Each refuses a tensor whose elements share memory (an expanded view) before drawing anything, as
// PyTorch does: which draw lands in a shared element would depend on the write order, and an
// expansion of 2^62 elements would draw 2^62 values first.

void uniform_(TensorImpl& self, double from, double to) {
  require_floating_kernel(self.dtype(), "check_uniform_bounds");
  check_no_internal_overlap(self);
  LOOM_CHECK(from <= to, Runtime, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  fill_with(self, rand(self.sizes(), self.dtype(), placement_of(self), from, to), "UniformBackward0");
}

void normal_(TensorImpl& self, double mean, double std) {
  require_floating_kernel(self.dtype(), "normal_kernel_cpu");
  check_no_internal_overlap(self);
  LOOM_CHECK(std >= 0, Runtime, "normal expects std >= 0.0, but found std ", std);
  fill_with(self, randn(self.sizes(), self.dtype(), placement_of(self), mean, std), "NormalBackward0");
}

void exponential_(TensorImpl& self, double lambd) {
  require_floating_kernel(self.dtype(), "exponential_cpu");
  check_no_internal_overlap(self);
  LOOM_CHECK(lambd >= 0, Runtime, "exponential_ expects lambda >= 0.0, but found lambda=", lambd);
  Tensor e = unary(OpId::Neg, unary(OpId::Log1p, unary(OpId::Neg, unit(self))));
  fill_with(self, cast(div(e, Scalar(lambd)), self.dtype()), "ExponentialBackward0");
}

// The number of trials up to the first success: floor(log(1 - u) / log(1 - p)) + 1.
void geometric_(TensorImpl& self, double p) {
  check_no_internal_overlap(self);
  LOOM_CHECK(p > 0 && p < 1, Runtime, "geometric_ expects p to be in (0, 1), but got p=", p);
  Tensor trials = unary(OpId::Floor, div(unary(OpId::Log1p, unary(OpId::Neg, unit(self))), Scalar(std::log1p(-p))));
  fill_with(self, cast(add(trials, Scalar(int64_t{1})), self.dtype()), "GeometricBackward0");
}

void log_normal_(TensorImpl& self, double mean, double std) {
  require_floating_kernel(self.dtype(), "log_normal_cpu");
  check_no_internal_overlap(self);
  LOOM_CHECK(std > 0, Runtime, "log_normal_ expects std > 0.0, but found std=", std);
  Tensor n = randn(self.sizes(), DType::Float64, placement_of(self), mean, std);
  fill_with(self, cast(unary(OpId::Exp, n), self.dtype()), "LogNormalBackward0");
}

void cauchy_(TensorImpl& self, double median, double sigma) {
  require_floating_kernel(self.dtype(), "cauchy_cpu");
  check_no_internal_overlap(self);
  LOOM_CHECK(sigma > 0, Runtime, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  Tensor t = unary(OpId::Tan, mul(sub(unit(self), Scalar(0.5)), Scalar(kPi)));
  fill_with(self, cast(add(mul(t, Scalar(sigma)), Scalar(median)), self.dtype()), "CauchyBackward0");
}

void random_(TensorImpl& self, std::optional<int64_t> from, std::optional<int64_t> to) {
  check_no_internal_overlap(self);
  DType d = self.dtype();
  // The largest value the dtype holds exactly, and the smallest.
  int64_t top = 0, bottom = 0;
  if (d == DType::Bool) {
    top = 1, bottom = 0;
  } else if (is_floating(d)) {
    top = int64_t{1} << dtype_info(d).mantissa_digits, bottom = -top;
  } else {
    visit_dtype(d, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T>) {
        top = static_cast<int64_t>(std::numeric_limits<T>::max());
        bottom = static_cast<int64_t>(std::numeric_limits<T>::lowest());
      }
    });
  }
  int64_t low = from.value_or(0);
  // [low, top]: high = top + 1, except that int64's top + 1 does not exist (its top is left out).
  int64_t high = to ? *to : (top == std::numeric_limits<int64_t>::max() ? top : top + 1);
  LOOM_CHECK(low < high, Runtime, "random_ expects 'from' to be less than 'to', but got from=", low, " >= to=", high);
  LOOM_CHECK(low >= bottom && low <= top, Runtime, "from is out of bounds for ", dtype_name(d));
  LOOM_CHECK(high - 1 >= bottom && high - 1 <= top, Runtime, "to - 1 is out of bounds for ", dtype_name(d));
  fill_with(self, randint(self.sizes(), low, high, d, placement_of(self)), "RandomBackward0");
}

void bernoulli_(TensorImpl& self, const Arg& p) {
  check_no_internal_overlap(self);
  Tensor like(&self);
  if (!p.is_tensor()) return fill_with(self, bernoulli(like, p.scalar.as_double()), "BernoulliBackward1");
  require_floating_kernel(p.tensor->dtype(), "bernoulli_tensor_cpu_p_");
  if (auto v = known_values(p.tensor))
    LOOM_CHECK(all_of(*v, [](double x) { return x >= 0 && x <= 1; }), Runtime,
               "Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
  Tensor hit = binary(OpId::Lt, unit(self), p.tensor);  // p broadcasts to self's shape
  fill_with(self, cast(hit, self.dtype()), "BernoulliBackward2");
}

}  // namespace loom::ops
