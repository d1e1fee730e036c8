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
from loom import _argcheck

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
    _argcheck.tensor("dropout", "input", input, 1)
    return _dropout_form(input, p, train, False, feature=False, alpha=False)


def dropout_(input, p, train):
    _argcheck.tensor("dropout_", "input", input, 1)
    return _dropout_form(input, p, train, True, feature=False, alpha=False)


def feature_dropout(input, p, train):
    """Dropout of whole channels (one draw per (sample, channel)) of an input of 2 or more dims."""
    _argcheck.tensor("feature_dropout", "input", input, 1)
    return _dropout_form(input, p, train, False, feature=True, alpha=False)


def feature_dropout_(input, p, train):
    _argcheck.tensor("feature_dropout_", "input", input, 1)
    return _dropout_form(input, p, train, True, feature=True, alpha=False)


def alpha_dropout(input, p, train):
    _argcheck.tensor("alpha_dropout", "input", input, 1)
    return _dropout_form(input, p, train, False, feature=False, alpha=True)


def alpha_dropout_(input, p, train):
    _argcheck.tensor("alpha_dropout_", "input", input, 1)
    return _dropout_form(input, p, train, True, feature=False, alpha=True)


def feature_alpha_dropout(input, p, train):
    _argcheck.tensor("feature_alpha_dropout", "input", input, 1)
    return _dropout_form(input, p, train, False, feature=True, alpha=True)


def feature_alpha_dropout_(input, p, train):
    _argcheck.tensor("feature_alpha_dropout_", "input", input, 1)
    return _dropout_form(input, p, train, True, feature=True, alpha=True)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """The rows of `weight` at `indices`; padding_idx (-1: none) gets no gradient. `sparse` asks
    for a sparse gradient in PyTorch; loom's gradients are dense, with the same values.

    Unlike nn.functional.embedding, this form neither checks padding_idx's range nor counts a
    negative one from the end: a padding_idx no index can equal (negative, or past the rows)
    simply marks no lookup, as in PyTorch's aten::embedding."""
    _argcheck.tensor("embedding", "weight", weight, 1)
    _argcheck.tensor("embedding", "indices", indices, 2)
    rows = weight.shape[0] if weight.dim() > 0 else 0
    padding = padding_idx if isinstance(padding_idx, int) and 0 <= padding_idx < rows else None
    return _F.embedding(indices, weight, padding_idx=padding, scale_grad_by_freq=scale_grad_by_freq)


def embedding_renorm_(input, indices, max_norm, norm_type):
    """Scales the rows of `input` (a weight) that indices looks up to norm at most max_norm, in place."""
    _argcheck.tensor("embedding_renorm_", "input", input, 1)
    _argcheck.tensor("embedding_renorm_", "indices", indices, 2)
    return _sparse._renorm_rows_(input, indices, max_norm, norm_type)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    _argcheck.tensor("layer_norm", "input", input, 1)
    return _F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    _argcheck.tensor("group_norm", "input", input, 1)
    return _F.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    _argcheck.tensor("batch_norm", "input", input, 1)
    _argcheck.tensor("batch_norm", "weight", weight, 2)
    return _F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    _argcheck.tensor("instance_norm", "input", input, 1)
    _argcheck.tensor("instance_norm", "weight", weight, 2)
    return _F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


bilinear = _F.bilinear  # the same signature: (input1, input2, weight, bias=None)


def kl_div(input, target, reduction=1, *, log_target=False):
    """The pointwise KL divergence target * (log target - input), reduced by the enum; mean is
    over every element (nn.functional's "batchmean" is not a native reduction)."""
    _argcheck.tensor("kl_div", "input", input, 1)
    loss = _F.kl_div(input, target, reduction="none", log_target=log_target)
    return _loss._reduce(loss, _reduction(reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=1):
    _argcheck.tensor("binary_cross_entropy_with_logits", "input", input, 1)
    return _F.binary_cross_entropy_with_logits(input, target, weight, reduction=_reduction(reduction),
                                               pos_weight=pos_weight)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    _argcheck.tensor("cosine_embedding_loss", "input1", input1, 1)
    _argcheck.tensor("cosine_embedding_loss", "input2", input2, 2)
    return _F.cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    _argcheck.tensor("hinge_embedding_loss", "input", input, 1)
    return _F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    _argcheck.tensor("margin_ranking_loss", "input1", input1, 1)
    _argcheck.tensor("margin_ranking_loss", "input2", input2, 2)
    return _F.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-06, swap=False, reduction=1):
    return _F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction=_reduction(reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    _argcheck.tensor("poisson_nll_loss", "input", input, 1)
    return _F.poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=_reduction(reduction))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1, zero_infinity=False):
    _argcheck.tensor("ctc_loss", "log_probs", log_probs, 1)
    _argcheck.tensor("ctc_loss", "targets", targets, 2)
    return _F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction), zero_infinity)


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """The convolution (or, transposed, its transpose) whose spatial rank is weight's less two."""
    _argcheck.tensor("convolution", "input", input, 1)
    _argcheck.tensor("convolution", "weight", weight, 2)
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
    _argcheck.tensor("rnn_tanh_cell", "input", input, 1)
    _argcheck.tensor("rnn_tanh_cell", "hx", hx, 2)
    return _cell("RNN_TANH", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    _argcheck.tensor("rnn_relu_cell", "input", input, 1)
    _argcheck.tensor("rnn_relu_cell", "hx", hx, 2)
    return _cell("RNN_RELU", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """(h, c) after one step; hx is [h, c]."""
    _argcheck.tensor("lstm_cell", "input", input, 1)
    if len(hx) != 2:
        raise RuntimeError(f"lstm_cell expects two hidden states (h, c), got {len(hx)}")
    return tuple(_cell("LSTM", input, tuple(hx), w_ih, w_hh, b_ih, b_hh))


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    _argcheck.tensor("gru_cell", "input", input, 1)
    _argcheck.tensor("gru_cell", "hx", hx, 2)
    return _cell("GRU", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


pdist = _F.pdist  # loom.nn.functional's, the same function


def constant_pad_nd(input, pad, value=0):
    """`input` padded by `pad` (pairs from the last dim backwards; negative amounts crop) with
    `value`."""
    _argcheck.tensor("constant_pad_nd", "input", input, 1)
    return _F.pad(input, pad, mode="constant", value=value)


def rsub(input, other, *positional_alpha, alpha=1):
    """other - alpha * input (subtraction with the operands swapped). alpha is a number: a 0-d
    tensor given for it counts as its value (as PyTorch's Scalar parameters), so it takes no part
    in the result's dtype, which input and other alone decide; and a floating alpha is refused
    where that dtype (not input's) is integral.

    PyTorch's rsub takes alpha by keyword only where other is a tensor; a third positional
    argument selects its other form, rsub(Tensor, Scalar other, Scalar alpha), so a 0-d tensor
    other then counts as a number too (float64 0-d minus an int16 vector is float32 there)."""
    import loom
    from loom import _argcheck
    _argcheck.tensor("rsub", "input", input, 1)
    if positional_alpha:
        if len(positional_alpha) > 1:
            raise TypeError(f"rsub() takes from 2 to 3 positional arguments but {2 + len(positional_alpha)} were given")
        alpha = positional_alpha[0]
        if isinstance(other, loom.Tensor):
            if other.dim() != 0:
                raise TypeError("rsub(): with alpha given by position, argument 'other' (position 2) must be a "
                                f"Number or a 0-d tensor, not a tensor of shape {list(other.shape)}")
            other = other.item()
    if isinstance(alpha, loom.Tensor):
        if alpha.numel() != 1:
            raise RuntimeError(f"rsub(): argument 'alpha' must be a number or a one-element tensor, got a tensor of "
                               f"shape {list(alpha.shape)}")
        alpha = alpha.item()
    if not isinstance(alpha, (bool, int, float)):
        raise TypeError(f"rsub(): argument 'alpha' must be Number, not {type(alpha).__name__}")
    if not isinstance(other, (loom.Tensor, bool, int, float)):
        raise TypeError(f"rsub(): argument 'other' (position 2) must be Tensor or Number, not {type(other).__name__}")
    dtype = loom.result_type(input, other)
    if isinstance(alpha, bool) and dtype is not loom.bool:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if isinstance(alpha, float) and not dtype.is_floating_point:
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if isinstance(other, loom.Tensor):
        return loom.sub(other, input, alpha=alpha)
    scaled = input if alpha == 1 else input * alpha
    return scaled.to(dtype).__rsub__(other) if scaled.dtype != dtype else scaled.__rsub__(other)


__all__ = ["embedding_renorm_",
           "dropout", "dropout_", "feature_dropout", "feature_dropout_", "alpha_dropout", "alpha_dropout_",
           "feature_alpha_dropout", "feature_alpha_dropout_", "embedding", "layer_norm", "group_norm", "batch_norm",
           "instance_norm", "bilinear", "kl_div", "binary_cross_entropy_with_logits", "cosine_embedding_loss",
           "hinge_embedding_loss", "margin_ranking_loss", "triplet_margin_loss", "poisson_nll_loss", "ctc_loss",
           "pdist", "convolution", "rnn_tanh_cell", "rnn_relu_cell", "lstm_cell", "gru_cell",
           "constant_pad_nd", "rsub"]
