// The op table's rows (pyext/op_table.h) of reductions and scans beyond op_bindings.cpp's,
// sorting and selection, and random sampling: lazy/statistics.h, lazy/sorting.h and
// lazy/sampling.h as loom.<op>, Tensor.<op> and the in-place random fills (Tensor.uniform_, ...).
// Results with two parts are named tuples, as torch.return_types are (values / indices, min / max).
#include <array>
#include <cmath>
#include <tuple>
#include <deque>
#include <map>
#include <string>

#include "lazy/autograd.h"
#include "lazy/sampling.h"
#include "lazy/sorting.h"
#include "lazy/statistics.h"
#include "lazy/dispatch.h"
#include "lazy/ops_movement.h"
#include "pyext/objects.h"
#include "pyext/op_table.h"
#include "runtime/error.h"
#include "runtime/layout.h"

namespace loom::py {

// A named pair like torch.return_types.<name>: fields values / indices unless named otherwise.
PyObject* named_pair(const char* name, std::pair<Tensor, Tensor> parts, const char* first, const char* second) {
  static std::map<std::string, PyTypeObject*> types;
  static std::deque<std::pair<std::string, std::array<PyStructSequence_Field, 3>>> descriptions;
  PyTypeObject*& type = types[name];
  if (!type) {
    auto& [type_name, fields] = descriptions.emplace_back(std::string("loom.return_types.") + name,
                                                          std::array<PyStructSequence_Field, 3>{});
    fields = {{{first, nullptr}, {second, nullptr}, {nullptr, nullptr}}};
    static std::deque<PyStructSequence_Desc> descs;
    PyStructSequence_Desc& desc = descs.emplace_back(
        PyStructSequence_Desc{type_name.c_str(), "a named pair of results", fields.data(), 2});
    type = PyStructSequence_NewType(&desc);
    if (!type) throw PythonError{};
  }
  PyRef result = PyRef::checked(PyStructSequence_New(type));
  PyStructSequence_SET_ITEM(result.get(), 0, wrap(std::move(parts.first)));
  PyStructSequence_SET_ITEM(result.get(), 1, wrap(std::move(parts.second)));
  return result.release();
}

namespace {



// The values of t (a sync for a pending lazy tensor) as float64 on the host, for an op whose
// result size or error depends on them.
std::vector<double> host_values(const Tensor& t, const char* cause) {
  Array v = copy_to(ops::values_for_shape(t, cause), DType::Float64, kCPU);
  const auto* data = static_cast<const double*>(v.data());
  return std::vector<double>(data, data + v.numel());
}

// (min, max) of a non-empty tensor, read on the host in one sync.
std::pair<double, double> host_range(const Tensor& x, const char* cause) {
  auto [low, high] = ops::aminmax(x);
  Tensor both = ops::stack({ops::cast(low, DType::Float64), ops::cast(high, DType::Float64)});
  std::vector<double> v = host_values(both, cause);
  return {v[0], v[1]};
}

const char* dtype_name(const Tensor& t) { return dtype_info(t->dtype()).scalar_type_name; }

// bincount: how often each value 0, 1, ... occurs (the sum of weights at its positions), over
// max(input) + 1 slots, at least minlength; int64 counts, or the weights' floating dtype (else
// float64).
Result bincount(const Parsed& p) {
  Tensor x = p.tensor(0), weights = p.tensor(1);
  int64_t minlength = p.int64(2);
  LOOM_CHECK(is_integral(x->dtype()) && x->ndim() == 1, Runtime,
             "bincount only supports 1-d non-negative integral inputs, got ", dtype_name(x), " of shape ",
             format_dims(x->sizes()));
  LOOM_CHECK(minlength >= 0, Runtime, "minlength should be >= 0");
  if (weights)
    LOOM_CHECK(weights->ndim() == 1 && weights->sizes()[0] == x->sizes()[0], Runtime,
               "weights should be 1-d and have the same length as input: input ", format_dims(x->sizes()),
               ", weights ", format_dims(weights->sizes()));
  int64_t length = minlength;
  if (x->numel() > 0) {
    auto [low, high] = host_range(x, "bincount");
    LOOM_CHECK(low >= 0, Runtime, "bincount only supports 1-d non-negative integral inputs, got the value ",
               static_cast<int64_t>(low));
    length = std::max(length, static_cast<int64_t>(high) + 1);
  }
  DType out = !weights ? DType::Int64 : is_floating(weights->dtype()) ? weights->dtype() : DType::Float64;
  Tensor source = weights ? ops::cast(weights, out) : ops::full(x->sizes(), Scalar(int64_t{1}), out, placement_of(x));
  return ops::scatter_add(ops::full(Dims{length}, Scalar(int64_t{0}), out, placement_of(x)), 0,
                          ops::cast(x, DType::Int64), source);
}

// histc: counts in `bins` equal bins over [min, max] (min == max: the data's range, widened by one
// each way if that is a point); values outside are left out, max falls in the last bin. No
// gradient, as PyTorch's.
Result histc(const Parsed& p) {
  Tensor x = p.tensor(0);
  int64_t bins = p.int64(1);
  double low = p.scalar(2).as_double(), high = p.scalar(3).as_double();
  LOOM_CHECK(is_floating(x->dtype()), Runtime, "histc is only implemented for floating-point inputs, got ",
             dtype_name(x));
  LOOM_CHECK(bins > 0, Runtime, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  LOOM_CHECK(low <= high, Runtime, "torch.histc: max must be larger than min (min=", low, ", max=", high, ")");
  Tensor values = ops::flatten(ops::detach(x));
  if (low == high && values->numel() > 0) std::tie(low, high) = host_range(values, "histc");
  if (low == high) low -= 1, high += 1;
  LOOM_CHECK(std::isfinite(low) && std::isfinite(high), Runtime, "torch.histc: range of [", low, ", ", high,
             "] is not finite");
  Tensor inside = ops::binary(OpId::LogicalAnd, ops::binary(OpId::Ge, values, Scalar(low)),
                              ops::binary(OpId::Le, values, Scalar(high)));
  double count = static_cast<double>(bins);
  Tensor scaled = ops::mul(ops::div(ops::sub(values, Scalar(low)), Scalar(high - low)), Scalar(count));
  Tensor position = ops::clamp(ops::unary(OpId::Floor, scaled), Arg(Scalar(0.0)), Arg(Scalar(count - 1)));
  position = ops::cast(ops::where(inside, position, Scalar(0.0)), DType::Int64);
  return ops::scatter_add(ops::full(Dims{bins}, Scalar(0.0), x->dtype(), placement_of(x)), 0, position,
                          ops::cast(inside, x->dtype()));
}

// cov: the covariance of the variables in input's rows (one variable: a 0-d result)
// over the observations in its columns, weighted by fweights * aweights, divided by the weight
// sum less `correction` (for aweights, PyTorch's correction * sum(w * aweights) / sum(w)).
Tensor covariance(const Tensor& input, double correction, const Tensor& fweights, const Tensor& aweights) {
  LOOM_CHECK(input->ndim() <= 2, Runtime,
             "cov(): expected input to have two or fewer dimensions but got an input with ", input->ndim(),
             " dimensions");
  Tensor x = input->ndim() == 2 ? input : ops::reshape(input, Dims{1, -1});
  if (!is_floating(x->dtype())) x = ops::cast(x, default_float_dtype());
  // The centered input (x - mean) is a full-size value: an expand of 2^62 elements is refused
  // here, before the mean's 2^31-element rows are reduced for minutes (the fuzzer's corrcoef hang).
  size_t centered_bytes = 0;
  bool overflows = __builtin_mul_overflow(static_cast<size_t>(x->numel()), itemsize(x->dtype()), &centered_bytes);
  LOOM_CHECK(!overflows && centered_bytes <= (size_t{1} << 60), OutOfMemory, "cov(): an input of shape ",
             format_dims(x->sizes()), " and dtype ", dtype_name(x->dtype()),
             " is centered into a tensor of its size, more memory than exists");
  int64_t observations = x->sizes()[1];
  Tensor w;
  for (auto [name, t] : {std::pair{"fweights", fweights}, std::pair{"aweights", aweights}}) {
    if (!t) continue;
    bool frequencies = std::string_view(name) == "fweights";
    LOOM_CHECK(t->ndim() <= 1, Runtime, "cov(): expected ", name, " to have one or fewer dimensions but got ", name,
               " with ", t->ndim(), " dimensions");
    LOOM_CHECK(t->numel() == observations, Runtime, "cov(): expected ", name,
               " to have the same numel as there are observations in the input but got ", t->numel(), " != ",
               observations);
    LOOM_CHECK(frequencies ? is_integral(t->dtype()) : is_floating(t->dtype()), Runtime, "cov(): expected ", name,
               frequencies ? " to have integral dtype" : " to have floating point dtype", " but got ", name, " with ",
               dtype_name(t), " dtype");
    Tensor cast = ops::cast(t, x->dtype());
    w = w ? ops::mul(w, cast) : cast;
  }
  // The divisor: known on the host without weights; with them a value of theirs, read to check
  // it (a sync on the lazy device, as PyTorch's check syncs a GPU).
  Tensor mean, scale;
  double divisor;
  if (!w) {
    mean = ops::mean(x, {1}, true);
    divisor = static_cast<double>(observations) - correction;
    scale = ops::full(Dims{}, Scalar(std::max(divisor, 0.0)), x->dtype(), placement_of(x));
  } else {
    Tensor total = ops::sum(w);
    mean = ops::div(ops::sum(ops::mul(x, w), {1}, true), total);
    scale = !aweights ? ops::sub(total, Scalar(correction))
                      : ops::sub(total, ops::mul(ops::div(ops::sum(ops::mul(w, ops::cast(aweights, x->dtype()))), total),
                                                 Scalar(correction)));
    divisor = host_values(scale, "cov")[0];
    if (divisor <= 0) scale = ops::mul(scale, Scalar(0.0));
  }
  if (divisor <= 0) check_status(PyErr_WarnEx(PyExc_UserWarning, "cov(): degrees of freedom is <= 0", 1));
  Tensor centered = ops::sub(x, mean);
  Tensor result = ops::div(ops::matmul(w ? ops::mul(centered, w) : centered, ops::t(centered)), scale);
  // Squeezed whatever input's rank: one variable is a 0-d result also when it comes as a (1, N)
  // row, as PyTorch's (and corrcoef's "one variable" case tests c's rank).
  return ops::squeeze(result);
}

// corrcoef: cov normalized by the standard deviations, clipped to [-1, 1].
Tensor corrcoef(const Tensor& input) {
  Tensor c = covariance(input, 1, Tensor(), Tensor());
  if (c->ndim() == 0) return ops::div(c, c);
  Tensor std = ops::unary(OpId::Sqrt, ops::diagonal(c));
  Tensor normalized = ops::div(ops::div(c, ops::unsqueeze(std, 1)), ops::unsqueeze(std, 0));
  return ops::clamp(normalized, Arg(Scalar(-1.0)), Arg(Scalar(1.0)));
}

// x * 2 ** exponent (exponent: float64 whole numbers) in two factors, each a power of two x's
// dtype holds: for a subnormal, 2 ** -exponent alone would overflow.
Tensor times_power_of_two(const Tensor& x, const Tensor& exponent) {
  Tensor half = ops::unary(OpId::Floor, ops::div(exponent, Scalar(2.0)));
  Tensor one = ops::full(half->sizes(), Scalar(1.0), DType::Float64, placement_of(half));
  return ops::mul(ops::mul(x, ops::cast(ops::ldexp(one, half), x->dtype())),
                  ops::cast(ops::ldexp(one, ops::sub(exponent, half)), x->dtype()));
}

// frexp: (mantissa, exponent) with input = mantissa * 2 ** exponent, |mantissa| in [0.5, 1); 0,
// inf and NaN are their own mantissa with exponent 0. The mantissa's gradient is 2 ** -exponent.
Result frexp(const Parsed& p) {
  Tensor x = p.tensor(0);
  LOOM_CHECK(is_floating(x->dtype()), Runtime, "torch.frexp() only supports floating-point dtypes, got ",
             dtype_name(x));
  Tensor wide = ops::cast(ops::detach(x), DType::Float64);
  Tensor finite = ops::binary(OpId::LogicalAnd, ops::isfinite(wide), ops::binary(OpId::Ne, wide, Scalar(0.0)));
  Tensor magnitude = ops::where(finite, ops::unary(OpId::Abs, wide), Scalar(1.0));
  Tensor exponent = ops::add(ops::unary(OpId::Floor, ops::unary(OpId::Log2, magnitude)), Scalar(1.0));
  // log2 may round across a power of two: one step either way puts the mantissa in [0.5, 1).
  Tensor m = times_power_of_two(magnitude, ops::unary(OpId::Neg, exponent));
  exponent = ops::sub(ops::add(exponent, ops::cast(ops::binary(OpId::Ge, m, Scalar(1.0)), DType::Float64)),
                      ops::cast(ops::binary(OpId::Lt, m, Scalar(0.5)), DType::Float64));
  exponent = ops::where(finite, exponent, Scalar(0.0));
  return named_pair("frexp", {times_power_of_two(x, ops::unary(OpId::Neg, exponent)), ops::cast(exponent, DType::Int32)},
                    "mantissa", "exponent");
}

// var_mean / std_mean: (dim, unbiased, keepdim), (dim, *, correction, keepdim) or (unbiased).
template <auto fn>
Result with_mean(const Parsed& p) {
  std::pair<Tensor, Tensor> r;
  if (p.index == 0) r = fn(p.tensor(0), p.dims(1), p.boolean(2) ? 1.0 : 0.0, p.boolean(3));
  else if (p.index == 1) r = fn(p.tensor(0), p.dims(1), p.optional_real(2).value_or(1.0), p.boolean(3));
  else r = fn(p.tensor(0), {}, p.boolean(1) ? 1.0 : 0.0, false);
  return std::vector<Tensor>{r.first, r.second};
}

template <bool ignore_nan>
Result median(const Parsed& p) {
  const char* name = ignore_nan ? "nanmedian" : "median";
  if (p.index == 0) return ops::median(p.tensor(0), ignore_nan);
  return named_pair(name, ops::median_dim(p.tensor(0), p.int64(1), p.boolean(2), ignore_nan));
}

template <bool ignore_nan>
Result quantile(const Parsed& p) {
  Arg q = p.index == 0 ? Arg(p.tensor(1)) : Arg(Scalar(p.real(1)));
  return ops::quantile(p.tensor(0), q, p.optional_int64(2), p.boolean(3), p.string(4), ignore_nan);
}

// sort(dim, descending) or sort(*, stable, dim, descending): sorts are always stable.
Result sort(const Parsed& p) {
  int first = p.index == 0 ? 1 : 2;
  return named_pair("sort", ops::sort(p.tensor(0), p.int64(first), p.boolean(first + 1)));
}

Result argsort(const Parsed& p) {
  int first = p.index == 0 ? 1 : 2;
  return ops::argsort(p.tensor(0), p.int64(first), p.boolean(first + 1));
}

Result searchsorted(const Parsed& p) {
  bool right = p.boolean(3);
  if (p.has(4)) {
    std::string side = p.string(4);
    LOOM_CHECK(side == "left" || side == "right", Runtime,
               "torch.searchsorted(): side can only be 'left' or 'right' but got ", side);
    LOOM_CHECK(!(right && side == "left"), Runtime,
               "torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True");
    right = side == "right";
  }
  Tensor sorter = p.tensor(5);
  return ops::searchsorted(p.tensor(0), p.arg(1), p.boolean(2), right, sorter ? &sorter : nullptr);
}

// unique / unique_consecutive: the values alone, or a tuple with the inverse and / or the counts.
Result unique_result(const ops::Unique& u, bool inverse, bool counts) {
  if (!inverse && !counts) return u.values;
  std::vector<Tensor> parts{u.values};
  if (inverse) parts.push_back(u.inverse);
  if (counts) parts.push_back(u.counts);
  return parts;
}

// The creation options (*, dtype=None, device=None, requires_grad=False) from parameter `first`.
Tensor created(Tensor t, bool requires_grad) {
  if (requires_grad) {
    LOOM_CHECK(is_floating(t->dtype()), Runtime, "Only Tensors of floating point and complex dtype can require gradients");
    set_requires_grad(*t, true);
  }
  return t;
}

Result normal(const Parsed& p) {
  GeneratorScope generator = generator_scope(p.object(p.index == 3 ? 3 : 2));
  switch (p.index) {
    case 0: return ops::normal(p.tensor(0), p.tensor(1));
    case 1: return ops::normal(p.tensor(0), Scalar(p.real(1)));
    case 2: return ops::normal(Scalar(p.real(0)), p.tensor(1));
    default: {
      double std = p.real(1);
      LOOM_CHECK(std >= 0, Runtime, "normal expects std >= 0.0, but found std ", std);
      DType dtype = p.optional_dtype(4).value_or(default_float_dtype());
      return created(ops::randn(p.int_list(2), dtype, p.placement(5), p.real(0), std), p.boolean(6));
    }
  }
}

// Tensor.random_(), random_(to), random_(from, to).
Result random_(const Parsed& p) {
  std::optional<int64_t> from, to;
  if (p.index == 1) to = p.int64(1);
  if (p.index == 2) from = p.int64(1), to = p.optional_int64(2);
  GeneratorScope generator = generator_scope(p.object(p.index == 0 ? 1 : p.index == 1 ? 2 : 3));
  ops::random_(impl_of(p.self), from, to);
  return Py_NewRef(p.self);
}

// An in-place random fill: fn(self, the two float parameters), generator= third.
template <void (*fn)(TensorImpl&, double, double)>
Result fill2(const Parsed& p) {
  GeneratorScope generator = generator_scope(p.object(3));
  fn(impl_of(p.self), p.real(1), p.real(2));
  return Py_NewRef(p.self);
}
template <void (*fn)(TensorImpl&, double)>
Result fill1(const Parsed& p) {
  GeneratorScope generator = generator_scope(p.object(2));
  fn(impl_of(p.self), p.real(1));
  return Py_NewRef(p.self);
}

#define LOOM_GENERATOR "*, PyObject* generator=None"
#define LOOM_OPTIONS "ScalarType? dtype=None, Device? device=None, bool? requires_grad=False"

const Row kRows[] = {
    {{"bincount(Tensor input, Tensor? weights=None, int minlength=0)"}, kBoth, bincount,
     "Reads input's range on the host (a sync on the lazy device), as the result's size depends on it."},
    {{"histc(Tensor input, int bins=100, Scalar min=0, Scalar max=0)"}, kBoth, histc},
    {{"cov(Tensor input, *, int correction=1, Tensor? fweights=None, Tensor? aweights=None)"}, kBoth,
     LOOM_BODY(covariance(p.tensor(0), static_cast<double>(p.int64(1)), p.tensor(2), p.tensor(3)))},
    {{"corrcoef(Tensor input)"}, kBoth, LOOM_BODY(corrcoef(p.tensor(0)))},
    {{"frexp(Tensor input)"}, kBoth, frexp, "(mantissa, exponent): exponent is int32."},
    // ---- reductions ----
    {{"var_mean(Tensor input, int[1]? dim, bool unbiased=True, bool keepdim=False)",
      "var_mean(Tensor input, int[1]? dim=None, *, float? correction=None, bool keepdim=False)",
      "var_mean(Tensor input, bool unbiased=True)"},
     kFunction, with_mean<ops::var_mean>, "Returns (var, mean)."},
    {{"std_mean(Tensor input, int[1]? dim, bool unbiased=True, bool keepdim=False)",
      "std_mean(Tensor input, int[1]? dim=None, *, float? correction=None, bool keepdim=False)",
      "std_mean(Tensor input, bool unbiased=True)"},
     kFunction, with_mean<ops::std_mean>, "Returns (std, mean)."},
    {{"aminmax(Tensor input, *, int? dim=None, bool keepdim=False)"}, kBoth,
     LOOM_BODY(named_pair("aminmax", ops::aminmax(p.tensor(0), p.optional_int64(1), p.boolean(2)), "min", "max"))},
    {{"nansum(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)"}, kBoth,
     LOOM_BODY(ops::nansum(p.tensor(0), p.dims(1), p.boolean(2), p.optional_dtype(3)))},
    {{"nanmean(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)"}, kBoth,
     LOOM_BODY(ops::nanmean(p.tensor(0), p.dims(1), p.boolean(2), p.optional_dtype(3)))},
    {{"count_nonzero(Tensor input, int[1]? dim=None)"}, kBoth, LOOM_BODY(ops::count_nonzero(p.tensor(0), p.dims(1)))},
    {{"median(Tensor input)", "median(Tensor input, int dim, bool keepdim=False)"}, kBoth, median<false>,
     "median(input, dim) returns (values, indices): the lower median, or the first NaN."},
    {{"nanmedian(Tensor input)", "nanmedian(Tensor input, int dim, bool keepdim=False)"}, kBoth, median<true>},
    {{"mode(Tensor input, int dim=-1, bool keepdim=False)"}, kBoth,
     LOOM_BODY(named_pair("mode", ops::mode(p.tensor(0), p.int64(1), p.boolean(2)))),
     "(values, indices): the smallest most frequent value and its last index."},
    {{"quantile(Tensor input, Tensor q, int? dim=None, bool keepdim=False, *, str interpolation='linear')",
      "quantile(Tensor input, float q, int? dim=None, bool keepdim=False, *, str interpolation='linear')"},
     kBoth, quantile<false>},
    {{"nanquantile(Tensor input, Tensor q, int? dim=None, bool keepdim=False, *, str interpolation='linear')",
      "nanquantile(Tensor input, float q, int? dim=None, bool keepdim=False, *, str interpolation='linear')"},
     kBoth, quantile<true>},

    // ---- scans ----
    {{"cumprod(Tensor input, int dim, *, ScalarType? dtype=None)"}, kBoth,
     LOOM_BODY(ops::cumprod(p.tensor(0), p.int64(1), p.optional_dtype(2)))},
    {{"cumprod_(Tensor input, int dim, *, ScalarType? dtype=None)"}, kMethod, [](const Parsed& p) -> Result {
       Tensor self = tensor_of(p.self);  // held: update() may release the GIL (tensor_operators.cpp)
       check_no_internal_overlap(*self);
       update(*self, [&] { return ops::cumprod(p.tensor(0), p.int64(1), p.optional_dtype(2).value_or(self->dtype())); });
       return Py_NewRef(p.self);
     },
     "In place: writes cumprod()'s result into self."},
    {{"logcumsumexp(Tensor input, int dim)"}, kBoth, LOOM_BODY(ops::logcumsumexp(p.tensor(0), p.int64(1)))},
    {{"cummax(Tensor input, int dim)"}, kBoth, LOOM_BODY(named_pair("cummax", ops::cummax(p.tensor(0), p.int64(1))))},
    {{"cummin(Tensor input, int dim)"}, kBoth, LOOM_BODY(named_pair("cummin", ops::cummin(p.tensor(0), p.int64(1))))},

    // ---- sorting and selection ----
    {{"sort(Tensor input, int dim=-1, bool descending=False)",
      "sort(Tensor input, *, bool? stable, int dim=-1, bool descending=False)"},
     kBoth, sort, "Always stable: equal elements keep their order."},
    {{"argsort(Tensor input, int dim=-1, bool descending=False)",
      "argsort(Tensor input, *, bool stable, int dim=-1, bool descending=False)"},
     kBoth, argsort, "Always stable: equal elements keep their order."},
    {{"msort(Tensor input)"}, kBoth, LOOM_BODY(ops::msort(p.tensor(0)))},
    {{"topk(Tensor input, int k, int dim=-1, bool largest=True, bool sorted=True)"}, kBoth,
     LOOM_BODY(named_pair("topk", ops::topk(p.tensor(0), p.int64(1), p.int64(2), p.boolean(3)))),
     "The values are always sorted."},
    {{"kthvalue(Tensor input, int k, int dim=-1, bool keepdim=False)"}, kBoth,
     LOOM_BODY(named_pair("kthvalue", ops::kthvalue(p.tensor(0), p.int64(1), p.int64(2), p.boolean(3))))},
    {{"searchsorted(Tensor sorted_sequence, Arg input, *, bool out_int32=False, bool right=False, str? side=None, "
      "Tensor? sorter=None)"},
     kFunction, searchsorted},
    {{"bucketize(Arg input, Tensor boundaries, *, bool out_int32=False, bool right=False)"}, kFunction,
     LOOM_BODY(ops::bucketize(p.arg(0), p.tensor(1), p.boolean(2), p.boolean(3)))},
    {{"unique(Tensor input, bool sorted=True, bool return_inverse=False, bool return_counts=False, int? dim=None)"},
     kBoth, LOOM_BODY(unique_result(ops::unique(p.tensor(0), p.optional_int64(4)), p.boolean(2), p.boolean(3))),
     "Always sorted. A sync point on the lazy device: the result's size depends on the values."},
    {{"unique_consecutive(Tensor input, bool return_inverse=False, bool return_counts=False, int? dim=None)"}, kBoth,
     LOOM_BODY(unique_result(ops::unique_consecutive(p.tensor(0), p.optional_int64(3)), p.boolean(1), p.boolean(2))),
     "A sync point on the lazy device: the result's size depends on the values."},

    // ---- random sampling ----
    {{"bernoulli(Tensor input, " LOOM_GENERATOR ")", "bernoulli(Tensor input, float p, " LOOM_GENERATOR ")"}, kBoth,
     [](const Parsed& p) -> Result {
       GeneratorScope generator = generator_scope(p.object(p.index == 0 ? 1 : 2));
       return p.index == 0 ? ops::bernoulli(p.tensor(0)) : ops::bernoulli(p.tensor(0), p.real(1));
     }},
    {{"bernoulli_(Tensor input, float p=0.5, " LOOM_GENERATOR ")", "bernoulli_(Tensor input, Tensor p, " LOOM_GENERATOR ")"},
     kMethod, [](const Parsed& p) -> Result {
       GeneratorScope generator = generator_scope(p.object(2));
       ops::bernoulli_(impl_of(p.self), p.index == 0 ? Arg(Scalar(p.real(1))) : Arg(p.tensor(1)));
       return Py_NewRef(p.self);
     }},
    {{"normal(Tensor mean, Tensor std, " LOOM_GENERATOR ")", "normal(Tensor mean, float std=1, " LOOM_GENERATOR ")",
      "normal(float mean, Tensor std, " LOOM_GENERATOR ")",
      "normal(float mean, float std, SymInt[] size, " LOOM_GENERATOR ", " LOOM_OPTIONS ")"},
     kFunction, normal},
    {{"poisson(Tensor input, PyObject* generator=None)"}, kFunction, [](const Parsed& p) -> Result {
       GeneratorScope generator = generator_scope(p.object(1));
       return ops::poisson(p.tensor(0));
     }},
    {{"multinomial(Tensor input, int num_samples, bool replacement=False, " LOOM_GENERATOR ")"}, kBoth,
     [](const Parsed& p) -> Result {
       GeneratorScope generator = generator_scope(p.object(3));
       return ops::multinomial(p.tensor(0), p.int64(1), p.boolean(2));
     }},
    {{"randperm(int n, " LOOM_GENERATOR ", " LOOM_OPTIONS ")"}, kFunction, [](const Parsed& p) -> Result {
       GeneratorScope generator = generator_scope(p.object(1));
       return created(ops::randperm(p.int64(0), p.optional_dtype(2).value_or(DType::Int64), p.placement(3)),
                      p.boolean(4));
     }},
    {{"uniform_(Tensor input, float from=0, float to=1, " LOOM_GENERATOR ")"}, kMethod, fill2<ops::uniform_>},
    {{"normal_(Tensor input, float mean=0, float std=1, " LOOM_GENERATOR ")"}, kMethod, fill2<ops::normal_>},
    {{"log_normal_(Tensor input, float mean=1, float std=2, " LOOM_GENERATOR ")"}, kMethod, fill2<ops::log_normal_>},
    {{"cauchy_(Tensor input, float median=0, float sigma=1, " LOOM_GENERATOR ")"}, kMethod, fill2<ops::cauchy_>},
    {{"exponential_(Tensor input, float lambd=1, " LOOM_GENERATOR ")"}, kMethod, fill1<ops::exponential_>},
    {{"geometric_(Tensor input, float p, " LOOM_GENERATOR ")"}, kMethod, fill1<ops::geometric_>},
    {{"random_(Tensor input, " LOOM_GENERATOR ")", "random_(Tensor input, int to, " LOOM_GENERATOR ")",
      "random_(Tensor input, int from, int? to, " LOOM_GENERATOR ")"},
     kMethod, random_, "Integers in [from, to); by default every value the dtype holds exactly from 0."},
};

#undef LOOM_GENERATOR
#undef LOOM_OPTIONS

}  // namespace

void add_reduce_rows(MethodDefs& defs) { add_rows(kRows, defs); }

}  // namespace loom::py
