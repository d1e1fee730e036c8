"""loom.save / loom.load in both formats loom writes: round trips of model and optimizer state
dicts (every dtype, 0-d and empty tensors, nested structures with numbers), to paths and to file
objects. The safetensors format (format="safetensors"): the file is a valid safetensors file
(checked by parsing it by hand); loading never executes anything and rejects crafted files with
an exception. PyTorch's format (the default) against PyTorch itself, shared storages, the
restricted unpickler and hostile archives: test_checkpoints.py.
"""

import io
import json
import os
import pickle
import re
import struct

import numpy as np
import pytest

import loom
from _ops_helpers import device, torch  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

CODES = {"BOOL": np.bool_, "U8": np.uint8, "I32": np.int32, "I64": np.int64, "F16": np.float16, "F32": np.float32,
         "F64": np.float64, "BF16": "bf16"}
LOOM_CODE = {loom.bool: "BOOL", loom.uint8: "U8", loom.int32: "I32", loom.int64: "I64", loom.float16: "F16",
             loom.bfloat16: "BF16", loom.float32: "F32", loom.float64: "F64"}


# ---- a manual safetensors reader (the format, independently of loom) ----

def parse(data):
    """(header dict, {name: numpy array}) of safetensors bytes, validating the layout."""
    assert len(data) >= 8
    (n,) = struct.unpack("<Q", data[:8])
    assert 8 + n <= len(data), "header longer than the file"
    text = data[8:8 + n]
    assert text[:1] == b"{", "the header is a JSON object"
    header = json.loads(text.decode("utf-8"))
    body = data[8 + n:]
    arrays, spans = {}, []
    for name, info in header.items():
        if name == "__metadata__":
            assert isinstance(info, dict) and all(isinstance(v, str) for v in info.values()), \
                "__metadata__ maps strings to strings"
            continue
        assert set(info) == {"dtype", "shape", "data_offsets"}, info
        begin, end = info["data_offsets"]
        assert 0 <= begin <= end <= len(body)
        spans.append((begin, end))
        raw = body[begin:end]
        code = CODES[info["dtype"]]
        if code == "bf16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=np.dtype(code).newbyteorder("<"))
        count = int(np.prod(info["shape"])) if info["shape"] else 1
        assert arr.size == count, (name, arr.size, info["shape"])
        arrays[name] = arr.reshape(info["shape"])
    # the tensors tile the byte buffer: no gaps, no overlaps, nothing after the last one
    spans.sort()
    pos = 0
    for b, e in spans:
        assert b == pos, "tensor data must be contiguous and non-overlapping"
        pos = e
    assert pos == len(body), "trailing bytes after the last tensor"
    return header, arrays


def write_safetensors(tensors, metadata=None):
    """Hand-written safetensors bytes for {name: numpy array} (what another library writes)."""
    header, chunks, offset = {}, [], 0
    for name, a in tensors.items():
        code = {np.dtype(v): k for k, v in CODES.items() if v != "bf16"}[a.dtype]
        raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": code, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def np_(t):
    if t.dtype is loom.bfloat16:
        return np.asarray(t.float().numpy())
    return np.asarray(t.numpy())


FORMATS = ["safetensors", "torch"]


def saved_bytes(obj):
    """The safetensors bytes of obj."""
    buf = io.BytesIO()
    loom.save(obj, buf, format="safetensors")
    return buf.getvalue()


def round_trip(obj, how="bytesio", tmp_path=None, fmt="safetensors", **load_kw):
    if how == "bytesio":
        buf = io.BytesIO()
        loom.save(obj, buf, format=fmt)
        buf.seek(0)
        return loom.load(buf, **load_kw)
    if how == "path":
        path = str(tmp_path / "x.safetensors")
        loom.save(obj, path, format=fmt)
        return loom.load(path, **load_kw)
    if how == "pathlib":
        path = tmp_path / "y.safetensors"
        loom.save(obj, path, format=fmt)
        return loom.load(path, **load_kw)
    if how == "fileobj":
        path = tmp_path / "z.safetensors"
        with open(path, "wb") as f:
            loom.save(obj, f, format=fmt)
        with open(path, "rb") as f:
            return loom.load(f, **load_kw)
    raise ValueError(how)


def assert_tensor_equal(a, b):
    assert isinstance(a, loom.Tensor), type(a)
    assert a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape)
    x, y = np_(a), np_(b)
    if x.dtype.kind == "f":
        # bit for bit: -0.0 stays -0.0, nan payloads stay
        np.testing.assert_array_equal(x.reshape(-1).view(np.uint8), y.reshape(-1).view(np.uint8))
    else:
        np.testing.assert_array_equal(x, y)


def assert_tree_equal(a, b):
    if isinstance(b, loom.Tensor):
        assert_tensor_equal(a, b)
    elif isinstance(b, dict):
        assert isinstance(a, dict) and list(a.keys()) == list(b.keys())
        assert [type(k) for k in a] == [type(k) for k in b]
        for k in b:
            assert_tree_equal(a[k], b[k])
    elif isinstance(b, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_tree_equal(x, y)
    else:
        assert type(a) is type(b) and (a == b or (a != a and b != b)), (a, b)


# ---- tensors of every kind ----

def every_dtype(device="cpu"):
    g = np.random.default_rng(0)
    out = {
        "bool": loom.tensor(g.random((3, 4)) < 0.5, device=device),
        "uint8": loom.tensor(g.integers(0, 256, (5,)).astype(np.uint8), device=device),
        "int32": loom.tensor(g.integers(-2 ** 31, 2 ** 31 - 1, (2, 3)).astype(np.int32), device=device),
        "int64": loom.tensor(np.array([-2 ** 63, 2 ** 63 - 1, 0, 7]), device=device),
        "float16": loom.tensor(np.array([1.5, -0.0, 65504, 6e-8, np.inf, np.nan], np.float16), device=device),
        "bfloat16": loom.tensor(np.array([[1.0, -2.5], [3.0e38, 1e-38]], np.float32), device=device).to(loom.bfloat16),
        "float32": loom.tensor(g.standard_normal((2, 3, 4)).astype(np.float32), device=device),
        "float64": loom.tensor(np.array([np.pi, -np.inf, np.nan, 5e-324]), device=device),
        "scalar_f32": loom.tensor(3.25, device=device),
        "scalar_i64": loom.tensor(-9, device=device),
        "scalar_bool": loom.tensor(True, device=device),
        "scalar_bf16": loom.tensor(0.5, device=device).to(loom.bfloat16),
        "empty_f32": loom.zeros(0, 3, device=device),
        "empty_i64": loom.zeros(0, dtype=loom.int64, device=device),
        "empty_bf16": loom.zeros(2, 0, device=device).to(loom.bfloat16),
    }
    return out


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("how", ["bytesio", "path", "pathlib", "fileobj"])
def test_round_trip_every_dtype_0d_and_empty(tmp_path, how, fmt):
    src = every_dtype()
    loaded = round_trip(src, how, tmp_path, fmt)
    assert list(loaded) == list(src)
    for k in src:
        assert_tensor_equal(loaded[k], src[k])
        assert not loaded[k].is_lazy and not loaded[k].requires_grad


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_lazy_tensors_and_map_location(fmt):
    src = every_dtype("lazy")
    src["pending"] = src["float32"] * 2 + 1  # not yet computed
    loaded = round_trip(src, fmt=fmt)
    for k in src:
        # PyTorch's format puts a lazy tensor back on the lazy device, as a GPU tensor goes back to
        # its GPU (test_checkpoints: loom_lazy_storages); safetensors records no device
        assert loaded[k].is_lazy == (fmt == "torch")
        assert_tensor_equal(loaded[k].to("cpu"), src[k].to("cpu"))
    lazy = round_trip({k: v.to("cpu") for k, v in src.items()}, fmt=fmt, map_location="lazy")
    for k in src:
        assert lazy[k].is_lazy
        assert_tensor_equal(lazy[k].to("cpu"), src[k].to("cpu"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_non_contiguous_views(fmt):
    """safetensors stores values (contiguous); PyTorch's format keeps each view's strides."""
    base = loom.arange(24.0).reshape(4, 6)
    src = {"t": base.T, "step": base[::2, 1::3], "expanded": loom.tensor([1.0, 2.0]).expand(3, 2),
           "offset": base[2:, 3]}
    loaded = round_trip(src, fmt=fmt)
    for k in src:
        np.testing.assert_array_equal(np_(loaded[k]), np_(src[k]))
        assert loaded[k].is_contiguous() if fmt == "safetensors" else loaded[k].stride() == src[k].stride()


def test_parameters_and_tensors_that_require_grad_are_saved_as_values_in_safetensors():
    p = loom.nn.Parameter(loom.ones(2, 3))
    g = (loom.ones(2).requires_grad_() * 3)
    loaded = round_trip({"p": p, "g": g})
    assert not loaded["p"].requires_grad and not loaded["g"].requires_grad
    np.testing.assert_array_equal(np_(loaded["g"]), [3.0, 3.0])


def test_parameters_and_requires_grad_survive_pytorchs_format():
    """As torch.save: a Parameter loads as a Parameter, requires_grad is kept (a computed tensor
    loads as a leaf that requires grad)."""
    p = loom.nn.Parameter(loom.ones(2, 3))
    g = (loom.ones(2).requires_grad_() * 3)
    loaded = round_trip({"p": p, "g": g, "frozen": loom.nn.Parameter(loom.ones(1), requires_grad=False)},
                        fmt="torch")
    assert type(loaded["p"]) is loom.nn.Parameter and loaded["p"].requires_grad
    assert type(loaded["g"]) is loom.Tensor and loaded["g"].requires_grad and loaded["g"].is_leaf
    assert type(loaded["frozen"]) is loom.nn.Parameter and not loaded["frozen"].requires_grad
    np.testing.assert_array_equal(np_(loaded["g"].detach()), [3.0, 3.0])


@pytest.mark.parametrize("fmt", FORMATS)
def test_single_tensor_round_trip(fmt):
    t = loom.arange(5, dtype=loom.int32)
    loaded = round_trip(t, fmt=fmt)
    assert_tensor_equal(loaded, t)


# ---- module and optimizer state dicts ----

class Model(loom.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = loom.nn.Embedding(7, 4)
        self.layers = loom.nn.ModuleList([loom.nn.Linear(4, 4), loom.nn.LayerNorm(4)])
        self.head = loom.nn.Linear(4, 2, bias=False)
        for name, t in every_dtype().items():
            self.register_buffer("b_" + name, t)


@pytest.mark.parametrize("fmt", FORMATS)
def test_model_state_dict_round_trip(tmp_path, device, fmt):
    loom.manual_seed(0)
    model = Model().to(device)
    sd = model.state_dict()
    loaded = round_trip(sd, "path", tmp_path, fmt)
    assert list(loaded) == list(sd)
    for k in sd:
        assert_tensor_equal(loaded[k], sd[k].to("cpu"))
    fresh = Model().to(device)
    fresh.load_state_dict(loaded)
    for (k, a), (_, b) in zip(fresh.state_dict().items(), sd.items()):
        assert_tensor_equal(a.to("cpu"), b.to("cpu"))
    x = loom.tensor([[1, 2, 6]], device=device)
    np.testing.assert_array_equal(np_(fresh.head(fresh.layers[1](fresh.layers[0](fresh.emb(x))))),
                                  np_(model.head(model.layers[1](model.layers[0](model.emb(x))))))


@pytest.mark.parametrize("fmt", FORMATS)
def test_optimizer_state_dict_round_trip_and_resume(device, fmt):
    loom.manual_seed(0)
    model = loom.nn.Sequential(loom.nn.Linear(3, 4), loom.nn.Tanh(), loom.nn.Linear(4, 1)).double().to(device)
    params = list(model.parameters())
    opt = loom.optim.Adam([{"params": params[:2]}, {"params": params[2:], "lr": 0.05}], lr=1e-3,
                          betas=(0.85, 0.995), eps=1e-7, amsgrad=True, weight_decay=0.0)
    sched = loom.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    x = loom.tensor(np.random.default_rng(0).standard_normal((8, 3)), device=device)

    def step(m, o):
        o.zero_grad()
        m(x).pow(2).mean().backward()
        o.step()

    for _ in range(3):
        step(model, opt)
        sched.step()
    sd = opt.state_dict()
    loaded = round_trip({"optimizer": sd, "model": model.state_dict(), "epoch": 3, "note": "ckpt", "none": None,
                         "history": [0.5, 0.25, float("inf")], "pair": (1, 2.5)}, fmt=fmt)
    assert loaded["epoch"] == 3 and loaded["note"] == "ckpt" and loaded["none"] is None
    assert loaded["history"] == [0.5, 0.25, float("inf")] and loaded["pair"] == (1, 2.5)
    lsd = loaded["optimizer"]
    assert_tree_equal(lsd["param_groups"], sd["param_groups"])
    assert list(lsd["state"]) == list(sd["state"]) == [0, 1, 2, 3]  # int keys stay ints
    for i in sd["state"]:
        assert lsd["state"][i]["step"] == 3 and type(lsd["state"][i]["step"]) is int
        for k in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            assert_tensor_equal(lsd["state"][i][k], sd["state"][i][k].to("cpu"))
    assert lsd["param_groups"][0]["betas"] == (0.85, 0.995) and lsd["param_groups"][1]["lr"] == 0.05 * 0.5
    # resume: a new model and optimizer from the checkpoint continue exactly as the original
    model2 = loom.nn.Sequential(loom.nn.Linear(3, 4), loom.nn.Tanh(), loom.nn.Linear(4, 1)).double().to(device)
    model2.load_state_dict(loaded["model"])
    p2 = list(model2.parameters())
    opt2 = loom.optim.Adam([{"params": p2[:2]}, {"params": p2[2:], "lr": 0.05}], lr=1e-3, betas=(0.85, 0.995),
                           eps=1e-7, amsgrad=True)
    opt2.load_state_dict(lsd)
    for _ in range(3):
        step(model, opt)
        step(model2, opt2)
    for a, b in zip(model.parameters(), model2.parameters()):
        np.testing.assert_array_equal(np_(a), np_(b))


@pytest.mark.parametrize("fmt", FORMATS)
def test_nested_structures_and_plain_values(fmt):
    obj = {"a": [1, 2.5, True, None, "s", {"deep": (loom.ones(2), [loom.zeros(1, dtype=loom.int64)])}],
           7: "int key", "": loom.tensor(1.0), "unicode é": -0.0, "big": 2 ** 62, "f": 1e-300}
    loaded = round_trip(obj, fmt=fmt)
    assert_tree_equal(loaded, obj)
    assert str(loaded["unicode é"]) == "-0.0"
    assert round_trip([loom.ones(1), 3], fmt=fmt)[1] == 3
    assert round_trip((1, "x"), fmt=fmt) == (1, "x")
    assert round_trip(5, fmt=fmt) == 5 and round_trip(None, fmt=fmt) is None


def test_unsupported_values_raise_type_error_in_safetensors():
    for bad in [{"x": {1, 2}}, {"x": object()}, {(1, 2): loom.ones(1)}, np.ones(2), {"x": b"bytes"}]:
        with pytest.raises(TypeError):
            loom.save(bad, io.BytesIO(), format="safetensors")
    with pytest.raises(ValueError, match="format must be 'torch' or 'safetensors'"):
        loom.save({}, io.BytesIO(), format="pickle")


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_same_tensor_twice(fmt):
    t = loom.arange(3.0)
    loaded = round_trip({"a": t, "b": t, "c": [t]}, fmt=fmt)
    for v in (loaded["a"], loaded["b"], loaded["c"][0]):
        np.testing.assert_array_equal(np_(v), [0.0, 1.0, 2.0])


def test_dotted_keys_do_not_collide_with_nested_paths():
    obj = {"a.b": loom.ones(2), "a": {"b": loom.zeros(2)}}
    loaded = round_trip(obj)
    assert_tree_equal(loaded, obj)


@pytest.mark.parametrize("obj", [
    {"a.b": loom.ones(2), "a": {"b": loom.zeros(2)}, "a.b#1": loom.full((2,), 2.0)},
    {"a": {"b": loom.zeros(2)}, "a.b": loom.ones(2)},
    {7: loom.ones(1), "7": loom.zeros(1)},
    {"__metadata__": loom.ones(3), "x": {"__metadata__": loom.zeros(1)}},
    {"": loom.ones(1), "tensor": loom.zeros(1)},
    [loom.ones(1), {"0": loom.zeros(1)}, {0: [loom.full((1,), 5.0)]}],
], ids=["suffix_taken", "nested_first", "int_and_str_key", "metadata_key", "empty_key", "list_paths"])
def test_names_that_collide_load_back_exactly(obj):
    data = saved_bytes(obj)
    header, _ = parse(data)  # still a valid safetensors file, with unique names
    assert len(header) - 1 == len(_tensors_in(obj))
    assert_tree_equal(loom.load(io.BytesIO(data)), obj)


def _tensors_in(obj):
    if isinstance(obj, loom.Tensor):
        return [obj]
    values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else []
    return [t for v in values for t in _tensors_in(v)]


def test_flat_string_keyed_dicts_keep_their_names():
    header, _ = parse(saved_bytes({"a.b": loom.ones(1), "a": loom.zeros(1), "x.0": loom.ones(2)}))
    assert set(header) == {"a.b", "a", "x.0", "__metadata__"}


# ---- the file format ----

def test_file_is_valid_safetensors():
    src = every_dtype()
    data = saved_bytes(src)
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0  # the header is padded so the data stays 8-byte aligned
    header, arrays = parse(data)
    assert set(header) == set(src) | {"__metadata__"}
    assert header["__metadata__"]["format"] == "pt"
    offsets = []
    for name, t in src.items():
        info = header[name]
        assert info["dtype"] == LOOM_CODE[t.dtype]
        assert info["shape"] == list(t.shape)
        offsets.append(info["data_offsets"])
        np.testing.assert_array_equal(arrays[name].astype(np.float64) if arrays[name].dtype.kind == "f"
                                      else arrays[name], np_(t).astype(np.float64) if np_(t).dtype.kind == "f"
                                      else np_(t))
    assert offsets[0][0] == 0
    assert [o[1] - o[0] for o in offsets] == [t.numel() * t.element_size() for t in src.values()]


def test_tensor_bytes_are_little_endian_raw_data():
    data = saved_bytes({"x": loom.tensor(np.array([1, 256, -2], np.int32)),
                        "h": loom.tensor(np.array([1.0], np.float32)).to(loom.bfloat16)})
    header, _ = parse(data)
    (n,) = struct.unpack("<Q", data[:8])
    body = data[8 + n:]
    b, e = header["x"]["data_offsets"]
    assert body[b:e] == b"\x01\x00\x00\x00\x00\x01\x00\x00\xfe\xff\xff\xff"
    b, e = header["h"]["data_offsets"]
    assert body[b:e] == b"\x80\x3f"  # bfloat16 1.0 = 0x3f80


def test_flat_tensor_dicts_read_by_a_manual_parser(device):
    g = np.random.default_rng(5)
    tt = {"w": torch.from_numpy(g.standard_normal((3, 5)).astype(np.float32)),
          "b": torch.arange(4, dtype=torch.int64), "m": torch.tensor([True, False]),
          "d": torch.from_numpy(g.standard_normal(2))}
    src = {k: loom.tensor(v.numpy(), device=device) for k, v in tt.items()}
    _, arrays = parse(saved_bytes(src))
    assert list(arrays) == list(tt)
    for k, v in tt.items():
        assert torch.equal(torch.from_numpy(arrays[k].copy()), v)


def test_loading_a_plain_safetensors_file():
    g = np.random.default_rng(1)
    tensors = {"z.weight": g.standard_normal((2, 3)).astype(np.float32), "count": np.array(5, dtype=np.int64),
               "flags": np.array([True, False, True]), "h": np.array([0.5, -1], np.float16),
               "empty": np.zeros((0, 4), np.float64)}
    for meta in (None, {"format": "pt"}, {"producer": "another library"}):
        loaded = loom.load(io.BytesIO(write_safetensors(tensors, meta)))
        assert isinstance(loaded, dict) and list(loaded) == list(tensors)
        for k, a in tensors.items():
            assert tuple(loaded[k].shape) == a.shape
            np.testing.assert_array_equal(np_(loaded[k]), a)
            assert np_(loaded[k]).dtype == a.dtype


def test_flat_and_nested_files_differ_only_in_metadata():
    t = {"a": loom.ones(2), "b": loom.zeros(3, dtype=loom.int32)}
    header, _ = parse(saved_bytes(t))
    assert {k: v for k, v in header.items() if k != "__metadata__"} == {
        "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "I32", "shape": [3], "data_offsets": [8, 20]}}
    nested, _ = parse(saved_bytes({"opt": {"state": {0: {"m": loom.ones(2)}}}, "lr": 0.1}))
    assert set(nested) == {"opt.state.0.m", "__metadata__"}


# ---- loading never executes anything ----

MARKER = "/tmp/loom_test_serialization_marker"


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {MARKER}",))


def _craft(header, body=b"", raw=None):
    text = raw if raw is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + body


_BODY = np.arange(6, dtype=np.float32).tobytes()
_OK = {"x": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]}}

# Files loading must reject: (name, bytes, the clean exception type the error should be)
CRAFTED = {
    "pickle_payload": pickle.dumps(_Evil()),
    "pickle_in_a_list": pickle.dumps([_Evil(), b"x" * 100]),
    "torch_save_zip": None,  # filled in by the test (needs a file)
    "empty_file": b"",
    "short_file": b"\x01\x02",
    "truncated_header": struct.pack("<Q", 100) + b'{"x":',
    "garbage_header": _craft(None, _BODY, raw=b"\xff\xfe\x00garbage"),
    "header_not_an_object": _craft([1, 2], _BODY),
    "header_a_string": _craft("hello", _BODY),
    "unknown_dtype": _craft({"x": {"dtype": "F8_E4M3", "shape": [6], "data_offsets": [0, 24]}}, _BODY),
    "shape_does_not_match_bytes": _craft({"x": {"dtype": "F32", "shape": [5], "data_offsets": [0, 24]}}, _BODY),
    "offsets_beyond_the_end": _craft({"x": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}}, _BODY),
    "entry_without_dtype": _craft({"x": {"shape": [6], "data_offsets": [0, 24]}}, _BODY),
    "entry_not_an_object": _craft({"x": 5}, _BODY),
    "float_offsets": _craft({"x": {"dtype": "F32", "shape": [6], "data_offsets": [0.0, 24.0]}}, _BODY),
    "metadata_not_an_object": _craft({**_OK, "__metadata__": "loom"}, _BODY),
    "loom_structure_bad_json": _craft({**_OK, "__metadata__": {"loom": "{not json"}}, _BODY),
    "loom_structure_missing_tensor": _craft({**_OK, "__metadata__": {"loom": json.dumps({"__tensor__": "no"})}}, _BODY),
    "loom_structure_unknown_node": _craft({**_OK, "__metadata__": {"loom": json.dumps({"__class__": "os.system"})}},
                                          _BODY),
    "loom_structure_a_list": _craft({**_OK, "__metadata__": {"loom": json.dumps([1, 2])}}, _BODY),
    "duplicate_names": _craft(None, _BODY, raw=b'{"x":{"dtype":"F32","shape":[6],"data_offsets":[0,24]},'
                                                b'"x":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}}'),
    "bool_shape": _craft({"x": {"dtype": "F32", "shape": [True, 6], "data_offsets": [0, 24]}}, _BODY),
    "extra_entry_field": _craft({"x": {**_OK["x"], "code": "os.system('x')"}}, _BODY),
    "three_offsets": _craft({"x": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24, 24]}}, _BODY),
    "gap_between_tensors": _craft({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                   "y": {"dtype": "F32", "shape": [3], "data_offsets": [12, 24]}}, _BODY),
    "bool_byte_not_0_or_1": _craft({"x": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}, b"\x01\x02"),
    "metadata_value_not_a_string": _craft({**_OK, "__metadata__": {"loom": 5}}, _BODY),
    "loom_structure_unused_tensor": _craft({**_OK, "y": {"dtype": "F32", "shape": [0], "data_offsets": [24, 24]},
                                            "__metadata__": {"loom": json.dumps({"__tensor__": "x"})}}, _BODY),
    "loom_structure_bad_key": _craft({**_OK, "__metadata__": {"loom": json.dumps(
        {"__dict__": [[["k"], {"__tensor__": "x"}]]})}}, _BODY),
    "loom_structure_list_value": _craft({**_OK, "__metadata__": {"loom": json.dumps(
        {"__dict__": [[{"__value__": "k"}, {"__tensor__": "x"}], [{"__value__": "v"}, {"__value__": [1]}]]})}},
        _BODY),
    "loom_structure_too_deep": _craft({**_OK, "__metadata__": {"loom": '{"__list__":[' * 100_000 + "]}" * 100_000}},
                                      _BODY),
    "header_too_deep": _craft(None, _BODY, raw=b'{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    "shape_too_many_dims": _craft({"x": {"dtype": "F32", "shape": [1] * 70, "data_offsets": [0, 4]}}, _BODY[:4]),
    "shape_too_big": _craft({"x": {"dtype": "F32", "shape": [0, 2 ** 62], "data_offsets": [0, 0]}}),
    "header_longer_than_file": struct.pack("<Q", 2 ** 63) + b"{}",
    "negative_shape": _craft({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 24]}}, _BODY),
    "negative_offset": _craft({"x": {"dtype": "F32", "shape": [6], "data_offsets": [-24, 24]}}, _BODY),
    "reversed_offsets": _craft({"x": {"dtype": "F32", "shape": [0], "data_offsets": [24, 0]}}, _BODY),
    "overlapping_tensors": _craft({"x": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]},
                                   "y": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, _BODY),
    "bytes_after_the_tensors": _craft(_OK, _BODY + b"\x00" * 16),
}
# Layouts the format forbids, which a lenient reader would load (the manual parser rejects them too).
LAYOUT_ERRORS = ["header_longer_than_file", "negative_shape", "negative_offset", "reversed_offsets",
                 "overlapping_tensors", "bytes_after_the_tensors", "gap_between_tensors"]


def _crafted(name, tmp_path):
    if name == "torch_save_zip":
        path = tmp_path / "t.pt"
        torch.save({"w": torch.ones(2), "evil": _Evil()}, path)
        return path.read_bytes()
    return CRAFTED[name]


@pytest.fixture
def no_marker():
    if os.path.exists(MARKER):
        os.remove(MARKER)
    yield
    executed = os.path.exists(MARKER)
    if executed:
        os.remove(MARKER)
    assert not executed, "loading executed code from the file"


@pytest.mark.parametrize("name", list(CRAFTED))
def test_crafted_files_raise_and_execute_nothing(tmp_path, no_marker, name):
    data = _crafted(name, tmp_path)
    with pytest.raises(Exception) as e:
        loom.load(io.BytesIO(data))
    assert not isinstance(e.value, (SystemExit, KeyboardInterrupt))
    path = tmp_path / "crafted.safetensors"
    path.write_bytes(data)
    with pytest.raises(Exception):
        loom.load(str(path))


@pytest.mark.parametrize("name", list(CRAFTED))
def test_crafted_files_raise_a_clean_error(tmp_path, no_marker, name):
    """One error type for every malformed file: loom.serialization.InvalidFileError, a ValueError
    whose message names the file and the problem."""
    data = _crafted(name, tmp_path)
    with pytest.raises(loom.serialization.InvalidFileError, match="<file object>") as e:
        loom.load(io.BytesIO(data))
    assert isinstance(e.value, ValueError)
    path = tmp_path / "crafted.safetensors"
    path.write_bytes(data)
    with pytest.raises(loom.serialization.InvalidFileError, match="crafted.safetensors"):
        loom.load(str(path))
    with open(path, "rb") as f, pytest.raises(loom.serialization.InvalidFileError, match="crafted.safetensors"):
        loom.load(f)


@pytest.mark.parametrize("name, what", [
    ("header_longer_than_file", "runs past the end of the file"),
    ("negative_shape", "non-negative"),
    ("negative_offset", "0 <= begin <= end"),
    ("reversed_offsets", "0 <= begin <= end"),
    ("overlapping_tensors", "overlaps"),
    ("bytes_after_the_tensors", "16 bytes follow the last tensor"),
    ("gap_between_tensors", "gap of 4 bytes"),
    ("shape_does_not_match_bytes", "needs 20 bytes"),
    ("offsets_beyond_the_end", "past the end of the data"),
    ("unknown_dtype", "F8_E4M3"),
    ("duplicate_names", "names 'x' twice"),
    ("bool_byte_not_0_or_1", "other than 0 and 1"),
    ("pickle_payload", "pickle"),
    ("torch_save_zip", "refuses the global posix.system"),
    ("loom_structure_missing_tensor", "'no'"),
    ("loom_structure_unused_tensor", "does not use the tensors ['y']"),
    ("loom_structure_too_deep", "nested too deeply"),
])
def test_errors_say_what_is_wrong(tmp_path, name, what):
    with pytest.raises(loom.serialization.InvalidFileError, match=re.escape(what)):
        loom.load(io.BytesIO(_crafted(name, tmp_path)))


@pytest.mark.parametrize("name", LAYOUT_ERRORS)
def test_invalid_layouts_are_rejected(no_marker, name):
    with pytest.raises(ValueError):
        loom.load(io.BytesIO(CRAFTED[name]))


def test_valid_layouts_in_any_order_load():
    """Entries may list the tensors in any order, and empty tensors may sit anywhere."""
    header = {"y": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]},
              "e": {"dtype": "I64", "shape": [0, 3], "data_offsets": [16, 16]},
              "x": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
              "z": {"dtype": "BOOL", "shape": [], "data_offsets": [24, 25]}}
    loaded = loom.load(io.BytesIO(_craft(header, _BODY + b"\x01")))
    assert list(loaded) == ["y", "e", "x", "z"]
    np.testing.assert_array_equal(np_(loaded["x"]), [[0, 1], [2, 3]])
    np.testing.assert_array_equal(np_(loaded["y"]), [4, 5])
    assert tuple(loaded["e"].shape) == (0, 3) and loaded["z"].item() is True


def test_manual_parser_rejects_what_the_format_forbids():
    """The reference parser of this file is strict (so the format checks above are meaningful)."""
    for name in LAYOUT_ERRORS:
        with pytest.raises((AssertionError, ValueError, KeyError)):
            parse(CRAFTED[name])
    parse(_craft(_OK, _BODY))


def test_loading_safetensors_does_not_unpickle(monkeypatch, tmp_path):
    """No pickle machinery runs at all while loading a safetensors file or a bare pickle (PyTorch's
    formats go through the restricted unpickler: test_checkpoints.py)."""
    calls = []
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: calls.append("loads"))
    monkeypatch.setattr(pickle, "load", lambda *a, **k: calls.append("load"))
    monkeypatch.setattr(loom.serialization.unpickler.Unpickler, "load", lambda *a, **k: calls.append("Unpickler"))
    with pytest.raises(Exception):
        loom.load(io.BytesIO(_crafted("pickle_payload", tmp_path)))
    assert loom.load(io.BytesIO(saved_bytes({"a": loom.ones(1)})))["a"].shape == (1,)
    assert calls == []


# ---- hostile headers are refused before the data is read; loading takes ~1x the file ----

class _CountingFile(io.BytesIO):
    """A file that counts the bytes read from it."""

    def __init__(self, data):
        super().__init__(data)
        self.bytes_read = 0

    def read(self, n=-1):
        out = super().read(n)
        self.bytes_read += len(out)
        return out

    def readinto(self, b):
        n = super().readinto(b)
        self.bytes_read += n
        return n


_BIG_BODY = bytes(4 << 20)  # 4 MiB of data behind every hostile header below
_BIG_OK = {"x": {"dtype": "F32", "shape": [1 << 20], "data_offsets": [0, 4 << 20]}}
HOSTILE = {
    "huge_header_length": (struct.pack("<Q", 2 ** 62) + b"{}" + _BIG_BODY, "runs past the end of the file"),
    "header_length_past_the_end": (struct.pack("<Q", len(_BIG_BODY) + 10) + b"{}" + _BIG_BODY, "runs past the end"),
    "offsets_past_the_end": (_craft({"x": {"dtype": "F32", "shape": [2 << 20], "data_offsets": [0, 8 << 20]}},
                                    _BIG_BODY), "past the end of the data"),
    "overlapping_ranges": (_craft({"x": _BIG_OK["x"], "y": {"dtype": "F32", "shape": [4],
                                                            "data_offsets": [16, 32]}}, _BIG_BODY), "overlaps"),
    "size_mismatch": (_craft({"x": {"dtype": "F64", "shape": [1 << 20], "data_offsets": [0, 4 << 20]}}, _BIG_BODY),
                      "needs 8388608 bytes"),
    "bad_dtype": (_craft({"x": {"dtype": "F31", "shape": [1 << 20], "data_offsets": [0, 4 << 20]}}, _BIG_BODY),
                  "'F31'"),
    "non_dict_json": (_craft([["x", "F32"]], _BIG_BODY), "not a JSON object"),
    "json_null": (_craft(None, _BIG_BODY), "not a JSON object"),
    "trailing_bytes": (_craft({"x": {"dtype": "F32", "shape": [1 << 19], "data_offsets": [0, 2 << 20]}},
                              _BIG_BODY), "bytes follow the last tensor"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_headers_fail_before_any_data_is_read_or_allocated(monkeypatch, name):
    data, what = HOSTILE[name]
    made = []
    real_empty = loom.empty
    monkeypatch.setattr(loom, "empty", lambda *a, **k: made.append(a) or real_empty(*a, **k))
    f = _CountingFile(data)
    with pytest.raises(loom.serialization.InvalidFileError, match=re.escape(what)):
        loom.load(f)
    (n,) = struct.unpack("<Q", data[:8])
    header_bytes = 8 + n if 8 + n <= len(data) else 8
    # the header at most (and the first 16 bytes once more: they tell the formats apart), never the data
    assert f.bytes_read <= header_bytes + 16 < len(data) - (1 << 20)
    assert made == []


_PEAK_PROGRAM = """
import resource, sys
import loom

def vm(field):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field))

before = vm("VmRSS:")
loaded = loom.load(sys.argv[1]) if sys.argv[2] == "path" else loom.load(open(sys.argv[1], "rb"))
peak = vm("VmHWM:")
assert loaded["b"][12345].item() == 12345.0 and loaded["c"][-1].item() == (1 << 24) - 1
print(peak - before)
"""


@pytest.mark.parametrize("how", ["path", "file"])
def test_loading_peaks_at_about_the_size_of_the_file(tmp_path, how):
    """Each tensor's bytes are read into the tensor: no copy of the whole file on the side (the
    old reader held the file's bytes and the tensors at once: twice the file)."""
    import subprocess
    import sys

    n = 1 << 24  # 64 MiB of float32 per tensor, three tensors
    path = tmp_path / "big.safetensors"
    header = {k: {"dtype": "F32", "shape": [n], "data_offsets": [i * 4 * n, (i + 1) * 4 * n]}
              for i, k in enumerate("abc")}
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        values = np.arange(n, dtype="<f4")
        for _ in range(3):
            f.write(values.tobytes())
    del values
    size = path.stat().st_size
    done = subprocess.run([sys.executable, "-c", _PEAK_PROGRAM, str(path), how], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    grown = int(done.stdout)
    assert grown < 1.25 * size, f"loading a {size >> 20} MiB file grew the process by {grown >> 20} MiB"


def test_a_stream_that_cannot_seek_still_loads():
    class Pipe(io.RawIOBase):
        def __init__(self, data):
            self.inner = io.BytesIO(data)

        def readable(self):
            return True

        def seekable(self):
            return False

        def readinto(self, b):
            return self.inner.readinto(b)

    obj = {"w": loom.arange(10, dtype=loom.float32), "b": loom.ones(3, dtype=loom.bfloat16)}
    loaded = loom.load(io.BufferedReader(Pipe(saved_bytes(obj))))
    np.testing.assert_array_equal(np_(loaded["w"]), np.arange(10, dtype=np.float32))
    np.testing.assert_array_equal(np_(loaded["b"]), np.ones(3, dtype=np.float32))


def test_bfloat16_is_converted_in_chunks(monkeypatch):
    monkeypatch.setattr(loom.serialization.safetensors, "_BF16_CHUNK", 7)
    values = loom.linspace(-4, 4, 23).to(loom.bfloat16).reshape(23, 1)
    loaded = loom.load(io.BytesIO(saved_bytes({"v": values})))["v"]
    assert loaded.dtype is loom.bfloat16 and tuple(loaded.shape) == (23, 1)
    np.testing.assert_array_equal(np_(loaded), np_(values))
