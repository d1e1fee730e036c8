// cross_entropy with class-index targets: log_softmax and nll_loss as one composite with a
// derivative of its own (record_composite, lazy/autograd.h). The forward keeps each row's
// max and sum of exp; the derivative is closed-form, d logits = dlogp - softmax * sum(dlogp), where
// dlogp is the scaled one-hot of the target (plus the smoothing's weights) and its row sum is
// known without a reduction: backward is one elementwise pass over the logits, against three
// row reductions for the chain of log_softmax's, the pick's and the mean's derivatives.
#include <string>

#include "lazy/autograd.h"
#include "lazy/ops.h"
#include "runtime/dtype.h"
#include "runtime/error.h"

namespace loom::ops {
namespace {

// (N, C, d1, ...) as (N * d1 * ..., C); (C,) as (1, C); (N, C) as it is.
Tensor classes_last(const Tensor& x) {
  int64_t nd = x->ndim();
  if (nd == 1) return unsqueeze(x, 0);
  if (nd == 2) return x;
  Dims order{0};
  for (int64_t d = 2; d < nd; ++d) order.push_back(d);
  order.push_back(1);
  return reshape(permute(x, order), Dims{-1, x->sizes()[1]});
}

// The inverse of classes_last for a gradient of the logits.
Tensor classes_back(const Tensor& g, IntSpan shape) {
  int64_t nd = static_cast<int64_t>(shape.size());
  if (nd <= 2) return reshape(g, shape);
  Dims moved{shape[0]};
  for (int64_t d = 2; d < nd; ++d) moved.push_back(shape[d]);
  moved.push_back(shape[1]);
  Dims order{0, nd - 1};
  for (int64_t d = 1; d < nd - 1; ++d) order.push_back(d);
  return permute(reshape(g, moved), order);
}

Tensor neg(const Tensor& x) { return unary(OpId::Neg, x); }

// Row i's one-hot of its target class among `classes`: (M, C) bool.
Tensor one_hot_rows(const Tensor& t, int64_t classes) {
  Tensor ids = arange(classes, Scalar(int64_t{0}), Scalar(int64_t{1}), DType::Int64, placement_of(t));
  return binary(OpId::Eq, ids, unsqueeze(t, 1));
}

// What the forward keeps for the derivative, per row i of the (M, C) logits: the target, the
// weight of the row's target term a_i = (1 - smoothing) w_{t_i} valid_i, and valid_i (the target
// is not ignore_index); with smoothing, b_c = smoothing / C * w_c.
struct Terms {
  Tensor target, a, valid;
  Tensor b;  // (C,); empty without smoothing
};

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor* weight, int64_t ignore_index,
                     std::string_view reduction, double label_smoothing) {
  LOOM_CHECK(reduction == "none" || reduction == "mean" || reduction == "sum", Value, reduction,
             " is not a valid value for reduction");
  LOOM_CHECK(target->dtype() == DType::Int64, Runtime, "expected scalar type Long but found ",
             dtype_info(target->dtype()).scalar_type_name);
  LOOM_CHECK(is_floating(input->dtype()), Runtime, "\"log_softmax_lastdim_kernel_impl\" not implemented for '",
             dtype_info(input->dtype()).scalar_type_name, "'");
  LOOM_CHECK(input->ndim() >= 1, Runtime, "input tensor should be 1D or 2D");
  LOOM_CHECK(!weight || !grad_enabled() || !requires_grad(**weight), Runtime,
             "The function 'nll_loss_forward' is not differentiable with respect to argument 'weight'. This input "
             "cannot have requires_grad True.");
  Dims in_shape(input->sizes());
  int64_t classes = input->ndim() == 1 ? in_shape[0] : in_shape[1];
  DType dtype = input->dtype();
  double smoothing = label_smoothing;
  // reduction='none' gives the target's shape: made here where PyTorch's op gives it (nll_loss,
  // nll_loss2d of a 4-d input, the smoothing's sum), by a view of the result elsewhere.
  bool target_shaped = input->ndim() <= 2 || input->ndim() == 4 || label_smoothing > 0;
  Tensor loss, max, sum_exp, denom;
  Terms terms;
  {
    GradModeGuard unrecorded(false);
    Tensor x = classes_last(input);
    Tensor t = reshape(target, Dims{-1});
    LOOM_CHECK(x->sizes()[0] == t->sizes()[0], Value, "Expected input batch_size (", x->sizes()[0],
               ") to match target batch_size (", t->sizes()[0], ").");
    // log_softmax as ops::log_softmax computes it (the same values). The derivative's softmax is
    // exp(x - max) / sum of the same exp: in a step that fuses forward and backward, that is the
    // value the sum's pass computed, which the row kernel keeps rather than calls exp again
    // (fusion/render.cpp, kept values).
    max = amax(x, DimList{1}, true);  // (M, 1)
    sum_exp = sum(unary(OpId::Exp, sub(x, max)), DimList{1}, true);
    Tensor logp = sub(sub(x, max), unary(OpId::Log, sum_exp));
    Tensor onehot = one_hot_rows(t, classes);
    terms.target = t;
    terms.valid = cast(binary(OpId::Ne, t, Scalar(ignore_index)), dtype);
    Tensor w_t = weight ? sum(where(onehot, *weight, Scalar(int64_t{0})), DimList{1}) : Tensor();
    Tensor target_weight = weight ? mul(w_t, terms.valid) : terms.valid;  // what the mean divides by
    loss = mul(neg(sum(where(onehot, logp, Scalar(int64_t{0})), DimList{1})), target_weight);
    terms.a = smoothing > 0 ? mul(target_weight, Scalar(1.0 - smoothing)) : target_weight;
    if (smoothing > 0) {
      Tensor smooth = neg(sum(weight ? mul(logp, *weight) : logp, DimList{1}));
      loss = add(mul(loss, Scalar(1.0 - smoothing)), mul(mul(smooth, terms.valid), Scalar(smoothing / classes)));
      Tensor per_class = weight ? *weight : full(Dims{classes}, Scalar(1.0), dtype, placement_of(x));
      terms.b = mul(per_class, Scalar(smoothing / classes));
    }
    if (reduction == "mean") {
      denom = sum(target_weight);
      loss = div(sum(loss), denom);
    } else if (reduction == "sum") {
      loss = sum(loss);
    } else if (target_shaped) {
      loss = reshape(loss, target->sizes());
    }
  }
  // PyTorch's grad_fn: nll_loss's (nll_loss2d's for spatial inputs), the sum of the two terms
  // with smoothing; reduction='none' of a 3-d or 5-d+ input is a view of nll_loss2d's result.
  const char* name = smoothing > 0 ? "AddBackward0" : input->ndim() > 2 ? "NllLoss2DBackward0" : "NllLossBackward0";
  bool per_row = reduction == "none";
  record_composite(
      // The target and weight are saved as PyTorch's nll_loss saves them: written in place before
      // the backward, they make it raise (their version moved), though only copies are read.
      {name, {input.get(), target.get(), weight ? weight->get() : nullptr}, 0b111u, false,
       {max, sum_exp, denom, terms.target, terms.a, terms.valid, terms.b}},
      *loss,
      [per_row, in_shape, classes](const Tensor& g, const CompositeSaved& s) -> std::vector<Tensor> {
        const Tensor &max = s.extras[0], &sum_exp = s.extras[1], &denom = s.extras[2], &target = s.extras[3],
                     &a = s.extras[4], &valid = s.extras[5], &b = s.extras[6];
        Tensor x = classes_last(s.inputs[0]);
        Tensor onehot = one_hot_rows(target, classes);
        // coef_i: the loss's gradient reaching row i (its share of the mean).
        Tensor coef = per_row ? reshape(g, Dims{-1}) : denom ? div(g, denom) : g;
        // dlogp = -coef_i (a_i onehot + valid_i b); its row sum -coef_i (a_i + valid_i sum(b)).
        Tensor dlogp = mul(where(onehot, unsqueeze(a, 1), Scalar(int64_t{0})), Scalar(int64_t{-1}));
        Tensor row_sum = neg(a);
        if (b) {
          dlogp = sub(dlogp, mul(unsqueeze(valid, 1), b));
          row_sum = sub(row_sum, mul(valid, sum(b)));
        }
        Tensor c = per_row ? unsqueeze(coef, 1) : coef;
        Tensor p = s.recompute() ? softmax(x, 1) : div(unary(OpId::Exp, sub(x, max)), sum_exp);
        Tensor dx = mul(c, sub(dlogp, mul(p, unsqueeze(row_sum, 1))));
        return {classes_back(dx, in_shape), Tensor(), Tensor()};
      });
  if (per_row && !target_shaped) loss = view(loss, target->sizes());
  return loss;
}

}  // namespace loom::ops
