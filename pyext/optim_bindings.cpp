// loom._C._optimizer_step: a parameter group's optimizer update in one call (pyext/optim_bindings.h).
// loom/optim/*.py makes the state (zeros_like at a parameter's first step) and calls it with
// the group and the parameters' state dicts; what each rule reads from them, and writes back,
// is its function below. The same functions give loom.compile's replays the update's numbers.
#include "pyext/optim_bindings.h"

#include <optional>
#include <string_view>

#include "lazy/autograd.h"
#include "lazy/capture.h"
#include "pyext/args.h"
#include "pyext/tensor_object.h"

namespace loom::py {
namespace {

using FastArgs = PyObject* const*;

thread_local UpdateLog* update_log = nullptr;

// The str of a key, made once: the rules look keys up by C string, and a replay reads dozens a
// call (PyDict_GetItemString would make a str at each). Keys are string literals, so their
// addresses name them; the GIL guards the table.
PyObject* key_object(const char* key) {
  static std::vector<std::pair<const char*, PyObject*>> keys;
  for (const auto& [k, o] : keys)
    if (k == key) return o;
  PyObject* o = check(PyUnicode_InternFromString(key));  // immortal for the process
  keys.emplace_back(key, o);
  return o;
}

// dict[key], or null (no exception) where it has none.
PyObject* lookup(PyObject* dict, const char* key) {
  PyObject* v = PyDict_GetItemWithError(dict, key_object(key));
  if (!v && PyErr_Occurred()) throw PythonError{};
  return v;
}

// What one rule reads and writes, for an update (the group's values now; writes at once) or for
// a replay of a recorded one (tensors not read; writes deferred; the tensors the update read
// compared by identity).
//
// A replay first runs the rule for one parameter standing for all (`representative`): the rules
// treat every parameter alike, so where every parameter's own inputs (its step count, scalar
// state, which optional state tensors it has) are the same, its numbers are the first one's
// repeated (replay_update checks the ops agree). The reads and writes of the state still cover
// every parameter. Where they differ (`uniform` false), the rule runs again for all of them.
class GroupCall {
 public:
  // An update of `params` (`record`: while a step is recorded, what it reads is noted there);
  // with `out`, its numbers only (writes deferred into out, tensors not read).
  GroupCall(PyObject* optimizer, PyObject* group, std::vector<PyObject*> states, std::vector<Tensor> params,
            RecordedUpdate* record, ReplayedUpdate* out = nullptr)
      : params(std::move(params)), optimizer_(optimizer), group_(group), states_(std::move(states)), record_(record),
        out_(out) {}
  // A replay of `recorded`: its numbers only, the tensors it read compared by identity; for its
  // first parameter alone if `representative`.
  GroupCall(const RecordedUpdate& recorded, ReplayedUpdate& out, bool representative)
      : params(representative && !recorded.params.empty() ? std::vector<Tensor>{recorded.params[0]} : recorded.params),
        optimizer_(recorded.optimizer.get()), group_(recorded.group.get()), replayed_(&recorded), out_(&out),
        representative_(representative) {
    for (const PyRef& s : recorded.states) states_.push_back(s.get());
  }

  // Whether every parameter's own inputs agreed (a representative call's numbers stand for all).
  bool uniform = true;

  bool numbers_only() const noexcept { return out_ != nullptr; }

  // float(group[key]), bool(group[key]), a, b = group[key], bool(optimizer.<name>)
  double number(const char* key) { return to_double(item(key), key); }
  bool flag(const char* key) { return check_truth(item(key)); }
  std::pair<double, double> pair(const char* key) {
    PyRef items = PyRef::checked(PySequence_Tuple(item(key)));
    LOOM_CHECK(PyTuple_GET_SIZE(items.get()) == 2, Value, "the optimizer's '", key, "' must be a pair of numbers");
    return {to_double(PyTuple_GET_ITEM(items.get(), 0), key), to_double(PyTuple_GET_ITEM(items.get(), 1), key)};
  }
  bool attribute(const char* name) {
    PyRef v = PyRef::checked(PyObject_GetAttr(optimizer_, key_object(name)));
    return check_truth(v.get());
  }

  // Counts a step in each parameter's state (state["step"] += 1) and returns the step numbers
  // (1 for the first).
  std::vector<int64_t> advance_steps() {
    std::vector<int64_t> steps;
    static PyObject* one = check(PyLong_FromLong(1));
    for (PyObject* s : states_) {
      PyObject* old = state_item(s, "step");
      PyRef next = PyRef::checked(PyNumber_Add(old, one));
      steps.push_back(to_int64(next.get(), "step"));
      write(s, "step", std::move(next));
    }
    return for_params(std::move(steps));
  }
  // state[key] of each parameter as numbers, and writing them back.
  std::vector<double> state_numbers(const char* key) {
    std::vector<double> out;
    for (PyObject* s : states_) out.push_back(to_double(state_item(s, key), key));
    return for_params(std::move(out));
  }
  void set_state_numbers(const char* key, const std::vector<double>& values) {
    for (size_t i = 0; i < states_.size(); ++i)
      write(states_[i], key, PyRef::checked(PyFloat_FromDouble(values[representative_ ? 0 : i])));
  }
  // state[key] of each parameter, a tensor (or None, as null, when `optional`).
  std::vector<Tensor> state_tensors(const char* key, bool optional = false) {
    std::vector<Tensor> out;
    for (PyObject* s : states_) {
      PyObject* v = optional ? lookup(s, key) : state_item(s, key);
      if (!v || v == Py_None) {
        LOOM_CHECK(optional, Value, "optimizer state '", key, "' must be a tensor, not None");
        out.emplace_back();
        continue;
      }
      LOOM_CHECK(is_tensor(v), Type, "optimizer state '", key, "' must be a tensor, not ", type_name(v));
      out.push_back(tensor_of(v));
    }
    if (record_) record_->tensors.emplace_back(key, out);
    if (replayed_) {
      // A replay reads the tensors the update read (graph/captured_step.h): the state must still hold them.
      const std::vector<Tensor>* was = nullptr;
      for (const auto& [k, ts] : replayed_->tensors)
        if (k == key) was = &ts;
      if ((!was || *was != out) && mismatch.empty())
        mismatch = std::string("the optimizer state '") + key + "' holds other tensors than when the step was captured";
    }
    if (!numbers_only()) return out;
    // Placeholders: the rule reads no tensor (null stays null).
    std::vector<bool> present(out.size());
    for (size_t i = 0; i < out.size(); ++i) present[i] = static_cast<bool>(out[i]);
    present = for_params(std::move(present));
    std::vector<Tensor> placeholders(present.size());
    for (size_t i = 0; i < present.size(); ++i)
      if (present[i]) placeholders[i] = params[i];
    return placeholders;
  }
  // state[key] = tensor (None for null) of each parameter; an update only.
  void set_state_tensors(const char* key, const std::vector<Tensor>& values) {
    if (numbers_only()) return;
    for (size_t i = 0; i < states_.size(); ++i)
      write(states_[i], key, PyRef::steal(values[i] ? wrap(values[i]) : Py_NewRef(Py_None)));
  }
  std::vector<Tensor> grads() {
    std::vector<Tensor> out;
    for (const Tensor& p : params) {
      if (numbers_only()) {
        out.push_back(p);
        continue;
      }
      AutogradMeta* m = p->autograd_meta();
      out.push_back(m ? m->grad : Tensor());
    }
    return out;
  }

  std::vector<Tensor> params;
  std::string mismatch;  // a replay: what differs from the recorded update

 private:
  // Per-parameter values as the rule takes them: all of them, or the first one's for a
  // representative call (noting whether the others agree).
  template <typename T>
  std::vector<T> for_params(std::vector<T> values) {
    if (!representative_ || values.empty()) return values;
    for (size_t i = 1; i < values.size(); ++i) uniform = uniform && values[i] == values[0];
    values.resize(1);
    return values;
  }

  PyObject* item(const char* key) {
    PyObject* v = lookup(group_, key);
    if (!v) {
      PyErr_Format(PyExc_KeyError, "'%s'", key);
      throw PythonError{};
    }
    return v;
  }
  static PyObject* state_item(PyObject* state, const char* key) {
    LOOM_CHECK(PyDict_Check(state), Type, "optimizer state must be a dict, not ", type_name(state));
    PyObject* v = lookup(state, key);
    if (!v) {
      PyErr_Format(PyExc_KeyError, "'%s'", key);
      throw PythonError{};
    }
    return v;
  }
  void write(PyObject* dict, const char* key, PyRef value) {
    if (!out_) {
      check_status(PyDict_SetItem(dict, key_object(key), value.get()));
      return;
    }
    out_->writes.push_back({PyRef::borrow(dict), PyRef::borrow(key_object(key)), std::move(value)});
  }

  PyObject* optimizer_;
  PyObject* group_;
  std::vector<PyObject*> states_;
  RecordedUpdate* record_ = nullptr;
  const RecordedUpdate* replayed_ = nullptr;
  ReplayedUpdate* out_ = nullptr;
  bool representative_ = false;
};

// ---- the rules: what each reads and writes around its update (lazy/optimizer_steps.h) ----

void adam(GroupCall& c) {
  std::vector<int64_t> steps = c.advance_steps();
  auto [beta1, beta2] = c.pair("betas");
  bool amsgrad = c.flag("amsgrad");
  optim::AdamOptions o{c.number("lr"),    beta1,   beta2, c.number("eps"), c.number("weight_decay"),
                       c.attribute("_decoupled"), amsgrad, c.flag("maximize")};
  std::vector<Tensor> grads = c.grads(), exp_avgs = c.state_tensors("exp_avg"),
                      exp_avg_sqs = c.state_tensors("exp_avg_sq");
  std::vector<Tensor> max_exp_avg_sqs = amsgrad ? c.state_tensors("max_exp_avg_sq") : std::vector<Tensor>{};
  optim::adam(c.params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, o);
}

void sgd(GroupCall& c) {
  optim::SgdOptions o{c.number("lr"),           c.number("momentum"),  c.number("dampening"),
                      c.number("weight_decay"), c.flag("nesterov"),    c.flag("maximize")};
  std::vector<Tensor> buffers = c.state_tensors("momentum_buffer", true);
  optim::sgd(c.params, c.grads(), buffers, o);
  // The buffers made at the first step with momentum (None without momentum, as PyTorch stores it).
  c.set_state_tensors("momentum_buffer", buffers);
}

void adadelta(GroupCall& c) {
  c.advance_steps();
  optim::adadelta(c.params, c.grads(), c.state_tensors("square_avg"), c.state_tensors("acc_delta"),
                  {c.number("lr"), c.number("rho"), c.number("eps"), c.number("weight_decay"), c.flag("maximize")});
}

void adagrad(GroupCall& c) {
  std::vector<int64_t> steps = c.advance_steps();
  optim::adagrad(c.params, c.grads(), c.state_tensors("sum"), steps,
                 {c.number("lr"), c.number("lr_decay"), c.number("weight_decay"), c.number("eps"), c.flag("maximize")});
}

void rmsprop(GroupCall& c) {
  c.advance_steps();
  double momentum = c.number("momentum");
  bool centered = c.flag("centered");
  std::vector<Tensor> square_avgs = c.state_tensors("square_avg");
  std::vector<Tensor> grad_avgs = centered ? c.state_tensors("grad_avg") : std::vector<Tensor>{};
  std::vector<Tensor> buffers = momentum > 0 ? c.state_tensors("momentum_buffer") : std::vector<Tensor>{};
  optim::rmsprop(c.params, c.grads(), square_avgs, grad_avgs, buffers,
                 {c.number("lr"), c.number("alpha"), c.number("eps"), c.number("weight_decay"), momentum, centered,
                  c.flag("maximize")});
}

void adamax(GroupCall& c) {
  std::vector<int64_t> steps = c.advance_steps();
  auto [beta1, beta2] = c.pair("betas");
  optim::adamax(c.params, c.grads(), c.state_tensors("exp_avg"), c.state_tensors("exp_inf"), steps,
                {c.number("lr"), beta1, beta2, c.number("eps"), c.number("weight_decay"), c.flag("maximize")});
}

void nadam(GroupCall& c) {
  std::vector<int64_t> steps = c.advance_steps();
  std::vector<double> mu_products = c.state_numbers("mu_product");
  auto [beta1, beta2] = c.pair("betas");
  optim::nadam(c.params, c.grads(), c.state_tensors("exp_avg"), c.state_tensors("exp_avg_sq"), mu_products, steps,
               {c.number("lr"), beta1, beta2, c.number("eps"), c.number("weight_decay"), c.number("momentum_decay"),
                c.flag("decoupled_weight_decay"), c.flag("maximize")});
  c.set_state_numbers("mu_product", mu_products);
}

void radam(GroupCall& c) {
  std::vector<int64_t> steps = c.advance_steps();
  auto [beta1, beta2] = c.pair("betas");
  optim::radam(c.params, c.grads(), c.state_tensors("exp_avg"), c.state_tensors("exp_avg_sq"), steps,
               {c.number("lr"), beta1, beta2, c.number("eps"), c.number("weight_decay"),
                c.flag("decoupled_weight_decay"), c.flag("maximize")});
}

void asgd(GroupCall& c) {
  std::vector<int64_t> steps = c.advance_steps();
  std::vector<double> etas = c.state_numbers("eta"), mus = c.state_numbers("mu");
  optim::asgd(c.params, c.grads(), c.state_tensors("ax"), etas, mus, steps,
              {c.number("lr"), c.number("lambd"), c.number("alpha"), c.number("t0"), c.number("weight_decay"),
               c.flag("maximize")});
  c.set_state_numbers("eta", etas);
  c.set_state_numbers("mu", mus);
}

void rprop(GroupCall& c) {
  c.advance_steps();
  auto [etaminus, etaplus] = c.pair("etas");
  auto [step_size_min, step_size_max] = c.pair("step_sizes");
  optim::rprop(c.params, c.grads(), c.state_tensors("prev"), c.state_tensors("step_size"),
               {etaminus, etaplus, step_size_min, step_size_max, c.flag("maximize")});
}

struct Rule {
  const char* name;
  void (*fn)(GroupCall&);
};
constexpr Rule kRules[] = {
    {"adam", adam},       {"sgd", sgd},       {"adadelta", adadelta}, {"adagrad", adagrad}, {"rmsprop", rmsprop},
    {"adamax", adamax},   {"nadam", nadam},   {"radam", radam},       {"asgd", asgd},       {"rprop", rprop},
};

int32_t rule_index(PyObject* name) {
  const char* n = PyUnicode_AsUTF8(name);
  if (!n) throw PythonError{};
  for (size_t i = 0; i < std::size(kRules); ++i)
    if (std::string_view(kRules[i].name) == n) return static_cast<int32_t>(i);
  LOOM_FAIL(Value, "unknown optimizer rule '", n, "'");
}

// A list of tensors.
std::vector<Tensor> tensor_list(PyObject* obj, const char* what) {
  PyRef items = PyRef::checked(PySequence_Fast(obj, what));
  std::vector<Tensor> out;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(items.get());
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(items.get(), i);
    LOOM_CHECK(is_tensor(item), Type, what, " must hold tensors, not ", type_name(item));
    out.push_back(tensor_of(item));
  }
  return out;
}

int64_t step_count_of(PyObject* optimizer) {
  PyRef v = PyRef::steal(PyObject_GetAttrString(optimizer, "_step_count"));
  if (!v) {
    PyErr_Clear();
    return 0;
  }
  return PyLong_Check(v.get()) ? PyLong_AsLongLong(v.get()) : 0;
}

// _optimizer_step(rule, optimizer, group, params, states)
PyObject* f_optimizer_step(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  LOOM_CHECK(nargs == 5 && (!kwnames || PyTuple_GET_SIZE(kwnames) == 0), Type,
             "_optimizer_step takes 5 positional arguments (", nargs, " given)");
  int32_t rule = rule_index(args[0]);
  PyObject* optimizer = args[1];
  PyObject* group = args[2];
  LOOM_CHECK(PyDict_Check(group), Type, "a parameter group must be a dict, not ", type_name(group));
  std::vector<Tensor> params = tensor_list(args[3], "params");
  PyRef states_seq = PyRef::checked(PySequence_Fast(args[4], "states"));
  std::vector<PyObject*> states;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(states_seq.get()); ++i)
    states.push_back(PySequence_Fast_GET_ITEM(states_seq.get(), i));
  LOOM_CHECK(states.size() == params.size(), Value, "optimizer step: ", params.size(), " parameters but ",
             states.size(), " states");

  StepRecording* recording = loom::recording();
  if (!recording || !update_log) {
    GroupCall call(optimizer, group, std::move(states), std::move(params), nullptr);
    kRules[rule].fn(call);
    return Py_NewRef(Py_None);
  }
  // In a step recorded for loom.compile: the update's numbers first (Note [Optimizer numbers]:
  // from the state as the update will read it, nothing written), then the update with its
  // numbers tagged in that order.
  RecordedUpdate u;
  u.rule = rule;
  u.optimizer = PyRef::borrow(optimizer);
  u.group = PyRef::borrow(group);
  u.optimizer_state = PyRef::steal(PyObject_GetAttrString(optimizer, "state"));
  u.param_groups = PyRef::steal(PyObject_GetAttrString(optimizer, "param_groups"));
  if (!u.optimizer_state || !u.param_groups) PyErr_Clear();
  for (PyObject* s : states) u.states.push_back(PyRef::borrow(s));
  u.params = params;
  u.step_count = step_count_of(optimizer);
  ReplayedUpdate discarded;
  {
    GroupCall numbers(optimizer, group, states, params, nullptr, &discarded);
    optim::NumbersOnly only(discarded.numbers);
    kRules[rule].fn(numbers);
  }
  u.numbers = std::move(discarded.numbers);
  int32_t index = update_log->add(std::move(u));
  StepRecording::OptimizerCall tagged(recording, index);
  GroupCall call(optimizer, group, std::move(states), std::move(params), &update_log->at(index));
  kRules[rule].fn(call);
  // Every number tagged, in the order listed: else the update cannot be replayed (the recording
  // then sees untagged numbers that changed, or a count that differs).
  RecordedUpdate& stored = update_log->at(index);
  if (static_cast<size_t>(tagged.numbers()) != stored.numbers.values.size()) stored.rule = -1;
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

}  // namespace

void set_update_log(UpdateLog* log) noexcept { update_log = log; }

const char* update_rule_name(int32_t rule) noexcept {
  return rule >= 0 && static_cast<size_t>(rule) < std::size(kRules) ? kRules[rule].name : "?";
}

void ReplayedUpdate::commit() {
  for (const Write& w : writes)
    if (PyDict_SetItem(w.dict.get(), w.key.get(), w.value.get()) < 0) PyErr_Clear();
  writes.clear();
}

namespace {

// Whether `part`, repeated, is `whole`.
template <typename T>
bool repeats(const std::vector<T>& part, const std::vector<T>& whole, size_t times) {
  if (part.size() * times != whole.size()) return false;
  for (size_t i = 0; i < whole.size(); ++i)
    if (whole[i] != part[i % part.size()]) return false;
  return true;
}

}  // namespace

std::string replay_update(const RecordedUpdate& update, ReplayedUpdate& out) {
  if (update.rule < 0) return "an optimizer update's numbers could not all be followed";
  size_t n = update.params.size();
  // One parameter standing for all where they agree (GroupCall), else all of them.
  for (bool representative : {true, false}) {
    if (representative && n < 2) continue;
    out.writes.clear();
    GroupCall call(update, out, representative);
    {
      optim::NumbersOnly only(out.numbers);
      kRules[update.rule].fn(call);
    }
    if (!call.mismatch.empty()) return call.mismatch;
    if (representative) {
      if (!call.uniform || !repeats(out.numbers.ops, update.numbers.ops, n)) continue;
      std::vector<double> one = std::move(out.numbers.values);
      out.numbers.values.clear();
      for (size_t i = 0; i < n; ++i) out.numbers.values.insert(out.numbers.values.end(), one.begin(), one.end());
      out.numbers.ops = update.numbers.ops;
      return {};
    }
    if (out.numbers.ops != update.numbers.ops || out.numbers.values.size() != update.numbers.values.size())
      return std::string("the ") + update_rule_name(update.rule) +
             " update takes another code path than when the step was captured (a hyperparameter switched between "
             "zero and non-zero, or a flag changed)";
    return {};
  }
  return {};
}

// _fused_optimizer_updates(enabled) -> the previous setting (tests: the rules op by op).
PyObject* f_fused_optimizer_updates(PyObject*, PyObject* arg) {
  LOOM_PY_BEGIN
  return PyBool_FromLong(optim::set_fused_updates(check_truth(arg)));
  LOOM_PY_END(nullptr)
}

PyMethodDef optim_functions[] = {
    {"_fused_optimizer_updates", f_fused_optimizer_updates, METH_O,
     "_fused_optimizer_updates(enabled): whether this thread's optimizer steps record their fused updates "
     "(lazy/optimizer_steps.h; off: op by op, for tests); returns the previous setting"},
    {"_optimizer_step", LOOM_FASTCALL(f_optimizer_step),
     "_optimizer_step(rule, optimizer, group, params, states): one update of a parameter group by the rule "
     "(adam, sgd, adadelta, adagrad, rmsprop, adamax, nadam, radam, asgd, rprop), reading its hyperparameters from "
     "the group and its state from the parameters' state dicts, and counting the step there"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace loom::py
