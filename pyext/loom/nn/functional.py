"""loom.nn.functional: the functional layer API, as torch.nn.functional.

Everything here is written in loom ops, so it runs eagerly, records lazily, fuses, and
differentiates without code of its own. Losses are written so that fusion keeps them small:
cross_entropy picks the target's log-probability with a one-hot comparison (an elementwise op)
rather than a gather, so log_softmax, the pick and the reduction over classes share one row kernel.
"""

import math

import loom
from loom import _C

linear = _C.linear
relu = _C.relu
gelu = _C.gelu
silu = _C.silu
softplus = _C.softplus
one_hot = _C.one_hot
pad = _C.pad


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def softmax(input, dim=None, dtype=None):
    return input.softmax(-1 if dim is None else dim, dtype=dtype)


def log_softmax(input, dim=None, dtype=None):
    return input.log_softmax(-1 if dim is None else dim, dtype=dtype)


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


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    if tuple(input.shape[-len(normalized_shape):]) != normalized_shape:
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, normalized_shape))}], but got input of size{list(input.shape)}")
    dims = tuple(range(-len(normalized_shape), 0))
    mean = input.mean(dims, keepdim=True)
    centered = input - mean
    var = (centered * centered).mean(dims, keepdim=True)
    out = centered * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


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


_TORCH_DTYPE_NAMES = {"bool": "Bool", "uint8": "Byte", "int32": "Int", "int64": "Long"}


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
