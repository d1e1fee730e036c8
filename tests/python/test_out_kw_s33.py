"""out=: the functions whose torch 1.13 counterparts take out= take it in loom, with torch's rules
(loom/_out.py). The table of those functions (loom/_out_names.py) is derived from torch by
perf/tools/out_names.py; every OpInfo op with supports_out is run with out= in loom and torch."""

import os
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import loom  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "perf", "tools"))
import opinfo_suite as S  # noqa: E402
import out_names  # noqa: E402

DEVICES = ["cpu", "lazy"]


def test_the_table_is_what_torch_says():
    from loom._out_names import NAMES
    assert list(NAMES) == out_names.derive(loom, torch), "stale: rerun perf/tools/out_names.py"


# ---- every OpInfo op with supports_out: loom's out= result is torch's ----

_DB = None


def _db():
    global _DB
    if _DB is None:
        _DB = {S.op_id(o): o for o in S.load_op_db()}
    return _DB


def _out_ops():
    return sorted(k for k, o in _db().items() if o.supports_out)


def _empty_like_result(lib, r, device="cpu"):
    if isinstance(r, (tuple, list)):
        return tuple(_empty_like_result(lib, x, device) for x in r)
    return lib.empty(0, dtype=r.dtype, device=r.device) if lib is torch else \
        loom.empty(0, dtype=getattr(loom, S.dtype_name(r.dtype)), device=device)


# OpInfo ops with supports_out whose loom function does not take out= yet (the derived table has
# no entry for them: torch binds them where out_names.py does not look), each with why.
KNOWN_GAPS = {
    "lu": "torch.lu is a Python function of (*args, **kwargs): out_names.py cannot see that it takes out=",
    "polygamma.polygamma_n_0": "loom has no torch.polygamma function (the OpInfo resolves the method), so no out=",
    "special.polygamma.special_polygamma_n_0": "loom.special.polygamma is written in Python and not in the table",
}
for _n in range(1, 5):
    KNOWN_GAPS[f"polygamma.polygamma_n_{_n}"] = "as polygamma.polygamma_n_0"


def _params():
    if os.environ.get("LOOM_SKIP_OPINFO") == "1":
        return []
    return [pytest.param(o, marks=pytest.mark.xfail(reason=KNOWN_GAPS[o], strict=True)) if o in KNOWN_GAPS else o
            for o in _out_ops()]


@pytest.mark.parametrize("op", _params())
def test_opinfo_out_matches_torch(op):
    _run_out(op, "cpu", (torch.float32, torch.int64), 2)


# On the lazy device (each new graph compiles a kernel, CI starts with an empty cache): every
# LAZY_STRIDE-th op, float32, one sample; out= is a lazy tensor written in place.
LAZY_STRIDE = 10


@pytest.mark.parametrize("op", [o for o in _params()[::LAZY_STRIDE] if isinstance(o, str)])
def test_opinfo_out_matches_torch_lazy(op):
    _run_out(op, "lazy", (torch.float32,), 1)


def _run_out(op, device, dtypes, samples):
    info = _db()[op]
    try:
        fn = S.resolve(info, "op", loom, torch)
    except Exception as e:  # noqa: BLE001 - an op loom does not have is not this test's
        pytest.skip(f"loom has no {op}: {e}")
    tested = 0
    for dtype in dtypes:
        if dtype not in info.supported_dtypes("cpu"):
            continue
        for sample in list(info.sample_inputs("cpu", dtype, requires_grad=False))[:samples]:
            (ti, ta, tk), _ = S.torch_copy((sample.input, sample.args, sample.kwargs), torch, False)
            try:
                plain = info.op(ti, *ta, **tk)
            except Exception:  # noqa: BLE001
                continue
            if not (isinstance(plain, torch.Tensor) or (isinstance(plain, tuple) and plain
                                                        and all(isinstance(x, torch.Tensor) for x in plain))):
                continue
            if any(x.is_complex() for x in S.flatten(plain, [])):
                continue
            t_out = _empty_like_result(torch, plain)
            torch.manual_seed(0)
            try:
                info.op(ti, *ta, **tk, out=t_out)
            except Exception:  # noqa: BLE001 - torch refuses out= for this sample
                continue
            try:
                (li, la, lk), _ = S.loom_copy((sample.input, sample.args, sample.kwargs), loom, torch, device, False)
            except S.Skip:
                continue
            l_out = _empty_like_result(loom, plain, device)
            loom.manual_seed(0)
            prev = loom.get_default_device()
            loom.set_default_device(device)   # a creation function's out is on the device of the rest
            try:
                l_ret = fn(li, *la, **lk, out=l_out)
            finally:
                loom.set_default_device(prev)
            if isinstance(l_out, tuple):
                assert all(a is b for a, b in zip(l_ret, l_out)), f"{op}: out= tensors not returned"
            else:
                assert l_ret is l_out, f"{op}: out= not returned"
            got = [S.record(x) for x in S.flatten(l_out, [])]
            ref = [S.record(x) for x in S.flatten(t_out, [])]
            random = op in ("bernoulli", "multinomial", "normal", "normal.number_mean", "randn", "rand", "randint",
                            "randperm", "uniform", "empty", "nn.functional.dropout")
            if random:   # values differ between libraries: compare with loom's own result under the seed
                loom.manual_seed(0)
                loom.set_default_device(device)
                try:
                    again = fn(li, *la, **lk)
                finally:
                    loom.set_default_device(prev)
                if op not in ("empty",):
                    ref = [S.record(x) for x in S.flatten(again, [])]
                else:
                    ref = got
            tie = np.asarray(sample.input.detach().numpy()) if info.name in S.TIE_OPS and \
                isinstance(sample.input, torch.Tensor) else None
            kind, detail = S.compare_outputs(got, ref, S.TOL, "output", tie)
            assert kind is None or kind == "skip", f"{op} {dtype}: {kind}: {detail}"
            tested += 1
    if not tested:
        pytest.skip(f"{op}: no sample torch runs with out=")


# ---- the rules ----

@pytest.mark.parametrize("device", DEVICES)
def test_writes_in_place_and_returns_out(device):
    a = loom.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    c = loom.empty(2, 2, device=device)
    assert loom.add(a, a, out=c) is c
    assert c.tolist() == [[2.0, 4.0], [6.0, 8.0]]
    base = loom.zeros(3, 2, device=device)
    loom.mul(a[0], 10, out=base[1])          # a view: its base sees the write
    assert base.tolist() == [[0.0, 0.0], [10.0, 20.0], [0.0, 0.0]]


@pytest.mark.parametrize("device", DEVICES)
def test_out_aliasing_an_input(device):
    x = loom.tensor([1.0, 2.0, 3.0], device=device)
    y = loom.tensor([10.0, 20.0, 30.0], device=device)
    assert loom.add(x, y, out=x) is x
    assert x.tolist() == [11.0, 22.0, 33.0]
    t = torch.tensor([[3.0, 1.0], [2.0, 5.0]])
    m = loom.tensor(t.numpy(), device=device)
    loom.matmul(m, m, out=m)
    assert np.allclose(m.cpu().numpy(), (t @ t).numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_rule_is_can_cast(device):
    a = loom.tensor([1.5, 2.5], device=device)
    o = loom.empty(2, dtype=loom.float64, device=device)
    loom.add(a, a, out=o)                         # float32 -> float64: cast
    assert o.dtype is loom.float64 and o.tolist() == [3.0, 5.0]
    i = loom.tensor([1, 2], device=device)
    f = loom.empty(2, device=device)
    loom.add(i, i, out=f)                         # int64 -> float32: cast
    assert f.tolist() == [2.0, 4.0]
    with pytest.raises(RuntimeError, match="float32.*int64"):
        loom.add(a, a, out=loom.empty(2, dtype=loom.int64, device=device))
    with pytest.raises(RuntimeError):
        torch.add(torch.ones(2), torch.ones(2), out=torch.empty(2, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="int64"):   # indices go into an int64 out only
        loom.argmax(a, out=loom.empty((), dtype=loom.int32, device=device))
    with pytest.raises(RuntimeError, match="dtype"):   # an explicit dtype= is out's
        loom.sum(a, dtype=loom.float64, out=loom.empty((), device=device))


def test_device_mismatch_raises():
    a = loom.ones(2)
    with pytest.raises(RuntimeError, match="device"):
        loom.add(a, a, out=loom.empty(2, device="lazy"))
    b = loom.ones(2, device="lazy")
    with pytest.raises(RuntimeError, match="device"):
        loom.neg(b, out=loom.empty(2))


@pytest.mark.parametrize("device", DEVICES)
def test_resize_and_its_warning(device):
    a = loom.ones(2, 3, device=device)
    o = loom.empty(0, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # an empty out is resized silently
        loom.add(a, a, out=o)
    assert tuple(o.shape) == (2, 3)
    o = loom.zeros(4, device=device)
    with pytest.warns(UserWarning, match="resized"):
        loom.add(a, a, out=o)
    assert tuple(o.shape) == (2, 3) and o.sum().item() == 12
    with pytest.warns(UserWarning, match="resized"):
        torch.add(torch.ones(2, 3), 1, out=torch.zeros(4))


@pytest.mark.parametrize("device", DEVICES)
def test_autograd_refuses_out(device):
    a = loom.ones(2, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation.*out="):
        loom.mul(a, 2, out=loom.empty(2, device=device))
    o = loom.zeros(2, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        loom.mul(loom.ones(2, device=device), 2, out=o)
    with loom.no_grad():
        loom.mul(a, 2, out=o)
    assert o.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("device", DEVICES)
def test_tuple_outs(device):
    x = loom.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]], device=device)
    v, i = loom.empty(0, device=device), loom.empty(0, dtype=loom.int64, device=device)
    r = loom.max(x, 1, out=(v, i))
    assert r.values is v and r.indices is i and v.tolist() == [3.0, 5.0] and i.tolist() == [0, 1]
    v2, i2 = loom.empty(0, device=device), loom.empty(0, dtype=loom.int64, device=device)
    r = loom.sort(x, dim=1, out=(v2, i2))
    assert r[0] is v2 and v2.tolist() == [[1.0, 2.0, 3.0], [0.0, 4.0, 5.0]] and i2.tolist() == [[1, 2, 0], [0, 2, 1]]
    with pytest.raises(TypeError, match="tuple of 2"):
        loom.max(x, 1, out=v)


@pytest.mark.parametrize("device", DEVICES)
def test_creation_functions_take_outs_dtype_and_device(device):
    o = loom.empty(0, dtype=loom.float64, device=device)
    loom.arange(0, 1, 0.1, out=o)
    assert o.dtype is loom.float64 and o.device == loom.empty(0, device=device).device
    assert np.array_equal(o.cpu().numpy(), torch.arange(0, 1, 0.1, dtype=torch.float64).numpy())
    z = loom.empty(0, dtype=loom.int32, device=device)
    assert loom.zeros(2, 3, out=z) is z and z.dtype is loom.int32 and z.tolist() == [[0] * 3] * 2
    r = loom.empty(0, device=device)
    with pytest.warns(UserWarning):
        loom.range(1, 3, out=r)                  # torch.range warns that it is deprecated
    assert r.tolist() == [1.0, 2.0, 3.0]
    f = loom.empty(0, dtype=loom.float64, device=device)
    loom.linspace(0, 1, 5, out=f)
    assert np.array_equal(f.cpu().numpy(), torch.linspace(0, 1, 5, dtype=torch.float64).numpy())


def test_python_functions_take_out():
    a, b = loom.ones(2, 3), loom.ones(3, 2)
    o = loom.empty(2, 2)
    assert loom.tensordot(a, b, 1, out=o) is o and o.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    o = loom.empty(2, 3)
    assert loom.nn.functional.normalize(a, out=o) is o
    assert np.allclose(o.numpy(), torch.nn.functional.normalize(torch.ones(2, 3)).numpy())


def test_functions_without_out_in_torch_reject_it():
    x = loom.ones(2, 3)
    for call in (lambda: loom.transpose(x, 0, 1, out=loom.empty(3, 2)),
                 lambda: loom.zeros_like(x, out=loom.empty(2, 3))):
        with pytest.raises(TypeError, match="out"):
            call()
    with pytest.raises(TypeError):
        torch.transpose(torch.ones(2, 3), 0, 1, out=torch.empty(3, 2))


def test_out_none_is_no_out():
    x = loom.ones(2)
    r = loom.add(x, x, out=None)
    assert r.tolist() == [2.0, 2.0]


def test_overlap_rules():
    x = loom.arange(6.0)
    with pytest.raises(RuntimeError, match="unsupported operation"):
        loom.neg(x[:4], out=x[2:])               # out shares memory with the input in part
    with pytest.raises(RuntimeError, match="unsupported operation"):
        loom.take(x, loom.tensor([0, 1]), out=x)  # take never writes into its own input
    with pytest.raises(RuntimeError, match="unsupported operation"):
        loom.neg(x[:3], out=loom.zeros(1).expand(3))
    loom.neg(x, out=x)                           # exactly the input: allowed
    assert x.tolist() == [-0.0, -1.0, -2.0, -3.0, -4.0, -5.0]


@pytest.mark.parametrize("device", DEVICES)
def test_resize_(device):
    t = loom.arange(6.0, device=device)
    assert t.resize_(2, 2) is t and t.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    t.resize_((3,))
    assert t.tolist() == [0.0, 1.0, 2.0]
    u = loom.empty(0, device=device)
    assert u.resize_as_(loom.ones(2, 5)).shape == (2, 5)
    assert loom.resize_as_(u, loom.ones(1)).shape == (1,)
    with pytest.raises(RuntimeError, match="require grad"):
        loom.ones(2, requires_grad=True).resize_(3)
