// Autocast: the policy table, the per-thread state, the casts and their cache (autocast.h), and
// loom._C's functions behind loom.amp.autocast.
#include "pyext/autocast.h"

#include <algorithm>
#include <unordered_map>

#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "pyext/objects.h"
#include "pyext/tensor_object.h"
#include "runtime/error.h"

namespace loom::py {

namespace {

constexpr CastClass N = CastClass::None, Low = CastClass::LowerPrecision, F32 = CastClass::Float32,
                    F32Dtype = CastClass::Float32Dtype, Promote = CastClass::Promote, Banned = CastClass::Banned;

struct PolicyRow {
  const char* name;
  AutocastPolicy policy;  // {cpu, cuda}
};

// The policy table: PyTorch 1.13's autocast lists (aten/src/ATen/autocast_mode.cpp), by the
// names Python calls the ops. Where loom implements as one op what PyTorch decomposes on a
// device (einsum, tensordot, chain_matmul and multi_dot into mm on the CPU), the row gives the
// class the decomposition ends in, so results have PyTorch's dtypes. Names loom does not have
// yet (convolutions, most losses) are listed so that they autocast once they arrive.
const PolicyRow kPolicies[] = {
    // matrix products and convolutions: the low precision
    {"matmul", {Low, Low}}, {"mm", {Low, Low}}, {"bmm", {Low, Low}}, {"linear", {Low, Low}},
    {"addmm", {Low, Low}}, {"baddbmm", {Low, Low}}, {"addbmm", {Low, Low}}, {"einsum", {Low, Low}},
    {"chain_matmul", {Low, Low}}, {"linalg_multi_dot", {Low, Low}}, {"multi_dot", {Low, Low}},
    {"mv", {N, Low}}, {"addmv", {N, Low}}, {"addr", {N, Low}}, {"prelu", {Low, Low}},
    {"conv1d", {Low, Low}}, {"conv2d", {Low, Low}}, {"conv3d", {Low, Low}}, {"conv_tbc", {Low, Low}},
    {"conv_transpose1d", {Low, Low}}, {"conv_transpose2d", {Low, Low}}, {"conv_transpose3d", {Low, Low}},
    {"convolution", {Low, Low}}, {"lstm_cell", {N, Low}}, {"gru_cell", {N, Low}}, {"rnn_tanh_cell", {N, Low}},
    {"rnn_relu_cell", {N, Low}},
    // pointwise transcendentals: float32 on CUDA
    {"acos", {N, F32}}, {"asin", {N, F32}}, {"cosh", {N, F32}}, {"erfinv", {N, F32}}, {"exp", {N, F32}},
    {"expm1", {N, F32}}, {"log", {N, F32}}, {"log10", {N, F32}}, {"log2", {N, F32}}, {"log1p", {N, F32}},
    {"reciprocal", {N, F32}}, {"rsqrt", {N, F32}}, {"sinh", {N, F32}}, {"tan", {N, F32}}, {"pow", {N, F32}},
    {"softplus", {N, F32}},
    // normalizations, distances, reductions without a dtype
    {"layer_norm", {N, F32}}, {"group_norm", {N, F32}}, {"frobenius_norm", {N, F32}}, {"nuclear_norm", {N, F32}},
    {"cosine_similarity", {N, F32}}, {"dist", {N, F32}}, {"pdist", {N, F32}}, {"cdist", {F32, F32}},
    {"renorm", {N, F32}}, {"logsumexp", {N, F32}}, {"interpolate", {N, F32}}, {"upsample", {N, F32}},
    // losses
    {"nll_loss", {F32, F32}}, {"mse_loss", {F32, F32}}, {"l1_loss", {F32, F32}}, {"smooth_l1_loss", {F32, F32}},
    {"huber_loss", {F32, F32}}, {"kl_div", {F32, F32}}, {"binary_cross_entropy_with_logits", {F32, F32}},
    {"poisson_nll_loss", {F32, F32}}, {"cosine_embedding_loss", {F32, F32}}, {"hinge_embedding_loss", {F32, F32}},
    {"margin_ranking_loss", {F32, F32}}, {"multilabel_margin_loss", {F32, F32}}, {"soft_margin_loss", {F32, F32}},
    {"triplet_margin_loss", {F32, F32}}, {"multi_margin_loss", {F32, F32}}, {"ctc_loss", {F32, N}},
    {"binary_cross_entropy", {F32, Banned}},
    // composites of several listed ops (log_softmax and nll_loss; the products and softmax), one op here
    {"cross_entropy", {F32, F32}}, {"scaled_dot_product_attention", {Low, Low}},
    // reductions that take a dtype: computed in float32 on CUDA (prod on the CPU too)
    {"sum", {N, F32Dtype}}, {"prod", {F32Dtype, F32Dtype}}, {"softmax", {N, F32Dtype}},
    {"log_softmax", {N, F32Dtype}}, {"cumsum", {N, F32Dtype}}, {"cumprod", {N, F32Dtype}},
    {"norm", {N, F32Dtype}}, {"linalg_vector_norm", {N, F32Dtype}}, {"linalg_matrix_norm", {N, F32Dtype}},
    // CPU: numerically touchy ops in float32
    {"quantile", {F32, N}}, {"nanquantile", {F32, N}}, {"trace", {F32, N}}, {"polar", {F32, N}},
    {"inverse", {F32, N}}, {"pinverse", {F32, N}}, {"cholesky", {F32, N}}, {"linalg_inv", {F32, N}},
    {"linalg_solve", {F32, N}}, {"linalg_cholesky", {F32, N}}, {"linalg_qr", {F32, N}}, {"linalg_svd", {F32, N}},
    {"linalg_eigh", {F32, N}}, {"linalg_svdvals", {F32, N}}, {"max_pool3d", {F32, N}}, {"avg_pool3d", {F32, N}},
    {"adaptive_avg_pool3d", {F32, N}}, {"grid_sample", {F32, Promote}},
    // several inputs: the widest
    {"addcdiv", {N, Promote}}, {"addcmul", {N, Promote}}, {"atan2", {N, Promote}}, {"bilinear", {N, Promote}},
    {"cross", {N, Promote}}, {"dot", {N, Promote}}, {"vdot", {N, Promote}}, {"index_put", {N, Promote}},
    {"tensordot", {Low, Promote}}, {"scatter_add", {N, Promote}}, {"cat", {Promote, N}},
    {"concat", {Promote, N}}, {"stack", {Promote, N}}, {"index_copy", {Promote, N}},
};

const char* class_name(CastClass c) {
  switch (c) {
    case CastClass::None: return "none";
    case CastClass::LowerPrecision: return "lower_precision_fp";
    case CastClass::Float32: return "fp32";
    case CastClass::Float32Dtype: return "fp32_set_opt_dtype";
    case CastClass::Promote: return "promote";
    case CastClass::Banned: return "banned";
  }
  return "?";
}

// ---- per-thread state ----

int index_of(DeviceType t) { return t == DeviceType::CUDA ? 1 : 0; }

struct CachedCast {
  Tensor source;     // held, so its address (the key) is not reused while the entry lives
  uint64_t version;  // the source's version when cast: a write since makes the entry stale
  Tensor cast;
};

struct State {
  bool enabled[2] = {false, false};
  DType dtype[2] = {DType::BFloat16, DType::Float16};  // PyTorch's defaults: cpu, cuda
  bool cache_enabled = true;
  int nesting = 0;
  int suspended = 0;
  std::unordered_map<TensorImpl*, CachedCast> cache;
};

thread_local State state;

void refresh() {
  detail::autocast_on = (state.enabled[0] || state.enabled[1]) && state.suspended == 0 ? 1 : 0;
}

bool eligible(TensorImpl& t, DeviceType device) {
  DType d = t.dtype();
  return is_floating(d) && d != DType::Float64 && t.device().type == device;
}

// PyTorch's cached_cast: the low-precision casts of float32 weights (leaves requiring grad, not
// views) are made once per region.
Tensor cast_to(const Tensor& t, DType to, int device) {
  bool cacheable = state.cache_enabled && to == state.dtype[device] && t->dtype() == DType::Float32 &&
                   requires_grad(*t) && is_leaf(*t) && !t->is_view();
  if (!cacheable) return ops::cast(t, to);
  auto it = state.cache.find(t.get());
  if (it != state.cache.end() && it->second.version == t->version()) return it->second.cast;
  Tensor cast = ops::cast(t, to);
  state.cache.insert_or_assign(t.get(), CachedCast{t, t->version(), cast});
  return cast;
}

PyObject* first_tensor(PyObject* obj) {
  if (!obj) return nullptr;
  if (is_tensor(obj)) return obj;
  if (PyList_Check(obj) || PyTuple_Check(obj)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    PyObject** items = PySequence_Fast_ITEMS(obj);
    for (Py_ssize_t i = 0; i < n; ++i)
      if (is_tensor(items[i])) return items[i];
  }
  return nullptr;
}

template <typename F>
void for_each_tensor(PyObject* const* slots, int n, F&& f) {
  for (int i = 0; i < n; ++i) {
    PyObject* obj = slots[i];
    if (!obj) continue;
    if (is_tensor(obj)) {
      f(obj);
    } else if (PyList_Check(obj) || PyTuple_Check(obj)) {
      Py_ssize_t m = PySequence_Fast_GET_SIZE(obj);
      PyObject** items = PySequence_Fast_ITEMS(obj);
      for (Py_ssize_t j = 0; j < m; ++j)
        if (is_tensor(items[j])) f(items[j]);
    }
  }
}

// The slot's object with its eligible tensors cast to `to`, or nullptr when nothing changes.
PyRef cast_slot(PyObject* obj, DType to, DeviceType device) {
  auto needs = [&](PyObject* o) { return is_tensor(o) && eligible(impl_of(o), device) && impl_of(o).dtype() != to; };
  auto cast = [&](PyObject* o) { return PyRef::checked(wrap(cast_to(tensor_of(o), to, index_of(device)))); };
  if (is_tensor(obj)) return needs(obj) ? cast(obj) : PyRef();
  if (!PyList_Check(obj) && !PyTuple_Check(obj)) return PyRef();
  Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
  PyObject** items = PySequence_Fast_ITEMS(obj);
  if (std::none_of(items, items + n, needs)) return PyRef();
  PyRef out = PyRef::checked(PyTuple_New(n));
  for (Py_ssize_t j = 0; j < n; ++j)
    PyTuple_SET_ITEM(out.get(), j, needs(items[j]) ? cast(items[j]).release() : Py_NewRef(items[j]));
  return out;
}

}  // namespace

namespace detail {
thread_local int autocast_on = 0;
}

AutocastPolicy autocast_policy(std::string_view name) noexcept {
  for (const PolicyRow& row : kPolicies)
    if (name == row.name) return row.policy;
  return {};
}

void autocast_arguments(const AutocastPolicy& policy, std::string_view name, PyObject** slots, int n,
                        int dtype_slot, std::vector<PyRef>& keep) {
  PyObject* first = nullptr;
  for (int i = 0; i < n && !first; ++i) first = first_tensor(slots[i]);
  if (!first) return;
  DeviceType device = impl_of(first).device().type;
  int d = index_of(device);
  if (!state.enabled[d] || state.suspended) return;
  CastClass c = device == DeviceType::CUDA ? policy.cuda : policy.cpu;
  DType to = DType::Float32;
  switch (c) {
    case CastClass::None: return;
    case CastClass::Banned:
      LOOM_CHECK(false, Runtime, "torch.nn.functional.", name, " and torch.nn.BCELoss are unsafe to autocast.\n",
                 "Many models use a sigmoid layer right before the binary cross entropy layer.\n",
                 "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n",
                 "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n",
                 "safe to autocast.");
      return;
    case CastClass::Float32Dtype:
      if (dtype_slot >= 0 && !slots[dtype_slot] && eligible(impl_of(first), device))
        slots[dtype_slot] = dtype_object(DType::Float32);
      return;
    case CastClass::LowerPrecision: to = state.dtype[d]; break;
    case CastClass::Float32: break;
    case CastClass::Promote: {
      std::optional<DType> widest;
      for_each_tensor(slots, n, [&](PyObject* o) {
        TensorImpl& t = impl_of(o);
        if (eligible(t, device)) widest = widest ? promote_types(*widest, t.dtype()) : t.dtype();
      });
      if (!widest) return;
      to = *widest;
      break;
    }
  }
  for (int i = 0; i < n; ++i) {
    if (!slots[i]) continue;
    if (PyRef cast = cast_slot(slots[i], to, device)) {
      slots[i] = cast.get();
      keep.push_back(std::move(cast));
    }
  }
}

AutocastSuspend::AutocastSuspend() noexcept : suspended_(autocast_active()) {
  if (suspended_) {
    ++state.suspended;
    refresh();
  }
}

AutocastSuspend::~AutocastSuspend() {
  if (suspended_) {
    --state.suspended;
    refresh();
  }
}

// ---- loom._C's functions (loom/amp/autocast_mode.py presents them as torch's) ----

namespace {

int device_index(PyObject* name) {
  const char* s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : nullptr;
  if (!s) throw PythonError();
  std::string_view v(s);
  if (v == "cpu") return 0;
  if (v == "cuda") return 1;
  LOOM_CHECK(false, Runtime, "User specified autocast device_type must be 'cuda' or 'cpu', got '", v, "'");
  return 0;
}

PyObject* f_is_enabled(PyObject*, PyObject* device) {
  LOOM_PY_BEGIN
  return PyBool_FromLong(state.enabled[device_index(device)]);
  LOOM_PY_END(nullptr)
}

PyObject* f_set_enabled(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  LOOM_PY_BEGIN
  LOOM_CHECK(nargs == 2, Type, "_autocast_set_enabled(device_type, enabled)");
  int on = PyObject_IsTrue(args[1]);
  if (on < 0) return nullptr;
  state.enabled[device_index(args[0])] = on != 0;
  refresh();
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_get_dtype(PyObject*, PyObject* device) {
  LOOM_PY_BEGIN
  return Py_NewRef(dtype_object(state.dtype[device_index(device)]));
  LOOM_PY_END(nullptr)
}

PyObject* f_set_dtype(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  LOOM_PY_BEGIN
  LOOM_CHECK(nargs == 2, Type, "_autocast_set_dtype(device_type, dtype)");
  state.dtype[device_index(args[0])] = dtype_from_py(args[1]);
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_increment_nesting(PyObject*, PyObject*) { return PyLong_FromLong(++state.nesting); }

PyObject* f_decrement_nesting(PyObject*, PyObject*) { return PyLong_FromLong(--state.nesting); }

PyObject* f_clear_cache(PyObject*, PyObject*) {
  state.cache.clear();
  return Py_NewRef(Py_None);
}

PyObject* f_cache_enabled(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs) {
    int on = PyObject_IsTrue(args[0]);
    if (on < 0) return nullptr;
    state.cache_enabled = on != 0;
  }
  return PyBool_FromLong(state.cache_enabled);
}

PyObject* f_cache_size(PyObject*, PyObject*) { return PyLong_FromSize_t(state.cache.size()); }

// _autocast_policy(name) -> (cpu class, cuda class), the table's row as PyTorch names the classes.
PyObject* f_policy(PyObject*, PyObject* name) {
  LOOM_PY_BEGIN
  const char* s = PyUnicode_AsUTF8(name);
  if (!s) return nullptr;
  AutocastPolicy p = autocast_policy(s);
  return Py_BuildValue("(ss)", class_name(p.cpu), class_name(p.cuda));
  LOOM_PY_END(nullptr)
}

PyObject* f_policy_names(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  PyRef out = PyRef::checked(PyList_New(0));
  for (const PolicyRow& row : kPolicies)
    check_status(PyList_Append(out.get(), PyRef::checked(PyUnicode_FromString(row.name)).get()));
  return out.release();
  LOOM_PY_END(nullptr)
}

// ---- a Python composite under the table's policy ----

// AutocastFunction(name, fn): calls fn; inside an autocast region, first casts its tensor
// arguments (positional and keyword, and tensors inside lists and tuples) by name's policy and
// suspends autocast while fn runs. Outside one it costs one check.
struct AutocastFunction {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* fn;
  PyObject* name;
  PyObject* dict;
  AutocastPolicy policy;
};

PyObject* autocast_function_call(PyObject* self_obj, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<AutocastFunction*>(self_obj);
  if (!autocast_active()) return PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
  LOOM_PY_BEGIN
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
  std::vector<PyObject*> slots(args, args + total);
  std::vector<PyRef> keep;
  autocast_arguments(self->policy, PyUnicode_AsUTF8(self->name), slots.data(), static_cast<int>(total), -1, keep);
  AutocastSuspend suspend;
  return check(PyObject_Vectorcall(self->fn, slots.data(), nargs, kwnames));
  LOOM_PY_END(nullptr)
}

void autocast_function_dealloc(PyObject* self_obj) {
  auto* self = reinterpret_cast<AutocastFunction*>(self_obj);
  PyObject_GC_UnTrack(self_obj);
  Py_CLEAR(self->fn);
  Py_CLEAR(self->name);
  Py_CLEAR(self->dict);
  Py_TYPE(self_obj)->tp_free(self_obj);
}

int autocast_function_traverse(PyObject* self_obj, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<AutocastFunction*>(self_obj);
  Py_VISIT(self->fn);
  Py_VISIT(self->dict);
  return 0;
}

// Attribute lookups (__doc__, __name__, __wrapped__, __signature__ for inspect) go to the function.
PyObject* autocast_function_getattro(PyObject* self_obj, PyObject* attr) {
  PyObject* found = PyObject_GenericGetAttr(self_obj, attr);
  if (found || !PyErr_ExceptionMatches(PyExc_AttributeError)) return found;
  PyErr_Clear();
  auto* self = reinterpret_cast<AutocastFunction*>(self_obj);
  if (PyUnicode_Check(attr) && PyUnicode_CompareWithASCIIString(attr, "__wrapped__") == 0) return Py_NewRef(self->fn);
  return PyObject_GetAttr(self->fn, attr);
}

PyObject* autocast_function_repr(PyObject* self_obj) {
  return PyObject_Repr(reinterpret_cast<AutocastFunction*>(self_obj)->fn);
}

// A function is a descriptor (it binds as a method); so is this, for functions kept in classes.
PyObject* autocast_function_get(PyObject* self_obj, PyObject* obj, PyObject*) {
  if (!obj || obj == Py_None) return Py_NewRef(self_obj);
  return PyMethod_New(self_obj, obj);
}

// Pickled and deep-copied by reference, as a function is: loom.nn.functional.<name>.
PyObject* autocast_function_reduce(PyObject* self_obj, PyObject*) {
  return Py_NewRef(reinterpret_cast<AutocastFunction*>(self_obj)->name);
}

PyMethodDef autocast_function_methods[] = {
    {"__reduce__", autocast_function_reduce, METH_NOARGS, "pickled by its name in its module"},
    {nullptr, nullptr, 0, nullptr},
};

PyTypeObject AutocastFunctionType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "loom._C._AutocastFunction";
  t.tp_basicsize = sizeof(AutocastFunction);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
  t.tp_doc = "A loom.nn.functional composite under the autocast policy table (loom._C._autocast_policy)";
  t.tp_vectorcall_offset = offsetof(AutocastFunction, vectorcall);
  t.tp_call = PyVectorcall_Call;
  t.tp_dictoffset = offsetof(AutocastFunction, dict);
  t.tp_dealloc = autocast_function_dealloc;
  t.tp_traverse = autocast_function_traverse;
  t.tp_getattro = autocast_function_getattro;
  t.tp_repr = autocast_function_repr;
  t.tp_descr_get = autocast_function_get;
  t.tp_methods = autocast_function_methods;
  return t;
}();

// _autocast_function(name, fn): fn under name's policy; fn itself when the table has no row for
// name, or when name's policy sets the dtype argument (the composite reaches that op's row).
PyObject* f_autocast_function(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  LOOM_PY_BEGIN
  LOOM_CHECK(nargs == 2, Type, "_autocast_function(name, fn)");
  const char* s = PyUnicode_Check(args[0]) ? PyUnicode_AsUTF8(args[0]) : nullptr;
  if (!s) throw PythonError();
  AutocastPolicy policy = autocast_policy(s);
  // A composite of a Float32Dtype op (F.softmax) calls its row, which sets the dtype itself.
  bool by_row = policy.cpu == CastClass::Float32Dtype || policy.cuda == CastClass::Float32Dtype;
  if (!policy.any() || by_row) return Py_NewRef(args[1]);
  static bool ready = [] {
    check_status(PyType_Ready(&AutocastFunctionType));
    return true;
  }();
  (void)ready;
  auto* self = PyObject_GC_New(AutocastFunction, &AutocastFunctionType);
  if (!self) return nullptr;
  self->vectorcall = autocast_function_call;
  self->fn = Py_NewRef(args[1]);
  self->name = Py_NewRef(args[0]);
  self->dict = nullptr;
  self->policy = policy;
  PyObject_GC_Track(self);
  return reinterpret_cast<PyObject*>(self);
  LOOM_PY_END(nullptr)
}

}  // namespace

PyMethodDef autocast_functions[] = {
    {"_autocast_is_enabled", f_is_enabled, METH_O, "_autocast_is_enabled(device_type)"},
    {"_autocast_set_enabled", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f_set_enabled)),
     METH_FASTCALL, "_autocast_set_enabled(device_type, enabled)"},
    {"_autocast_get_dtype", f_get_dtype, METH_O, "_autocast_get_dtype(device_type): the region's low precision"},
    {"_autocast_set_dtype", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f_set_dtype)), METH_FASTCALL,
     "_autocast_set_dtype(device_type, dtype)"},
    {"_autocast_increment_nesting", f_increment_nesting, METH_NOARGS, "_autocast_increment_nesting() -> depth"},
    {"_autocast_decrement_nesting", f_decrement_nesting, METH_NOARGS, "_autocast_decrement_nesting() -> depth"},
    {"_autocast_clear_cache", f_clear_cache, METH_NOARGS, "_autocast_clear_cache(): drops the cached weight casts"},
    {"_autocast_cache_enabled", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f_cache_enabled)),
     METH_FASTCALL, "_autocast_cache_enabled([enabled]) -> whether casts of weights are cached"},
    {"_autocast_cache_size", f_cache_size, METH_NOARGS, "_autocast_cache_size(): cached casts (for tests)"},
    {"_autocast_policy", f_policy, METH_O, "_autocast_policy(name) -> (cpu class, cuda class)"},
    {"_autocast_policy_names", f_policy_names, METH_NOARGS, "_autocast_policy_names(): the names the table lists"},
    {"_autocast_function", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f_autocast_function)),
     METH_FASTCALL, "_autocast_function(name, fn): fn under name's autocast policy"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace loom::py
