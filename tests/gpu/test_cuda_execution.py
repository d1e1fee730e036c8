"""Eager and lazy execution on a GPU against numpy and the CPU backend: elementwise ops,
reductions, matrix products in every dtype, softmax, layer norm, cross-entropy, every library
kernel, in-place results, random numbers, data errors."""

import numpy as np
import pytest

import loom
from _cuda_programs import PROGRAMS, RANDOM
from _tolerances import assert_close, assert_product_close, host, product_bound

RNG = np.random.default_rng(11)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("device", ["cuda", "lazy:cuda"])
def test_elementwise_and_reductions_match_numpy(device):
    a, b = f32(64, 33), f32(64, 33)
    x, y = loom.tensor(a, device=device), loom.tensor(b, device=device)
    cases = {
        "add": (x + y * 2.5, a + b * 2.5),
        "chain": ((x.exp() * 0.5 + y.tanh()).sigmoid(), 1 / (1 + np.exp(-(np.exp(a) * 0.5 + np.tanh(b))))),
        "where": (loom.where(x > y, x, y - 1), np.where(a > b, a, b - 1)),
        "sum": (x.sum(1), a.sum(1)),
        "mean_all": (x.mean(), a.mean()),
        "max": (x.amax(0), a.max(0)),
        "argmax": (x.argmax(1), a.argmax(1)),
        "var": (x.var(1), a.var(1, ddof=1)),
        "broadcast": (x + y[:1], a + b[:1]),
        "transposed": ((x.T * 2).sum(0), (a.T * 2).sum(0)),
    }
    for name, (got, want) in cases.items():
        values = host(got)
        assert_close(values, np.asarray(want, values.dtype), got.dtype, err_msg=name)


@pytest.mark.parametrize("device", ["cuda", "lazy:cuda"])
def test_softmax_layer_norm_cross_entropy_match_the_cpu(device):
    import workloads as W

    x, w, b = f32(32, 100), f32(100), f32(100)
    labels = RNG.integers(0, 100, 32)
    F = loom.nn.functional
    results = {}
    for where in ["cpu", device]:
        tx, tw, tb = (loom.tensor(v, device=where) for v in (x, w, b))
        sm, ln = W.softmax_layer_norm(loom, tx, tw, tb)
        ce = F.cross_entropy(tx, loom.tensor(labels, device=where))
        results[where] = [host(sm), host(ln), host(ce)]
    for got, want in zip(results[device], results["cpu"]):
        assert_close(got, want, loom.float32)


@pytest.mark.parametrize("dtype", [loom.float32, loom.float64, loom.float16, loom.bfloat16])
@pytest.mark.parametrize("device", ["cuda", "lazy:cuda"])
def test_matmul_dtypes(dtype, device):
    # Within the rounding bound of the dtype (tests/gpu/_tolerances.py): a product computed in a
    # lower precision than asked (TF32 for float32, float16 accumulation) falls outside it.
    a, b = f32(3, 40, 24), f32(24, 17)
    x, y = loom.tensor(a, device=device).to(dtype), loom.tensor(b, device=device).to(dtype)
    for got in [x @ y, (y.T @ x.transpose(1, 2)).transpose(1, 2), loom.bmm(x, y.expand(3, 24, 17))]:
        assert got.dtype == dtype
        assert_product_close(host(got), a, b, dtype)


def test_tf32_is_off_by_default_and_changes_products_when_allowed():
    # Inputs whose answer lies in float32 bits that TF32 drops: a = 1 + r 2^-13 (r in 1..3) becomes
    # 1 in TF32 (rounded to nearest or truncated: TF32 keeps 10 mantissa bits, an ulp of 2^-10),
    # b = +-1 is exact in both. So every element of a float32 product is about K * 2 * 2^-13 =
    # 0.06 above the TF32 one, 16 times float32's rounding bound for K = 256.
    rng = np.random.default_rng(4)
    r = rng.integers(1, 4, (256, 256))
    a = (1 + r * 2.0**-13).astype(np.float32)
    b = (np.ones((256, 192)) * rng.choice([-1.0, 1.0], 192)).astype(np.float32)
    tf32_a = np.ones_like(a)  # a as TF32 holds it
    x, y = loom.tensor(a, device="lazy:cuda"), loom.tensor(b, device="lazy:cuda")
    assert not loom.backends.cuda.matmul.allow_tf32
    exact = host(x @ y)
    assert_product_close(exact, a, b, loom.float32)
    loom.backends.cuda.matmul.allow_tf32 = True
    try:
        fast = host(x @ y)  # a plan of its own (the setting is part of the plan's key)
    finally:
        loom.backends.cuda.matmul.allow_tf32 = False
    assert_product_close(fast, tf32_a, b, loom.float32)  # what TF32 inputs give, summed in float32
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = product_bound(a64, b64)
    shift = a64 @ b64 - tf32_a @ b64
    assert np.all(np.abs(shift) > 8 * bound)  # the inputs do what the comment says
    np.testing.assert_allclose(exact - fast, shift, rtol=0, atol=2 * bound.max())
    np.testing.assert_array_equal(host(x @ y), exact)  # allow_tf32 = False again: the first plan


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("executor", ["fused", "fused-nograph", "unfused"])
def test_every_lowered_program_matches_the_cpu(name, executor):
    program, *arrays = PROGRAMS[name]
    results = {}
    for device in ["lazy:cpu", "lazy:cuda"]:
        loom._C._set_executor("fused" if device == "lazy:cpu" else executor)
        for _ in range(3):  # direct run, capture, replay
            loom.manual_seed(5)
            outs = program(*[loom.tensor(a, device=device) for a in arrays])
            outs = outs if isinstance(outs, (list, tuple)) else [outs]
            results[device] = [(o.dtype, host(o)) for o in outs]
    for (dtype, got), (want_dtype, want) in zip(results["lazy:cuda"], results["lazy:cpu"]):
        assert dtype == want_dtype and got.shape == want.shape
        if name in RANDOM and dtype != loom.float64:
            np.testing.assert_array_equal(got, want)
        else:
            assert_close(got, want, dtype)


def test_eager_ops_compile_nothing_the_second_time():
    x = loom.tensor(f32(16, 8), device="cuda")
    ((x * 2).exp().sum(0) @ x.T).cpu()
    before = loom.metrics()
    for n in [16, 32, 7]:
        y = loom.tensor(f32(n, 8), device="cuda")
        ((y * 2).exp().sum(0) @ y.T).cpu()
    after = loom.metrics()
    assert after["kernels_compiled"] == before["kernels_compiled"]
    assert after["graph_replays"] == before["graph_replays"]  # eager: one kernel per op, no graph


def test_copies_between_host_and_device_in_every_layout():
    a = RNG.standard_normal((300, 700)).astype(np.float32)  # over a staging chunk (1 MiB)
    x = loom.tensor(a, device="cuda")
    np.testing.assert_array_equal(x.cpu().numpy(), a)
    np.testing.assert_array_equal(x.T.contiguous().cpu().numpy(), a.T)
    np.testing.assert_array_equal(x[::3, 5:600:7].cpu().numpy(), a[::3, 5:600:7])
    np.testing.assert_array_equal(x.double().cpu().numpy(), a.astype(np.float64))
    np.testing.assert_array_equal(x.half().cpu().numpy(), a.astype(np.float16))
    h = loom.tensor(a).T.to("cuda", loom.float64)  # converting and strided on the way in
    np.testing.assert_array_equal(h.cpu().numpy(), a.T.astype(np.float64))
    assert x[3, 4].item() == a[3, 4]
    z = loom.zeros(5, 3, device="cuda", dtype=loom.int32)
    z[1:3] = 7
    want = np.zeros((5, 3), np.int32)
    want[1:3] = 7
    np.testing.assert_array_equal(z.cpu().numpy(), want)


def test_random_numbers_equal_the_cpus():
    for device in ["cuda", "lazy:cuda"]:
        loom.manual_seed(9)
        got = [host(loom.rand(4, 5, device=device)), host(loom.randn(7, device=device, dtype=loom.float64)),
               host(loom.randint(3, 11, (6,), device=device))]
        loom.manual_seed(9)
        want = [loom.rand(4, 5).numpy(), loom.randn(7, dtype=loom.float64).numpy(), loom.randint(3, 11, (6,)).numpy()]
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1], rtol=1e-14)  # the GPU's log / cos are within an ulp
        np.testing.assert_array_equal(got[2], want[2])


@pytest.mark.parametrize("device", ["cuda", "lazy:cuda"])
def test_an_index_out_of_range_raises_at_the_next_wait(device):
    x = loom.tensor(f32(4, 3), device=device)
    bad = x[loom.tensor(np.array([0, 9]), device=device)]
    with pytest.raises(IndexError, match="index out of bounds"):
        bad.cpu()
    # The device is usable afterwards.
    np.testing.assert_allclose(host(x * 2), host(x) * 2)


def test_exchange_with_pytorch_without_copies():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no GPU")
    a = f32(6, 5)
    x = loom.tensor(a, device="cuda") * 2
    t = torch.from_dlpack(x)  # loom -> PyTorch through DLPack
    assert t.is_cuda and t.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(t.cpu().numpy(), a * 2)
    u = torch.as_tensor(x, device="cuda")  # through __cuda_array_interface__
    assert u.data_ptr() == x.data_ptr()
    back = loom.from_dlpack(torch.arange(12, device="cuda", dtype=torch.float32).reshape(3, 4) + 1)
    assert back.is_cuda
    np.testing.assert_array_equal(back.cpu().numpy(), np.arange(12, dtype=np.float32).reshape(3, 4) + 1)
    np.testing.assert_array_equal((back * 2).cpu().numpy(), (np.arange(12).reshape(3, 4) + 1) * 2)
