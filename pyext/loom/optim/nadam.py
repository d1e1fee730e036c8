"""NAdam (Dozat, 2016: Adam with Nesterov momentum), as torch.optim.NAdam; the update is
loom._C._optimizer_step("nadam", ...). mu_product (the product of the momentum coefficients) is a number in each
parameter's state; PyTorch keeps a 0-d tensor and reads it every step."""

import loom
from loom import _C
from loom.optim._checks import check_betas, check_eps, check_lr, check_weight_decay
from loom.optim.optimizer import Optimizer


class NAdam(Optimizer):
    """decoupled_weight_decay (NAdamW) and maximize are PyTorch 2's additions."""

    _scalar_state = ("step", "mu_product")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3, *,
                 decoupled_weight_decay=False, foreach=None, maximize=False, capturable=False, differentiable=False):
        check_lr(lr)
        check_eps(eps)
        check_betas(betas)
        check_weight_decay(weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize, capturable=capturable,
                                      differentiable=differentiable))

    def _step_group(self, group, params):
        states = self._states(params, lambda p: {"step": 0, "mu_product": 1.0, "exp_avg": loom.zeros_like(p),
                                                 "exp_avg_sq": loom.zeros_like(p)})
        _C._optimizer_step("nadam", self, group, params, states)
