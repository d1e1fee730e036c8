// Argument parsing for METH_FASTCALL | METH_KEYWORDS functions.
//
// A function declares its signature once, as a static:
//     static ArgParser parser("full", {"size", "fill_value", "dtype", "device"}, 2);
// and parses each call into a fixed array of borrowed references (nullptr = not given). The first
// `max_positional` names may be given positionally; the rest are keyword-only. Keyword names are
// interned once, so matching is a pointer comparison in the common case.
#pragma once

#include <initializer_list>
#include <vector>

#include "pyext/common.h"

namespace loom::py {

class ArgParser {
 public:
  ArgParser(const char* fname, std::initializer_list<const char*> names, int max_positional);

  const char* name() const noexcept { return fname_; }
  size_t size() const noexcept { return names_.size(); }
  // Fills out[0, size()). Callers that take varargs (zeros(2, 3)) consume those first and pass
  // the rest. Throws PythonError with a TypeError set on a bad call.
  void parse(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** out) const;

 private:
  const char* fname_;
  std::vector<PyObject*> names_;  // interned, immortal for the process
  int max_positional_;
};

// The parsed arguments of one call: `ArgParser::parse(..., args.v)`.
template <size_t N>
struct Args {
  PyObject* v[N] = {};
  PyObject* operator[](size_t i) const noexcept { return v[i]; }
  bool has(size_t i) const noexcept { return v[i] != nullptr && v[i] != Py_None; }
};

}  // namespace loom::py
