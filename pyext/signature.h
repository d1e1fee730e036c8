// PyTorch-style signatures: parsed once from strings in schema syntax, then used to match the
// arguments of every call (METH_FASTCALL), with PyTorch's TypeError texts.
//
//   "add(Tensor input, Arg other, *, Scalar alpha=1) -> Tensor"
//
// A parameter is `Type name` or `Type name=default`; `*` makes the parameters after it
// keyword-only. Types (and how errors name them, as PyTorch does):
//   Tensor      a loom tensor                                     "Tensor"
//   Arg         a tensor or a Python number (bool, int, float)    "Tensor"
//   Scalar      a Python number (or a 0-d tensor needing no grad)  "Number"
//   int, SymInt an int (not a bool)                               "int", "SymInt"
//   float       the same, converted to a double                   "float"
//   bool        True or False                                     "bool"
//   str         a string                                          "str"
//   int[]       a tuple or list of ints; int[N] also takes one int, repeated N times (int[1]
//               dim: a dim or dims)                               "tuple of ints"
//   SymInt[]    the same, named as PyTorch names sizes            "tuple of SymInts"
//   Tensor[]    a tuple or list of tensors                        "tuple of Tensors"
//   ScalarType  a loom.dtype (or a Python type, a name, a numpy dtype) "torch.dtype"
//   Device      a loom.device, a string or a CUDA ordinal         "torch.device"
//   PyObject*   anything                                          "object"
// Only a type marked `?` accepts None (`int? dim=None`): None is never taken for "absent". The
// keywords `axis`, `keepdims`, `x`/`a`/`x1` and `x2` are accepted for `dim`, `keepdim`, `input`
// and `other` (numpy's names), as PyTorch accepts them. When the only positional parameter is an
// int list, its ints may also come as varargs: view(2, 3) is view((2, 3)).
//
// A method's signature is the function's without the parameter named `input` or `self` (else
// the first), which is bound to the tensor the method is called on; argument positions in
// errors do not count it, as in PyTorch.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "lazy/ops.h"
#include "pyext/common.h"
#include "pyext/tensor_object.h"

namespace loom::py {

enum class ParamType : uint8_t {
  Tensor, Arg, Scalar, Int, Float, Bool, String, IntList, SymIntList, TensorList, DType, Device, Object,
};

struct Param {
  ParamType type;
  std::string name;
  std::string spelled;            // the type as written ("int[1]?"), for docs
  std::string default_text;       // the default as written, for docs
  PyObject* py_name = nullptr;   // interned, immortal
  PyObject* alias[3] = {};       // numpy's names for the same parameter (interned)
  bool optional = false;         // has a default: may be left out
  bool allow_none = false;       // `?`
  bool keyword_only = false;
  int list_size = 0;             // N of int[N]: a lone int is repeated N times
  Scalar default_value{int64_t{0}};  // of an int, float, bool or Scalar (an `=None` default has none)
  Dims default_ints;
  std::string default_string;

  // Whether obj is a value of this type (None is decided by the caller). For an int list,
  // *failed_element is the position of the first element that is not an int.
  bool accepts(PyObject* obj, Py_ssize_t* failed_element = nullptr) const;
  const char* type_name() const;  // as PyTorch's errors name it
};

class Signature;

// The arguments of one call, matched to one signature: borrowed references, in the signature's
// parameter order (the method's self included), nullptr where the default applies (left out, or
// None for a `?` type). Every member is set by the parse. The typed accessors convert, taking
// the default from the signature (the cheap ones inline, for the hot path).
struct Parsed {
  static constexpr int kMaxParams = 16;

  const Signature* signature;
  const Param* params;         // the signature's
  int index;                   // which of the parser's signatures matched (the overload)
  PyObject* self;              // the tensor a method was called on
  PyObject* v[kMaxParams];     // [0, the signature's parameter count)
  int varargs_slot;            // an int list given as varargs (view(2, 3)): its slot, and the ints
  PyObject* const* varargs;
  Py_ssize_t n_varargs;

  bool has(int i) const noexcept { return v[i] != nullptr; }
  PyObject* object(int i) const noexcept { return v[i]; }  // nullptr when absent or None

  Tensor tensor(int i) const { return v[i] ? tensor_of(v[i]) : Tensor(); }  // null when absent (Tensor?)
  Arg arg(int i) const;
  std::optional<Arg> optional_arg(int i) const;
  Scalar scalar(int i) const;
  int64_t int64(int i) const {
    return v[i] ? to_int64(v[i], params[i].name.c_str()) : params[i].default_value.as_int();
  }
  std::optional<int64_t> optional_int64(int i) const { return v[i] ? std::optional<int64_t>(int64(i)) : std::nullopt; }
  double real(int i) const;
  std::optional<double> optional_real(int i) const;
  bool boolean(int i) const { return v[i] ? v[i] == Py_True : params[i].default_value.as_int() != 0; }
  std::string string(int i) const;
  Dims int_list(int i) const;
  ops::DimList dims(int i) const {  // an int list as dims; none (all dims) when absent
    return !v[i] && i != varargs_slot && params[i].default_ints.empty() ? ops::DimList() : given_dims(i);
  }
  std::vector<Tensor> tensors(int i) const;
  std::optional<DType> optional_dtype(int i) const { return v[i] ? std::optional<DType>(dtype(i)) : std::nullopt; }
  Placement placement(int i) const;  // absent or None: the CPU, eager

 private:
  DType dtype(int i) const;
  ops::DimList given_dims(int i) const;
};

class Signature {
 public:
  // Parses `text`; throws std::logic_error naming the text when it is malformed (a table bug,
  // found at import).
  explicit Signature(const std::string& text);
  // Parameters that take anything (None too, passed through), all optional: args.h's ArgParser.
  static Signature untyped(const char* fname, std::initializer_list<const char*> names, int max_positional);
  // The method's form: `self_param` is bound to the tensor the method is called on, and the
  // function's name may be replaced (the in-place form "add_").
  Signature as_method(const std::string& method_name) const;
  // The same function under another name (the in-place function form "exp_").
  Signature renamed(const std::string& function_name) const;

  const std::string& name() const noexcept { return name_; }
  const std::string& source() const noexcept { return source_; }  // the text it was parsed from
  const std::vector<Param>& params() const noexcept { return params_; }
  int self_param() const noexcept { return self_param_; }  // -1 for a function

  // Matches a call. On a mismatch returns false, or with `raise` throws PythonError with
  // PyTorch's TypeError for this signature set. A call with no arguments where none is required
  // (a.sum(), a.exp()) takes the inline path: every parameter at its default.
  bool parse(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, Parsed& out,
             bool raise) const {
    if (nargs || kwnames || min_args_) return parse_call(self, args, nargs, kwnames, out, raise);
    out.signature = this;
    out.params = params_.data();
    out.self = self;
    out.varargs_slot = -1;
    for (size_t i = 0; i < params_.size(); ++i) out.v[i] = nullptr;
    if (self_param_ >= 0) out.v[self_param_] = self;
    return true;
  }

  // The parameter a keyword names (its name or numpy's), or -1.
  int keyword_slot(PyObject* key) const;
  // As docs show it, "add(Tensor input, Arg other, *, Scalar alpha=1) -> Tensor", or as PyTorch's
  // errors list it, "(Tensor input, Tensor other, *, Number alpha)".
  std::string describe(bool for_docs) const;

  // Bounds used to pick the plausible signatures of a bad call (PyTorch's print_error).
  size_t min_args() const noexcept { return min_args_; }
  size_t max_args() const noexcept { return max_args_; }
  // Whether positional arguments starting with an int are the ints of a lone int-list parameter
  // (view(2, 3)): such a call is this signature's, whatever their count.
  bool takes_varargs(PyObject* const* args, Py_ssize_t nargs) const;

 private:
  void count();
  bool parse_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, Parsed& out,
                  bool raise) const;
  [[noreturn]] void too_many_positional(Py_ssize_t nargs) const;
  [[noreturn]] void missing(size_t from) const;

  Signature() = default;
  int index_of_self() const;  // the parameter a method binds: `input` or `self`, else the first

  std::string source_;
  std::string name_;
  std::string returns_;
  std::vector<Param> params_;
  int self_param_ = -1;
  size_t min_args_ = 0, max_args_ = 0, max_positional_ = 0;
};

// The signatures of one Python callable (its overloads, tried in order), PyTorch's PythonArgParser.
class Parser {
 public:
  Parser() = default;
  explicit Parser(std::vector<Signature> signatures) : signatures_(std::move(signatures)) {}

  // Fills `out` (out.index: the overload that matched) or throws PythonError with a TypeError:
  // the error of the one plausible signature, else "received an invalid combination of
  // arguments" listing them all, as PyTorch words it.
  void parse(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, Parsed& out) const {
    if (signatures_.size() > 1) return parse_overloads(self, args, nargs, kwnames, out);
    signatures_[0].parse(self, args, nargs, kwnames, out, true);
    out.index = 0;
  }

  const std::vector<Signature>& signatures() const noexcept { return signatures_; }
  bool takes_no_arguments() const;  // a method of self alone

 private:
  void parse_overloads(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, Parsed& out) const;
  [[noreturn]] void invalid_combination(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                        PyObject* kwnames) const;
  std::vector<Signature> signatures_;
};

}  // namespace loom::py
