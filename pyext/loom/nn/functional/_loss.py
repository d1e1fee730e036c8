"""Losses of loom.nn.functional.

Losses are written so that fusion keeps them small: cross_entropy picks the target's
log-probability with a one-hot comparison (an elementwise op) rather than a gather, so
log_softmax, the pick and the reduction over classes share one row kernel.
"""

import loom


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
