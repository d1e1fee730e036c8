"""loom.testing: torch.testing's assert_close (and the deprecated assert_allclose) and make_tensor,
for op test suites that compare a library against PyTorch case by case.

assert_close compares tensors, Python numbers and numpy arrays, and sequences and mappings of
them, element by element: |actual - expected| <= atol + rtol * |expected|, with PyTorch's default
tolerances by dtype, its checks of shape, dtype and device, and its message naming the worst
element. Lazy tensors are compared by value (a sync point)."""

import collections.abc
import math

import numpy as np

from loom import _C
from loom._dtype_info import finfo

# PyTorch's default (rtol, atol) by dtype; integers and bool compare exactly.
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7)}


def _dtype_name(dtype):
    return str(dtype).split(".")[-1]


def _as_tensor(x):
    if isinstance(x, _C.Tensor):
        return x
    if isinstance(x, np.ndarray):
        return _C.from_numpy(np.ascontiguousarray(x))
    if isinstance(x, (bool, int, float)):
        return _C.tensor(x)
    return None


def _values(t):
    """A float64 (or int64, for exact integers) numpy copy of t's values on the host."""
    host = t.detach().cpu()
    if _dtype_name(t.dtype) in ("bfloat16", "float16"):
        host = host.double()
    return host.numpy().copy()


def _fail(msg, default):
    if msg is None:
        raise AssertionError(default)
    raise AssertionError(msg(default) if callable(msg) else msg)


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg, where):
    if tuple(actual.shape) != tuple(expected.shape):
        _fail(msg, f"The values for attribute 'shape' do not match: {actual.shape} != {expected.shape}.{where}")
    if check_device and str(actual.device) != str(expected.device):
        _fail(msg, f"The values for attribute 'device' do not match: {actual.device} != {expected.device}.{where}")
    if check_dtype and actual.dtype != expected.dtype:
        _fail(msg, f"The values for attribute 'dtype' do not match: {actual.dtype} != {expected.dtype}.{where}")
    if check_stride and actual.stride() != expected.stride():
        _fail(msg, f"The values for attribute 'stride()' do not match: {actual.stride()} != "
                   f"{expected.stride()}.{where}")
    if rtol is None:
        # The looser dtype's tolerances, as PyTorch picks them when the dtypes differ.
        pairs = [_TOLERANCES.get(_dtype_name(t.dtype), (0.0, 0.0)) for t in (actual, expected)]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    a, e = _values(actual), _values(expected)
    if a.size == 0:
        return
    exact = not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(e.dtype, np.floating))
    if exact:
        bad = a != e
    else:
        a, e = a.astype(np.float64), e.astype(np.float64)
        with np.errstate(invalid="ignore"):
            close = np.abs(a - e) <= atol + rtol * np.abs(e)
        close |= a == e  # equal infinities
        if equal_nan:
            close |= np.isnan(a) & np.isnan(e)
        bad = ~close
    if not bad.any():
        return
    kind = "Scalars" if a.ndim == 0 else "Tensor-likes"
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        abs_diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
        rel_diff = abs_diff / np.abs(e.astype(np.float64))
    abs_diff = np.where(np.isnan(abs_diff), np.inf, abs_diff)
    rel_diff = np.where(np.isnan(rel_diff), np.inf, rel_diff)
    worst_abs = np.unravel_index(int(np.argmax(abs_diff)), a.shape) if a.ndim else ()
    worst_rel = np.unravel_index(int(np.argmax(rel_diff)), a.shape) if a.ndim else ()
    lines = [f"{kind} are not {'equal' if exact else 'close'}!", ""]
    if a.ndim:
        n_bad, n = int(bad.sum()), bad.size
        lines.append(f"Mismatched elements: {n_bad} / {n} ({100.0 * n_bad / n:.1f}%)")
    at = lambda idx: f" at index {tuple(int(i) for i in idx)}" if a.ndim else ""  # noqa: E731
    allowed_abs = "" if exact else f" (up to {atol} allowed)"
    allowed_rel = "" if exact else f" (up to {rtol} allowed)"
    lines.append(f"Greatest absolute difference: {abs_diff[worst_abs]}{at(worst_abs)}{allowed_abs}")
    lines.append(f"Greatest relative difference: {rel_diff[worst_rel]}{at(worst_rel)}{allowed_rel}")
    _fail(msg, "\n".join(lines) + where)


def _compare(actual, expected, path, options):
    where = f"\nThe failure occurred for item {path}" if path else ""
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        if set(actual) != set(expected):
            _fail(options["msg"], f"The keys of the mappings do not match: {sorted(map(str, actual))} != "
                                  f"{sorted(map(str, expected))}.{where}")
        for k in expected:
            _compare(actual[k], expected[k], f"{path}[{k!r}]", options)
        return
    sequence = (collections.abc.Sequence,)
    if isinstance(actual, sequence) and isinstance(expected, sequence) and not isinstance(actual, str):
        if len(actual) != len(expected):
            _fail(options["msg"], f"The length of the sequences mismatch: {len(actual)} != {len(expected)}{where}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, f"{path}[{i}]", options)
        return
    a, e = _as_tensor(actual), _as_tensor(expected)
    if a is None or e is None:
        if actual is None and expected is None:
            return
        if actual == expected:
            return
        raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.")
    if not isinstance(actual, _C.Tensor) or not isinstance(expected, _C.Tensor):
        # A number against a number (or array): compared by value, as PyTorch's number pair.
        if isinstance(actual, (bool, int, float)) and isinstance(expected, (bool, int, float)):
            if type(actual) is not type(expected) and options["check_dtype"]:
                _fail(options["msg"], f"The values for attribute 'type' do not match: {type(actual)} != "
                                      f"{type(expected)}.{where}")
            rtol, atol = options["rtol"], options["atol"]
            if rtol is None:
                rtol, atol = (0.0, 0.0) if isinstance(expected, (bool, int)) else (1.3e-6, 1e-5)
            if actual == expected or (options["equal_nan"] and math.isnan(actual) and math.isnan(expected)):
                return
            if abs(actual - expected) <= atol + rtol * abs(expected):
                return
            _fail(options["msg"], f"Scalars are not close!\n\nExpected {expected} but got {actual}.\n"
                                  f"Absolute difference: {abs(actual - expected)} (up to {atol} allowed)\n"
                                  f"Relative difference: {abs(actual - expected) / abs(expected) if expected else math.inf}"
                                  f" (up to {rtol} allowed){where}")
        options = dict(options, check_device=False)
    _compare_tensors(a, e, options["rtol"], options["atol"], options["equal_nan"], options["check_device"],
                     options["check_dtype"], options["check_stride"], options["msg"], where)


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Raises AssertionError unless actual and expected are close (torch.testing.assert_close)."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{'rtol' if rtol is None else 'atol'}.")
    options = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device, check_dtype=check_dtype,
                   check_stride=check_stride, msg=msg)
    _compare(actual, expected, "", options)


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """The deprecated form: expected is converted to actual's dtype and device first."""
    if not isinstance(actual, _C.Tensor):
        actual = _C.tensor(actual)
    if not isinstance(expected, _C.Tensor):
        expected = _C.tensor(expected, dtype=actual.dtype)
    expected = expected.to(actual.device).to(actual.dtype)
    if rtol is None and atol is None:
        rtol, atol = _TOLERANCES.get(_dtype_name(actual.dtype), (0.0, 0.0))
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, msg=msg or None)


def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False):
    """A tensor of random values in [low, high) (defaults: [-9, 9) for numbers, bool any value),
    as torch.testing.make_tensor; noncontiguous=True gives a view with a stride of 2 in its last
    dim."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    name = _dtype_name(dtype)
    if name == "bool":
        t = _C.rand(shape, device="cpu") < 0.5
    else:
        lo = -9 if low is None else low
        hi = 9 if high is None else high
        if dtype.is_floating_point:
            t = (_C.rand(shape, dtype=_C.float64) * (hi - lo) + lo).to(dtype)
        else:
            lo = max(lo, 0) if name == "uint8" else lo
            t = _C.randint(int(math.ceil(lo)), int(math.ceil(hi)), shape, dtype=dtype)
        if exclude_zero:
            one = finfo(dtype).tiny if dtype.is_floating_point else 1
            t = _C.where(t == 0, one, t).to(dtype)
    if noncontiguous and t.numel() > 1:
        wide = _C.empty(tuple(shape[:-1]) + (shape[-1] * 2,), dtype=dtype)
        wide[..., ::2] = t
        t = wide[..., ::2]
    t = t.to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t
