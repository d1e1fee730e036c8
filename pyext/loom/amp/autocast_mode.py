"""loom.autocast: mixed precision regions, as torch.autocast.

Inside `with loom.autocast("cpu")` (bfloat16) or `with loom.autocast("cuda")` (float16), the ops
of one policy table (loom._C._autocast_policy(name); pyext/autocast.h) cast their floating
arguments first: matrix products and convolutions to the low precision, losses and numerically
touchy ops to float32 (on CUDA also exp, log, pow, softmax, layer norm, sums), a few multi-input
ops to their widest input; everything else runs on the dtypes it gets. The casts are ordinary
ops: in lazy mode they are nodes of the trace and fuse into their neighbours. A lazy tensor
follows its backend's autocast ("lazy" as a device_type names the backend of "lazy").

Differences from PyTorch 1.13: the CPU also accepts float16 (PyTorch 2.x does); loom.cuda.amp's
autocast on a machine without a GPU warns and disables itself, as PyTorch's does.
"""

import functools
import warnings

import loom
from loom import _C

_SUPPORTED = {"cpu": (loom.bfloat16, loom.float16), "cuda": (loom.float16, loom.bfloat16)}


def _device_type(device_type):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    name = device_type.split(":")[0]
    if name == "lazy":  # the backend lazy tensors run on
        return "cuda" if loom.cuda.is_available() else "cpu"
    if name not in _SUPPORTED:
        raise RuntimeError(f"User specified autocast device_type must be 'cuda' or 'cpu', got '{device_type}'")
    return name


def is_autocast_enabled(device_type="cuda"):
    """Whether autocast is on for device_type on this thread (PyTorch's takes no argument and means CUDA)."""
    return _C._autocast_is_enabled(_device_type(device_type))


def is_autocast_cpu_enabled():
    return _C._autocast_is_enabled("cpu")


def set_autocast_enabled(*args):
    """set_autocast_enabled(enabled) (CUDA, as PyTorch 1.13) or set_autocast_enabled(device_type, enabled)."""
    device_type, enabled = ("cuda", args[0]) if len(args) == 1 else args
    _C._autocast_set_enabled(_device_type(device_type), bool(enabled))


def set_autocast_cpu_enabled(enabled):
    _C._autocast_set_enabled("cpu", bool(enabled))


def get_autocast_dtype(device_type):
    return _C._autocast_get_dtype(_device_type(device_type))


def get_autocast_gpu_dtype():
    return _C._autocast_get_dtype("cuda")


def get_autocast_cpu_dtype():
    return _C._autocast_get_dtype("cpu")


def set_autocast_dtype(device_type, dtype):
    _C._autocast_set_dtype(_device_type(device_type), dtype)


def set_autocast_gpu_dtype(dtype):
    _C._autocast_set_dtype("cuda", dtype)


def set_autocast_cpu_dtype(dtype):
    _C._autocast_set_dtype("cpu", dtype)


def autocast_increment_nesting():
    return _C._autocast_increment_nesting()


def autocast_decrement_nesting():
    return _C._autocast_decrement_nesting()


def clear_autocast_cache():
    _C._autocast_clear_cache()


def is_autocast_cache_enabled():
    return _C._autocast_cache_enabled()


def set_autocast_cache_enabled(enabled):
    _C._autocast_cache_enabled(bool(enabled))


class autocast:
    """A region (context manager or decorator) in which listed ops run in mixed precision.

    device_type: "cpu", "cuda" or "lazy"; dtype: the low precision (default bfloat16 on the CPU,
    float16 on CUDA); enabled=False turns autocast off inside the region (regions nest: the
    innermost decides); cache_enabled: whether the low-precision casts of weights are made once
    per region (default True)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self.device = _device_type(device_type)
        self.fast_dtype = get_autocast_dtype(self.device) if dtype is None else dtype
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else bool(cache_enabled)
        enabled = bool(enabled)
        if enabled and self.device == "cuda" and not loom.cuda.is_available():
            warnings.warn("User provided device_type of 'cuda', but CUDA is not available. Disabling")
            enabled = False
        if enabled and self.fast_dtype not in _SUPPORTED[self.device]:
            names = " and ".join(str(d) for d in _SUPPORTED[self.device])
            warnings.warn(f"In {self.device.upper()} autocast, but the target dtype is not supported. Disabling "
                          f"autocast.\n{self.device.upper()} Autocast only supports dtypes of {names} currently.")
            enabled = False
        self._enabled = enabled

    def __enter__(self):
        self.prev_cache_enabled = is_autocast_cache_enabled()
        self.prev = _C._autocast_is_enabled(self.device)
        self.prev_fastdtype = _C._autocast_get_dtype(self.device)
        _C._autocast_set_enabled(self.device, self._enabled)
        _C._autocast_set_dtype(self.device, self.fast_dtype)
        _C._autocast_increment_nesting()
        _C._autocast_cache_enabled(self._cache_enabled)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if _C._autocast_decrement_nesting() == 0:
            _C._autocast_clear_cache()
        _C._autocast_set_enabled(self.device, self.prev)
        _C._autocast_set_dtype(self.device, self.prev_fastdtype)
        _C._autocast_cache_enabled(self.prev_cache_enabled)
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        decorate_autocast.__script_unsupported = "@autocast() decorator is not supported in script mode"
        return decorate_autocast


def _cast(value, dtype):
    """Floating tensors inside value (nested lists, tuples, dicts) cast to dtype, as custom_fwd does."""
    if isinstance(value, loom.Tensor):
        return value.to(dtype) if value.is_floating_point() and value.dtype is not loom.float64 else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast(v, dtype) for k, v in value.items()}
    return value


def custom_fwd(fwd=None, *, device_type="cuda", cast_inputs=None):
    """For the forward of an autograd.Function: runs it with autocast's state of the call
    recorded for custom_bwd; with cast_inputs, its floating inputs are cast to that dtype and it
    runs with autocast off."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._fwd_used_autocast = is_autocast_enabled(device_type)
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            return fwd(*args, **kwargs)
        autocast_context = is_autocast_enabled(device_type)
        ctx._fwd_used_autocast = False
        if autocast_context:
            with autocast(device_type, enabled=False):
                return fwd(*_cast(args, cast_inputs), **_cast(kwargs, cast_inputs))
        return fwd(*args, **kwargs)

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type="cuda"):
    """For the backward of an autograd.Function: runs it with the autocast state its forward had."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type, enabled=getattr(ctx, "_fwd_used_autocast", False),
                      dtype=getattr(ctx, "_dtype", None)):
            return bwd(*args, **kwargs)

    return decorate_bwd
