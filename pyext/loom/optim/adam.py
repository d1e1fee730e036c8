"""Adam and AdamW, with PyTorch's update rules; the update itself is loom._C._optimizer_step("adam", ...)
(lazy/optimizer_steps.h), one call per parameter group."""

import loom
from loom import _C
from loom.optim._checks import check_betas, check_eps, check_lr, check_weight_decay
from loom.optim.optimizer import Optimizer


class Adam(Optimizer):
    """foreach, capturable, differentiable and fused are accepted: loom records one trace per
    group whichever is asked for, and a learning rate or step count is never a constant of it."""

    _decoupled = False  # AdamW decays the weights directly

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None):
        check_lr(lr)
        check_eps(eps)
        check_betas(betas)
        check_weight_decay(weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused))

    def _step_group(self, group, params):
        amsgrad = bool(group["amsgrad"])

        def init(p):
            state = {"step": 0, "exp_avg": loom.zeros_like(p), "exp_avg_sq": loom.zeros_like(p)}
            if amsgrad:
                state["max_exp_avg_sq"] = loom.zeros_like(p)
            return state

        states = self._states(params, init)
        if amsgrad:  # a state loaded from a run without amsgrad
            for p, s in zip(params, states):
                s.setdefault("max_exp_avg_sq", loom.zeros_like(p))
        _C._optimizer_step("adam", self, group, params, states)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter): param *= 1 - lr * weight_decay."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused)
