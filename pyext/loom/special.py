"""loom.special: the functions of torch.special, from loom's ops (so they record lazily, fuse and
differentiate where PyTorch's do). The Bessel functions, erfcx and zeta are elementwise primitives
(lazy/special_math.h has their algorithms); polygamma is built on zeta. Not here yet: the Bessel
functions J and Y, airy_ai and the orthogonal polynomials."""

import math

import loom
from loom import _argcheck

expit = loom.sigmoid
logit = loom.logit
erf = loom.erf
erfc = loom.erfc
erfinv = loom.erfinv
exp2 = loom.exp2
expm1 = loom.expm1
log1p = loom.log1p
gammaln = loom.lgamma
digamma = loom.digamma
psi = loom.digamma
xlogy = loom.xlogy
sinc = loom.sinc
round = loom.round  # noqa: A001
logsumexp = loom.logsumexp


i0 = loom.i0
i1 = loom._C._special_i1
i0e = loom._C._special_i0e
i1e = loom._C._special_i1e
erfcx = loom._C._special_erfcx
modified_bessel_i0 = loom._C._special_modified_bessel_i0
modified_bessel_i1 = loom._C._special_modified_bessel_i1
modified_bessel_k0 = loom._C._special_modified_bessel_k0
modified_bessel_k1 = loom._C._special_modified_bessel_k1
scaled_modified_bessel_k0 = loom._C._special_scaled_modified_bessel_k0
scaled_modified_bessel_k1 = loom._C._special_scaled_modified_bessel_k1
spherical_bessel_j0 = loom._C._special_spherical_bessel_j0
polygamma = loom.polygamma


def zeta(input, other):
    """The Hurwitz zeta function zeta(s, q) = sum_{k >= 0} (q + k)^-s, for
    tensors or one Python number. Its gradient exists for other (q) only, as PyTorch's."""
    if not isinstance(input, loom.Tensor) and not isinstance(other, loom.Tensor):
        raise TypeError("zeta(): at least one of input and other must be a Tensor")
    return loom._C._special_zeta(input, other)


def softmax(input, dim, *, dtype=None):
    return loom.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    return loom.log_softmax(input, dim, dtype=dtype)


def _float(fn, x):
    """x in a floating dtype (integers and bools in the default one); a non-tensor is PyTorch's
    TypeError naming the function (it was an AttributeError on `.dtype`)."""
    _argcheck.tensor(fn, "input", x, 1)
    return x if x.dtype.is_floating_point else x.to(loom.get_default_dtype())


def xlog1py(input, other):
    """input * log1p(other), and 0 where input is 0 and other is not NaN (even where log1p(other) is
    infinite or NaN). The gradient for other is 0 where input is 0 (PyTorch's is NaN where other is
    also -1); the one for input is log1p(other) where that is finite."""
    input, other = loom.broadcast_tensors(*_as_tensors("xlog1py", ("input", "other"), (input, other)))
    # Where input is 0, an other outside log1p's finite range is replaced by 0: the product is then
    # the 0 wanted, and no infinity reaches either gradient. No where() around the product, so the
    # gradient for input at 0 is still log1p(other).
    outside = (input == 0) & ((other <= -1) | (other == math.inf))
    return input * loom.log1p(other.masked_fill(outside, 0))


def entr(input):
    """-x log x elementwise: 0 at 0, -inf below 0, NaN at NaN. Its gradient at exactly 0 is 0 here,
    where PyTorch's is the one-sided limit +inf."""
    x = _float("special_entr", input)
    positive = x > 0
    safe = loom.where(positive, x, loom.ones_like(x))
    # Not positive takes in NaN too: it keeps its NaN (x * 0) where 0 was once written for it.
    body = loom.where(positive, -x * loom.log(safe), x * 0)
    return body.masked_fill(x < 0, -math.inf)


def ndtr(input):
    """The standard normal distribution function."""
    return 0.5 * loom.erfc(_float("special_ndtr", input) * -math.sqrt(0.5))


def ndtri(input):
    """The inverse of ndtr."""
    return math.sqrt(2.0) * loom.erfinv(2 * _float("special_ndtri", input) - 1)


def log_ndtr(input):
    """log(ndtr(x)), accurate in both tails. Above 0, log1p(-ndtr(-x)) keeps the tiny distance from
    1 that ndtr(x) rounds away. Far in the lower tail (below -20 in double precision, -10 in single),
    where ndtr underflows, the asymptotic series of the Mills ratio:
    log ndtr(x) = -x^2/2 - log(-x) - log(2 pi)/2 + log(1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8 - 945/x^10)."""
    x = _float("special_log_ndtr", input)
    t = -20.0 if x.dtype == loom.float64 else -10.0
    tail, upper = x < t, x > 0
    # Each branch sees only inputs of its own range, so none makes infinities for the others'
    # gradients.
    lo = loom.where(tail, x, loom.full_like(x, t))
    mid = x.clamp(min=t, max=0.0)
    hi = loom.where(upper, x, loom.zeros_like(x))
    z = lo.reciprocal().square()
    series = 1 - z * (1 - z * (3 - z * (15 - z * (105 - 945 * z))))
    asymptotic = -0.5 * lo.square() - loom.log(-lo) - 0.5 * math.log(2 * math.pi) + loom.log(series)
    body = loom.log(0.5 * loom.erfc(mid * -math.sqrt(0.5)))
    above = loom.log1p(-0.5 * loom.erfc(hi * math.sqrt(0.5)))
    return loom.where(tail, asymptotic, loom.where(upper, above, body))


_MULTIGAMMALN_MAX_P = 1 << 24


def multigammaln(input, p):
    """The log of the multivariate gamma function of dimension p."""
    if p < 1:
        raise ValueError(f"p has to be greater than or equal to 1, got {p}")
    x = _float("special_multigammaln", input)
    # A hostile p (2**31) would sum p lgamma terms per element from an arange of p values (hours,
    # gigabytes; PyTorch 1.13 too, which checks no domain either): refused before any work.
    if p > _MULTIGAMMALN_MAX_P:
        raise RuntimeError(f"multigammaln: p={p} would sum {p} lgamma terms per element; at most "
                           f"{_MULTIGAMMALN_MAX_P} are supported")
    j = loom.arange(p, dtype=x.dtype, device=x.device)
    return p * (p - 1) / 4 * math.log(math.pi) + loom.lgamma(x.unsqueeze(-1) - j / 2).sum(-1)


def _as_tensors(fn, names, values):
    """The values (tensors or numbers, at least one a tensor) as tensors of their promoted dtype
    (a floating one: these functions give the default float dtype for integer arguments) on the
    first tensor's device. Computing in the promoted dtype matters: log1p of a float16 argument
    next to a float32 one is float32's log1p in PyTorch, not float16's."""
    _argcheck.tensors_or_numbers(fn, names, values)
    first = next(v for v in values if isinstance(v, loom.Tensor))
    dtype = loom.result_type(*values)
    if not dtype.is_floating_point:
        dtype = loom.get_default_dtype()
    return [v.to(dtype) if isinstance(v, loom.Tensor) else loom.tensor(v, dtype=dtype, device=first.device)
            for v in values]


__all__ = ["digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammaln", "i0", "i0e",
           "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp", "modified_bessel_i0",
           "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "multigammaln", "ndtr", "ndtri",
           "polygamma", "psi", "round", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "sinc", "softmax",
           "spherical_bessel_j0", "xlog1py", "xlogy", "zeta"]
