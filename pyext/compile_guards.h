// What a compiled function checks of a call's Python side before it replays a captured step
// (pyext/compile_bindings.cpp), and how it builds the call's result: the structure of the
// arguments, the Python values the step depended on, and the result's template. The tensors'
// own guards are the captured step's (graph/captured_step.h).
//
// Arguments: the spec of a call is its arguments' structure walked in order (tuples, lists,
// dicts with their keys, named tuples with their type). Its leaves:
//   - tensors: only that they are loom lazy tensors; which ones the step reads, and their dtypes
//     and shapes, the captured step checks. They are the call's tensor arguments, in walk order;
//   - Python floats passed as arguments themselves (not inside a container): numbers of the step
//     (lazy/capture.h NumberSource Argument), read at every call, unless the recording saw the
//     step's Python use the value (pyext/compile_bindings.cpp, Note [Float arguments]): then,
//     and with dynamic=False, and for floats inside containers, guards on their value;
//   - ints, bools, strings, None, bytes: guards on their value (they decide Python control flow
//     and shapes: a new value is a new capture, as torch.compile specializes on ints);
//   - anything else (a module, an optimizer, a function): a guard on its identity.
//
// Python values the step depended on (PyGuards): grad mode; the `training` flag of every module
// the step can reach (through its arguments, globals and closure); the values the function's
// code reads from its globals and closure cells (numbers, strings by value; other objects by
// identity). A global or closure variable holding a tensor is no guard but an input, read at
// every call after the arguments (a loop that rebinds a global batch replays). What the
// function reads deeper (attributes, other functions' globals) is not guarded: README says what
// loom.compile cannot see.
#pragma once

#include <string>
#include <vector>

#include "lazy/tensor.h"
#include "pyext/common.h"

namespace loom::py {

// The arguments of one call, flattened: what a replay reads of them.
struct CallValues {
  std::vector<PyObject*> tensors;  // borrowed (the call holds them)
  std::vector<PyObject*> floats;   // borrowed
};

class ArgSpec {
 public:
  // The spec of a call (`floats_are_numbers`: floats are numbers of the step, else guards), and
  // its values.
  static ArgSpec of(PyObject* const* args, size_t nargs, PyObject* kwnames, bool floats_are_numbers,
                    CallValues& values);
  // "" if a call matches (values filled), else what differs.
  std::string match(PyObject* const* args, size_t nargs, PyObject* kwnames, CallValues& values) const;
  bool operator==(const ArgSpec& other) const;
  // Float argument k (CallValues::floats) is also a guard on `value`: the step's Python used it.
  void guard_float(size_t k, PyObject* value);

 private:
  struct Item {
    enum Kind : uint8_t { Tuple, List, Dict, Tensor, Float, Value, Identity } kind;
    // Tuple: the type (named tuples); Dict: the keys (a tuple); Value: the value; Identity: it;
    // Float: its type, or (a guarded float) its value
    PyRef object;
    Py_ssize_t size = 0;
    bool guarded = false;  // Float: `object` is the value it must have
  };
  void add(PyObject* obj, CallValues& values);
  std::string check(PyObject* obj, size_t& at, CallValues& values, const std::string& where) const;

  std::vector<Item> items_;
  PyRef kwnames_;  // a tuple or null
};

// Guards on Python state: checked in O(guards) at every call.
class PyGuards {
 public:
  // From the function's guard state (loom._compile._guard_state(fn, args): a tuple of
  // (globals: [(dict, name)], cells: [(cell, name)], modules: [module], ...)) and the thread's
  // grad mode. The tensors of globals and cells are appended to values.tensors.
  static PyGuards snapshot(PyObject* state, CallValues& values);
  // "" if the state matches (the tensors of globals and cells appended to values.tensors).
  std::string check(CallValues& values) const;
  bool operator==(const PyGuards& other) const;

 private:
  struct Slot {
    PyRef dict, name, cell;  // a global (dict, name) or a closure cell
    PyRef value;             // its value when captured
    bool by_value = false;   // numbers, strings, None: compared with ==, else `is`
    bool tensor = false;     // a tensor: an input of the call, not a guard
  };
  bool grad_mode_ = true;
  std::vector<Slot> slots_;
  std::vector<std::pair<PyRef, bool>> modules_;  // (module, training)
};

// How to make a call's result from a replay's tensors: the result's structure with its tensors
// taken out.
class ResultTemplate {
 public:
  // The template of `result`; `tensors` gets its tensors in walk order.
  static ResultTemplate of(PyObject* result, std::vector<PyObject*>& tensors);
  // The result of a replay (a new reference; throws PythonError): `fresh[i]` for tensor i of the
  // template where not null, else the tensor the recorded call returned there (an argument: the
  // same argument of this call).
  PyObject* make(const std::vector<Tensor>& fresh, const CallValues& call) const;
  // Whether the non-tensor parts of two results agree (a returned number that changes between
  // two calls is Python state a replay cannot recompute).
  bool agrees_with(const ResultTemplate& other) const;
  // Tensor i of the result is argument `argument` of the call.
  void returns_argument(size_t i, int32_t argument) { tensors_[i].argument = argument; }

 private:
  struct Item {
    enum Kind : uint8_t { Tuple, List, Dict, Tensor, Value } kind;
    PyRef object;  // Tuple: the type; Dict: the keys; Value: the object; Tensor: the recorded tensor
    Py_ssize_t size = 0;
    int32_t tensor = -1;  // Tensor: its index
  };
  struct TensorItem {
    PyRef recorded;
    int32_t argument = -1;
  };
  PyObject* build(size_t& at, const std::vector<Tensor>& fresh, const CallValues& call) const;
  void add(PyObject* obj, std::vector<PyObject*>& tensors);

  std::vector<Item> items_;
  std::vector<TensorItem> tensors_;
};

}  // namespace loom::py
