#include "lazy/optimizer_steps.h"

#include <algorithm>
#include <cmath>

#include "lazy/dispatch.h"
#include "lazy/ops.h"
#include "runtime/error.h"

namespace loom::optim {
namespace {

// A hyperparameter: always a trace parameter, never folded into the trace (see the header).
Arg param(double v) { return Arg::param(Scalar(v)); }

// Short names for the op forms the rules are written in; each is one op of PyTorch's formula.
Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(Arg(a), Arg(b)); }
Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(Arg(a), Arg(b)); }
Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(Arg(a), Arg(b)); }
Tensor scaled(const Tensor& a, double v) { return ops::mul(Arg(a), param(v)); }
Tensor plus(const Tensor& a, double v) { return ops::add(Arg(a), param(v)); }
Tensor over(const Tensor& a, double v) { return ops::div(Arg(a), param(v)); }
Tensor sqrt(const Tensor& a) { return ops::unary(OpId::Sqrt, a); }

void check_lengths(size_t n, std::initializer_list<size_t> others) {
  for (size_t m : others) LOOM_CHECK(m == n, Value, "optimizer step: lists of different lengths (", n, " and ", m, ")");
}

// The gradient a rule works with: negated to maximize, plus weight_decay * param (L2 decay).
Tensor direction(const Tensor& grad, const Tensor& param, bool maximize, double weight_decay) {
  Tensor d = maximize ? ops::unary(OpId::Neg, grad) : grad;
  return weight_decay != 0 ? d + scaled(param, weight_decay) : d;
}

// state.mul_(decay).add_(value * (1 - decay)): an exponential moving average, in place.
void ema_(const Tensor& state, const Tensor& value, double decay) {
  ops::mul_(*state, param(decay));
  ops::add_(*state, Arg(scaled(value, 1 - decay)));
}

// state.mul_(decay).addcmul_(value, value, value=1 - decay): the moving average of the square.
void ema_square_(const Tensor& state, const Tensor& value, double decay) {
  ops::mul_(*state, param(decay));
  ops::add_(*state, Arg(scaled(value, 1 - decay) * value));
}

// param.addcdiv_(num, den, value=-step): a step of size `step` along num / den.
void step_along_(const Tensor& p, const Tensor& num, const Tensor& den, double step) {
  ops::add_(*p, Arg(scaled(num, -step) / den));
}

}  // namespace

void adam(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
          std::span<const Tensor> exp_avg_sqs, std::span<const Tensor> max_exp_avg_sqs, std::span<const int64_t> steps,
          const AdamOptions& o) {
  check_lengths(params.size(), {grads.size(), exp_avgs.size(), exp_avg_sqs.size(), steps.size()});
  if (o.amsgrad) check_lengths(params.size(), {max_exp_avg_sqs.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    if (o.decoupled_weight_decay && o.weight_decay != 0) ops::mul_(*params[i], param(1 - o.lr * o.weight_decay));
    Tensor grad = direction(grads[i], params[i], o.maximize, o.decoupled_weight_decay ? 0 : o.weight_decay);
    ema_(exp_avgs[i], grad, o.beta1);
    ema_square_(exp_avg_sqs[i], grad, o.beta2);
    auto step = static_cast<double>(steps[i]);
    double bias_correction1 = 1 - std::pow(o.beta1, step);
    double bias_correction2_sqrt = std::sqrt(1 - std::pow(o.beta2, step));
    Tensor second = exp_avg_sqs[i];
    if (o.amsgrad) {
      ops::copy_(*max_exp_avg_sqs[i], ops::binary(OpId::Maximum, Arg(max_exp_avg_sqs[i]), Arg(exp_avg_sqs[i])));
      second = max_exp_avg_sqs[i];
    }
    // denom = (second.sqrt() / bias_correction2_sqrt).add_(eps)
    Tensor denom = plus(over(sqrt(second), bias_correction2_sqrt), o.eps);
    step_along_(params[i], exp_avgs[i], denom, o.lr / bias_correction1);
  }
}

void sgd(std::span<const Tensor> params, std::span<const Tensor> grads, std::vector<Tensor>& momentum_buffers,
         const SgdOptions& o) {
  check_lengths(params.size(), {grads.size(), momentum_buffers.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor d_p = direction(grads[i], params[i], o.maximize, o.weight_decay);
    if (o.momentum != 0) {
      Tensor& buf = momentum_buffers[i];
      if (!buf || buf->is_errored()) {  // errored: made by a step whose sync failed (lazy/sync.h)
        buf = ops::clone(d_p);
      } else {
        // buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
        ops::mul_(*buf, param(o.momentum));
        ops::add_(*buf, Arg(scaled(d_p, 1 - o.dampening)));
      }
      // nesterov: d_p.add(buf, alpha=momentum)
      d_p = o.nesterov ? d_p + scaled(buf, o.momentum) : buf;
    }
    // param.add_(d_p, alpha=-lr)
    ops::add_(*params[i], Arg(scaled(d_p, -o.lr)));
  }
}

void adadelta(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> square_avgs,
              std::span<const Tensor> acc_deltas, const AdadeltaOptions& o) {
  check_lengths(params.size(), {grads.size(), square_avgs.size(), acc_deltas.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor grad = direction(grads[i], params[i], o.maximize, o.weight_decay);
    ema_square_(square_avgs[i], grad, o.rho);
    // delta = (acc_delta + eps).sqrt() / (square_avg + eps).sqrt() * grad
    Tensor delta = sqrt(plus(acc_deltas[i], o.eps)) / sqrt(plus(square_avgs[i], o.eps)) * grad;
    ema_square_(acc_deltas[i], delta, o.rho);
    ops::add_(*params[i], Arg(scaled(delta, -o.lr)));
  }
}

void adagrad(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> state_sums,
             std::span<const int64_t> steps, const AdagradOptions& o) {
  check_lengths(params.size(), {grads.size(), state_sums.size(), steps.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor grad = direction(grads[i], params[i], o.maximize, o.weight_decay);
    double clr = o.lr / (1 + static_cast<double>(steps[i] - 1) * o.lr_decay);
    ops::add_(*state_sums[i], Arg(grad * grad));
    step_along_(params[i], grad, plus(sqrt(state_sums[i]), o.eps), clr);
  }
}

void rmsprop(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> square_avgs,
             std::span<const Tensor> grad_avgs, std::span<const Tensor> momentum_buffers, const RmspropOptions& o) {
  check_lengths(params.size(), {grads.size(), square_avgs.size()});
  if (o.centered) check_lengths(params.size(), {grad_avgs.size()});
  if (o.momentum > 0) check_lengths(params.size(), {momentum_buffers.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor grad = direction(grads[i], params[i], o.maximize, o.weight_decay);
    ema_square_(square_avgs[i], grad, o.alpha);
    Tensor avg;
    if (o.centered) {
      ema_(grad_avgs[i], grad, o.alpha);
      // square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt()
      avg = sqrt(square_avgs[i] + scaled(grad_avgs[i], -1) * grad_avgs[i]);
    } else {
      avg = sqrt(square_avgs[i]);
    }
    avg = plus(avg, o.eps);
    if (o.momentum > 0) {
      // buf.mul_(momentum).addcdiv_(grad, avg); param.add_(buf, alpha=-lr)
      ops::mul_(*momentum_buffers[i], param(o.momentum));
      ops::add_(*momentum_buffers[i], Arg(grad / avg));
      ops::add_(*params[i], Arg(scaled(momentum_buffers[i], -o.lr)));
    } else {
      step_along_(params[i], grad, avg, o.lr);
    }
  }
}

void adamax(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
            std::span<const Tensor> exp_infs, std::span<const int64_t> steps, const AdamaxOptions& o) {
  check_lengths(params.size(), {grads.size(), exp_avgs.size(), exp_infs.size(), steps.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor grad = direction(grads[i], params[i], o.maximize, o.weight_decay);
    ema_(exp_avgs[i], grad, o.beta1);
    // exp_inf = max(exp_inf * beta2, |grad| + eps)
    ops::copy_(*exp_infs[i], ops::binary(OpId::Maximum, Arg(scaled(exp_infs[i], o.beta2)),
                                         Arg(plus(ops::unary(OpId::Abs, grad), o.eps))));
    double clr = o.lr / (1 - std::pow(o.beta1, static_cast<double>(steps[i])));
    step_along_(params[i], exp_avgs[i], exp_infs[i], clr);
  }
}

void nadam(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
           std::span<const Tensor> exp_avg_sqs, std::span<double> mu_products, std::span<const int64_t> steps,
           const NadamOptions& o) {
  check_lengths(params.size(), {grads.size(), exp_avgs.size(), exp_avg_sqs.size(), mu_products.size(), steps.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    auto step = static_cast<double>(steps[i]);
    double bias_correction2 = 1 - std::pow(o.beta2, step);
    if (o.decoupled_weight_decay && o.weight_decay != 0) ops::mul_(*params[i], param(1 - o.lr * o.weight_decay));
    Tensor grad = direction(grads[i], params[i], o.maximize, o.decoupled_weight_decay ? 0 : o.weight_decay);
    // the momentum coefficients of this step and the next (Dozat's schedule)
    double mu = o.beta1 * (1 - 0.5 * std::pow(0.96, step * o.momentum_decay));
    double mu_next = o.beta1 * (1 - 0.5 * std::pow(0.96, (step + 1) * o.momentum_decay));
    mu_products[i] *= mu;
    ema_(exp_avgs[i], grad, o.beta1);
    ema_square_(exp_avg_sqs[i], grad, o.beta2);
    Tensor denom = plus(sqrt(over(exp_avg_sqs[i], bias_correction2)), o.eps);
    step_along_(params[i], grad, denom, o.lr * (1 - mu) / (1 - mu_products[i]));
    step_along_(params[i], exp_avgs[i], denom, o.lr * mu_next / (1 - mu_products[i] * mu_next));
  }
}

void radam(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
           std::span<const Tensor> exp_avg_sqs, std::span<const int64_t> steps, const RadamOptions& o) {
  check_lengths(params.size(), {grads.size(), exp_avgs.size(), exp_avg_sqs.size(), steps.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    auto step = static_cast<double>(steps[i]);
    double bias_correction1 = 1 - std::pow(o.beta1, step);
    double bias_correction2 = 1 - std::pow(o.beta2, step);
    if (o.decoupled_weight_decay && o.weight_decay != 0) ops::mul_(*params[i], param(1 - o.lr * o.weight_decay));
    Tensor grad = direction(grads[i], params[i], o.maximize, o.decoupled_weight_decay ? 0 : o.weight_decay);
    ema_(exp_avgs[i], grad, o.beta1);
    ema_square_(exp_avg_sqs[i], grad, o.beta2);
    Tensor update = scaled(over(exp_avgs[i], bias_correction1), o.lr);
    // the length of the approximated simple moving average, and its limit
    double rho_inf = 2 / (1 - o.beta2) - 1;
    double rho_t = rho_inf - 2 * step * std::pow(o.beta2, step) / bias_correction2;
    if (rho_t > 5) {  // the variance is tractable: rectify the adaptive step
      double rect = std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
      Tensor adaptive_lr = ops::div(param(std::sqrt(bias_correction2)), Arg(plus(sqrt(exp_avg_sqs[i]), o.eps)));
      update = scaled(update * adaptive_lr, rect);
    }
    ops::sub_(*params[i], Arg(update));
  }
}

void asgd(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> axs,
          std::span<double> etas, std::span<double> mus, std::span<const int64_t> steps, const AsgdOptions& o) {
  check_lengths(params.size(), {grads.size(), axs.size(), etas.size(), mus.size(), steps.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor grad = direction(grads[i], params[i], o.maximize, o.weight_decay);
    ops::mul_(*params[i], param(1 - o.lambd * etas[i]));
    ops::add_(*params[i], Arg(scaled(grad, -etas[i])));
    if (mus[i] != 1) {
      // ax.add_(param.sub(ax).mul(mu))
      ops::add_(*axs[i], Arg(scaled(ops::sub(Arg(params[i]), Arg(axs[i])), mus[i])));
    } else {
      ops::copy_(*axs[i], params[i]);
    }
    auto step = static_cast<double>(steps[i]);
    etas[i] = o.lr / std::pow(1 + o.lambd * o.lr * step, o.alpha);
    mus[i] = 1 / std::max(1.0, step - o.t0);
  }
}

void rprop(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> prevs,
           std::span<const Tensor> step_sizes, const RpropOptions& o) {
  check_lengths(params.size(), {grads.size(), prevs.size(), step_sizes.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor grad = o.maximize ? ops::unary(OpId::Neg, grads[i]) : grads[i];
    // the sign of grad * prev picks the step size's factor: etaplus, etaminus, or 1 at a zero
    Tensor agreement = ops::unary(OpId::Sign, grad * prevs[i]);
    Tensor increasing = ops::binary(OpId::Gt, Arg(agreement), Scalar(int64_t{0}));
    Tensor reversing = ops::binary(OpId::Lt, Arg(agreement), Scalar(int64_t{0}));
    // (agreement * etaplus where it is 1 and agreement * -etaminus where it is -1 keep the
    // factor in the gradient's dtype, as PyTorch's sign tensor is)
    Tensor factor = ops::where(increasing, Arg(scaled(agreement, o.etaplus)),
                               Arg(ops::where(reversing, Arg(scaled(agreement, -o.etaminus)), Scalar(1.0))));
    ops::copy_(*step_sizes[i], ops::clamp(step_sizes[i] * factor, param(o.step_size_min), param(o.step_size_max)));
    // after a sign change the gradient counts as 0: no step now, and no sign to compare next time
    grad = ops::where(reversing, Scalar(0.0), Arg(grad));
    ops::sub_(*params[i], Arg(ops::unary(OpId::Sign, grad) * step_sizes[i]));
    ops::copy_(*prevs[i], grad);
  }
}

}  // namespace loom::optim
