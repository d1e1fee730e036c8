// The update rules of loom.optim, written once in loom ops (so eager and lazy mode share them)
// and applied to a whole parameter group per call, as PyTorch's foreach implementations are:
// one call from Python records a group's update instead of a dozen Python-level ops per
// parameter.
//
// The formulas are PyTorch 1.13's single-tensor ones, op for op, so results agree with
// torch.optim bit for bit. Every hyperparameter enters as a trace parameter (Arg::param), never
// a folded constant: a schedule that drives the learning rate to 0, or bias corrections that
// reach 1, keeps the trace key and replays the compiled graph. What changes the trace is what
// changes PyTorch's code path: weight decay or momentum switching between zero and non-zero,
// amsgrad, nesterov, maximize.
//
// Note [Optimizer numbers]
//
// Every number a rule takes as a trace parameter goes through one function, in an order fixed
// by the rule's code and its options, so the numbers can be computed without recording: under
// NumbersOnly a rule records no op; it lists the numbers its ops would take (`values`, in that
// order), lists which ops it would record (`ops`), and returns, having updated the scalar
// state it updates (NAdam's mu_products, ASGD's etas and mus) as it would have. Tensors are not
// read then (any non-null tensor stands for each; null where the rule tests for a missing one,
// SGD's first momentum buffer). loom.compile recomputes a captured update's numbers that way at
// every replay, from the group's current hyperparameters and step counts, so a scheduled
// learning rate takes effect without a new capture; other ops (weight decay switched on: a
// different trace) are a failed guard. While a step is recorded for loom.compile, each
// number is tagged with its position in the list (lazy/capture.h).
#pragma once

#include <span>
#include <vector>

#include "lazy/tensor.h"

namespace loom::optim {

// What a rule's call takes without its tensors (Note [Optimizer numbers]).
struct Numbers {
  std::vector<double> values;
  std::vector<uint16_t> ops;  // the ops the rule would record, in order: its code path
};

// While it lives, the rules called on this thread fill `out` instead of recording ops.
class NumbersOnly {
 public:
  explicit NumbersOnly(Numbers& out);
  ~NumbersOnly();
  NumbersOnly(const NumbersOnly&) = delete;
  NumbersOnly& operator=(const NumbersOnly&) = delete;

 private:
  Numbers* previous_;
};

// Whether the rules record their fused updates (Note [Fused updates], optimizer_steps.cpp) on
// this thread: true unless turned off, which tests do to compare them with the rules op by op
// (loom._C._fused_optimizer_updates). Returns the previous setting.
bool set_fused_updates(bool enabled) noexcept;

struct AdamOptions {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;  // AdamW
  bool amsgrad, maximize;
};

// One Adam / AdamW step for each parameter i: params[i], exp_avgs[i], exp_avg_sqs[i] (and
// max_exp_avg_sqs[i] with amsgrad) are updated in place; steps[i] is the step number after
// this update (1 for the first).
void adam(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
          std::span<const Tensor> exp_avg_sqs, std::span<const Tensor> max_exp_avg_sqs, std::span<const int64_t> steps,
          const AdamOptions& options);

struct SgdOptions {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
};

// One SGD step. With momentum, momentum_buffers[i] is updated in place, or created (returned in
// its slot) on the first step, where it is null.
void sgd(std::span<const Tensor> params, std::span<const Tensor> grads, std::vector<Tensor>& momentum_buffers,
         const SgdOptions& options);

// The rules below follow the same conventions: state tensors are updated in place; `steps[i]` is
// the step number after this update (1 for the first); per-parameter scalar state (NAdam's
// mu_product, ASGD's eta and mu) lives in the caller as numbers, is read from the span and
// written back into it. Weight decay adds weight_decay * param to the gradient (L2) unless the
// rule says otherwise; maximize ascends (the gradient is negated first).

struct AdadeltaOptions {
  double lr, rho, eps, weight_decay;
  bool maximize;
};
void adadelta(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> square_avgs,
              std::span<const Tensor> acc_deltas, const AdadeltaOptions& options);

struct AdagradOptions {
  double lr, lr_decay, weight_decay, eps;
  bool maximize;
};
void adagrad(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> state_sums,
             std::span<const int64_t> steps, const AdagradOptions& options);

struct RmspropOptions {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered, maximize;
};
// grad_avgs is used only when centered, momentum_buffers only when momentum > 0.
void rmsprop(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> square_avgs,
             std::span<const Tensor> grad_avgs, std::span<const Tensor> momentum_buffers,
             const RmspropOptions& options);

struct AdamaxOptions {
  double lr, beta1, beta2, eps, weight_decay;
  bool maximize;
};
void adamax(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
            std::span<const Tensor> exp_infs, std::span<const int64_t> steps, const AdamaxOptions& options);

struct NadamOptions {
  double lr, beta1, beta2, eps, weight_decay, momentum_decay;
  bool decoupled_weight_decay, maximize;
};
// mu_products[i]: the product of the momentum coefficients so far (1 before the first step).
// The step sizes are Dozat's, as PyTorch >= 2.0 and PyTorch 1.13's foreach path compute them
// (1.13's single-tensor path multiplies one extra mu into the second, a bug fixed since).
void nadam(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
           std::span<const Tensor> exp_avg_sqs, std::span<double> mu_products, std::span<const int64_t> steps,
           const NadamOptions& options);

struct RadamOptions {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay, maximize;
};
void radam(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
           std::span<const Tensor> exp_avg_sqs, std::span<const int64_t> steps, const RadamOptions& options);

struct AsgdOptions {
  double lr, lambd, alpha, t0, weight_decay;
  bool maximize;
};
// etas[i] and mus[i]: the step size and averaging weight this step uses (lr and 1 at the
// start); they are replaced by the next step's.
void asgd(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> axs,
          std::span<double> etas, std::span<double> mus, std::span<const int64_t> steps, const AsgdOptions& options);

struct RpropOptions {
  double etaminus, etaplus, step_size_min, step_size_max;
  bool maximize;
};
void rprop(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> prevs,
           std::span<const Tensor> step_sizes, const RpropOptions& options);

}  // namespace loom::optim
