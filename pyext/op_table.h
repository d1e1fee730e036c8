// The op table: one row per Python name, with its signatures in PyTorch's schema syntax
// (pyext/signature.h), the forms it takes and a body that calls the op library:
//
//   {{"add(Arg input, Arg other, *, Scalar alpha=1)"}, kFunction | kMethod | kInplace,
//    LOOM_BODY(ops::add(p.arg(0), p.arg(1), p.scalar(2)))},
//
// From the row come loom.add, Tensor.add (the signature without `input`, which becomes self),
// Tensor.add_ (the method's result written into self), their docstrings and every TypeError of
// a bad call. Overloads are more strings in the row, tried in order; the body switches on
// Parsed::index and reads arguments by position in the matched signature (self included). Rows
// live with their family (op_bindings.cpp, tensor_methods.cpp, creation.cpp); op_table.cpp
// gathers them at import into op_functions() and op_methods() (tensor_object.h).
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pyext/op_args.h"
#include "pyext/signature.h"
#include "pyext/tensor_object.h"

namespace loom::py {

enum Variant : unsigned {
  kFunction = 1,    // loom.<name>(...)
  kMethod = 2,      // Tensor.<name>(...)
  kInplace = 4,     // Tensor.<name>_(...): the method's result written into self (self is returned)
  kWritesSome = 8,  // with kInplace: the op writes chosen elements (masked_fill_, tril_), so a
                    // tensor whose elements overlap in memory is allowed, as in PyTorch
  kInplaceFunction = 16,  // loom.<name>_(input, ...): the function's result written into `input`
                          // (returned), as torch.exp_(x); PyTorch has it for most unary math ops
};
constexpr unsigned kBoth = kFunction | kMethod;
constexpr unsigned kAll = kFunction | kMethod | kInplace;

// What a body returns: a tensor (a new Python tensor, or the value an in-place form writes into
// self), tensors (a tuple) or any Python object (a new reference).
class Result {
 public:
  Result(Tensor t) : tensor_(std::move(t)) {}
  Result(const std::vector<Tensor>& ts) : object_(PyRef::steal(tensor_tuple(ts))) {}
  Result(PyObject* new_reference) : object_(PyRef::checked(new_reference)) {}  // null: a Python error

  PyObject* release() { return object_ ? object_.release() : wrap(std::move(tensor_)); }
  Tensor take_tensor() { return object_ ? throw std::logic_error("in-place body: no tensor") : std::move(tensor_); }

 private:
  Tensor tensor_;
  PyRef object_;
};

using Body = Result (*)(const Parsed&);

// A named pair like torch.return_types.<name> (pyext/op_rows_reduce.cpp): fields values / indices
// unless named otherwise.
PyObject* named_pair(const char* name, std::pair<Tensor, Tensor> parts, const char* first = "values",
                     const char* second = "indices");

// The body of a row that returns one expression of its arguments `p`: LOOM_BODY(ops::exp(p.tensor(0))).
#define LOOM_BODY(...) [](const Parsed& p) -> Result { return __VA_ARGS__; }

struct Row {
  std::vector<const char*> signatures;  // the overloads, in the order they are tried
  unsigned variants;                    // Variant bits
  Body body;
  const char* note = nullptr;           // what the docstring says beyond the signatures
};

// The functions and methods made from rows.
struct MethodDefs {
  std::vector<PyMethodDef> functions, methods;
};

// Parses the rows' signatures (a malformed one throws std::logic_error naming it) and appends
// their functions and methods. Called once per family, at import; the table keeps the rows.
void add_rows(std::span<const Row> rows, MethodDefs& defs);

// Each family's rows (defined next to the family).
void add_op_rows(MethodDefs& defs);        // op_bindings.cpp: the op library
void add_elementwise_rows(MethodDefs& defs);  // op_rows_elementwise.cpp: more math, the activations
void add_tensor_rows(MethodDefs& defs);    // tensor_methods.cpp: views and conversions
void add_creation_rows(MethodDefs& defs);  // creation.cpp: tensor, zeros, arange, ...
void add_data_rows(MethodDefs& defs);      // op_rows_data.cpp: data movement (lazy/ops_movement.h)
void add_linalg_rows(MethodDefs& defs);    // op_rows_linalg.cpp: einsum, products, norms
void add_reduce_rows(MethodDefs& defs);    // op_rows_reduce.cpp: statistics, sorting, sampling
void add_nn_rows(MethodDefs& defs);        // op_rows_nn.cpp: convolution, pooling

}  // namespace loom::py
