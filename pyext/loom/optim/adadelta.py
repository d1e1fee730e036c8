"""Adadelta (Zeiler, 2012), as torch.optim.Adadelta; the update is loom._C._optimizer_step("adadelta", ...)."""

import loom
from loom import _C
from loom.optim._checks import check_eps, check_lr, check_weight_decay
from loom.optim.optimizer import Optimizer


class Adadelta(Optimizer):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, maximize=False,
                 differentiable=False):
        check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_eps(eps)
        check_weight_decay(weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      foreach=foreach, differentiable=differentiable))

    def _step_group(self, group, params):
        states = self._states(params, lambda p: {"step": 0, "square_avg": loom.zeros_like(p),
                                                 "acc_delta": loom.zeros_like(p)})
        _C._optimizer_step("adadelta", self, group, params, states)
