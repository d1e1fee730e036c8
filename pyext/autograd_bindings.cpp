// Autograd from Python: Tensor.requires_grad / grad / grad_fn / is_leaf / backward /
// retain_grad / requires_grad_, grad-mode control, autograd.grad, and the grad_fn objects
// (loom.autograd.graph.Node-like: name(), next_functions).
#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "pyext/args.h"
#include "pyext/op_args.h"
#include "pyext/tensor_object.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

using FastArgs = PyObject* const*;

// ---- grad_fn objects ----

struct PyGradFn {
  PyObject_HEAD
  GradFn* fn;  // owned reference
};

void gradfn_dealloc(PyObject* self) {
  Ref<GradFn>::adopt(reinterpret_cast<PyGradFn*>(self)->fn).reset();
  Py_TYPE(self)->tp_free(self);
}

GradFn& fn_of(PyObject* self) { return *reinterpret_cast<PyGradFn*>(self)->fn; }

PyObject* gradfn_repr(PyObject* self) {
  return PyUnicode_FromFormat("<%s object at %p>", fn_of(self).name().c_str(), self);
}

PyObject* gradfn_name(PyObject* self, PyObject*) { return PyUnicode_FromString(fn_of(self).name().c_str()); }

PyObject* wrap_fn(const Ref<GradFn>& fn);

PyObject* gradfn_next_functions(PyObject* self, void*) {
  LOOM_PY_BEGIN
  const std::vector<Edge>& next = fn_of(self).next;
  PyRef out = PyRef::checked(PyTuple_New(static_cast<Py_ssize_t>(next.size())));
  for (size_t i = 0; i < next.size(); ++i) {
    PyRef fn = PyRef::checked(next[i].fn ? wrap_fn(next[i].fn) : Py_NewRef(Py_None));
    PyTuple_SET_ITEM(out.get(), static_cast<Py_ssize_t>(i), check(Py_BuildValue("(Oi)", fn.get(), next[i].input_nr)));
  }
  return out.release();
  LOOM_PY_END(nullptr)
}

PyObject* gradfn_richcompare(PyObject* a, PyObject* b, int op);

PyMethodDef gradfn_methods[] = {
    {"name", gradfn_name, METH_NOARGS, "the function's name, as PyTorch's: 'MulBackward0'"},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef gradfn_getset[] = {
    {"next_functions", gradfn_next_functions, nullptr, "((function or None, input index), ...) per input", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject GradFnType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "loom.autograd.Function";
  t.tp_basicsize = sizeof(PyGradFn);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "A node of the backward graph: the function that computes a tensor's gradient.";
  t.tp_dealloc = gradfn_dealloc;
  t.tp_repr = gradfn_repr;
  t.tp_methods = gradfn_methods;
  t.tp_getset = gradfn_getset;
  t.tp_richcompare = gradfn_richcompare;
  t.tp_hash = [](PyObject* self) -> Py_hash_t {
    auto h = static_cast<Py_hash_t>(reinterpret_cast<uintptr_t>(&fn_of(self)) >> 4);
    return h == -1 ? -2 : h;
  };
  return t;
}();

// Two objects for the same function compare equal (each access makes a new object).
PyObject* gradfn_richcompare(PyObject* a, PyObject* b, int op) {
  if ((op != Py_EQ && op != Py_NE) || Py_TYPE(b) != &GradFnType) Py_RETURN_NOTIMPLEMENTED;
  bool same = &fn_of(a) == &fn_of(b);
  return PyBool_FromLong(same == (op == Py_EQ));
}

PyObject* wrap_fn(const Ref<GradFn>& fn) {
  auto* obj = PyObject_New(PyGradFn, &GradFnType);
  if (!obj) throw PythonError{};
  obj->fn = Ref<GradFn>(fn).leak();
  return reinterpret_cast<PyObject*>(obj);
}

// ---- Tensor attributes ----

PyObject* get_requires_grad(PyObject* self, void*) { return PyBool_FromLong(requires_grad(impl_of(self))); }

// Unlike requires_grad_(True), assigning requires_grad on a non-leaf raises either way (PyTorch).
int set_requires_grad_attr(PyObject* self, PyObject* value, void*) {
  LOOM_PY_BEGIN
  LOOM_CHECK(value, Type, "cannot delete requires_grad");
  bool flag = to_bool(value, "requires_grad");
  LOOM_CHECK(!flag || is_leaf(impl_of(self)), Runtime, "you can only change requires_grad flags of leaf variables.");
  set_requires_grad(impl_of(self), flag);
  return 0;
  LOOM_PY_END(-1)
}

PyObject* get_grad(PyObject* self, void*) {
  const AutogradMeta* m = impl_of(self).autograd_meta();
  if (!m || !m->grad) Py_RETURN_NONE;
  LOOM_PY_BEGIN
  return wrap(m->grad);
  LOOM_PY_END(nullptr)
}

int set_grad(PyObject* self, PyObject* value, void*) {
  LOOM_PY_BEGIN
  AutogradMeta& m = autograd(impl_of(self));
  if (!value || value == Py_None) {
    m.grad.reset();
    return 0;
  }
  Tensor g = tensor_arg(value, "grad");
  LOOM_CHECK(Dims(g->sizes()) == Dims(impl_of(self).sizes()), Runtime, "assigned grad has data of a different size");
  LOOM_CHECK(g->dtype() == impl_of(self).dtype(), Runtime, "assigned grad has data of a different type");
  m.grad = g;
  return 0;
  LOOM_PY_END(-1)
}

PyObject* get_grad_fn(PyObject* self, void*) {
  LOOM_PY_BEGIN
  const Ref<GradFn>& fn = current_grad_fn(impl_of(self));
  if (!fn) Py_RETURN_NONE;
  return wrap_fn(fn);
  LOOM_PY_END(nullptr)
}

PyObject* get_is_leaf(PyObject* self, void*) { return PyBool_FromLong(is_leaf(impl_of(self))); }

// True after retain_grad() on a non-leaf (a leaf keeps its gradient without it: False there).
PyObject* get_retains_grad(PyObject* self, void*) {
  const AutogradMeta* m = impl_of(self).autograd_meta();
  return PyBool_FromLong(m && m->retains_grad);
}

// PyTorch's .data: detach() with a version counter of its own, so autograd does not see writes
// through it (backward then uses the values it finds).
PyObject* get_data(PyObject* self, void*) {
  LOOM_PY_BEGIN
  return wrap(ops::detach(tensor_of(self), false));
  LOOM_PY_END(nullptr)
}

int set_data(PyObject* self, PyObject* value, void*) { return set_tensor_data(self, value); }

PyObject* get_version(PyObject* self, void*) { return PyLong_FromUnsignedLongLong(impl_of(self).version()); }

// ---- Tensor methods ----

PyObject* m_requires_grad_(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("requires_grad_", {"requires_grad"}, 1);
  Args<1> a;
  parser.parse(args, nargs, kwnames, a.v);
  set_requires_grad(impl_of(self), a.has(0) ? to_bool(a[0], "requires_grad") : true);
  return Py_NewRef(self);
  LOOM_PY_END(nullptr)
}

PyObject* m_retain_grad(PyObject* self, PyObject*) {
  LOOM_PY_BEGIN
  retain_grad(impl_of(self));
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// Tensor.register_hook(hook): loom/_tensor.py makes the handle and calls _add_tensor_hook.
PyObject* m_register_hook(PyObject* self, PyObject* args, PyObject* kwargs) {
  return call_python_with("loom._tensor", "register_hook", self, args, kwargs);
}

// _add_tensor_hook(tensor, hooks): the hooks of a dict ({handle id: hook}, which the handle
// empties) run, in order, on the gradient that reaches the tensor (lazy/autograd.h
// add_tensor_hook). A hook returns None or a gradient of the same size and dtype.
PyObject* f_add_tensor_hook(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  LOOM_PY_BEGIN
  LOOM_CHECK(nargs == 2 && is_tensor(args[0]) && PyDict_Check(args[1]), Type, "_add_tensor_hook(tensor, dict)");
  // Owns the dict; the last copy of the hook may die where the GIL is not held (a graph freed by
  // another thread), so the release takes it.
  struct Hooks {
    explicit Hooks(PyObject* d) : dict(Py_NewRef(d)) {}
    Hooks(const Hooks&) = delete;
    PyObject* dict;
    ~Hooks() {
      if (!Py_IsInitialized()) return;
      PyGILState_STATE gil = PyGILState_Ensure();
      Py_DECREF(dict);
      PyGILState_Release(gil);
    }
  };
  auto hooks = std::make_shared<Hooks>(args[1]);
  add_tensor_hook(impl_of(args[0]), [hooks](const Tensor& grad) -> Tensor {
    PyGILState_STATE gil = PyGILState_Ensure();
    struct Release {
      PyGILState_STATE g;
      ~Release() { PyGILState_Release(g); }
    } release{gil};
    PyRef fns = PyRef::checked(PyDict_Values(hooks->dict));  // a hook may remove itself
    Tensor g = grad;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(fns.get()); ++i) {
      PyObject* fn = PyList_GET_ITEM(fns.get(), i);
      PyRef result = PyRef::checked(PyObject_CallOneArg(fn, PyRef::checked(wrap(g)).get()));
      if (result.get() == Py_None) continue;
      PyRef name = PyRef::steal(PyObject_GetAttrString(fn, "__name__"));
      if (!name) PyErr_Clear();
      const char* hook_name = name && PyUnicode_Check(name.get()) ? PyUnicode_AsUTF8(name.get()) : "<hook>";
      LOOM_CHECK(is_tensor(result.get()), Type, "expected a Tensor or None as the result of hook '", hook_name,
                 "', got ", Py_TYPE(result.get())->tp_name);
      Tensor r = tensor_of(result.get());
      LOOM_CHECK(Dims(r->sizes()) == Dims(g->sizes()), Runtime, "hook '", hook_name,
                 "' has changed the size of value: was ", format_dims(g->sizes()), ", got ", format_dims(r->sizes()));
      LOOM_CHECK(r->dtype() == g->dtype(), Runtime, "hook '", hook_name, "' has changed the type of value (was ",
                 dtype_name(g->dtype()), " got ", dtype_name(r->dtype()), ")");
      g = r;
    }
    return g;
  });
  Py_RETURN_NONE;
  LOOM_PY_END(nullptr)
}

std::vector<Tensor> optional_tensors(PyObject* obj, const char* what) {
  if (!obj || obj == Py_None) return {};
  if (is_tensor(obj)) return {tensor_of(obj)};
  PyRef items = PyRef::checked(PySequence_Tuple(obj));
  std::vector<Tensor> out;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items.get()); ++i) {
    PyObject* item = PyTuple_GET_ITEM(items.get(), i);
    out.push_back(item == Py_None ? Tensor() : tensor_arg(item, what));
  }
  return out;
}

// Called after every backward() (Tensor.backward and loom.autograd.backward), set by
// loom.autograd: what a data-parallel wrapper reduces gradients in (PyTorch queues its reducer's
// final callback on the autograd engine for the same moment).
PyObject* backward_end_hook = nullptr;

void after_backward() {
  if (!backward_end_hook) return;
  PyRef hook = PyRef::borrow(backward_end_hook);  // the hook may replace itself
  PyRef::checked(PyObject_CallNoArgs(hook.get()));
}

PyObject* m_backward(PyObject* self, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("backward", {"gradient", "retain_graph", "create_graph"}, 3);
  Args<3> a;
  parser.parse(args, nargs, kwnames, a.v);
  bool create_graph = a.has(2) && to_bool(a[2], "create_graph");
  bool retain_graph = a.has(1) ? to_bool(a[1], "retain_graph") : create_graph;
  backward({tensor_of(self)}, optional_tensors(a[0], "gradient"), retain_graph, create_graph);
  after_backward();
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// ---- module functions ----

PyObject* f_set_grad_enabled(PyObject*, PyObject* flag) {
  LOOM_PY_BEGIN
  set_grad_enabled(to_bool(flag, "mode"));
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_is_grad_enabled(PyObject*, PyObject*) { return PyBool_FromLong(grad_enabled()); }

PyObject* f_autograd_backward(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("backward", {"tensors", "grad_tensors", "retain_graph", "create_graph"}, 4);
  Args<4> a;
  parser.parse(args, nargs, kwnames, a.v);
  bool create_graph = a.has(3) && to_bool(a[3], "create_graph");
  bool retain_graph = a.has(2) ? to_bool(a[2], "retain_graph") : create_graph;
  backward(optional_tensors(a[0], "tensors"), optional_tensors(a[1], "grad_tensors"), retain_graph, create_graph);
  after_backward();
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_set_backward_end_hook(PyObject*, PyObject* hook) {
  LOOM_PY_BEGIN
  LOOM_CHECK(hook == Py_None || PyCallable_Check(hook), Type, "the backward-end hook must be callable or None");
  Py_XSETREF(backward_end_hook, hook == Py_None ? nullptr : Py_NewRef(hook));
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_autograd_grad(PyObject*, FastArgs args, Py_ssize_t nargs, PyObject* kwnames) {
  LOOM_PY_BEGIN
  static ArgParser parser("grad", {"outputs", "inputs", "grad_outputs", "retain_graph", "create_graph", "allow_unused"}, 6);
  Args<6> a;
  parser.parse(args, nargs, kwnames, a.v);
  LOOM_CHECK(a[0] && a[1], Type, "grad() missing required arguments 'outputs' and 'inputs'");
  bool create_graph = a.has(4) && to_bool(a[4], "create_graph");
  bool retain_graph = a.has(3) ? to_bool(a[3], "retain_graph") : create_graph;
  bool allow_unused = a.has(5) && to_bool(a[5], "allow_unused");
  std::vector<Tensor> grads = grad(optional_tensors(a[0], "outputs"), optional_tensors(a[2], "grad_outputs"),
                                   optional_tensors(a[1], "inputs"), retain_graph, create_graph, allow_unused);
  PyRef out = PyRef::checked(PyTuple_New(static_cast<Py_ssize_t>(grads.size())));
  for (size_t i = 0; i < grads.size(); ++i)
    PyTuple_SET_ITEM(out.get(), static_cast<Py_ssize_t>(i), grads[i] ? wrap(grads[i]) : Py_NewRef(Py_None));
  return out.release();
  LOOM_PY_END(nullptr)
}

}  // namespace

PyGetSetDef autograd_getset[] = {
    {"requires_grad", get_requires_grad, set_requires_grad_attr, "whether gradients are computed for this tensor",
     nullptr},
    {"grad", get_grad, set_grad, "the gradient accumulated by backward() (None until then)", nullptr},
    {"grad_fn", get_grad_fn, nullptr, "the function that computes this tensor's gradient (None for leaves)", nullptr},
    {"is_leaf", get_is_leaf, nullptr, "True for tensors not computed by a recorded op", nullptr},
    {"retains_grad", get_retains_grad, nullptr, "True if retain_grad() made this non-leaf keep its .grad", nullptr},
    {"data", get_data, set_data,
     "the same values without autograd history (a detached view); assigning one gives this tensor other data",
     nullptr},
    {"_version", get_version, nullptr, "in-place modification counter", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef autograd_methods[] = {
    {"requires_grad_", LOOM_FASTCALL(m_requires_grad_), "requires_grad_(requires_grad=True): set it in place"},
    {"retain_grad", m_retain_grad, METH_NOARGS, "keep this non-leaf tensor's gradient in .grad after backward"},
    {"register_hook", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(m_register_hook)),
     METH_VARARGS | METH_KEYWORDS,
     "register_hook(hook): hook(grad) runs when this tensor's gradient is computed and may return a replacement; "
     "returns a handle whose remove() takes the hook away"},
    {"backward", LOOM_FASTCALL(m_backward), "backward(gradient=None, retain_graph=None, create_graph=False)"},
    {nullptr, nullptr, 0, nullptr},
};

PyMethodDef autograd_functions[] = {
    {"_set_grad_enabled", f_set_grad_enabled, METH_O, "turn gradient recording on or off for this thread"},
    {"is_grad_enabled", f_is_grad_enabled, METH_NOARGS, "True when ops record gradients"},
    {"_autograd_backward", LOOM_FASTCALL(f_autograd_backward), nullptr},
    {"_autograd_grad", LOOM_FASTCALL(f_autograd_grad), nullptr},
    {"_set_backward_end_hook", f_set_backward_end_hook, METH_O, "_set_backward_end_hook(callable or None)"},
    {"_add_tensor_hook", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f_add_tensor_hook)), METH_FASTCALL,
     "_add_tensor_hook(tensor, hooks): the hooks of the dict run on the tensor's gradient"},
    {nullptr, nullptr, 0, nullptr},
};

void register_autograd_types(PyObject* module) {
  check_status(PyType_Ready(&GradFnType));
  Py_INCREF(&GradFnType);
  check_status(PyModule_AddObject(module, "_GradFn", reinterpret_cast<PyObject*>(&GradFnType)));
}

}  // namespace loom::py
