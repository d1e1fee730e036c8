"""The window functions of signal processing, as torch.hann_window, ...: 1-d tensors of
`window_length` values (periodic: the first window_length of a symmetric window one longer, the
form spectral analysis wants), made with loom's ops in the requested floating dtype."""

import math

import loom


def _check_number(name, arg, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}(): argument '{arg}' must be float, not {type(value).__name__}")


def _positions(name, window_length, periodic, dtype):
    """(dtype, N): the checked dtype (default: the default dtype) and the denominator of the
    positions n / N: the symmetric window's length less one, which is window_length for a periodic
    window. Lengths 0 and 1 are the callers' (an empty window, [1])."""
    if isinstance(window_length, bool) or not isinstance(window_length, int):
        raise TypeError(f"{name}(): argument 'window_length' must be int, not {type(window_length).__name__}")
    # Checked before any work: a wrong `periodic` once went on to compute a window of 2^31 values.
    if not isinstance(periodic, bool):
        raise TypeError(f"{name}(): argument 'periodic' must be bool, not {type(periodic).__name__}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    dtype = loom.get_default_dtype() if dtype is None else dtype
    if not isinstance(dtype, loom.dtype):
        raise TypeError(f"{name}(): argument 'dtype' must be dtype, not {type(dtype).__name__}")
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
    return dtype, (window_length if periodic else window_length - 1)


def _finish(values, requires_grad):
    return values.requires_grad_(True) if requires_grad else values


def _cosine_sum(name, coefficients, window_length, periodic, dtype, layout, device, requires_grad):
    """sum_k (-1)^k a_k cos(2 pi k n / N), the family hann, hamming and blackman belong to."""
    for arg, a in zip(("alpha", "beta"), coefficients):
        _check_number(name, arg, a)
    dtype, span = _positions(name, window_length, periodic, dtype)
    if window_length <= 1:
        return _finish(loom.ones(window_length, dtype=dtype, device=device), requires_grad)
    n = loom.arange(window_length, dtype=dtype, device=device)
    values = loom.zeros(window_length, dtype=dtype, device=device) + coefficients[0]
    for k, a in enumerate(coefficients[1:], start=1):
        values = values + ((-1) ** k * a) * (n * (2 * math.pi * k / span)).cos()
    return _finish(values, requires_grad)


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                requires_grad=False):
    return _cosine_sum("hann_window", (0.5, 0.5), window_length, periodic, dtype, layout, device, requires_grad)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   pin_memory=False, requires_grad=False):
    return _cosine_sum("hamming_window", (alpha, beta), window_length, periodic, dtype, layout, device, requires_grad)


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    return _cosine_sum("blackman_window", (0.42, 0.5, 0.08), window_length, periodic, dtype, layout, device,
                       requires_grad)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    """The triangle 1 - |2n / N - 1|."""
    dtype, span = _positions("bartlett_window", window_length, periodic, dtype)
    if window_length <= 1:
        return _finish(loom.ones(window_length, dtype=dtype, device=device), requires_grad)
    n = loom.arange(window_length, dtype=dtype, device=device)
    return _finish(1 - (n * (2.0 / span) - 1).abs(), requires_grad)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None, pin_memory=False,
                  requires_grad=False):
    """I0(beta sqrt(1 - (2n / N - 1)^2)) / I0(beta), I0 the modified Bessel function of order 0 (even:
    a negative beta gives the window of -beta), computed in the window's dtype (float16 and
    bfloat16 in float32) as PyTorch does, so that where I0 overflows the dtype the window is what
    PyTorch's is (0 where only I0(beta) is infinite, NaN where both are)."""
    dtype, span = _positions("kaiser_window", window_length, periodic, dtype)
    _check_number("kaiser_window", "beta", beta)
    if window_length <= 1:
        return _finish(loom.ones(window_length, dtype=dtype, device=device), requires_grad)
    beta = float(beta)  # an int past int64 (2**70) is a number like any other here
    work = dtype if dtype in (loom.float32, loom.float64) else loom.float32
    n = loom.arange(window_length, dtype=work, device=device)
    ratio = n * (2.0 / span) - 1
    argument = beta * (1 - ratio * ratio).clamp(min=0).sqrt()
    count = _i0_term_count(abs(beta))
    numerator = _i0_terms((argument / 2) * (argument / 2), count)
    # beta / 2 rounded to the dtype as PyTorch holds it (1e308 is inf in float32: no overflow error).
    half = loom.full((), beta / 2, dtype=loom.float64, device=device).to(work)
    return _finish((numerator / _i0_terms(half * half, count)).to(dtype), requires_grad)


def _i0_terms(x_half_squared, count):
    """sum_{k < count} ((x/2)^2)^k / (k!)^2."""
    term = loom.ones_like(x_half_squared)
    total = term
    for k in range(1, count):
        term = term * x_half_squared / (k * k)
        total = total + term
    return total


# Past this many terms every argument the series still changes has overflowed float64 already
# (I0(x) passes float64's range near x = 713, and the terms of such an x overflow before their
# 400th): a bound, so that beta = 1e308 costs 600 steps, not 10^308.
_I0_MAX_TERMS = 600


def _i0_term_count(limit):
    """How many terms of the series I0 of every |x| <= limit needs: at least up to its largest term
    (k near x / 2), then until a term no longer counts (float64)."""
    total, term, k = 1.0, 1.0, 1
    while k < _I0_MAX_TERMS and (k <= limit / 2 + 1 or term > 1e-17 * total):
        term = term * (limit / 2) * (limit / 2) / (k * k)  # no ** : a float power past the range raises
        total += term
        k += 1
    return k
