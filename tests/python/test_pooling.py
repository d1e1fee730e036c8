"""Pooling against PyTorch: max / avg / adaptive / Lp pooling and max unpooling in 1-3 dims, as
functions and as modules.

Values and indices (ties and NaN included), dtypes and shapes on both devices (lazy results also
equal eager ones), PyTorch's errors, fused = unfused = interpreter = the CUDA lowering's host
emulation = eager, and the structure: a pool without padding is one row kernel over a view of
its input, fused with the elementwise work that feeds it. Gradients (float64, against PyTorch
and finite differences) are cases of test_autograd_ops.py; here, the gradient of tied maxima.
"""

import numpy as np
import pytest

import loom
from _ops_helpers import SubChecks, assert_same_error, check, device, release_pending, torch  # noqa: F401

RNG = np.random.default_rng(11)


def R(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def F(m):
    return m.nn.functional


POOL_CASES = [
    ("max_pool1d", lambda m, x: F(m).max_pool1d(x, 3), (2, 3, 10)),
    ("max_pool1d_all", lambda m, x: F(m).max_pool1d(x, 3, 2, 1, dilation=2, ceil_mode=True, return_indices=True),
     (2, 3, 10)),
    ("max_pool1d_unbatched", lambda m, x: F(m).max_pool1d(x, 2, return_indices=True), (3, 9)),
    ("max_pool1d_no_window", lambda m, x: F(m).max_pool1d(x, 5), (2, 3, 4)),
    ("max_pool2d", lambda m, x: F(m).max_pool2d(x, 2), (2, 3, 8, 9)),
    ("max_pool2d_indices", lambda m, x: F(m).max_pool2d(x, (3, 2), (2, 1), (1, 1), dilation=(1, 2),
                                                        return_indices=True), (2, 3, 7, 8)),
    ("max_pool2d_ceil", lambda m, x: F(m).max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True), (2, 3, 8, 8)),
    ("max_pool2d_ceil_overhang", lambda m, x: F(m).max_pool2d(x, 2, 3, ceil_mode=True, return_indices=True),
     (1, 2, 7, 5)),
    ("max_pool2d_unbatched", lambda m, x: F(m).max_pool2d(x, 2, 1, return_indices=True), (3, 5, 4)),
    ("max_pool2d_stride_none", lambda m, x: F(m).max_pool2d(x, 2, None, 1), (2, 3, 5, 5)),
    ("max_pool3d", lambda m, x: F(m).max_pool3d(x, 2, 1, 1, return_indices=True), (1, 2, 4, 5, 4)),
    ("max_pool3d_ceil", lambda m, x: F(m).max_pool3d(x, (2, 3, 2), 2, ceil_mode=True), (2, 2, 5, 6, 5)),
    ("avg_pool1d", lambda m, x: F(m).avg_pool1d(x, 3, 2, 1), (2, 3, 10)),
    ("avg_pool1d_ceil_exclude", lambda m, x: F(m).avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
     (2, 3, 10)),
    ("avg_pool2d", lambda m, x: F(m).avg_pool2d(x, 2), (2, 3, 8, 9)),
    ("avg_pool2d_pad", lambda m, x: F(m).avg_pool2d(x, 3, 2, 1), (2, 3, 7, 8)),
    ("avg_pool2d_pad_exclude_ceil", lambda m, x: F(m).avg_pool2d(x, (3, 2), (2, 1), (1, 1), ceil_mode=True,
                                                                 count_include_pad=False), (2, 3, 7, 8)),
    ("avg_pool2d_ceil_include", lambda m, x: F(m).avg_pool2d(x, 3, 2, 1, ceil_mode=True), (2, 3, 8, 8)),
    ("avg_pool2d_divisor", lambda m, x: F(m).avg_pool2d(x, 3, 2, 1, divisor_override=4), (2, 3, 7, 8)),
    ("avg_pool2d_unbatched", lambda m, x: F(m).avg_pool2d(x, 2), (3, 6, 4)),
    ("avg_pool3d", lambda m, x: F(m).avg_pool3d(x, 2, 1, 1, count_include_pad=False), (1, 2, 4, 5, 4)),
    ("avg_pool3d_divisor", lambda m, x: F(m).avg_pool3d(x, 2, divisor_override=3), (1, 2, 4, 5, 4)),
    ("adaptive_avg_pool1d", lambda m, x: F(m).adaptive_avg_pool1d(x, 4), (2, 3, 10)),
    ("adaptive_avg_pool1d_tiles", lambda m, x: F(m).adaptive_avg_pool1d(x, 5), (2, 3, 10)),
    ("adaptive_avg_pool2d", lambda m, x: F(m).adaptive_avg_pool2d(x, (3, 4)), (2, 3, 7, 9)),
    ("adaptive_avg_pool2d_none", lambda m, x: F(m).adaptive_avg_pool2d(x, (None, 2)), (2, 3, 7, 9)),
    ("adaptive_avg_pool2d_global", lambda m, x: F(m).adaptive_avg_pool2d(x, 1), (2, 3, 7, 9)),
    ("adaptive_avg_pool2d_upsamples", lambda m, x: F(m).adaptive_avg_pool2d(x, (5, 7)), (1, 2, 3, 4)),
    ("adaptive_avg_pool2d_unbatched", lambda m, x: F(m).adaptive_avg_pool2d(x, 3), (2, 7, 5)),
    ("adaptive_avg_pool3d", lambda m, x: F(m).adaptive_avg_pool3d(x, (2, 3, None)), (1, 2, 5, 5, 4)),
    ("adaptive_max_pool1d", lambda m, x: F(m).adaptive_max_pool1d(x, 3, return_indices=True), (2, 3, 10)),
    ("adaptive_max_pool2d", lambda m, x: F(m).adaptive_max_pool2d(x, (3, 4), return_indices=True), (2, 3, 7, 9)),
    ("adaptive_max_pool2d_tiles", lambda m, x: F(m).adaptive_max_pool2d(x, (2, 3), True), (2, 3, 8, 9)),
    ("adaptive_max_pool2d_unbatched", lambda m, x: F(m).adaptive_max_pool2d(x, (None, 3), True), (2, 5, 7)),
    ("adaptive_max_pool3d", lambda m, x: F(m).adaptive_max_pool3d(x, (2, 3, 2), True), (1, 2, 5, 5, 4)),
    ("lp_pool1d", lambda m, x: F(m).lp_pool1d(x, 3, 2), (2, 3, 8)),
    ("lp_pool2d", lambda m, x: F(m).lp_pool2d(x, 2, (2, 3), 1), (2, 3, 6, 7)),
    ("lp_pool2d_ceil", lambda m, x: F(m).lp_pool2d(x, 1.5, 2, ceil_mode=True), (2, 3, 5, 7)),
]


@pytest.mark.parametrize("name,fn,shape", POOL_CASES, ids=[c[0] for c in POOL_CASES])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pool_matches_torch(device, name, fn, shape, dtype):
    x = R(*shape, dtype=dtype)
    if name.startswith("lp_pool"):
        x = np.abs(x) + 0.1  # PyTorch's Lp pool of negative values with p = 1.5 is NaN
    sub = SubChecks()
    for layout in ["contiguous", "transposed", "strided"]:
        with sub(layout):
            check(device, fn, x, layouts=[layout])
    sub.finish()


def test_max_pool_ties_pick_the_first_maximum(device):
    """Windows of equal values: the index is the first (row-major) position, as PyTorch's, and
    the gradient reaches that one element."""
    x = RNG.integers(0, 2, (2, 2, 6, 6)).astype(np.float64)
    for kwargs in [{"kernel_size": 2}, {"kernel_size": 3, "stride": 1, "padding": 1}, {"kernel_size": 2, "dilation": 2}]:
        check(device, lambda m, x: F(m).max_pool2d(x, return_indices=True, **kwargs), x)
        lx = loom.tensor(x, device=device).requires_grad_()
        tx = torch.from_numpy(x).requires_grad_()
        F(loom).max_pool2d(lx, **kwargs).sum().backward()
        F(torch).max_pool2d(tx, **kwargs).sum().backward()
        np.testing.assert_array_equal(lx.grad.numpy(), tx.grad.numpy())
    check(device, lambda m, x: F(m).adaptive_max_pool2d(x, (4, 3), True), x)


def test_max_pool_propagates_nan(device):
    x = R(1, 2, 6, 6)
    x[0, 0, 1, 2] = np.nan
    x[0, 1, 4, 4] = np.nan
    check(device, lambda m, x: F(m).max_pool2d(x, 2, return_indices=True), x)
    check(device, lambda m, x: F(m).max_pool2d(x, 3, 1, 1), x)
    check(device, lambda m, x: F(m).adaptive_max_pool2d(x, (4, 5), True), x)


def test_integer_avg_pool_matches_torch(device):
    # PyTorch averages integers with an integer division (truncating).
    x = RNG.integers(-50, 50, (2, 3, 6, 7)).astype(np.int64)
    check(device, lambda m, x: F(m).avg_pool2d(x, 3, 2, 1), x)
    check(device, lambda m, x: F(m).avg_pool2d(x, 2, count_include_pad=False), x)


def test_max_unpool_inverts_max_pool(device):
    for k, shape in [(1, (2, 3, 8)), (2, (2, 3, 6, 8)), (3, (1, 2, 4, 4, 6))]:
        x = R(*shape)
        pool, unpool = getattr(F(loom), f"max_pool{k}d"), getattr(F(loom), f"max_unpool{k}d")
        tpool, tunpool = getattr(F(torch), f"max_pool{k}d"), getattr(F(torch), f"max_unpool{k}d")
        v, i = pool(loom.tensor(x, device=device), 2, return_indices=True)
        tv, ti = tpool(torch.from_numpy(x), 2, return_indices=True)
        np.testing.assert_array_equal(i.numpy(), ti.numpy())
        got, want = unpool(v, i, 2), tunpool(tv, ti, 2)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        size = [s + 1 for s in shape[2:]]
        got, want = unpool(v, i, 2, output_size=size), tunpool(tv, ti, 2, output_size=size)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    # unbatched, stride and padding
    x = R(3, 7, 7)
    v, i = F(loom).max_pool2d(loom.tensor(x, device=device), 3, 2, 1, return_indices=True)
    tv, ti = F(torch).max_pool2d(torch.from_numpy(x), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(F(loom).max_unpool2d(v, i, 3, 2, 1).numpy(),
                                  F(torch).max_unpool2d(tv, ti, 3, 2, 1).numpy())


ERRORS = [
    ("max2d_dims", lambda m: F(m).max_pool2d(m.ones(8, 8), 2)),
    ("max2d_empty", lambda m: F(m).max_pool2d(m.ones(2, 0, 8, 8), 2)),
    ("max2d_padding", lambda m: F(m).max_pool2d(m.ones(1, 2, 8, 8), 3, padding=2)),
    ("max2d_negative_padding", lambda m: F(m).max_pool2d(m.ones(1, 2, 8, 8), 2, padding=-1)),
    ("max2d_too_small", lambda m: F(m).max_pool2d(m.ones(1, 2, 3, 3), 4)),
    ("max2d_stride_zero", lambda m: F(m).max_pool2d(m.ones(1, 2, 8, 8), 2, 0)),
    ("max2d_kernel_zero", lambda m: F(m).max_pool2d(m.ones(1, 2, 8, 8), 0)),
    ("max2d_dilation_zero", lambda m: F(m).max_pool2d(m.ones(1, 2, 8, 8), 2, dilation=0)),
    ("max2d_kernel_tuple", lambda m: F(m).max_pool2d(m.ones(1, 2, 8, 8), (2, 2, 2))),
    ("max2d_long", lambda m: F(m).max_pool2d(m.ones(1, 2, 8, 8, dtype=m.int64), 2)),
    ("max1d_dims", lambda m: F(m).max_pool1d(m.ones(8), 2)),
    ("max1d_kernel_zero", lambda m: F(m).max_pool1d(m.ones(2, 8), 0)),
    ("max1d_padding", lambda m: F(m).max_pool1d(m.ones(2, 8), 3, 1, 2)),
    ("max1d_long", lambda m: F(m).max_pool1d(m.ones(2, 8, dtype=m.int64), 2)),
    ("max3d_too_small", lambda m: F(m).max_pool3d(m.ones(1, 2, 3, 3, 3), 4)),
    ("max3d_dilation", lambda m: F(m).max_pool3d(m.ones(1, 2, 3, 3, 3), 2, dilation=0)),
    ("avg2d_divisor", lambda m: F(m).avg_pool2d(m.ones(1, 2, 8, 8), 2, divisor_override=0)),
    ("avg2d_padding", lambda m: F(m).avg_pool2d(m.ones(1, 2, 8, 8), 3, padding=2)),
    ("avg2d_too_small", lambda m: F(m).avg_pool2d(m.ones(1, 2, 3, 3), 4)),
    ("avg2d_stride_zero", lambda m: F(m).avg_pool2d(m.ones(1, 2, 8, 8), 2, 0)),
    ("avg1d_padding", lambda m: F(m).avg_pool1d(m.ones(1, 2, 8), 3, 1, 2)),
    ("avg1d_dims", lambda m: F(m).avg_pool1d(m.ones(8), 2)),
    ("adaptive_avg2d_dims", lambda m: F(m).adaptive_avg_pool2d(m.ones(8, 8), 2)),
    ("adaptive_avg2d_negative", lambda m: F(m).adaptive_avg_pool2d(m.ones(1, 2, 8, 8), (2, -1))),
    ("adaptive_avg2d_empty", lambda m: F(m).adaptive_avg_pool2d(m.ones(1, 2, 0, 8), 2)),
    ("adaptive_avg2d_long", lambda m: F(m).adaptive_avg_pool2d(m.ones(1, 2, 8, 8, dtype=m.int64), 2)),
    ("adaptive_avg1d_dims", lambda m: F(m).adaptive_avg_pool1d(m.ones(8), 2)),
    ("adaptive_max2d_dims", lambda m: F(m).adaptive_max_pool2d(m.ones(8, 8), 2)),
    ("adaptive_max2d_long", lambda m: F(m).adaptive_max_pool2d(m.ones(1, 2, 8, 8, dtype=m.int64), 2)),
    ("adaptive_max1d_dims", lambda m: F(m).adaptive_max_pool1d(m.ones(8), 2)),
    ("unpool_index_dtype", lambda m: F(m).max_unpool2d(m.ones(1, 2, 2, 2), m.zeros(1, 2, 2, 2, dtype=m.int32), 2)),
    ("unpool_index_shape", lambda m: F(m).max_unpool2d(m.ones(1, 2, 2, 2), m.zeros(1, 2, 2, 1, dtype=m.int64), 2)),
    ("unpool_output_size", lambda m: F(m).max_unpool2d(m.ones(1, 2, 2, 2), m.zeros(1, 2, 2, 2, dtype=m.int64), 2,
                                                        output_size=(9, 9))),
]


@pytest.mark.parametrize("name,call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, call):
    with pytest.raises(Exception) as t:
        call(torch)
    with pytest.raises(Exception) as lm:
        call(loom)
    assert_same_error(lm.value, t.value)


# ---- executors and structure ----

def pool_program(m, x, y):
    """Every kind of step pooling lowers to, forward and backward: a fused max over a view, the
    padded windows, indices, counts, adaptive averages (products) and maxima (gathered windows),
    unpooling."""
    x = x.requires_grad_()
    a = F(m).max_pool2d((x * 2).relu(), 3, 2, 1, ceil_mode=True)
    b, i = F(m).max_pool2d(x, 2, return_indices=True)
    c = F(m).avg_pool2d(x, 3, 2, 1, count_include_pad=False)
    d = F(m).adaptive_avg_pool2d(x, (3, 5)) + F(m).adaptive_max_pool2d(x, (3, 5))
    e = F(m).max_unpool2d(b, i, 2, output_size=x.shape[2:])
    loss = a.sum() + (b * c[..., :4, :4]).sum() + d.square().sum() + (e * y).sum()
    (gx,) = m.autograd.grad(loss, (x,))
    return [a, b, i, c, d, e, gx]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_equals_unfused_equals_eager(dtype):
    x, y = R(2, 3, 8, 9, dtype=dtype), R(2, 3, 8, 9, dtype=dtype)
    eager = [o.detach().numpy() for o in pool_program(loom, loom.tensor(x), loom.tensor(y))]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    try:
        for executor in ["fused", "unfused", "interpreter", "cuda-emulated"]:
            loom._C._set_executor(executor)
            outs = pool_program(loom, loom.tensor(x, device="lazy"), loom.tensor(y, device="lazy"))
            for k, (got, want) in enumerate(zip(outs, eager)):
                np.testing.assert_allclose(got.detach().numpy(), want, rtol=tol, atol=tol, err_msg=f"{executor} {k}")
    finally:
        loom._C._set_executor("compiled")
    for got, want in zip(eager, pool_program(torch, torch.from_numpy(x), torch.from_numpy(y))):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=tol, atol=tol)


def _launches(fn, x):
    fn(x).tolist()  # compile and cache
    loom.metrics_reset()
    fn(x).tolist()
    return loom.metrics()["kernel_launches"]


@pytest.mark.parametrize("name,fn", [
    ("max", lambda x: F(loom).max_pool2d((x * 2 - 1).relu(), 2)),
    ("avg", lambda x: F(loom).avg_pool2d(x.exp(), 3, 2)),
    ("max3d", lambda x: F(loom).max_pool3d(x.unsqueeze(0), 2, 1)),
    ("adaptive_tiles", lambda x: F(loom).adaptive_avg_pool2d(x, (4, 2))),
])
def test_pool_without_padding_is_one_fused_row_kernel(name, fn):
    """The windows are a view of the input: no copy, and the elementwise ops that feed the pool
    run inside its reduction kernel."""
    x = loom.tensor(R(4, 3, 8, 8), device="lazy")
    assert _launches(fn, x) == 1


# ---- modules ----

MODULES = [
    ("MaxPool1d", lambda m: m.nn.MaxPool1d(3, 2, 1, return_indices=True), (2, 3, 9)),
    ("MaxPool2d", lambda m: m.nn.MaxPool2d(2), (2, 3, 8, 8)),
    ("MaxPool2d_all", lambda m: m.nn.MaxPool2d((3, 2), (2, 1), 1, dilation=(1, 2), ceil_mode=True), (2, 3, 8, 8)),
    ("MaxPool3d", lambda m: m.nn.MaxPool3d(2, return_indices=True), (1, 2, 4, 4, 6)),
    ("AvgPool1d", lambda m: m.nn.AvgPool1d(3, 2, 1, count_include_pad=False), (2, 3, 9)),
    ("AvgPool2d", lambda m: m.nn.AvgPool2d(2), (2, 3, 8, 8)),
    ("AvgPool2d_divisor", lambda m: m.nn.AvgPool2d(3, 2, 1, ceil_mode=True, divisor_override=5), (2, 3, 8, 8)),
    ("AvgPool3d", lambda m: m.nn.AvgPool3d(2, 1), (1, 2, 4, 4, 6)),
    ("AdaptiveAvgPool1d", lambda m: m.nn.AdaptiveAvgPool1d(4), (2, 3, 9)),
    ("AdaptiveAvgPool2d", lambda m: m.nn.AdaptiveAvgPool2d((5, None)), (2, 3, 8, 7)),
    ("AdaptiveAvgPool3d", lambda m: m.nn.AdaptiveAvgPool3d(2), (1, 2, 4, 5, 6)),
    ("AdaptiveMaxPool1d", lambda m: m.nn.AdaptiveMaxPool1d(4, return_indices=True), (2, 3, 9)),
    ("AdaptiveMaxPool2d", lambda m: m.nn.AdaptiveMaxPool2d(3), (2, 3, 8, 7)),
    ("AdaptiveMaxPool3d", lambda m: m.nn.AdaptiveMaxPool3d((2, 3, 2), return_indices=True), (1, 2, 4, 5, 6)),
    ("LPPool1d", lambda m: m.nn.LPPool1d(2, 3), (2, 3, 9)),
    ("LPPool2d", lambda m: m.nn.LPPool2d(2, 3, stride=2), (2, 3, 8, 8)),
]


@pytest.mark.parametrize("name,make,shape", MODULES, ids=[m[0] for m in MODULES])
def test_module_matches_torch(device, name, make, shape):
    lm, tm = make(loom), make(torch)
    assert repr(lm) == repr(tm)
    x = np.abs(R(*shape)) + 0.1
    check(device, lambda m, x: (lm if m is loom else tm)(x), x)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_max_unpool_module(device, k):
    shape = (2, 3) + (4, 6, 4)[:k]
    pool = (loom.nn.MaxPool1d, loom.nn.MaxPool2d, loom.nn.MaxPool3d)[k - 1](2, return_indices=True)
    unpool = (loom.nn.MaxUnpool1d, loom.nn.MaxUnpool2d, loom.nn.MaxUnpool3d)[k - 1](2)
    tunpool = (torch.nn.MaxUnpool1d, torch.nn.MaxUnpool2d, torch.nn.MaxUnpool3d)[k - 1](2)
    assert repr(unpool) == repr(tunpool)
    x = R(*shape)
    v, i = pool(loom.tensor(x, device=device))
    out = unpool(v, i)
    want = tunpool(*(torch.nn.MaxPool1d, torch.nn.MaxPool2d, torch.nn.MaxPool3d)[k - 1](2, return_indices=True)(
        torch.from_numpy(x)))
    np.testing.assert_array_equal(out.numpy(), want.numpy())


def test_import_paths():
    from loom.nn.modules.pooling import AdaptiveAvgPool2d, MaxPool2d  # noqa: F401
    assert loom.nn.MaxPool2d is MaxPool2d
    assert loom.max_pool2d is not None and loom.avg_pool1d is not None and loom.adaptive_avg_pool1d is not None
