"""The collectives and point-to-point calls, as torch.distributed.

On eager tensors (cpu, cuda) a call runs at once; with async_op=True it runs on its group's own
thread and returns a Work to wait() for. On lazy tensors a collective is an op of the trace
(lazy/collectives.h): it runs at the next sync, inside the step's plan, in the order the
collectives were called; async_op=True then returns a Work that is already complete (the values
appear whenever they are read). send, recv, barrier and the object collectives run at once in
every mode (a lazy tensor's value is computed first).

src and dst are global ranks, as in PyTorch. A rank outside `group` returns without doing
anything (None), as PyTorch does.
"""

import enum

from loom import _C
from loom.distributed.process_group import _resolve


class ReduceOp(enum.IntEnum):
    """How all_reduce, reduce, reduce_scatter combine the ranks' values (PyTorch's numbering).
    AVG needs a floating-point tensor; on Gloo it is SUM divided by the group's size."""

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4


class Work:
    """The handle of a call made with async_op=True: wait() blocks until it has finished (and
    raises its error), is_completed() asks. On lazy tensors it is complete at once."""

    def __init__(self, work=None, finish=None, keep=()):
        self._work = work
        self._finish = finish
        self._keep = keep  # tensors the call reads and writes, alive until it is done

    def wait(self, timeout=None):
        if self._work is not None:
            self._work.wait()
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()
        return True

    def is_completed(self):
        return self._work is None or self._work.is_completed()

    def is_success(self):
        return self.is_completed()


def _op(op):
    if isinstance(op, ReduceOp):
        return int(op)
    if isinstance(op, int) and not isinstance(op, bool) and 0 <= op <= 4:
        return op
    raise ValueError(f"unknown reduce op {op!r} (use loom.distributed.ReduceOp)")


def _check_tensor(t, name="tensor"):
    from loom import Tensor

    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a loom.Tensor, got {type(t).__name__}")


def _eager_async(t):
    return not t.is_lazy


def _dense(t):
    """t, or a contiguous copy of it (async calls work on contiguous memory)."""
    return t if t.is_contiguous() else t.contiguous()


def _start(kind, g, inp, out, op=0, root=0, shape=None, finish=None):
    shape = tuple(shape if shape is not None else (inp if inp is not None else out).shape)
    w = _C._dist_start(kind, g._id, inp, out, op, root, shape)
    return Work(w, finish, (inp, out))


def _split_into(tensors, flat):
    """tensors[r] becomes chunk r of the 1-d `flat`."""
    for r, out in enumerate(tensors):
        n = out.numel()
        out.copy_(flat[r * n:(r + 1) * n].view(out.shape))


def _copy_back(dst, src):
    def finish():
        if src is not dst:
            dst.copy_(src.view(dst.shape))

    return finish


# ---- collectives ----

def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """tensor becomes the reduction (op) over the group's ranks of their tensors, in place."""
    _check_tensor(tensor)
    g = _resolve(group)
    if g is None:
        return None
    if async_op and _eager_async(tensor):
        buf = _dense(tensor)
        return _start("all_reduce", g, buf, buf, _op(op), finish=_copy_back(tensor, buf))
    _C._dist_op("all_reduce_", tensor, g._id, _op(op), 0, None)
    return Work() if async_op else None


def broadcast(tensor, src, group=None, async_op=False):
    """tensor becomes rank src's tensor, in place, on every rank of the group."""
    _check_tensor(tensor)
    g = _resolve(group)
    if g is None:
        return None
    root = g._group_rank(src, "src")
    if async_op and _eager_async(tensor):
        buf = _dense(tensor)
        return _start("broadcast", g, buf, buf, root=root, finish=_copy_back(tensor, buf))
    _C._dist_op("broadcast_", tensor, g._id, 0, root, None)
    return Work() if async_op else None


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """At rank dst, tensor becomes the reduction over the group's ranks; elsewhere it keeps its
    value (PyTorch leaves it unspecified there)."""
    _check_tensor(tensor)
    g = _resolve(group)
    if g is None:
        return None
    root = g._group_rank(dst, "dst")
    if async_op and _eager_async(tensor):
        buf = _dense(tensor)
        return _start("reduce", g, buf, buf, _op(op), root, finish=_copy_back(tensor, buf))
    _C._dist_op("reduce_", tensor, g._id, _op(op), root, None)
    return Work() if async_op else None


def _check_list(tensors, g, like, name):
    if not isinstance(tensors, (list, tuple)) or len(tensors) != g.size():
        raise ValueError(f"{name} must be a list of {g.size()} tensors (the group's size), got "
                         f"{len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__}")
    for i, t in enumerate(tensors):
        _check_tensor(t, f"{name}[{i}]")
        if t.numel() != like.numel():
            raise ValueError(f"{name}[{i}] has shape {tuple(t.shape)} but the tensor is of shape {tuple(like.shape)}")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[r] becomes rank r's tensor, on every rank."""
    _check_tensor(tensor)
    g = _resolve(group)
    if g is None:
        return None
    _check_list(tensor_list, g, tensor, "tensor_list")
    if async_op and _eager_async(tensor):
        from loom import empty

        flat = empty(g.size() * tensor.numel(), dtype=tensor.dtype, device=tensor.device)
        return _start("all_gather", g, _dense(tensor), flat, finish=lambda: _split_into(tensor_list, flat))
    _split_into(tensor_list, _C._dist_op("all_gather", tensor, g._id, 0, 0, None))
    return Work() if async_op else None


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output_tensor becomes the ranks' input tensors, concatenated in rank order (any shape with
    the group's size times input_tensor's elements, [size * n, ...] or [size, n, ...])."""
    _check_tensor(output_tensor, "output_tensor")
    _check_tensor(input_tensor, "input_tensor")
    g = _resolve(group)
    if g is None:
        return None
    if output_tensor.numel() != g.size() * input_tensor.numel():
        raise ValueError(f"output tensor size must be equal to world_size times input tensor size: output "
                         f"{tuple(output_tensor.shape)}, input {tuple(input_tensor.shape)}, world size {g.size()}")
    if async_op and _eager_async(input_tensor):
        out = _dense(output_tensor)
        return _start("all_gather", g, _dense(input_tensor), out, finish=_copy_back(output_tensor, out))
    output_tensor.copy_(_C._dist_op("all_gather", input_tensor, g._id, 0, 0, None).view(output_tensor.shape))
    return Work() if async_op else None


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):  # noqa: A002
    """output becomes this rank's chunk (in rank order) of the reduction of the ranks' inputs;
    input holds the group's size times output's elements."""
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    g = _resolve(group)
    if g is None:
        return None
    if input.numel() != g.size() * output.numel():
        raise ValueError(f"input tensor must be the same size as output size times world size: input "
                         f"{tuple(input.shape)}, output {tuple(output.shape)}, world size {g.size()}")
    if async_op and _eager_async(input):
        out = _dense(output)
        return _start("reduce_scatter", g, _dense(input), out, _op(op), finish=_copy_back(output, out))
    output.copy_(_C._dist_op("reduce_scatter", input, g._id, _op(op), 0, None).view(output.shape))
    return Work() if async_op else None


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """output becomes the reduction over the ranks of their input_list[rank]."""
    from loom import cat

    g = _resolve(group)
    if g is None:
        return None
    _check_list(input_list, g, output, "input_list")
    flat = cat([t.reshape(-1) for t in input_list])
    return reduce_scatter_tensor(output, flat, op, group, async_op)


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    """At rank dst, gather_list[r] becomes rank r's tensor; other ranks pass no list."""
    _check_tensor(tensor)
    g = _resolve(group)
    if g is None:
        return None
    root = g._group_rank(dst, "dst")
    if g.rank() == root:
        _check_list(gather_list, g, tensor, "gather_list")
    elif gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    outputs = gather_list if g.rank() == root else []
    if async_op and _eager_async(tensor):
        from loom import empty

        flat = empty(g.size() * tensor.numel() if outputs else 0, dtype=tensor.dtype, device=tensor.device)
        return _start("gather", g, _dense(tensor), flat, root=root, finish=lambda: _split_into(outputs, flat))
    _split_into(outputs, _C._dist_op("gather", tensor, g._id, 0, root, None))
    return Work() if async_op else None


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    """tensor becomes scatter_list[rank] of rank src; other ranks pass no list."""
    from loom import cat

    _check_tensor(tensor)
    g = _resolve(group)
    if g is None:
        return None
    root = g._group_rank(src, "src")
    if g.rank() == root:
        _check_list(scatter_list, g, tensor, "scatter_list")
        chunks = cat([t.reshape(-1).to(tensor.dtype) for t in scatter_list])
    elif scatter_list:
        raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    else:
        chunks = tensor
    if async_op and _eager_async(tensor):
        out = _dense(tensor)
        inp = _dense(chunks) if g.rank() == root else None
        return _start("scatter", g, inp, out, root=root, shape=tensor.shape, finish=_copy_back(tensor, out))
    tensor.copy_(_C._dist_op("scatter", chunks, g._id, 0, root, tuple(tensor.shape)))
    return Work() if async_op else None


# ---- point to point and barrier ----

def send(tensor, dst, group=None, tag=0):
    """Sends tensor's value to rank dst (which calls recv), blocking until it is sent."""
    _check_tensor(tensor)
    g = _resolve(group)
    if g is None:
        return None
    _C._dist_send(tensor, g._id, g._group_rank(dst, "dst"), tag)


def recv(tensor, src=None, group=None, tag=0):
    """tensor becomes what rank src sent (with the same tag). Returns src. loom needs src (PyTorch
    also receives from any rank)."""
    _check_tensor(tensor)
    if src is None:
        raise NotImplementedError("loom.distributed.recv needs src: receiving from any rank is not supported")
    g = _resolve(group)
    if g is None:
        return -1
    _C._dist_recv(tensor, g._id, g._group_rank(src, "src"), tag)
    return src


def isend(tensor, dst, group=None, tag=0):
    """send on the group's thread: returns a Work (the tensor must not change until it is done)."""
    _check_tensor(tensor)
    g = _resolve(group)
    if g is None:
        return None
    if tensor.is_lazy:
        tensor = tensor.to(str(tensor.device)[len("lazy:"):])  # its current value, eager
    return _start("send", g, _dense(tensor), None, tag, g._group_rank(dst, "dst"))


def irecv(tensor, src=None, group=None, tag=0):
    """recv on the group's thread: returns a Work; tensor holds the message after wait()."""
    _check_tensor(tensor)
    if src is None:
        raise NotImplementedError("loom.distributed.irecv needs src: receiving from any rank is not supported")
    g = _resolve(group)
    if g is None:
        return None
    if tensor.is_lazy:
        recv(tensor, src, group, tag)
        return Work()
    buf = _dense(tensor)
    return _start("recv", g, None, buf, tag, g._group_rank(src, "src"), finish=_copy_back(tensor, buf))


def barrier(group=None, async_op=False, device_ids=None):
    """Returns when every rank of the group has called it (or raises after the group's timeout)."""
    g = _resolve(group)
    if g is None:
        return None
    if async_op:
        return _start("barrier", g, None, None, shape=())
    _C._dist_barrier(g._id)
    return None
