"""Padding and resampling against PyTorch: F.pad in every mode, F.interpolate in every mode,
pixel_(un)shuffle, affine_grid, and their modules.

Values, dtypes and shapes on both devices (lazy results also equal eager ones), PyTorch's errors
and warnings, fused = unfused = interpreter = the CUDA lowering's host emulation = eager, and
that a lazy step resampling the same sizes again uploads and compiles nothing. Gradients
(float64, against PyTorch and finite differences) are cases of test_autograd_ops.py.
"""

import warnings

import numpy as np
import pytest

import loom
from _ops_helpers import SubChecks, assert_same_error, check, device, release_pending, torch  # noqa: F401

RNG = np.random.default_rng(5)


def R(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def F(m):
    return m.nn.functional


# ---- F.pad ----

PAD_CASES = [
    ((2, 5), (3, 1)), ((2, 3, 5), (2, 4)), ((2, 3, 5), (-1, 2)), ((2, 3, 5), (2, -2)), ((3, 4, 5), (1, 2, 3, 0)),
    ((2, 3, 4, 5), (1, 1, 2, 2)), ((2, 3, 4, 5), (0, 3, -1, 2)), ((1, 2, 3, 4, 5), (1, 2, 0, 1, 2, 1)),
    ((2, 3, 4, 5, 6), (1, 1, 1, 1, 1, 1)),
]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pads", PAD_CASES, ids=[f"{len(s)}d{p}" for s, p in PAD_CASES])
def test_pad_matches_torch(device, mode, shape, pads):
    """Every mode on every rank it accepts; PyTorch's error where it refuses (circular without a
    batch dim, a reflection as wide as the input)."""
    x = R(*shape)
    sub = SubChecks()
    for layout in ["contiguous", "transposed", "strided"]:
        with sub(layout):
            check(device, lambda m, x: F(m).pad(x, pads, mode), x, layouts=[layout])
    sub.finish()


def test_constant_pad_value_and_dtypes(device):
    check(device, lambda m, x: F(m).pad(x, (1, 2, 0, 1), value=-2.5), R(2, 3, 4))
    check(device, lambda m, x: F(m).pad(x, (1, 2), "constant", 7), RNG.integers(0, 9, (2, 3)).astype(np.int64))
    check(device, lambda m, x: F(m).pad(x, (2, 1), "circular"), RNG.integers(0, 9, (2, 3, 4)).astype(np.int32))
    check(device, lambda m, x: F(m).pad(x, (1, 1), "reflect", value=0.0), R(2, 3, 4))


PAD_ERRORS = [
    ("unknown_mode", lambda m: F(m).pad(m.ones(2, 3, 4), (1, 1), "mirror")),
    ("odd_length", lambda m: F(m).pad(m.ones(2, 3, 4), (1, 1, 1))),
    ("too_long", lambda m: F(m).pad(m.ones(2, 3), (1,) * 6)),
    ("reflect_value", lambda m: F(m).pad(m.ones(2, 3, 4), (1, 1), "reflect", value=2.0)),
    ("reflect_rank", lambda m: F(m).pad(m.ones(2, 3, 4, 5), (1, 1), "reflect")),
    ("reflect_1d", lambda m: F(m).pad(m.ones(5), (1, 1), "reflect")),
    ("reflect_too_wide", lambda m: F(m).pad(m.ones(1, 2, 4), (4, 0), "reflect")),
    ("reflect_long", lambda m: F(m).pad(m.ones(1, 2, 4, dtype=m.int64), (1, 1), "reflect")),
    ("replicate_empty", lambda m: F(m).pad(m.ones(2, 0, 4), (1, 1), "replicate")),
    ("replicate_long", lambda m: F(m).pad(m.ones(1, 2, 4, dtype=m.int64), (1, 1), "replicate")),
    ("circular_no_batch", lambda m: F(m).pad(m.ones(2, 5), (1, 1), "circular")),
    ("circular_twice", lambda m: F(m).pad(m.ones(1, 2, 4), (5, 0), "circular")),
]


@pytest.mark.parametrize("name,call", PAD_ERRORS, ids=[e[0] for e in PAD_ERRORS])
def test_pad_errors_match_torch(name, call):
    with pytest.raises(Exception) as t:
        call(torch)
    with pytest.raises(Exception) as lm:
        call(loom)
    assert_same_error(lm.value, t.value)


# ---- F.interpolate ----

INTERPOLATE_CASES = [
    ((2, 3, 5), {"size": 9}), ((2, 3, 9), {"size": 4}), ((2, 3, 5), {"scale_factor": 2}),
    ((2, 3, 5), {"scale_factor": 1.7}), ((2, 3, 4, 6), {"size": (5, 9)}), ((2, 3, 4, 6), {"size": (3, 3)}),
    ((2, 3, 4, 6), {"scale_factor": 2}), ((2, 3, 4, 6), {"scale_factor": (1.7, 0.6)}),
    ((2, 3, 4, 6), {"scale_factor": (1.7, 0.6), "recompute_scale_factor": True}),
    ((1, 2, 3, 4, 5), {"size": (4, 3, 7)}), ((1, 2, 3, 4, 5), {"scale_factor": 1.5}),
    ((2, 3, 1, 6), {"size": (1, 1)}), ((2, 3, 7, 6), {"scale_factor": 1.0}),
]
MODES = {1: ["nearest", "nearest-exact", "linear", "area"],
         2: ["nearest", "nearest-exact", "bilinear", "bicubic", "area"],
         3: ["nearest", "nearest-exact", "trilinear", "area"]}


@pytest.mark.parametrize("shape,kwargs", INTERPOLATE_CASES, ids=[f"{len(s) - 2}d-{k}" for s, k in INTERPOLATE_CASES])
def test_interpolate_matches_torch(device, shape, kwargs):
    x = R(*shape, dtype=np.float64)
    sub = SubChecks()
    for mode in MODES[len(shape) - 2]:
        corners = [None] if mode in ("nearest", "nearest-exact", "area") else [False, True]
        for align_corners in corners:
            for dtype in [np.float32, np.float64]:
                with sub(f"{mode} align_corners={align_corners} {np.dtype(dtype).name}"):
                    check(device, lambda m, x: F(m).interpolate(x, mode=mode, align_corners=align_corners, **kwargs),
                          x.astype(dtype), rtol=2e-5 if dtype == np.float32 else 1e-12, atol=1e-5 if dtype ==
                          np.float32 else 1e-12)
    sub.finish()


def test_interpolate_nearest_integers(device):
    """Nearest modes pick values: exact for any dtype, as PyTorch's (uint8 images)."""
    x = RNG.integers(0, 255, (2, 3, 5, 7)).astype(np.uint8)
    check(device, lambda m, x: F(m).interpolate(x, scale_factor=1.6), x)
    check(device, lambda m, x: F(m).interpolate(x, size=(3, 11), mode="nearest-exact"), x)


INTERPOLATE_ERRORS = [
    ("both", lambda m: F(m).interpolate(m.ones(1, 2, 4), size=3, scale_factor=2)),
    ("neither", lambda m: F(m).interpolate(m.ones(1, 2, 4))),
    ("size_dims", lambda m: F(m).interpolate(m.ones(1, 2, 4, 4), size=(3, 3, 3))),
    ("scale_dims", lambda m: F(m).interpolate(m.ones(1, 2, 4, 4), scale_factor=(2, 2, 2))),
    ("align_nearest", lambda m: F(m).interpolate(m.ones(1, 2, 4), size=3, align_corners=True)),
    ("recompute_size", lambda m: F(m).interpolate(m.ones(1, 2, 4), size=3, recompute_scale_factor=True)),
    ("bilinear_3d", lambda m: F(m).interpolate(m.ones(1, 2, 4), size=3, mode="bilinear")),
    ("linear_4d", lambda m: F(m).interpolate(m.ones(1, 2, 4, 4), size=3, mode="linear")),
    ("trilinear_4d", lambda m: F(m).interpolate(m.ones(1, 2, 4, 4), size=3, mode="trilinear")),
    ("rank_2", lambda m: F(m).interpolate(m.ones(2, 4), size=3)),
    ("unknown_mode", lambda m: F(m).interpolate(m.ones(1, 2, 4), size=3, mode="cubic")),
    ("zero_size", lambda m: F(m).interpolate(m.ones(1, 2, 4), size=0)),
    ("bilinear_uint8", lambda m: F(m).interpolate(m.ones(1, 2, 4, 4, dtype=m.uint8), size=3, mode="bilinear")),
]


@pytest.mark.parametrize("name,call", INTERPOLATE_ERRORS, ids=[e[0] for e in INTERPOLATE_ERRORS])
def test_interpolate_errors_match_torch(name, call):
    with pytest.raises(Exception) as t:
        call(torch)
    with pytest.raises(Exception) as lm:
        call(loom)
    assert_same_error(lm.value, t.value)


def test_upsample_aliases_warn_and_match(device):
    x = R(2, 3, 4, 5)
    for name, kwargs in [("upsample", {"scale_factor": 2, "mode": "bilinear"}), ("upsample_nearest", {"size": 7}),
                         ("upsample_bilinear", {"size": (5, 8)})]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check(device, lambda m, x: getattr(F(m), name)(x, **kwargs), x)
        assert any("deprecated" in str(w.message) for w in caught)


def test_resampling_again_uploads_and_compiles_nothing():
    x = loom.tensor(R(2, 3, 6, 7), device="lazy")
    for step in range(3):
        if step == 2:
            before = loom.metrics()
        y = F(loom).interpolate(x, scale_factor=1.5, mode="bicubic").sum() + F(loom).interpolate(x, size=(4, 4)).sum()
        y.item()
    after = loom.metrics()
    assert after["kernels_compiled"] == before["kernels_compiled"]
    assert after["graph_cache_hits"] == before["graph_cache_hits"] + 1


# ---- pixel shuffle, affine grid ----

def test_pixel_shuffle_matches_torch(device):
    check(device, lambda m, x: F(m).pixel_shuffle(x, 2), R(2, 8, 3, 4))
    check(device, lambda m, x: F(m).pixel_shuffle(x, 3), R(9, 2, 3))
    check(device, lambda m, x: F(m).pixel_shuffle(x, 2), R(2, 3, 4, 1, 3))
    check(device, lambda m, x: F(m).pixel_unshuffle(x, 2), R(2, 2, 4, 6))
    check(device, lambda m, x: F(m).pixel_unshuffle(x, 3), R(1, 6, 9))
    x = R(2, 8, 3, 4)
    round_trip = F(loom).pixel_unshuffle(F(loom).pixel_shuffle(loom.tensor(x, device=device), 2), 2)
    np.testing.assert_array_equal(round_trip.numpy(), x)


def test_channel_shuffle_matches_torch(device):
    check(device, lambda m, x: F(m).channel_shuffle(x, 2), R(2, 6, 3, 4))
    check(device, lambda m, x: m.channel_shuffle(x, 3), R(1, 6, 5))
    check(device, lambda m, x: m.channel_shuffle(x, 2), R(2, 4, 2, 1, 3))
    x = np.arange(24).reshape(1, 4, 6)
    check(device, lambda m, x: m.channel_shuffle(x, 4), x)  # integers: a permutation of the channels


def test_resampling_names_are_the_same_function():
    for name in ["pixel_shuffle", "pixel_unshuffle", "channel_shuffle"]:
        assert getattr(loom, name) is getattr(loom.nn.functional, name)


@pytest.mark.parametrize("name,call", [
    ("shuffle_rank", lambda m: m.channel_shuffle(m.ones(4, 6), 2)),
    ("shuffle_groups", lambda m: m.channel_shuffle(m.ones(1, 4, 3), 0)),
    ("shuffle_divisible", lambda m: m.channel_shuffle(m.ones(1, 4, 3), 3)),
    ("channels", lambda m: F(m).pixel_shuffle(m.ones(2, 3, 4, 4), 3)),
    ("rank", lambda m: F(m).pixel_shuffle(m.ones(4, 4), 2)),
    ("factor", lambda m: F(m).pixel_shuffle(m.ones(2, 8, 3, 3), 0)),
    ("height", lambda m: F(m).pixel_unshuffle(m.ones(2, 3, 8, 8), 3)),
    ("unshuffle_rank", lambda m: F(m).pixel_unshuffle(m.ones(4, 4), 2)),
])
def test_pixel_shuffle_errors_match_torch(name, call):
    with pytest.raises(Exception) as t:
        call(torch)
    with pytest.raises(Exception) as lm:
        call(loom)
    assert_same_error(lm.value, t.value)


def test_affine_grid_matches_torch(device):
    for align_corners in [False, True]:
        check(device, lambda m, t: F(m).affine_grid(t, (2, 3, 4, 5), align_corners=align_corners), R(2, 2, 3))
        check(device, lambda m, t: F(m).affine_grid(t, (1, 2, 3, 4, 2), align_corners=align_corners), R(1, 3, 4))
        check(device, lambda m, t: F(m).affine_grid(t, (1, 1, 1, 3), align_corners=align_corners),
              R(1, 2, 3, dtype=np.float64))
    for call in [lambda m: F(m).affine_grid(m.ones(2, 3, 3), (2, 3, 4, 5), False),
                 lambda m: F(m).affine_grid(m.ones(2, 2, 3), (2, 3, 4), False),
                 lambda m: F(m).affine_grid(m.ones(2, 2, 3), (2, 3, 0, 5), False)]:
        with pytest.raises(Exception) as t:
            call(torch)
        with pytest.raises(Exception) as lm:
            call(loom)
        assert type(lm.value) is type(t.value)


# ---- executors ----

def resample_program(m, x):
    x = x.requires_grad_()
    a = F(m).pad(x, (1, 2, 2, 1), "reflect") + 1
    b = F(m).pad(x, (2, 0, 1, 1), "replicate") * F(m).pad(x, (1, 1, 0, 2), "circular")
    c = F(m).interpolate(a, size=(5, 9), mode="bicubic") + F(m).interpolate(a, scale_factor=1.3, mode="bilinear")[
        ..., :5, :9]
    d = F(m).interpolate(b, scale_factor=(0.7, 1.6)) + F(m).interpolate(b, size=(4, 12), mode="area")
    e = F(m).pixel_unshuffle(F(m).pixel_shuffle(x, 1), 2)
    loss = c.square().sum() + d.sum() + e.exp().sum()
    (gx,) = m.autograd.grad(loss, (x,))
    return [a, b, c, d, e, gx]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_equals_unfused_equals_eager(dtype):
    x = R(2, 4, 4, 6, dtype=dtype)
    eager = [o.detach().numpy() for o in resample_program(loom, loom.tensor(x))]
    tol = 1e-4 if dtype == np.float32 else 1e-11
    try:
        for executor in ["fused", "unfused", "interpreter", "cuda-emulated"]:
            loom._C._set_executor(executor)
            outs = resample_program(loom, loom.tensor(x, device="lazy"))
            for k, (got, want) in enumerate(zip(outs, eager)):
                np.testing.assert_allclose(got.detach().numpy(), want, rtol=tol, atol=tol, err_msg=f"{executor} {k}")
    finally:
        loom._C._set_executor("compiled")
    for got, want in zip(eager, resample_program(torch, torch.from_numpy(x))):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=tol, atol=tol)


# ---- modules ----

MODULES = [
    ("ZeroPad2d", lambda m: m.nn.ZeroPad2d((1, 2, 0, 3)), (2, 3, 4, 5)),
    ("ConstantPad1d", lambda m: m.nn.ConstantPad1d(2, 3.5), (2, 3, 4)),
    ("ConstantPad2d", lambda m: m.nn.ConstantPad2d((1, 0, 2, 1), -1.0), (2, 3, 4, 5)),
    ("ConstantPad3d", lambda m: m.nn.ConstantPad3d(1, 0.5), (1, 2, 3, 4, 5)),
    ("ReflectionPad1d", lambda m: m.nn.ReflectionPad1d((1, 2)), (2, 3, 4)),
    ("ReflectionPad2d", lambda m: m.nn.ReflectionPad2d(1), (2, 3, 4, 5)),
    ("ReflectionPad3d", lambda m: m.nn.ReflectionPad3d((1, 0, 1, 2, 0, 1)), (1, 2, 3, 4, 5)),
    ("ReplicationPad1d", lambda m: m.nn.ReplicationPad1d(2), (2, 3, 4)),
    ("ReplicationPad2d", lambda m: m.nn.ReplicationPad2d((2, 0, 1, 1)), (2, 3, 4, 5)),
    ("ReplicationPad3d", lambda m: m.nn.ReplicationPad3d(1), (1, 2, 3, 4, 5)),
    ("Upsample", lambda m: m.nn.Upsample(scale_factor=2), (2, 3, 4, 5)),
    ("Upsample_bilinear", lambda m: m.nn.Upsample(size=(3, 7), mode="bilinear", align_corners=True), (2, 3, 4, 5)),
    ("Upsample_tuple", lambda m: m.nn.Upsample(scale_factor=(2, 1.5), mode="bicubic"), (2, 3, 4, 5)),
    ("UpsamplingNearest2d", lambda m: m.nn.UpsamplingNearest2d(scale_factor=3), (2, 3, 4, 5)),
    ("UpsamplingBilinear2d", lambda m: m.nn.UpsamplingBilinear2d(size=5), (2, 3, 4, 5)),
    ("PixelShuffle", lambda m: m.nn.PixelShuffle(2), (2, 8, 3, 4)),
    ("PixelUnshuffle", lambda m: m.nn.PixelUnshuffle(2), (2, 2, 4, 6)),
    ("ChannelShuffle", lambda m: m.nn.ChannelShuffle(3), (2, 6, 4)),
]


@pytest.mark.parametrize("name,make,shape", MODULES, ids=[m[0] for m in MODULES])
def test_module_matches_torch(device, name, make, shape):
    lm, tm = make(loom), make(torch)
    assert repr(lm) == repr(tm)
    check(device, lambda m, x: (lm if m is loom else tm)(x), R(*shape))


def test_circular_pad_modules(device):
    """Circular padding modules (PyTorch 2.1's CircularPad1d-3d) are F.pad's circular mode."""
    for k, cls in enumerate([loom.nn.CircularPad1d, loom.nn.CircularPad2d, loom.nn.CircularPad3d], 1):
        x = R(*(2, 3, 4, 5, 6)[:k + 2])
        pads = (1, 2) * k
        check(device, lambda m, x: cls(pads)(x) if m is loom else F(m).pad(x, pads, "circular"), x)
        assert repr(cls(1)) == f"{cls.__name__}({(1, 1) * k})"
