"""Collectives of small picklable Python objects (all_gather_object, broadcast_object_list,
gather_object), as torch.distributed: each object is pickled into a uint8 tensor on the group's
device, sizes go first, then the bytes, padded to the largest. Like PyTorch's, they unpickle
what other ranks sent: use them only within a job you trust."""

import pickle

import numpy as np

from loom.distributed.collectives import all_gather, broadcast, gather
from loom.distributed.process_group import _resolve


def _bytes_tensor(obj, device):
    import loom

    data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8).copy()
    return loom.tensor(data, device=device)


def _load(t, size):
    return pickle.loads(t[:size].to("cpu").numpy().tobytes())


def _padded(g, obj):
    """obj pickled into a uint8 tensor, padded to the longest of the group's, and every rank's length."""
    import loom

    t = _bytes_tensor(obj, g._device)
    sizes = _sizes(g, t)
    padded = loom.zeros(max(sizes), dtype=loom.uint8, device=g._device)
    padded[:t.numel()] = t
    return padded, sizes


def _sizes(g, t):
    import loom

    mine = loom.tensor([t.numel()], dtype=loom.int64, device=g._device)
    sizes = [loom.zeros(1, dtype=loom.int64, device=g._device) for _ in range(g.size())]
    all_gather(sizes, mine, group=g)
    return [int(s.item()) for s in sizes]


def all_gather_object(object_list, obj, group=None):
    """object_list[r] becomes rank r's obj, on every rank (object_list has the group's size)."""
    import loom

    g = _resolve(group)
    if g is None:
        return
    if len(object_list) != g.size():
        raise ValueError(f"object_list must have {g.size()} entries (the group's size), got {len(object_list)}")
    padded, sizes = _padded(g, obj)
    outputs = [loom.empty(padded.numel(), dtype=loom.uint8, device=g._device) for _ in range(g.size())]
    all_gather(outputs, padded, group=g)
    for r in range(g.size()):
        object_list[r] = _load(outputs[r], sizes[r])


def broadcast_object_list(object_list, src=0, group=None, device=None):
    """object_list's entries become rank src's, on every rank (every rank passes a list of the
    same length)."""
    import loom

    g = _resolve(group)
    if g is None:
        return
    root = g._group_rank(src, "src")
    where = device if device is not None else g._device
    if g.rank() == root:
        parts = [_bytes_tensor(o, where) for o in object_list]
        sizes = loom.tensor([p.numel() for p in parts], dtype=loom.int64, device=where)
    else:
        sizes = loom.zeros(len(object_list), dtype=loom.int64, device=where)
    broadcast(sizes, src, group=g)
    counts = [int(n) for n in sizes.tolist()]
    if g.rank() == root:
        payload = loom.cat(parts) if parts else loom.zeros(0, dtype=loom.uint8, device=where)
    else:
        payload = loom.empty(sum(counts), dtype=loom.uint8, device=where)
    broadcast(payload, src, group=g)
    if g.rank() != root:
        start = 0
        for i, n in enumerate(counts):
            object_list[i] = _load(payload[start:start + n], n)
            start += n


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    """At rank dst, object_gather_list[r] becomes rank r's obj; other ranks pass no list."""
    import loom

    g = _resolve(group)
    if g is None:
        return
    root = g._group_rank(dst, "dst")
    if g.rank() == root and (object_gather_list is None or len(object_gather_list) != g.size()):
        raise ValueError(f"object_gather_list must have {g.size()} entries on the destination rank")
    padded, sizes = _padded(g, obj)
    outputs = [loom.empty(padded.numel(), dtype=loom.uint8, device=g._device) for _ in range(g.size())] \
        if g.rank() == root else None
    gather(padded, outputs, dst, group=g)
    if g.rank() == root:
        for r in range(g.size()):
            object_gather_list[r] = _load(outputs[r], sizes[r])
