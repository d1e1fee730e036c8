// The op table's rows (pyext/op_table.h) of reductions and scans beyond op_bindings.cpp's,
// sorting and selection, and random sampling: lazy/statistics.h, lazy/sorting.h and
// lazy/sampling.h as loom.<op>, Tensor.<op> and the in-place random fills (Tensor.uniform_, ...).
// Results with two parts are named tuples, as torch.return_types are (values / indices, min / max).
#include <array>
#include <deque>
#include <map>
#include <string>

#include "lazy/autograd.h"
#include "lazy/sampling.h"
#include "lazy/sorting.h"
#include "lazy/statistics.h"
#include "pyext/objects.h"
#include "pyext/op_table.h"
#include "runtime/error.h"

namespace loom::py {
namespace {


// A named pair like torch.return_types.<name>: fields values / indices unless named otherwise.
PyObject* named_pair(const char* name, std::pair<Tensor, Tensor> parts, const char* first = "values",
                     const char* second = "indices") {
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
       TensorImpl& self = impl_of(p.self);
       check_no_internal_overlap(self);
       update(self, [&] { return ops::cumprod(p.tensor(0), p.int64(1), p.optional_dtype(2).value_or(self.dtype())); });
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
