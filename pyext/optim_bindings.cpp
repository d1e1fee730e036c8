// loom._C._<rule>_step: a parameter group's optimizer update in one call (lazy/optimizer_steps.h).
// loom/optim/*.py keeps the state and calls these. _adam_step and _sgd_step take keywords; the
// others are positional, in the order of their docstrings, and return the per-parameter scalar
// state they update (NAdam's mu_products, ASGD's etas and mus) as new lists.
#include <type_traits>

#include "lazy/optimizer_steps.h"
#include "pyext/args.h"
#include "pyext/common.h"
#include "pyext/tensor_object.h"

namespace loom::py {
namespace {

using FastArgs = PyObject* const*;

// A list of tensors (None entries become null tensors when `nullable`).
std::vector<Tensor> tensor_list(PyObject* obj, const char* what, bool nullable = false) {
  PyRef items = PyRef::checked(PySequence_Fast(obj, what));
  std::vector<Tensor> out;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(items.get());
  out.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(items.get(), i);
    if (nullable && item == Py_None) {
      out.emplace_back();
      continue;
    }
    LOOM_CHECK(is_tensor(item), Type, what, " must hold tensors, not ", Py_TYPE(item)->tp_name);
    out.push_back(tensor_of(item));
  }
  return out;
}

PyObject* f_adam_step(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("_adam_step",
                          {"params", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs", "steps", "lr", "beta1",
                           "beta2", "eps", "weight_decay", "decoupled_weight_decay", "amsgrad", "maximize"},
                          14);
  Args<14> a;
  parser.parse(args, nargs, kwnames, a.v);
  std::vector<Tensor> params = tensor_list(a[0], "params"), grads = tensor_list(a[1], "grads"),
                      exp_avgs = tensor_list(a[2], "exp_avgs"), exp_avg_sqs = tensor_list(a[3], "exp_avg_sqs");
  bool amsgrad = to_bool(a[12], "amsgrad");
  std::vector<Tensor> max_exp_avg_sqs = amsgrad ? tensor_list(a[4], "max_exp_avg_sqs") : std::vector<Tensor>{};
  PyRef step_items = PyRef::checked(PySequence_Fast(a[5], "steps"));
  std::vector<int64_t> steps;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(step_items.get()); ++i)
    steps.push_back(to_int64(PySequence_Fast_GET_ITEM(step_items.get(), i), "steps"));
  optim::AdamOptions o{to_double(a[6], "lr"),           to_double(a[7], "beta1"),
                       to_double(a[8], "beta2"),        to_double(a[9], "eps"),
                       to_double(a[10], "weight_decay"), to_bool(a[11], "decoupled_weight_decay"),
                       amsgrad,                         to_bool(a[13], "maximize")};
  optim::adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, o);
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// Returns the momentum buffers (new ones where the list held None).
PyObject* f_sgd_step(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("_sgd_step",
                          {"params", "grads", "momentum_buffers", "lr", "momentum", "dampening", "weight_decay",
                           "nesterov", "maximize"},
                          9);
  Args<9> a;
  parser.parse(args, nargs, kwnames, a.v);
  std::vector<Tensor> params = tensor_list(a[0], "params"), grads = tensor_list(a[1], "grads");
  std::vector<Tensor> buffers = tensor_list(a[2], "momentum_buffers", true);
  optim::SgdOptions o{to_double(a[3], "lr"),           to_double(a[4], "momentum"), to_double(a[5], "dampening"),
                      to_double(a[6], "weight_decay"), to_bool(a[7], "nesterov"),   to_bool(a[8], "maximize")};
  optim::sgd(params, grads, buffers, o);
  PyRef out = PyRef::checked(PyList_New(static_cast<Py_ssize_t>(buffers.size())));
  for (size_t i = 0; i < buffers.size(); ++i)
    PyList_SET_ITEM(out.get(), static_cast<Py_ssize_t>(i), buffers[i] ? wrap(buffers[i]) : Py_NewRef(Py_None));
  return out.release();
  LOOM_PY_END(nullptr)
}

// A list of numbers.
template <typename T>
std::vector<T> number_list(PyObject* obj, const char* what) {
  PyRef items = PyRef::checked(PySequence_Fast(obj, what));
  std::vector<T> out;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items.get()); ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(items.get(), i);
    if constexpr (std::is_same_v<T, double>) out.push_back(to_double(item, what));
    else out.push_back(to_int64(item, what));
  }
  return out;
}

PyObject* float_list(const std::vector<double>& values) {
  PyRef out = PyRef::checked(PyList_New(static_cast<Py_ssize_t>(values.size())));
  for (size_t i = 0; i < values.size(); ++i)
    PyList_SET_ITEM(out.get(), static_cast<Py_ssize_t>(i), PyRef::checked(PyFloat_FromDouble(values[i])).release());
  return out.release();
}

// The positional arguments of a step function: exactly n, no keywords.
struct Positional {
  PyObject* const* args;
  Positional(const char* name, PyObject* const* a, Py_ssize_t nargs, PyObject* kwnames, Py_ssize_t n) : args(a) {
    LOOM_CHECK(nargs == n && (kwnames == nullptr || PyTuple_GET_SIZE(kwnames) == 0), Type, name, " takes ", n,
               " positional arguments (", nargs, " given)");
  }
  std::vector<Tensor> tensors(Py_ssize_t i, const char* what) const { return tensor_list(args[i], what); }
  double number(Py_ssize_t i, const char* what) const { return to_double(args[i], what); }
  bool flag(Py_ssize_t i, const char* what) const { return to_bool(args[i], what); }
  std::vector<int64_t> steps(Py_ssize_t i) const { return number_list<int64_t>(args[i], "steps"); }
  std::vector<double> numbers(Py_ssize_t i, const char* what) const { return number_list<double>(args[i], what); }
};

PyObject* f_adadelta_step(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  Positional a("_adadelta_step", args, nargs, kwnames, 9);
  optim::adadelta(a.tensors(0, "params"), a.tensors(1, "grads"), a.tensors(2, "square_avgs"),
                  a.tensors(3, "acc_deltas"),
                  {a.number(4, "lr"), a.number(5, "rho"), a.number(6, "eps"), a.number(7, "weight_decay"),
                   a.flag(8, "maximize")});
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_adagrad_step(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  Positional a("_adagrad_step", args, nargs, kwnames, 9);
  optim::adagrad(a.tensors(0, "params"), a.tensors(1, "grads"), a.tensors(2, "state_sums"), a.steps(3),
                 {a.number(4, "lr"), a.number(5, "lr_decay"), a.number(6, "weight_decay"), a.number(7, "eps"),
                  a.flag(8, "maximize")});
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_rmsprop_step(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  Positional a("_rmsprop_step", args, nargs, kwnames, 12);
  optim::rmsprop(a.tensors(0, "params"), a.tensors(1, "grads"), a.tensors(2, "square_avgs"),
                 a.tensors(3, "grad_avgs"), a.tensors(4, "momentum_buffers"),
                 {a.number(5, "lr"), a.number(6, "alpha"), a.number(7, "eps"), a.number(8, "weight_decay"),
                  a.number(9, "momentum"), a.flag(10, "centered"), a.flag(11, "maximize")});
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_adamax_step(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  Positional a("_adamax_step", args, nargs, kwnames, 11);
  optim::adamax(a.tensors(0, "params"), a.tensors(1, "grads"), a.tensors(2, "exp_avgs"), a.tensors(3, "exp_infs"),
                a.steps(4),
                {a.number(5, "lr"), a.number(6, "beta1"), a.number(7, "beta2"), a.number(8, "eps"),
                 a.number(9, "weight_decay"), a.flag(10, "maximize")});
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_nadam_step(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  Positional a("_nadam_step", args, nargs, kwnames, 14);
  std::vector<double> mu_products = a.numbers(4, "mu_products");
  optim::nadam(a.tensors(0, "params"), a.tensors(1, "grads"), a.tensors(2, "exp_avgs"), a.tensors(3, "exp_avg_sqs"),
               mu_products, a.steps(5),
               {a.number(6, "lr"), a.number(7, "beta1"), a.number(8, "beta2"), a.number(9, "eps"),
                a.number(10, "weight_decay"), a.number(11, "momentum_decay"), a.flag(12, "decoupled_weight_decay"),
                a.flag(13, "maximize")});
  return float_list(mu_products);
  LOOM_PY_END(nullptr)
}

PyObject* f_radam_step(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  Positional a("_radam_step", args, nargs, kwnames, 12);
  optim::radam(a.tensors(0, "params"), a.tensors(1, "grads"), a.tensors(2, "exp_avgs"), a.tensors(3, "exp_avg_sqs"),
               a.steps(4),
               {a.number(5, "lr"), a.number(6, "beta1"), a.number(7, "beta2"), a.number(8, "eps"),
                a.number(9, "weight_decay"), a.flag(10, "decoupled_weight_decay"), a.flag(11, "maximize")});
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_asgd_step(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  Positional a("_asgd_step", args, nargs, kwnames, 12);
  std::vector<double> etas = a.numbers(3, "etas"), mus = a.numbers(4, "mus");
  optim::asgd(a.tensors(0, "params"), a.tensors(1, "grads"), a.tensors(2, "axs"), etas, mus, a.steps(5),
              {a.number(6, "lr"), a.number(7, "lambd"), a.number(8, "alpha"), a.number(9, "t0"),
               a.number(10, "weight_decay"), a.flag(11, "maximize")});
  PyRef out = PyRef::checked(PyTuple_New(2));
  PyTuple_SET_ITEM(out.get(), 0, float_list(etas));
  PyTuple_SET_ITEM(out.get(), 1, float_list(mus));
  return out.release();
  LOOM_PY_END(nullptr)
}

PyObject* f_rprop_step(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  Positional a("_rprop_step", args, nargs, kwnames, 9);
  optim::rprop(a.tensors(0, "params"), a.tensors(1, "grads"), a.tensors(2, "prevs"), a.tensors(3, "step_sizes"),
               {a.number(4, "etaminus"), a.number(5, "etaplus"), a.number(6, "step_size_min"),
                a.number(7, "step_size_max"), a.flag(8, "maximize")});
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

}  // namespace

PyMethodDef optim_functions[] = {
    {"_adam_step", LOOM_FASTCALL(f_adam_step), "_adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, "
     "beta1, beta2, eps, weight_decay, decoupled_weight_decay, amsgrad, maximize): one Adam/AdamW step per parameter"},
    {"_sgd_step", LOOM_FASTCALL(f_sgd_step), "_sgd_step(params, grads, momentum_buffers, lr, momentum, dampening, "
     "weight_decay, nesterov, maximize): one SGD step per parameter; returns the momentum buffers"},
    {"_adadelta_step", LOOM_FASTCALL(f_adadelta_step), "_adadelta_step(params, grads, square_avgs, acc_deltas, lr, "
     "rho, eps, weight_decay, maximize)"},
    {"_adagrad_step", LOOM_FASTCALL(f_adagrad_step), "_adagrad_step(params, grads, state_sums, steps, lr, lr_decay, "
     "weight_decay, eps, maximize)"},
    {"_rmsprop_step", LOOM_FASTCALL(f_rmsprop_step), "_rmsprop_step(params, grads, square_avgs, grad_avgs, "
     "momentum_buffers, lr, alpha, eps, weight_decay, momentum, centered, maximize)"},
    {"_adamax_step", LOOM_FASTCALL(f_adamax_step), "_adamax_step(params, grads, exp_avgs, exp_infs, steps, lr, beta1, "
     "beta2, eps, weight_decay, maximize)"},
    {"_nadam_step", LOOM_FASTCALL(f_nadam_step), "_nadam_step(params, grads, exp_avgs, exp_avg_sqs, mu_products, "
     "steps, lr, beta1, beta2, eps, weight_decay, momentum_decay, decoupled_weight_decay, maximize) -> mu_products"},
    {"_radam_step", LOOM_FASTCALL(f_radam_step), "_radam_step(params, grads, exp_avgs, exp_avg_sqs, steps, lr, beta1, "
     "beta2, eps, weight_decay, decoupled_weight_decay, maximize)"},
    {"_asgd_step", LOOM_FASTCALL(f_asgd_step), "_asgd_step(params, grads, axs, etas, mus, steps, lr, lambd, alpha, t0, "
     "weight_decay, maximize) -> (etas, mus)"},
    {"_rprop_step", LOOM_FASTCALL(f_rprop_step), "_rprop_step(params, grads, prevs, step_sizes, etaminus, etaplus, "
     "step_size_min, step_size_max, maximize)"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace loom::py
