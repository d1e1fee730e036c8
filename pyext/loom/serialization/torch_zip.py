"""PyTorch's checkpoint format (torch.save since PyTorch 1.6): a zip archive (zip_archive.py) of

  archive/data.pkl     the object, pickled (protocol 2); storages are persistent ids
                       ('storage', torch.FloatStorage, key, location, numel)
  archive/byteorder    "little" or "big": the byte order of the storages (PyTorch 2.x; absent
                       from older files, which are little-endian)
  archive/data/<key>   the bytes of each storage: numel elements
  archive/version      the format version, "3"
  archive/loom_lazy_storages
                       loom's, when lazy tensors were saved: the keys of their storages, one a
                       line. Their location tag is the device they run on ("cpu"), which
                       PyTorch reads (it ignores this record); loom.load tags them "lazy:<that>"
                       so that they load back lazy, as a GPU tensor loads back on its GPU

loom.save writes this layout (pickler.py); torch.load of PyTorch 1.13 and 2.x reads it, with
weights_only too. loom.load reads what torch.save writes, whatever the folder's name, through
unpickler.py; each storage is read straight from the file into a tensor of its own and placed
where map_location says before any tensor is made from it.
"""

import sys

import numpy as np

import loom
from loom.serialization import memory, pickler, unpickler
from loom.serialization.zip_archive import ArchiveReader, ArchiveWriter

_FOLDER = "archive"
_LAZY_RECORD = "loom_lazy_storages"
_MAX_LAZY_RECORD = 1 << 20  # bytes: far more keys than storages any checkpoint has


def pickled(obj, protocol):
    """What save writes: data.pkl and the storages (pickling can fail; nothing is written yet)."""
    return pickler.dumps(obj, protocol)


def save(f, pickled):
    """Writes the archive of pickled(...) to a binary file."""
    writer = ArchiveWriter(f, _FOLDER)
    writer.add("data.pkl", pickled.data)
    writer.add("byteorder", sys.byteorder.encode())
    for key, view in pickled.records:
        writer.add(f"data/{key}", view)
    writer.add("version", b"3\n")
    if pickled.lazy_keys:
        writer.add(_LAZY_RECORD, "".join(f"{key}\n" for key in pickled.lazy_keys).encode("ascii"))
    writer.close()


class _Storages:
    """The storages of an archive, each read when the pickle first names it."""

    def __init__(self, archive, folder, byteorder, restore, error, lazy_keys):
        self.archive, self.folder, self.byteorder, self.restore, self.error = archive, folder, byteorder, restore, error
        self.lazy_keys = lazy_keys
        self.loaded = {}

    def __call__(self, key, storage_type, location, numel):
        if key in self.loaded:
            storage = self.loaded[key]
            if storage.dtype is not storage_type.dtype or storage.numel() != numel:
                raise self.error(f"storage {key!r} is named as {numel} elements of {storage_type.dtype} and as "
                                 f"{storage.numel()} of {storage.dtype}")
            return storage
        info = self.archive.find(f"{self.folder}/data/{key}")
        if info is None:
            raise self.error(f"its pickle refers to storage {key!r}, but the archive has no record "
                             f"{self.folder}/data/{key}")
        dtype = storage_type.dtype
        nbytes = numel * dtype.itemsize
        if info.file_size != nbytes:
            raise self.error(f"storage {key!r} of {numel} {memory.dtype_name(dtype)} elements needs {nbytes} bytes, "
                             f"but its record holds {info.file_size}")
        storage = loom.empty(numel, dtype=dtype, device="cpu")
        view = memory.write_view(storage)
        self.archive.read_into(info, view)
        if self.byteorder != memory.NATIVE_BYTEORDER:
            memory.byteswap(storage)
        if dtype is loom.bool and numel and np.frombuffer(view, np.uint8).max() > 1:
            raise self.error(f"storage {key!r} of bools holds a byte other than 0 and 1")
        if key in self.lazy_keys and not location.startswith("lazy"):
            location = f"lazy:{location}"
        storage = self.restore(storage, location)
        self.loaded[key] = storage
        return storage


def load(source, error, restore, weights_only):
    archive = ArchiveReader(source, error)
    pickles = [name for name in archive.infos if name.endswith("/data.pkl") and name.count("/") == 1]
    if len(pickles) != 1:
        what = "no" if not pickles else f"{len(pickles)}"
        raise error(f"it is a zip archive with {what} <folder>/data.pkl records, not a PyTorch checkpoint")
    folder = pickles[0].rsplit("/", 1)[0]
    byteorder = "little"
    info = archive.find(f"{folder}/byteorder")
    if info is not None:
        byteorder = archive.read(info).decode("ascii", "replace").strip() if info.file_size <= 16 else "?"
        if byteorder not in ("little", "big"):
            raise error(f"its byteorder record says {byteorder!r}, not 'little' or 'big'")
    lazy_keys = set()
    info = archive.find(f"{folder}/{_LAZY_RECORD}")
    if info is not None:
        if info.file_size > _MAX_LAZY_RECORD:
            raise error(f"its {_LAZY_RECORD} record holds {info.file_size} bytes, more than {_MAX_LAZY_RECORD}")
        lazy_keys = set(archive.read(info).decode("ascii", "replace").split())
    data = archive.read(archive.find(pickles[0]))
    obj, _ = unpickler.load(data, _Storages(archive, folder, byteorder, restore, error, lazy_keys), error,
                            weights_only)
    return obj
