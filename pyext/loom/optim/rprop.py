"""Rprop (Riedmiller and Braun, 1993: steps by the gradient's sign, with per-element step sizes
that grow while the sign holds and shrink when it flips), as torch.optim.Rprop; the update is
loom._C._optimizer_step("rprop", ...)."""

import loom
from loom import _C
from loom.optim._checks import check_lr
from loom.optim.optimizer import Optimizer


class Rprop(Optimizer):
    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, foreach=None, maximize=False,
                 differentiable=False, capturable=False):
        check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    def _step_group(self, group, params):
        lr = group["lr"]
        states = self._states(params, lambda p: {"step": 0, "prev": loom.zeros_like(p),
                                                 "step_size": loom.full_like(p, lr)})
        _C._optimizer_step("rprop", self, group, params, states)
