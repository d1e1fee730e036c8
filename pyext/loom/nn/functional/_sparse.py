"""Lookups of loom.nn.functional: embedding, embedding_bag, one_hot."""

import loom
from loom import _C
from loom import _argcheck

one_hot = _C.one_hot


def _renorm_rows_(weight, indices, max_norm, norm_type):
    """Scales in place (no gradient recorded) each row of weight that `indices` looks up and whose
    norm_type-norm exceeds max_norm, to norm max_norm (by max_norm / (norm + 1e-7), PyTorch's
    factor). Every row's norm is computed and the looked-up ones picked by a mask, so no index is
    read on the host (nothing syncs on the lazy device)."""
    with loom.no_grad():
        norms = loom.linalg.vector_norm(weight, norm_type, dim=1)
        looked_up = loom.zeros(weight.shape[0], dtype=loom.bool, device=weight.device)
        looked_up = looked_up.index_fill(0, indices.reshape(-1), True)
        scale = loom.where(looked_up & (norms > max_norm), max_norm / (norms + 1e-7), loom.ones_like(norms))
        weight.mul_(scale.unsqueeze(1))
    return weight


class _ScaledGradient(loom.autograd.Function):
    """The identity, whose gradient is multiplied by `scale`."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


def _by_inverse_frequency(rows, indices, num_rows):
    """rows (one per index) whose gradients are divided by how often their index occurs among
    `indices` (scale_grad_by_freq: each row's total gradient is then the mean, not the sum, of
    its lookups'). The counts are tensor data: nothing is read on the host."""
    flat = indices.reshape(-1)
    ones = loom.ones(flat.shape, dtype=rows.dtype, device=rows.device)
    counts = loom.zeros(num_rows, dtype=rows.dtype, device=rows.device).index_add_(0, flat, ones)
    return _ScaledGradient.apply(rows, counts.index_select(0, flat).reciprocal().unsqueeze(1))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """Rows of `weight` picked by the integer tensor `input` (gradients scatter-add back).
    Lookups of row `padding_idx` pass no gradient to it, as in PyTorch. With max_norm, the rows
    looked up are first renormalized in weight itself (torch.embedding_renorm_). With
    scale_grad_by_freq, a row's gradient is divided by how often input looks it up. `sparse` asks
    PyTorch for a sparse gradient; loom's is dense, with the same values."""
    _argcheck.tensor("embedding", "input", input, 1)
    _argcheck.tensor("embedding", "weight", weight, 2)
    if padding_idx is not None:
        if not -weight.shape[0] <= padding_idx < weight.shape[0]:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= weight.shape[0]
    if max_norm is not None:
        _renorm_rows_(weight, input, max_norm, norm_type)
    flat = weight.index_select(0, input.reshape(-1))
    if scale_grad_by_freq and flat.requires_grad:
        flat = _by_inverse_frequency(flat, input, weight.shape[0])
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
    the bags' boundaries stay tensor data: in lazy mode new offsets do not change the trace.
    max_norm and scale_grad_by_freq act as in embedding(); the gradient is dense (sparse=True
    gives its values densely)."""
    _argcheck.tensor("embedding_bag", "input", input, 1)
    _argcheck.tensor("embedding_bag", "weight", weight, 2)
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if scale_grad_by_freq and mode == "max":
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    lookup = dict(max_norm=max_norm, norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq)
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
        rows = embedding(input, weight, **lookup)  # (B, N, D)
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
        rows = embedding(input, weight, **lookup).unsqueeze(0)  # (1, N, D)
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
