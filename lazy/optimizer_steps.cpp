#include "lazy/optimizer_steps.h"

#include <cmath>

#include "lazy/dispatch.h"
#include "lazy/ops.h"
#include "runtime/error.h"

namespace loom::optim {
namespace {

Arg param(double v) { return Arg::param(Scalar(v)); }

void check_lengths(size_t n, std::initializer_list<size_t> others) {
  for (size_t m : others) LOOM_CHECK(m == n, Value, "optimizer step: lists of different lengths (", n, " and ", m, ")");
}

}  // namespace

void adam(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
          std::span<const Tensor> exp_avg_sqs, std::span<const Tensor> max_exp_avg_sqs, std::span<const int64_t> steps,
          const AdamOptions& o) {
  check_lengths(params.size(), {grads.size(), exp_avgs.size(), exp_avg_sqs.size(), steps.size()});
  if (o.amsgrad) check_lengths(params.size(), {max_exp_avg_sqs.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    TensorImpl& p = *params[i];
    Tensor grad = o.maximize ? ops::unary(OpId::Neg, grads[i]) : grads[i];
    if (o.weight_decay != 0) {
      if (o.decoupled_weight_decay) ops::mul_(p, param(1 - o.lr * o.weight_decay));
      else grad = ops::add(Arg(grad), Arg(ops::mul(Arg(params[i]), param(o.weight_decay))));
    }
    // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
    ops::mul_(*exp_avgs[i], param(o.beta1));
    ops::add_(*exp_avgs[i], Arg(ops::mul(Arg(grad), param(1 - o.beta1))));
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    ops::mul_(*exp_avg_sqs[i], param(o.beta2));
    ops::add_(*exp_avg_sqs[i], Arg(ops::mul(Arg(ops::mul(Arg(grad), param(1 - o.beta2))), Arg(grad))));
    auto step = static_cast<double>(steps[i]);
    double bias_correction1 = 1 - std::pow(o.beta1, step);
    double bias_correction2_sqrt = std::sqrt(1 - std::pow(o.beta2, step));
    double step_size = o.lr / bias_correction1;
    Tensor second = exp_avg_sqs[i];
    if (o.amsgrad) {
      ops::copy_(*max_exp_avg_sqs[i], ops::binary(OpId::Maximum, Arg(max_exp_avg_sqs[i]), Arg(exp_avg_sqs[i])));
      second = max_exp_avg_sqs[i];
    }
    // denom = (second.sqrt() / bias_correction2_sqrt).add_(eps)
    Tensor denom = ops::add(Arg(ops::div(Arg(ops::unary(OpId::Sqrt, second)), param(bias_correction2_sqrt))),
                            param(o.eps));
    // param.addcdiv_(exp_avg, denom, value=-step_size)
    ops::add_(p, Arg(ops::div(Arg(ops::mul(Arg(exp_avgs[i]), param(-step_size))), Arg(denom))));
  }
}

void sgd(std::span<const Tensor> params, std::span<const Tensor> grads, std::vector<Tensor>& momentum_buffers,
         const SgdOptions& o) {
  check_lengths(params.size(), {grads.size(), momentum_buffers.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor d_p = o.maximize ? ops::unary(OpId::Neg, grads[i]) : grads[i];
    // d_p.add(param, alpha=weight_decay)
    if (o.weight_decay != 0) d_p = ops::add(Arg(d_p), Arg(ops::mul(Arg(params[i]), param(o.weight_decay))));
    if (o.momentum != 0) {
      Tensor& buf = momentum_buffers[i];
      if (!buf || buf->is_errored()) {  // errored: made by a step whose sync failed (lazy/sync.h)
        buf = ops::clone(d_p);
      } else {
        // buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
        ops::mul_(*buf, param(o.momentum));
        ops::add_(*buf, Arg(ops::mul(Arg(d_p), param(1 - o.dampening))));
      }
      // nesterov: d_p.add(buf, alpha=momentum)
      d_p = o.nesterov ? ops::add(Arg(d_p), Arg(ops::mul(Arg(buf), param(o.momentum)))) : buf;
    }
    // param.add_(d_p, alpha=-lr)
    ops::add_(*params[i], Arg(ops::mul(Arg(d_p), param(-o.lr))));
  }
}

}  // namespace loom::optim
