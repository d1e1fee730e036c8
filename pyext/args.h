// Argument parsing by names only, for the few bindings outside the op table (pyext/op_table.h):
// autograd, buffers, DLPack, optimizer steps.
//
// A function declares its names once, as a static:
//     static ArgParser parser("backward", {"gradient", "retain_graph", "create_graph"}, 3);
// and parses each call into a fixed array of borrowed references (nullptr = not given; None is
// passed through). The first `max_positional` names may be given positionally; the rest are
// keyword-only. Matching and errors are the op table's (a Signature of untyped parameters).
#pragma once

#include <initializer_list>

#include "pyext/signature.h"

namespace loom::py {

class ArgParser {
 public:
  ArgParser(const char* fname, std::initializer_list<const char*> names, int max_positional)
      : signature_(Signature::untyped(fname, names, max_positional)) {}

  // Fills out[0, names.size()). Throws PythonError with a TypeError set on a bad call.
  void parse(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** out) const {
    Parsed p;
    signature_.parse(nullptr, args, nargs, kwnames, p, true);
    for (size_t i = 0; i < signature_.params().size(); ++i) out[i] = p.v[i];
  }

 private:
  Signature signature_;
};

// The parsed arguments of one call: `ArgParser::parse(..., args.v)`.
template <size_t N>
struct Args {
  PyObject* v[N] = {};
  PyObject* operator[](size_t i) const noexcept { return v[i]; }
  bool has(size_t i) const noexcept { return v[i] != nullptr && v[i] != Py_None; }
};

}  // namespace loom::py
