"""Tensor methods written in Python: pickling and copy.deepcopy, with PyTorch's semantics.

loom.Tensor is a C type whose methods Python cannot set; its __reduce_ex__ and __deepcopy__
entries (pyext/tensor_serialization.cpp) call reduce_ex and deepcopy here, so every subclass
(Parameter, user subclasses made with Tensor._make_subclass) inherits them.

pickle.dumps(t) stores the tensor by value: the bytes of the part of its storage it addresses
(every dtype, bfloat16 included: raw little-endian bytes), its layout within them (strides and
views survive, an expanded tensor stays small), dtype, device, requires_grad, its class (a
Parameter stays a Parameter) and its Python attributes. A lazy tensor is synced first and
unpickles as a lazy tensor. Unlike PyTorch, two tensors that share a storage (a tensor and a
view of it) pickle as two storages; loom.save keeps them shared.

copy.deepcopy(t) is PyTorch's: only leaves (a tensor computed by a recorded op raises), a copy
with the same strides in storage of its own, the same requires_grad, class and attributes, the
gradient copied too; a lazy tensor is copied lazily, without a sync.
"""

import copy

import loom
from loom.serialization import memory


def reduce_ex(t, protocol):
    """(rebuild, args) that pickle stores for t: its values, not a reference to its storage."""
    host = t.detach()
    if not memory.on_host(host):
        host = host.cpu()
    count = memory.element_span(host)
    data = bytes(memory.read_view(host, count)) if count else b""
    state = dict(t.__dict__) if getattr(t, "__dict__", None) else None
    return (_rebuild_tensor, (type(t), data, memory.dtype_name(t.dtype), tuple(host.shape), host.stride(),
                              t.requires_grad, str(t.device), state))


def _rebuild_tensor(cls, data, dtype_name, size, stride, requires_grad, device, state):
    """The tensor reduce_ex stored; its storage starts at its first element."""
    dtype = memory.dtype_by_name(dtype_name)
    if not isinstance(cls, type) or not issubclass(cls, loom.Tensor):
        raise TypeError(f"cannot unpickle a tensor as {cls!r}, which is not a loom.Tensor class")
    storage = loom.empty(len(data) // dtype.itemsize, dtype=dtype, device="cpu")
    if data:
        memory.write_view(storage)[:] = data
    if device != "cpu":
        storage = storage.to(device)
    return rebuilt_as(cls, storage._as_strided(size, stride, 0).detach(), requires_grad, state)


def rebuilt_as(cls, t, requires_grad, state):
    """A rebuilt tensor's values t given what the pickled one was: its class (a Parameter stays
    a Parameter), requires_grad and Python attributes."""
    if cls is not loom.Tensor:
        t = loom.Tensor._make_subclass(cls, t)
    if requires_grad:
        t.requires_grad_(True)
    if state:
        t.__dict__.update(state)
    return t


def deepcopy(t, memo):
    """copy.deepcopy(t), as PyTorch's Tensor.__deepcopy__."""
    if not t.is_leaf:
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                           "protocol at the moment")
    if id(t) in memo:
        return memo[id(t)]
    with loom.no_grad():
        new = t.detach().clone()
    if type(t) is not loom.Tensor:
        new = loom.Tensor._make_subclass(type(t), new)
    if t.requires_grad:
        new.requires_grad_(True)
    memo[id(t)] = new
    if t.grad is not None:
        new.grad = deepcopy(t.grad, memo)
    if getattr(t, "__dict__", None):
        new.__dict__.update(copy.deepcopy(t.__dict__, memo))
    return new


class _TensorHooks(dict):
    """{handle id: hook} of one register_hook call (a dict the handle can refer to weakly)."""


def register_hook(t, args, kwargs):
    """Tensor.register_hook(hook): hook(grad) runs each time the gradient of t is computed, before
    anything reads it (.grad of a leaf or of a retain_grad() tensor, autograd.grad's result, the
    rest of backward), and may return a replacement of the same size and dtype (None keeps it).
    Returns a handle whose remove() takes the hook away."""
    from loom.utils.hooks import RemovableHandle
    if kwargs or len(args) != 1:
        raise TypeError(f"register_hook() takes 1 argument (hook), got {len(args) + len(kwargs)}")
    hook = args[0]
    if not t.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    hooks = _TensorHooks()
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    loom._C._add_tensor_hook(t, hooks)
    return handle
