"""Adam and AdamW, with PyTorch 1.13's update rules (single-tensor, non-fused form)."""

import math

import loom
from loom.optim.optimizer import Optimizer, add_scaled, scale_add_


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, maximize=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0 or not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameters: {betas}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    _decoupled = False  # AdamW decays the weights directly

    def _update(self, p, grad, group, state):
        if not state:
            state["step"] = 0
            state["exp_avg"] = loom.zeros_like(p)
            state["exp_avg_sq"] = loom.zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = loom.zeros_like(p)
        beta1, beta2 = (float(b) for b in group["betas"])
        lr, eps, wd = float(group["lr"]), float(group["eps"]), float(group["weight_decay"])
        grad = -grad if group["maximize"] else grad
        state["step"] += 1
        step = state["step"]
        lazy = p.is_lazy
        if wd != 0:
            if not self._decoupled:
                grad = add_scaled(grad, p, wd)
            elif lazy:
                p.mul_(-(1 - lr * wd)).neg_()  # p * (1 - lr * wd), exactly; the factor is never a folded 1
            else:
                p.mul_(1 - lr * wd)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        scale_add_(exp_avg, beta1, grad, 1 - beta1)
        if lazy:
            exp_avg_sq.mul_(-beta2).addcmul_(grad, grad, value=-(1 - beta2)).neg_()
        else:
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2_sqrt = math.sqrt(1 - beta2 ** step)
        step_size = lr / bias_correction1
        second = exp_avg_sq
        if group["amsgrad"]:
            second = state["max_exp_avg_sq"]
            second.copy_(loom.maximum(second, exp_avg_sq))
        if lazy:
            # p + (-step_size * exp_avg) / denom computed with -denom, so every number is negative:
            # bitwise the same, and the bias corrections reaching 1 (after ~10^4 steps) or the lr
            # reaching 0 never fold into the trace.
            neg_denom = second.sqrt().div(-bias_correction2_sqrt).add(-eps)
            p.sub_(exp_avg.mul(-step_size).div(neg_denom))
        else:
            denom = (second.sqrt() / bias_correction2_sqrt).add_(eps)
            p.addcdiv_(exp_avg, denom, value=-step_size)


class AdamW(Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)

    _decoupled = True
