"""Reading the pickle of a PyTorch checkpoint (data.pkl) into loom objects.

A pickle is a program: its GLOBAL opcodes name any importable function and its REDUCE opcodes
call it, so reading an untrusted pickle can run anything. With weights_only (the default, as
since PyTorch 2.6) find_class never imports: a global resolves only through an allow-list, to
loom's own stand-ins, and any other global raises UnsafeFileError naming it, before anything it
names could run. The allow-list is PyTorch 2.6's weights_only one, for what loom has:

- tensors: torch._utils._rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3,
  _rebuild_parameter, _rebuild_parameter_with_state, torch._tensor._rebuild_from_type_v2
  (for torch.Tensor and torch.nn.Parameter), each rebuilding a loom tensor from a storage of
  the file, with every argument checked (a view past its storage is refused);
- storage classes (torch.FloatStorage, ..., torch.UntypedStorage), dtypes (torch.float32, ...),
  torch.Size, torch.device;
- collections.OrderedDict and Counter; builtins set, frozenset, complex, slice and bytearray
  (not from a size), and _codecs.encode of a latin-1 string (how protocol 2 spells bytes).

Names are mapped as Python 2 pickles spell them (__builtin__.set), as PyTorch does. Before the
pickle runs, its opcodes are scanned (pickletools): every length a pickle declares must fit in
its bytes, so no opcode allocates more than the pickle holds, and the opcodes that instantiate
by other routes (INST, OBJ, the extension registry) or take out-of-band buffers are refused.

With weights_only=False, the PyTorch names above still map to loom's stand-ins (a PyTorch
checkpoint loads as loom tensors) and every other global is imported, as pickle does: for files
one trusts, such as whole modules saved with loom.save.
"""

import _compat_pickle
import collections
import io
import math
import pickle
import pickletools
import warnings

import loom
from loom.serialization.errors import InvalidFileError
from loom.serialization.safe_globals import allowed
from loom.serialization.torch_names import DTYPES, MISSING_DTYPES, StorageType, storage_types

_REFUSED_OPCODES = {"INST", "OBJ", "EXT1", "EXT2", "EXT4", "NEXT_BUFFER", "READONLY_BUFFER"}
_MAX_DIMS = 64
_STORAGE_TYPES = storage_types()


class _TypeName:
    """torch.Tensor / torch.nn.Parameter as a checkpoint names them: the class of a rebuilt tensor
    (not a type, so no pickle opcode can instantiate it)."""

    def __init__(self, name):
        self.name = name


_TENSOR = _TypeName("torch.Tensor")
_PARAMETER = _TypeName("torch.nn.parameter.Parameter")


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _bytearray(*args):
    if args and _is_int(args[0]):
        raise pickle.UnpicklingError("bytearray(size) is refused: a pickle could make it allocate any size")
    return bytearray(*args)


def _encode(text, encoding="utf-8"):
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"_codecs.encode is allowed only of a string in latin1, not {encoding!r}")
    return text.encode("latin1")


def _device(*args):
    try:
        return loom.device(*args)
    except (TypeError, ValueError, RuntimeError) as e:
        raise pickle.UnpicklingError(f"torch.device{args!r}: {e}") from None


class Unpickler(pickle.Unpickler):
    """The unpickler of one checkpoint. `storages(key, storage_type, location, numel)` returns a
    storage of the file (a 1-d tensor); `error` makes errors naming the file (errors.Errors)."""

    def __init__(self, data, storages, error, weights_only):
        super().__init__(io.BytesIO(data))
        self.storages, self.error, self.weights_only = storages, error, weights_only
        self.storage_ids = set()
        self.made = {}  # id -> (tensor, storage, offset, size, stride) of every tensor made from a storage
        self.globals = {
            "torch._utils._rebuild_tensor": self._rebuild_tensor,
            "torch._utils._rebuild_tensor_v2": self._rebuild_tensor_v2,
            "torch._utils._rebuild_tensor_v3": self._rebuild_tensor_v3,
            "torch._utils._rebuild_parameter": self._rebuild_parameter,
            "torch._utils._rebuild_parameter_with_state": self._rebuild_parameter_with_state,
            "torch._tensor._rebuild_from_type_v2": self._rebuild_from_type_v2,
            "torch.Tensor": _TENSOR,
            "torch.nn.parameter.Parameter": _PARAMETER,
            "torch.nn.Parameter": _PARAMETER,
            "torch.Size": loom.Size,
            "torch.device": _device,
            "collections.OrderedDict": collections.OrderedDict,
            "collections.Counter": collections.Counter,
            "builtins.set": set,
            "builtins.frozenset": frozenset,
            "builtins.complex": complex,
            "builtins.slice": slice,
            "builtins.bytearray": _bytearray,
            "_codecs.encode": _encode,
            **_STORAGE_TYPES,
        }
        self.rebuilders = {self._rebuild_tensor, self._rebuild_tensor_v2, self._rebuild_tensor_v3}

    # ---- globals and storages ----

    def find_class(self, module, name):
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        full = f"{module}.{name}"
        if module == "torch" and name in DTYPES:
            return DTYPES[name]
        if module == "torch" and name in MISSING_DTYPES:
            raise self.error(f"it holds the dtype torch.{name}, which loom does not have")
        found = self.globals.get(full)
        if found is None:
            found = allowed(f"{module}.{name}")
        if found is not None:
            return found
        if not self.weights_only:
            return super().find_class(module, name)
        raise self.error.unsafe(f"the global {full}")

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or not pid or pid[0] != "storage":
            kind = pid[0] if isinstance(pid, tuple) and pid else pid
            raise self.error(f"its pickle holds a persistent id of kind {kind!r}; loom reads storages only")
        if len(pid) == 6 and pid[5] is None:  # the legacy format's, whose last field (a view) is unused
            pid = pid[:5]
        if len(pid) != 5:
            raise self.error(f"a storage id {pid!r} must be ('storage', type, key, location, numel)")
        _, storage_type, key, location, numel = pid
        if not isinstance(storage_type, StorageType):
            raise self.error(f"storage {key!r} has the type {storage_type!r}, not a storage class")
        if storage_type.dtype is None:
            raise self.error(f"it holds {storage_type.dtype_name} tensors ({storage_type!r}), a dtype loom does not "
                             "have")
        if not isinstance(key, str) or not isinstance(location, str):
            raise self.error(f"a storage id {pid!r} must have a string key and location")
        if not _is_int(numel) or numel < 0:
            raise self.error(f"storage {key!r} has {numel!r} elements: a count must be a non-negative integer")
        try:
            storage = self.storages(key, storage_type, location, numel)
        except InvalidFileError:
            raise
        except Exception as e:  # noqa: BLE001  map_location's own errors reach the caller as they are
            raise _Passthrough(e) from e
        if id(storage) not in self.storage_ids:
            self.storage_ids.add(id(storage))
            self.made[id(storage)] = (storage, storage, 0, (storage.numel(),), (1,))
        return storage

    # ---- PyTorch's rebuild functions ----

    def _view(self, storage, offset, size, stride):
        if not isinstance(storage, loom.Tensor) or id(storage) not in self.storage_ids:
            raise self.error(f"a tensor is rebuilt from {type(storage).__name__}, not from a storage of the file")
        if isinstance(size, loom.Size):
            size = tuple(size)
        if (not isinstance(size, (tuple, list)) or not isinstance(stride, (tuple, list)) or len(size) != len(stride)
                or len(size) > _MAX_DIMS or not all(_is_int(x) and x >= 0 for x in (*size, *stride))
                or not _is_int(offset) or offset < 0):
            raise self.error(f"a tensor has size {size!r}, stride {stride!r} and storage offset {offset!r}: they "
                             f"must be non-negative integers, as many strides as sizes (at most {_MAX_DIMS})")
        if math.prod(size) >= 2 ** 63:
            raise self.error(f"a tensor has size {list(size)}: more elements than loom can count")
        n = storage.numel()
        end = offset if 0 in size else offset + 1 + sum((a - 1) * b for a, b in zip(size, stride))
        if end > n:
            raise self.error(f"a tensor of size {list(size)}, stride {list(stride)} and storage offset {offset} "
                             f"reaches element {end - 1} of a storage of {n} elements")
        t = storage._as_strided(tuple(size), tuple(stride), offset).detach()
        self.made[id(t)] = (t, storage, offset, tuple(size), tuple(stride))
        return t

    def _requires_grad(self, t, requires_grad):
        if not isinstance(requires_grad, bool):
            raise self.error(f"a tensor's requires_grad is {requires_grad!r}, not a bool")
        if requires_grad:
            if not t.is_floating_point():
                raise self.error(f"a tensor of dtype {t.dtype} requires grad; only floating point tensors can")
            t.requires_grad_(True)
        return t

    def _rebuild_tensor(self, storage, storage_offset, size, stride):
        return self._view(storage, storage_offset, size, stride)

    def _rebuild_tensor_v2(self, storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None):
        return self._requires_grad(self._view(storage, storage_offset, size, stride), requires_grad)

    def _rebuild_tensor_v3(self, storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype,
                           metadata=None):
        if isinstance(storage, loom.Tensor) and dtype is not storage.dtype:
            raise self.error(f"a tensor of dtype {dtype} views a storage of {storage.dtype}; loom cannot view a "
                             "storage as another dtype")
        return self._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks)

    def _tensor_class(self, new_type):
        from loom.nn.parameter import Parameter

        if new_type is _TENSOR:
            return loom.Tensor
        if new_type is _PARAMETER:
            return Parameter
        if not self.weights_only and isinstance(new_type, type) and issubclass(new_type, loom.Tensor):
            return new_type
        raise self.error(f"a tensor is rebuilt as {new_type!r}, which is not a loom tensor class")

    def _as_class(self, t, cls):
        if type(t) is cls:
            return t
        requires_grad = t.requires_grad
        out = loom.Tensor._make_subclass(cls, t)
        if id(t) in self.made:
            self.made[id(out)] = (out, *self.made[id(t)][1:])
        return out.requires_grad_(True) if requires_grad else out

    def _set_state(self, t, state):
        """PyTorch's _set_obj_state: Python attributes saved with a tensor."""
        if state is None:
            return t
        if isinstance(state, tuple) and len(state) == 2:
            state = {**(state[0] or {}), **(state[1] or {})}
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise self.error(f"a tensor's attributes are {type(state).__name__}, not a dict of names")
        if self.weights_only and any(k.startswith("__") for k in state):
            raise self.error.unsafe(f"the tensor attributes {sorted(k for k in state if k.startswith('__'))}")
        if state and not hasattr(t, "__dict__"):
            warnings.warn(f"loom.load: a {type(t).__name__} cannot keep the Python attributes {sorted(state)} saved "
                          "with it; they are dropped", stacklevel=4)
        elif state:
            t.__dict__.update(state)
        return t

    def _rebuild_parameter(self, data, requires_grad, backward_hooks):
        return self._rebuild_parameter_with_state(data, requires_grad, backward_hooks, None)

    def _rebuild_parameter_with_state(self, data, requires_grad, backward_hooks, state):
        from loom.nn.parameter import Parameter

        if not isinstance(data, loom.Tensor):
            raise self.error(f"a Parameter is rebuilt from {type(data).__name__}, not a tensor")
        p = self._as_class(data, Parameter)
        return self._set_state(self._requires_grad(p, requires_grad), state)

    def _rebuild_from_type_v2(self, func, new_type, args, state):
        if func not in self.rebuilders:
            raise self.error(f"a tensor subclass is rebuilt with {func!r}, not with a tensor rebuild function")
        if not isinstance(args, tuple):
            raise self.error("the arguments of a tensor rebuild function must be a tuple")
        t = func(*args)
        return self._set_state(self._as_class(t, self._tensor_class(new_type)), state)


def _scan(data, error):
    """Checks the opcodes of a pickle before it runs (see the module docstring)."""
    try:
        for op, _, _ in pickletools.genops(io.BytesIO(data)):
            if op.name in _REFUSED_OPCODES:
                raise error(f"its pickle uses the opcode {op.name}, which checkpoints never need")
    except InvalidFileError:
        raise
    except Exception as e:  # noqa: BLE001  genops raises ValueError and others on malformed input
        raise error(f"its pickle is malformed ({type(e).__name__}: {e})") from None


class _Passthrough(Exception):
    """Carries an error that is not the file's (map_location's, a missing GPU) out of the
    unpickler unchanged."""

    def __init__(self, error):
        super().__init__(error)
        self.error = error


_MALFORMED = (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, KeyError, IndexError,
              OverflowError, UnicodeDecodeError, RecursionError)


def load(data, storages, error, weights_only):
    """(the object, the unpickler) of the pickle `data`."""
    _scan(data, error)
    unpickler = Unpickler(data, storages, error, weights_only)
    try:
        return unpickler.load(), unpickler
    except InvalidFileError:
        raise
    except _Passthrough as p:
        raise p.error from None
    except _MALFORMED as e:
        if not weights_only and not isinstance(e, (pickle.UnpicklingError, EOFError)):
            raise  # the objects of a trusted file raised: their error, as pickle gives it
        raise error(f"its pickle could not be loaded ({type(e).__name__}: {e})") from e
