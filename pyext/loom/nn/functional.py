"""loom.nn.functional: the functional layer API, as torch.nn.functional.

Everything here is written in loom ops, so it runs eagerly, records lazily, fuses, and
differentiates without code of its own. Losses are written so that fusion keeps them small:
cross_entropy picks the target's log-probability with a one-hot comparison (an elementwise op)
rather than a gather, so log_softmax, the pick and the reduction over classes share one row kernel.
"""

import math
import warnings

import loom
from loom import _C

linear = _C.linear
one_hot = _C.one_hot
pad = _C.pad


# ---- activations ----
# Each elementwise activation is one op of the library: a single expression that fuses with its
# neighbours, with PyTorch's derivative. `inplace=True` writes the result into the input through
# the op's in-place form (Tensor.elu_, ...), as PyTorch's in-place functions do.

gelu = _C.gelu
softplus = _C.softplus
logsigmoid = _C.log_sigmoid
hardshrink = _C.hardshrink
softshrink = _C.softshrink
prelu = _C.prelu
celu_ = _C.celu_
selu_ = _C.selu_
threshold_ = _C.threshold_
rrelu_ = _C.rrelu_


def relu(input, inplace=False):
    return input.relu_() if inplace else _C.relu(input)


def relu_(input):
    return input.relu_()


def relu6(input, inplace=False):
    return _C.relu6_(input) if inplace else _C.relu6(input)


def elu(input, alpha=1.0, inplace=False):
    return _C.elu_(input, alpha) if inplace else _C.elu(input, alpha)


def elu_(input, alpha=1.0):
    return _C.elu_(input, alpha)


def celu(input, alpha=1.0, inplace=False):
    return _C.celu_(input, alpha) if inplace else _C.celu(input, alpha)


def selu(input, inplace=False):
    return _C.selu_(input) if inplace else _C.selu(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _C.leaky_relu_(input, negative_slope) if inplace else _C.leaky_relu(input, negative_slope)


def leaky_relu_(input, negative_slope=0.01):
    return _C.leaky_relu_(input, negative_slope)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return _C.hardtanh_(input, min_val, max_val) if inplace else _C.hardtanh(input, min_val, max_val)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return _C.hardtanh_(input, min_val, max_val)


def hardsigmoid(input, inplace=False):
    return _C.hardsigmoid_(input) if inplace else _C.hardsigmoid(input)


def hardswish(input, inplace=False):
    return _C.hardswish_(input) if inplace else _C.hardswish(input)


def silu(input, inplace=False):
    return input.silu_() if inplace else _C.silu(input)


def mish(input, inplace=False):
    return _C.mish_(input) if inplace else _C.mish(input)


def threshold(input, threshold, value, inplace=False):
    return _C.threshold_(input, threshold, value) if inplace else _C.threshold(input, threshold, value)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """In training, each negative element is scaled by its own slope drawn from [lower, upper]
    (in lazy mode a random op of the trace, drawn anew at every replay); else by their mean."""
    if inplace:
        return _C.rrelu_(input, lower, upper, training)
    return _C.rrelu(input, lower, upper, training)


def softsign(input):
    return input / (input.abs() + 1)


def tanhshrink(input):
    return input - input.tanh()


def glu(input, dim=-1):
    """The first half of input along dim, gated by the sigmoid of the second half."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    dim = dim + input.dim() if dim < 0 else dim
    size = input.shape[dim]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim} is size {size}")
    return input.narrow(dim, 0, size // 2) * input.narrow(dim, size // 2, size // 2).sigmoid()


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def _softmax_dim(name, ndim, stacklevel):
    """PyTorch's dim for softmax-like functions called without one (deprecated there too): 0 for
    0-, 1- and 3-dimensional inputs, else 1."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
                  "dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmax", input.dim(), _stacklevel)
    return input.softmax(dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim(), _stacklevel)
    return input.log_softmax(dim, dtype=dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmin", input.dim(), _stacklevel)
    return (-input).softmax(dim, dtype=dtype)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes elements with probability p and scales the rest by 1 / (1 - p). In lazy mode the
    mask is a random op of the trace: a replayed graph draws a new mask every step."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        out = input * 0.0
    else:
        keep = loom.rand_like(input) >= p
        out = input * keep * (1.0 / (1.0 - p))
    if inplace:
        input.copy_(out)
        return input
    return out


# ---- normalization ----

def _channel_shape(input):
    """(1, C, 1, ...): a per-channel vector broadcast against (N, C, *)."""
    return (1, input.shape[1]) + (1,) * (input.dim() - 2)


def _affine(out, weight, bias, shape):
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _update_running(running, value, momentum):
    """running = (1 - momentum) * running + momentum * value, in place (no gradient): in lazy
    mode the write joins the step's trace. `momentum` is a number (a trace parameter) or a 0-d
    tensor (the cumulative average of momentum=None)."""
    with loom.no_grad():
        running.mul_(1 - momentum).add_(value * momentum)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalizes each channel (dim 1) over the batch and every other dim. Training mode uses the
    batch statistics and, given running_mean / running_var, moves them towards the batch's
    (the variance unbiased) in place; otherwise the running statistics normalize."""
    if input.dim() < 2:
        raise ValueError(f"batch_norm expects an input of at least 2 dimensions (N, C, *), got {input.dim()}D "
                         f"input of size {list(input.shape)}")
    shape = _channel_shape(input)
    channels = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and t.numel() != channels:
            raise RuntimeError(f"batch_norm: {name} should contain {channels} elements not {t.numel()}")
    if training:
        count = input.numel() // max(channels, 1)
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{loom.Size(input.shape)}")
        dims = (0,) + tuple(range(2, input.dim()))
        mean = input.mean(dims, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(dims, keepdim=True)
        if running_mean is not None:
            _update_running(running_mean, mean.reshape(channels), momentum)
        if running_var is not None:
            _update_running(running_var, var.reshape(channels) * (count / (count - 1)), momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm in evaluation mode needs running_mean and running_var")
        centered = input - running_mean.reshape(shape)
        var = running_var.reshape(shape)
    return _affine(centered * (var + eps).rsqrt(), weight, bias, shape)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalizes each (sample, channel) over its spatial dims. With use_input_stats and running
    statistics given, those move towards the batch's average of the instance statistics."""
    if input.dim() < 3:
        raise ValueError(f"instance_norm expects an input of at least 3 dimensions (N, C, *), got "
                         f"{input.dim()}D input of size {list(input.shape)}")
    shape = _channel_shape(input)
    if use_input_stats:
        dims = tuple(range(2, input.dim()))
        count = 1
        for s in input.shape[2:]:
            count *= s
        if count <= 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                             f"{loom.Size(input.shape)}")
        mean = input.mean(dims, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(dims, keepdim=True)
        channels = input.shape[1]
        if running_mean is not None:
            _update_running(running_mean, mean.reshape(-1, channels).mean(0), momentum)
        if running_var is not None:
            _update_running(running_var, var.reshape(-1, channels).mean(0) * (count / (count - 1)), momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
        centered = input - running_mean.reshape(shape)
        var = running_var.reshape(shape)
    return _affine(centered * (var + eps).rsqrt(), weight, bias, shape)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalizes each sample's channels in num_groups groups, over each group's channels and
    the spatial dims; then a per-channel affine map."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    n, channels = input.shape[0], input.shape[1]
    if channels % num_groups != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    grouped = input.reshape(n, num_groups, -1)
    mean = grouped.mean(-1, keepdim=True)
    centered = grouped - mean
    var = (centered * centered).mean(-1, keepdim=True)
    out = (centered * (var + eps).rsqrt()).reshape(input.shape)
    return _affine(out, weight, bias, _channel_shape(input))


def _normalized_dims(input, normalized_shape, name):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    if tuple(input.shape[-len(normalized_shape):]) != normalized_shape or input.dim() < len(normalized_shape):
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, normalized_shape))}], but got input of size{list(input.shape)}")
    return tuple(range(-len(normalized_shape), 0))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    dims = _normalized_dims(input, normalized_shape, "layer_norm")
    mean = input.mean(dims, keepdim=True)
    centered = input - mean
    var = (centered * centered).mean(dims, keepdim=True)
    out = centered * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


# torch.finfo(dtype).eps, rms_norm's default epsilon
_EPS = {loom.float16: 0.0009765625, loom.bfloat16: 0.0078125, loom.float32: 1.1920928955078125e-07,
        loom.float64: 2.220446049250313e-16}


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the last len(normalized_shape) dims, times weight; eps
    defaults to the machine epsilon of the input's dtype, as PyTorch's."""
    dims = _normalized_dims(input, normalized_shape, "rms_norm")
    if eps is None:
        eps = _EPS.get(input.dtype, _EPS[loom.float32])
    out = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return out * weight if weight is not None else out


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of squares over `size` neighbouring channels) ** beta, the
    window zero-padded by size // 2 channels before and (size - 1) // 2 after (PyTorch's)."""
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.dim()} dimensions)")
    if input.numel() == 0:
        return input
    channels = input.shape[1]
    square = input * input
    before, after = size // 2, (size - 1) // 2
    parts = []
    if before:
        parts.append(loom.zeros(input.shape[0], before, *input.shape[2:], dtype=input.dtype, device=input.device))
    parts.append(square)
    if after:
        parts.append(loom.zeros(input.shape[0], after, *input.shape[2:], dtype=input.dtype, device=input.device))
    padded = loom.cat(parts, 1) if len(parts) > 1 else square
    window = padded.narrow(1, 0, channels)
    for i in range(1, size):
        window = window + padded.narrow(1, i, channels)
    div = (window * (alpha / size) + k) ** beta
    return input / div


def embedding(input, weight, padding_idx=None):
    """Rows of `weight` picked by the integer tensor `input` (gradients scatter-add back).
    Lookups of row `padding_idx` pass no gradient to it, as in PyTorch."""
    if padding_idx is not None:
        if not -weight.shape[0] <= padding_idx < weight.shape[0]:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= weight.shape[0]
    flat = weight.index_select(0, input.reshape(-1))
    out = flat.reshape(*input.shape, weight.shape[1])
    if padding_idx is not None and out.requires_grad:
        # The same values, detached where the padding row was looked up.
        out = loom.where((input != padding_idx).unsqueeze(-1), out, out.detach())
    return out


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """The sum, mean or max of bags of rows of `weight`: input (B, N) is B bags of N indices;
    1-D input with 1-D `offsets` is bags starting at those offsets (with include_last_offset the
    last offset ends the last bag). Indices equal to padding_idx are left out of their bag, and
    an empty bag gives zeros. per_sample_weights (mode 'sum' only) scale each looked-up row.

    1-D input is written as a (bags x indices) membership matrix times the looked-up rows, so
    the bags' boundaries stay tensor data: in lazy mode new offsets do not change the trace."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag: max_norm, scale_grad_by_freq and sparse are not supported by loom")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                      f"on GitHub.")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"embedding_bag: If per_sample_weights ({list(per_sample_weights.shape)}) is not None, "
                             f"then it must have the same shape as the input ({list(input.shape)})")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences.")
        rows = embedding(input, weight)  # (B, N, D)
        member = loom.ones_like(input, dtype=loom.bool)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        n = input.shape[0]
        bags = offsets.shape[0] - (1 if include_last_offset else 0)
        position = loom.arange(n, device=input.device)
        starts = offsets.narrow(0, 0, bags).unsqueeze(1)
        ends = (loom.cat([offsets.narrow(0, 1, bags - 1), loom.full((1,), n, dtype=offsets.dtype,
                                                                      device=offsets.device)])
                if not include_last_offset else offsets.narrow(0, 1, bags)).unsqueeze(1)
        member = (position >= starts) & (position < ends)  # (B, N): which indices each bag holds
        rows = embedding(input, weight).unsqueeze(0)  # (1, N, D)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.unsqueeze(0)
        input = input.unsqueeze(0)
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    if padding_idx is not None:
        member = member & (input != padding_idx % weight.shape[0])
    count = member.sum(1, keepdim=True)
    if mode == "max":
        picked = loom.where(member.unsqueeze(-1), rows, float("-inf")).amax(1)
        return loom.where(count == 0, 0.0, picked)
    scale = member.to(weight.dtype)
    if per_sample_weights is not None:
        scale = scale * per_sample_weights
    if rows.shape[0] == 1 and scale.shape[0] != 1:  # 1-D input: one matrix product
        out = scale @ rows[0]
    else:
        out = (rows * scale.unsqueeze(-1)).sum(1)
    if mode == "mean":
        out = out / count.clamp(min=1).to(out.dtype)
    return out


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]: one matrix
    product of input1 with the weight, then a product-sum with input2."""
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {list(input1.shape[:-1])} and "
                           f"{list(input2.shape[:-1])}")
    out_features, in1, in2 = weight.shape
    if input1.shape[-1] != in1 or input2.shape[-1] != in2:
        raise RuntimeError(f"bilinear(): input sizes {input1.shape[-1]} and {input2.shape[-1]} do not match the "
                           f"weight's {in1} and {in2} (weight of size {list(weight.shape)})")
    # (..., in1) @ (in1, out * in2) -> (..., out, in2), then contract in2 with input2
    mixed = (input1 @ weight.permute(1, 0, 2).reshape(in1, out_features * in2)).unflatten(-1, (out_features, in2))
    out = (mixed * input2.unsqueeze(-2)).sum(-1)
    return out + bias if bias is not None else out


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _classes_last(input, target):
    """(N, C, d1, ...) input and (N, d1, ...) target as (M, C) and (M,). A loss computed per row
    goes back to the target's shape with _unflatten."""
    if input.dim() == 1:
        return input.unsqueeze(0), target.reshape(1)
    if input.dim() > 2:
        c = input.shape[1]
        input = input.permute(0, *range(2, input.dim()), 1).reshape(-1, c)
        target = target.reshape(-1)
    return input, target


def _unflatten(loss, shape, reduction):
    """reduction='none': the per-row loss in the target's shape ((N, d1, ...), or () for a (C,)
    input), as PyTorch."""
    return loss.reshape(shape) if reduction == "none" else loss


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """The negative log-likelihood of class indices, given log-probabilities."""
    shape = tuple(target.shape)
    logp, target = _classes_last(input, target)
    classes = loom.arange(logp.shape[1], device=logp.device)
    picked_mask = classes == target.unsqueeze(1)
    valid = target != ignore_index
    w = valid.to(logp.dtype)
    if weight is not None:
        w = w * (weight * picked_mask).sum(1)
    loss = -(logp * picked_mask).sum(1) * w
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _unflatten(_reduce(loss, reduction), shape, reduction)


_TORCH_DTYPE_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int",
                      "int64": "Long"}


def _cross_entropy_probabilities(input, target, weight, ignore_index, reduction, label_smoothing):
    """Cross-entropy against class probabilities (a target shaped like the input): each row's
    -sum_c weight_c target_c log_softmax(input)_c, the target smoothed towards uniform; the mean is
    over rows, unweighted, as PyTorch's."""
    if not target.is_floating_point():
        name = _TORCH_DTYPE_NAMES.get(str(target.dtype).split(".")[-1], str(target.dtype))
        raise RuntimeError(f"Expected floating point type for target with class probabilities, got {name}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    dim = 1 if input.dim() > 1 else 0
    classes = input.shape[dim]
    if label_smoothing > 0.0:
        target = target * (1.0 - label_smoothing) + label_smoothing / classes
    terms = input.log_softmax(dim) * target
    if weight is not None:
        terms = terms * weight.reshape([classes] + [1] * (input.dim() - dim - 1))
    return _reduce(-terms.sum(dim), reduction)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Cross-entropy of logits against class indices, with PyTorch's ignore_index, class weights
    and label smoothing; or against class probabilities when the target is shaped like the input."""
    if tuple(target.shape) == tuple(input.shape):
        return _cross_entropy_probabilities(input, target, weight, ignore_index, reduction, label_smoothing)
    shape = tuple(target.shape)
    logits, target = _classes_last(input, target)
    logp = logits.log_softmax(-1)
    loss = nll_loss(logp, target, weight=weight, ignore_index=ignore_index, reduction="none")
    if label_smoothing > 0.0:
        valid = (target != ignore_index).to(logp.dtype)
        classes = logp.shape[1]
        if weight is not None:
            smooth = -(logp * weight).sum(1) * valid
        else:
            smooth = -logp.sum(1) * valid
        loss = (1.0 - label_smoothing) * loss + (label_smoothing / classes) * smooth
        if reduction == "mean":
            if weight is not None:
                picked = (loom.arange(classes, device=logp.device) == target.unsqueeze(1)) * weight
                return loss.sum() / (picked.sum(1) * valid).sum()
            return loss.sum() / valid.sum()
        return _unflatten(_reduce(loss, reduction), shape, reduction)
    if reduction == "mean":
        valid = (target != ignore_index).to(logp.dtype)
        if weight is not None:
            picked = (loom.arange(logp.shape[1], device=logp.device) == target.unsqueeze(1)) * weight
            return loss.sum() / (picked.sum(1) * valid).sum()
        return loss.sum() / valid.sum()
    return _unflatten(_reduce(loss, reduction), shape, reduction)


def mse_loss(input, target, reduction="mean"):
    diff = input - target
    return _reduce(diff * diff, reduction)


def l1_loss(input, target, reduction="mean"):
    return _reduce((input - target).abs(), reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    """log(1 + exp(-|x|)) + max(x, 0) - x t, the numerically stable form PyTorch uses."""
    log_sig_neg = (input.clamp(min=0) + (1 + (-input.abs()).exp()).log())  # -log(sigmoid(-x)) = softplus(x)
    if pos_weight is not None:
        log_weight = (pos_weight - 1) * target + 1
        loss = (1 - target) * input + log_weight * (log_sig_neg - input)
    else:
        loss = log_sig_neg - input * target
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """softmax(q k^T * scale + mask) v, with a causal mask when is_causal."""
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        n, m = query.shape[-2], key.shape[-2]
        keep = loom.ones(n, m, dtype=loom.bool, device=query.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype is loom.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = scores.softmax(-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return weights @ value


# ---- multi-head attention ----

def _pad_last(mask):
    """A mask with one more (unmasked) position on its last dim: for bias_k/v and add_zero_attn."""
    if mask is None:
        return None
    return loom.cat([mask, loom.zeros(*mask.shape[:-1], 1, dtype=mask.dtype, device=mask.device)], -1)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """PyTorch's multi-head attention on (L, N, E) query and (S, N, E_k), (S, N, E_v) key and
    value (or unbatched (L, E), (S, E_k), (S, E_v)). Masks: attn_mask (L, S) or (N * heads, L,
    S), key_padding_mask (N, S); a bool mask marks positions NOT to attend to, a float mask is
    added to the scores. Returns (output, weights): weights (N, L, S) averaged over heads, or
    (N, heads, L, S), or None without need_weights."""
    if query.dim() not in (2, 3) or key.dim() != query.dim() or value.dim() != query.dim():
        raise AssertionError(f"query, key and value should be all 2-D (unbatched) or all 3-D (batched), but got "
                             f"{query.dim()}-D, {key.dim()}-D and {value.dim()}-D tensors")
    batched = query.dim() == 3
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            if key_padding_mask.dim() != 1:
                raise AssertionError(f"For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D "
                                     f"but found {key_padding_mask.dim()}-D tensor instead")
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if key_padding_mask is not None and key_padding_mask.dtype is not loom.bool \
            and not key_padding_mask.is_floating_point():
        raise AssertionError("only bool and floating types of key_padding_mask are supported")

    # the input projections
    if not use_separate_proj_weight:
        if key.shape != value.shape:
            raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
        if query is key and key is value:  # self-attention: one product
            q, k, v = linear(query, in_proj_weight, in_proj_bias).chunk(3, -1)
        else:
            w_q, w_k, w_v = in_proj_weight.chunk(3)
            b_q, b_k, b_v = in_proj_bias.chunk(3) if in_proj_bias is not None else (None, None, None)
            q = linear(query, w_q, b_q)
            if key is value:
                k, v = linear(key, loom.cat([w_k, w_v]),
                              loom.cat([b_k, b_v]) if b_k is not None else None).chunk(2, -1)
            else:
                k, v = linear(key, w_k, b_k), linear(value, w_v, b_v)
    else:
        if key.shape[:2] != value.shape[:2]:
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match value's "
                                 f"{value.shape[:2]}")
        b_q, b_k, b_v = in_proj_bias.chunk(3) if in_proj_bias is not None else (None, None, None)
        q, k, v = linear(query, q_proj_weight, b_q), linear(key, k_proj_weight, b_k), linear(value, v_proj_weight, b_v)

    if is_causal and attn_mask is None:
        attn_mask = ~loom.ones(tgt_len, key.shape[0], dtype=loom.bool, device=query.device).tril()
    if attn_mask is not None:
        if attn_mask.dtype is loom.uint8:
            attn_mask = attn_mask.to(loom.bool)
        elif not (attn_mask.is_floating_point() or attn_mask.dtype is loom.bool):
            raise AssertionError(f"Only float, byte, and bool types are supported for attn_mask, not {attn_mask.dtype}")
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, key.shape[0]):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                                   f"{(tgt_len, key.shape[0])}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, key.shape[0]):
                raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                                   f"{(bsz * num_heads, tgt_len, key.shape[0])}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key.")
        k = loom.cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = loom.cat([v, bias_v.expand(1, bsz, embed_dim)])
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k and bias_v must be given together")

    # heads: (L, N, E) -> (N * heads, L, head_dim)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_k is None else static_k
    v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_v is None else static_v
    for name, s in (("static_k", static_k), ("static_v", static_v)):
        if s is not None and (s.shape[0] != bsz * num_heads or s.shape[2] != head_dim):
            raise AssertionError(f"expecting {name} of size ({bsz * num_heads}, *, {head_dim}), but got "
                                 f"{list(s.shape)}")
    if add_zero_attn:
        zeros = loom.zeros(bsz * num_heads, 1, head_dim, dtype=k.dtype, device=k.device)
        k, v = loom.cat([k, zeros], 1), loom.cat([v, zeros], 1)
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
    src_len = k.shape[1]

    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{key_padding_mask.shape}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        if attn_mask is None:
            attn_mask = kpm
        elif attn_mask.dtype is loom.bool:
            attn_mask = attn_mask | kpm
        else:
            # where(), not masked_fill: the result broadcasts (1, L, S) against (N * heads, 1, S)
            attn_mask = loom.where(kpm, float("-inf"), attn_mask) if kpm.dtype is loom.bool else attn_mask + kpm
    if attn_mask is not None and attn_mask.dtype is loom.bool:
        attn_mask = loom.zeros(attn_mask.shape, dtype=q.dtype, device=q.device).masked_fill(attn_mask, float("-inf"))

    scores = (q / math.sqrt(head_dim)) @ k.transpose(-2, -1)
    if attn_mask is not None:
        scores = scores + attn_mask
    weights = scores.softmax(-1)
    if training and dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    out = (weights @ v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    if not need_weights:
        return (out if batched else out.squeeze(1)), None
    weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
    if average_attn_weights:
        weights = weights.sum(1) / num_heads
    if not batched:
        return out.squeeze(1), weights.squeeze(0)
    return out, weights


# ---- distances and normalization ----

cosine_similarity = _C.cosine_similarity
pairwise_distance = _C.pairwise_distance


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input divided by its p-norm along dim, the norm at least eps."""
    if out is not None:
        raise NotImplementedError("loom's normalize has no out= argument")
    denom = loom.linalg.vector_norm(input, p, dim, keepdim=True).clamp(min=eps)
    return input / denom.expand_as(input)

