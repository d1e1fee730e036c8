"""torch.* tensor functions written over loom's ops: set membership (isin), counting (bincount,
histc), products and integer math (cross, gcd, lcm), matrix builders (diagflat, vander),
integration (trapezoid, cumulative_trapezoid), statistics (cov, corrcoef), renorm, frexp,
nextafter and the scatter forms of views (select_scatter, slice_scatter, diagonal_scatter).

Each composes ops of the op library, so it runs on every device, records lazily and
differentiates through those ops (where PyTorch differentiates it). Arguments are checked first,
with PyTorch's messages. Functions whose result size depends on values (bincount, histc's range
from the data, gcd's loop) read those values, a sync on the lazy device, as PyTorch does on a GPU.
"""

import collections
import warnings

import loom


def _floating(t):
    return t.is_floating_point()


def _as_tensor(value, like):
    if isinstance(value, loom.Tensor):
        return value
    return loom.tensor(value, device=like.device if isinstance(like, loom.Tensor) else None)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of `elements` is in `test_elements` (either may be a number), as a bool
    tensor of elements' shape; `invert` asks the opposite. Compared in the promoted dtype, so NaN is
    never in anything."""
    if not isinstance(elements, loom.Tensor) and not isinstance(test_elements, loom.Tensor):
        raise TypeError("isin() expects at least one of elements and test_elements to be a Tensor")
    elements_t = _as_tensor(elements, test_elements)
    test_t = _as_tensor(test_elements, elements_t)
    common = loom.result_type(elements_t, test_t)
    values = elements_t.to(common)
    pool = test_t.to(common).flatten()
    if pool.numel() == 0:
        found = loom.zeros(values.shape, dtype=loom.bool, device=values.device)
    else:
        pool = pool.sort().values
        at = loom.searchsorted(pool, values.flatten()).clamp(max=pool.numel() - 1)
        found = (pool[at] == values.flatten()).reshape(values.shape)
    return ~found if invert else found


def bincount(input, weights=None, minlength=0):
    """How often each value 0, 1, ... occurs in a 1-d tensor of non-negative integers (the sum of
    `weights` at its positions with weights): max(input) + 1 counts, at least `minlength`."""
    if input.is_floating_point() or input.dtype == loom.bool:
        raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs, got dtype {input.dtype}")
    if input.dim() != 1:
        raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs, got shape {list(input.shape)}")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and (weights.dim() != 1 or weights.shape[0] != input.shape[0]):
        raise RuntimeError(f"weights should be 1-d and have the same length as input: input {list(input.shape)}, "
                           f"weights {list(weights.shape)}")
    if input.numel() and int(input.min()) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs, got a negative value")
    length = max(int(input.max()) + 1 if input.numel() else 0, minlength)
    if weights is None:
        dtype, source = loom.int64, loom.ones(input.shape, dtype=loom.int64, device=input.device)
    else:
        dtype = weights.dtype if weights.is_floating_point() else loom.float64
        source = weights.to(dtype)
    counts = loom.zeros(length, dtype=dtype, device=input.device)
    return counts.scatter_add(0, input.long(), source)


def histc(input, bins=100, min=0, max=0):
    """A histogram of `bins` equal bins over [min, max] (min == max: the data's range, widened by 1
    each way if that is a point); values outside are left out, max falls in the last bin."""
    if not input.is_floating_point():
        raise RuntimeError(f"histc is only implemented for floating-point inputs, got {input.dtype}")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    low, high = float(min), float(max)
    if low > high:
        raise RuntimeError(f"torch.histc: max must be larger than min (min={low}, max={high})")
    with loom.no_grad():
        values = input.detach().flatten()
        if low == high and values.numel():
            low, high = float(values.min()), float(values.max())
        if low == high:
            low, high = low - 1, high + 1
        if not (low == low and high == high and abs(low) != float("inf") and abs(high) != float("inf")):
            raise RuntimeError(f"torch.histc: range of [{low}, {high}] is not finite")
        inside = (values >= low) & (values <= high)
        position = ((values - low) / (high - low) * bins).floor().clamp(0, bins - 1)
        position = loom.where(inside, position, loom.zeros_like(position)).long()
        counts = loom.zeros(bins, dtype=input.dtype, device=input.device)
        return counts.scatter_add(0, position, inside.to(input.dtype))


def cross(input, other, dim=None):
    """The cross product of 3-vectors along `dim` (None: the first dim of size 3, as PyTorch 1.13,
    with its deprecation warning), the operands broadcast."""
    shape = loom.broadcast_shapes(input.shape, other.shape)
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                      "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree "
                      "with that of linalg.cross in a future release.", stacklevel=2)
        dim = next((d for d, size in enumerate(shape) if size == 3), None)
        if dim is None:
            raise RuntimeError(f"no dimension of size 3 in input (shapes {list(input.shape)} and "
                               f"{list(other.shape)})")
    return _cross(input, other, dim, shape)


def linalg_cross(input, other, *, dim=-1):
    """loom.linalg.cross: cross along `dim` (default the last)."""
    return _cross(input, other, dim, loom.broadcast_shapes(input.shape, other.shape))


def _cross(input, other, dim, shape):
    if input.dim() != other.dim():
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions, got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    if not -len(shape) <= dim < len(shape):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-len(shape)}, {len(shape) - 1}], "
                         f"but got {dim})")
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim % len(shape)} must have length 3. Got "
                           f"{input.shape[dim]} and {other.shape[dim]}")
    a, b = input.expand(shape), other.expand(shape)
    # Component i is a[i+1] b[i+2] - a[i+2] b[i+1] (indices mod 3): rolls line them up.
    return a.roll(-1, dim) * b.roll(-2, dim) - a.roll(-2, dim) * b.roll(-1, dim)


def _integer_pair(name, input, other):
    for t in (input, other):
        if t.is_floating_point() or t.dtype == loom.bool:
            raise RuntimeError(f"{name} is only implemented for integer tensors, got {input.dtype} and {other.dtype}")
    dtype = loom.result_type(input, other)
    shape = loom.broadcast_shapes(input.shape, other.shape)
    return input.to(dtype).expand(shape), other.to(dtype).expand(shape)


def gcd(input, other):
    """The greatest common divisor of integers, elementwise (non-negative; gcd(0, 0) = 0). Euclid's
    algorithm over the whole tensor, until every remainder is 0."""
    a, b = _integer_pair("gcd", input, other)
    a, b = a.abs(), b.abs()
    while True:
        nonzero = b != 0
        if not bool(nonzero.any()):
            return a.clone()
        divisor = loom.where(nonzero, b, loom.ones_like(b))
        a, b = loom.where(nonzero, b, a), loom.where(nonzero, a % divisor, b)


def lcm(input, other):
    """The least common multiple of integers, elementwise (non-negative; 0 when either is 0)."""
    a, b = _integer_pair("lcm", input, other)
    g = gcd(a, b)
    safe = loom.where(g == 0, loom.ones_like(g), g)
    return loom.where(g == 0, loom.zeros_like(g), (a // safe * b).abs())


def gcd_(input, other):
    return input.copy_(gcd(input, other))


def lcm_(input, other):
    return input.copy_(lcm(input, other))


def diagflat(input, offset=0):
    """A 2-d tensor with the flattened input on diagonal `offset`, zeros elsewhere."""
    return loom.diag(input.flatten(), offset)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of a 1-d x: columns x^(N-1), ..., x^0 (increasing: x^0 first).
    Integer and bool inputs give int64, as PyTorch."""
    if x.dim() != 1:
        raise RuntimeError(f"x must be a one-dimensional tensor, got shape {list(x.shape)}")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError(f"N must be non-negative, got {n}")
    dtype = x.dtype if x.is_floating_point() else loom.int64
    columns = [loom.ones((x.shape[0], min(n, 1)), dtype=dtype, device=x.device)]
    if n > 1:
        columns.append(x.to(dtype).unsqueeze(1).expand(x.shape[0], n - 1).cumprod(1))
    result = loom.cat(columns, 1)
    return result if increasing else result.flip(1)


def _spacings(y, x, dx, dim, name):
    """The widths between y's sample points along dim: x's differences (x 1-d, or broadcasting
    with y), or dx."""
    if x is None:
        return dx
    if x.dim() == 1:
        if x.shape[0] != y.shape[dim]:
            raise RuntimeError(f"{name}: There must be one `x` value for each sample point (x has {x.shape[0]}, "
                               f"y has {y.shape[dim]} along dim {dim})")
        shape = [1] * y.dim()
        shape[dim] = max(y.shape[dim] - 1, 0)
        return x.diff().reshape(shape)
    return x.diff(dim=dim)


def _check_dim(y, dim, name):
    if y.dim() == 0:
        raise IndexError(f"{name}: Dimension specified as {dim} but tensor has no dimensions")
    if not -y.dim() <= dim < y.dim():
        raise IndexError(f"Dimension out of range (expected to be in range of [{-y.dim()}, {y.dim() - 1}], but got "
                         f"{dim})")
    return dim % y.dim()


def _pieces(y, x, dx, dim, name):
    dim = _check_dim(y, dim, name)
    n = y.shape[dim]
    if n == 0:
        return None, dim
    left, right = y.narrow(dim, 0, n - 1), y.narrow(dim, 1, n - 1)
    return _spacings(y, x, dx, dim, name) * (left + right) / 2, dim


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along dim: sample points x (1-d, or broadcasting with y), or a spacing
    dx (default 1)."""
    if x is not None and dx is not None:
        raise TypeError("trapezoid() takes x or dx, not both")
    pieces, dim = _pieces(y, x, 1 if dx is None else dx, dim, "trapezoid")
    if pieces is None:
        return loom.zeros(y.shape[:dim] + y.shape[dim + 1:], dtype=y.dtype if y.is_floating_point() else
                          loom.get_default_dtype(), device=y.device)
    return pieces.sum(dim)


def trapz(y, x=None, *, dx=None, dim=-1):
    """trapezoid's older name."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal integrals along dim (one fewer than the samples)."""
    if x is not None and dx is not None:
        raise TypeError("cumulative_trapezoid() takes x or dx, not both")
    pieces, dim = _pieces(y, x, 1 if dx is None else dx, dim, "cumulative_trapezoid")
    if pieces is None:
        return loom.zeros(y.shape, dtype=y.dtype if y.is_floating_point() else loom.get_default_dtype(),
                          device=y.device)
    return pieces.cumsum(dim)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in input's rows (a 1-d input: one variable, a 0-d
    result), observations in its columns, weighted by integer frequencies and / or observation
    weights, divided by the weight sum less `correction`."""
    if input.dim() > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.dim()} dimensions")
    x = input if input.dim() == 2 else input.reshape(1, -1)
    observations = x.shape[1]
    if not (x.is_floating_point() or x.is_complex()):
        x = x.to(loom.get_default_dtype())
    weights = None
    for name, w in (("fweights", fweights), ("aweights", aweights)):
        if w is None:
            continue
        if w.dim() > 1:
            raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                               f"{w.dim()} dimensions")
        if w.numel() != observations:
            raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the input "
                               f"but got {w.numel()} != {observations}")
        if name == "fweights" and w.is_floating_point():
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with {w.dtype} dtype")
        if name == "aweights" and not w.is_floating_point():
            raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights with "
                               f"{w.dtype} dtype")
        weights = w if weights is None else weights * w
    if weights is None:
        total = observations
        mean = x.mean(1, keepdim=True)
        scale = total - correction
    else:
        weights = weights.to(x.dtype)
        total = weights.sum()
        mean = (x * weights).sum(1, keepdim=True) / total
        scale = total - correction if aweights is None else \
            total - correction * (weights * aweights.to(x.dtype)).sum() / total
    if float(scale) <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0", stacklevel=2)
        scale = scale * 0 if isinstance(scale, loom.Tensor) else 0
    centered = x - mean
    product = (centered if weights is None else centered * weights) @ centered.t()
    result = product / scale
    return result.squeeze() if input.dim() < 2 else result


def corrcoef(input):
    """Pearson's correlation coefficients of the variables in input's rows (cov normalized by the
    standard deviations, clipped to [-1, 1])."""
    c = cov(input)
    if c.dim() == 0:
        return c / c
    std = c.diagonal().sqrt()
    return (c / std.unsqueeze(1) / std.unsqueeze(0)).clamp(-1, 1)


def renorm(input, p, dim, maxnorm):
    """input with each slice along dim (input.select(dim, i)) whose p-norm exceeds maxnorm scaled
    down to norm maxnorm."""
    if p <= 0:
        raise RuntimeError(f"renorm: non-positive-norm not supported (p={p})")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.dim() <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.dim()} dimensions")
    dim = _check_dim(input, dim, "renorm")
    others = [d for d in range(input.dim()) if d != dim]
    norms = loom.linalg.vector_norm(input, p, dim=others, keepdim=True)
    factor = loom.where(norms > maxnorm, maxnorm / (norms + 1e-7), loom.ones_like(norms))
    return input * factor


def renorm_(input, p, dim, maxnorm):
    return input.copy_(renorm(input, p, dim, maxnorm))


def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2 ** exponent, |mantissa| in [0.5, 1) (0, inf and
    NaN: themselves with exponent 0); exponent is int32."""
    if not input.is_floating_point():
        raise RuntimeError(f"torch.frexp() only supports floating-point dtypes, got {input.dtype}")
    wide = input.detach().double()
    finite = wide.isfinite() & (wide != 0)
    magnitude = loom.where(finite, wide.abs(), loom.ones_like(wide))
    exponent = magnitude.log2().floor() + 1
    # log2 may round across a power of two: one step either way puts the mantissa in [0.5, 1).
    mantissa = _times_power_of_two(magnitude, -exponent)
    exponent = exponent + (mantissa >= 1).double() - (mantissa < 0.5).double()
    exponent = loom.where(finite, exponent, loom.zeros_like(exponent))
    mantissa = _times_power_of_two(input, -exponent)
    return _Frexp(mantissa, exponent.int())


def _times_power_of_two(x, exponent):
    """x * 2 ** exponent (exponent a float64 tensor of whole numbers) in two factors, each a power
    of two x's dtype holds: for a subnormal, 2 ** -exponent alone would overflow."""
    half = (exponent / 2).floor()
    one = loom.ones_like(half)
    return x * loom.ldexp(one, half).to(x.dtype) * loom.ldexp(one, exponent - half).to(x.dtype)


# frexp's named pair, as torch.return_types.frexp (the op table's pairs are named the same way).
_Frexp = collections.namedtuple("frexp", "mantissa exponent", module="loom.return_types")


def select_scatter(input, src, dim, index):
    """input with input.select(dim, index) replaced by src (of that slice's shape)."""
    return _scatter_into(input, src, lambda t: t.select(dim, index))


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """input with the slice start:end:step along dim replaced by src (of that slice's shape)."""
    return _scatter_into(input, src, lambda t: loom.Tensor.__getitem__(t, (slice(None),) * (dim % max(t.dim(), 1)) +
                                                                          (slice(start, end, step),)))


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """input with input.diagonal(offset, dim1, dim2) replaced by src (of that diagonal's shape)."""
    return _scatter_into(input, src, lambda t: t.diagonal(offset, dim1, dim2))


def _scatter_into(input, src, view_of):
    region = view_of(input)
    if tuple(region.shape) != tuple(src.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(region.shape)}")
    out = input.clone()
    view_of(out).copy_(src)
    return out
