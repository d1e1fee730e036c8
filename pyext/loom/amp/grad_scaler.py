"""loom.amp.GradScaler: loss scaling for float16 training, with PyTorch 1.13's semantics.

scale(loss) multiplies by the scale (2**16 at first); step(optimizer) unscales the gradients
(unscale_), skips the update when any of them holds an inf or a NaN, and update() shrinks the
scale by backoff_factor after such a step, or grows it by growth_factor after growth_interval
steps in a row without one.

In lazy mode nothing of this syncs. The found-inf flag is a tensor of the step's trace, as is
the scale's update (PyTorch's _amp_update_scale_, written in loom ops). The skip is a where():
the optimizer's update is recorded as usual, then every parameter and state tensor it wrote
takes back its value from before the step where the flag is set. What a where() cannot undo is
the optimizer's Python-number state (Adam's step count) and the state a first step creates:
the scaler keeps a copy of them and puts it back at its next step, once the flag's value is
known. A program that syncs once per step (loss.item(), loom.sync()) has computed it by then
for free; one that does not makes that read a sync (loom.metrics()["syncs_item"]). On eager
devices the scaler reads the flag at once and skips the call, as PyTorch does.
"""

from collections import defaultdict
from enum import Enum
import warnings

import loom
from loom.optim.optimizer import deferred_step_end


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _non_finite_check_and_unscale_(grads, found_inf, inv_scale):
    """PyTorch's _amp_foreach_non_finite_check_and_unscale_: grads *= inv_scale, and found_inf
    becomes 1 if any gradient holds an inf or a NaN. Recorded ops: no sync."""
    if not grads:
        return
    bad = loom.stack([(g.isnan() | g.isinf()).any() for g in grads]).any()
    found_inf.copy_(loom.maximum(found_inf, bad.to(found_inf.dtype)))
    for g in grads:
        g.mul_(inv_scale.to(g.device))


def _amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    """PyTorch's _amp_update_scale_: after a step with an inf, scale *= backoff_factor and the
    count of good steps restarts; after growth_interval good steps, scale *= growth_factor (if
    that is finite) and the count restarts. Recorded ops: no sync."""
    found = found_inf > 0
    successful = growth_tracker + 1
    grow = successful == growth_interval
    grown = scale * growth_factor
    grown_ok = grow & ~(grown.isinf() | grown.isnan())
    scale.copy_(loom.where(found, scale * backoff_factor, loom.where(grown_ok, grown, scale)))
    growth_tracker.copy_(loom.where(found | grow, loom.zeros_like(successful), successful))


class _PendingStep:
    """An optimizer step recorded under a found-inf flag whose value is not known yet, with what
    a where() cannot undo if it turns out set: the optimizer's number state and which parameters
    had no state before."""

    def __init__(self, optimizer, found_inf, params):
        self.optimizer = optimizer
        self.found_inf = found_inf
        self.step_count = getattr(optimizer, "_step_count", None)
        self.numbers = {}  # param -> {key: number}
        self.fresh = []    # params whose state this step created
        for p in params:
            state = optimizer.state.get(p)
            if not state:
                self.fresh.append(p)
            else:
                self.numbers[p] = {k: v for k, v in state.items() if v is not None and not isinstance(v, loom.Tensor)}

    def needs_settling(self):
        return bool(self.fresh) or any(self.numbers.values())

    def settle(self):
        """Puts back the number state if the step was skipped (reads the flag: free once computed)."""
        if not self.found_inf.item():
            return
        for p in self.fresh:
            self.optimizer.state.pop(p, None)
        for p, numbers in self.numbers.items():
            self.optimizer.state[p].update(numbers)
        if self.step_count is not None:
            self.optimizer._step_count = self.step_count


class GradScaler:
    """Loss scaling (torch.amp.GradScaler). device: where the program trains ("cuda", "cpu" or
    "lazy"); the scale lives on the device of the first outputs scaled. A "cuda" scaler on a
    machine without a GPU warns and disables itself, as PyTorch's does (autocast("cuda") is off
    there too); use device="lazy" or "cpu" to scale elsewhere."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = str(device).split(":")[0]
        if enabled and self._device == "cuda" and not loom.cuda.is_available():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.")
            enabled = False
        self._enabled = enabled
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise ValueError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale = None
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)
            self._pending = []

    def _check_scale_growth_tracker(self, funcname):
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        assert self._scale is not None, f"Attempted {funcname} but _scale is None.  " + fix
        assert self._growth_tracker is not None, f"Attempted {funcname} but _growth_tracker is None.  " + fix
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, device):
        assert self._growth_tracker is None, "_growth_tracker initialized before _scale"
        self._scale = loom.full((1,), self._init_scale, dtype=loom.float32, device=device)
        self._growth_tracker = loom.full((1,), self._init_growth_tracker, dtype=loom.int32, device=device)

    def scale(self, outputs):
        """outputs (a tensor, or tensors in nested lists and tuples) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, loom.Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale.to(outputs.device)

        def apply_scale(val):
            if isinstance(val, loom.Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(val.device)
                return val * self._scale.to(val.device)
            if isinstance(val, (list, tuple)):
                return type(val)(apply_scale(v) for v in val)
            if hasattr(val, "__iter__"):
                return map(apply_scale, val)
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer, inv_scale, found_inf, allow_fp16):
        per_device_grads = defaultdict(list)
        with loom.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if param.grad is None:
                        continue
                    if (not allow_fp16) and param.grad.dtype is loom.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    per_device_grads[str(param.grad.device)].append(param.grad)
            per_device_found_inf = {}
            for device, grads in per_device_grads.items():
                flag = found_inf if str(found_inf.device) == device else found_inf.to(device)
                _non_finite_check_and_unscale_(grads, flag, inv_scale)
                per_device_found_inf[device] = flag
        return per_device_found_inf

    def unscale_(self, optimizer):
        """Divides optimizer's gradients by the scale (in place) and records whether any holds an
        inf or a NaN. Optional: step() does it if it was not done (call it to clip gradients)."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = self._scale.double().reciprocal().float()
        found_inf = loom.full((1,), 0.0, dtype=loom.float32, device=self._scale.device)
        optimizer_state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, found_inf, False)
        optimizer_state["stage"] = OptState.UNSCALED

    def _maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        found_infs = list(optimizer_state["found_inf_per_device"].values())
        if not any(f.is_lazy for f in found_infs):
            if not sum(v.item() for v in found_infs):
                return optimizer.step(*args, **kwargs)
            return None
        return self._step_in_trace(optimizer, found_infs, args, kwargs)

    def _step_in_trace(self, optimizer, found_infs, args, kwargs):
        found_inf = found_infs[0]
        for other in found_infs[1:]:
            found_inf = found_inf + other.to(found_inf.device)
        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        pending = _PendingStep(optimizer, found_inf, params)
        with loom.no_grad():
            before = [(p, p.detach().clone(),
                       {k: v.clone() for k, v in optimizer.state[p].items() if isinstance(v, loom.Tensor)}
                       if p in optimizer.state else {}) for p in params]
            with deferred_step_end():  # the step ends in update(), after the skip's writes and the new scale
                retval = optimizer.step(*args, **kwargs)
            skip = found_inf > 0
            for p, old, old_state in before:
                flag = skip.to(p.device)
                p.copy_(loom.where(flag, old, p))
                state = optimizer.state.get(p, {})
                for key, value in old_state.items():
                    current = state.get(key)
                    if isinstance(current, loom.Tensor):
                        current.copy_(loom.where(flag, value, current))
        if pending.needs_settling():
            self._pending.append(pending)
        return retval

    def _settle(self):
        """Puts back the number state of earlier steps that turned out skipped."""
        pending, self._pending = self._pending, []
        for step in pending:
            step.settle()

    def step(self, optimizer, *args, **kwargs):
        """unscale_(optimizer) if not done yet, then optimizer.step(*args, **kwargs) unless a
        gradient held an inf or a NaN. Returns what optimizer.step returned (None when skipped
        on an eager device)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        self._settle()
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if optimizer_state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        assert len(optimizer_state["found_inf_per_device"]) > 0, "No inf checks were recorded for this optimizer."
        retval = self._maybe_opt_step(optimizer, optimizer_state, *args, **kwargs)
        optimizer_state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None):
        """The scale for the next iteration: new_scale if given (a float or a one-element
        tensor), else backed off after a skipped step or grown after growth_interval good ones."""
        if not self._enabled:
            return
        _scale, _growth_tracker = self._check_scale_growth_tracker("update")
        with loom.no_grad():
            if new_scale is not None:
                if isinstance(new_scale, float):
                    self._scale.fill_(new_scale)
                else:
                    reason = "new_scale should be a float or a 1-element torch.cuda.FloatTensor with requires_grad=False."
                    assert isinstance(new_scale, loom.Tensor), reason
                    assert new_scale.numel() == 1, reason
                    assert new_scale.requires_grad is False, reason
                    self._scale.copy_(new_scale)
            else:
                found_infs = [found_inf.to(_scale.device) for state in self._per_optimizer_states.values()
                              for found_inf in state["found_inf_per_device"].values()]
                assert len(found_infs) > 0, "No inf checks were recorded prior to update."
                found_inf_combined = found_infs[0]
                for other in found_infs[1:]:
                    found_inf_combined = found_inf_combined + other
                _amp_update_scale_(_scale, _growth_tracker, found_inf_combined, self._growth_factor,
                                   self._backoff_factor, self._growth_interval)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)
        # The end of the training step on lazy devices, deferred from the optimizer's step: one
        # trace holds the update, the skip and the new scale (optim/optimizer.py).
        loom._C._end_of_step()

    def _get_scale_async(self):
        return self._scale

    def get_scale(self):
        """The scale as a Python float (a sync point in lazy mode); 1.0 when disabled."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._get_scale_async().item()

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker.item()

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """scale, growth_factor, backoff_factor, growth_interval and _growth_tracker ({} when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

    def __getstate__(self):
        state = self.__dict__.copy()
        if self._enabled:
            self._settle()
            assert len(self._per_optimizer_states) == 0, \
                "A GradScaler instance may only be pickled at the beginning of an iteration, " \
                "or at the end after scaler.update()."
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
            state["_pending"] = []
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
