"""ctc_loss: the connectionist temporal classification loss (Graves et al., 2006), as torch's.

The loss is minus the log of the probability that the network's per-step class distributions
spell a target once repeats are merged and blanks removed. It is computed by the forward
recursion over the extended target (the target with a blank before, between and after its
labels, length 2S+1) in log space, one time step at a time, with loom ops on (batch, 2S+1)
tensors: lazily the whole recursion records into the step's trace and fuses, and its gradient
is autograd's through the recursion (the backward recursion of the paper, as PyTorch's
derivative computes it, falls out of differentiating the forward one).

The lengths decide the shapes (how far each sequence's recursion runs, where its target ends),
so they are read on the host: lengths given as tensors are a sync on a lazy device, as they
are a device-to-host copy in PyTorch's CUDA kernel.
"""

import loom
from loom import _argcheck

_NEG_INF = float("-inf")


def _lengths(lengths, name, batch):
    values = lengths.tolist() if isinstance(lengths, loom.Tensor) else list(lengths)
    if isinstance(values, int):
        values = [values]
    if len(values) != batch:
        raise RuntimeError(f"{name} must be of size batch_size")
    return [int(v) for v in values]


def _log_add(*terms):
    """log(sum(exp(t))) of equally shaped tensors holding -inf where a path is impossible. Where
    every term is -inf the result is -inf and no NaN reaches the gradient (the log and the
    shift are taken of safe stand-ins there, and the where() sends those branches no gradient)."""
    top = terms[0]
    for t in terms[1:]:
        top = loom.maximum(top, t)
    dead = top == _NEG_INF
    shift = loom.where(dead, loom.zeros_like(top), top).detach()
    total = sum((t - shift).exp() for t in terms)
    total = loom.where(dead, loom.ones_like(total), total)
    return loom.where(dead, loom.full_like(top, _NEG_INF), shift + total.log())


def _shifted(alpha, by):
    """alpha moved `by` positions right along the extended target, -inf entering on the left."""
    pad = loom.full((alpha.shape[0], by), _NEG_INF, dtype=alpha.dtype, device=alpha.device)
    return loom.cat([pad, alpha[:, :-by]], dim=1)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    _argcheck.tensor("ctc_loss", "log_probs", log_probs, 1)
    _argcheck.tensor("ctc_loss", "targets", targets, 2)
    if log_probs.dim() not in (2, 3):
        raise RuntimeError(f"ctc_loss: log_probs must be 2-D (input_length, num_labels) or 3-D (input_length, "
                           f"batch_size, num_labels), got {log_probs.dim()}-D of shape {tuple(log_probs.shape)}")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    unbatched = log_probs.dim() == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        if targets.dim() == 1:
            targets = targets.unsqueeze(0)
    steps, batch, classes = log_probs.shape
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    if targets.dtype.is_floating_point or targets.dtype == loom.bool:
        raise RuntimeError(f"ctc_loss: targets must be an integer tensor, got {targets.dtype}")
    in_lens = _lengths(input_lengths, "input_lengths", batch)
    tgt_lens = _lengths(target_lengths, "target_lengths", batch)
    for n, length in enumerate(in_lens):
        if not 0 <= length <= steps:
            raise RuntimeError(f"Expected input_lengths to have value at most {steps}, but got value {length} "
                               f"(while checking arguments for ctc_loss_cpu)")
    if min(tgt_lens, default=0) < 0:
        raise RuntimeError(f"ctc_loss: target_lengths must be non-negative, got {tgt_lens}")
    labels = max(tgt_lens, default=0)
    device = log_probs.device
    targets = targets.to(device=device, dtype=loom.int64)

    # Each sequence's labels as one row, padded with blank past its length: targets come either
    # as (batch, S) rows or as one concatenation of every sequence's labels.
    if targets.dim() == 2:
        if targets.shape[0] != batch or targets.shape[1] < labels:
            raise RuntimeError(f"Expected tensor to have size at least {labels} at dimension 1, but got size "
                               f"{targets.shape[1]} for argument #2 'targets' (while checking arguments for "
                               f"ctc_loss_cpu)")
        rows = targets[:, :labels]
    elif targets.dim() == 1:
        if targets.shape[0] != sum(tgt_lens):
            raise RuntimeError(f"ctc_loss: the concatenated targets hold {targets.shape[0]} labels, but "
                               f"target_lengths sum to {sum(tgt_lens)}")
        starts = [sum(tgt_lens[:n]) for n in range(batch)]
        index = [[starts[n] + min(s, max(tgt_lens[n] - 1, 0)) for s in range(labels)] for n in range(batch)]
        rows = targets[loom.tensor(index, dtype=loom.int64, device=device)] if labels else \
            loom.zeros((batch, 0), dtype=loom.int64, device=device)
    else:
        raise RuntimeError(f"ctc_loss: targets must be 1-D (concatenated) or 2-D (batch, S), got shape "
                           f"{tuple(targets.shape)}")
    within = loom.tensor([[s < tgt_lens[n] for s in range(labels)] for n in range(batch)], dtype=loom.bool,
                         device=device).reshape(batch, labels)
    rows = loom.where(within, rows, loom.full_like(rows, blank))

    # The extended target: blank, l1, blank, l2, ..., blank (length 2S+1).
    width = 2 * labels + 1
    extended = loom.full((batch, width), blank, dtype=loom.int64, device=device)
    if labels:
        extended[:, 1::2] = rows
    # A label may be reached from two places back unless it repeats the label before it (a
    # repeat needs a blank between) or is itself a blank.
    skip = loom.zeros((batch, width), dtype=loom.bool, device=device)
    if labels > 1:
        skip[:, 3::2] = rows[:, 1:] != rows[:, :-1]
    # Per time step, each position's log-probability: (steps, batch, width).
    emit = log_probs.gather(2, extended.unsqueeze(0).expand(steps, batch, width))

    # A path starts on the first blank or on the first label.
    start = min(2, width)
    alpha = loom.cat([emit[0, :, :start], loom.full((batch, width - start), _NEG_INF, dtype=log_probs.dtype,
                                                    device=device)], dim=1)
    impossible = loom.full((batch, width), _NEG_INF, dtype=log_probs.dtype, device=device)
    for t in range(1, max(in_lens, default=0)):
        stay_or_step = _log_add(alpha, _shifted(alpha, 1))
        jump = loom.where(skip, _shifted(alpha, 2), impossible) if width > 2 else impossible
        advanced = _log_add(stay_or_step, jump) + emit[t]
        running = [t < length for length in in_lens]
        if all(running):
            alpha = advanced
        else:
            alpha = loom.where(loom.tensor(running, device=device).unsqueeze(1), advanced, alpha)

    # A path ends on the last label or on the blank after it.
    last = loom.tensor([[2 * length, max(2 * length - 1, 0)] for length in tgt_lens], dtype=loom.int64,
                       device=device).reshape(batch, 2)
    ends = alpha.gather(1, last)
    ends = loom.where(loom.tensor([[True, length > 0] for length in tgt_lens], device=device).reshape(batch, 2),
                      ends, impossible[:, :2])
    loss = -_log_add(ends[:, 0], ends[:, 1])
    # No input steps: the loss is 0 for an empty target, else impossible.
    empty_input = [length == 0 for length in in_lens]
    if any(empty_input):
        nothing = loom.tensor([0.0 if tgt_lens[n] == 0 else float("inf") for n in range(batch)],
                              dtype=loss.dtype, device=device)
        loss = loom.where(loom.tensor(empty_input, device=device), nothing, loss)
    if zero_infinity:
        loss = loom.where(loss == float("inf"), loom.zeros_like(loss), loss)
    if reduction == "none":
        return loss.squeeze(0) if unbatched else loss
    if reduction == "sum":
        return loss.sum()
    divisors = loom.tensor([max(length, 1) for length in tgt_lens], dtype=loss.dtype, device=device)
    return (loss / divisors).mean()
