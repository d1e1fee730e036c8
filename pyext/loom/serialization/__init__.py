"""loom.save / loom.load: checkpoints in PyTorch's format, and safetensors.

Formats (docs/architecture.md, "Checkpoints"):

- PyTorch's zip format (torch_zip.py), what loom.save writes by default: a zip archive of a
  pickle (data.pkl) and one record per storage. torch.load (PyTorch 1.13 and 2.x, weights_only
  too) reads it, and loom.load reads what torch.save writes: state dicts, optimizer states,
  whole checkpoints of nested dicts, lists and tuples of tensors, numbers, strings and None.
  Tensors keep their dtype, shape, strides, requires_grad and class (Parameter), and tensors that
  share memory (a tensor and its views, tied weights) share one storage in the file and after
  loading.
- PyTorch's legacy format (torch.save(..., _use_new_zipfile_serialization=False), PyTorch < 1.6):
  loaded (legacy.py), never written.
- safetensors (safetensors.py): loom.save(obj, f, format="safetensors") writes it, loom.load
  reads it. Loading it never involves pickle.

loom.load tells the formats apart by their first bytes. Loading never runs code from the file
unless weights_only=False is given (unpickler.py): PyTorch 2.6's rule. Every malformed file
raises InvalidFileError (a ValueError) naming the file and the problem; a global weights_only
refuses raises UnsafeFileError (also a pickle.UnpicklingError). Sizes a file declares are checked
against its length before memory is allocated for them, and storages are read straight into
their tensors, so loading peaks near the size of the file.
"""

import os

from loom.serialization import legacy, safetensors, torch_zip
from loom.serialization.errors import Errors, InvalidFileError, UnsafeFileError
from loom.serialization.location import restorer
from loom.serialization.safe_globals import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals
from loom.serialization.source import opened

__all__ = ["save", "load", "save_safetensors", "InvalidFileError", "UnsafeFileError", "add_safe_globals",
           "clear_safe_globals", "get_safe_globals", "safe_globals"]

DEFAULT_PROTOCOL = 2  # torch.save's: PyTorch 1.13's weights_only reader knows protocol 2's opcodes only


def save(obj, f, *, pickle_protocol=DEFAULT_PROTOCOL, format="torch"):
    """Writes obj to a path or a binary file.

    format="torch" (the default): PyTorch's zip format, which torch.load reads (a `.pt` file).
    Anything picklable can be saved (as torch.save); tensors are stored as PyTorch stores them,
    lazy tensors synced first; loom.load(f) reads state dicts and other plain data back,
    loom.load(f, weights_only=False) whole modules and other objects.

    format="safetensors": the safetensors format, for tensors in nested dicts, lists and tuples
    with numbers, strings and None (save_safetensors).

    The object is pickled before the file is opened: an object that cannot be pickled leaves an
    existing file as it was. Where loom differs from PyTorch: a tensor that views part of a
    larger storage saves only the span it addresses, not the whole storage; GPU tensors that
    share memory are saved as separate storages (host tensors share one, as in PyTorch)."""
    if format == "safetensors":
        return save_safetensors(obj, f)
    if format != "torch":
        raise ValueError(f"loom.save: format must be 'torch' or 'safetensors', not {format!r}")
    pickled = torch_zip.pickled(obj, pickle_protocol)
    if hasattr(f, "write"):
        torch_zip.save(f, pickled)
    else:
        with open(f, "wb") as out:
            torch_zip.save(out, pickled)


def save_safetensors(obj, f):
    """Writes obj (tensors in nested dicts, lists and tuples, with numbers, strings and None) to a
    path or binary file in the safetensors format; a flat {name: tensor} dict makes a plain
    safetensors file other libraries read (safetensors.py)."""
    safetensors.save(obj, f)


_TRUE = ("1", "y", "yes", "true")


def _weights_only(given):
    """load()'s weights_only, as PyTorch 2.6 decides it: True when not given, unless the
    environment sets TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD (the way back to PyTorch 1.13's default of
    loading anything, for a program written for it that does not pass the argument);
    TORCH_FORCE_WEIGHTS_ONLY_LOAD makes it True even where False is passed."""
    if os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "").lower() in _TRUE:
        return True
    if given is None:
        return os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "").lower() not in _TRUE
    return bool(given)


def load(f, map_location=None, *, weights_only=None, mmap=None):
    """Reads a checkpoint from a path or a binary file: PyTorch's zip or legacy format, or
    safetensors, told apart by their first bytes.

    weights_only=True (the default, as PyTorch 2.6's): only tensors, containers and plain values
    load; a file naming any other function or class (a whole module, a numpy array) raises
    UnsafeFileError and nothing in it runs. weights_only=False loads any pickled object, running
    the code the file names: only for files you trust. PyTorch 1.13 defaulted to False; a program
    written for it runs unchanged with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 in the environment (PyTorch
    2.6's switch, honoured where weights_only is not passed), and TORCH_FORCE_WEIGHTS_ONLY_LOAD=1
    makes every load weights_only.

    map_location places the storages, as PyTorch's: None (where they were saved), a device
    ("cpu", "lazy", "cuda:1"), a dict {saved: device}, or a callable(storage, location)
    returning the storage placed. mmap is accepted and ignored: loom reads the file, peaking
    near its size."""
    weights_only = _weights_only(weights_only)
    restore = restorer(map_location)
    with opened(f) as source:
        head = source.peek(16)
        if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
            return torch_zip.load(source, Errors(source.name, "PyTorch checkpoint"), restore, weights_only)
        if legacy.is_legacy(head):
            return legacy.load(source, Errors(source.name, "PyTorch checkpoint"), restore, weights_only)
        if head.startswith(b"sys_info\x00"):  # the first member of PyTorch's tar checkpoints
            raise Errors(source.name, "PyTorch checkpoint")(
                "it is a tar archive, PyTorch's format before 0.4, which loom does not read: load it and save it "
                "again with a PyTorch of today")
        return safetensors.load(source, Errors(source.name, "PyTorch checkpoint or safetensors file"), restore)
