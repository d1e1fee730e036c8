"""loom.autograd: gradients, as torch.autograd.

In lazy mode, backward() and grad() record the backward ops into the current trace instead of
running them, so forward, backward and the optimizer update of a training step become one graph.
"""

import functools
import threading

from loom import _C



class FunctionCtx:
    """The `ctx` of an autograd.Function: what forward keeps for backward."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors = ()
        self.materialize_grads = True
        self._non_differentiable = set()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        pass  # an input written in place by forward: its new value is the output, handled as any output

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class _FunctionMeta(type):
    # The grad_fn objects count as Functions too (loom's tests and some programs ask).
    def __instancecheck__(cls, obj):
        return type.__instancecheck__(cls, obj) or (cls is Function and isinstance(obj, _C._GradFn))


class Function(metaclass=_FunctionMeta):
    """A custom differentiable operation, as torch.autograd.Function: subclass it with static
    forward(ctx, *args) and backward(ctx, *grad_outputs), and call Cls.apply(*args).

    forward runs without recording (its ops are not differentiated); backward returns one
    gradient per argument of forward (None for non-tensors or where none is wanted) and is itself
    recorded, so it joins a lazy step's trace like any backward. An output with no gradient
    reaches backward as zeros (ctx.set_materialize_grads(False): None)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args):
        needs = tuple(isinstance(a, _C.Tensor) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        with no_grad():
            result = cls.forward(ctx, *args)
        if not (_C.is_grad_enabled() and any(needs)):
            return result
        single = isinstance(result, _C.Tensor)
        outputs = [result] if single else list(result)
        positions = [i for i, o in enumerate(outputs)
                     if isinstance(o, _C.Tensor) and id(o) not in ctx._non_differentiable]
        sources = [args[i] for i, n in enumerate(needs) if n]
        source_positions = [i for i, n in enumerate(needs) if n]
        tensors = [outputs[i] for i in positions]

        def on_grads(grads):
            grads = list(grads)
            if ctx.materialize_grads:
                grads = [g if g is not None else _C.zeros_like(t) for g, t in zip(grads, tensors)]
            all_grads = [None] * len(outputs)
            for p, g in zip(positions, grads):
                all_grads[p] = g
            got = cls.backward(ctx, *(all_grads if not single else all_grads[:1]))
            got = (got,) if not isinstance(got, tuple) else got
            if len(got) < len(args):
                raise RuntimeError(f"function {cls.__name__}Backward returned an incorrect number of gradients "
                                   f"(expected {len(args)}, got {len(got)})")
            return [got[i] for i in source_positions]

        hooked = _C._backward_hook_function(tensors, on_grads, sources)
        for p, h in zip(positions, hooked):
            outputs[p] = h
        return outputs[0] if single else type(result)(outputs)


class _GradMode:
    """A context manager and decorator that sets grad mode inside it and restores it after."""

    def __init__(self, enabled):
        self._enabled = enabled
        self._saved = []

    def __enter__(self):
        self._saved.append(_C.is_grad_enabled())
        _C._set_grad_enabled(self._enabled)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._saved.pop())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)(*self._args()):
                return fn(*args, **kwargs)

        return wrapper

    def _args(self):
        return (self._enabled,)


class no_grad(_GradMode):
    """Ops inside record no gradient history (optimizer updates, evaluation)."""

    def __init__(self):
        super().__init__(False)

    def _args(self):
        return ()


class enable_grad(_GradMode):
    """Re-enables gradient recording inside a no_grad region."""

    def __init__(self):
        super().__init__(True)

    def _args(self):
        return ()


class inference_mode(_GradMode):
    """Like no_grad (loom has no separate inference tensors): inference_mode(mode=True).
    is_inference_mode_enabled() says whether the innermost one of this thread is on."""

    def __init__(self, mode=True):
        super().__init__(not mode)
        self._mode = mode
        self._inference_saved = []

    def __enter__(self):
        self._inference_saved.append(is_inference_mode_enabled())
        _inference_state.enabled = bool(self._mode)
        return super().__enter__()

    def __exit__(self, *exc):
        _inference_state.enabled = self._inference_saved.pop()
        return super().__exit__(*exc)

    def _args(self):
        return (self._mode,)


_inference_state = threading.local()  # .enabled: inside an inference_mode(True) of this thread


def is_inference_mode_enabled():
    return getattr(_inference_state, "enabled", False)


class set_grad_enabled(_GradMode):
    """set_grad_enabled(mode): sets grad mode now, and as a context manager restores it after."""

    def __init__(self, mode):
        super().__init__(bool(mode))
        self._saved.append(_C.is_grad_enabled())
        _C._set_grad_enabled(bool(mode))

    def __enter__(self):
        return self


def _tensors(x):
    if x is None:
        return None
    return (x,) if isinstance(x, _C.Tensor) else tuple(x)


def _zero_grads(params, set_to_none):
    """Module.zero_grad and Optimizer.zero_grad: drop each .grad, or zero it in place."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            p.grad.zero_()


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False):
    """Accumulates the gradients of `tensors` into the .grad of the leaves they depend on."""
    _C._autograd_backward(_tensors(tensors), _tensors(grad_tensors), retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """The gradients of `outputs` with respect to `inputs` (a tuple), without touching .grad."""
    return _C._autograd_grad(_tensors(outputs), _tensors(inputs), _tensors(grad_outputs), retain_graph, create_graph,
                             allow_unused)


from loom.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: E402,F401


# ---- the end of a backward pass ----
#
# Callbacks run after every backward() (Tensor.backward, loom.autograd.backward), not after
# grad(): where loom.nn.parallel.DistributedDataParallel reduces its gradients. PyTorch queues
# such a callback on its autograd engine from a gradient hook; in lazy mode loom's backward pass
# only records ops, so its end is the moment.

_backward_end_callbacks = {}


class _CallbackHandle:
    _next = 0

    def __init__(self):
        _CallbackHandle._next += 1
        self.id = _CallbackHandle._next

    def remove(self):
        _backward_end_callbacks.pop(self.id, None)
        if not _backward_end_callbacks:
            _C._set_backward_end_hook(None)


def _run_backward_end_callbacks():
    for callback in list(_backward_end_callbacks.values()):
        callback()


def _on_backward_end(callback):
    """Runs `callback()` after every backward(); returns a handle whose remove() stops it. Keep
    the handle: the callback is held strongly until then."""
    handle = _CallbackHandle()
    _backward_end_callbacks[handle.id] = callback
    _C._set_backward_end_hook(_run_backward_end_callbacks)
    return handle


# ---- legacy and debugging names of torch.autograd ----

class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _C.Tensor)


class Variable(metaclass=_VariableMeta):
    """The pre-0.4 wrapper, now the tensor itself (as in PyTorch): Variable(t) returns t,
    Variable(t, requires_grad=True) sets t.requires_grad, and every tensor is a Variable."""

    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if data is None:
            return _C.tensor([])
        if not isinstance(data, _C.Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if requires_grad:
            data.requires_grad_(True)
        return data


_anomaly_enabled = False
_anomaly_check_nan = True


def is_anomaly_enabled():
    return _anomaly_enabled


def is_anomaly_check_nan_enabled():
    return _anomaly_check_nan


def set_anomaly_enabled(enabled, check_nan=True):
    """torch.set_anomaly_enabled: sets the anomaly flags (no context; set_detect_anomaly is the
    public form)."""
    global _anomaly_enabled, _anomaly_check_nan
    _anomaly_enabled, _anomaly_check_nan = bool(enabled), bool(check_nan)


def set_detect_anomaly(mode):
    """torch.autograd.set_detect_anomaly: sets the flag that is_anomaly_enabled() reads, as a
    call or a context manager. loom records the flag only: its backward errors already name the
    op (in PyTorch's words), and it does not check each gradient for NaN."""
    return _AnomalyMode(mode, set_now=True)


class _AnomalyMode:
    """Sets the anomaly flag now (set_detect_anomaly) or on entering (detect_anomaly); leaving
    a `with` block restores the value from before."""

    def __init__(self, mode, set_now=False):
        self._mode = bool(mode)
        self._before = None
        if set_now:
            self._set()

    def _set(self):
        global _anomaly_enabled
        self._before, _anomaly_enabled = _anomaly_enabled, self._mode

    def __enter__(self):
        if self._before is None:
            self._set()
        return self

    def __exit__(self, *exc):
        global _anomaly_enabled
        _anomaly_enabled = self._before
        return False


def detect_anomaly(check_nan=True):
    """torch.autograd.detect_anomaly(): set_detect_anomaly(True) for a `with` block."""
    return _AnomalyMode(True)


# ---- torch.autograd.profiler (the legacy profiler's names, on loom.profiler) and
# torch.autograd.functional (jacobian, hessian, ...): submodules, imported when first asked for ----

def __getattr__(name):
    if name in ("profiler", "functional"):
        import importlib
        return importlib.import_module(f"loom.autograd.{name}")
    raise AttributeError(f"module 'loom.autograd' has no attribute '{name}'")
