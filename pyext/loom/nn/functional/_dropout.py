"""Dropout of loom.nn.functional: elementwise (dropout, alpha_dropout) and channel-wise
(dropout1d / 2d / 3d, feature_alpha_dropout: one draw per (sample, channel)), with PyTorch's
input checks and warnings. In lazy mode each mask is a random op of the trace: a replayed graph
draws a new mask every step."""

import warnings

import loom

__all__ = ["dropout", "alpha_dropout", "dropout1d", "dropout2d", "dropout3d", "feature_alpha_dropout"]

# SELU's -scale * alpha: alpha dropout sets dropped units to it, keeping mean and variance.
_SELU_SATURATION = 1.7580993408473766


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropped(input, p, training, inplace, feature, alpha):
    """PyTorch's dropout family: a keep mask (per element, or per (sample, channel) with
    `feature`), scaled by 1 / (1 - p); with `alpha`, dropped units take SELU's saturation value
    and an affine map restores the mean and variance."""
    _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        out = input * 0.0
    else:
        shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2) if feature else tuple(input.shape)
        keep = loom.rand(shape, dtype=input.dtype, device=input.device) >= p
        if alpha:
            keep = keep.to(input.dtype)
            a = 1.0 / ((_SELU_SATURATION ** 2 * p + 1) * (1 - p)) ** 0.5
            out = input * (keep * a) + (keep - 1) * (_SELU_SATURATION * a) + _SELU_SATURATION * a * p
        else:
            out = input * keep * (1.0 / (1.0 - p))
    if inplace:
        input.copy_(out)
        return input
    return out


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes elements with probability p and scales the rest by 1 / (1 - p)."""
    return _dropped(input, p, training, inplace, feature=False, alpha=False)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: dropped units become SELU's saturation value, then an affine map
    keeps the input's mean and variance."""
    return _dropped(input, p, training, inplace, feature=False, alpha=True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels."""
    return _dropped(input, p, training, inplace, feature=True, alpha=True)


def _unbatched(input, p, training, inplace):
    """Channel-wise dropout of an input without its batch dim (made a batch of one)."""
    out = _dropped(input.unsqueeze(0), p, training, False, feature=True, alpha=False).squeeze(0)
    if inplace and training and p > 0.0:
        input.copy_(out)
        return input
    return out


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, L) or (C, L) inputs."""
    _check_p(p)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    if input.dim() == 2:
        return _unbatched(input, p, training, inplace)
    return _dropped(input, p, training, inplace, feature=True, alpha=False)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, H, W) inputs. As PyTorch 1.13: other ranks warn; a 3-d input
    is taken as (N, C, L) (channel-wise 1-d dropout)."""
    _check_p(p)
    dims = input.dim()
    if dims not in (3, 4):
        warnings.warn(f"dropout2d: Received a {dims}-D input to dropout2d, which is deprecated and will result in an "
                      "error in a future release. To retain the behavior and silence this warning, please use dropout "
                      "instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 spatial "
                      "dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D inputs).",
                      stacklevel=2)
    if dims == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
                      "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
                      "will change in a future release to interpret the input as one without a batch dimension, i.e. "
                      "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
                      "dropout1d instead.", stacklevel=2)
    return _dropped(input, p, training, inplace, feature=True, alpha=False)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) inputs; other ranks warn."""
    _check_p(p)
    dims = input.dim()
    if dims not in (4, 5):
        warnings.warn(f"dropout3d: Received a {dims}-D input to dropout3d, which is deprecated and will result in an "
                      "error in a future release. To retain the behavior and silence this warning, please use dropout "
                      "instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 spatial "
                      "dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D inputs).",
                      stacklevel=2)
    if dims == 4:
        return _unbatched(input, p, training, inplace)
    return _dropped(input, p, training, inplace, feature=True, alpha=False)
