"""Adam and AdamW, with PyTorch's update rules (single-tensor, non-fused form)."""

import math

import loom
from loom.optim.optimizer import Optimizer


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
        beta1, beta2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        grad = -grad if group["maximize"] else grad
        state["step"] += 1
        step = state["step"]
        if wd != 0:
            if self._decoupled:
                p.mul_(1 - lr * wd)
            else:
                grad = grad + wd * p
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2_sqrt = math.sqrt(1 - beta2 ** step)
        if group["amsgrad"]:
            max_sq = state["max_exp_avg_sq"]
            max_sq.copy_(loom.maximum(max_sq, exp_avg_sq))
            denom = max_sq.sqrt() / bias_correction2_sqrt + eps
        else:
            denom = exp_avg_sq.sqrt() / bias_correction2_sqrt + eps
        p.addcdiv_(exp_avg, denom, value=-(lr / bias_correction1))


class AdamW(Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)

    _decoupled = True
