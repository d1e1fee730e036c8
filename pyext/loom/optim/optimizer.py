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

import contextlib
import copy
import functools
import threading
import warnings
from collections import defaultdict

import loom


class _RequiredParameter:
    """The default of a hyperparameter every parameter group must give (torch.optim.optimizer.required)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

# The end of an optimizer step is a sync point on lazy devices (loom._C._end_of_step): the step's
# work runs as one trace there, so a loop that reads no value each step still replays one graph
# per step and no trace spans several steps. loom.compile's recording makes no sync there (its
# step ends with its own); a caller that adds to the step after optimizer.step() (GradScaler's
# in-trace skip) defers it with deferred_step_end() and ends the step itself.
_step_end = threading.local()


@contextlib.contextmanager
def deferred_step_end():
    """Within it, Optimizer.step() does not end the step (the caller calls loom._C._end_of_step())."""
    _step_end.deferred = getattr(_step_end, "deferred", 0) + 1
    try:
        yield
    finally:
        _step_end.deferred -= 1


def _ending_the_step(step):
    """step() of an optimizer class, made to count the step (schedulers check the call order) and
    to end it (_finish_step) when the outermost step() call of this thread returns, whatever the
    class's step does: a subclass that overrides step() without calling the base's (as PyTorch's
    own optimizers and many users' do) still ends its step, as PyTorch wraps every step() for its
    hooks. A step() calling super().step() ends the step once, after all of its own work."""
    if getattr(step, "_ends_the_step", False):
        return step

    @functools.wraps(step)
    def wrapped(self, *args, **kwargs):
        depth = getattr(_step_end, "depth", 0)
        if depth == 0:
            self._step_count = getattr(self, "_step_count", 0) + 1
        _step_end.depth = depth + 1
        try:
            result = step(self, *args, **kwargs)
        finally:
            _step_end.depth = depth
        if depth == 0:
            self._finish_step()
        return result

    wrapped._ends_the_step = True
    return wrapped


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
    """Parameter groups (dicts of parameters and hyperparameters, the defaults filling what a
    group leaves out) and per-parameter state, as torch.optim.Optimizer.

    `_scalar_state` names the state entries that are numbers here (the step count, NAdam's
    mu_product, ...): PyTorch keeps some of them as 0-d tensors, and load_state_dict turns those
    into numbers, because reading a lazy tensor's value would sync every step."""

    _scalar_state = ("step",)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _ending_the_step(cls.__dict__["step"])

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, loom.Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, but "
                            "got " + type(params).__name__)
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        for group in params:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Adds a group: its parameters (a tensor, or an ordered collection of them) and
        hyperparameters; the defaults fill the rest. A parameter may be in one group only."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param group must be a dict, got {type(param_group).__name__}")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, loom.Tensor):
            group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        else:
            group["params"] = list(params)
        for p in group["params"]:
            if not isinstance(p, loom.Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + type(p).__name__)
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for key, value in self.defaults.items():
            if value is required and key not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {key}")
            group.setdefault(key, value)
        ids = [id(p) for p in group["params"]]
        if len(set(ids)) != len(ids):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if seen & set(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        loom.autograd._zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure=None):
        """One update of every parameter that has a gradient (closure, if given, recomputes the
        loss first and its value is returned)."""
        loss = None
        if closure is not None:
            with loom.enable_grad():
                loss = closure()
        with loom.no_grad():
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                if params:
                    self._step_group(group, params)
        return loss  # the step ends in _ending_the_step's wrapper

    def _finish_step(self):
        """The end of a step: a sync point on lazy devices, unless deferred (see _step_end)."""
        if not getattr(_step_end, "deferred", 0):
            loom._C._end_of_step()

    step = _ending_the_step(step)

    def _step_group(self, group, params):
        raise NotImplementedError

    def _states(self, params, init):
        """Each parameter's state, made by init(p) (a dict) on its first step."""
        out = []
        for p in params:
            state = self.state[p]
            if not state:
                state.update(init(p))
            out.append(state)
        return out

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
                state[p] = self._numbers_for_scalars(_cast_state(p, s))
            else:
                state[i] = _copy_state(s)
        new_groups = []
        for group, saved in zip(groups, saved_groups):
            g = _copy_state({k: v for k, v in saved.items() if k != "params"})
            g["params"] = group["params"]
            for key, value in self.defaults.items():  # keys a PyTorch of another version does not save
                g.setdefault(key, value)
            new_groups.append(g)
        self.state = defaultdict(dict, state)
        self.param_groups = new_groups

    def _numbers_for_scalars(self, state):
        """A loaded state with the entries of _scalar_state as Python numbers (PyTorch saves some
        as 0-d tensors)."""
        if isinstance(state, dict):
            for key in self._scalar_state:
                value = state.get(key)
                if isinstance(value, loom.Tensor):
                    value = value.item()
                    state[key] = int(value) if key == "step" and float(value).is_integer() else value
        return state

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        return "\n".join(lines) + "\n)"
