"""Convolutions against PyTorch: F.conv1d-3d, conv_transpose1d-3d, unfold / fold (im2col /
col2im) and their modules.

Values, dtypes and shapes on both devices (lazy results also equal eager ones, see
_ops_helpers.check), PyTorch's errors, the lazy program fused = unfused = interpreter = the CUDA
lowering's host emulation = eager, and what a convolution costs in lazy mode (no absurd
intermediate, nothing compiled after warm-up). Gradients (float64, against PyTorch and finite
differences) are cases of test_autograd_ops.py.
"""

import math
import warnings

import numpy as np
import pytest

import loom
from _ops_helpers import SubChecks, assert_same_error, check, device, release_pending, torch  # noqa: F401

RNG = np.random.default_rng(7)


def R(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def F(m):
    return m.nn.functional


# (name, fn(m, x, w, *rest), input shapes): every combination of the parameters that changes the
# program (stride, padding number or string, dilation, groups incl. depthwise, bias, unbatched).
CONV_CASES = [
    ("conv1d", lambda m, x, w, b: F(m).conv1d(x, w, b), [(2, 3, 9), (4, 3, 3), (4,)]),
    ("conv1d_stride_pad_dil", lambda m, x, w: F(m).conv1d(x, w, stride=2, padding=3, dilation=2),
     [(2, 3, 11), (4, 3, 3)]),
    ("conv1d_unbatched", lambda m, x, w: F(m).conv1d(x, w, padding="same"), [(3, 8), (5, 3, 4)]),
    ("conv1d_valid", lambda m, x, w: F(m).conv1d(x, w, padding="valid"), [(2, 3, 8), (5, 3, 4)]),
    ("conv2d", lambda m, x, w, b: F(m).conv2d(x, w, b, padding=1), [(2, 3, 7, 6), (4, 3, 3, 3), (4,)]),
    ("conv2d_rect", lambda m, x, w: F(m).conv2d(x, w, stride=(2, 1), padding=(0, 2), dilation=(2, 1)),
     [(2, 3, 9, 8), (5, 3, 3, 2)]),
    ("conv2d_same_even_kernel", lambda m, x, w: F(m).conv2d(x, w, padding="same", dilation=(1, 2)),
     [(1, 2, 6, 7), (3, 2, 4, 2)]),
    ("conv2d_groups", lambda m, x, w, b: F(m).conv2d(x, w, b, groups=3, stride=2), [(2, 6, 7, 7), (9, 2, 3, 3), (9,)]),
    ("conv2d_depthwise", lambda m, x, w: F(m).conv2d(x, w, groups=4, padding=1), [(2, 4, 6, 5), (4, 1, 3, 3)]),
    ("conv2d_depthwise_multiplier", lambda m, x, w: F(m).conv2d(x, w, groups=3), [(2, 3, 6, 5), (6, 1, 2, 3)]),
    ("conv2d_1x1", lambda m, x, w: F(m).conv2d(x, w), [(2, 5, 4, 3), (7, 5, 1, 1)]),
    ("conv2d_unbatched", lambda m, x, w, b: F(m).conv2d(x, w, b, padding=2), [(3, 5, 5), (2, 3, 3, 3), (2,)]),
    ("conv2d_empty_batch", lambda m, x, w: F(m).conv2d(x, w), [(0, 3, 5, 5), (2, 3, 3, 3)]),
    ("conv3d", lambda m, x, w, b: F(m).conv3d(x, w, b, stride=(1, 2, 1), padding=1), [(2, 2, 4, 5, 4),
                                                                                     (3, 2, 3, 3, 2), (3,)]),
    ("conv3d_groups_same", lambda m, x, w: F(m).conv3d(x, w, padding="same", groups=2),
     [(1, 4, 3, 4, 5), (2, 2, 2, 3, 2)]),
    ("conv_transpose1d", lambda m, x, w, b: F(m).conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2),
     [(2, 3, 5), (3, 4, 3), (4,)]),
    ("conv_transpose1d_unbatched", lambda m, x, w: F(m).conv_transpose1d(x, w, dilation=2), [(3, 5), (3, 2, 3)]),
    ("conv_transpose2d", lambda m, x, w, b: F(m).conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
     [(2, 3, 4, 5), (3, 4, 3, 3), (4,)]),
    ("conv_transpose2d_groups_dil", lambda m, x, w: F(m).conv_transpose2d(x, w, stride=(1, 2), groups=2,
                                                                          dilation=(2, 1)),
     [(2, 4, 3, 4), (4, 3, 2, 3)]),
    ("conv_transpose2d_dilation_output_padding", lambda m, x, w: F(m).conv_transpose2d(x, w, output_padding=1,
                                                                                       dilation=2),
     [(1, 2, 3, 3), (2, 2, 3, 3)]),
    ("conv_transpose3d", lambda m, x, w: F(m).conv_transpose3d(x, w, stride=2, padding=(0, 1, 0)),
     [(1, 2, 2, 3, 2), (2, 3, 2, 3, 2)]),
    ("unfold", lambda m, x: F(m).unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), [(2, 3, 6, 7)]),
    ("unfold_unbatched", lambda m, x: F(m).unfold(x, 2), [(3, 4, 5)]),
    ("fold", lambda m, x: F(m).fold(x, (5, 6), 2, padding=1, stride=2), [(2, 12, 12)]),
    ("fold_dilated", lambda m, x: F(m).fold(x, (4, 5), (2, 2), dilation=(2, 1)), [(1, 8, 8)]),
    ("fold_unbatched", lambda m, x: F(m).fold(x, 4, 3), [(18, 4)]),
]


@pytest.mark.parametrize("name,fn,shapes", CONV_CASES, ids=[c[0] for c in CONV_CASES])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_matches_torch(device, name, fn, shapes, dtype):
    inputs = [R(*s, dtype=dtype) for s in shapes]
    sub = SubChecks()
    # the input as given, transposed and strided (the product reads views in place)
    for layout in ["contiguous", "transposed", "strided"]:
        with sub(layout):
            check(device, fn, *inputs, layouts=[layout] + ["contiguous"] * (len(inputs) - 1), rtol=1e-4, atol=1e-5)
    sub.finish()


def test_integer_convolution_matches_torch(device):
    # PyTorch convolves int64 on the CPU (no rounding: exact).
    x = RNG.integers(-4, 5, (2, 3, 6, 6)).astype(np.int64)
    w = RNG.integers(-3, 4, (4, 3, 3, 3)).astype(np.int64)
    wt = RNG.integers(-3, 4, (3, 2, 2, 3)).astype(np.int64)
    check(device, lambda m, x, w: F(m).conv2d(x, w, padding=1, stride=2), x, w)
    check(device, lambda m, x, w: F(m).conv_transpose2d(x, w, stride=2), x, wt)


def test_torch_names_are_the_same_function():
    assert loom.conv2d is loom.nn.functional.conv2d
    assert loom.conv_transpose1d is loom.nn.functional.conv_transpose1d


# ---- errors: PyTorch's checks, in its order ----

ERRORS = [
    ("channels", lambda m: F(m).conv2d(m.ones(2, 3, 8, 8), m.ones(4, 2, 3, 3))),
    ("groups_channels", lambda m: F(m).conv2d(m.ones(2, 3, 8, 8), m.ones(4, 3, 3, 3), groups=2)),
    ("groups_weight", lambda m: F(m).conv2d(m.ones(2, 6, 8, 8), m.ones(3, 3, 3, 3), groups=2)),
    ("input_dims", lambda m: F(m).conv2d(m.ones(8, 8), m.ones(4, 3, 3, 3))),
    ("weight_dims", lambda m: F(m).conv2d(m.ones(2, 3, 8, 8), m.ones(4, 3, 3))),
    ("kernel_too_big", lambda m: F(m).conv2d(m.ones(2, 3, 4, 4), m.ones(4, 3, 5, 5))),
    ("dilated_kernel_too_big", lambda m: F(m).conv1d(m.ones(2, 3, 6), m.ones(4, 3, 3), dilation=3)),
    ("stride_zero", lambda m: F(m).conv2d(m.ones(2, 3, 8, 8), m.ones(4, 3, 3, 3), stride=0)),
    ("padding_negative", lambda m: F(m).conv2d(m.ones(2, 3, 8, 8), m.ones(4, 3, 3, 3), padding=-1)),
    ("dilation_zero", lambda m: F(m).conv2d(m.ones(2, 3, 8, 8), m.ones(4, 3, 3, 3), dilation=0)),
    ("groups_zero", lambda m: F(m).conv2d(m.ones(2, 3, 8, 8), m.ones(4, 3, 3, 3), groups=0)),
    ("stride_length", lambda m: F(m).conv2d(m.ones(2, 3, 8, 8), m.ones(4, 3, 3, 3), stride=(1, 1, 1))),
    ("bias_size", lambda m: F(m).conv2d(m.ones(2, 3, 8, 8), m.ones(4, 3, 3, 3), m.ones(3))),
    ("bias_dtype", lambda m: F(m).conv2d(m.ones(2, 3, 8, 8), m.ones(4, 3, 3, 3), m.ones(4, dtype=m.float64))),
    ("weight_dtype", lambda m: F(m).conv2d(m.ones(2, 3, 8, 8), m.ones(4, 3, 3, 3, dtype=m.float64))),
    ("bool", lambda m: F(m).conv2d(m.ones(2, 3, 8, 8, dtype=m.bool), m.ones(4, 3, 3, 3, dtype=m.bool))),
    ("same_strided", lambda m: F(m).conv2d(m.ones(2, 3, 8, 8), m.ones(4, 3, 3, 3), padding="same", stride=2)),
    ("padding_string", lambda m: F(m).conv2d(m.ones(2, 3, 8, 8), m.ones(4, 3, 3, 3), padding="full")),
    ("transposed_channels", lambda m: F(m).conv_transpose2d(m.ones(2, 3, 8, 8), m.ones(2, 4, 3, 3))),
    ("transposed_output_padding", lambda m: F(m).conv_transpose2d(m.ones(2, 3, 4, 4), m.ones(3, 4, 3, 3),
                                                                  output_padding=1)),
    ("transposed_output_padding_3d", lambda m: F(m).conv_transpose3d(m.ones(1, 3, 2, 2, 2), m.ones(3, 4, 3, 3, 3),
                                                                     stride=2, output_padding=2)),
    ("transposed_too_small", lambda m: F(m).conv_transpose2d(m.ones(2, 3, 2, 2), m.ones(3, 4, 3, 3), padding=3)),
    ("transposed_bias", lambda m: F(m).conv_transpose2d(m.ones(2, 3, 4, 4), m.ones(3, 4, 3, 3), m.ones(3))),
    ("unfold_blocks", lambda m: F(m).unfold(m.ones(2, 3, 4, 4), 5)),
    ("unfold_padding", lambda m: F(m).unfold(m.ones(2, 3, 4, 4), 2, padding=-1)),
    ("unfold_kernel", lambda m: F(m).unfold(m.ones(2, 3, 4, 4), 0)),
    ("unfold_stride", lambda m: F(m).unfold(m.ones(2, 3, 4, 4), 2, stride=0)),
    ("fold_blocks", lambda m: F(m).fold(m.ones(2, 12, 5), (4, 4), 2)),
    ("fold_channels", lambda m: F(m).fold(m.ones(2, 10, 9), (4, 4), 2)),
    ("fold_dims", lambda m: F(m).fold(m.ones(2, 3, 12, 9), (4, 4), 2)),
    ("unfold_long", lambda m: F(m).unfold(m.ones(2, 3, 4, 4, dtype=m.int64), 2)),
    ("unfold_bool_blocks", lambda m: F(m).unfold(m.ones(2, 3, 4, 4, dtype=m.bool), 5)),
    ("fold_int", lambda m: F(m).fold(m.ones(2, 12, 9, dtype=m.int32), (4, 4), 2)),
    ("fold_long_blocks", lambda m: F(m).fold(m.ones(2, 12, 5, dtype=m.int64), (4, 4), 2)),
]


@pytest.mark.parametrize("name,call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, call):
    with pytest.raises(Exception) as t:
        call(torch)
    with pytest.raises(Exception) as lm:
        call(loom)
    assert_same_error(lm.value, t.value)


# ---- executors: fused = unfused = interpreter = CUDA lowering (emulated) = eager ----

def conv_program(m, x, w1, b1, w2, wt):
    """A forward and backward through every kind of step a convolution lowers to: the padded
    input, the column gather, the products, depthwise windows summed in a row kernel, col2im
    (the input gradient and the transposed convolution), a crop."""
    x, w1, w2, wt = (t.requires_grad_() for t in (x, w1, w2, wt))
    h = F(m).conv2d(x, w1, b1, padding=1, stride=(1, 2)).relu()
    h = F(m).conv2d(h, w2, padding=1, groups=4)
    y = F(m).conv_transpose2d(h, wt, stride=2, padding=1, output_padding=1)
    loss = (y * y).mean() + F(m).unfold(y, 2, stride=2).sum()
    gx, gw1, gw2, gwt = m.autograd.grad(loss, (x, w1, w2, wt))
    return [y, gx, gw1, gw2, gwt]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_equals_unfused_equals_eager(dtype):
    inputs = [R(2, 3, 6, 8, dtype=dtype), R(4, 3, 3, 3, dtype=dtype), R(4, dtype=dtype), R(4, 1, 3, 3, dtype=dtype),
              R(4, 2, 3, 3, dtype=dtype)]
    eager = [o.detach().numpy() for o in conv_program(loom, *(loom.tensor(a) for a in inputs))]
    tol = 1e-4 if dtype == np.float32 else 1e-11
    try:
        for executor in ["fused", "unfused", "interpreter", "cuda-emulated"]:
            loom._C._set_executor(executor)
            outs = conv_program(loom, *(loom.tensor(a, device="lazy") for a in inputs))
            for k, (got, want) in enumerate(zip(outs, eager)):
                np.testing.assert_allclose(got.detach().numpy(), want, rtol=tol, atol=tol, err_msg=f"{executor} {k}")
    finally:
        loom._C._set_executor("compiled")
    t_outs = conv_program(torch, *(torch.from_numpy(a.copy()) for a in inputs))
    for got, want in zip(eager, t_outs):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=tol, atol=tol)


def col2im_sums(m, x1, x3, cols):
    """Every path to the Col2Im step: 1-d and 3-d pooling gradients (windows summed over one and
    three dims, overlapping, dilated, with a remainder the windows never reach) and F.fold."""
    x1, x3 = x1.requires_grad_(), x3.requires_grad_()
    y1 = F(m).max_pool1d(x1, 3, stride=2, dilation=2)
    y3 = F(m).avg_pool3d(x3, (2, 3, 2), stride=(1, 2, 1))
    g1, g3 = m.autograd.grad((y1 * y1).sum() + (y3 * y3).sum(), (x1, x3))
    return [g1, g3, F(m).fold(cols, (5, 6), (2, 3), stride=(1, 2), dilation=(2, 1))]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_col2im_cuda_kernel_sums_as_the_cpu(dtype):
    """The CUDA kernel of Col2Im (run by the host emulation) adds each output's window elements
    in the CPU kernel's order and precision: the same bits, not only close values, as the same
    lazy program on the CPU executor (same fused kernels around it)."""
    inputs = [R(2, 3, 13, dtype=dtype), R(1, 2, 4, 7, 5, dtype=dtype), R(2, 18, 6, dtype=dtype)]
    results = {}
    try:
        for executor in ["compiled", "cuda-emulated"]:
            loom._C._set_executor(executor)
            outs = col2im_sums(loom, *(loom.tensor(a, device="lazy") for a in inputs))
            results[executor] = [o.detach().numpy() for o in outs]
    finally:
        loom._C._set_executor("compiled")
    for k, (got, want) in enumerate(zip(results["cuda-emulated"], results["compiled"])):
        np.testing.assert_array_equal(got, want, err_msg=str(k))
    eager = [o.detach().numpy() for o in col2im_sums(loom, *(loom.tensor(a) for a in inputs))]
    # PyTorch 1.13 pools no float16 on the CPU (its CUDA kernels do, as loom): compare in float32
    t_outs = col2im_sums(torch, *(torch.from_numpy(a.astype(np.float32 if dtype == np.float16 else dtype))
                                  for a in inputs))
    tol = 1e-2 if dtype == np.float16 else 1e-5
    for got, lazy, want in zip(eager, results["compiled"], t_outs):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(lazy, got, rtol=tol, atol=tol)


def test_lazy_convolution_stores_no_more_than_its_columns():
    """A 3x3 convolution of a 32x32 batch, forward and backward, lazily: the largest values a
    step stores are the column matrix (N * L * C * 9 elements, the im2col of PyTorch's CPU
    kernels) and what its product and gradient need, not one matrix per window position or a
    dense matrix of the convolution. Bounded by the memory plan's arena."""
    n, c, o, size = 8, 4, 8, 32
    x = loom.tensor(R(n, c, size, size), device="lazy").requires_grad_()
    w = loom.tensor(R(o, c, 3, 3), device="lazy").requires_grad_()
    columns_bytes = n * size * size * c * 9 * 4
    for step in range(2):
        loss = F(loom).conv2d(x, w, padding=1).square().mean()
        loss.backward()
        loom.metrics_reset()
        loss.item()
        x.grad, w.grad = None, None
    metrics = loom.metrics()
    assert 0 < metrics["arena_bytes"] <= 6 * columns_bytes, (metrics["arena_bytes"], columns_bytes)
    assert metrics["kernels_compiled"] == 0


def test_convolution_training_step_compiles_nothing_after_warm_up():
    x = loom.tensor(R(4, 3, 10, 10), device="lazy")
    conv = loom.nn.Conv2d(3, 5, 3, padding=1).to("lazy")
    opt = loom.optim.SGD(conv.parameters(), lr=0.1)
    for step in range(4):
        if step == 2:
            before = loom.metrics()
        opt.zero_grad()
        loss = F(loom).max_pool2d(conv(x).relu(), 2).mean()
        loss.backward()
        opt.step()
        loss.item()
    after = loom.metrics()
    assert after["kernels_compiled"] == before["kernels_compiled"]
    assert after["graph_cache_misses"] == before["graph_cache_misses"]


# ---- modules ----

MODULES = [
    ("Conv1d", lambda m: m.nn.Conv1d(2, 4, 3, stride=2, padding=1, bias=False, padding_mode="reflect"), (3, 2, 9)),
    ("Conv2d", lambda m: m.nn.Conv2d(3, 6, 5), (2, 3, 9, 9)),
    ("Conv2d_same_circular", lambda m: m.nn.Conv2d(2, 4, (3, 4), padding="same", padding_mode="circular"),
     (2, 2, 6, 7)),
    ("Conv2d_replicate_groups", lambda m: m.nn.Conv2d(4, 4, 3, padding=(1, 2), groups=2, padding_mode="replicate",
                                                      dilation=(1, 2)), (1, 4, 6, 6)),
    ("Conv3d", lambda m: m.nn.Conv3d(2, 4, 3, groups=2, dilation=2, padding=2), (1, 2, 5, 5, 5)),
    ("ConvTranspose1d", lambda m: m.nn.ConvTranspose1d(3, 2, 4, stride=2), (2, 3, 5)),
    ("ConvTranspose2d", lambda m: m.nn.ConvTranspose2d(3, 4, 3, stride=2, output_padding=1), (2, 3, 4, 4)),
    ("ConvTranspose3d", lambda m: m.nn.ConvTranspose3d(2, 2, 2, stride=2, bias=False), (1, 2, 2, 3, 2)),
    ("Unfold", lambda m: m.nn.Unfold(2, padding=1), (2, 3, 4, 5)),
    ("Fold", lambda m: m.nn.Fold((4, 5), 2), (2, 12, 12)),
]


def _copy_parameters(src, dst):
    for (name, p), (tname, tp) in zip(src.named_parameters(), dst.named_parameters()):
        assert name == tname
        with torch.no_grad():
            tp.copy_(torch.from_numpy(p.detach().numpy().copy()))


@pytest.mark.parametrize("name,make,shape", MODULES, ids=[m[0] for m in MODULES])
def test_module_matches_torch(device, name, make, shape):
    lm, tm = make(loom), make(torch)
    assert repr(lm) == repr(tm)
    assert list(lm.state_dict()) == list(tm.state_dict())
    for (ln, lp), (tn, tp) in zip(lm.named_parameters(), tm.named_parameters()):
        assert ln == tn and tuple(lp.shape) == tuple(tp.shape)
    _copy_parameters(lm, tm)
    lm = lm.to(device)
    x = R(*shape)
    lx, tx = loom.tensor(x, device=device).requires_grad_(), torch.from_numpy(x).requires_grad_()
    out, want = lm(lx), tm(tx)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5)
    g = R(*want.shape)
    out.backward(loom.tensor(g, device=device))
    want.backward(torch.from_numpy(g))
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    for (ln, lp), (_, tp) in zip(lm.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(lp.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=ln)


def test_conv_transpose_module_output_size(device):
    lm, tm = loom.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1), torch.nn.ConvTranspose2d(3, 2, 3, stride=2,
                                                                                            padding=1)
    _copy_parameters(lm, tm)
    lm = lm.to(device)
    x = R(1, 3, 4, 5)
    for size in [(8, 10), (7, 9), (1, 2, 8, 9)]:
        out = lm(loom.tensor(x, device=device), output_size=size)
        want = tm(torch.from_numpy(x), output_size=size)
        assert tuple(out.shape) == tuple(want.shape)
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="requested an output size"):
        lm(loom.tensor(x, device=device), output_size=(12, 12))


def test_conv_init_distribution():
    """kaiming_uniform_(a=sqrt(5)) gives uniform weights in +-1/sqrt(fan_in), bias the same."""
    loom.manual_seed(0)
    conv = loom.nn.Conv2d(8, 64, 3)
    bound = 1 / math.sqrt(8 * 9)
    w, b = conv.weight.detach().numpy(), conv.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    assert np.abs(b).max() <= bound
    t = loom.nn.ConvTranspose2d(8, 4, 3, groups=2)
    assert tuple(t.weight.shape) == (8, 2, 3, 3)
    assert np.abs(t.weight.detach().numpy()).max() <= 1 / math.sqrt(2 * 9)


@pytest.mark.parametrize("kwargs,error", [
    ({"groups": 0}, "groups must be a positive integer"),
    ({"groups": 2, "in_channels": 3}, "in_channels must be divisible by groups"),
    ({"groups": 2, "out_channels": 3}, "out_channels must be divisible by groups"),
    ({"padding": "full"}, "Invalid padding string"),
    ({"padding": "same", "stride": 2}, "padding='same' is not supported for strided convolutions"),
    ({"padding_mode": "mirror"}, "padding_mode must be one of"),
])
def test_module_argument_errors(kwargs, error):
    args = {"in_channels": 4, "out_channels": 4, "kernel_size": 3}
    args.update(kwargs)
    with pytest.raises(ValueError, match=error):
        torch.nn.Conv2d(**args)
    with pytest.raises(ValueError, match=error):
        loom.nn.Conv2d(**args)
    with pytest.raises(ValueError, match="Only \"zeros\" padding mode"):
        loom.nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")


def test_import_paths():
    from loom.nn.modules.conv import Conv2d, ConvTranspose2d  # noqa: F401
    from loom.nn.modules.fold import Fold, Unfold  # noqa: F401
    assert loom.nn.Conv2d is Conv2d
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loom.nn.functional.conv2d(loom.ones(1, 1, 3, 3), loom.ones(1, 1, 2, 2))
