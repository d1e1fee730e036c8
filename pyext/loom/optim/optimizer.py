"""The optimizer base class, as torch.optim.Optimizer.

Updates run under no_grad and in place, so parameters and optimizer state keep their storage
from step to step (DESIGN decision 5): in lazy mode the update joins the step's trace and a
replayed graph writes into the same memory every step. Hyperparameters reach the ops as Python
numbers, which are trace parameters: a learning-rate schedule never changes the trace.
"""

import copy

import loom


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = {}
        self.param_groups = []
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        for group in params:
            self.add_param_group(group)

    def add_param_group(self, group):
        group = dict(group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, loom.Tensor) else list(params)
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        for p in group["params"]:
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with loom.enable_grad():
                loss = closure()
        with loom.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._update(p, p.grad, group, self.state.setdefault(p, {}))
        return loss

    def _update(self, p, grad, group, state):
        raise NotImplementedError

    def state_dict(self):
        """{'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]}, as PyTorch."""
        index = {}
        groups = []
        for group in self.param_groups:
            g = {k: v for k, v in group.items() if k != "params"}
            g["params"] = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                g["params"].append(index[id(p)])
            groups.append(g)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    state[index[id(p)]] = dict(self.state[p])
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        by_index = {}
        for group, saved in zip(self.param_groups, groups):
            if len(group["params"]) != len(saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group")
            for p, i in zip(group["params"], saved["params"]):
                by_index[i] = p
            for k, v in saved.items():
                if k != "params":
                    group[k] = copy.deepcopy(v)
        self.state = {}
        for i, s in state_dict["state"].items():
            p = by_index[int(i)]
            restored = {}
            for k, v in s.items():
                restored[k] = v.to(p.device).to(p.dtype) if isinstance(v, loom.Tensor) and v.is_floating_point() else v
            self.state[p] = restored

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        return "\n".join(lines) + "\n)"
