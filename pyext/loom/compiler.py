"""loom.compiler: torch.compiler's functions, for loom.compile (loom/_compile.py)."""

import functools

from loom import _C
from loom._compile import _reset_all, config  # noqa: F401  (config: loom.compiler.config.cache_size_limit)


def disable(fn=None, recursive=True):
    """Keeps `fn` out of compiled steps, as torch.compiler.disable: `loom.compile(fn)` returns it
    unchanged, and a compiled step that calls it cannot be captured (its replay would not run
    it): those calls run uncompiled, and explain() says why. As a decorator too."""
    if fn is None:
        return lambda f: disable(f, recursive)
    name = getattr(fn, "__qualname__", None) or repr(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _C._compile_note_disabled(name)
        return fn(*args, **kwargs)

    wrapper._loom_compile_disabled = True
    return wrapper


def reset():
    """Drops every compiled function's captured steps (the next calls record again)."""
    _reset_all()


def is_compiling():
    """Whether this thread is recording a step of a compiled function now."""
    return _C._compile_recording()
