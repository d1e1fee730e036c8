"""The optimizer base class, as torch.optim.Optimizer.

Updates run under no_grad and in place, so parameters and optimizer state keep their storage
from step to step (DESIGN decision 5): in lazy mode the update joins the step's trace and a
replayed graph writes into the same memory every step.

Subclasses implement `_step_group(group, params)`, called with the parameters of a group that
have a gradient; the update rules themselves are C++ (lazy/optimizer_steps.h), one call per
group, where every hyperparameter is a trace parameter: a learning-rate schedule, or bias
corrections that reach 1, never change the trace. What does change the trace is what changes
PyTorch's code path: a weight decay or momentum switching between zero and non-zero, amsgrad,
nesterov, maximize.
"""

import copy

import loom


def _rebuild(sequence, items):
    """A list or tuple (named tuples included) like `sequence`, holding `items`."""
    if isinstance(sequence, tuple) and hasattr(sequence, "_fields"):
        return type(sequence)(*items)
    return type(sequence)(items)


def _copy_state(value):
    """A deep copy of optimizer state: tensors cloned (detached), containers rebuilt."""
    if isinstance(value, loom.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _copy_state(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return _rebuild(value, [_copy_state(v) for v in value])
    return copy.deepcopy(value)


def _cast_state(param, value, key=None):
    """A loaded state value for `param`, as PyTorch's Optimizer.load_state_dict casts it: tensors
    (except a 'step') to the parameter's device, and to its dtype when the parameter is floating;
    always a new tensor, never the loaded one."""
    if isinstance(value, loom.Tensor):
        out = source = value.detach()
        if key != "step":
            if param.is_floating_point():
                out = out.to(param.dtype)
            out = out.to(param.device)
        # to() returns its input when nothing changes (and copies otherwise): the state must not
        # share memory with the source
        return out.clone() if out is source else out
    if isinstance(value, dict):
        return {k: _cast_state(param, v, key=k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return _rebuild(value, [_cast_state(param, v) for v in value])
    return copy.deepcopy(value)


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
        loom.autograd._zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with loom.enable_grad():
                loss = closure()
        with loom.no_grad():
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                if params:
                    self._step_group(group, params)
        return loss

    def _step_group(self, group, params):
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
        """Loads a state_dict() of an optimizer over the same parameter groups, as PyTorch: the
        loaded state is copied (this optimizer never shares a tensor with the source, which can
        keep training) and cast to each parameter's device and floating dtype; the groups'
        hyperparameters are the saved ones."""
        groups = self.param_groups
        saved_groups = state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of optimizer's "
                             "group")
        by_index = {i: p for g, s in zip(groups, saved_groups) for i, p in zip(s["params"], g["params"])}
        state = {}
        for i, s in state_dict["state"].items():
            if isinstance(i, str) and i.isdigit() and i not in by_index:  # keys that went through JSON
                i = int(i)
            if i in by_index:
                p = by_index[i]
                state[p] = _cast_state(p, s)
            else:
                state[i] = _copy_state(s)
        new_groups = []
        for group, saved in zip(groups, saved_groups):
            g = _copy_state({k: v for k, v in saved.items() if k != "params"})
            g["params"] = group["params"]
            new_groups.append(g)
        self.state = state
        self.param_groups = new_groups

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        return "\n".join(lines) + "\n)"
