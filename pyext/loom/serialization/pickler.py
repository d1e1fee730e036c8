"""Writing the pickle of a checkpoint (data.pkl) as torch.save does, so torch.load reads it.

Tensors are written as PyTorch writes them: torch._utils._rebuild_tensor_v2(storage, offset,
size, stride, requires_grad, OrderedDict()), a Parameter as torch._utils._rebuild_parameter of
such a tensor; each storage is a persistent id ('storage', torch.FloatStorage, key, location,
numel) whose bytes go to the record data/<key>. loom dtypes, loom.Size and devices are written
as torch's (torch.float32, torch.Size, torch.device). These globals are written by name; torch is
never imported.

Storages: loom does not expose storages, so tensors are grouped by the memory they address.
Tensors whose memory spans overlap (a tensor and its views, tied weights, two detach()es of one
parameter) are one storage, written once, covering exactly the union of their spans (a slice of
a large tensor saves only its span, unlike PyTorch, which saves the whole storage); each keeps
its offset and strides in it. Since a later tensor can widen a storage an earlier one was
placed in, the object is pickled twice: once to collect its tensors, once to write.
Lazy tensors are synced (one sync for all); GPU tensors are copied to the host one by one, each
its own storage, tagged with their device ("cuda:0") so that loading puts them back. A lazy
tensor's storage is tagged with the device it runs on ("cpu", "cuda:0"), which PyTorch reads;
that it was lazy is kept beside, in a record PyTorch ignores (torch_zip.py: loom_lazy_storages),
so loom.load puts it back on the lazy device, as torch.load puts a CUDA tensor back on its GPU.
"""

import collections
import io
import pickle

import loom
from loom.serialization import memory
from loom.serialization.torch_names import STORAGE_OF_DTYPE, Name

_REBUILD_TENSOR = Name("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = Name("torch._utils", "_rebuild_parameter")
_REBUILD_PARAMETER_WITH_STATE = Name("torch._utils", "_rebuild_parameter_with_state")
_REBUILD_FROM_TYPE = Name("torch._tensor", "_rebuild_from_type_v2")
_SIZE = Name("torch", "Size")
_DEVICE = Name("torch", "device")
_DTYPES = {d: Name("torch", memory.dtype_name(d)) for d in STORAGE_OF_DTYPE}
_STORAGE_TYPES = {d: Name("torch", name) for d, name in STORAGE_OF_DTYPE.items()}


class StorageRef:
    """One storage of the checkpoint: its record key, device tag, dtype and element count."""

    def __init__(self, key, location, dtype, numel):
        self.key, self.location, self.dtype, self.numel = key, location, dtype, numel


# What dumps returns: data.pkl's bytes, [(key, bytes of the storage)], and the keys of the
# storages of lazy tensors.
Pickled = collections.namedtuple("Pickled", "data records lazy_keys")


class Storages:
    """Where each tensor lives in the checkpoint's storages: collect() every tensor, plan(), then
    place() each (see the module docstring)."""

    def __init__(self):
        self.tensors = {}  # id -> tensor, in the order first met
        self.places = None  # id -> (StorageRef, offset in it, the tensor on the host)
        self.records = []  # (key, read-only bytes of the storage)
        self.lazy_keys = []  # keys of the storages of lazy tensors
        self._detached = {}  # id -> (tensor, its detach()): one object in both passes

    def detached(self, t):
        """t.detach(), the same object every time it is asked for t."""
        return self._detached.setdefault(id(t), (t, t.detach()))[1]

    def collect(self, t):
        self.tensors.setdefault(id(t), t)

    def place(self, t):
        return self.places[id(t)]

    def plan(self):
        """Groups the collected tensors into storages and places each in its storage."""
        shared, alone = [], []
        for order, t in enumerate(self.tensors.values()):
            host = t.detach() if memory.on_host(t) else t.detach().cpu()  # a GPU tensor's copy: its own storage
            begin = host.data_ptr() if host.numel() else 0
            member = _Member(begin, begin + memory.element_span(host) * host.element_size(), order, host, _location(t),
                             t.is_lazy)
            if memory.on_host(t) and host.numel():
                shared.append(member)
            else:
                alone.append([member])
        groups = sorted(_overlapping(shared) + alone, key=lambda g: min(m.order for m in g))
        self.places = {}
        ids = list(self.tensors)
        for key, group in enumerate(groups):
            first = min(group, key=lambda m: m.begin)
            dtype, size = first.host.dtype, first.host.element_size()
            for m in group:
                if m.host.dtype is not dtype:
                    raise RuntimeError("Cannot save multiple tensors or storages that view the same data as different "
                                       f"types ({dtype} and {m.host.dtype})")
                if (m.begin - first.begin) % size:
                    raise RuntimeError(f"cannot save tensors of dtype {dtype} whose memory overlaps at an offset that "
                                       "is not a whole number of elements")
            ref = StorageRef(str(key), first.location, dtype, (max(m.end for m in group) - first.begin) // size)
            for m in group:
                self.places[ids[m.order]] = (ref, (m.begin - first.begin) // size, m.host)
            self.records.append((ref.key, memory.read_view(first.host, ref.numel)))
            if first.lazy:
                self.lazy_keys.append(ref.key)


# A tensor to place: the byte range its elements span, when it was met, its host copy, device tag,
# whether it is lazy.
_Member = collections.namedtuple("_Member", "begin end order host location lazy")


def _overlapping(members):
    """The members in groups whose byte ranges intersect (transitively): one storage each."""
    groups, end = [], 0
    for m in sorted(members, key=lambda m: m.begin):
        if groups and m.begin < end:
            groups[-1].append(m)
            end = max(end, m.end)
        else:
            groups.append([m])
            end = m.end
    return groups


def _location(t):
    """The device tag PyTorch would write: "cpu" or "cuda:N" (a lazy tensor's backend's)."""
    device = t.device
    return str(device.backend) if device.type == "lazy" else str(device)


class _Pickler(pickle._Pickler):
    """The pure-Python pickler, with PyTorch's globals written by name (dispatch on Name) and
    loom's tensors, dtypes, sizes and devices written as PyTorch's (reducer_override)."""

    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file, protocol, storages, collecting):
        super().__init__(file, protocol)
        self.storages, self.collecting = storages, collecting

    def save_name(self, obj):
        if self.proto >= 4:
            self.save(obj.module)
            self.save(obj.name)
            self.write(pickle.STACK_GLOBAL)
        else:
            self.write(pickle.GLOBAL + obj.module.encode("ascii") + b"\n" + obj.name.encode("ascii") + b"\n")
        self.memoize(obj)

    dispatch[Name] = save_name

    def save_dtype(self, obj):
        self.save_name(_DTYPES[obj])

    dispatch[type(loom.float32)] = save_dtype

    def persistent_id(self, obj):
        if isinstance(obj, StorageRef):
            return ("storage", _STORAGE_TYPES[obj.dtype], obj.key, obj.location, obj.numel)
        return None

    def reducer_override(self, obj):
        if isinstance(obj, loom.Tensor):
            return self._reduce_tensor(obj)
        if type(obj) is loom.Size:
            return (_SIZE, (tuple(obj),))
        if type(obj) is loom.device and obj.type in ("cpu", "cuda"):
            return (_DEVICE, (str(obj),))
        return NotImplemented

    def _reduce_tensor(self, t):
        from loom.nn.parameter import Parameter

        state = dict(t.__dict__) if getattr(t, "__dict__", None) else None
        if isinstance(t, Parameter):
            data = self.storages.detached(t)
            if state is None and type(t) is Parameter:
                return (_REBUILD_PARAMETER, (data, t.requires_grad, collections.OrderedDict()))
            if type(t) is Parameter:
                return (_REBUILD_PARAMETER_WITH_STATE, (data, t.requires_grad, collections.OrderedDict(), state))
        if type(t) is not loom.Tensor:  # a subclass: PyTorch's form for subclasses and tensors with attributes
            return (_REBUILD_FROM_TYPE, (_REBUILD_TENSOR, type(t), self._tensor_args(t, t.requires_grad), state))
        return (_REBUILD_TENSOR, self._tensor_args(t, t.requires_grad))

    def _tensor_args(self, t, requires_grad):
        if self.collecting:
            self.storages.collect(t)
            return (None, 0, tuple(t.shape), (), requires_grad, collections.OrderedDict())
        ref, offset, host = self.storages.place(t)
        return (ref, offset, tuple(host.shape), host.stride(), requires_grad, collections.OrderedDict())


class _Discard:
    def write(self, data):
        pass


def dumps(obj, protocol):
    """The Pickled of obj."""
    storages = Storages()
    _Pickler(_Discard(), protocol, storages, collecting=True).dump(obj)
    storages.plan()
    out = io.BytesIO()
    _Pickler(out, protocol, storages, collecting=False).dump(obj)
    return Pickled(out.getvalue(), storages.records, storages.lazy_keys)
