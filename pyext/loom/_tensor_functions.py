"""torch.* functions PyTorch has no Tensor method for, written over loom's ops: set membership
(isin), the Vandermonde matrix (vander), the trapezoidal rule (trapezoid, trapz,
cumulative_trapezoid), finite-difference derivatives (gradient) and histogram. (The ones with
methods, bincount, cov, cross, frexp, ..., are op-table rows: pyext/op_rows_*.cpp.)

Each composes ops of the op library, so it runs on every device, records lazily and
differentiates through those ops. Arguments are checked first, with PyTorch's messages.
"""

import collections

import loom
from loom import _argcheck


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


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of a 1-d x: columns x^(N-1), ..., x^0 (increasing: x^0 first).
    Integer and bool inputs give int64, as PyTorch."""
    _argcheck.tensor("vander", "x", x, 1)
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
    _argcheck.tensor(name, "y", y, 1)
    _argcheck.tensor(name, "x", x, 2, optional=True)
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
        # Nothing to integrate: zeros of y's own dtype, integers and bools included, as PyTorch's
        # (its cumulative form gives the default float dtype: cumulative_trapezoid below).
        return loom.zeros(y.shape[:dim] + y.shape[dim + 1:], dtype=y.dtype, device=y.device)
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


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """Estimates of input's derivatives along each dim (or the dims given), one tensor per dim:
    central differences inside, one-sided differences of `edge_order` (1 or 2) at the ends.
    spacing: one number for every dim, a number per dim, or per dim a 1-d tensor of coordinates
    (uneven samples; edge_order 1 only)."""
    _argcheck.tensor("gradient", "input", input, 1)
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2, got {edge_order}")
    dims = list(range(input.dim())) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    dims = [_check_dim(input, d, "gradient") for d in dims]
    if spacing is None:   # PyTorch's signature default: unit spacing along every dim
        spacing = 1
    if isinstance(spacing, (int, float, loom.Tensor)) and not (isinstance(spacing, loom.Tensor) and spacing.dim()):
        spacing = [spacing] * len(dims)
    spacing = list(spacing)
    if len(spacing) == 1 and len(dims) > 1 and not isinstance(spacing[0], loom.Tensor):
        spacing = spacing * len(dims)
    if len(spacing) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or its length to match the "
                           f"number of dimensions ({len(dims)}), but got {len(spacing)}")
    values = input if input.is_floating_point() else input.to(loom.get_default_dtype())
    for d in dims:
        if values.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    return tuple(_gradient_along(values, d, h, edge_order) for d, h in zip(dims, spacing))


def _gradient_along(f, dim, h, edge_order):
    n = f.shape[dim]

    def at(start, length=1):
        return f.narrow(dim, start, length)
    if isinstance(h, loom.Tensor) and h.dim() == 1:
        if h.shape[0] != n:
            raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and have as many "
                               f"coordinates as the input's dim {dim} ({n}), got {h.shape[0]}")
        if edge_order == 2:
            raise NotImplementedError("loom's gradient takes edge_order=2 with even spacing only (coordinates: "
                                      "edge_order=1)")
        shape = [1] * f.dim()
        shape[dim] = -1
        x = h.to(f.dtype).reshape(shape)
        steps = x.diff(dim=dim)
        left, right = steps.narrow(dim, 0, n - 2), steps.narrow(dim, 1, n - 2)
        inner = (left ** 2 * at(2, n - 2) - right ** 2 * at(0, n - 2) + (right ** 2 - left ** 2) * at(1, n - 2)) / \
            (left * right * (left + right))
        first = (at(1) - at(0)) / steps.narrow(dim, 0, 1)
        last = (at(n - 1) - at(n - 2)) / steps.narrow(dim, n - 2, 1)
        return loom.cat([first, inner, last], dim)
    h = float(h)
    inner = (at(2, n - 2) - at(0, n - 2)) / (2 * h)
    if edge_order == 1:
        first, last = (at(1) - at(0)) / h, (at(n - 1) - at(n - 2)) / h
    else:
        first = (-1.5 * at(0) + 2 * at(1) - 0.5 * at(2)) / h
        last = (0.5 * at(n - 3) - 2 * at(n - 2) + 1.5 * at(n - 1)) / h
    return loom.cat([first, inner, last], dim)


# histogram's named pair, as torch.return_types.histogram.
_Histogram = collections.namedtuple("histogram", "hist bin_edges", module="loom.return_types")


def histogram(input, bins, *, range=None, weight=None, density=False):
    """(hist, bin_edges): counts (or summed weights) of input's values in `bins` equal bins over
    `range` (default: the data's, widened by 0.5 each way if that is a point), or in the bins
    between the edges of a 1-d tensor `bins`. Each bin holds [left, right) but the last, which
    also holds its right edge; values outside are left out. density divides by the total and the
    bin widths."""
    _argcheck.tensor("histogram", "input", input, 1)
    _argcheck.tensor("histogram", "weight", weight, optional=True)
    if not input.is_floating_point():
        raise RuntimeError(f"torch.histogram(): input must be a floating-point tensor, got {input.dtype}")
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise RuntimeError(f"torch.histogram(): if weight tensor is provided it should have the same shape as the "
                           f"input tensor excluding its innermost dimension, got {list(weight.shape)} for input "
                           f"{list(input.shape)}")
    values = input.detach().flatten()
    if isinstance(bins, loom.Tensor):
        if bins.dim() != 1 or bins.numel() < 1:
            raise RuntimeError(f"torch.histogram(): bins must be a 1-d tensor of at least one edge, got shape "
                               f"{list(bins.shape)}")
        edges = bins.to(input.dtype)
    else:
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        if range is not None:
            low, high = float(range[0]), float(range[1])
        elif values.numel():
            low, high = float(values.min()), float(values.max())
        else:
            low, high = 0.0, 0.0
        if low > high:
            raise RuntimeError(f"torch.histogram(): min should not exceed max, but got min {low} max {high}")
        if low == high:
            low, high = low - 0.5, high + 0.5
        edges = loom.linspace(low, high, bins + 1, dtype=input.dtype, device=input.device)
    count = edges.numel() - 1
    with loom.no_grad():
        inside = (values >= edges[0]) & (values <= edges[-1])
        position = (loom.searchsorted(edges, values, right=True) - 1).clamp(0, max(count - 1, 0))
        source = inside.to(input.dtype) if weight is None else weight.detach().flatten().to(input.dtype) * inside
        hist = loom.zeros(count, dtype=input.dtype, device=input.device).scatter_add(0, position, source)
        if density:
            hist = hist / (hist.sum() * edges.diff())
    return _Histogram(hist, edges)


# lu_unpack's named triple, as torch.return_types.lu_unpack.
_LuUnpack = collections.namedtuple("lu_unpack", "P L U", module="loom.return_types")


def _permutation_of_pivots(pivots, m):
    """LAPACK's pivots (1-based: row i was swapped with row pivots[i], in order) as the permutation
    perm with A[perm[j]] = (LU)[j], for every batch, by one gather and two scatters per swap (ops
    that record on the lazy device, so building P never reads the pivots on the host)."""
    batch = tuple(pivots.shape[:-1])
    perm = loom.arange(m, device=pivots.device).expand(*batch, m).contiguous()
    swaps = pivots.long() - 1
    for i in range(pivots.shape[-1]):
        j = swaps[..., i:i + 1]
        here = loom.full(batch + (1,), i, dtype=loom.int64, device=pivots.device)
        row_i, row_j = perm[..., i:i + 1], perm.gather(-1, j)
        perm = perm.scatter(-1, j, row_i).scatter(-1, here, row_j)
    return perm


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) with A = P @ L @ U from linalg.lu_factor's packed (LU, pivots) of an m x n A
    (batched): L m x k unit lower-triangular, U k x n upper-triangular (k = min(m, n)), P the m x m
    permutation. L and U are views of LU's triangles, so gradients reach LU_data through them; P
    has none. unpack_data / unpack_pivots False leave L, U / P empty. On the CPU pivots out of
    [1, m] raise, as PyTorch's; on the lazy device they are not read (that would sync). No out=
    (loom's ops take none)."""
    _argcheck.tensors("lu_unpack", LU_data=LU_data, LU_pivots=LU_pivots)
    unpack_data = _argcheck.boolean("lu_unpack", "unpack_data", unpack_data)
    unpack_pivots = _argcheck.boolean("lu_unpack", "unpack_pivots", unpack_pivots)
    if LU_data.dim() < 2:
        raise RuntimeError(f"torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(LU_data.shape)} instead")
    if LU_pivots.dtype != loom.int32 or not LU_pivots.is_contiguous():
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.\n"
                           "Note: this function is intended to be used with the output produced by "
                           "torch.linalg.lu_factor")
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    if unpack_pivots and tuple(LU_pivots.shape) != tuple(LU_data.shape[:-2]) + (k,):
        raise RuntimeError(f"torch.lu_unpack: Expected LU_pivots.size() == {list(LU_data.shape[:-2]) + [k]}, got "
                           f"{list(LU_pivots.shape)}: pivots must come from lu_factor of LU_data's matrix")
    empty = loom.empty(0, dtype=LU_data.dtype, device=LU_data.device)
    if unpack_data:
        unit = loom.eye(m, k, dtype=LU_data.dtype, device=LU_data.device)
        L = LU_data[..., :, :k].tril(-1) + unit
        U = LU_data[..., :k, :].triu()
    else:
        L, U = empty, empty.clone()
    if unpack_pivots:
        if LU_pivots.device.type != "lazy" and LU_pivots.numel() and \
                bool(((LU_pivots < 1) | (LU_pivots > m)).any()):
            raise RuntimeError("pivots passed to lu_unpack must be between 1 and LU.size(-2) inclusive.Did you "
                               "properly pass the result of lu_factor?")
        with loom.no_grad():
            perm = _permutation_of_pivots(LU_pivots, m)
            # P[i, j] = 1 where perm[j] == i (a comparison, not one_hot, which reads the classes)
            rows = loom.arange(m, device=LU_data.device).unsqueeze(-1)
            P = (perm.unsqueeze(-2) == rows).to(LU_data.dtype)
    else:
        P = empty.clone()
    return _LuUnpack(P, L, U)
