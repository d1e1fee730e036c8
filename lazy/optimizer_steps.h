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
#pragma once

#include <span>
#include <vector>

#include "lazy/tensor.h"

namespace loom::optim {

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

}  // namespace loom::optim
