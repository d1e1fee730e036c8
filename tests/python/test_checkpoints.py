"""Checkpoints in PyTorch's format: loom.save files that torch.load (PyTorch 1.13 here) reads, and
torch.save files (zip and legacy) that loom.load reads, compared with PyTorch itself.

Covered: state dicts of real models (an MLP, a transformer) both ways with outputs compared;
PyTorch's AdamW state resumed by loom's AdamW, whose next step matches PyTorch's; every dtype bit
for bit; shared storages (views, offsets, strides, expanded tensors, tied weights) loading as
views of one storage on cpu and lazy; map_location in every form; whole modules with
weights_only=False; the restricted unpickler (globals outside the allow-list refused, an
os.system payload never run, nothing imported); hostile archives (sizes, keys, offsets, zip
bombs, CRCs) refused before memory is allocated for them; ZIP64; loading peaking near the size
of the file.
"""

import collections
import io
import os
import pickle
import re
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import loom
from loom.serialization import InvalidFileError, UnsafeFileError
from test_serialization import _Evil as Evil, no_marker  # noqa: F401  (the payload; its never-ran check)

torch = pytest.importorskip("torch")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


# ---- helpers ----

def loom_bytes(obj, **kw):
    buf = io.BytesIO()
    loom.save(obj, buf, **kw)
    return buf.getvalue()


def torch_bytes(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf, **kw)
    return buf.getvalue()


def torch_load(data, **kw):
    return torch.load(io.BytesIO(data), **kw)


def loom_load(data, **kw):
    return loom.load(io.BytesIO(data), **kw)


def bits(t):
    """A tensor's values as raw bytes in row-major order (loom or torch), for bit-exact checks."""
    if isinstance(t, torch.Tensor):
        t = t.detach().contiguous()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        return t.numpy().tobytes()
    t = t.detach().cpu().contiguous()
    if t.dtype is loom.bfloat16:  # float32's upper halves, exactly
        f = np.ascontiguousarray(t.float().numpy())
        return (f.view(np.uint32) >> 16).astype("<u2").tobytes()
    return np.ascontiguousarray(t.numpy()).tobytes()


def assert_same(a, b):
    """A loom and a torch tensor (either order) hold the same dtype, shape and bits."""
    if isinstance(a, torch.Tensor):
        a, b = b, a
    assert isinstance(a, loom.Tensor) and isinstance(b, torch.Tensor), (type(a), type(b))
    assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1], (a.dtype, b.dtype)
    assert tuple(a.shape) == tuple(b.shape)
    assert bits(a) == bits(b)


def every_dtype_torch():
    g = torch.Generator().manual_seed(0)
    out = {
        "bool": torch.rand(3, 4, generator=g) < 0.5,
        "uint8": torch.randint(0, 256, (5,), generator=g, dtype=torch.uint8),
        "int8": torch.tensor([-128, 127, 0, -1], dtype=torch.int8),
        "int16": torch.tensor([[-32768, 32767], [5, -7]], dtype=torch.int16),
        "int32": torch.randint(-2 ** 31, 2 ** 31 - 1, (2, 3), generator=g, dtype=torch.int32),
        "int64": torch.tensor([-2 ** 63, 2 ** 63 - 1, 0, 7]),
        "float16": torch.tensor([1.5, -0.0, 65504, 6e-8, float("inf"), float("nan")], dtype=torch.float16),
        "bfloat16": torch.tensor([[1.0, -2.5], [3.0e38, 1e-38]]).to(torch.bfloat16),
        "float32": torch.randn(2, 3, 4, generator=g),
        "float64": torch.tensor([np.pi, -np.inf, np.nan, 5e-324], dtype=torch.float64),
        "scalar": torch.tensor(3.25),
        "empty": torch.zeros(0, 3, dtype=torch.int64),
        "empty_bf16": torch.zeros(2, 0, dtype=torch.bfloat16),
    }
    return out


def to_loom(t):
    if t.dtype == torch.bfloat16:
        return loom.tensor(t.float().numpy()).to(loom.bfloat16)
    return loom.tensor(t.numpy())


# ---- models, both ways ----

def mlp(nn):
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).double()


def transformer(nn):
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2).double().eval()


@pytest.mark.parametrize("build, shape", [(mlp, (5, 4)), (transformer, (2, 5, 8))], ids=["mlp", "transformer"])
def test_torch_state_dict_loads_into_loom_model(build, shape, tmp_path):
    torch.manual_seed(0)
    tm = build(torch.nn)
    path = tmp_path / "model.pt"
    torch.save(tm.state_dict(), path)
    sd = loom.load(path)
    assert list(sd) == list(tm.state_dict()) and isinstance(sd, collections.OrderedDict)
    assert sd._metadata == tm.state_dict()._metadata
    lm = build(loom.nn)
    assert not lm.load_state_dict(sd).missing_keys
    x = np.random.default_rng(1).standard_normal(shape)
    np.testing.assert_allclose(lm(loom.tensor(x)).numpy(), tm(torch.tensor(x)).detach().numpy(), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("build, shape", [(mlp, (5, 4)), (transformer, (2, 5, 8))], ids=["mlp", "transformer"])
def test_loom_state_dict_loads_into_torch_model(build, shape, device, tmp_path):
    loom.manual_seed(0)
    lm = build(loom.nn).to(device)
    path = tmp_path / "model.pt"
    loom.save(lm.state_dict(), path)
    sd = torch.load(path, weights_only=True)
    assert list(sd) == list(lm.state_dict())
    tm = build(torch.nn)
    tm.load_state_dict(sd)
    x = np.random.default_rng(1).standard_normal(shape)
    np.testing.assert_allclose(tm(torch.tensor(x)).detach().numpy(),
                               lm(loom.tensor(x, device=device)).to("cpu").numpy(), rtol=1e-12, atol=1e-12)


def test_torch_adamw_state_resumes_in_loom_and_the_next_step_matches():
    torch.manual_seed(0)
    tm = mlp(torch.nn)
    topt = torch.optim.AdamW(tm.parameters(), lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True)
    x = torch.tensor(np.random.default_rng(2).standard_normal((6, 4)))

    def torch_step():
        topt.zero_grad()
        tm(x).pow(2).mean().backward()
        topt.step()

    for _ in range(3):
        torch_step()
    data = torch_bytes({"model": tm.state_dict(), "optimizer": topt.state_dict(), "epoch": 3})

    ck = loom.load(io.BytesIO(data))  # weights_only: the optimizer's state is plain data
    assert ck["epoch"] == 3
    lm = mlp(loom.nn)
    lm.load_state_dict(ck["model"])
    lopt = loom.optim.AdamW(lm.parameters(), lr=0.5)  # the checkpoint's hyperparameters replace these
    lopt.load_state_dict(ck["optimizer"])
    assert lopt.param_groups[0]["lr"] == 0.01 and lopt.param_groups[0]["amsgrad"]
    assert all(s["step"] == 3 for s in lopt.state.values())
    torch_step()
    lopt.zero_grad()
    lm(loom.tensor(x.numpy())).pow(2).mean().backward()
    lopt.step()
    for a, b in zip(lm.parameters(), tm.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_loom_optimizer_state_loads_into_torch():
    loom.manual_seed(0)
    lm = mlp(loom.nn)
    lopt = loom.optim.AdamW(lm.parameters(), lr=0.01)
    x = np.random.default_rng(2).standard_normal((6, 4))
    for _ in range(2):
        lopt.zero_grad()
        lm(loom.tensor(x)).pow(2).mean().backward()
        lopt.step()
    ck = torch_load(loom_bytes({"model": lm.state_dict(), "optimizer": lopt.state_dict()}))
    tm = mlp(torch.nn)
    tm.load_state_dict(ck["model"])
    topt = torch.optim.AdamW(tm.parameters(), lr=0.5)
    topt.load_state_dict(ck["optimizer"])
    for state, lstate in zip(topt.state.values(), lopt.state.values()):
        assert_same(lstate["exp_avg"], state["exp_avg"])
        assert float(state["step"]) == 2


# ---- every dtype, bit for bit ----

def test_every_dtype_torch_to_loom():
    src = every_dtype_torch()
    loaded = loom_load(torch_bytes(src))
    assert list(loaded) == list(src)
    for k in src:
        assert_same(loaded[k], src[k])


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_every_dtype_loom_to_torch(device):
    src = {k: to_loom(v).to(device) for k, v in every_dtype_torch().items()}
    data = loom_bytes(src)
    for weights_only in (False, True):
        loaded = torch_load(data, weights_only=weights_only)
        for k in src:
            assert_same(src[k], loaded[k])
    again = loom_load(data)
    for k in src:
        assert bits(again[k]) == bits(src[k]) and again[k].dtype is src[k].dtype


def test_loom_dtypes_and_sizes_are_written_as_torchs():
    data = loom_bytes({"dtype": loom.bfloat16, "size": loom.Size([2, 3]), "device": loom.device("cpu")})
    loaded = torch_load(data)
    assert loaded == {"dtype": torch.bfloat16, "size": torch.Size([2, 3]), "device": torch.device("cpu")}
    back = loom_load(data)
    assert back["dtype"] is loom.bfloat16 and back["size"] == (2, 3) and type(back["size"]) is loom.Size
    assert back["device"] == loom.device("cpu")


def test_dtypes_loom_lacks_raise_naming_the_dtype():
    for t in (torch.ones(2, dtype=torch.complex128), torch.ones(2, dtype=torch.complex64)):
        with pytest.raises(InvalidFileError, match="complex128|complex64"):
            loom_load(torch_bytes({"x": t}))
    with pytest.raises(InvalidFileError, match="torch.complex64"):
        loom_load(torch_bytes({"dtype": torch.complex64}))


# ---- shared storages ----

def shared_torch():
    base = torch.arange(24.0).reshape(4, 6)
    return {"base": base, "rows": base[1:3], "cols": base[:, ::2], "t": base.T, "elem": base[2, 3],
            "again": base, "flat": base.view(-1)[5:17], "expanded": torch.tensor([1.0, 2.0]).expand(3, 2),
            "other": torch.ones(3)}


def test_shared_storages_torch_to_loom_are_views_of_one_storage():
    src = shared_torch()
    loaded = loom_load(torch_bytes(src))
    for k, v in src.items():
        assert_same(loaded[k], v)
        assert loaded[k].stride() == v.stride() and loaded[k].storage_offset() == v.storage_offset()
    base = loaded["base"]
    for k in ("rows", "cols", "t", "elem", "again", "flat"):
        assert loaded[k].data_ptr() - base.data_ptr() == loaded[k].storage_offset() * 4
    base.mul_(-1)  # one storage: every view sees the write
    for k in ("rows", "cols", "t", "elem", "again", "flat"):
        assert bits(loaded[k]) == bits(-src[k]), k
    assert bits(loaded["other"]) == bits(src["other"])


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_shared_storages_loom_to_torch_and_back(device):
    base = loom.arange(24.0, device=device).reshape(4, 6)
    lin = loom.nn.Linear(6, 6)
    src = {"base": base, "rows": base[1:3], "cols": base[:, ::2], "t": base.T, "elem": base[2, 3],
           "expanded": loom.tensor([1.0, 2.0], device=device).expand(3, 2), "w": lin.weight, "tied": lin.weight,
           "w_data": lin.weight.detach()}
    data = loom_bytes(src)
    with zipfile.ZipFile(io.BytesIO(data)) as z:  # base, expanded and the weight: three storages
        assert sorted(n for n in z.namelist() if "/data/" in n) == ["archive/data/0", "archive/data/1",
                                                                     "archive/data/2"]
    loaded = torch_load(data)
    for k, v in src.items():
        assert_same(v, loaded[k])
        assert loaded[k].stride() == v.stride()
    ptrs = {k: loaded[k].storage().data_ptr() for k in src}
    assert len({ptrs[k] for k in ("base", "rows", "cols", "t", "elem")}) == 1
    assert ptrs["w"] == ptrs["w_data"] and loaded["w"] is loaded["tied"]
    assert type(loaded["w"]) is torch.nn.Parameter and type(loaded["w_data"]) is torch.Tensor

    again = loom_load(data, map_location=device)
    assert again["w"] is again["tied"] and type(again["w"]) is loom.nn.Parameter
    with loom.no_grad():
        again["base"][1, 0] = 100.0
        again["w_data"][0, 0] = 7.0
    assert again["rows"][0, 0].item() == 100.0 and again["t"][0, 1].item() == 100.0
    assert again["w"][0, 0].item() == 7.0


def test_a_slice_saves_only_its_span():
    big = loom.arange(1000.0)
    data = loom_bytes({"part": big[100:110], "step": big[200:300:10]})
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        sizes = sorted(z.getinfo(n).file_size for n in z.namelist() if "/data/" in n)
    assert sizes == [40, 364]  # 10 floats; 91 floats from element 200 to element 290
    loaded = torch_load(data)
    assert loaded["part"].tolist() == list(range(100, 110)) and loaded["step"].tolist() == list(range(200, 300, 10))


def test_tied_weights_in_a_module_stay_tied():
    class Tied(loom.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = loom.nn.Embedding(5, 3)
            self.head = loom.nn.Linear(3, 5, bias=False)
            self.head.weight = self.emb.weight

    sd = Tied().state_dict()
    loaded = loom_load(loom_bytes(sd))
    with loom.no_grad():
        loaded["emb.weight"].add_(1.0)
    assert bits(loaded["emb.weight"]) == bits(loaded["head.weight"])
    tl = torch_load(loom_bytes(sd))
    assert tl["emb.weight"].data_ptr() == tl["head.weight"].data_ptr()


# ---- map_location ----

@pytest.mark.parametrize("map_location", ["cpu", "lazy", "lazy:cpu", "dict", "device", "callable", "callable_lazy"])
def test_map_location(map_location):
    given = {"dict": {"cpu": "lazy"}, "device": loom.device("lazy"), "callable": lambda storage, location: storage,
             "callable_lazy": lambda storage, location: storage.to("lazy")}.get(map_location, map_location)
    src = shared_torch()
    loaded = loom_load(torch_bytes(src), map_location=given)
    lazy = map_location not in ("cpu", "callable")
    for k, v in src.items():
        assert loaded[k].is_lazy == lazy
        assert_same(loaded[k].to("cpu"), v)
        assert loaded[k].stride() == v.stride()
    loaded["base"].mul_(2)  # still one storage
    assert bits(loaded["rows"].to("cpu")) == bits(src["rows"] * 2)


def test_map_location_callable_gets_storage_and_tag():
    seen = []
    loom_load(torch_bytes({"a": torch.ones(2), "b": torch.zeros(3, dtype=torch.int32)}),
              map_location=lambda storage, location: seen.append((storage.numel(), storage.dtype, location)))
    assert seen == [(2, loom.float32, "cpu"), (3, loom.int32, "cpu")]
    with pytest.raises(TypeError, match="map_location returned"):
        loom_load(torch_bytes({"a": torch.ones(2)}), map_location=lambda storage, location: storage[:1])
    with pytest.raises(TypeError, match="map_location must be"):
        loom_load(torch_bytes({"a": torch.ones(2)}), map_location=3)


def test_saved_device_tags(monkeypatch):
    """A storage tagged "cuda:0" (a GPU checkpoint) needs a GPU, or a map_location; a device loom
    lacks is named. torch.load reads loom's tags."""
    monkeypatch.setattr(loom.serialization.pickler, "_location", lambda t: "cuda:0")
    gpu = loom_bytes({"w": loom.ones(2)})
    monkeypatch.setattr(loom.serialization.pickler, "_location", lambda t: "mps")
    mps = loom_bytes({"w": loom.ones(2)})
    monkeypatch.undo()
    if not loom.cuda.is_available():
        with pytest.raises(RuntimeError, match="loom.cuda.is_available\\(\\) is False"):
            loom_load(gpu)
    for map_location in ("cpu", {"cuda:0": "cpu"}, lambda s, loc: s):
        assert loom_load(gpu, map_location=map_location)["w"].tolist() == [1.0, 1.0]
    assert torch_load(gpu, map_location="cpu")["w"].tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="'mps', which loom does not have"):
        loom_load(mps)
    assert loom_load(mps, map_location={"mps": "cpu"})["w"].tolist() == [1.0, 1.0]


# ---- whole modules need weights_only=False ----

class Net(loom.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = mlp(loom.nn)
        self.norm = loom.nn.LayerNorm(3).double()
        self.register_buffer("scale", loom.tensor(2.0, dtype=loom.float64))
        self.frozen = loom.nn.Parameter(loom.ones(3, dtype=loom.float64), requires_grad=False)

    def forward(self, x):
        return self.norm(self.body(x)) * self.scale + self.frozen


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_whole_module_with_weights_only_false(device, tmp_path):
    loom.manual_seed(0)
    net = Net().to(device)
    path = tmp_path / "net.pt"
    loom.save(net, path)
    with pytest.raises(UnsafeFileError, match=r"refuses the global test_checkpoints\.Net"):
        loom.load(path)
    with pytest.raises(pickle.UnpicklingError):
        loom.load(path)
    loaded = loom.load(path, weights_only=False, map_location=device)
    assert type(loaded) is Net and type(loaded.frozen) is loom.nn.Parameter
    assert [p.requires_grad for p in loaded.parameters()] == [p.requires_grad for p in net.parameters()]
    assert all(type(p) is loom.nn.Parameter and p.is_lazy == (device == "lazy") for p in loaded.parameters())
    x = loom.tensor(np.random.default_rng(3).standard_normal((2, 4)), device=device)
    np.testing.assert_array_equal(loaded(x).to("cpu").numpy(), net(x).to("cpu").numpy())
    loaded(x).sum().backward()  # a module that trains
    assert loaded.body[0].weight.grad is not None and net.body[0].weight.grad is None


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_whole_module_with_its_classes_allowed(device, tmp_path):
    """weights_only loading of a whole module once the program lists its classes (PyTorch 2.4's
    safe_globals / add_safe_globals): inside the block only, or from add_safe_globals on."""
    loom.manual_seed(0)
    net = Net().to(device)
    path = tmp_path / "net.pt"
    loom.save(net, path)
    classes = [Net, loom.nn.Sequential, loom.nn.Linear, loom.nn.ReLU, loom.nn.LayerNorm]
    with pytest.raises(UnsafeFileError, match=r"allow it with loom\.serialization\.add_safe_globals"):
        loom.load(path)
    with pytest.raises(UnsafeFileError, match=r"the global loom\.nn\.modules\.normalization\.LayerNorm"):
        with loom.serialization.safe_globals(classes[:-1]):
            loom.load(path)
    with loom.serialization.safe_globals(classes):
        assert loom.serialization.get_safe_globals() == classes
        loaded = loom.load(path)
    assert loom.serialization.get_safe_globals() == []
    with pytest.raises(UnsafeFileError):
        loom.load(path)
    assert type(loaded) is Net and all(p.is_lazy == (device == "lazy") for p in loaded.parameters())
    x = loom.tensor(np.random.default_rng(3).standard_normal((2, 4)), device=device)
    np.testing.assert_array_equal(loaded(x).to("cpu").numpy(), net(x).to("cpu").numpy())
    try:
        loom.serialization.add_safe_globals(classes[:2] + [(loom.nn.Linear, "loom.nn.modules.linear.Linear")])
        loom.serialization.add_safe_globals(classes[3:])
        assert type(loom.load(path)) is Net
    finally:
        loom.serialization.clear_safe_globals()
    with pytest.raises(UnsafeFileError):
        loom.load(path)
    with pytest.raises(TypeError, match="module.name"):
        loom.serialization.add_safe_globals([(Net, 3)])


def test_lazy_tensors_load_back_lazy(tmp_path):
    """A lazy tensor's storage is tagged with the device it runs on ("cpu"), which torch.load
    reads, and listed in a record of loom's that PyTorch ignores, so loom.load puts it back on the
    lazy device, as a GPU tensor goes back to its GPU; map_location still decides."""
    lazy = loom.nn.Linear(3, 2).to("lazy")
    obj = {"model": lazy.state_dict(), "host": loom.arange(4.0)}
    data = loom_bytes(obj)
    loaded = loom_load(data)
    assert all(t.is_lazy for t in loaded["model"].values()) and not loaded["host"].is_lazy
    for k, v in lazy.state_dict().items():
        assert bits(loaded["model"][k].to("cpu")) == bits(v.to("cpu"))
    assert not any(t.is_lazy for t in loom_load(data, map_location="cpu")["model"].values())
    tags = []
    loom_load(data, map_location=lambda storage, location: tags.append(location))
    assert sorted(tags) == ["cpu", "lazy:cpu", "lazy:cpu"]
    from_torch = torch_load(data)
    assert from_torch["model"]["weight"].device.type == "cpu"
    np.testing.assert_array_equal(from_torch["model"]["weight"].numpy(), lazy.weight.to("cpu").numpy())
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert z.read("archive/loom_lazy_storages").split() == [b"0", b"1"]
    # a hostile record is refused before it is read
    big = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(big, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            dst.writestr(info, body + b" " * (1 << 21) if info.filename.endswith("loom_lazy_storages") else body)
    with pytest.raises(InvalidFileError, match="loom_lazy_storages record holds"):
        loom_load(big.getvalue())


def test_arbitrary_objects_with_weights_only_false():
    obj = {"array": np.arange(3), "set": {1, 2}, "bytes": b"\x00\xff", "range": range(3), "t": loom.ones(2)}
    data = loom_bytes(obj)
    with pytest.raises(UnsafeFileError, match="numpy"):
        loom_load(data)
    loaded = loom_load(data, weights_only=False)
    assert loaded["array"].tolist() == [0, 1, 2] and loaded["set"] == {1, 2} and loaded["bytes"] == b"\x00\xff"
    assert loaded["range"] == range(3) and loaded["t"].tolist() == [1.0, 1.0]


def test_pytorch_1_13_default_through_the_environment(no_marker, monkeypatch):
    """PyTorch 1.13's torch.load loaded anything unless weights_only=True was passed; PyTorch 2.6
    (whose default loom keeps: nothing in a file runs unless asked) restores that default for calls
    that pass no weights_only when TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD is set, and makes every load
    weights_only with TORCH_FORCE_WEIGHTS_ONLY_LOAD. A 1.13 program whose checkpoints hold numpy
    values (a best score as np.float64, an array of statistics) runs unchanged with the former."""
    data = torch_bytes({"w": torch.ones(2), "best": np.float64(1.5), "stats": np.arange(3.0)})
    monkeypatch.delenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", raising=False)
    monkeypatch.delenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", raising=False)
    with pytest.raises(UnsafeFileError, match="TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1"):
        loom_load(data)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    loaded = loom_load(data)
    assert loaded["best"] == 1.5 and loaded["stats"].tolist() == [0.0, 1.0, 2.0] and loaded["w"].tolist() == [1, 1]
    with pytest.raises(UnsafeFileError):
        loom_load(data, weights_only=True)  # an explicit argument wins
    evil = torch_bytes({"evil": Evil()})
    monkeypatch.setenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "true")
    for kw in ({}, {"weights_only": False}):
        with pytest.raises(UnsafeFileError, match="posix"):
            loom_load(evil, **kw)


def test_allowed_builtins_load_with_weights_only():
    obj = {"set": {1, 2}, "frozenset": frozenset("ab"), "complex": 1 + 2j, "slice": slice(1, 5, 2),
           "bytes": b"\x00\xff", "bytearray": bytearray(b"xy"), "counter": collections.Counter("aab"),
           "od": collections.OrderedDict(a=1)}
    for data in (torch_bytes(obj), loom_bytes(obj)):
        assert loom_load(data) == obj


# ---- the restricted unpickler ----

@pytest.mark.parametrize("fmt", ["zip", "legacy"])
def test_an_os_system_payload_never_runs(no_marker, tmp_path, fmt):
    data = torch_bytes({"w": torch.ones(2), "evil": Evil()}, _use_new_zipfile_serialization=fmt == "zip")
    with pytest.raises(UnsafeFileError, match=r"<file object>: weights_only loading refuses the global posix\.system"):
        loom_load(data)
    path = tmp_path / "evil.pt"
    path.write_bytes(data)
    with pytest.raises(pickle.UnpicklingError, match=re.escape(repr(str(path)))):
        loom.load(path, map_location="lazy")


class Reduce:
    """An object pickled as fn(*args): a pickle that calls a global of the test's choice."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


@pytest.mark.parametrize("fn, args", [
    (eval, ("1",)), (exec, ("x = 1",)), (getattr, ("x", "upper")), (__import__, ("os",)),
    (subprocess.Popen, (["true"],)), (torch.load, ("x",)), (np.ones, (3,)), (pickle.loads, (b"",)),
    (collections.namedtuple, ("P", "x")), (torch.nn.Linear, (2, 2)),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_globals_off_the_allow_list_are_refused(fn, args):
    data = torch_bytes({"x": Reduce(fn, *args)})
    with pytest.raises(UnsafeFileError, match=r"refuses the global [\w.]*" + re.escape(fn.__qualname__)):
        loom_load(data)


def zip_checkpoint(pkl, records=(), folder="archive", compress=zipfile.ZIP_STORED):
    """A zip archive with data.pkl and the given records (name, bytes), written by Python's zipfile."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compress) as z:
        z.writestr(f"{folder}/data.pkl", pkl)
        for name, data in records:
            z.writestr(f"{folder}/{name}", data)
        z.writestr(f"{folder}/version", b"3\n")
    return buf.getvalue()


def global_op(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


@pytest.mark.parametrize("pkl, what", [
    (b"\x80\x04\x8c\x05posix\x8c\x06system\x93\x8c\x04true\x85R.", "posix.system"),  # STACK_GLOBAL
    (b"\x80\x02" + global_op("__builtin__", "eval") + b"X\x01\x00\x00\x001\x85R.", "builtins.eval"),  # py2 names
    (b"(" + b"ios\nsystem\n" + b".", "INST"),
    (b"\x80\x02\x82\x01.", "EXT1"),
], ids=["stack_global", "python2_name", "inst", "ext1"])
def test_every_route_to_a_global_is_checked(pkl, what, no_marker):
    with pytest.raises(InvalidFileError, match=re.escape(what)):
        loom_load(zip_checkpoint(pkl))


LOADING_PROGRAM = """
import sys
import loom
obj = loom.load(sys.argv[1])
assert obj["w"].tolist() == [[1.0, 1.0]] and obj["p"].requires_grad
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""


def test_loading_a_torch_checkpoint_imports_nothing(tmp_path):
    """The globals a checkpoint names are loom's stand-ins, never the modules named."""
    path = tmp_path / "ck.pt"
    torch.save({"w": torch.ones(1, 2), "p": torch.nn.Parameter(torch.ones(1))}, path)
    env = {k: v for k, v in os.environ.items()}
    done = subprocess.run([sys.executable, "-c", LOADING_PROGRAM, str(path)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ---- hostile archives ----

class Pid:
    """A storage's persistent id, with the fields of the test's choice."""

    def __init__(self, *fields):
        self.fields = fields


class _HostilePickler(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.fields if isinstance(obj, Pid) else None


def hostile_pickle(obj):
    buf = io.BytesIO()
    _HostilePickler(buf, protocol=2).dump(obj)
    return buf.getvalue()


def tensor(pid, offset=0, size=(2,), stride=(1,), requires_grad=False, fn=None):
    return Reduce(fn or torch._utils._rebuild_tensor_v2, pid, offset, size, stride, requires_grad,
                  collections.OrderedDict())


FLOATS = ("data/0", np.arange(4, dtype=np.float32).tobytes())
HOSTILE = {
    "numel_huge": ({"x": tensor(Pid("storage", torch.FloatStorage, "0", "cpu", 2 ** 60))}, [FLOATS],
                   "needs 4611686018427387904 bytes, but its record holds 16"),
    "numel_negative": ({"x": tensor(Pid("storage", torch.FloatStorage, "0", "cpu", -1))}, [FLOATS],
                       "non-negative integer"),
    "numel_not_int": ({"x": tensor(Pid("storage", torch.FloatStorage, "0", "cpu", 4.0))}, [FLOATS],
                      "non-negative integer"),
    "key_missing": ({"x": tensor(Pid("storage", torch.FloatStorage, "7", "cpu", 4))}, [FLOATS],
                    "no record archive/data/7"),
    "key_not_a_string": ({"x": tensor(Pid("storage", torch.FloatStorage, 0, "cpu", 4))}, [FLOATS],
                         "string key"),
    "offset_past_storage": ({"x": tensor(Pid("storage", torch.FloatStorage, "0", "cpu", 4), offset=3)}, [FLOATS],
                            "reaches element 4 of a storage of 4 elements"),
    "stride_past_storage": ({"x": tensor(Pid("storage", torch.FloatStorage, "0", "cpu", 4), size=(3,),
                                         stride=(2,))}, [FLOATS], "reaches element 4"),
    "size_overflow": ({"x": tensor(Pid("storage", torch.FloatStorage, "0", "cpu", 4), size=(2 ** 62, 2 ** 62),
                                   stride=(0, 0))}, [FLOATS], "more elements than loom can count"),
    "negative_stride": ({"x": tensor(Pid("storage", torch.FloatStorage, "0", "cpu", 4), offset=3, stride=(-1,))},
                        [FLOATS], "non-negative integers"),
    "negative_offset": ({"x": tensor(Pid("storage", torch.FloatStorage, "0", "cpu", 4), offset=-1)}, [FLOATS],
                        "non-negative integers"),
    "size_stride_lengths": ({"x": tensor(Pid("storage", torch.FloatStorage, "0", "cpu", 4), size=(2, 2))},
                            [FLOATS], "as many strides as sizes"),
    "too_many_dims": ({"x": tensor(Pid("storage", torch.FloatStorage, "0", "cpu", 4), size=(1,) * 65,
                                   stride=(1,) * 65)}, [FLOATS], "at most 64"),
    "storage_type_not_a_storage": ({"x": tensor(Pid("storage", collections.OrderedDict, "0", "cpu", 4))}, [FLOATS],
                                   "not a storage class"),
    "pid_not_storage": ({"x": Pid("module", "os", "system")}, [FLOATS], "kind 'module'"),
    "pid_short": ({"x": Pid("storage", torch.FloatStorage)}, [FLOATS], "must be ('storage'"),
    "not_from_a_storage": ({"x": tensor([1, 2, 3])}, [FLOATS], "rebuilt from list, not from a storage"),
    "int_requires_grad": ({"x": tensor(Pid("storage", torch.IntStorage, "0", "cpu", 4), requires_grad=True)},
                          [FLOATS], "only floating point tensors"),
    "one_key_two_dtypes": ({"x": tensor(Pid("storage", torch.FloatStorage, "0", "cpu", 4)),
                            "y": tensor(Pid("storage", torch.IntStorage, "0", "cpu", 4))}, [FLOATS],
                           "named as 4 elements of loom.int32"),
    "bool_byte_2": ({"x": tensor(Pid("storage", torch.BoolStorage, "0", "cpu", 2))}, [("data/0", b"\x01\x02")],
                    "a byte other than 0 and 1"),
    "parameter_from_a_list": ({"x": Reduce(torch._utils._rebuild_parameter, [1.0], True,
                                           collections.OrderedDict())}, [FLOATS], "Parameter is rebuilt from list"),
    "subclass_of_anything": ({"x": Reduce(torch._tensor._rebuild_from_type_v2, torch._utils._rebuild_tensor_v2,
                                          collections.OrderedDict, (Pid("storage", torch.FloatStorage, "0", "cpu", 4),
                                                                    0, (2,), (1,), False, collections.OrderedDict()),
                                          None)}, [FLOATS], "rebuilt as"),
    "bytearray_of_a_size": ({"x": Reduce(bytearray, 2 ** 40)}, [], "bytearray(size) is refused"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_checkpoints_raise_naming_the_file_and_problem(name, monkeypatch, tmp_path, no_marker):
    obj, records, what = HOSTILE[name]
    data = zip_checkpoint(hostile_pickle(obj), records)
    made = []
    real_empty = loom.empty
    monkeypatch.setattr(loom, "empty", lambda *a, **k: made.append(a) or real_empty(*a, **k))
    with pytest.raises(InvalidFileError, match=re.escape(what)) as e:
        loom_load(data)
    assert str(e.value).startswith("<file object> is not a valid PyTorch checkpoint: ")
    assert all(np.prod(a[0]) <= 4 for a in made)  # never more than the file's storage
    path = tmp_path / "hostile.pt"
    path.write_bytes(data)
    with pytest.raises(InvalidFileError, match=re.escape(repr(str(path)))):
        loom.load(path)


def test_as_strided_refuses_views_past_the_storage():
    """The C++ check under the unpickler's own: a view never addresses memory outside its storage."""
    s = loom.arange(4.0)
    assert s._as_strided((2, 2), (1, 2), 0).tolist() == [[0.0, 2.0], [1.0, 3.0]]
    assert s[2:]._as_strided((2,), (1,), 1).tolist() == [1.0, 2.0]  # storage offsets, not the view's
    assert s._as_strided((0, 5), (100, 100), 4).shape == (0, 5)
    for size, stride, offset in [((3,), (2,), 0), ((1,), (1,), 4), ((2 ** 62, 4), (2 ** 62, 1), 0), ((2,), (-1,), 1),
                                 ((1,), (1,), -1), ((2, 2), (1,), 0), ((0,), (1,), 5), ((3,), (2 ** 63 - 1,), 0)]:
        with pytest.raises(RuntimeError):
            s._as_strided(size, stride, offset)
    with pytest.raises(RuntimeError, match="records no autograd"):
        loom.ones(2, requires_grad=True)._as_strided((2,), (1,), 0)


def test_valid_crafted_checkpoint_loads():
    """The crafting above makes loadable files when the numbers are right."""
    pid = Pid("storage", torch.FloatStorage, "0", "cpu", 4)
    data = zip_checkpoint(hostile_pickle({"x": tensor(pid, offset=1, size=(3,), stride=(1,))}), [FLOATS])
    assert loom_load(data)["x"].tolist() == [1.0, 2.0, 3.0]
    assert torch_load(data)["x"].tolist() == [1.0, 2.0, 3.0]


def patch_central_directory(data, fn):
    """data with each central directory entry passed through fn(fields, name) -> fields."""
    out = bytearray(data)
    pos = data.rindex(b"PK\x05\x06")
    count, size, start = struct.unpack("<HII", data[pos + 10:pos + 20])
    p = start
    for _ in range(count):
        fields = list(struct.unpack("<IHHHHHHIIIHHHHHII", data[p:p + 46]))
        name = data[p + 46:p + 46 + fields[10]].decode()
        out[p:p + 46] = struct.pack("<IHHHHHHIIIHHHHHII", *fn(fields, name))
        p += 46 + fields[10] + fields[11] + fields[12]
    return bytes(out)


def test_zip_bombs_and_broken_archives_are_refused_before_allocating(monkeypatch):
    good = loom_bytes({"x": loom.arange(1000.0)})
    made = []
    real_empty = loom.empty
    monkeypatch.setattr(loom, "empty", lambda *a, **k: made.append(a) or real_empty(*a, **k))

    def record_offset(name):
        with zipfile.ZipFile(io.BytesIO(good)) as z:
            return z.getinfo(name).header_offset

    data_offset = record_offset("archive/data/0")
    cases = {
        "compressed": (zip_checkpoint(b"\x80\x02}q\x00.", [("data/0", bytes(1 << 20))], compress=zipfile.ZIP_DEFLATED),
                       "is compressed"),
        # every record claims the 4000 bytes of the storage: they overlap, summing past the file
        "overlapping": (patch_central_directory(good, lambda f, n: f[:8] + [4000, 4000] + f[10:16] + [data_offset]),
                        "records overlap (a zip bomb?)"),
        "past_the_end": (patch_central_directory(good, lambda f, n: f if n != "archive/data/0" else
                                                 f[:8] + [1 << 30, 1 << 30] + f[10:]), "lies past the end"),
        "crc": (good.replace(np.arange(1000.0, dtype=np.float32).tobytes()[:8], b"\x00" * 8, 1), "CRC-32"),
        "no_data_pkl": (zip_checkpoint(b"\x80\x02}.", folder="a/b"), "no <folder>/data.pkl"),
        "bad_byteorder": (zip_checkpoint(b"\x80\x02}.", [("byteorder", b"middle")]), "'middle'"),
        "truncated_directory": (good[:-30], "zip directory is unreadable"),
        "pickle_claims_too_much": (zip_checkpoint(b"\x80\x05\x96" + struct.pack("<Q", 1 << 40) + b"xx"),
                                   "pickle is malformed"),
        "pickle_truncated": (zip_checkpoint(b"\x80\x02}q\x00(X\x01\x00\x00\x00a"), "pickle is malformed"),
    }
    for name, (data, what) in cases.items():
        made.clear()
        with pytest.raises(InvalidFileError, match=re.escape(what)):
            loom_load(data)
        assert all(np.prod(a[0]) <= 1000 for a in made), name


def test_big_endian_archives_are_swapped():
    values = np.array([1.5, -2.0, 3.25], dtype=">f8")
    pid = Pid("storage", torch.DoubleStorage, "0", "cpu", 3)
    data = zip_checkpoint(hostile_pickle({"x": tensor(pid, size=(3,))}), [("byteorder", b"big"),
                                                                        ("data/0", values.tobytes())])
    assert loom_load(data)["x"].tolist() == [1.5, -2.0, 3.25]


# ---- the archive loom writes ----

def local_data_offsets(data):
    """{name: offset of the record's data} from the local headers."""
    out = {}
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in z.infolist():
            n, e = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
            out[info.filename] = info.header_offset + 30 + n + e
    return out


def test_the_archive_layout():
    data = loom_bytes({"a": loom.ones(3), "b": loom.zeros(2, dtype=loom.int64)})
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert z.testzip() is None  # every CRC right
        assert z.namelist() == ["archive/data.pkl", "archive/byteorder", "archive/data/0", "archive/data/1",
                                "archive/version"]
        assert z.read("archive/version") == b"3\n" and z.read("archive/byteorder") == sys.byteorder.encode()
        assert all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())
    assert all(offset % 64 == 0 for offset in local_data_offsets(data).values())


def test_zip64_archives(monkeypatch):
    """Past 4 GiB the ZIP64 fields take over; forced here by lowering the limits."""
    monkeypatch.setattr(loom.serialization.zip_archive, "_ZIP64_LIMIT", 100)
    monkeypatch.setattr(loom.serialization.zip_archive, "_ZIP64_COUNT", 3)
    src = {"a": loom.arange(100.0), "b": loom.ones(50, dtype=loom.bfloat16), "c": loom.tensor(7)}
    data = loom_bytes(src)
    assert b"PK\x06\x06" in data and b"PK\x06\x07" in data  # the ZIP64 end records
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert z.testzip() is None
    loaded = torch_load(data)
    again = loom_load(data)
    for k in src:
        assert_same(src[k], loaded[k])
        assert bits(again[k]) == bits(src[k])
    assert all(offset % 64 == 0 for offset in local_data_offsets(data).values())


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_pickle_protocols(protocol):
    src = {"w": loom.arange(4.0).reshape(2, 2).T, "p": loom.nn.Parameter(loom.ones(1)), "d": loom.float16, "n": 0.5}
    data = loom_bytes(src, pickle_protocol=protocol)
    for loaded in (loom_load(data), torch_load(data)):
        assert loaded["w"].tolist() == [[0.0, 2.0], [1.0, 3.0]] and loaded["w"].stride() == (1, 2)
        assert loaded["p"].requires_grad and loaded["n"] == 0.5
    assert loom_load(data)["d"] is loom.float16


def test_an_object_that_cannot_be_pickled_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "ck.pt"
    loom.save({"w": loom.ones(2)}, path)
    before = path.read_bytes()
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        loom.save({"w": loom.zeros(2), "f": lambda: 0}, path)
    assert path.read_bytes() == before


def test_saving_to_a_stream_that_cannot_seek():
    class Pipe(io.RawIOBase):
        def __init__(self):
            self.chunks = []

        def writable(self):
            return True

        def seekable(self):
            return False

        def write(self, b):
            self.chunks.append(bytes(b))
            return len(b)

    pipe = Pipe()
    loom.save({"w": loom.arange(5.0)}, pipe)
    assert torch_load(b"".join(pipe.chunks))["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_lazy_tensors_are_synced_once():
    base = loom.ones(4, device="lazy")
    pending = {f"t{i}": base * i for i in range(5)}
    before = loom.metrics()["traces"]
    data = loom_bytes(pending)
    assert loom.metrics()["traces"] - before == 1
    loaded = torch_load(data)
    assert [loaded[f"t{i}"][0].item() for i in range(5)] == [0.0, 1.0, 2.0, 3.0, 4.0]


# ---- the legacy format ----

def test_legacy_format_loads_with_shared_storages_and_every_dtype():
    src = {**every_dtype_torch(), **shared_torch(), "p": torch.nn.Parameter(torch.ones(2))}
    data = torch_bytes(src, _use_new_zipfile_serialization=False)
    assert not data.startswith(b"PK")
    for map_location in (None, "lazy"):
        loaded = loom_load(data, map_location=map_location)
        for k, v in src.items():
            assert_same(loaded[k].to("cpu"), v)
            assert loaded[k].is_lazy == (map_location == "lazy") and loaded[k].stride() == v.stride()
        assert type(loaded["p"]) is loom.nn.Parameter and loaded["p"].requires_grad
        loaded["base"].mul_(-1)
        assert bits(loaded["rows"].to("cpu")) == bits(-src["rows"])


def test_legacy_format_hostile_files():
    data = torch_bytes({"w": torch.arange(100.0)}, _use_new_zipfile_serialization=False)
    with pytest.raises(InvalidFileError, match="ended inside the bytes of storage"):
        loom_load(data[:-4])
    with pytest.raises(InvalidFileError, match="need at least 408 bytes"):  # its count and 100 floats
        loom_load(data[:-200])
    count = struct.pack("<q", 100)
    assert data.count(count) == 1
    with pytest.raises(InvalidFileError, match="do not start with its element count 100"):
        loom_load(data.replace(count, struct.pack("<q", 101)))


def test_old_tar_checkpoints_are_named():
    with pytest.raises(InvalidFileError, match="tar archive"):
        loom_load(b"sys_info" + bytes(600))


# ---- memory ----

_PEAK_PROGRAM = """
import sys
import loom

def vm(field):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field))

before = vm("VmRSS:")
loaded = loom.load(sys.argv[1])
peak = vm("VmHWM:")
assert loaded["b"][12345].item() == 12345.0 and loaded["c"][-1].item() == (1 << 23) - 1
print(peak - before)
"""


def test_loading_a_torch_checkpoint_peaks_at_about_the_size_of_the_file(tmp_path):
    path = tmp_path / "big.pt"
    n = 1 << 23  # 32 MiB of float32 per tensor, three tensors
    torch.save({k: torch.arange(n, dtype=torch.float32) for k in "abc"}, path)
    size = path.stat().st_size
    done = subprocess.run([sys.executable, "-c", _PEAK_PROGRAM, str(path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    grown = int(done.stdout)
    assert grown < 1.25 * size, f"loading a {size >> 20} MiB file grew the process by {grown >> 20} MiB"
