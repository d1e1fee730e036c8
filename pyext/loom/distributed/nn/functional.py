"""Differentiable collectives, as torch.distributed.nn.functional: each returns new tensors (the
input is not changed) and has a gradient, itself a collective (lazy/derivatives.cpp): the
gradient of an all-reduce sum is an all-reduce sum of the gradients, of an all-gather a
reduce-scatter, of a broadcast the sum of the gradients at the source. Every rank must run the
backward pass, as every rank ran the forward one."""

from loom import _C
from loom.distributed.collectives import ReduceOp, _op
from loom.distributed.process_group import _resolve


def _group(group):
    g = _resolve(group)
    if g is None:
        raise RuntimeError("this rank is not a member of the group")
    return g


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """The reduction over the group's ranks (differentiable for SUM and AVG)."""
    return _C._dist_op("all_reduce", tensor, _group(group)._id, _op(op), 0, None)


def broadcast(tensor, src, group=None):
    """Rank src's tensor, on every rank."""
    g = _group(group)
    out = tensor.clone()
    _C._dist_op("broadcast_", out, g._id, 0, g._group_rank(src, "src"), None)
    return out


def all_gather(tensor, group=None):
    """A tuple of every rank's tensor, in rank order."""
    g = _group(group)
    flat = _C._dist_op("all_gather", tensor, g._id, 0, 0, None)
    n = tensor.numel()
    return tuple(flat[r * n:(r + 1) * n].view(tensor.shape) for r in range(g.size()))


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None):
    """This rank's reduction over the ranks of their input_list[rank], a new tensor of output's
    shape (output itself is not written: PyTorch's writes it and returns it)."""
    from loom import cat

    g = _group(group)
    flat = cat([t.reshape(-1) for t in input_list])
    return _C._dist_op("reduce_scatter", flat, g._id, _op(op), 0, None).view(tuple(output.shape))
