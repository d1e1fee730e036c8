#include "pyext/op_table.h"

#include <array>
#include <cstring>
#include <deque>
#include <stdexcept>

#include "pyext/autocast.h"
#include "runtime/error.h"

namespace loom::py {

namespace {

// One Python callable made from a row: a function, a method or an in-place method.
struct Binding {
  Variant form;
  std::string name, doc;
  Parser parser;
  Body body = nullptr;
  bool writes_some = false;
  // The function takes out= (PyTorch's does: loom/_out_names.py, enabled at import by
  // _C._enable_out). Only function forms; set once, before any call.
  bool takes_out = false;
  bool factory = false;  // a creation function (a `device` parameter): out= gives the result's device
  AutocastPolicy autocast;  // the row's autocast policy (in-place forms have none, as in PyTorch)
};

// Inside an autocast region: the call's tensors cast by the row's policy, then the body.
PyObject* call_autocast(const Binding& b, Parsed& p) {
  const std::vector<Param>& params = p.signature->params();
  int dtype_slot = -1;
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].type == ParamType::DType && params[i].name == "dtype") dtype_slot = static_cast<int>(i);
  std::vector<PyRef> keep;
  autocast_arguments(b.autocast, b.name, p.v, static_cast<int>(params.size()), dtype_slot, keep);
  return b.body(p).release();
}

PyObject* call_with_out(const Binding& b, PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                        PyObject* kwnames, Py_ssize_t out_key);

// The position of the keyword `out` among a call's keywords, or -1. CPython interns keyword
// names, so the pointer comparison almost always decides.
Py_ssize_t out_keyword(PyObject* kwnames) {
  static PyObject* out_name = PyUnicode_InternFromString("out");
  Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; i < n; ++i)
    if (PyTuple_GET_ITEM(kwnames, i) == out_name) return i;
  for (Py_ssize_t i = 0; i < n; ++i)
    if (PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, i), out_name) == 0) return i;
  return -1;
}

PyObject* call(const Binding& b, PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  // out= is taken off before the parse: the body computes a fresh result, and loom/_out.py writes
  // it into out (the plain call, without keywords or without out=, pays one branch).
  if (b.takes_out && kwnames) [[unlikely]] {
    Py_ssize_t k = out_keyword(kwnames);
    if (k >= 0) return call_with_out(b, self, args, nargs, kwnames, k);
  }
  LOOM_PY_BEGIN
  Parsed p;
  bool function = b.form == kFunction || b.form == kInplaceFunction;
  b.parser.parse(function ? nullptr : self, args, nargs, kwnames, p);
  if (b.form == kFunction || b.form == kMethod) {
    if (autocast_active() && b.autocast.any()) [[unlikely]] return call_autocast(b, p);
    return b.body(p).release();
  }
  if (b.form == kInplaceFunction) self = p.object(0);  // torch.exp_(x) writes x
  // A reference of our own: update() may release the GIL, and another thread may then give self
  // other data (tensor.data = ...), dropping the impl it held.
  Tensor t = tensor_of(self);
  if (!b.writes_some) check_no_internal_overlap(*t);
  update(*t, [&] { return b.body(p).take_tensor(); });
  return Py_NewRef(self);
  LOOM_PY_END(nullptr)
}

// A call with out=: the call without it, then loom._out.write_out(name, result, out, factory,
// inputs, dtype), which checks out (autograd, device, dtype by can_cast, memory shared with an
// input), resizes it when its shape differs, copies the result in and returns out (a tuple of
// outs for a function of several results).
PyObject* call_with_out(const Binding& b, PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                        PyObject* kwnames, Py_ssize_t out_key) {
  Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
  PyObject* out = args[nargs + out_key];
  std::vector<PyObject*> rest(args, args + nargs);
  std::vector<PyObject*> keys;
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    if (i == out_key) continue;
    rest.push_back(args[nargs + i]);
    keys.push_back(PyTuple_GET_ITEM(kwnames, i));
  }
  // A creation function makes its result in out's dtype and on out's device unless the call
  // names them (torch.arange(5, out=t) counts in t's dtype).
  std::vector<PyRef> injected;
  if (b.factory && is_tensor(out)) {
    for (const char* attr : {"dtype", "device"}) {
      PyRef key = PyRef::steal(PyUnicode_InternFromString(attr));
      if (!key) return nullptr;
      bool named = false;
      for (PyObject* k : keys) named = named || PyUnicode_Compare(k, key.get()) == 0;
      if (named) continue;
      PyRef value = PyRef::steal(PyObject_GetAttr(out, key.get()));
      if (!value) return nullptr;
      rest.push_back(value.get());
      keys.push_back(key.get());
      injected.push_back(std::move(key));
      injected.push_back(std::move(value));
    }
  }
  PyRef names = PyRef::steal(keys.empty() ? nullptr : PyTuple_New(static_cast<Py_ssize_t>(keys.size())));
  if (!keys.empty() && !names) return nullptr;
  for (size_t i = 0; i < keys.size(); ++i)
    PyTuple_SET_ITEM(names.get(), static_cast<Py_ssize_t>(i), Py_NewRef(keys[i]));
  PyRef result = PyRef::steal(call(b, self, rest.data(), nargs, names.get()));
  if (!result || out == Py_None) return result.release();
  static PyObject* write_out = nullptr;  // loom._out.write_out, kept for the process
  if (!write_out) {
    PyRef module = PyRef::steal(PyImport_ImportModule("loom._out"));
    if (!module) return nullptr;
    write_out = PyObject_GetAttrString(module.get(), "write_out");
    if (!write_out) return nullptr;
  }
  PyRef name = PyRef::steal(PyUnicode_FromString(b.name.c_str()));
  PyRef inputs = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(rest.size())));  // for the overlap checks
  if (!name || !inputs) return nullptr;
  PyObject* dtype = Py_None;  // an explicit dtype= (not one given for a creation function above)
  for (size_t i = 0; i < rest.size(); ++i) {
    PyTuple_SET_ITEM(inputs.get(), static_cast<Py_ssize_t>(i), Py_NewRef(rest[i]));
    bool keyword = i >= static_cast<size_t>(nargs);
    if (!b.factory && keyword && PyUnicode_CompareWithASCIIString(keys[i - nargs], "dtype") == 0) dtype = rest[i];
  }
  return PyObject_CallFunctionObjArgs(write_out, name.get(), result.get(), out, b.factory ? Py_True : Py_False,
                                     inputs.get(), dtype, nullptr);
}

// CPython passes a C function no closure: binding i is reached through entry point i, one of
// kSlots instantiations that each find their binding by index.
constexpr size_t kSlots = 1024;
const Binding* g_bindings[kSlots];

template <size_t I>
PyObject* fast_entry(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return call(*g_bindings[I], self, args, nargs, kwnames);
}
template <size_t I>
PyObject* noargs_entry(PyObject* self, PyObject*) {
  return call(*g_bindings[I], self, nullptr, 0, nullptr);
}

using FastFn = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t, PyObject*);
using NoArgsFn = PyObject* (*)(PyObject*, PyObject*);
template <size_t... I>
constexpr std::pair<std::array<FastFn, kSlots>, std::array<NoArgsFn, kSlots>> entries(std::index_sequence<I...>) {
  return {{&fast_entry<I>...}, {&noargs_entry<I>...}};
}
constexpr auto kEntries = entries(std::make_index_sequence<kSlots>{});

std::vector<const Row*>& all_rows() {
  static std::vector<const Row*> rows;
  return rows;
}

std::deque<Binding>& all_bindings() {
  static std::deque<Binding> all;  // for the process: PyMethodDefs point into their strings
  return all;
}

PyCFunction as_cfunction(auto f) { return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f)); }

// Makes the binding of one form of a row and its PyMethodDef (METH_NOARGS for a method of self
// alone: CPython then checks that nothing else was passed).
void bind(Variant form, const std::string& name, std::vector<Signature> signatures, const Row& row,
          std::vector<PyMethodDef>& defs) {
  std::deque<Binding>& all = all_bindings();
  if (all.size() == kSlots) throw std::logic_error("the op table has more bindings than entry points (kSlots)");
  Binding& b = all.emplace_back();
  g_bindings[all.size() - 1] = &b;
  b.form = form;
  b.name = name;
  for (const Signature& s : signatures) b.doc += (b.doc.empty() ? "" : "\n") + s.describe(true);
  bool in_place = form == kInplace || form == kInplaceFunction;
  if (row.note && !in_place) b.doc += std::string("\n\n") + row.note;
  if (form == kInplace) b.doc += "\n\nIn place: writes " + name.substr(0, name.size() - 1) + "()'s result into self.";
  if (form == kInplaceFunction)
    b.doc += "\n\nIn place: writes " + name.substr(0, name.size() - 1) + "()'s result into input, and returns input.";
  b.parser = Parser(std::move(signatures));
  b.body = row.body;
  b.writes_some = row.variants & kWritesSome;
  // A creation function: every overload takes device= (normal's tensor overloads do not).
  b.factory = true;
  for (const Signature& s : b.parser.signatures()) {
    bool device = false;
    for (const Param& param : s.params())
      device = device || (param.type == ParamType::Device && param.name == "device");
    b.factory = b.factory && device;
  }
  if (!in_place) b.autocast = autocast_policy(name);
  size_t i = all.size() - 1;
  bool no_args = b.parser.takes_no_arguments();
  defs.push_back({b.name.c_str(), no_args ? as_cfunction(kEntries.second[i]) : as_cfunction(kEntries.first[i]),
                  no_args ? METH_NOARGS : METH_FASTCALL | METH_KEYWORDS, b.doc.c_str()});
}

}  // namespace

void add_rows(std::span<const Row> rows, MethodDefs& defs) {
  for (const Row& row : rows) {
    all_rows().push_back(&row);
    std::vector<Signature> functions(row.signatures.begin(), row.signatures.end());
    const std::string name = functions.at(0).name();
    for (const Signature& s : functions)
      if (s.name() != name) throw std::logic_error("signature \"" + s.source() + "\" in the row of " + name);
    auto methods = [&](const std::string& method_name) {
      std::vector<Signature> m;
      for (const Signature& s : functions) m.push_back(s.as_method(method_name));
      return m;
    };
    if (row.variants & kMethod) bind(kMethod, name, methods(name), row, defs.methods);
    if (row.variants & kInplace) bind(kInplace, name + "_", methods(name + "_"), row, defs.methods);
    if (row.variants & kInplaceFunction) {
      std::vector<Signature> renamed;
      for (const Signature& s : functions) renamed.push_back(s.renamed(name + "_"));
      bind(kInplaceFunction, name + "_", std::move(renamed), row, defs.functions);
    }
    if (row.variants & kFunction) bind(kFunction, name, std::move(functions), row, defs.functions);
  }
}

namespace {

void append(const PyRef& list, PyObject* new_item) {
  check_status(PyList_Append(list.get(), PyRef::checked(new_item).get()));
}

// loom._C._signatures(): (name, forms, signatures as written) of every row, for tests that walk
// the table.
PyObject* signatures_of_rows(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  PyRef out = PyRef::checked(PyList_New(0));
  for (const Row* row : all_rows()) {
    PyRef forms = PyRef::checked(PyList_New(0)), texts = PyRef::checked(PyList_New(0));
    for (auto [bit, form] : {std::pair{kFunction, "function"}, {kMethod, "method"}, {kInplace, "inplace"},
                             {kInplaceFunction, "inplace_function"}})
      if (row->variants & bit) append(forms, PyUnicode_FromString(form));
    for (const char* text : row->signatures) append(texts, PyUnicode_FromString(text));
    std::string name(row->signatures[0], std::strchr(row->signatures[0], '('));
    append(out, Py_BuildValue("(sOO)", name.c_str(), forms.get(), texts.get()));
  }
  return out.release();
  LOOM_PY_END(nullptr)
}

// loom._C._enable_out(name): the function `name` of the op table takes out= from now on (called
// at import for the names of loom/_out_names.py). False when no function has that name.
PyObject* enable_out(PyObject*, PyObject* name) {
  LOOM_PY_BEGIN
  LOOM_CHECK(PyUnicode_Check(name), Type, "_enable_out(name: str)");
  std::string wanted = PyUnicode_AsUTF8(name);
  bool found = false;
  for (Binding& b : all_bindings())
    if (b.form == kFunction && b.name == wanted) found = b.takes_out = true;  // every overload's binding of that name
  return Py_NewRef(found ? Py_True : Py_False);
  LOOM_PY_END(nullptr)
}

const MethodDefs& all_defs() {
  static const MethodDefs defs = [] {
    MethodDefs d;
    add_op_rows(d);
    add_elementwise_rows(d);
    add_tensor_rows(d);
    add_creation_rows(d);
    add_data_rows(d);
    add_linalg_rows(d);
    add_reduce_rows(d);
    add_nn_rows(d);
    d.functions.push_back({"_enable_out", enable_out, METH_O,
                           "_enable_out(name): the op-table function `name` takes out= (loom/_out.py)"});
    d.functions.push_back({"_signatures", signatures_of_rows, METH_NOARGS,
                           "_signatures(): (name, forms, signatures) of each row of the op table"});
    return d;
  }();
  return defs;
}

}  // namespace

std::vector<PyMethodDef> op_functions() { return all_defs().functions; }
std::vector<PyMethodDef> op_methods() { return all_defs().methods; }

}  // namespace loom::py
