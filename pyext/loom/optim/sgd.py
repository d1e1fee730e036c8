"""SGD with momentum, dampening, Nesterov momentum and weight decay, as torch.optim.SGD; the
update itself is loom._C._optimizer_step("sgd", ...) (lazy/optimizer_steps.h), one call per parameter group."""

from loom import _C
from loom.optim._checks import check_lr, check_momentum, check_weight_decay
from loom.optim.optimizer import Optimizer


class SGD(Optimizer):
    """foreach and differentiable are accepted (loom records one trace per group either way)."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False,
                 foreach=None, differentiable=False, fused=None):
        check_lr(lr)
        check_momentum(momentum)
        check_weight_decay(weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _step_group(self, group, params):
        _C._optimizer_step("sgd", self, group, params, [self.state[p] for p in params])
