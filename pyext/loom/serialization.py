"""loom.save / loom.load: state dicts in the safetensors layout, which loading never executes.

File layout (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N,
N bytes of JSON header, then the tensors' bytes. The header maps each tensor's name to its dtype
("F32", "I64", ...), shape and byte range.

Objects other than a flat {name: tensor} dict (nested dicts and lists, optimizer state with
numbers) are stored too: the structure, with every non-tensor value and every dict key (with its
type: 7 and "7" differ), is JSON in __metadata__["loom"], and refers to its tensors by their
names in the header. Those names are only labels, never parsed: a tensor's name is its dotted key
path ("opt.state.0.m"), and where two paths spell the same name ({"a.b": t1, "a": {"b": t2}},
{7: t1, "7": t2}) or a path spells "__metadata__", the later tensor gets the first free name of
the form "<path>#<n>". So every structure loads back exactly. A flat dict of tensors keyed by
strings is stored under its own keys: a plain safetensors file that other libraries read.
"""

import json
import struct

import numpy as np

import loom

_METADATA = "__metadata__"
_CODES = {loom.bool: "BOOL", loom.uint8: "U8", loom.int32: "I32", loom.int64: "I64", loom.float16: "F16",
          loom.bfloat16: "BF16", loom.float32: "F32", loom.float64: "F64"}
_DTYPES = {v: k for k, v in _CODES.items()}


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


def _unflatten(node, tensors):
    if "__tensor__" in node:
        return tensors[node["__tensor__"]]
    if "__dict__" in node:
        return {k["__value__"]: _unflatten(v, tensors) for k, v in node["__dict__"]}
    if "__list__" in node:
        items = [_unflatten(v, tensors) for v in node["__list__"]]
        return tuple(items) if node.get("tuple") else items
    return node["__value__"]


def save(obj, f):
    """Writes obj (a state dict, or nested dicts/lists of tensors and plain values) to a path or
    binary file."""
    refs = []
    structure = _flatten(obj, "", refs)
    header, chunks, offset = {}, [], 0
    for name, t in _name_tensors(refs):
        raw = _bytes(t.detach().cpu().contiguous())
        header[name] = {"dtype": _CODES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt", "loom": json.dumps(structure)}
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
        return (f32.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return np.ascontiguousarray(t.numpy()).tobytes()


def load(f, map_location=None):
    """Reads what loom.save wrote (or any safetensors file). Nothing in the file is executed."""
    data = f.read() if hasattr(f, "read") else open(f, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        raw = bytes(body[begin:end])
        if dtype is loom.bfloat16:
            bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            t = loom.tensor(bits.view(np.float32).reshape(info["shape"])).to(loom.bfloat16)
        else:
            np_dtype = {loom.bool: np.bool_, loom.uint8: np.uint8, loom.int32: np.int32, loom.int64: np.int64,
                        loom.float16: np.float16, loom.float32: np.float32, loom.float64: np.float64}[dtype]
            t = loom.tensor(np.frombuffer(raw, dtype=np_dtype).reshape(info["shape"]))
        tensors[name] = t.to(map_location) if map_location is not None else t
    if "loom" in meta:
        return _unflatten(json.loads(meta["loom"]), tensors)
    return tensors
