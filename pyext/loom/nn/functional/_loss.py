"""Losses of loom.nn.functional, with PyTorch's arguments (reduction and the older size_average /
reduce), values, gradients and errors.

Losses are written so that fusion keeps them small: cross_entropy picks the target's
log-probability with a one-hot comparison (an elementwise op) rather than a gather, so
log_softmax, the pick and the reduction over classes share one row kernel. One consequence: a
class index out of range adds nothing to the loss where PyTorch raises IndexError (the check
would need the data, a sync in lazy mode).
"""

import math
import warnings

import loom
from loom import _C
from loom import _argcheck

_TORCH_DTYPE_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int",
                      "int64": "Long", "float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double"}


def _type_name(dtype):
    name = str(dtype).split(".")[-1]
    return _TORCH_DTYPE_NAMES.get(name, name)


def _legacy_reduction(size_average, reduce, reduction):
    """PyTorch's reading of the deprecated size_average / reduce arguments (with its warning)."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.")
    return ret


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_reduction(reduction):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _warn_size(input, target):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({loom.Size(target.shape)}) that is different to the input size "
                      f"({loom.Size(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
                      f"Please ensure they have the same size.", stacklevel=3)


def _xlogy_self(t):
    """t * log(t), 0 where t == 0 (xlogy(t, t)); the log never sees the 0, so no NaN gradient."""
    return t * loom.where(t == 0, 1.0, t).log()


def _log_sigmoid(x):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), stable for large |x|."""
    return x.clamp(max=0) - (-x.abs()).exp().log1p()


# ---- class indices: nll_loss, cross_entropy ----

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


def _check_class_target(input, target, weight):
    """PyTorch's checks of nll_loss's arguments, in its words."""
    if target.dtype is not loom.int64:
        raise RuntimeError(f"expected scalar type Long but found {_type_name(target.dtype)}")
    if input.dim() < 1:
        raise RuntimeError("input tensor should be 1D or 2D")
    if input.dim() <= 2:
        if target.dim() > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batch = input.shape[0] if input.dim() == 2 else 1
        if input.dim() == 2 and (target.dim() == 0 or target.shape[0] != batch):
            got = target.shape[0] if target.dim() else 1
            raise ValueError(f"Expected input batch_size ({batch}) to match target batch_size ({got}).")
    else:
        if target.dim() != input.dim() - 1:
            raise RuntimeError(f"only batches of spatial targets supported ({input.dim() - 1}D tensors) but got "
                               f"targets of dimension: {target.dim()}")
        if input.shape[0] != target.shape[0]:
            raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                             f"({target.shape[0]}).")
        if tuple(input.shape[2:]) != tuple(target.shape[1:]):
            raise RuntimeError(f"size mismatch (got input: {list(input.shape)} , target: {list(target.shape)}")
    classes = input.shape[1] if input.dim() > 1 else input.shape[0]
    if weight is not None:
        if weight.dim() != 1 or weight.shape[0] != classes:
            raise RuntimeError(f"weight tensor should be defined either for all {classes} classes or no classes but "
                               f"got weight tensor of shape: {list(weight.shape)}")
        if weight.dtype is not input.dtype:
            raise RuntimeError(f"expected scalar type {_type_name(input.dtype)} but found {_type_name(weight.dtype)}")


def _picked(logp, target):
    """The one-hot of each row's target class: (M, C) bool."""
    return loom.arange(logp.shape[1], device=logp.device) == target.unsqueeze(1)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """The negative log-likelihood of class indices, given log-probabilities (N, C), (C,) or
    (N, C, d1, ...)."""
    _argcheck.tensors("nll_loss", input=input, target=target)
    _argcheck.optional_tensors("nll_loss", weight=weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_class_target(input, target, weight)
    if weight is not None and weight.requires_grad and loom.is_grad_enabled():
        raise RuntimeError("The function 'nll_loss_forward' is not differentiable with respect to argument 'weight'. "
                           "This input cannot have requires_grad True.")
    shape = tuple(target.shape)
    logp, target = _classes_last(input, target)
    picked_mask = _picked(logp, target)
    valid = target != ignore_index
    w = valid.to(logp.dtype)
    if weight is not None:
        w = w * (weight * picked_mask).sum(1)
    loss = -(logp * picked_mask).sum(1) * w
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _unflatten(_reduce(loss, reduction), shape, reduction)


def _cross_entropy_probabilities(input, target, weight, ignore_index, reduction, label_smoothing):
    """Cross-entropy against class probabilities (a target shaped like the input): each row's
    -sum_c weight_c target_c log_softmax(input)_c, the target smoothed towards uniform; the mean is
    over rows, unweighted, as PyTorch's."""
    if not target.is_floating_point():
        raise RuntimeError(f"Expected floating point type for target with class probabilities, got "
                           f"{_type_name(target.dtype)}")
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


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Cross-entropy of logits against class indices, with PyTorch's ignore_index, class weights
    and label smoothing; or against class probabilities when the target is shaped like the input."""
    _argcheck.tensors("cross_entropy", input=input, target=target)
    _argcheck.optional_tensors("cross_entropy", weight=weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if tuple(target.shape) == tuple(input.shape):
        return _cross_entropy_probabilities(input, target, weight, ignore_index, reduction, label_smoothing)
    _check_class_target(input, target, weight)
    # One op with its own derivative (softmax - the scaled one-hot, lazy/ops_loss.cpp), which saves
    # the target and weight as PyTorch's does (written in place before backward, they raise) and
    # refuses a weight that requires grad, as PyTorch's nll_loss does.
    return _C._cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)


# ---- binary targets ----

def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-w (t log(x) + (1 - t) log(1 - x)), each log clamped at -100 as PyTorch's."""
    _argcheck.tensors("binary_cross_entropy", input=input, target=target)
    _argcheck.optional_tensors("binary_cross_entropy", weight=weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({loom.Size(target.shape)}) that is different to the input size "
                         f"({loom.Size(input.shape)}) is deprecated. Please ensure they have the same size.")
    _check_reduction(reduction)
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {_type_name(target.dtype)} but expected {_type_name(input.dtype)}")
    loss = -(target * input.log().clamp(min=-100) + (1 - target) * (1 - input).log().clamp(min=-100))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """log(1 + exp(-|x|)) + max(x, 0) - x t, the numerically stable form PyTorch uses; pos_weight
    scales the positive term (broadcast along the last dim, the classes)."""
    _argcheck.tensors("binary_cross_entropy_with_logits", input=input, target=target)
    _argcheck.optional_tensors("binary_cross_entropy_with_logits", weight=weight, pos_weight=pos_weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({loom.Size(target.shape)}) must be the same as input size "
                         f"({loom.Size(input.shape)})")
    _check_reduction(reduction)
    log_sig_neg = (input.clamp(min=0) + (1 + (-input.abs()).exp()).log())  # -log(sigmoid(-x)) = softplus(x)
    if pos_weight is not None:
        log_weight = (pos_weight - 1) * target + 1
        loss = (1 - target) * input + log_weight * (log_sig_neg - input)
    else:
        loss = log_sig_neg - input * target
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


# ---- regression ----

def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _argcheck.tensors("mse_loss", input=input, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_size(input, target)
    _check_reduction(reduction)
    diff = input - target
    return _reduce(diff * diff, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _argcheck.tensors("l1_loss", input=input, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_size(input, target)
    _check_reduction(reduction)
    return _reduce((input - target).abs(), reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 z^2 / beta where |z| < beta, else |z| - beta / 2 (the L1 loss for beta = 0)."""
    _argcheck.tensors("smooth_l1_loss", input=input, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_size(input, target)
    _check_reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    z = (input - target).abs()
    if beta == 0.0:
        return _reduce(z, reduction)
    return _reduce(loom.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 z^2 where |z| < delta, else delta (|z| - delta / 2)."""
    _argcheck.tensors("huber_loss", input=input, target=target)
    _warn_size(input, target)
    _check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    z = (input - target).abs()
    return _reduce(loom.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta)), reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL(target || exp(input)) pointwise: target (log target - input), 0 where target is 0;
    'batchmean' divides the sum by the batch size (the mathematical definition)."""
    _argcheck.tensors("kl_div", input=input, target=target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.")
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = _xlogy_self(target) - target * input
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.dim() != 0 else total
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """exp(x) - t x (log_input), else x - t log(x + eps); full adds Stirling's approximation of
    log(t!) where t > 1."""
    _argcheck.tensors("poisson_nll_loss", input=input, target=target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        stirling = _xlogy_self(target) - target + 0.5 * (2 * math.pi * target).log()
        loss = loss + loom.where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log(var) + (input - target)^2 / var), var clamped at eps (its gradient passing the
    clamp, as PyTorch's). PyTorch raises on a negative variance, a check that reads the data: loom
    makes it in eager mode only (in lazy mode it would sync every step)."""
    _argcheck.tensors("gaussian_nll_loss", input=input, target=target)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1:
            pass  # heteroscedastic: one variance per sample
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    if var.device.type != "lazy" and bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    var = var.clone()
    with loom.no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# ---- margins ----

def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-y x)), computed stably."""
    _argcheck.tensors("soft_margin_loss", input=input, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    z = -target * input
    return _reduce(z.clamp(min=0) + (-z.abs()).exp().log1p(), reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -y (x1 - x2) + margin)."""
    _argcheck.tensors("margin_ranking_loss", input1=input1, input2=input2, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {loom.Size(input1.shape)}, input2: {loom.Size(input2.shape)}, target: "
                           f"{loom.Size(target.shape)} ")
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """x where y = 1, max(0, margin - x) where y = -1."""
    _argcheck.tensors("hinge_embedding_loss", input=input, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    margin_part = loom.where(target != 1, (margin - input).clamp(min=0), 0.0)
    self_part = loom.where(target != -1, input, 0.0)
    return _reduce(margin_part + self_part, reduction)


_COSINE_EPS = 1e-12  # PyTorch's EPSILON in cosine_embedding_loss


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(x1, x2) where y = 1, max(0, cos(x1, x2) - margin) where y = -1."""
    _argcheck.tensors("cosine_embedding_loss", input1=input1, input2=input2, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    targ_dim = target.dim()
    if targ_dim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if targ_dim == 1 and (input1.dim() != 2 or input2.dim() != 2):
        raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    if targ_dim == 0 and (input1.dim() != 1 or input2.dim() != 1):
        raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    prod_sum = (input1 * input2).sum(targ_dim)
    mag1 = (input1 * input1).sum(targ_dim) + _COSINE_EPS
    mag2 = (input2 * input2).sum(targ_dim) + _COSINE_EPS
    cos = prod_sum / (mag1 * mag2).sqrt()
    loss = loom.where(target == 1, 1 - cos, 0.0) + loom.where(target == -1, (cos - margin).clamp(min=0), 0.0)
    return _reduce(loss, reduction)


def _pairwise_distance(x1, x2, p, eps):
    """||x1 - x2 + eps||_p over the last dim, as PyTorch's pairwise_distance."""
    return (x1 - x2 + eps).norm(p, max(x1.dim(), x2.dim()) - 1)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)) with d the p-norm distance; swap uses d(p, n) when smaller."""
    _argcheck.tensors("triplet_margin_loss", anchor=anchor, positive=positive, negative=negative)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    a, pos, neg = anchor.dim(), positive.dim(), negative.dim()
    if not a == pos == neg:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a}D, positive {pos}D, and negative {neg}D inputs")
    d_pos = _pairwise_distance(anchor, positive, p, eps)
    d_neg = _pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = loom.minimum(d_neg, _pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """triplet_margin_loss with any distance (pairwise_distance by default)."""
    _argcheck.tensors("triplet_margin_with_distance_loss", anchor=anchor, positive=positive, negative=negative)
    _check_reduction(reduction)
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: expected margin to be greater than 0, got {margin} "
                         f"instead")
    distance = distance_function if distance_function is not None else \
        (lambda x, y: _pairwise_distance(x, y, 2.0, 1e-6))
    d_pos, d_neg = distance(anchor, positive), distance(anchor, negative)
    if swap:
        d_neg = loom.minimum(d_neg, distance(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """The mean over classes of -(t log sigmoid(x) + (1 - t) log sigmoid(-x)) (times weight)."""
    _argcheck.tensors("multilabel_soft_margin_loss", input=input, target=target)
    _argcheck.optional_tensors("multilabel_soft_margin_loss", weight=weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    loss = -(target * _log_sigmoid(input) + (1 - target) * _log_sigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(input.dim() - 1) / input.shape[input.dim() - 1]
    return _reduce(loss, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Over the number of classes, the sum of max(0, 1 - (x[j] - x[i])) over the target classes j
    (a row's entries of target before its first -1) and the classes i that are not targets. A
    class index out of range adds nothing where PyTorch raises (as cross_entropy: no sync)."""
    _argcheck.tensors("multilabel_margin_loss", input=input, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if input.dim() > 2 or input.numel() == 0 and input.dim() != 2:
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"inconsistent size {list(target.shape)} for argument #2 'target'")
    if target.dtype != loom.int64:
        raise RuntimeError(f"expected scalar type Long but found {_type_name(target.dtype)}")
    if not input.is_floating_point():
        raise RuntimeError(f"\"multilabel_margin_loss_forward_out_frame\" not implemented for "
                           f"'{_type_name(input.dtype)}'")
    batched = input.dim() == 2
    x = input if batched else input.reshape(1, -1)
    t = target.reshape(x.shape)
    classes = x.shape[1]
    valid = (t == -1).cumsum(1) == 0  # (N, J): the entries before the first -1
    # (N, J, C): target entry j names class c
    hot = (t.unsqueeze(2) == loom.arange(classes, device=t.device)) & valid.unsqueeze(2)
    is_target = hot.any(1)  # (N, C)
    picked = (x.unsqueeze(1) * hot).sum(2, keepdim=True)  # (N, J, 1): x at target j
    z = (1 - picked + x.unsqueeze(1)).clamp(min=0)  # (N, J, C)
    counted = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = loom.where(counted, z, 0.0).sum((1, 2)) / classes
    if not batched and reduction == "none":
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
    """The mean over classes j != y of max(0, margin - x[y] + x[j]) ** p (times weight[y])."""
    _argcheck.tensors("multi_margin_loss", input=input, target=target)
    _argcheck.optional_tensors("multi_margin_loss", weight=weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    if input.dim() > 2 or input.numel() == 0 and input.dim() != 2:
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    batched = input.dim() == 2
    x = input if batched else input.reshape(1, -1)
    t = target.reshape(-1)
    if t.shape[0] != x.shape[0] or target.dim() > 1:
        raise RuntimeError(f"inconsistent target size, expected {x.shape[0]} but got {list(target.shape)}")
    classes = x.shape[1]
    hot = _picked(x, t)
    z = (margin - (x * hot).sum(1, keepdim=True) + x).clamp(min=0)
    if p == 2:
        z = z * z
    loss = loom.where(hot, 0.0, z)
    if weight is not None:
        loss = loss * (weight * hot).sum(1, keepdim=True)
    loss = loss.sum(1) / classes
    if not batched and reduction == "none":
        loss = loss.reshape(target.shape)   # a 1-D input's loss has its target's shape: () or (1,), as PyTorch
    return _reduce(loss, reduction)
