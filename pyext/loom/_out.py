"""out=: the functions whose PyTorch counterparts take it (loom/_out_names.py, derived from torch
by perf/tools/out_names.py) take it in loom too, with PyTorch's rules. The function computes a fresh
result as without out=; write_out then

- raises RuntimeError when grad mode is on and the result or out requires grad (a result written
  through out= has no autograd history, as in PyTorch);
- raises RuntimeError when out is on another device than the result (a creation function, which
  has no input, makes its result on out's device and in out's dtype instead);
- raises RuntimeError when the result's dtype cannot be cast to out's by loom.can_cast (a float
  result into an integer out, say); a result that can be is cast, as PyTorch's ops do;
- resizes out to the result's shape when they differ, warning (deprecated in PyTorch) when out had
  elements;
- copies the result into out, in place (a view's base sees it; on the lazy device it is recorded
  as any in-place write), and returns out itself. Since the result is complete before the copy,
  an out that is also an input of the call gets the result computed from the input's old value.

A function of several results (max with dim, sort, ...) takes a tuple of as many tensors and
returns them as its usual named tuple. Op-table functions (C) take the keyword off in
pyext/op_table.cpp (call_with_out), so a call without out= costs what it did; functions written
in Python are wrapped here.
"""

import functools
import inspect
import warnings

import loom
from loom import _C
from loom._out_names import NAMES


def _shape_text(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


# Functions that PyTorch computes outside its elementwise machinery, so that an out= sharing any
# memory with an input raises even when it is that input exactly (torch's error_inputs of these
# ops check it); the others allow out= to be exactly an input (torch.add(x, y, out=x)).
_NO_ALIAS = frozenset({"cat", "concat", "concatenate", "index_select", "masked_select", "take", "kthvalue"})


def _span(t):
    """The byte range [lo, hi) a CPU tensor's elements lie in (None for an empty one)."""
    if t.numel() == 0:
        return None
    size = t.element_size()
    lo = hi = t.data_ptr()
    for n, st in zip(t.shape, t.stride()):
        (hi := hi + (n - 1) * st * size) if st >= 0 else (lo := lo + (n - 1) * st * size)
    return lo, hi + size


def _eager(t):
    return isinstance(t, loom.Tensor) and not t.is_lazy


def _tensors(inputs):
    for x in inputs:
        if isinstance(x, loom.Tensor):
            yield x
        elif isinstance(x, (tuple, list)):
            yield from (y for y in x if isinstance(y, loom.Tensor))


def _check_memory(name, out, inputs):
    """PyTorch's overlap rules, checked where memory is known (tensors not on the lazy device):
    an out= whose elements share memory among themselves, or with an input (other than being that
    input exactly, where the function allows it), raises."""
    if not _eager(out):
        return
    if any(st == 0 and n > 1 for n, st in zip(out.shape, out.stride())):
        raise RuntimeError(f"{name}(): unsupported operation: out= has elements that share one memory location "
                           "(an expanded tensor); clone it first")
    span = _span(out)
    if span is None:
        return
    for t in _tensors(inputs):
        if not _eager(t) or t.numel() == 0:
            continue
        other = _span(t)
        if other[1] <= span[0] or span[1] <= other[0]:
            continue
        same = (t.data_ptr() == out.data_ptr() and tuple(t.shape) == tuple(out.shape)
                and t.stride() == out.stride() and t.dtype == out.dtype)
        if not same or name in _NO_ALIAS:
            raise RuntimeError(f"{name}(): unsupported operation: out= and an input share memory" +
                               ("" if same else " in part") + "; clone the input first")


def _check_one(name, result, out, factory, inputs=(), dtype=None):
    if not isinstance(out, loom.Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if loom.is_grad_enabled() and (result.requires_grad or out.requires_grad):
        raise RuntimeError(f"{name}(): results written into out= don't support automatic differentiation, and an "
                           "argument requires grad (call it under loom.no_grad() or without out=)")
    if factory:
        return
    if out.device != result.device:
        raise RuntimeError(f"{name}(): out= is on device {out.device}, but the result is on device "
                           f"{result.device}")
    if isinstance(dtype, loom.dtype) and out.dtype != dtype:  # sum(x, dtype=d, out=o): o must be d
        raise RuntimeError(f"{name}(): dtype={dtype} was given, but out= has dtype {out.dtype}")
    if not loom.can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"{name}(): the result's dtype {result.dtype} can't be cast to the dtype of out=, "
                           f"{out.dtype}")
    # An index result (int64 from floating inputs only: argmax, sort's indices, multinomial,
    # searchsorted) goes into an int64 out only, as in PyTorch; a computed int64 (the sum of
    # bools, a bool plus a Python int) is cast by the rule above.
    tensors = list(_tensors(inputs))
    if (result.dtype == loom.int64 and out.dtype != loom.int64 and tensors
            and all(t.dtype.is_floating_point for t in tensors)):
        raise RuntimeError(f"{name}(): expected an out= of dtype {loom.int64} for its indices, but got {out.dtype}")
    _check_memory(name, out, inputs)


def _write_one(name, result, out):
    if tuple(out.shape) != tuple(result.shape):
        if out.numel() != 0:
            warnings.warn(f"{name}(): out= had shape {_shape_text(out.shape)} with elements and was resized to the "
                          f"result's shape {_shape_text(result.shape)}; resizing a non-empty out= is deprecated (give "
                          "it zero elements first: out.resize_(0))", UserWarning, stacklevel=3)
        out.resize_(result.shape)
    if result.device != out.device:
        result = result.to(out.device)
    with loom.no_grad():
        out.copy_(result)


def write_out(name, result, out, factory=False, inputs=(), dtype=None):
    """Writes `result` (a tensor, or a tuple of them) into `out` by the rules above; returns out.
    `inputs`: the call's other arguments (overlap checks); `dtype`: an explicit dtype= of the call."""
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{name}(): argument 'out' must be a tuple of {len(result)} Tensors, not "
                            f"{type(out).__name__}" + (f" of {len(out)}" if isinstance(out, (tuple, list)) else ""))
        for r, o in zip(result, out):
            _check_one(name, r, o, factory, inputs, dtype)
        for r, o in zip(result, out):
            _write_one(name, r, o)
        kind = type(result)
        if kind is tuple:
            return tuple(out)
        return kind._make(out) if hasattr(kind, "_make") else kind(tuple(out))
    if isinstance(out, (tuple, list)):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    _check_one(name, result, out, factory, inputs, dtype)
    _write_one(name, result, out)
    return out


def _takes_device(fn):
    try:
        return "device" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def with_out(fn, name=None):
    """fn (a function written in Python) taking out= as the op-table functions do."""
    name = name or fn.__name__
    factory = _takes_device(fn)

    @functools.wraps(fn)
    def call(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        if factory and isinstance(out, loom.Tensor):
            kwargs.setdefault("dtype", out.dtype)  # a creation function makes out's dtype, on out's device
            kwargs.setdefault("device", out.device)
        return write_out(name, fn(*args, **kwargs), out, factory, args + tuple(kwargs.values()),
                         None if factory else kwargs.get("dtype"))

    call.__signature__ = _with_out_parameter(fn)
    return call


def _with_out_parameter(fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    extra = inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None)
    at = next((i for i, p in enumerate(params) if p.kind == inspect.Parameter.VAR_KEYWORD), len(params))
    return sig.replace(parameters=params[:at] + [extra] + params[at:])


def _resolve(qualname):
    owner = loom
    *path, last = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, last


def enable():
    """Makes every function of NAMES take out= (called once, at the end of loom's import)."""
    wrapped = {}  # a Python function bound under several names is wrapped once
    for qualname in NAMES:
        owner, last = _resolve(qualname)
        fn = getattr(owner, last, None)
        if fn is None:
            continue
        if type(fn) is type(_C._enable_out) and getattr(fn, "__self__", None) is _C:
            _C._enable_out(fn.__name__)
        elif inspect.isfunction(fn) and not getattr(fn, "_takes_out", False):
            if "out" in inspect.signature(fn).parameters:
                continue  # takes out= itself (loom.range, F.normalize, tensordot)
            if id(fn) not in wrapped:
                wrapped[id(fn)] = with_out(fn, last)
                wrapped[id(fn)]._takes_out = True
            setattr(owner, last, wrapped[id(fn)])
