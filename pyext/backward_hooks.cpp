// loom._C._backward_hook_function(tensors, callback): what Module.register_full_backward_hook
// (and register_full_backward_pre_hook) stand on, PyTorch's BackwardHookFunction.
//
// It returns the tensors again, as new tensors (the same data and version counter, not views)
// whose gradients reach the originals through one collecting function: when backward has
// computed the gradients of all of them that require grad, callback(grads) runs once, with a
// tuple holding each tensor's gradient (None for one that got none or needs none), and may
// return replacements (a sequence of the same length; None keeps them).
//
// loom's autograd functions have one output, so the gradients meet by position: each returned
// tensor's function places its gradient, flattened, at that tensor's offset in one vector of
// all their elements (zeros elsewhere); the engine sums those into the collector's gradient,
// which splits it again. Sums with zeros are exact, so the gradients pass through unchanged.
#include <algorithm>

#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "pyext/common.h"
#include "pyext/tensor_object.h"
#include "runtime/error.h"

namespace loom::py {
namespace {

class CollectBackward final : public GradFn {
 public:
  struct Part {
    Dims shape;
    DType dtype;
    int64_t offset, numel;
    bool arrived = false;
  };

  // n_results: how many gradients callback returns (one per edge in `next`).
  CollectBackward(PyObject* callback, std::vector<Part> parts, DType packed, int64_t total, size_t n_results)
      : callback_(Py_NewRef(callback)), parts_(std::move(parts)), packed_(packed), total_(total),
        n_results_(n_results) {}
  ~CollectBackward() override {
    if (!Py_IsInitialized()) return;  // at exit: the interpreter is gone, and the callback with it
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_XDECREF(callback_);
    PyGILState_Release(gil);
  }
  std::string name() const override { return "BackwardHookFunctionBackward"; }

  // The gradient of part i, laid into the packed vector (an input function's apply).
  Tensor place(size_t i, const Tensor& grad) {
    Part& p = parts_[i];
    p.arrived = true;
    Tensor flat = ops::reshape(ops::cast(grad, packed_), Dims{p.numel});
    return ops::pad(flat, Dims{p.offset, total_ - p.offset - p.numel}, 0.0);
  }

  std::vector<Tensor> apply(const Tensor& packed) override {
    PyGILState_STATE gil = PyGILState_Ensure();
    struct Release {
      PyGILState_STATE g;
      ~Release() { PyGILState_Release(g); }
    } release{gil};
    PyRef grads = PyRef::checked(PyTuple_New(static_cast<Py_ssize_t>(parts_.size())));
    for (size_t i = 0; i < parts_.size(); ++i) {
      const Part& p = parts_[i];
      PyObject* g = Py_None;
      if (p.arrived) {
        Tensor part = ops::reshape(ops::narrow(packed, 0, p.offset, p.numel), p.shape);
        g = wrap(ops::cast(part, p.dtype));
        check(g);
      } else {
        Py_INCREF(g);
      }
      PyTuple_SET_ITEM(grads.get(), static_cast<Py_ssize_t>(i), g);
    }
    PyRef result = PyRef::checked(PyObject_CallOneArg(callback_, grads.get()));
    PyObject* chosen = result.get() == Py_None ? grads.get() : result.get();
    PyRef seq = PyRef::checked(PySequence_Fast(chosen, "a backward hook must return a sequence of gradients or None"));
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
    LOOM_CHECK(n == static_cast<Py_ssize_t>(n_results_), Runtime, "Backward hook returned an invalid number of ",
               "grad_input, got ", n, ", but expected ", n_results_);
    std::vector<Tensor> out(n_results_);
    for (size_t i = 0; i < n_results_; ++i) {
      PyObject* g = PySequence_Fast_GET_ITEM(seq.get(), static_cast<Py_ssize_t>(i));
      if (g == Py_None) continue;
      LOOM_CHECK(is_tensor(g), Type, "a backward hook must return tensors or None, got ", Py_TYPE(g)->tp_name);
      out[i] = tensor_of(g);
    }
    for (Part& p : parts_) p.arrived = false;  // retain_graph: the next backward collects anew
    return out;
  }

 private:
  PyObject* callback_;
  std::vector<Part> parts_;
  DType packed_;
  int64_t total_;
  size_t n_results_;
};

// The function of one returned tensor: its gradient goes to the collector's, at its offset.
class PlaceBackward final : public GradFn {
 public:
  PlaceBackward(Ref<CollectBackward> collector, size_t index) : collector_(std::move(collector)), index_(index) {
    next.push_back({collector_, 0});
  }
  std::string name() const override { return "BackwardHookFunctionBackward"; }
  std::vector<Tensor> apply(const Tensor& grad) override { return {collector_->place(index_, grad)}; }

 private:
  Ref<CollectBackward> collector_;
  size_t index_;
};

PyObject* f_backward_hook_function(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  LOOM_PY_BEGIN
  LOOM_CHECK(nargs == 2 || nargs == 3, Type, "_backward_hook_function(tensors, callback, sources=None)");
  PyRef seq = PyRef::checked(PySequence_Fast(args[0], "_backward_hook_function: tensors must be a sequence"));
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
  std::vector<Tensor> inputs;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* t = PySequence_Fast_GET_ITEM(seq.get(), i);
    LOOM_CHECK(is_tensor(t), Type, "_backward_hook_function: tensors must be tensors, got ", Py_TYPE(t)->tp_name);
    inputs.push_back(tensor_of(t));
  }
  // With sources (an autograd.Function's inputs): the tensors are new values computed from them,
  // and callback returns the sources' gradients; each floating tensor gets a gradient then.
  std::vector<Tensor> sources;
  bool has_sources = nargs == 3 && args[2] != Py_None;
  bool sources_need_grad = false;
  if (has_sources) {
    PyRef src = PyRef::checked(PySequence_Fast(args[2], "_backward_hook_function: sources must be a sequence"));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(src.get()); ++i) {
      PyObject* t = PySequence_Fast_GET_ITEM(src.get(), i);
      LOOM_CHECK(is_tensor(t), Type, "_backward_hook_function: sources must be tensors, got ", Py_TYPE(t)->tp_name);
      sources.push_back(tensor_of(t));
      sources_need_grad |= grad_enabled() && requires_grad(*sources.back());
    }
  }
  std::vector<CollectBackward::Part> parts;
  int64_t total = 0;
  std::optional<DType> packed;
  bool any = false;
  for (const Tensor& t : inputs) {
    bool needs = has_sources ? sources_need_grad && is_floating(t->dtype()) : grad_enabled() && requires_grad(*t);
    any |= needs;
    int64_t numel = needs ? t->numel() : 0;
    parts.push_back({Dims(t->sizes().begin(), t->sizes().end()), t->dtype(), total, numel});
    total += numel;
    if (needs) packed = packed ? promote_types(*packed, t->dtype()) : t->dtype();
  }
  PyRef out = PyRef::checked(PyTuple_New(n));
  if (!any) {
    for (Py_ssize_t i = 0; i < n; ++i) PyTuple_SET_ITEM(out.get(), i, Py_NewRef(PySequence_Fast_GET_ITEM(seq.get(), i)));
    return out.release();
  }
  const std::vector<Tensor>& edges = has_sources ? sources : inputs;
  auto collector = make_ref<CollectBackward>(args[1], parts, *packed, total, edges.size());
  for (const Tensor& t : edges)
    if (grad_enabled() && requires_grad(*t)) collector->next.push_back(gradient_edge(*t));
    else collector->next.push_back({});
  {
    // The collector's place in the backward order: before the functions of the returned
    // tensors (made next), so it runs after all of them.
    Tensor anchor = ops::detach(inputs[0]);
    set_history(*anchor, collector);
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    const Tensor& t = inputs[static_cast<size_t>(i)];
    Tensor alias = ops::detach(t);  // the same data and version counter, not a view
    if (has_sources ? sources_need_grad && is_floating(t->dtype()) : grad_enabled() && requires_grad(*t))
      set_history(*alias, make_ref<PlaceBackward>(collector, i));
    PyTuple_SET_ITEM(out.get(), i, check(wrap(alias)));
  }
  return out.release();
  LOOM_PY_END(nullptr)
}

}  // namespace

PyMethodDef backward_hook_functions[] = {
    {"_backward_hook_function",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f_backward_hook_function)), METH_FASTCALL,
     "_backward_hook_function(tensors, callback, sources=None): the tensors again, whose gradients pass through "
     "callback(grads) once all have been computed (Module.register_full_backward_hook); with sources, callback "
     "returns the gradients of the sources instead (autograd.Function)"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace loom::py
