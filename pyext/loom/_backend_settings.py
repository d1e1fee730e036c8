"""Process-wide switches PyTorch keeps at torch.*: the float32 matmul precision and deterministic
algorithms.

- set_float32_matmul_precision: "highest" (default) keeps float32 products in float32; "high" and
  "medium" let them use tensor-float-32 on a GPU (loom.backends.cuda.matmul.allow_tf32, which
  the CUDA executor reads; the CPU always computes in float32). As in PyTorch, setting allow_tf32
  reads back as "high".
- use_deterministic_algorithms: kept and reported. loom's CPU kernels are deterministic whatever
  the thread count (linear loops split at multiples of 64); on a GPU, scatter_add and index_add
  of floating values accumulate with atomics, whose order varies between runs, and with this
  mode on they raise (or warn, with warn_only) when lowered, as PyTorch's do.
"""

import warnings

from loom import _C

_PRECISIONS = ("highest", "high", "medium")
_precision = "highest"


def set_float32_matmul_precision(precision):
    global _precision
    if precision not in _PRECISIONS:
        warnings.warn(f"Invalid value for float32 matmul precision: {precision!r}; expected one of "
                      f"{', '.join(_PRECISIONS)}. Ignored.")
        return
    _precision = precision
    _C._cuda_allow_tf32(precision != "highest")


def get_float32_matmul_precision():
    allowed = _C._cuda_allow_tf32()
    if not allowed:
        return "highest"
    return _precision if _precision != "highest" else "high"


def use_deterministic_algorithms(mode, *, warn_only=False):
    if not isinstance(mode, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'mode' (position 1) must be bool, "
                        f"not {type(mode).__name__}")
    _C._deterministic_algorithms(mode, bool(warn_only))


def are_deterministic_algorithms_enabled():
    return _C._deterministic_algorithms()[0]


def is_deterministic_algorithms_warn_only_enabled():
    return _C._deterministic_algorithms()[1]


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode):
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, "
                               f"but got {debug_mode}")
        debug_mode = _DEBUG_MODES[debug_mode]
    if not isinstance(debug_mode, int) or debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    enabled, warn_only = _C._deterministic_algorithms()
    return 0 if not enabled else 1 if warn_only else 2
