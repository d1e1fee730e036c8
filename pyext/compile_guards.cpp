#include "pyext/compile_guards.h"

#include "lazy/autograd.h"
#include "pyext/tensor_object.h"

namespace loom::py {
namespace {

// Python values guarded by their value (==) rather than their identity.
bool by_value(PyObject* v) {
  return v == Py_None || PyBool_Check(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) || PyUnicode_CheckExact(v) ||
         PyBytes_CheckExact(v);
}

bool same_value(PyObject* a, PyObject* b) {
  if (a == b) return true;
  if (!a || !b || Py_TYPE(a) != Py_TYPE(b)) return false;
  int eq = PyObject_RichCompareBool(a, b, Py_EQ);
  if (eq < 0) {
    PyErr_Clear();
    return false;
  }
  return eq == 1;
}

std::string repr(PyObject* v) {
  if (!v) return "missing";
  PyRef r = PyRef::steal(PyObject_Repr(v));
  if (!r) {
    PyErr_Clear();
    return std::string("<") + type_name(v) + ">";
  }
  const char* s = PyUnicode_AsUTF8(r.get());
  std::string out = s ? s : "?";
  if (out.size() > 60) out = out.substr(0, 57) + "...";
  return out;
}

std::string key_repr(PyObject* key) { return repr(key); }

// "training", made once (read from every guarded module at every call).
PyObject* training_name() {
  static PyObject* name = check(PyUnicode_InternFromString("training"));
  return name;
}

}  // namespace

// ---- ArgSpec ----

ArgSpec ArgSpec::of(PyObject* const* args, size_t nargs, PyObject* kwnames, bool floats_are_numbers,
                    CallValues& values) {
  ArgSpec spec;
  values.tensors.clear();
  values.floats.clear();
  // Only the arguments themselves can be numbers (Note [Float arguments]); add() makes floats guards.
  auto add_argument = [&](PyObject* a) {
    if (floats_are_numbers && PyFloat_CheckExact(a)) {
      spec.items_.push_back({Item::Float, PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(a))), 0});
      values.floats.push_back(a);
    } else {
      spec.add(a, values);
    }
  };
  for (size_t i = 0; i < nargs; ++i) add_argument(args[i]);
  if (kwnames && PyTuple_GET_SIZE(kwnames) > 0) {
    spec.kwnames_ = PyRef::borrow(kwnames);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); ++i) add_argument(args[nargs + static_cast<size_t>(i)]);
  }
  return spec;
}

void ArgSpec::guard_float(size_t k, PyObject* value) {
  for (Item& item : items_)
    if (item.kind == Item::Float && k-- == 0) {
      item.object = PyRef::checked(PyFloat_FromDouble(PyFloat_AsDouble(value)));
      item.guarded = true;
      return;
    }
}

void ArgSpec::add(PyObject* obj, CallValues& values) {
  if (is_tensor(obj)) {
    items_.push_back({Item::Tensor, {}, 0});
    values.tensors.push_back(obj);
  } else if (by_value(obj) || PyFloat_Check(obj)) {
    items_.push_back({Item::Value, PyRef::borrow(obj), 0});
  } else if (PyTuple_Check(obj)) {
    Py_ssize_t n = PyTuple_GET_SIZE(obj);
    items_.push_back({Item::Tuple, PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(obj))), n});
    for (Py_ssize_t i = 0; i < n; ++i) add(PyTuple_GET_ITEM(obj, i), values);
  } else if (PyList_CheckExact(obj)) {
    Py_ssize_t n = PyList_GET_SIZE(obj);
    items_.push_back({Item::List, {}, n});
    for (Py_ssize_t i = 0; i < n; ++i) add(PyList_GET_ITEM(obj, i), values);
  } else if (PyDict_CheckExact(obj)) {
    PyRef keys = PyRef::checked(PyDict_Keys(obj));
    PyRef tuple = PyRef::checked(PyList_AsTuple(keys.get()));
    Py_ssize_t n = PyTuple_GET_SIZE(tuple.get());
    items_.push_back({Item::Dict, PyRef::borrow(tuple.get()), n});
    for (Py_ssize_t i = 0; i < n; ++i) add(PyDict_GetItem(obj, PyTuple_GET_ITEM(tuple.get(), i)), values);
  } else {
    items_.push_back({Item::Identity, PyRef::borrow(obj), 0});
  }
}

std::string ArgSpec::match(PyObject* const* args, size_t nargs, PyObject* kwnames, CallValues& values) const {
  values.tensors.clear();
  values.floats.clear();
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  Py_ssize_t spec_kw = kwnames_ ? PyTuple_GET_SIZE(kwnames_.get()) : 0;
  if (nkw != spec_kw) return "the call passes other keyword arguments";
  for (Py_ssize_t i = 0; i < nkw; ++i)
    if (!same_value(PyTuple_GET_ITEM(kwnames, i), PyTuple_GET_ITEM(kwnames_.get(), i)))
      return "the call passes other keyword arguments";
  size_t at = 0;
  for (size_t i = 0; i < nargs + static_cast<size_t>(nkw); ++i) {
    if (at >= items_.size()) return "the call passes more arguments";
    std::string where = i < nargs ? "argument " + std::to_string(i)
                                  : "argument '" + std::string(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, static_cast<Py_ssize_t>(i - nargs)))) + "'";
    if (std::string why = check(args[i], at, values, where); !why.empty()) return why;
  }
  if (at != items_.size()) return "the call passes fewer arguments";
  return {};
}

std::string ArgSpec::check(PyObject* obj, size_t& at, CallValues& values, const std::string& where) const {
  const Item& item = items_[at++];
  switch (item.kind) {
    case Item::Tensor:
      if (!is_tensor(obj)) return where + " is a " + type_name(obj) + ", was a tensor";
      values.tensors.push_back(obj);
      return {};
    case Item::Float:
      if (item.guarded ? !same_value(obj, item.object.get()) : !PyFloat_CheckExact(obj))
        return where + " is " + repr(obj) + ", was " + (item.guarded ? repr(item.object.get()) : "a float") +
               (item.guarded ? " (the step's Python uses its value)" : "");
      values.floats.push_back(obj);
      return {};
    case Item::Value:
      if (!same_value(obj, item.object.get())) return where + " is " + repr(obj) + ", was " + repr(item.object.get());
      return {};
    case Item::Identity:
      if (obj != item.object.get()) return where + " is another " + type_name(obj) + " object";
      return {};
    case Item::Tuple: {
      if (Py_TYPE(obj) != reinterpret_cast<PyTypeObject*>(item.object.get()) || PyTuple_GET_SIZE(obj) != item.size)
        return where + " is a " + type_name(obj) + " of another length or type";
      for (Py_ssize_t i = 0; i < item.size; ++i)
        if (std::string why = check(PyTuple_GET_ITEM(obj, i), at, values, where + "[" + std::to_string(i) + "]"); !why.empty())
          return why;
      return {};
    }
    case Item::List: {
      if (!PyList_CheckExact(obj) || PyList_GET_SIZE(obj) != item.size) return where + " is not a list of the same length";
      for (Py_ssize_t i = 0; i < item.size; ++i)
        if (std::string why = check(PyList_GET_ITEM(obj, i), at, values, where + "[" + std::to_string(i) + "]"); !why.empty())
          return why;
      return {};
    }
    case Item::Dict: {
      if (!PyDict_CheckExact(obj) || PyDict_GET_SIZE(obj) != item.size) return where + " is not a dict of the same keys";
      for (Py_ssize_t i = 0; i < item.size; ++i) {
        PyObject* key = PyTuple_GET_ITEM(item.object.get(), i);
        PyObject* v = PyDict_GetItemWithError(obj, key);
        if (!v) {
          PyErr_Clear();
          return where + " has no key " + key_repr(key);
        }
        if (std::string why = check(v, at, values, where + "[" + key_repr(key) + "]"); !why.empty()) return why;
      }
      return {};
    }
  }
  return "internal: an unknown argument spec";
}

bool ArgSpec::operator==(const ArgSpec& other) const {
  if (items_.size() != other.items_.size()) return false;
  if (static_cast<bool>(kwnames_) != static_cast<bool>(other.kwnames_) ||
      (kwnames_ && !same_value(kwnames_.get(), other.kwnames_.get())))
    return false;
  for (size_t i = 0; i < items_.size(); ++i) {
    const Item &a = items_[i], &b = other.items_[i];
    if (a.kind != b.kind || a.size != b.size || a.guarded != b.guarded) return false;
    if (a.kind == Item::Float && !a.guarded) continue;
    if (a.kind == Item::Identity && a.object.get() != b.object.get()) return false;
    if ((a.kind == Item::Value || a.kind == Item::Dict || a.kind == Item::Tuple || a.kind == Item::Float) &&
        !same_value(a.object.get(), b.object.get()))
      return false;
  }
  return true;
}

// ---- PyGuards ----

PyGuards PyGuards::snapshot(PyObject* state, CallValues& values) {
  PyGuards g;
  g.grad_mode_ = grad_enabled();
  LOOM_CHECK(PyTuple_Check(state) && PyTuple_GET_SIZE(state) >= 3, Runtime, "internal: a bad compile guard state");
  PyObject* globals = PyTuple_GET_ITEM(state, 0);
  PyObject* cells = PyTuple_GET_ITEM(state, 1);
  PyObject* modules = PyTuple_GET_ITEM(state, 2);
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(globals); ++i) {
    PyObject* pair = PyList_GET_ITEM(globals, i);
    Slot s;
    s.dict = PyRef::borrow(PyTuple_GET_ITEM(pair, 0));
    s.name = PyRef::borrow(PyTuple_GET_ITEM(pair, 1));
    PyObject* v = PyDict_GetItemWithError(s.dict.get(), s.name.get());
    if (!v && PyErr_Occurred()) throw PythonError{};
    s.value = PyRef::borrow(v);
    s.by_value = v && by_value(v);
    s.tensor = v && is_tensor(v);
    if (s.tensor) values.tensors.push_back(v);
    g.slots_.push_back(std::move(s));
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cells); ++i) {
    PyObject* pair = PyList_GET_ITEM(cells, i);
    Slot s;
    s.cell = PyRef::borrow(PyTuple_GET_ITEM(pair, 0));
    s.name = PyRef::borrow(PyTuple_GET_ITEM(pair, 1));
    PyObject* v = PyCell_GET(s.cell.get());
    s.value = PyRef::borrow(v);
    s.by_value = v && by_value(v);
    s.tensor = v && is_tensor(v);
    if (s.tensor) values.tensors.push_back(v);
    g.slots_.push_back(std::move(s));
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(modules); ++i) {
    PyObject* m = PyList_GET_ITEM(modules, i);
    PyRef training = PyRef::checked(PyObject_GetAttr(m, training_name()));
    g.modules_.emplace_back(PyRef::borrow(m), check_truth(training.get()));
  }
  return g;
}

std::string PyGuards::check(CallValues& values) const {
  if (grad_enabled() != grad_mode_) return std::string("grad mode is ") + (grad_mode_ ? "off" : "on") + ", was " + (grad_mode_ ? "on" : "off");
  for (const Slot& s : slots_) {
    PyObject* now = s.cell ? PyCell_GET(s.cell.get()) : PyDict_GetItemWithError(s.dict.get(), s.name.get());
    if (!now && PyErr_Occurred()) PyErr_Clear();
    if (s.tensor && now && is_tensor(now)) {
      values.tensors.push_back(now);
      continue;
    }
    bool same = s.by_value ? same_value(now, s.value.get()) : now == s.value.get();
    if (!same) {
      std::string name = PyUnicode_Check(s.name.get()) ? PyUnicode_AsUTF8(s.name.get()) : "?";
      std::string what = std::string(s.cell ? "closure variable '" : "global '") + name + "'";
      return s.by_value || !now || !s.value ? what + " is " + repr(now) + ", was " + repr(s.value.get())
                                             : what + " is another " + type_name(now) + " object";
    }
  }
  for (const auto& [m, training] : modules_) {
    PyRef now = PyRef::steal(PyObject_GetAttr(m.get(), training_name()));
    if (!now) {
      PyErr_Clear();
      return std::string("a ") + type_name(m.get()) + " lost its training flag";
    }
    int t = PyObject_IsTrue(now.get());
    if (t < 0) PyErr_Clear();
    if ((t == 1) != training)
      return std::string("a ") + type_name(m.get()) + " module is in " + (training ? "eval" : "training") +
             " mode, was in " + (training ? "training" : "eval") + " mode";
  }
  return {};
}

bool PyGuards::operator==(const PyGuards& o) const {
  if (grad_mode_ != o.grad_mode_ || slots_.size() != o.slots_.size() || modules_.size() != o.modules_.size()) return false;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot &a = slots_[i], &b = o.slots_[i];
    if (a.cell.get() != b.cell.get() || a.dict.get() != b.dict.get() || a.by_value != b.by_value ||
        a.tensor != b.tensor)
      return false;
    if (a.tensor) continue;
    if (a.by_value ? !same_value(a.value.get(), b.value.get()) : a.value.get() != b.value.get()) return false;
  }
  for (size_t i = 0; i < modules_.size(); ++i)
    if (modules_[i].first.get() != o.modules_[i].first.get() || modules_[i].second != o.modules_[i].second) return false;
  return true;
}

// ---- ResultTemplate ----

ResultTemplate ResultTemplate::of(PyObject* result, std::vector<PyObject*>& tensors) {
  ResultTemplate t;
  tensors.clear();
  t.add(result, tensors);
  return t;
}

void ResultTemplate::add(PyObject* obj, std::vector<PyObject*>& tensors) {
  if (is_tensor(obj)) {
    items_.push_back({Item::Tensor, {}, 0, static_cast<int32_t>(tensors_.size())});
    tensors_.push_back({PyRef::borrow(obj), -1});
    tensors.push_back(obj);
  } else if (PyTuple_Check(obj)) {
    Py_ssize_t n = PyTuple_GET_SIZE(obj);
    items_.push_back({Item::Tuple, PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(obj))), n});
    for (Py_ssize_t i = 0; i < n; ++i) add(PyTuple_GET_ITEM(obj, i), tensors);
  } else if (PyList_CheckExact(obj)) {
    Py_ssize_t n = PyList_GET_SIZE(obj);
    items_.push_back({Item::List, {}, n});
    for (Py_ssize_t i = 0; i < n; ++i) add(PyList_GET_ITEM(obj, i), tensors);
  } else if (PyDict_CheckExact(obj)) {
    PyRef keys = PyRef::checked(PyDict_Keys(obj));
    PyRef tuple = PyRef::checked(PyList_AsTuple(keys.get()));
    Py_ssize_t n = PyTuple_GET_SIZE(tuple.get());
    items_.push_back({Item::Dict, PyRef::borrow(tuple.get()), n});
    for (Py_ssize_t i = 0; i < n; ++i) add(PyDict_GetItem(obj, PyTuple_GET_ITEM(tuple.get(), i)), tensors);
  } else {
    items_.push_back({Item::Value, PyRef::borrow(obj), 0});
  }
}

PyObject* ResultTemplate::make(const std::vector<Tensor>& fresh, const CallValues& call) const {
  size_t at = 0;
  return build(at, fresh, call);
}

PyObject* ResultTemplate::build(size_t& at, const std::vector<Tensor>& fresh, const CallValues& call) const {
  const Item& item = items_[at++];
  switch (item.kind) {
    case Item::Tensor: {
      const TensorItem& t = tensors_[static_cast<size_t>(item.tensor)];
      if (static_cast<size_t>(item.tensor) < fresh.size() && fresh[static_cast<size_t>(item.tensor)])
        return wrap(fresh[static_cast<size_t>(item.tensor)]);
      if (t.argument >= 0) return Py_NewRef(call.tensors[static_cast<size_t>(t.argument)]);
      return Py_NewRef(t.recorded.get());
    }
    case Item::Value: return Py_NewRef(item.object.get());
    case Item::List:
    case Item::Tuple: {
      PyRef items = PyRef::checked(PyList_New(item.size));
      for (Py_ssize_t i = 0; i < item.size; ++i) PyList_SET_ITEM(items.get(), i, check(build(at, fresh, call)));
      if (item.kind == Item::List) return items.release();
      PyRef tuple = PyRef::checked(PyList_AsTuple(items.get()));
      auto* type = reinterpret_cast<PyTypeObject*>(item.object.get());
      if (type == &PyTuple_Type) return tuple.release();
      // A named tuple (or another tuple subclass): rebuilt through its constructor.
      if (PyObject_HasAttrString(reinterpret_cast<PyObject*>(type), "_make"))
        return check(PyObject_CallMethod(reinterpret_cast<PyObject*>(type), "_make", "O", tuple.get()));
      return check(PyObject_CallOneArg(reinterpret_cast<PyObject*>(type), tuple.get()));
    }
    case Item::Dict: {
      PyRef dict = PyRef::checked(PyDict_New());
      for (Py_ssize_t i = 0; i < item.size; ++i) {
        PyRef v = PyRef::checked(build(at, fresh, call));
        check_status(PyDict_SetItem(dict.get(), PyTuple_GET_ITEM(item.object.get(), i), v.get()));
      }
      return dict.release();
    }
  }
  LOOM_FAIL(Runtime, "internal: an unknown result template");
}

bool ResultTemplate::agrees_with(const ResultTemplate& o) const {
  if (items_.size() != o.items_.size() || tensors_.size() != o.tensors_.size()) return false;
  for (size_t i = 0; i < items_.size(); ++i) {
    const Item &a = items_[i], &b = o.items_[i];
    if (a.kind != b.kind || a.size != b.size) return false;
    if (a.kind == Item::Value && !same_value(a.object.get(), b.object.get())) return false;
    if ((a.kind == Item::Tuple || a.kind == Item::Dict) && !same_value(a.object.get(), b.object.get())) return false;
  }
  for (size_t i = 0; i < tensors_.size(); ++i)
    if (tensors_[i].argument != o.tensors_[i].argument) return false;
  return true;
}

}  // namespace loom::py
