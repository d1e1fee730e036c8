"""The safetensors format: loom.save(obj, f, format="safetensors") and loom.load of such files.

File layout (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N,
N bytes of JSON header (a JSON object, padded with spaces), then the tensors' bytes. The header
maps each tensor's name to its dtype ("F32", "I64", ...), shape and byte range [begin, end) in
the data; the optional "__metadata__" entry maps strings to strings.

Objects other than a flat {name: tensor} dict (nested dicts and lists, optimizer state with
numbers) are stored too: the structure, with every non-tensor value and every dict key (with its
type: 7 and "7" differ), is JSON in __metadata__["loom"], and refers to its tensors by their
names in the header. Those names are only labels, never parsed: a tensor's name is its dotted key
path ("opt.state.0.m"), and where two paths spell the same name ({"a.b": t1, "a": {"b": t2}},
{7: t1, "7": t2}) or a path spells "__metadata__", the later tensor gets the first free name of
the form "<path>#<n>". So every structure loads back exactly. A flat dict of tensors keyed by
strings is stored under its own keys: a plain safetensors file that other libraries read. Each
tensor is stored by value (contiguous, requires_grad dropped; tensors sharing a storage are
stored apart).

Loading reads only JSON and raw little-endian numbers: nothing in the file is executed or
unpickled. The whole layout is validated: the header length within the file, a JSON object
header without duplicate names, known dtypes, non-negative integer shapes and offsets, each
tensor's byte range holding exactly its shape's bytes, and the ranges tiling the data (no gaps,
no overlaps, nothing after the last tensor), boolean bytes 0 or 1, and a loom structure that is
well formed and refers to exactly the file's tensors. The header is checked against the file's
length before any tensor is allocated, and each tensor's bytes are then read straight into it,
so a hostile header costs no more than its own length and loading peaks at about the size of
the file, not twice it.
"""

import json
import math
import struct
import sys

import numpy as np

import loom
from loom.serialization.errors import InvalidFileError

_CODES = {loom.bool: "BOOL", loom.uint8: "U8", loom.int8: "I8", loom.int16: "I16", loom.int32: "I32",
          loom.int64: "I64", loom.float16: "F16", loom.bfloat16: "BF16", loom.float32: "F32", loom.float64: "F64"}
_DTYPES = {v: k for k, v in _CODES.items()}
_NUMPY = {"BOOL": np.dtype(np.bool_), "U8": np.dtype("<u1"), "I8": np.dtype("i1"), "I16": np.dtype("<i2"),
          "I32": np.dtype("<i4"), "I64": np.dtype("<i8"),
          "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"), "F32": np.dtype("<f4"), "F64": np.dtype("<f8")}
_METADATA = "__metadata__"
_MAX_HEADER = 100_000_000  # as the safetensors library: a larger header is not a real file
_MAX_DIMS = 64  # as PyTorch, and the most a buffer export (numpy) of a loom tensor has


# ---- save ----

def _flatten(obj, path, refs):
    """The JSON structure of obj; each tensor becomes a reference node, recorded in `refs` as
    (node, preferred name, tensor) to be named once every path is known."""
    if isinstance(obj, loom.Tensor):
        node = {"__tensor__": None}
        refs.append((node, path or "tensor", obj))
        return node
    if isinstance(obj, dict):
        return {"__dict__": [[_key(k), _flatten(v, f"{path}.{k}" if path else str(k), refs)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        items = [_flatten(v, f"{path}.{i}" if path else str(i), refs) for i, v in enumerate(obj)]
        return {"__list__": items, "tuple": isinstance(obj, tuple)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"__value__": obj}
    raise TypeError(f"loom.save can store tensors, dicts, lists, tuples, numbers, strings and None, not "
                    f"{type(obj).__name__}")


def _key(k):
    if isinstance(k, (str, int, bool)) or k is None:
        return {"__value__": k}
    raise TypeError(f"loom.save: dict keys must be strings or ints, not {type(k).__name__}")


def _name_tensors(refs):
    """Unique header names: each tensor's path, or "<path>#<n>" where the path is taken (see the
    module docstring). Fills in the reference nodes; returns [(name, tensor)] in order."""
    preferred = {name for _, name, _ in refs}
    taken = {_METADATA}
    out = []
    for node, name, t in refs:
        if name in taken:
            n = 1
            while f"{name}#{n}" in taken or f"{name}#{n}" in preferred:
                n += 1
            name = f"{name}#{n}"
        taken.add(name)
        node["__tensor__"] = name
        out.append((name, t))
    return out


def save(obj, f):
    """Writes obj (a state dict, or nested dicts/lists/tuples of tensors, numbers, strings and
    None) to a path or binary file in the safetensors format."""
    refs = []
    structure = _flatten(obj, "", refs)
    header, chunks, offset = {}, [], 0
    for name, t in _name_tensors(refs):
        raw = _bytes(t.detach().cpu().contiguous())
        header[name] = {"dtype": _CODES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    header[_METADATA] = {"format": "pt", "loom": json.dumps(structure)}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # keep the data 8-byte aligned, as the format recommends
    blob = struct.pack("<Q", len(text)) + text + b"".join(chunks)
    if hasattr(f, "write"):
        f.write(blob)
    else:
        with open(f, "wb") as out:
            out.write(blob)


def _bytes(t):
    if t.dtype is loom.bfloat16:
        # numpy has no bfloat16: the raw 16-bit patterns, via float32's upper halves.
        f32 = t.float().numpy().astype(np.float32)
        return (f32.view(np.uint32) >> 16).astype("<u2").tobytes()
    a = np.ascontiguousarray(t.numpy())
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


# ---- load ----

def load(source, error, restore):
    """What loom.save(..., format="safetensors") wrote, or any safetensors file of loom's dtypes,
    from a Source (source.py); `restore(tensor, location)` places each tensor (map_location).

    The header is read and checked against the file's length before any tensor is made; then
    each tensor's bytes are read straight into its memory, so loading takes about the memory of
    the tensors."""
    tensors, meta = _read(source, error)
    tensors = {k: restore(t, "cpu") for k, t in tensors.items()}
    if "loom" in meta:
        return _Structure(tensors, error).build(meta["loom"])
    return tensors


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _no_duplicates(error):
    def hook(pairs):
        out = {}
        for k, v in pairs:
            if k in out:
                raise error(f"the header names {k!r} twice")
            out[k] = v
        return out
    return hook


def _read(source, error):
    """{name: tensor} and the metadata of a safetensors file, validating the whole layout
    against the file's length before reading any tensor."""
    head = source.read(8)
    size = source.size
    if size < 8:
        raise error(f"the file has {size} bytes, fewer than the 8 of the header length")
    (n,) = struct.unpack("<Q", head)
    if n > _MAX_HEADER and n <= size - 8:
        raise error(f"the header length {n} is larger than the {_MAX_HEADER} bytes a header may have")
    if n > size - 8:
        hint = ""
        if head[:1] == b"\x80":
            hint = (" (it looks like a pickle, but not a PyTorch checkpoint: loom.load reads pickles only inside "
                    "PyTorch's formats)")
        raise error(f"the header length {n} runs past the end of the file ({size} bytes){hint}")
    text = source.read(n)
    if len(text) != n:
        raise error(f"the file ended inside the header ({8 + len(text)} of {size} bytes read)")
    if text[:1] != b"{":
        raise error("the header is not a JSON object")
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=_no_duplicates(error))
    except InvalidFileError:
        raise
    except (ValueError, RecursionError) as e:  # bad UTF-8, bad JSON, nesting too deep
        raise error(f"the header is not valid JSON ({e})") from None
    del text
    if not isinstance(header, dict):
        raise error("the header is not a JSON object")
    body = size - 8 - n

    meta = header.pop(_METADATA, None)
    if meta is None:
        meta = {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise error("__metadata__ must map strings to strings")

    infos = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise error(f"the entry of tensor {name!r} must be an object with exactly dtype, shape and data_offsets")
        code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(code, str) or code not in _DTYPES:
            raise error(f"tensor {name!r} has dtype {code!r}, which loom does not read (it reads "
                        f"{', '.join(_DTYPES)})")
        if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
            raise error(f"tensor {name!r} has shape {shape!r}: a shape is a list of non-negative integers")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(o) for o in offsets)
                or not 0 <= offsets[0] <= offsets[1]):
            raise error(f"tensor {name!r} has data_offsets {offsets!r}: they must be two integers "
                        "0 <= begin <= end")
        if len(shape) > _MAX_DIMS:
            raise error(f"tensor {name!r} has {len(shape)} dims; loom reads at most {_MAX_DIMS}")
        if math.prod(d for d in shape if d) * _NUMPY[code].itemsize >= 2 ** 63:
            raise error(f"tensor {name!r} of shape {shape} cannot be made: its strides overflow 64 bits")
        begin, end = offsets
        if end > body:
            raise error(f"tensor {name!r} has data_offsets {offsets}, past the end of the data ({body} bytes)")
        need = math.prod(shape) * _NUMPY[code].itemsize
        if end - begin != need:
            raise error(f"tensor {name!r} of dtype {code} and shape {shape} needs {need} bytes, but its "
                        f"data_offsets {offsets} hold {end - begin}")
        infos.append((begin, end, name, code, shape))

    # The tensors tile the data: sorted by offsets, each begins where the previous one ended.
    infos.sort(key=lambda x: (x[0], x[1]))
    pos = 0
    for begin, end, name, _, _ in infos:
        if begin != pos:
            what = "overlaps the tensor before it" if begin < pos else f"leaves a gap of {begin - pos} bytes before it"
            raise error(f"tensor {name!r} (data_offsets [{begin}, {end}]) {what}: the tensors must tile the data")
        pos = end
    if pos != body:
        raise error(f"{body - pos} bytes follow the last tensor's data")

    # Only now is anything allocated: each tensor in file order, its bytes read into it.
    tensors = {}
    for _, _, name, code, shape in infos:
        try:
            t = loom.empty(shape, dtype=_DTYPES[code], device="cpu")
        except (ValueError, OverflowError, RuntimeError, MemoryError) as e:  # shapes past loom's limits
            raise error(f"tensor {name!r} of shape {shape} cannot be made: {e}") from None
        if not _fill(t, code, source):
            raise error(f"the file ended inside the data of tensor {name!r} (it changed while being read?)")
        if code == "BOOL" and t.numel() and np.asarray(t).view(np.uint8).max() > 1:
            raise error(f"tensor {name!r} of dtype BOOL holds a byte other than 0 and 1")
        tensors[name] = t
    # Back in the header's order, as loom.save wrote them.
    return {name: tensors[name] for name in header}, meta


_BF16_CHUNK = 1 << 20  # elements converted at a time (numpy has no bfloat16)


def _fill(t, code, source):
    """Reads t's little-endian bytes from the file into t; False if the file ends first."""
    if t.numel() == 0:
        return True
    if code == "BF16":
        flat = t.view(-1)
        for lo in range(0, t.numel(), _BF16_CHUNK):
            count = min(_BF16_CHUNK, t.numel() - lo)
            bits = np.empty(count, dtype="<u2")
            if not source.read_into(memoryview(bits).cast("B")):
                return False
            values = (bits.astype(np.uint32) << 16).view(np.float32)  # exact: bfloat16 is float32's upper half
            flat[lo:lo + count].copy_(loom.as_tensor(values, device="cpu"))
        return True
    a = np.asarray(t.view(-1))
    if not source.read_into(memoryview(a.view(np.uint8))):
        return False
    if sys.byteorder == "big" and a.dtype.itemsize > 1:
        a.byteswap(inplace=True)
    return True


class _Structure:
    """Builds the object a loom structure (__metadata__["loom"]) describes, checking every node."""

    def __init__(self, tensors, error):
        self.tensors, self.error, self.used = tensors, error, set()

    def build(self, text):
        try:
            node = json.loads(text)
            obj = self.node(node)
        except InvalidFileError:
            raise
        except RecursionError:
            raise self.error("the loom structure is nested too deeply") from None
        except ValueError as e:
            raise self.error(f"the loom structure is not valid JSON ({e})") from None
        unused = [k for k in self.tensors if k not in self.used]
        if unused:
            raise self.error(f"the loom structure does not use the tensors {unused}")
        return obj

    def node(self, node):
        if isinstance(node, dict) and len(node) == 1 and "__tensor__" in node:
            name = node["__tensor__"]
            if not isinstance(name, str) or name not in self.tensors:
                raise self.error(f"the loom structure refers to a tensor {name!r} the file does not hold")
            self.used.add(name)
            return self.tensors[name]
        if isinstance(node, dict) and len(node) == 1 and "__value__" in node:
            value = node["__value__"]
            if value is not None and not isinstance(value, (bool, int, float, str)):
                raise self.error(f"the loom structure holds a value that is not a number, string or null: {value!r}")
            return value
        if isinstance(node, dict) and len(node) == 1 and isinstance(node.get("__dict__"), list):
            out = {}
            for pair in node["__dict__"]:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise self.error("a dict of the loom structure must be a list of [key, value] pairs")
                key = pair[0].get("__value__", []) if isinstance(pair[0], dict) and len(pair[0]) == 1 else []
                if not (key is None or isinstance(key, (str, int, bool))):
                    raise self.error("a dict key of the loom structure must be a value node of a string, int, bool "
                                     f"or null, not {_short(pair[0])}")
                if key in out:
                    raise self.error(f"a dict of the loom structure has the key {key!r} twice")
                out[key] = self.node(pair[1])
            return out
        if (isinstance(node, dict) and isinstance(node.get("__list__"), list) and set(node) <= {"__list__", "tuple"}
                and isinstance(node.get("tuple", False), bool)):
            items = [self.node(v) for v in node["__list__"]]
            return tuple(items) if node.get("tuple") else items
        raise self.error(f"the loom structure holds a node loom does not know: {_short(node)}")


def _short(node):
    text = json.dumps(node)
    return text if len(text) <= 80 else text[:77] + "..."
