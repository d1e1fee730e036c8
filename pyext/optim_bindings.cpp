// loom._C._adam_step and loom._C._sgd_step: a parameter group's optimizer update in one call
// (lazy/optimizer_steps.h). loom/optim/*.py keeps the state and calls these.
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

}  // namespace

PyMethodDef optim_functions[] = {
    {"_adam_step", LOOM_FASTCALL(f_adam_step), "_adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, "
     "beta1, beta2, eps, weight_decay, decoupled_weight_decay, amsgrad, maximize): one Adam/AdamW step per parameter"},
    {"_sgd_step", LOOM_FASTCALL(f_sgd_step), "_sgd_step(params, grads, momentum_buffers, lr, momentum, dampening, "
     "weight_decay, nesterov, maximize): one SGD step per parameter; returns the momentum buffers"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace loom::py
