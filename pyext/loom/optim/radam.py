"""RAdam (Liu et al., 2019: Adam with a rectified adaptive step), as torch.optim.RAdam; the
update is loom._C._optimizer_step("radam", ...). Its first steps (while the variance estimate is intractable) are
plain momentum steps: a different trace for those few steps, as PyTorch takes a different path."""

import loom
from loom import _C
from loom.optim._checks import check_betas, check_eps, check_lr, check_weight_decay
from loom.optim.optimizer import Optimizer


class RAdam(Optimizer):
    """decoupled_weight_decay and maximize are PyTorch 2's additions."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, *,
                 decoupled_weight_decay=False, foreach=None, maximize=False, capturable=False, differentiable=False):
        check_lr(lr)
        check_eps(eps)
        check_betas(betas)
        check_weight_decay(weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay, foreach=foreach,
                                      maximize=maximize, capturable=capturable, differentiable=differentiable))

    def _step_group(self, group, params):
        states = self._states(params, lambda p: {"step": 0, "exp_avg": loom.zeros_like(p),
                                                 "exp_avg_sq": loom.zeros_like(p)})
        _C._optimizer_step("radam", self, group, params, states)
