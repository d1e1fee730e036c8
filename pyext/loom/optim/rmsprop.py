"""RMSprop (Hinton), centered (Graves, 2013) and with momentum, as torch.optim.RMSprop; the
update is loom._C._optimizer_step("rmsprop", ...)."""

import loom
from loom import _C
from loom.optim._checks import check_eps, check_lr, check_momentum, check_weight_decay
from loom.optim.optimizer import Optimizer


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 foreach=None, maximize=False, differentiable=False):
        check_lr(lr)
        check_eps(eps)
        check_momentum(momentum)
        check_weight_decay(weight_decay)
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                                      weight_decay=weight_decay, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable))

    def _step_group(self, group, params):
        momentum, centered = float(group["momentum"]), bool(group["centered"])

        def init(p):
            state = {"step": 0, "square_avg": loom.zeros_like(p)}
            if momentum > 0:
                state["momentum_buffer"] = loom.zeros_like(p)
            if centered:
                state["grad_avg"] = loom.zeros_like(p)
            return state

        states = self._states(params, init)
        for p, s in zip(params, states):  # a momentum or centering switched on after the first step
            if momentum > 0:
                s.setdefault("momentum_buffer", loom.zeros_like(p))
            if centered:
                s.setdefault("grad_avg", loom.zeros_like(p))
        _C._optimizer_step("rmsprop", self, group, params, states)
