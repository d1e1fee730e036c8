"""Resampling of loom.nn.functional: interpolate (upsample), pixel_shuffle, channel_shuffle, affine_grid.

interpolate is separable: each spatial dim is resampled on its own. The linear and cubic modes
are one matrix product per dim with an interpolation matrix (out, in) whose rows hold the
weights PyTorch computes (in its arithmetic: float32 for float32 input), so BLAS / cuBLAS serve
them and autograd derives their gradient; nearest modes pick with index_select. The matrices and
indices depend only on sizes, scales, the mode and the device, and are kept (a lazy trace reads
the same input each step: nothing uploads or recompiles).
"""

import math
import warnings
from collections import OrderedDict

import numpy as np

import loom
from loom.nn.functional._pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
from loom import _argcheck

_LINEAR_MODES = ("linear", "bilinear", "bicubic", "trilinear")
_CUBIC_A = -0.75  # PyTorch's bicubic coefficient

# (kind, in, out, scale, align_corners, dtype, device) -> tensor; bounded, least recently used first out.
_cache = OrderedDict()
_CACHE_SIZE = 256


def _cached(key, make):
    hit = _cache.get(key)
    if hit is not None:
        _cache.move_to_end(key)
        return hit
    value = make()
    _cache[key] = value
    if len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)
    return value


def _opmath(dtype):
    """The numpy type PyTorch computes a dtype's interpolation weights in (its opmath type)."""
    return np.float64 if dtype is loom.float64 else np.float32


def _scale(in_size, out_size, align_corners, scale, t):
    """PyTorch's area_pixel_compute_scale: the source step per output step."""
    if align_corners:
        return t(t(in_size - 1) / t(out_size - 1)) if out_size > 1 else t(0)
    if scale is not None and scale > 0:
        return t(1.0 / scale)
    return t(t(in_size) / t(out_size))


def _source(scale, out_size, align_corners, cubic, t):
    """PyTorch's area_pixel_compute_source_index for every output index, in type t."""
    dst = np.arange(out_size).astype(t)
    if align_corners:
        return scale * dst
    src = scale * (dst + t(0.5)) - t(0.5)
    return src if cubic else np.maximum(src, t(0))


def _linear_matrix(in_size, out_size, align_corners, scale, t):
    src = _source(_scale(in_size, out_size, align_corners, scale, t), out_size, align_corners, False, t)
    i0, lam1 = _guarded(src, in_size, t)
    lam0 = (t(1) - lam1).astype(t)
    i1 = i0 + (i0 < in_size - 1)
    m = np.zeros((out_size, in_size), dtype=t)
    rows = np.arange(out_size)
    np.add.at(m, (rows, i0), lam0)
    np.add.at(m, (rows, i1), lam1)
    return m


def _guarded(src, in_size, t):
    """PyTorch's guard_index_and_lambda: the source index below (at most in_size - 1) and the
    fraction past it, clamped to [0, 1]."""
    index = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    return index, np.clip(src - index.astype(t), t(0), t(1)).astype(t)


def _cubic_matrix(in_size, out_size, align_corners, scale, t):
    src = _source(_scale(in_size, out_size, align_corners, scale, t), out_size, align_corners, True, t)
    base, x = _guarded(src, in_size, t)
    a = t(_CUBIC_A)

    def near(v):  # |v| <= 1
        return ((a + t(2)) * v - (a + t(3))) * v * v + t(1)

    def far(v):  # 1 < |v| < 2
        return ((a * v - t(5) * a) * v + t(8) * a) * v - t(4) * a

    opposite = (t(1) - x).astype(t)
    weights = [far(x + t(1)), near(x), near(opposite), far(opposite + t(1))]
    m = np.zeros((out_size, in_size), dtype=t)
    rows = np.arange(out_size)
    for k, w in enumerate(weights):
        np.add.at(m, (rows, np.clip(base - 1 + k, 0, in_size - 1)), w.astype(t))
    return m


def _nearest_index(in_size, out_size, scale, exact):
    """PyTorch's nearest_idx / nearest_neighbor_exact_compute_source_index (float32 arithmetic)."""
    dst = np.arange(out_size)
    if not exact and out_size == in_size:
        return dst
    if not exact and out_size == 2 * in_size:
        return dst >> 1
    s = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(in_size) / np.float32(out_size)
    if exact:  # (dst + 0.5) * scale in double, then floorf
        src = np.floor(((dst + 0.5) * np.float64(s)).astype(np.float32))
    else:
        src = np.floor(dst.astype(np.float32) * s)
    return np.minimum(src.astype(np.int64), in_size - 1)


def _resample_dim(x, dim, in_size, out_size, mode, align_corners, scale):
    """x resampled along dim from in_size to out_size."""
    device = x.device
    if mode in ("nearest", "nearest-exact"):
        key = (mode, in_size, out_size, scale, None, None, str(device))
        index = _cached(key, lambda: loom.tensor(_nearest_index(in_size, out_size, scale, mode == "nearest-exact"),
                                                 device=device))
        return x.index_select(dim, index)
    t = _opmath(x.dtype)
    make = _cubic_matrix if mode == "bicubic" else _linear_matrix
    key = (mode, in_size, out_size, scale, align_corners, x.dtype, str(device))
    matrix = _cached(key, lambda: loom.tensor(make(in_size, out_size, align_corners, scale, t), dtype=x.dtype,
                                              device=device))
    last = x.dim() - 1
    if dim == last:
        return x @ matrix.t()
    if dim == last - 1:
        return matrix @ x
    return (x.transpose(dim, last) @ matrix.t()).transpose(dim, last)


def _dims_message(what, input, given, kind):
    return (f"Input and {what} must have the same number of spatial dimensions, but got input with spatial "
            f"dimensions of {list(input.shape[2:])} and {what} of {kind}{given}. Please provide input tensor in "
            f"(N, C, d1, d2, ...,dK) format and {what} in ({'o' if what == 'output' else 's'}1, "
            f"{'o' if what == 'output' else 's'}2, ...,{'o' if what == 'output' else 's'}K) format.")


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """Resamples (N, C, d1, ..., dK) input (K = 1, 2, 3) to `size` or by `scale_factor`, as
    torch.nn.functional.interpolate: modes nearest, nearest-exact, linear, bilinear, bicubic,
    trilinear, area."""
    _argcheck.tensor("interpolate", "input", input, 1)
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        scale_factors = None
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(_dims_message("output", input, list(size), "size "))
            output_size = list(size)
        else:
            output_size = [size] * dim
    elif scale_factor is not None:
        output_size = None
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(_dims_message("scale_factor", input, list(scale_factor), "shape "))
            scale_factors = [float(s) for s in scale_factor]
        else:
            scale_factors = [float(scale_factor)] * dim
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor is not None and recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and output_size is None:
        recompute_scale_factor = True
    if recompute_scale_factor:
        output_size = [math.floor(float(input.shape[i + 2]) * scale_factors[i]) for i in range(dim)]
        scale_factors = None
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported by loom")
    known = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
    wanted_dims = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
    if mode in wanted_dims and input.dim() in (3, 4, 5) and dim != wanted_dims[mode]:
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs {wanted_dims[mode] + 2}D input")
    if input.dim() not in (3, 4, 5) or mode not in known:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) "
                                  f"for the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                                  f"nearest-exact (got {mode})")
    if output_size is None:
        output_size = [int(input.shape[i + 2] * scale_factors[i]) for i in range(dim)]
    for s in output_size:
        if s <= 0:
            raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                               f"({', '.join(map(str, input.shape[2:]))}) and output "
                               f"({', '.join(map(str, output_size))})")
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[dim - 1](input, output_size)
    if mode in _LINEAR_MODES and not input.is_floating_point():
        raise RuntimeError(f"\"upsample_{mode}{dim}d_out_frame\" not implemented for "
                           f"'{_TORCH_NAMES.get(str(input.dtype), str(input.dtype))}'")
    out = input
    for i in range(dim):
        scale = scale_factors[i] if scale_factors is not None else None
        in_size, out_size = input.shape[i + 2], output_size[i]
        if mode in ("nearest", "nearest-exact") and in_size == out_size and mode == "nearest":
            continue
        out = _resample_dim(out, i + 2, in_size, out_size, mode, align_corners, scale)
    return out.contiguous() if out is not input else out.clone()


_TORCH_NAMES = {"loom.uint8": "Byte", "loom.int32": "Int", "loom.int64": "Long", "loom.bool": "Bool"}


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of interpolate, as in PyTorch."""
    _argcheck.tensor("upsample", "input", input, 1)
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    _argcheck.tensor("upsample_nearest", "input", input, 1)
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate instead.")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    _argcheck.tensor("upsample_bilinear", "input", input, 1)
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate instead.")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def pixel_shuffle(input, upscale_factor):
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r): a reshape and a permute."""
    _argcheck.tensor("pixel_shuffle", "input", input, 1)
    r = upscale_factor
    if input.dim() < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    c, h, w = input.shape[-3:]
    if c % (r * r) != 0:
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    batch = tuple(input.shape[:-3])
    n = len(batch)
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*batch, c // (r * r), h * r, w * r)


def channel_shuffle(input, groups):
    """(N, C, *) with its channels read as (groups, C / groups) and written as (C / groups, groups):
    a reshape, a transpose and a reshape (so it differentiates, where PyTorch 1.13's does not)."""
    _argcheck.tensor("channel_shuffle", "input", input, 1)
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    n, c = input.shape[0], input.shape[1]
    if c % groups != 0:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    rest = tuple(input.shape[2:])
    return input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(n, c, *rest)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W), the inverse of pixel_shuffle."""
    _argcheck.tensor("pixel_unshuffle", "input", input, 1)
    r = downscale_factor
    if input.dim() < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    c, h, w = input.shape[-3:]
    if h % r != 0:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but "
                           f"input.size(-2)={h} is not divisible by {r}")
    if w % r != 0:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but "
                           f"input.size(-1)={w} is not divisible by {r}")
    batch = tuple(input.shape[:-3])
    n = len(batch)
    x = input.reshape(*batch, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*batch, c * r * r, h // r, w // r)


def _base_grid(n, device, dtype, align_corners):
    """The normalized coordinates of n pixel centers in [-1, 1] (or of the corners)."""
    if n <= 1:
        return loom.zeros(max(n, 0), dtype=dtype, device=device)
    steps = loom.arange(n, dtype=dtype, device=device) * (2.0 / (n - 1)) - 1.0
    return steps if align_corners else steps * ((n - 1) / n)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of an affine map: (N, H, W, 2) from theta (N, 2, 3) for size (N, C, H,
    W), or (N, D, H, W, 3) from (N, 3, 4) for (N, C, D, H, W)."""
    _argcheck.tensor("affine_grid", "theta", theta, 1)
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                      "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                      "grid_sample for details.")
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = list(size)
    if len(size) == 4:
        if theta.dim() != 3 or tuple(theta.shape[-2:]) != (2, 3):
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got "
                             f"{list(theta.shape)}.")
        spatial = size[2:]
    elif len(size) == 5:
        if theta.dim() != 3 or tuple(theta.shape[-2:]) != (3, 4):
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. Got "
                             f"{list(theta.shape)}.")
        spatial = size[2:]
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    n, k = size[0], len(spatial)
    dev, dt = theta.device, theta.dtype
    # (spatial..., k + 1): x (last dim) first, then y (, z), then 1, as PyTorch orders them.
    axes = [_base_grid(s, dev, dt, align_corners) for s in spatial]
    coords = []
    for i in reversed(range(k)):
        shape = [1] * k
        shape[i] = spatial[i]
        coords.append(axes[i].reshape(shape).expand(*spatial))
    coords.append(loom.ones(*spatial, dtype=dt, device=dev))
    base = loom.stack(coords, -1).reshape(1, -1, k + 1)
    grid = base @ theta.transpose(1, 2)  # (N, prod(spatial), k)
    return grid.reshape(n, *spatial, k)


def _grid_coordinate(coord, size, padding_mode, align_corners):
    """A grid coordinate in [-1, 1] as a position in pixels along a dim of `size` (border
    padding: clamped to the edge pixels)."""
    if align_corners:
        pixel = (coord + 1) / 2 * (size - 1)
    else:
        pixel = ((coord + 1) * size - 1) / 2
    if padding_mode == "border":
        pixel = pixel.clamp(0, size - 1)
    return pixel


def _pixels_at(flat, ix, iy, height, width):
    """input's values (flat: (N, C, H * W)) at integer pixels (ix, iy: (N, Ho, Wo)), zero outside."""
    n, c = flat.shape[0], flat.shape[1]
    inside = (ix >= 0) & (ix < width) & (iy >= 0) & (iy < height)
    index = (iy.clamp(0, height - 1) * width + ix.clamp(0, width - 1)).long()
    picked = flat.gather(2, index.reshape(n, 1, -1).expand(n, c, index[0].numel()))
    return picked.reshape(n, c, *ix.shape[1:]) * inside.unsqueeze(1).to(flat.dtype)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """input (N, C, H, W) sampled at grid (N, Ho, Wo, 2) of (x, y) in [-1, 1]: bilinear or nearest,
    zeros or border padding, as torch.nn.functional.grid_sample; written as gathers, so its
    gradients (with respect to input and grid) are autograd's. loom samples 4-d input only, and
    has not reflection padding or bicubic mode."""
    _argcheck.tensor("grid_sample", "input", input, 1)
    _argcheck.tensor("grid_sample", "grid", grid, 2)
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                      "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                      "grid_sample for details.")
        align_corners = False
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if input.dim() != 4 or grid.dim() != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"grid_sample(): loom samples 4-D input (N, C, H, W) at a grid (N, H_out, W_out, 2), got "
                           f"input of shape {list(input.shape)} and grid of shape {list(grid.shape)}")
    if mode == "bicubic" or padding_mode == "reflection":
        raise NotImplementedError(f"grid_sample: mode='{mode}', padding_mode='{padding_mode}' is not supported by "
                                  f"loom (bilinear or nearest, zeros or border)")
    if grid.dtype != input.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have same dtype, but input has "
                           f"{input.dtype} and grid has {grid.dtype}")
    n, c, height, width = input.shape
    ix = _grid_coordinate(grid[..., 0], width, padding_mode, align_corners)
    iy = _grid_coordinate(grid[..., 1], height, padding_mode, align_corners)
    flat = input.reshape(n, c, height * width)
    if mode == "nearest":
        return _pixels_at(flat, ix.round(), iy.round(), height, width)
    x0, y0 = ix.floor(), iy.floor()
    wx, wy = (ix - x0).unsqueeze(1), (iy - y0).unsqueeze(1)
    top = _pixels_at(flat, x0, y0, height, width) * (1 - wx) + _pixels_at(flat, x0 + 1, y0, height, width) * wx
    bottom = _pixels_at(flat, x0, y0 + 1, height, width) * (1 - wx) + _pixels_at(flat, x0 + 1, y0 + 1, height, width) * wx
    return top * (1 - wy) + bottom * wy
