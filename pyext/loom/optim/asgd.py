"""Averaged SGD (Polyak and Juditsky, 1992), as torch.optim.ASGD; the update is
loom._C._optimizer_step("asgd", ...). eta (the step size) and mu (the averaging weight) are numbers in each
parameter's state; PyTorch keeps 0-d tensors and reads them every step."""

import loom
from loom import _C
from loom.optim._checks import check_lr, check_weight_decay
from loom.optim.optimizer import Optimizer


class ASGD(Optimizer):
    _scalar_state = ("step", "eta", "mu")

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        check_lr(lr)
        check_weight_decay(weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _step_group(self, group, params):
        lr = float(group["lr"])
        states = self._states(params, lambda p: {"step": 0, "eta": lr, "mu": 1.0, "ax": loom.zeros_like(p)})
        _C._optimizer_step("asgd", self, group, params, states)
