"""Activation checkpointing, as torch.utils.checkpoint: checkpoint(fn, *args) returns fn(*args)
without keeping fn's intermediate values for backward; backward runs fn again, with gradients, to
get them. Random ops draw the same numbers in the rerun (the generators' states are saved before
the first run and restored for the second), and autocast is in the state it was in.

In eager mode this trades compute for memory as in PyTorch. In lazy mode the forward ops are
recorded without history and recorded again during backward, in the same trace, so the fusion
partitioner sees the recomputation and decides what is stored (the result is PyTorch's either
way). Both use_reentrant forms are the reentrant one here: backward runs an inner backward over
the rerun, so parameters fn uses get their gradients too. Where no tensor argument needs a
gradient there is nothing to give one to, so fn simply runs with history (PyTorch's non-reentrant
behaviour: parameters inside still get gradients)."""

import functools

import loom
from loom import autograd


def _autocast_state():
    return [(device, loom.is_autocast_enabled(device), loom.get_autocast_dtype(device)) for device in ("cpu", "cuda")]


def _generators(args):
    # The CPU generator (lazy tensors on the CPU draw from it too), and that of every GPU an
    # argument is on.
    gens = [loom.random.default_generator]
    for index in sorted({a.device.index or 0 for a in args if isinstance(a, loom.Tensor) and a.is_cuda}):
        gens.append(loom._C._default_generator(f"cuda:{index}"))
    return gens


class _Checkpoint(autograd.Function):
    @staticmethod
    def forward(ctx, run, preserve_rng_state, *args):
        ctx.run, ctx.args = run, args
        ctx.autocast = _autocast_state()
        ctx.rng = [(g, g.get_state()) for g in _generators(args)] if preserve_rng_state else []
        return run(*args)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, loom.Tensor) else a for a in ctx.args]
        now = [(g, g.get_state()) for g, _ in ctx.rng]
        try:
            for g, state in ctx.rng:
                g.set_state(state)
            with loom.enable_grad(), _restored_autocast(ctx.autocast):
                outputs = ctx.run(*inputs)
        finally:
            for g, state in now:
                g.set_state(state)
        outputs = (outputs,) if isinstance(outputs, loom.Tensor) else tuple(outputs)
        pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(o, loom.Tensor) and o.requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(i.grad if isinstance(i, loom.Tensor) else None for i in inputs)


class _restored_autocast:
    def __init__(self, state):
        self.regions = [loom.autocast(device, dtype=dtype, enabled=enabled) for device, enabled, dtype in state]

    def __enter__(self):
        for r in self.regions:
            r.__enter__()

    def __exit__(self, *exc):
        for r in reversed(self.regions):
            r.__exit__(*exc)
        return False


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), recomputed during backward instead of stored (see the module's note).
    context_fn, determinism_check and debug are accepted for PyTorch's signature; a context_fn
    other than PyTorch's default is not supported."""
    if context_fn is not None:
        raise NotImplementedError("checkpoint(): context_fn is not supported by loom")
    run = functools.partial(function, **kwargs) if kwargs else function
    tensors = [a for a in args if isinstance(a, loom.Tensor)]
    if not loom.is_grad_enabled() or not any(t.requires_grad for t in tensors):
        return run(*args)
    return _Checkpoint.apply(run, preserve_rng_state, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Runs a Sequential (or a list of modules) in `segments` pieces, each checkpointed but the last."""
    if isinstance(functions, loom.nn.Sequential):
        functions = list(functions.children())
    functions = list(functions)
    size = len(functions) // segments

    def run_segment(start, end):
        def forward(x):
            for f in functions[start:end + 1]:
                x = f(x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run_segment(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run_segment(end + 1, len(functions) - 1)(input)


__all__ = ["checkpoint", "checkpoint_sequential"]
