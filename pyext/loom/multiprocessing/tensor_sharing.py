"""Tensors in memory shared between processes: Tensor.share_memory_(), is_shared(), and how a
shared tensor travels to another process.

A shared tensor's elements live in a segment: an anonymous memory file (memfd) mapped MAP_SHARED.
A process that receives the tensor (as an argument of a spawned process, through a
multiprocessing Queue or Pipe) maps the same file, so writes by either process are seen by the
other: Hogwild-style training, where workers update one model's parameters in place.

The file travels as a descriptor (multiprocessing.reduction.DupFd: passed at process start, or by
the sender's resource sharer afterwards), never by name, so nothing is left in /dev/shm when a
process dies, and the receiver may get the tensor after the sender dropped it: the memory lives
while any process maps it or a descriptor to it is pending. This is PyTorch's "file_descriptor"
strategy; each shared tensor holds one descriptor in each process that maps it.

Invariants:
- a segment is registered (by address, for is_shared() and pickling) from its mapping until the
  mapping is unmapped, which happens when the last tensor over it is freed;
- a process maps a given segment once: a second receipt of it reuses the first mapping (found by
  the file's inode), so tensors received twice still share memory with each other.

Unlike PyTorch, a tensor that was not shared explicitly travels by value (pickled bytes): putting
it on a Queue does not move it into shared memory."""

import bisect
import mmap
import os
import weakref
from multiprocessing import reduction

import numpy as np

import loom
from loom._tensor import rebuilt_as
from loom.serialization import memory


class _Segment:
    """What this process knows of one mapped memory file: its descriptor, size, inode and the
    address range of its mapping. It does not keep the mapping alive: the tensors over it do
    (each holds an array whose base is the mmap object), and the mapping's finalizer forgets the
    segment and closes its descriptor once the last of them is freed."""

    __slots__ = ("fd", "size", "inode", "start", "mapping")

    def __init__(self, fd, size, mapping):
        self.fd = fd
        self.size = size
        self.inode = os.fstat(fd).st_ino
        self.start = np.frombuffer(mapping, dtype=np.uint8).ctypes.data
        self.mapping = weakref.ref(mapping)


# The live segments of this process: by start address (with the sorted starts, to find the one
# holding an address) and by inode (to reuse a mapping when a segment is received again).
_starts = []
_by_start = {}
_by_inode = {}


def _map(fd, size):
    """Maps the memory file fd (which the segment then owns) and registers it: (segment, mapping)."""
    try:
        mapping = mmap.mmap(fd, size)
        segment = _Segment(fd, size, mapping)
    except BaseException:
        os.close(fd)
        raise
    bisect.insort(_starts, segment.start)
    _by_start[segment.start] = segment
    _by_inode[segment.inode] = segment
    weakref.finalize(mapping, _forget, segment)
    return segment, mapping


def _forget(segment):
    i = bisect.bisect_left(_starts, segment.start)
    if i < len(_starts) and _starts[i] == segment.start:
        del _starts[i]
    _by_start.pop(segment.start, None)
    if _by_inode.get(segment.inode) is segment:
        del _by_inode[segment.inode]
    os.close(segment.fd)


def _tensor_over(mapping, dtype, byte_offset, shape, stride):
    flat = loom.as_tensor(np.frombuffer(mapping, dtype=np.uint8)).view(dtype)
    return flat._as_strided(tuple(shape), tuple(stride), byte_offset // dtype.itemsize)


def _segment_of(t):
    """The live segment holding all of t's elements (t on the cpu), or None."""
    address = t.data_ptr()
    i = bisect.bisect_right(_starts, address) - 1
    if i < 0:
        return None
    segment = _by_start[_starts[i]]
    if address + memory.element_span(t) * t.element_size() > segment.start + segment.size:
        return None
    return segment


def share_memory_(t):
    """Moves t's elements into shared memory (in place: t, a Parameter an optimizer holds, keeps
    its identity, autograd state and strides). A tensor already shared is returned as it is; a
    CUDA tensor too (CUDA memory is shared by the driver when sent, as in PyTorch)."""
    if t.device.type == "cuda":
        return t
    if t.is_lazy:
        raise RuntimeError("share_memory_: a lazy tensor cannot be shared between processes; move it to the cpu "
                           "first (tensor.cpu().share_memory_())")
    if is_shared(t):
        return t
    nbytes = max(memory.element_span(t) * t.element_size(), 1)
    fd = os.memfd_create("loom-shared-tensor", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, nbytes)
    except BaseException:
        os.close(fd)
        raise
    _, mapping = _map(fd, nbytes)
    shared = _tensor_over(mapping, t.dtype, 0, t.shape, t.stride())
    with loom.no_grad():
        shared.copy_(t)
    t._set_data(shared)
    return t


def is_shared(t):
    """Whether t's elements are in shared memory (a CUDA tensor: always, as in PyTorch)."""
    if t.device.type == "cuda":
        return True
    return t.device.type == "cpu" and not t.is_lazy and _segment_of(t) is not None


def _reduce_tensor(t):
    """How ForkingPickler sends t: a shared tensor by its segment's descriptor, others by value."""
    segment = _segment_of(t) if t.device.type == "cpu" and not t.is_lazy else None
    if segment is None:
        return t.__reduce_ex__(2)
    state = dict(t.__dict__) if getattr(t, "__dict__", None) else None
    return (_rebuild_shared, (type(t), reduction.DupFd(segment.fd), segment.size, t.data_ptr() - segment.start,
                              memory.dtype_name(t.dtype), tuple(t.shape), t.stride(), t.requires_grad, state))


def _rebuild_shared(cls, dupfd, size, byte_offset, dtype_name, shape, stride, requires_grad, state):
    fd = dupfd.detach()
    known = _by_inode.get(os.fstat(fd).st_ino)
    mapping = known.mapping() if known is not None else None
    if mapping is not None:
        os.close(fd)
    else:
        _, mapping = _map(fd, size)
    values = _tensor_over(mapping, memory.dtype_by_name(dtype_name), byte_offset, shape, stride).detach()
    return rebuilt_as(cls, values, requires_grad, state)


def register_reducers():
    """Makes multiprocessing (Process arguments with the spawn and forkserver methods, Queues,
    Pipes) send shared tensors by descriptor. Pickling elsewhere (pickle.dumps, loom.save) still
    stores values."""
    for cls in (loom.Tensor, loom.nn.Parameter):
        reduction.ForkingPickler.register(cls, _reduce_tensor)
