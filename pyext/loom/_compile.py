"""loom.compile: capture a whole step once, replay it without running Python (DESIGN decision 16).

`loom.compile(fn)` returns a callable that runs `fn` through the lazy path, recording, until two
calls in a row record the same trace with every number from a known source; later calls whose
arguments and guards match replay that captured step directly: no Python of `fn` runs, nothing
is recorded, no trace is built (on a GPU: one CUDA Graph launch). How it works is in
pyext/compile_bindings.cpp (Note [Capture and replay]) and graph/captured_step.h; what it cannot
see is in README.md.

The call shapes are torch.compile's: `loom.compile(fn)`, `@loom.compile`, `@loom.compile(mode=...)`,
`loom.compile(module)`; `mode`, `fullgraph`, `dynamic`, `backend`, `options` and `disable` are
accepted with PyTorch's meaning where it fits (see `compile`), so a program that imports loom as
torch keeps working.
"""

import functools
import os
import types

import loom
from loom import _C

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_BACKENDS = ("inductor", "cudagraphs", "eager", "aot_eager", "loom")


class config:
    """Settings of loom.compile, as torch._dynamo.config's: `cache_size_limit` is how many steps a
    compiled function captures (one per batch size, grad mode, ...) before it runs uncompiled for
    good, and also how many calls in a row may fail to be captured before it gives up."""

    cache_size_limit = 8


def _replay_enabled():
    # LOOM_COMPILE=0 runs the same path (recording, explaining) without replaying.
    return os.environ.get("LOOM_COMPILE", "1") != "0"


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False, cache_size_limit=None):
    """Compiles a step: `loom.compile(fn)` or `@loom.compile` returns a callable that records the
    first calls lazily, captures the step once two calls record the same trace, and replays it
    for later calls whose arguments match (same structure, dtypes, shapes, devices, requires_grad;
    the same ints, strings and objects; grad mode and the training flags of the modules it
    reaches). Python floats passed to it, loom's optimizers' hyperparameters (learning rates a
    scheduler sets) and step counts, and random numbers are read or drawn anew at every replay.

    - `fullgraph=True`: a sync point inside the step (item(), print(tensor), data-dependent
      control flow) raises instead of running that call uncompiled.
    - `dynamic=False`: Python float arguments are guards (a new value records again) instead of
      numbers of the step. `dynamic=None` or True: numbers. Shapes are always specialized (a new
      batch size captures another step; no kernel is recompiled for it).
    - `mode`: accepted ("reduce-overhead" is what loom does in every mode: one graph a step).
    - `backend`: "inductor" (the default), "cudagraphs" or "loom" compile; "eager" and "aot_eager"
      record and explain without replaying, as LOOM_COMPILE=0 does. A callable backend is refused.
    - `disable=True` returns `model` unchanged. `cache_size_limit` overrides config.cache_size_limit.
    - `model` may be an nn.Module: the result is a module whose forward is compiled.
    """
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(str(m) for m in _MODES[1:])}")
    if callable(backend) and not isinstance(backend, str):
        raise NotImplementedError("loom.compile takes no custom backends: loom captures and replays the step itself")
    if backend not in _BACKENDS:
        raise RuntimeError(f"loom.compile: unknown backend {backend!r} (one of {', '.join(_BACKENDS)})")
    if options is not None and not isinstance(options, dict):
        raise RuntimeError("options must be a dict")
    limit = config.cache_size_limit if cache_size_limit is None else int(cache_size_limit)

    def wrap(fn):
        if disable or getattr(fn, "_loom_compile_disabled", False):
            return fn
        if isinstance(fn, loom.nn.Module):
            return OptimizedModule(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, limit=limit)
        return _compiled(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, limit=limit)

    if model is None:
        return wrap
    return wrap(model)


def _compiled(fn, *, fullgraph, dynamic, backend, limit):
    if isinstance(fn, _C._CompiledFunction):
        return fn
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    compiled = _C._CompiledFunction(fn, fullgraph=bool(fullgraph), dynamic_numbers=dynamic is not False,
                                    replay=_replay_enabled() and backend not in ("eager", "aot_eager"),
                                    cache_size_limit=limit, name=name)
    try:
        functools.update_wrapper(compiled, fn)
    except (AttributeError, TypeError):
        pass
    _ALL.add(compiled)
    return compiled


class OptimizedModule(loom.nn.Module):
    """loom.compile(module): a module whose forward is the compiled module (torch's
    OptimizedModule: `_orig_mod` is the module, whose parameters it shares)."""

    def __init__(self, mod, *, fullgraph, dynamic, backend, limit):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_compiled_call", _compiled(mod, fullgraph=fullgraph, dynamic=dynamic,
                                                             backend=backend, limit=limit))

    def forward(self, *args, **kwargs):
        return self._compiled_call(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._orig_mod, name)


class Explanation:
    """What loom.compile did with a function (torch._dynamo.explain's role): `history` (one line
    per event: recordings, captures, guard failures, sync points with their Python line,
    fallbacks), `captures` (descriptions of the captured steps: what each replay reads, computes
    and writes), `syncs` (the sync points seen inside the step) and `fallback` (why it runs
    uncompiled, or None)."""

    def __init__(self, compiled):
        self.history = compiled._history()
        self.captures = compiled._entries()
        self.syncs = [line for line in self.history if "a sync point cannot be replayed" in line]
        self.guard_failures = [line for line in self.history if "no captured step matches" in line]
        self.fallback = compiled._fallback

    @property
    def capture_count(self):
        return len(self.captures)

    def __str__(self):
        lines = [f"loom.compile: {len(self.captures)} captured step(s), {len(self.syncs)} call(s) with sync points"]
        if self.fallback:
            lines.append(f"runs uncompiled: {self.fallback}")
        lines += self.history
        lines += self.captures
        return "\n".join(lines)

    __repr__ = __str__


def explain(fn, *args, **kwargs):
    """What loom.compile does with `fn`. `fn` compiled already: its history so far (and, given
    arguments, after one more call with them). `fn` not compiled: it is compiled and called once
    with the arguments (a step runs: like torch._dynamo.explain, explaining executes it), which
    reports the sync points inside it with their Python lines, or what a capture would read and
    write. Returns an Explanation; print it."""
    compiled = fn if isinstance(fn, _C._CompiledFunction) else _compiled(
        fn, fullgraph=False, dynamic=None, backend="inductor", limit=config.cache_size_limit)
    if args or kwargs or compiled is not fn:
        compiled(*args, **kwargs)
    return Explanation(compiled)


compile.explain = explain


# ---- what a recording guards (pyext/compile_guards.h) ----

def _code_names(code, out):
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_names(c, out)


def _unwrap(fn, bound):
    """The Python function a callable runs, and the objects bound to it (self, partial args)."""
    for _ in range(16):
        if isinstance(fn, types.MethodType):
            bound.append(fn.__self__)
            fn = fn.__func__
        elif isinstance(fn, functools.partial):
            bound.extend(fn.args)
            bound.extend(fn.keywords.values())
            fn = fn.func
        elif isinstance(fn, types.FunctionType):
            return fn
        elif isinstance(fn, loom.nn.Module):
            bound.append(fn)
            fn = type(fn).forward
        elif callable(fn) and not isinstance(fn, (types.BuiltinFunctionType, type)):
            bound.append(fn)
            fn = type(fn).__call__
        else:
            return None
    return None


def _reachable(objects, modules, optimizers, depth=0):
    for obj in objects:
        if isinstance(obj, loom.nn.Module):
            modules.extend(obj.modules())
        elif isinstance(obj, loom.optim.Optimizer):
            optimizers.append(obj)
        elif depth < 3 and isinstance(obj, (list, tuple)) and len(obj) <= 64:  # not a dataset
            _reachable(obj, modules, optimizers, depth + 1)
        elif depth < 3 and isinstance(obj, dict) and len(obj) <= 64:
            _reachable(obj.values(), modules, optimizers, depth + 1)


def _guard_state(fn, args):
    """(globals [(dict, name)], cells [(cell, name)], modules [module], tensors [tensor]): what the
    step's function reads from its globals and closure, the modules whose training flags it
    depends on, and the tensors whose .grad it may read or set (parameters)."""
    bound = []
    func = _unwrap(fn, bound)
    globals_, cells = [], []
    values = list(bound) + list(args)
    if func is not None:
        names = set()
        _code_names(func.__code__, names)
        g = func.__globals__
        for name in sorted(names):
            if name in g:
                globals_.append((g, name))
                values.append(g[name])
        for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
            cells.append((cell, name))
            try:
                values.append(cell.cell_contents)
            except ValueError:
                pass
    modules, optimizers = [], []
    _reachable(values, modules, optimizers)
    seen, unique = set(), []
    for m in modules:
        if id(m) not in seen:
            seen.add(id(m))
            unique.append(m)
    tensors = [p for m in unique for p in m.parameters(recurse=False)]
    tensors += [p for o in optimizers for group in o.param_groups for p in group["params"]]
    return globals_, cells, unique, tensors


class _StepFloat(float):
    """A float argument while a step is recorded (Note [Float arguments], pyext/compile_bindings.cpp):
    equal to it, and noting (`_loom_read`) any use of its value by Python (arithmetic, a
    comparison, formatting, conversion), which makes that argument a guard of the captured step
    instead of a number a replay reads anew."""

    __slots__ = ("_loom_read",)


def _noting(name):
    method = getattr(float, name)

    def use(self, *args):
        self._loom_read = True
        return method(float(self.real), *args)  # float.real of a subclass: the plain float value
    use.__name__ = name
    return use


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__divmod__", "__rdivmod__", "__pow__",
              "__rpow__", "__neg__", "__pos__", "__abs__", "__float__", "__int__", "__trunc__", "__floor__",
              "__ceil__", "__round__", "__bool__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
              "__hash__", "__repr__", "__str__", "__format__", "__getnewargs__", "is_integer", "as_integer_ratio",
              "hex", "conjugate"):
    setattr(_StepFloat, _name, _noting(_name))
del _name

_ALL = __import__("weakref").WeakSet()


def _reset_all():
    for compiled in list(_ALL):
        compiled._reset()


_C._compile_setup(_guard_state, _StepFloat)
