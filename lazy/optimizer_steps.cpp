#include "lazy/optimizer_steps.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "lazy/capture.h"
#include "lazy/dispatch.h"
#include "lazy/ops.h"
#include "runtime/error.h"

namespace loom::optim {
namespace {

// Note [Optimizer numbers] (optimizer_steps.h): the list being made, under NumbersOnly.
thread_local Numbers* numbers_only = nullptr;

// Under NumbersOnly an op records nothing: it is listed and returns a tensor of its operands
// (never read: the rules branch on options only). The ids only tell the ops apart.
bool skip(OpId op) {
  if (!numbers_only) [[likely]] return false;
  numbers_only->ops.push_back(static_cast<uint16_t>(op));
  return true;
}
Tensor any(const Arg& a, const Arg& b = Arg(0.0)) { return a.is_tensor() ? a.tensor : b.tensor; }

// A hyperparameter: always a trace parameter, never folded into the trace (see the header).
// Every number of a rule goes through here, in the rule's order.
Arg param(double v) {
  if (numbers_only) {
    numbers_only->values.push_back(v);
    return Arg::param(Scalar(v));
  }
  Scalar s(v);
  if (StepRecording* r = recording()) [[unlikely]]
    s = s.with_source(r->optimizer_number(v));  // lazy/capture.h
  return Arg::param(s);
}

// The ops the rules are written in, each one op of PyTorch's formula.
Tensor add(const Arg& a, const Arg& b) { return skip(OpId::Add) ? any(a, b) : ops::add(a, b); }
Tensor sub(const Arg& a, const Arg& b) { return skip(OpId::Sub) ? any(a, b) : ops::sub(a, b); }
Tensor mul(const Arg& a, const Arg& b) { return skip(OpId::Mul) ? any(a, b) : ops::mul(a, b); }
Tensor div(const Arg& a, const Arg& b) { return skip(OpId::Div) ? any(a, b) : ops::div(a, b); }
Tensor binary(OpId op, const Arg& a, const Arg& b) { return skip(op) ? any(a, b) : ops::binary(op, a, b); }
Tensor unary(OpId op, const Tensor& a) { return skip(op) ? a : ops::unary(op, a); }
Tensor where(const Tensor& c, const Arg& a, const Arg& b) { return skip(OpId::Where) ? c : ops::where(c, a, b); }
Tensor clamp(const Tensor& x, const Arg& lo, const Arg& hi) { return skip(OpId::Maximum) ? x : ops::clamp(x, lo, hi); }
Tensor clone(const Tensor& x) { return skip(OpId::Cast) ? x : ops::clone(x); }
void add_(const Tensor& t, const Arg& v) {
  if (!skip(OpId::Add)) ops::add_(*t, v);
}
void sub_(const Tensor& t, const Arg& v) {
  if (!skip(OpId::Sub)) ops::sub_(*t, v);
}
void mul_(const Tensor& t, const Arg& v) {
  if (!skip(OpId::Mul)) ops::mul_(*t, v);
}
void copy_(const Tensor& t, const Tensor& v) {
  if (!skip(OpId::Full)) ops::copy_(*t, v);
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(Arg(a), Arg(b)); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(Arg(a), Arg(b)); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(Arg(a), Arg(b)); }
Tensor scaled(const Tensor& a, double v) { return mul(Arg(a), param(v)); }
Tensor plus(const Tensor& a, double v) { return add(Arg(a), param(v)); }
Tensor over(const Tensor& a, double v) { return div(Arg(a), param(v)); }
Tensor sqrt(const Tensor& a) { return unary(OpId::Sqrt, a); }

// Note [Fused updates]
//
// The rules' in-place updates are the fused ops of lazy/elementwise.h (AddScaled, EmaUpdate,
// EmaSquareUpdate, StepAlong, AdamUpdate) where the tensors are float32 or float64 and agree in
// dtype and shape: one recorded node per written tensor instead of PyTorch's two to five ops,
// the same operations in the same order in the same compute type, so the values are the same
// bits (lazy, fused or not, and eager). AdamW's step records 3 nodes a parameter instead of 14
// (the host cost of a small model's step, BENCH mlp). float16 / bfloat16 tensors take the
// rules op by op, since PyTorch rounds each op's result to their dtype. Under NumbersOnly the
// tensors are the parameters standing for all, so the choice follows the parameter's dtype;
// a recorded update whose state disagrees with it takes the other path, which a replay then
// finds as a different list of ops (a failed guard, never a wrong replay).
thread_local bool fused_updates = true;

bool fuses(const Tensor& p, std::initializer_list<const Tensor*> others) {
  if (!fused_updates) [[unlikely]] return false;
  DType d = p->dtype();
  if (d != DType::Float32 && d != DType::Float64) return false;
  for (const Tensor* t : others)
    if (t && *t && ((*t)->dtype() != d || !std::ranges::equal((*t)->sizes(), p->sizes()))) return false;
  return true;
}

// A fused op's value (its first operand stands for it under NumbersOnly).
Tensor fused(OpId op, std::initializer_list<Arg> args) { return skip(op) ? any(*args.begin()) : apply(op, args); }

// t = op(args) in place, where the first of args is t: one recorded write. PyTorch's rule writes
// t `writes` times (exp_avg.mul_(beta1).add_(grad, ...): twice), so its version counter moves as
// many steps and Tensor._version reads as in PyTorch.
void fused_(OpId op, const Tensor& t, std::initializer_list<Arg> args, int writes) {
  if (skip(op)) return;
  check_no_internal_overlap(*t);
  update(*t, [&] { return apply(op, args); });
  for (int i = 1; i < writes; ++i) t->bump_version();
}

void check_lengths(size_t n, std::initializer_list<size_t> others) {
  for (size_t m : others) LOOM_CHECK(m == n, Value, "optimizer step: lists of different lengths (", n, " and ", m, ")");
}

// The gradient a rule works with: negated to maximize, plus weight_decay * param (L2 decay).
Tensor direction(const Tensor& grad, const Tensor& param, bool maximize, double weight_decay) {
  Tensor d = maximize ? unary(OpId::Neg, grad) : grad;
  if (weight_decay == 0) return d;
  if (fuses(param, {&d})) return fused(OpId::AddScaled, {Arg(d), Arg(param), loom::optim::param(weight_decay)});
  return d + scaled(param, weight_decay);
}

// state.mul_(decay).add_(value, alpha=weight): an exponential moving average, in place
// (weight = 1 - decay) or SGD's momentum buffer (weight = 1 - dampening).
void ema_(const Tensor& state, const Tensor& value, double decay, double weight) {
  if (fuses(state, {&value})) {
    fused_(OpId::EmaUpdate, state, {Arg(state), Arg(value), param(decay), param(weight)}, 2);
    return;
  }
  mul_(state, param(decay));
  add_(state, Arg(scaled(value, weight)));
}
void ema_(const Tensor& state, const Tensor& value, double decay) { ema_(state, value, decay, 1 - decay); }

// state.mul_(decay).addcmul_(value, value, value=1 - decay): the moving average of the square.
void ema_square_(const Tensor& state, const Tensor& value, double decay) {
  if (fuses(state, {&value})) {
    fused_(OpId::EmaSquareUpdate, state, {Arg(state), Arg(value), param(decay), param(1 - decay)}, 2);
    return;
  }
  mul_(state, param(decay));
  add_(state, Arg(scaled(value, 1 - decay) * value));
}

// param.addcdiv_(num, den, value=-step): a step of size `step` along num / den.
void step_along_(const Tensor& p, const Tensor& num, const Tensor& den, double step) {
  if (fuses(p, {&num, &den})) {
    fused_(OpId::StepAlong, p, {Arg(p), Arg(num), Arg(den), param(-step)}, 1);
    return;
  }
  add_(p, Arg(scaled(num, -step) / den));
}

// param.add_(d_p, alpha=-lr) (SGD's step, ASGD's).
void add_scaled_(const Tensor& p, const Tensor& d_p, double alpha) {
  if (fuses(p, {&d_p})) {
    fused_(OpId::AddScaled, p, {Arg(p), Arg(d_p), param(alpha)}, 1);
    return;
  }
  add_(p, Arg(scaled(d_p, alpha)));
}

}  // namespace

NumbersOnly::NumbersOnly(Numbers& out) : previous_(numbers_only) {
  out = Numbers{};
  numbers_only = &out;
}

NumbersOnly::~NumbersOnly() { numbers_only = previous_; }

bool set_fused_updates(bool enabled) noexcept { return std::exchange(fused_updates, enabled); }

void adam(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
          std::span<const Tensor> exp_avg_sqs, std::span<const Tensor> max_exp_avg_sqs, std::span<const int64_t> steps,
          const AdamOptions& o) {
  check_lengths(params.size(), {grads.size(), exp_avgs.size(), exp_avg_sqs.size(), steps.size()});
  if (o.amsgrad) check_lengths(params.size(), {max_exp_avg_sqs.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    bool decays = o.decoupled_weight_decay && o.weight_decay != 0;
    // Note [Fused updates]: the parameter's update is one AdamUpdate, which also decays it.
    bool fuse = fuses(params[i], {&grads[i], &exp_avgs[i], &exp_avg_sqs[i], o.amsgrad ? &max_exp_avg_sqs[i] : nullptr});
    if (decays && !fuse) mul_(params[i], param(1 - o.lr * o.weight_decay));
    Tensor grad = direction(grads[i], params[i], o.maximize, o.decoupled_weight_decay ? 0 : o.weight_decay);
    ema_(exp_avgs[i], grad, o.beta1);
    ema_square_(exp_avg_sqs[i], grad, o.beta2);
    auto step = static_cast<double>(steps[i]);
    double bias_correction1 = 1 - std::pow(o.beta1, step);
    double bias_correction2_sqrt = std::sqrt(1 - std::pow(o.beta2, step));
    Tensor second = exp_avg_sqs[i];
    if (o.amsgrad) {
      copy_(max_exp_avg_sqs[i], binary(OpId::Maximum, Arg(max_exp_avg_sqs[i]), Arg(exp_avg_sqs[i])));
      second = max_exp_avg_sqs[i];
    }
    if (fuse) {
      // param.mul_(1 - lr * weight_decay) (AdamW; a factor of 1 otherwise, which changes no bit),
      // then the step below, as one write; the counter moves as PyTorch's two writes move it.
      fused_(OpId::AdamUpdate, params[i],
             {Arg(params[i]), Arg(exp_avgs[i]), Arg(second), param(decays ? 1 - o.lr * o.weight_decay : 1.0),
              param(-(o.lr / bias_correction1)), param(bias_correction2_sqrt), param(o.eps)},
             decays ? 2 : 1);
      continue;
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
        buf = clone(d_p);
      } else {
        // buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
        ema_(buf, d_p, o.momentum, 1 - o.dampening);
      }
      // nesterov: d_p.add(buf, alpha=momentum)
      if (!o.nesterov) d_p = buf;
      else if (fuses(d_p, {&buf})) d_p = fused(OpId::AddScaled, {Arg(d_p), Arg(buf), param(o.momentum)});
      else d_p = d_p + scaled(buf, o.momentum);
    }
    // param.add_(d_p, alpha=-lr)
    add_scaled_(params[i], d_p, -o.lr);
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
    add_scaled_(params[i], delta, -o.lr);
  }
}

void adagrad(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> state_sums,
             std::span<const int64_t> steps, const AdagradOptions& o) {
  check_lengths(params.size(), {grads.size(), state_sums.size(), steps.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor grad = direction(grads[i], params[i], o.maximize, o.weight_decay);
    double clr = o.lr / (1 + static_cast<double>(steps[i] - 1) * o.lr_decay);
    add_(state_sums[i], Arg(grad * grad));
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
      mul_(momentum_buffers[i], param(o.momentum));
      add_(momentum_buffers[i], Arg(grad / avg));
      add_scaled_(params[i], momentum_buffers[i], -o.lr);
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
    copy_(exp_infs[i],
          binary(OpId::Maximum, Arg(scaled(exp_infs[i], o.beta2)), Arg(plus(unary(OpId::Abs, grad), o.eps))));
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
    if (o.decoupled_weight_decay && o.weight_decay != 0) mul_(params[i], param(1 - o.lr * o.weight_decay));
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
    if (o.decoupled_weight_decay && o.weight_decay != 0) mul_(params[i], param(1 - o.lr * o.weight_decay));
    Tensor grad = direction(grads[i], params[i], o.maximize, o.decoupled_weight_decay ? 0 : o.weight_decay);
    ema_(exp_avgs[i], grad, o.beta1);
    ema_square_(exp_avg_sqs[i], grad, o.beta2);
    Tensor update = scaled(over(exp_avgs[i], bias_correction1), o.lr);
    // the length of the approximated simple moving average, and its limit
    double rho_inf = 2 / (1 - o.beta2) - 1;
    double rho_t = rho_inf - 2 * step * std::pow(o.beta2, step) / bias_correction2;
    if (rho_t > 5) {  // the variance is tractable: rectify the adaptive step
      double rect = std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
      Tensor adaptive_lr = div(param(std::sqrt(bias_correction2)), Arg(plus(sqrt(exp_avg_sqs[i]), o.eps)));
      update = scaled(update * adaptive_lr, rect);
    }
    sub_(params[i], Arg(update));
  }
}

void asgd(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> axs,
          std::span<double> etas, std::span<double> mus, std::span<const int64_t> steps, const AsgdOptions& o) {
  check_lengths(params.size(), {grads.size(), axs.size(), etas.size(), mus.size(), steps.size()});
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor grad = direction(grads[i], params[i], o.maximize, o.weight_decay);
    mul_(params[i], param(1 - o.lambd * etas[i]));
    add_scaled_(params[i], grad, -etas[i]);
    if (mus[i] != 1) {
      // ax.add_(param.sub(ax).mul(mu))
      add_(axs[i], Arg(scaled(sub(Arg(params[i]), Arg(axs[i])), mus[i])));
    } else {
      copy_(axs[i], params[i]);
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
    Tensor grad = o.maximize ? unary(OpId::Neg, grads[i]) : grads[i];
    // the sign of grad * prev picks the step size's factor: etaplus, etaminus, or 1 at a zero
    Tensor agreement = unary(OpId::Sign, grad * prevs[i]);
    Tensor increasing = binary(OpId::Gt, Arg(agreement), Scalar(int64_t{0}));
    Tensor reversing = binary(OpId::Lt, Arg(agreement), Scalar(int64_t{0}));
    // (agreement * etaplus where it is 1 and agreement * -etaminus where it is -1 keep the
    // factor in the gradient's dtype, as PyTorch's sign tensor is)
    Tensor factor = where(increasing, Arg(scaled(agreement, o.etaplus)),
                          Arg(where(reversing, Arg(scaled(agreement, -o.etaminus)), Scalar(1.0))));
    copy_(step_sizes[i], clamp(step_sizes[i] * factor, param(o.step_size_min), param(o.step_size_max)));
    // after a sign change the gradient counts as 0: no step now, and no sign to compare next time
    grad = where(reversing, Scalar(0.0), Arg(grad));
    sub_(params[i], Arg(unary(OpId::Sign, grad) * step_sizes[i]));
    copy_(prevs[i], grad);
  }
}

}  // namespace loom::optim
