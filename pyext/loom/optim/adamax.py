"""Adamax (Kingma and Ba, 2015: Adam with the infinity norm), as torch.optim.Adamax; the update
is loom._C._optimizer_step("adamax", ...)."""

import loom
from loom import _C
from loom.optim._checks import check_betas, check_eps, check_lr, check_weight_decay
from loom.optim.optimizer import Optimizer


class Adamax(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False):
        check_lr(lr)
        check_eps(eps)
        check_betas(betas)
        check_weight_decay(weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    def _step_group(self, group, params):
        states = self._states(params, lambda p: {"step": 0, "exp_avg": loom.zeros_like(p),
                                                 "exp_inf": loom.zeros_like(p)})
        _C._optimizer_step("adamax", self, group, params, states)
