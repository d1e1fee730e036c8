// einsum (lazy/ops_linalg.h): an equation parsed into labels, then lowered to views, sums and
// matrix products, so BLAS serves every contraction and autograd comes with the ops.
//
// 1. Each operand's dims get labels; an ellipsis covers the dims no letter names, right-aligned
//    across operands (they broadcast like numpy's).
// 2. A label repeated within one operand takes the diagonal (a view), so 'ii->' is a trace.
// 3. A label in one operand only and not in the output is summed out at once.
// 4. While operands remain, the pair whose result has the fewest elements is contracted: labels
//    in both and needed later are batch dims, labels in both and needed nowhere else are summed
//    by the product, the rest are rows (left) and columns (right). One MatMul (its batch dims
//    broadcast), or an elementwise product when nothing is summed.
// 5. The result is permuted into the output's order.
#include <algorithm>
#include <functional>
#include <string>

#include "lazy/ops_linalg.h"
#include "lazy/ops_movement.h"
#include "runtime/error.h"

namespace loom::ops {
namespace {

// Labels: 'A'-'Z' are 0-25 and 'a'-'z' 26-51 (PyTorch's implicit output sorts them so: upper
// case first); dims covered by an ellipsis are kEllipsis + i.
constexpr int kLetters = 52;
constexpr int kEllipsis = kLetters;

int label_of(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' : c - 'a' + 26; }
char letter_of(int label) { return static_cast<char>(label < 26 ? 'A' + label : 'a' + label - 26); }
bool is_letter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

// One side of the equation: its letters' labels in order, kEllipsis (-1 here) where "..." stands.
struct Term {
  std::vector<int> labels;  // -1: the ellipsis
  bool ellipsis = false;
};

struct Equation {
  std::vector<Term> inputs;
  Term output;
  bool explicit_output = false;
};

Equation parse(std::string_view eq) {
  Equation out;
  out.inputs.emplace_back();
  Term* term = &out.inputs.back();
  bool in_output = false;
  for (size_t i = 0; i < eq.size(); ++i) {
    char c = eq[i];
    if (c == ' ') continue;
    if (c == ',' && !in_output) {
      out.inputs.emplace_back();
      term = &out.inputs.back();
      continue;
    }
    if (c == '-' && !in_output && i + 1 < eq.size() && eq[i + 1] == '>') {
      in_output = true;
      out.explicit_output = true;
      term = &out.output;
      ++i;
      continue;
    }
    std::string who = in_output ? std::string("output") : "operand " + std::to_string(out.inputs.size() - 1);
    if (c == '.') {
      LOOM_CHECK(!term->ellipsis, Runtime, "einsum(): found '.' for ", who,
                 in_output ? " but an ellipsis (...) was already found" : " for which an ellipsis was already found");
      LOOM_CHECK(i + 2 < eq.size() && eq[i + 1] == '.' && eq[i + 2] == '.', Runtime, "einsum(): found '.' for ", who,
                 " that is not part of any ellipsis");
      term->ellipsis = true;
      term->labels.push_back(-1);
      i += 2;
      continue;
    }
    LOOM_CHECK(is_letter(c), Runtime, "einsum(): invalid subscript given at index ", i,
               " in the equation string, subscripts must be in [a-zA-Z]");
    term->labels.push_back(label_of(c));
  }
  return out;
}

struct Operand {
  Tensor value;
  std::vector<int> labels;  // one per dim
};

// The diagonal over every label an operand repeats: one dim per label.
Operand take_diagonals(Operand op, size_t index) {
  for (size_t d1 = 0; d1 < op.labels.size(); ++d1)
    for (size_t d2 = d1 + 1; d2 < op.labels.size();) {
      if (op.labels[d1] != op.labels[d2]) {
        ++d2;
        continue;
      }
      int64_t s1 = op.value->sizes()[d1], s2 = op.value->sizes()[d2];
      LOOM_CHECK(s1 == s2, Runtime, "einsum(): subscript ", letter_of(op.labels[d1]), " is repeated for operand ", index,
                 " but the sizes don't match, ", s1, " != ", s2);
      int label = op.labels[d1];
      op.value = diagonal(op.value, 0, static_cast<int64_t>(d1), static_cast<int64_t>(d2));
      op.labels.erase(op.labels.begin() + static_cast<std::ptrdiff_t>(d2));
      op.labels.erase(op.labels.begin() + static_cast<std::ptrdiff_t>(d1));
      op.labels.push_back(label);
      d2 = d1 + 1;  // the dims after d1 moved: look again
    }
  return op;
}

int64_t size_of(const Operand& op, int label) {
  auto it = std::find(op.labels.begin(), op.labels.end(), label);
  return it == op.labels.end() ? 1 : op.value->sizes()[it - op.labels.begin()];
}

bool has(const std::vector<int>& labels, int label) {
  return std::find(labels.begin(), labels.end(), label) != labels.end();
}

// Sums op over its labels that `needed` rejects.
Operand sum_unneeded(Operand op, const std::function<bool(int)>& needed) {
  DimList dims;
  std::vector<int> kept;
  for (size_t d = 0; d < op.labels.size(); ++d) {
    if (needed(op.labels[d])) kept.push_back(op.labels[d]);
    else dims.push_back(static_cast<int64_t>(d));
  }
  if (dims.empty()) return op;
  return {sum(op.value, dims), kept};
}

// The operand's dims in `order` (no node when they are in it already: einsum records few nodes).
Tensor permuted(const Operand& op, const std::vector<int>& order) {
  Dims dims;
  bool identity = true;
  for (int label : order) {
    dims.push_back(std::find(op.labels.begin(), op.labels.end(), label) - op.labels.begin());
    identity = identity && dims.back() == static_cast<int64_t>(dims.size() - 1);
  }
  return identity ? op.value : permute(op.value, dims);
}

Tensor reshaped(const Tensor& t, const Dims& shape) { return Dims(t->sizes()) == shape ? t : reshape(t, shape); }

// a and b contracted over the labels in both that `needed` rejects; the result's labels are
// batch + left + right.
Operand contract(Operand a, Operand b, const std::function<bool(int)>& needed) {
  std::vector<int> batch, summed, left, right;
  for (int l : a.labels) {
    if (has(b.labels, l)) (needed(l) ? batch : summed).push_back(l);
    else left.push_back(l);
  }
  for (int l : b.labels)
    if (!has(a.labels, l)) right.push_back(l);
  // A summed label of size 1 on one side (broadcast) is summed on the other side first.
  for (int l : summed) {
    int64_t sa = size_of(a, l), sb = size_of(b, l);
    if (sa == sb) continue;
    Operand& big = sa > sb ? a : b;
    int64_t d = std::find(big.labels.begin(), big.labels.end(), l) - big.labels.begin();
    big.value = sum(big.value, DimList{d}, true);
  }
  Dims batch_a, batch_b, shape;
  int64_t rows = 1, cols = 1, inner = 1;
  for (int l : batch) {
    batch_a.push_back(size_of(a, l));
    batch_b.push_back(size_of(b, l));
    shape.push_back(std::max(size_of(a, l), size_of(b, l)));
  }
  for (int l : left) {
    rows *= size_of(a, l);
    shape.push_back(size_of(a, l));
  }
  for (int l : right) {
    cols *= size_of(b, l);
    shape.push_back(size_of(b, l));
  }
  for (int l : summed) inner *= size_of(a, l);
  std::vector<int> order_a = batch, order_b = batch;
  order_a.insert(order_a.end(), left.begin(), left.end());
  order_a.insert(order_a.end(), summed.begin(), summed.end());
  order_b.insert(order_b.end(), summed.begin(), summed.end());
  order_b.insert(order_b.end(), right.begin(), right.end());
  Dims ma = batch_a, mb = batch_b;
  ma.push_back(rows);
  ma.push_back(inner);
  mb.push_back(inner);
  mb.push_back(cols);
  Tensor x = reshaped(permuted(a, order_a), ma), y = reshaped(permuted(b, order_b), mb);
  // Nothing to sum: an outer product, elementwise (it fuses).
  Tensor product = inner == 1 ? mul(x, y) : matmul(x, y);
  std::vector<int> labels = batch;
  labels.insert(labels.end(), left.begin(), left.end());
  labels.insert(labels.end(), right.begin(), right.end());
  return {reshaped(product, shape), labels};
}

}  // namespace

Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands) {
  LOOM_CHECK(!operands.empty(), Runtime, "einsum(): must provide at least one operand");
  Equation eq = parse(equation);
  LOOM_CHECK(eq.inputs.size() <= operands.size(), Runtime,
             "einsum(): fewer operands were provided than specified in the equation");
  LOOM_CHECK(eq.inputs.size() >= operands.size(), Runtime,
             "einsum(): more operands were provided than specified in the equation");
  for (const Tensor& t : operands)
    LOOM_CHECK(t->dtype() == operands[0]->dtype(), Runtime, "expected scalar type ",
               dtype_info(operands[0]->dtype()).scalar_type_name, " but found ", dtype_info(t->dtype()).scalar_type_name);

  // 1. Labels per dim; the ellipsis dims right-aligned.
  int64_t ellipsis_dims = 0;
  for (size_t i = 0; i < operands.size(); ++i) {
    const Term& term = eq.inputs[i];
    auto letters = static_cast<int64_t>(term.labels.size()) - (term.ellipsis ? 1 : 0);
    int64_t ndim = operands[i]->ndim();
    if (term.ellipsis) {
      LOOM_CHECK(letters <= ndim, Runtime, "einsum(): the number of subscripts in the equation (", letters,
                 ") is more than the number of dimensions (", ndim, ") for operand ", i);
      ellipsis_dims = std::max(ellipsis_dims, ndim - letters);
    } else {
      LOOM_CHECK(letters == ndim, Runtime, "einsum(): the number of subscripts in the equation (", letters,
                 ") does not match the number of dimensions (", ndim, ") for operand ", i, " and no ellipsis was given");
    }
  }
  std::vector<Operand> ops;
  std::vector<int64_t> sizes(static_cast<size_t>(kEllipsis + ellipsis_dims), 1);
  std::vector<int> uses(sizes.size(), 0);
  for (size_t i = 0; i < operands.size(); ++i) {
    const Term& term = eq.inputs[i];
    Operand op{operands[i], {}};
    int64_t covered = op.value->ndim() - static_cast<int64_t>(term.labels.size()) + (term.ellipsis ? 1 : 0);
    for (int l : term.labels) {
      if (l != -1) {
        op.labels.push_back(l);
        continue;
      }
      for (int64_t e = 0; e < covered; ++e) op.labels.push_back(static_cast<int>(kEllipsis + ellipsis_dims - covered + e));
    }
    // A label repeated within the operand takes a diagonal: its sizes must agree.
    for (size_t d = 0; d < op.labels.size(); ++d)
      for (size_t e = 0; e < d; ++e)
        LOOM_CHECK(op.labels[e] != op.labels[d] || op.value->sizes()[e] == op.value->sizes()[d], Runtime,
                   "einsum(): subscript ", letter_of(op.labels[d]), " is repeated for operand ", i,
                   " but the sizes don't match, ", op.value->sizes()[e], " != ", op.value->sizes()[d]);
    // Sizes broadcast across operands (1 against anything).
    for (size_t d = 0; d < op.labels.size(); ++d) {
      int l = op.labels[d];
      int64_t s = op.value->sizes()[d];
      ++uses[static_cast<size_t>(l)];
      int64_t& seen = sizes[static_cast<size_t>(l)];
      if (s == seen || s == 1) continue;
      if (seen != 1) {
        if (l >= kEllipsis)
          LOOM_FAIL(Runtime, "einsum(): dimension ", l - kEllipsis, " covered by ellipsis in operand ", i, "has size ", s,
                    " which does not broadcast with previously seen ellipsis with size ", seen,
                    " for the respective dimension");
        LOOM_FAIL(Runtime, "einsum(): subscript ", letter_of(l), " has size ", s, " for operand ", i,
                  " which does not broadcast with previously seen size ", seen);
      }
      seen = s;
    }
    ops.push_back(std::move(op));
  }

  // The output's labels: as written, or the ellipsis dims then the letters used once, sorted.
  std::vector<int> output;
  if (eq.explicit_output) {
    for (int l : eq.output.labels) {
      if (l == -1) {
        for (int64_t e = 0; e < ellipsis_dims; ++e) output.push_back(static_cast<int>(kEllipsis + e));
        continue;
      }
      LOOM_CHECK(uses[static_cast<size_t>(l)] > 0, Runtime, "einsum(): output subscript ", letter_of(l),
                 " does not appear in the equation for any input operand");
      LOOM_CHECK(!has(output, l), Runtime, "einsum(): output subscript ", letter_of(l), " appears more than once in the output");
      output.push_back(l);
    }
  } else {
    for (int64_t e = 0; e < ellipsis_dims; ++e) output.push_back(static_cast<int>(kEllipsis + e));
    for (int l = 0; l < kLetters; ++l)
      if (uses[static_cast<size_t>(l)] == 1) output.push_back(l);
  }

  // 2. and 3. Diagonals, then the labels no one else needs.
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i] = take_diagonals(std::move(ops[i]), i);
    auto needed = [&](int l) {
      if (has(output, l)) return true;
      for (size_t j = 0; j < ops.size(); ++j)
        if (j != i && has(ops[j].labels, l)) return true;
      return false;
    };
    ops[i] = sum_unneeded(std::move(ops[i]), needed);
  }

  // 4. Pairwise contractions, the smallest result first.
  while (ops.size() > 1) {
    size_t best_i = 0, best_j = 1;
    double best = -1;
    for (size_t i = 0; i < ops.size(); ++i)
      for (size_t j = i + 1; j < ops.size(); ++j) {
        double elements = 1;
        auto count = [&](const Operand& op) {
          for (int l : op.labels) {
            bool other = has(output, l);
            for (size_t k = 0; k < ops.size() && !other; ++k)
              other = k != i && k != j && has(ops[k].labels, l);
            bool shared = has(ops[i].labels, l) && has(ops[j].labels, l);
            if (other && (!shared || &op == &ops[i])) elements *= static_cast<double>(sizes[static_cast<size_t>(l)]);
          }
        };
        count(ops[i]);
        count(ops[j]);
        if (best < 0 || elements < best) {
          best = elements;
          best_i = i;
          best_j = j;
        }
      }
    auto needed = [&](int l) {
      if (has(output, l)) return true;
      for (size_t k = 0; k < ops.size(); ++k)
        if (k != best_i && k != best_j && has(ops[k].labels, l)) return true;
      return false;
    };
    Operand merged = contract(ops[best_i], ops[best_j], needed);
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(best_j));
    ops[best_i] = std::move(merged);
  }

  // 5. The output's order.
  Operand last = sum_unneeded(std::move(ops[0]), [&](int l) { return has(output, l); });
  Tensor out = permuted(last, output);
  // A lone operand's result is a view of it, as PyTorch's: never the operand itself.
  for (const Tensor& t : operands)
    if (out.get() == t.get()) return alias(out);
  return out;
}

}  // namespace loom::ops
