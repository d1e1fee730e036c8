"""torch.* forms of nn ops: torch.dropout(input, p, train), torch.layer_norm, torch.kl_div, ...

PyTorch exposes its native nn ops at torch.* with the native signatures, which differ from
torch.nn.functional's: positional order (torch.batch_norm takes weight and bias before the
running statistics, torch.embedding the weight before the indices), `train` for `training`, and a
reduction given as the integer enum (0 none, 1 mean, 2 sum) instead of a string. Op suites and
traced or exported programs call these forms. Each here maps its arguments onto
loom.nn.functional's function, which does the work (and the autograd), so the two forms never
differ in result.
"""

from loom import nn as _nn
from loom.nn.functional import _dropout, _loss, _sparse

_F = _nn.functional
_REDUCTIONS = ("none", "mean", "sum")  # PyTorch's Reduction enum, by value


def _reduction(value):
    if isinstance(value, str):  # the string form is no native argument, but is unambiguous
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < len(_REDUCTIONS):
        raise ValueError(f"reduction must be 0 (none), 1 (mean) or 2 (sum), but got {value!r}")
    return _REDUCTIONS[value]


def _check_dropout_p(p):
    if not 0.0 <= p <= 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout_form(input, p, train, inplace, feature, alpha):
    _check_dropout_p(p)
    if feature and input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return _dropout._dropped(input, p, train, inplace, feature=feature, alpha=alpha)


def dropout(input, p, train):
    """Zeroes elements with probability p when `train`, scaling the rest by 1 / (1 - p)."""
    return _dropout_form(input, p, train, False, feature=False, alpha=False)


def dropout_(input, p, train):
    return _dropout_form(input, p, train, True, feature=False, alpha=False)


def feature_dropout(input, p, train):
    """Dropout of whole channels (one draw per (sample, channel)) of an input of 2 or more dims."""
    return _dropout_form(input, p, train, False, feature=True, alpha=False)


def feature_dropout_(input, p, train):
    return _dropout_form(input, p, train, True, feature=True, alpha=False)


def alpha_dropout(input, p, train):
    return _dropout_form(input, p, train, False, feature=False, alpha=True)


def alpha_dropout_(input, p, train):
    return _dropout_form(input, p, train, True, feature=False, alpha=True)


def feature_alpha_dropout(input, p, train):
    return _dropout_form(input, p, train, False, feature=True, alpha=True)


def feature_alpha_dropout_(input, p, train):
    return _dropout_form(input, p, train, True, feature=True, alpha=True)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """The rows of `weight` at `indices`; padding_idx (-1: none) gets no gradient. `sparse` asks
    for a sparse gradient in PyTorch; loom's gradients are dense, with the same values."""
    return _F.embedding(indices, weight, padding_idx=None if padding_idx == -1 else padding_idx,
                        scale_grad_by_freq=scale_grad_by_freq)


def embedding_renorm_(input, indices, max_norm, norm_type):
    """Scales the rows of `input` (a weight) that indices looks up to norm at most max_norm, in place."""
    return _sparse._renorm_rows_(input, indices, max_norm, norm_type)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    return _F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    return _F.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    return _F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    return _F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


bilinear = _F.bilinear  # the same signature: (input1, input2, weight, bias=None)


def kl_div(input, target, reduction=1, *, log_target=False):
    """The pointwise KL divergence target * (log target - input), reduced by the enum; mean is
    over every element (nn.functional's "batchmean" is not a native reduction)."""
    loss = _F.kl_div(input, target, reduction="none", log_target=log_target)
    return _loss._reduce(loss, _reduction(reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=1):
    return _F.binary_cross_entropy_with_logits(input, target, weight, reduction=_reduction(reduction),
                                               pos_weight=pos_weight)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F.cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    return _F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-06, swap=False, reduction=1):
    return _F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction=_reduction(reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return _F.poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=_reduction(reduction))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1, zero_infinity=False):
    return _F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction), zero_infinity)


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """The convolution (or, transposed, its transpose) whose spatial rank is weight's less two."""
    rank = weight.dim() - 2
    if rank not in (1, 2, 3):
        raise RuntimeError(f"convolution expects a weight of 3, 4 or 5 dimensions, got shape {list(weight.shape)}")
    if transposed:
        return getattr(_F, f"conv_transpose{rank}d")(input, weight, bias, stride, padding, output_padding, groups,
                                                      dilation)
    return getattr(_F, f"conv{rank}d")(input, weight, bias, stride, padding, dilation, groups)


# One time step of the recurrent cells, on nn.RNN's step functions (the input projected first).
def _cell(mode, input, hx, w_ih, w_hh, b_ih, b_hh):
    from loom.nn.modules import rnn
    return rnn._STEPS[mode](_F.linear(input, w_ih, b_ih), hx, w_hh, b_hh, None)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return _cell("RNN_TANH", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return _cell("RNN_RELU", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """(h, c) after one step; hx is [h, c]."""
    if len(hx) != 2:
        raise RuntimeError(f"lstm_cell expects two hidden states (h, c), got {len(hx)}")
    return tuple(_cell("LSTM", input, tuple(hx), w_ih, w_hh, b_ih, b_hh))


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return _cell("GRU", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


pdist = _F.pdist  # loom.nn.functional's, the same function


def constant_pad_nd(input, pad, value=0):
    """`input` padded by `pad` (pairs from the last dim backwards; negative amounts crop) with
    `value`."""
    return _F.pad(input, pad, mode="constant", value=value)


def rsub(input, other, alpha=1):
    """other - alpha * input (subtraction with the operands swapped)."""
    import loom
    if isinstance(alpha, float) and not (input.is_floating_point() or input.is_complex()):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if isinstance(other, loom.Tensor):
        return loom.sub(other, input, alpha=alpha)
    return (input if alpha == 1 else input * alpha).__rsub__(other)


__all__ = ["embedding_renorm_",
           "dropout", "dropout_", "feature_dropout", "feature_dropout_", "alpha_dropout", "alpha_dropout_",
           "feature_alpha_dropout", "feature_alpha_dropout_", "embedding", "layer_norm", "group_norm", "batch_norm",
           "instance_norm", "bilinear", "kl_div", "binary_cross_entropy_with_logits", "cosine_embedding_loss",
           "hinge_embedding_loss", "margin_ranking_loss", "triplet_margin_loss", "poisson_nll_loss", "ctc_loss",
           "pdist", "convolution", "rnn_tanh_cell", "rnn_relu_cell", "lstm_cell", "gru_cell",
           "constant_pad_nd", "rsub"]
