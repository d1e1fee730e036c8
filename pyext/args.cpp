#include "pyext/args.h"

namespace loom::py {

ArgParser::ArgParser(const char* fname, std::initializer_list<const char*> names, int max_positional)
    : fname_(fname), max_positional_(max_positional) {
  for (const char* n : names) names_.push_back(PyUnicode_InternFromString(n));
}

void ArgParser::parse(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** out) const {
  size_t n = names_.size();
  for (size_t i = 0; i < n; ++i) out[i] = nullptr;
  if (nargs > max_positional_) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional argument%s (%zd given)", fname_,
                 max_positional_, max_positional_ == 1 ? "" : "s", nargs);
    throw PythonError{};
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) out[i] = args[i];
  if (!kwnames) return;
  Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    size_t slot = n;
    for (size_t i = 0; i < n && slot == n; ++i)
      if (names_[i] == key) slot = i;
    for (size_t i = 0; i < n && slot == n; ++i)  // keys built at run time are not interned
      if (PyUnicode_Compare(names_[i], key) == 0) slot = i;
    if (slot == n) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname_, key);
      throw PythonError{};
    }
    if (out[slot]) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'", fname_, key);
      throw PythonError{};
    }
    out[slot] = args[nargs + k];
  }
}

}  // namespace loom::py
