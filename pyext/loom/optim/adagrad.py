"""Adagrad (Duchi et al., 2011), as torch.optim.Adagrad; the update is loom._C._optimizer_step("adagrad", ...).
As in PyTorch, each parameter's state exists from construction (share_memory() can reach it)."""

import loom
from loom import _C
from loom.optim._checks import check_eps, check_lr, check_weight_decay
from loom.optim.optimizer import Optimizer


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False):
        check_lr(lr)
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        check_weight_decay(weight_decay)
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        check_eps(eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p, group):
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["sum"] = loom.full_like(p, group["initial_accumulator_value"])

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        if hasattr(self, "state"):  # after __init__: a group added later gets its state now too
            for p in self.param_groups[-1]["params"]:
                self._init_state(p, self.param_groups[-1])

    def share_memory(self):
        """Accepted: loom tensors live in this process."""

    def _step_group(self, group, params):
        for p in params:
            self._init_state(p, group)
        _C._optimizer_step("adagrad", self, group, params, [self.state[p] for p in params])
