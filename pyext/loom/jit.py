"""loom.jit: the TorchScript names that model code calls inline (torch.jit.ignore,
is_scripting, Final, script, ...), so that such code runs on loom unchanged.

loom has no TorchScript: a model's Python always runs (loom.compile captures a whole step
instead). So is_scripting() and is_tracing() are False, script() and the decorators return what
they are given, and Final and annotate are the typing forms TorchScript reads. trace() and
load() (a compiled TorchScript program) raise."""

import typing

Final = typing.Final


def is_scripting():
    return False


def is_tracing():
    return False


def _decorator(fn=None, **_):
    if fn is None or not callable(fn):  # @ignore(drop=True): a decorator factory
        return lambda f: f
    return fn


ignore = unused = export = _decorator


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """Returns obj (a function or module) unchanged: loom runs its Python."""
    return obj


def annotate(the_type, the_value):
    return the_value


def trace(*args, **kwargs):
    raise NotImplementedError("loom has no TorchScript tracing: run the module, or capture a step with loom.compile")


def load(*args, **kwargs):
    raise NotImplementedError("loom cannot load TorchScript programs: load a state dict with loom.load instead")
