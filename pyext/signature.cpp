#include "pyext/signature.h"

#include <charconv>
#include <cstdarg>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "lazy/autograd.h"
#include "pyext/objects.h"
#include "pyext/op_args.h"
#include "pyext/python_data.h"
#include "pyext/tensor_object.h"

namespace loom::py {
namespace {

struct TypeSpelling {
  std::string_view schema;  // as written in a signature
  ParamType type;
  const char* shown;        // as PyTorch's errors name it
};

constexpr TypeSpelling kTypes[] = {
    {"Tensor", ParamType::Tensor, "Tensor"}, {"Arg", ParamType::Arg, "Tensor"}, {"Scalar", ParamType::Scalar, "Number"},
    {"int", ParamType::Int, "int"}, {"SymInt", ParamType::Int, "SymInt"}, {"float", ParamType::Float, "float"},
    {"bool", ParamType::Bool, "bool"}, {"str", ParamType::String, "str"},
    {"int[]", ParamType::IntList, "tuple of ints"}, {"SymInt[]", ParamType::SymIntList, "tuple of SymInts"},
    {"Tensor[]", ParamType::TensorList, "tuple of Tensors"}, {"ScalarType", ParamType::DType, "torch.dtype"},
    {"Device", ParamType::Device, "torch.device"}, {"PyObject*", ParamType::Object, "object"},
};

// numpy's names PyTorch also accepts for a parameter (torch.sum(x, axis=0, keepdims=True)).
constexpr std::pair<std::string_view, std::string_view> kNumpyNames[] = {
    {"dim", "axis"}, {"keepdim", "keepdims"}, {"input", "x"}, {"input", "a"}, {"input", "x1"}, {"other", "x2"},
};

[[noreturn]] void bad_signature(std::string_view text, std::string_view why) {
  throw std::logic_error("signature \"" + std::string(text) + "\": " + std::string(why));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Splits at the commas outside brackets: "int[] dims=[0, 1], bool keepdim=False".
std::vector<std::string_view> split_params(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0, depth = 0; i <= s.size(); ++i) {
    if (i < s.size() && s[i] == '[') ++depth;
    if (i < s.size() && s[i] == ']') --depth;
    if (i == s.size() || (s[i] == ',' && depth == 0)) {
      if (!trim(s.substr(start, i - start)).empty()) out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  return out;
}

int64_t parse_int(std::string_view s, std::string_view text) {
  int64_t v = 0;
  auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (error != std::errc() || end != s.data() + s.size()) bad_signature(text, "bad int " + std::string(s));
  return v;
}

void parse_default(Param& p, std::string_view d, std::string_view text) {
  p.optional = true;
  p.default_text = std::string(d);
  if (d == "None") {
    p.allow_none = true;  // as in PyTorch: a None default makes None a valid value
    return;
  }
  switch (p.type) {
    case ParamType::Int: p.default_value = Scalar(parse_int(d, text)); return;
    case ParamType::Bool: p.default_value = Scalar(d == "True"); return;
    case ParamType::Float:
    case ParamType::Scalar:
      if (d.find_first_of(".e") == std::string_view::npos) p.default_value = Scalar(parse_int(d, text));
      else p.default_value = Scalar(std::stod(std::string(d)));
      return;
    case ParamType::String:
      if (d.size() < 2 || d.front() != '\'' || d.back() != '\'') bad_signature(text, "a str default is '...'");
      p.default_string = std::string(d.substr(1, d.size() - 2));
      return;
    case ParamType::IntList:
    case ParamType::SymIntList:
      if (d.front() != '[' || d.back() != ']') bad_signature(text, "an int list default is [...]");
      for (std::string_view item : split_params(d.substr(1, d.size() - 2)))
        p.default_ints.push_back(parse_int(item, text));
      return;
    default: bad_signature(text, p.name + " may only default to None");
  }
}

Param parse_param(std::string_view s, bool keyword_only, std::string_view text) {
  size_t space = s.find(' ');
  if (space == std::string_view::npos) bad_signature(text, "a parameter needs a type and a name");
  std::string_view type = s.substr(0, space), rest = trim(s.substr(space + 1));
  Param p;
  p.keyword_only = keyword_only;
  p.spelled = std::string(type);
  p.allow_none = type.ends_with('?');
  if (p.allow_none) type.remove_suffix(1);
  std::string base(type);
  if (size_t open = type.find('['); open != std::string_view::npos && type.substr(open) != "[]") {
    p.list_size = static_cast<int>(parse_int(type.substr(open + 1, type.size() - open - 2), text));  // int[2]
    base = std::string(type.substr(0, open)) + "[]";
  }
  const TypeSpelling* found = nullptr;
  for (const TypeSpelling& t : kTypes)
    if (t.schema == base) found = &t;
  if (!found) bad_signature(text, "unknown type " + std::string(type));
  p.type = found->type;
  size_t eq = rest.find('=');
  p.name = std::string(trim(rest.substr(0, eq)));
  if (eq != std::string_view::npos) parse_default(p, trim(rest.substr(eq + 1)), text);
  p.py_name = PyUnicode_InternFromString(p.name.c_str());
  int n_alias = 0;
  for (const auto& [name, alias] : kNumpyNames)
    if (name == p.name) p.alias[n_alias++] = PyUnicode_InternFromString(std::string(alias).c_str());
  return p;
}

// How messages name a Python value's type: a loom tensor is a "Tensor", as torch's is.
const char* value_type_name(PyObject* obj) noexcept {
  return Py_TYPE(obj) == &TensorType ? "Tensor" : Py_TYPE(obj)->tp_name;
}

// A tuple or list whose items all pass `ok`; else *failed is the first that does not.
template <typename Ok>
bool all_items(PyObject* obj, Ok ok, Py_ssize_t* failed) {
  if (!PyTuple_Check(obj) && !PyList_Check(obj)) return false;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(obj); ++i) {
    if (ok(PySequence_Fast_GET_ITEM(obj, i))) continue;
    if (failed) *failed = i;
    return false;
  }
  return true;
}

[[noreturn]] void type_error(const char* format, ...) {
  va_list va;
  va_start(va, format);
  PyErr_FormatV(PyExc_TypeError, format, va);
  va_end(va);
  throw PythonError{};
}

}  // namespace

// ---- parameters ----

bool Param::accepts(PyObject* obj, Py_ssize_t* failed_element) const {
  switch (type) {
    case ParamType::Tensor: return is_tensor(obj);
    case ParamType::Arg: return is_tensor(obj) || scalar_of(obj).has_value();
    case ParamType::Scalar:
    case ParamType::Float:
      // As in PyTorch, a 0-d tensor that needs no gradient passes for a number.
      if (is_tensor(obj)) return impl_of(obj).ndim() == 0 && !requires_grad(impl_of(obj));
      return scalar_of(obj).has_value();
    case ParamType::Int: return is_index_like(obj);
    case ParamType::Bool: return PyBool_Check(obj);
    case ParamType::String: return PyUnicode_Check(obj);
    case ParamType::IntList:
    case ParamType::SymIntList:
      return all_items(obj, is_index_like, failed_element) || (list_size > 0 && is_index_like(obj));
    case ParamType::TensorList: return all_items(obj, is_tensor, failed_element);
    case ParamType::DType:  // names and numpy dtypes too: converted, or refused, by dtype_from_py
      return Py_TYPE(obj) == &DTypeType || PyType_Check(obj) || PyUnicode_Check(obj) ||
             std::strncmp(Py_TYPE(obj)->tp_name, "numpy.", 6) == 0;
    case ParamType::Device:
      return Py_TYPE(obj) == &DeviceType_ || PyUnicode_Check(obj) || (PyLong_Check(obj) && !PyBool_Check(obj));
    case ParamType::Object: return true;
  }
  return false;
}

const char* Param::type_name() const {
  // As spelled (SymInt and int are one type, named apart in PyTorch's errors), else by type.
  std::string_view base = spelled;
  if (base.ends_with('?')) base.remove_suffix(1);
  for (const TypeSpelling& t : kTypes)
    if (t.schema == base) return t.shown;
  for (const TypeSpelling& t : kTypes)
    if (t.type == type) return t.shown;
  return "object";
}

// ---- signatures ----

Signature::Signature(const std::string& text) : source_(text) {
  size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) bad_signature(text, "no (...)");
  name_ = text.substr(0, open);
  std::string_view tail = trim(std::string_view(text).substr(close + 1));
  if (tail.starts_with("->")) returns_ = std::string(trim(tail.substr(2)));
  else if (!tail.empty()) bad_signature(text, "unexpected text after ')'");
  bool keyword_only = false;
  for (std::string_view s : split_params(std::string_view(text).substr(open + 1, close - open - 1))) {
    if (s == "*") keyword_only = true;
    else params_.push_back(parse_param(s, keyword_only, text));
  }
  if (params_.size() > Parsed::kMaxParams) bad_signature(text, "more parameters than Parsed holds");
  count();
}

Signature Signature::untyped(const char* fname, std::initializer_list<const char*> names, int max_positional) {
  Signature s;
  s.name_ = s.source_ = fname;
  for (const char* name : names) {
    Param& p = s.params_.emplace_back();
    p.type = ParamType::Object;
    p.name = name;
    p.py_name = PyUnicode_InternFromString(name);
    p.optional = true;
    p.keyword_only = static_cast<int>(s.params_.size()) > max_positional;
  }
  if (s.params_.size() > Parsed::kMaxParams) bad_signature(fname, "more parameters than Parsed holds");
  s.count();
  return s;
}

void Signature::count() {
  min_args_ = max_args_ = max_positional_ = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (static_cast<int>(i) == self_param_) continue;
    ++max_args_;
    min_args_ += !params_[i].optional;
    max_positional_ += !params_[i].keyword_only;
  }
}

int Signature::index_of_self() const {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].name == "input" || params_[i].name == "self") return static_cast<int>(i);
  return 0;
}

Signature Signature::as_method(const std::string& method_name) const {
  Signature m = *this;
  m.name_ = method_name;
  m.self_param_ = index_of_self();
  m.count();
  return m;
}

Signature Signature::renamed(const std::string& function_name) const {
  Signature f = *this;
  f.name_ = function_name;
  return f;
}

void Signature::too_many_positional(Py_ssize_t nargs) const {
  if (min_args_ != max_positional_)
    type_error("%s() takes from %zu to %zu positional arguments but %zd were given", name_.c_str(), min_args_,
               max_positional_, nargs);
  type_error("%s() takes %zu positional argument%s but %zd %s given", name_.c_str(), max_positional_,
             max_positional_ == 1 ? "" : "s", nargs, nargs == 1 ? "was" : "were");
}

void Signature::missing(size_t from) const {
  std::string names;
  int n = 0;
  for (size_t i = from; i < params_.size(); ++i)
    if (static_cast<int>(i) != self_param_ && !params_[i].optional)
      names += (n++ ? ", \"" : "\"") + params_[i].name + "\"";
  // PyTorch's plural is inverted ("missing 1 required positional arguments"); kept, so messages match.
  type_error("%s() missing %d required positional argument%s: %s", name_.c_str(), n, n == 1 ? "s" : "",
             names.c_str());
}

int Signature::keyword_slot(PyObject* key) const {
  for (int pass = 0; pass < 2; ++pass) {  // interned names first, by pointer
    for (size_t i = 0; i < params_.size(); ++i) {
      if (static_cast<int>(i) == self_param_) continue;
      const Param& p = params_[i];
      for (PyObject* name : {p.py_name, p.alias[0], p.alias[1], p.alias[2]})
        if (name && (pass == 0 ? name == key : PyUnicode_Compare(name, key) == 0)) return static_cast<int>(i);
    }
  }
  return -1;
}

bool Signature::parse_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, Parsed& out,
                           bool raise) const {
  const int n = static_cast<int>(params_.size());
  out.signature = this;
  out.params = params_.data();
  out.self = self;
  out.varargs_slot = -1;
  for (int i = 0; i < n; ++i) out.v[i] = nullptr;
  if (self_param_ >= 0) out.v[self_param_] = self;
  // Positional argument k binds the k-th parameter, self skipped; its position in errors is k + 1.
  auto slot_of = [&](Py_ssize_t k) { return static_cast<int>(k) + (self_param_ >= 0 && self_param_ <= k); };
  auto position_of = [&](int slot) { return slot + 1 - (self_param_ >= 0 && self_param_ < slot); };

  // view(2, 3): ints that are the one positional parameter, an unsized int list (int[1] dim takes
  // a lone int itself), as in PyTorch.
  const int first = slot_of(0);
  const bool varargs = takes_varargs(args, nargs);
  if (nargs > static_cast<Py_ssize_t>(max_positional_) && !varargs) {
    if (raise) too_many_positional(nargs);
    return false;
  }
  if (varargs) {
    for (Py_ssize_t k = 1; k < nargs; ++k) {
      if (is_index_like(args[k])) continue;
      if (raise)
        type_error("%s(): argument '%s' must be %s, but found element of type %s at pos %zd", name_.c_str(),
                   params_[first].name.c_str(), params_[first].type_name(), value_type_name(args[k]), k + 1);
      return false;
    }
    out.v[first] = args[0];
    out.varargs_slot = first;
    out.varargs = args;
    out.n_varargs = nargs;
  } else {
    for (Py_ssize_t k = 0; k < nargs; ++k) out.v[slot_of(k)] = args[k];
  }

  // Keywords. The first that names no parameter still free is reported after the parameters'
  // own errors, as PyTorch orders them.
  PyObject* bad_key = nullptr;
  bool bad_key_given = false;  // it names a parameter given positionally
  unsigned by_keyword = 0;     // bit i: parameter i came by keyword
  for (Py_ssize_t k = 0; kwnames && k < PyTuple_GET_SIZE(kwnames); ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    int slot = keyword_slot(key);
    if (slot >= 0 && !out.v[slot]) {
      out.v[slot] = args[nargs + k];
      by_keyword |= 1u << slot;
    } else if (!bad_key) {
      bad_key = key;
      bad_key_given = slot >= 0 && !(by_keyword & (1u << slot));
    }
  }

  for (int i = 0; i < n; ++i) {
    if (i == self_param_ || i == out.varargs_slot) continue;
    const Param& p = params_[i];
    PyObject* obj = out.v[i];
    if (!obj && p.optional) continue;
    if (!obj) {
      if (raise) missing(static_cast<size_t>(i));
      return false;
    }
    if (obj == Py_None && p.allow_none) {
      out.v[i] = nullptr;
      continue;
    }
    Py_ssize_t failed = -1;
    if (p.accepts(obj, &failed)) continue;
    if (!raise) return false;
    const char* item = failed >= 0 ? value_type_name(PySequence_Fast_GET_ITEM(obj, failed)) : nullptr;
    if (p.type == ParamType::TensorList && item)
      type_error("expected Tensor as element %zd in argument %d, but got %s", failed, position_of(i) - 1, item);
    if (item)
      type_error("%s(): argument '%s' must be %s, but found element of type %s at pos %zd", name_.c_str(),
                 p.name.c_str(), p.type_name(), item, failed + 1);
    if (by_keyword & (1u << i))
      type_error("%s(): argument '%s' must be %s, not %s", name_.c_str(), p.name.c_str(), p.type_name(),
                 value_type_name(obj));
    type_error("%s(): argument '%s' (position %d) must be %s, not %s", name_.c_str(), p.name.c_str(), position_of(i),
               p.type_name(), value_type_name(obj));
  }
  if (bad_key && raise) {
    if (bad_key_given) type_error("%s() got multiple values for argument '%U'", name_.c_str(), bad_key);
    type_error("%s() got an unexpected keyword argument '%U'", name_.c_str(), bad_key);
  }
  return !bad_key;
}

std::string Signature::describe(bool for_docs) const {
  std::string s = for_docs ? name_ + "(" : "(";
  bool keyword_only = false;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (static_cast<int>(i) == self_param_) continue;
    const Param& p = params_[i];
    if (s.back() != '(') s += ", ";
    if (p.keyword_only && !keyword_only) s += "*, ";
    keyword_only = p.keyword_only;
    if (for_docs) s += p.spelled + " " + p.name + (p.optional ? "=" + p.default_text : "");
    else s += std::string(p.type_name()) + " " + p.name;
  }
  return s + ")" + (for_docs && !returns_.empty() ? " -> " + returns_ : "");
}

// ---- parsers ----

bool Parser::takes_no_arguments() const {
  return signatures_.size() == 1 && signatures_[0].max_args() == 0 && signatures_[0].self_param() >= 0;
}

void Parser::parse_overloads(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                             Parsed& out) const {
  for (size_t i = 0; i < signatures_.size(); ++i) {
    if (signatures_[i].parse(self, args, nargs, kwnames, out, false)) {
      out.index = static_cast<int>(i);
      return;
    }
  }
  invalid_combination(self, args, nargs, kwnames);
}

bool Signature::takes_varargs(PyObject* const* args, Py_ssize_t nargs) const {
  const int first = self_param_ == 0 ? 1 : 0;  // the parameter positional argument 0 binds
  return max_positional_ == 1 && first < static_cast<int>(params_.size()) && params_[first].list_size == 0 &&
         (params_[first].type == ParamType::IntList || params_[first].type == ParamType::SymIntList) && nargs > 0 &&
         is_index_like(args[0]);
}

void Parser::invalid_combination(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) const {
  Py_ssize_t n_kw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  size_t n_given = static_cast<size_t>(nargs + n_kw);
  // One plausible signature (by its bounds on the count of arguments) raises its own error.
  std::vector<const Signature*> shown, plausible;
  for (const Signature& s : signatures_) {
    shown.push_back(&s);
    if ((n_given >= s.min_args() && n_given <= s.max_args()) || s.takes_varargs(args, nargs)) plausible.push_back(&s);
  }
  Parsed scratch;
  if (plausible.size() == 1) plausible[0]->parse(self, args, nargs, kwnames, scratch, true);

  // The given arguments' types, "(Tensor, int, dim=str)"; with `s`, those s refuses between !.
  auto given = [&](const Signature* s) {
    std::string out = "(";
    for (Py_ssize_t k = 0; k < nargs + n_kw; ++k) {
      PyObject* value = args[k];
      PyObject* key = k >= nargs ? PyTuple_GET_ITEM(kwnames, k - nargs) : nullptr;
      bool ok = true;
      if (s) {
        int slot = key ? s->keyword_slot(key) : static_cast<int>(k) + (s->self_param() >= 0 && s->self_param() <= k);
        const Param* p = slot >= 0 && slot < static_cast<int>(s->params().size()) ? &s->params()[slot] : nullptr;
        ok = p && ((value == Py_None && p->allow_none) || p->accepts(value));
      }
      out += std::string(k ? ", " : "") + (ok ? "" : "!") + (key ? std::string(PyUnicode_AsUTF8(key)) + "=" : "") +
             value_type_name(value) + (ok ? "" : "!");
    }
    // PyTorch's spelling of keywords alone: a trailing separator, "(dim=int, bogus=int, )".
    return out + (nargs == 0 && n_kw > 0 ? ", )" : ")");
  };
  // The keywords `s` has no parameter for.
  auto unknown_keywords = [&](const Signature* s) {
    std::string out;
    for (Py_ssize_t k = 0; k < n_kw; ++k)
      if (s->keyword_slot(PyTuple_GET_ITEM(kwnames, k)) < 0)
        out += (out.empty() ? "" : ", ") + std::string(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k)));
    return out;
  };

  std::string msg = signatures_[0].name() + "() received an invalid combination of arguments - ";
  if (shown.size() == 1) {
    const Signature* s = shown[0];
    std::string unknown = unknown_keywords(s);
    if (!unknown.empty()) msg += "got unrecognized keyword arguments: " + unknown;
    else msg += "got " + given(n_given == s->max_args() ? s : nullptr) + ", but expected " + s->describe(false);
  } else {
    msg += "got " + given(nullptr) + ", but expected one of:\n";
    for (const Signature* s : shown) {
      msg += " * " + s->describe(false) + "\n";
      if (n_given != s->max_args()) continue;  // PyTorch explains only the signatures of the same length
      std::string unknown = unknown_keywords(s);
      if (!unknown.empty()) msg += "      didn't match because some of the keywords were incorrect: " + unknown + "\n";
      else msg += "      didn't match because some of the arguments have invalid types: " + given(s) + "\n";
    }
  }
  PyErr_SetString(PyExc_TypeError, msg.c_str());
  throw PythonError{};
}

// ---- converting parsed arguments ----

Arg Parsed::arg(int i) const { return is_tensor(v[i]) ? Arg(&impl_of(v[i])) : Arg(*scalar_of(v[i])); }

std::optional<Arg> Parsed::optional_arg(int i) const { return v[i] ? std::optional<Arg>(arg(i)) : std::nullopt; }

Scalar Parsed::scalar(int i) const {
  if (!v[i]) return params[i].default_value;
  if (is_tensor(v[i])) return scalar_from_py(v[i], params[i].name.c_str());  // its value (a sync when lazy)
  return *scalar_of(v[i]);
}

double Parsed::real(int i) const {
  return v[i] ? to_double(v[i], params[i].name.c_str()) : params[i].default_value.as_double();
}

std::optional<double> Parsed::optional_real(int i) const {
  return v[i] ? std::optional<double>(real(i)) : std::nullopt;
}

std::string Parsed::string(int i) const {
  if (!v[i]) return params[i].default_string;
  Py_ssize_t len = 0;
  const char* s = PyUnicode_AsUTF8AndSize(v[i], &len);
  if (!s) throw PythonError{};
  return std::string(s, static_cast<size_t>(len));
}

Dims Parsed::int_list(int i) const {
  const Param& p = params[i];
  Dims out;
  if (i == varargs_slot) {
    for (Py_ssize_t k = 0; k < n_varargs; ++k) out.push_back(to_int64(varargs[k], p.name.c_str()));
    return out;
  }
  if (!v[i]) return p.default_ints;
  if (is_index_like(v[i])) return Dims(static_cast<size_t>(p.list_size), to_int64(v[i], p.name.c_str()));
  return to_dims(v[i], p.name.c_str());
}

ops::DimList Parsed::given_dims(int i) const {
  ops::DimList out;
  for (int64_t d : int_list(i)) out.push_back(d);
  return out;
}

std::vector<Tensor> Parsed::tensors(int i) const {
  std::vector<Tensor> out;  // a tuple or list of tensors, checked by the parse
  for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(v[i]); ++k)
    out.push_back(tensor_of(PySequence_Fast_GET_ITEM(v[i], k)));
  return out;
}

DType Parsed::dtype(int i) const { return dtype_from_py(v[i]); }

Placement Parsed::placement(int i) const { return placement_from_py(v[i]); }

}  // namespace loom::py
