"""Normalization layers against torch.nn (float64, weights copied): BatchNorm1d/2d/3d (batch
statistics, running statistics moved in place over several training steps with momentum or the
cumulative average, eval mode, track_running_stats=False, num_batches_tracked), InstanceNorm,
GroupNorm, LayerNorm, LocalResponseNorm; RMSNorm and LayerNorm(bias=False) (newer than the
installed PyTorch) against their formulas. Outputs, input and parameter gradients, state dicts
and reprs, in eager and lazy mode."""

import numpy as np
import pytest

import loom
from _nn_helpers import assert_close, check_against_torch, copy_weights, np_, to_loom
from _ops_helpers import device, torch  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

F64 = torch.float64


def make(name, *args, **kwargs):
    return getattr(torch.nn, name)(*args, **kwargs).double(), getattr(loom.nn, name)(*args, **kwargs).double()


def randn(*shape, seed=0):
    return torch.tensor(np.random.default_rng(seed).standard_normal(shape))


def randomize_affine(tm):
    """Non-trivial weight and bias (the defaults are ones and zeros)."""
    with torch.no_grad():
        for p in tm.parameters():
            p.copy_(randn(*p.shape, seed=p.numel()) * 0.5 + 1)


BATCH_NORMS = [("BatchNorm1d", (4, 3)), ("BatchNorm1d", (4, 3, 5)), ("BatchNorm2d", (3, 3, 2, 4)),
               ("BatchNorm3d", (2, 3, 2, 2, 3))]


@pytest.mark.parametrize("name,shape", BATCH_NORMS)
@pytest.mark.parametrize("momentum", [0.1, 0.3, None])
def test_batch_norm_training_steps_match_pytorch(device, name, shape, momentum):
    """Three training steps (the running statistics move each step, in place, the cumulative
    average for momentum=None), then eval mode uses them."""
    tm, lm = make(name, 3, momentum=momentum)
    randomize_affine(tm)
    lm.to(device)
    buffers = [b.data_ptr() for b in lm.buffers()] if device == "cpu" else None
    check_against_torch(tm, lm, [randn(*shape)], device, train_steps=3)
    assert int(lm.num_batches_tracked.item()) == 3
    if buffers is not None:
        assert [b.data_ptr() for b in lm.buffers()] == buffers  # updated where they are
    tm.eval()
    lm.eval()
    x = randn(*shape, seed=1)
    assert_close(lm(to_loom(x, device)), tm(x))
    assert int(lm.num_batches_tracked.item()) == 3  # eval does not count


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_without_running_stats(device, affine):
    tm, lm = make("BatchNorm2d", 3, affine=affine, track_running_stats=False)
    lm.to(device)
    assert lm.running_mean is None and lm.num_batches_tracked is None
    assert list(lm.state_dict()) == list(tm.state_dict())
    x = randn(2, 3, 2, 2)
    check_against_torch(tm, lm, [x], device)
    tm.eval()
    lm.eval()  # still batch statistics: there are no running ones
    assert_close(lm(to_loom(x, device)), tm(x))


def test_batch_norm_state_dict_repr_and_errors():
    tm, lm = make("BatchNorm1d", 5, eps=1e-3, momentum=None, affine=False)
    assert repr(lm) == repr(tm)
    assert list(lm.state_dict()) == list(tm.state_dict()) == ["running_mean", "running_var", "num_batches_tracked"]
    assert lm.num_batches_tracked.dtype is loom.int64 and lm.num_batches_tracked.dim() == 0
    # a state dict without num_batches_tracked (PyTorch < 0.4.1) loads, the counter at 0
    sd = {k: v for k, v in lm.state_dict().items() if k != "num_batches_tracked"}
    assert tuple(lm.load_state_dict(sd)) == ([], [])
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        lm(loom.zeros(2, 5, 1, 1))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        make("BatchNorm1d", 5)[1](loom.zeros(1, 5))
    with pytest.raises(ValueError, match="expected 4D input"):
        make("BatchNorm2d", 5)[1](loom.zeros(2, 5))


def test_batch_norm_float32_and_half_buffers_follow_module_dtype():
    m = loom.nn.BatchNorm1d(3)
    m.half()
    assert m.weight.dtype is loom.float16 and m.running_mean.dtype is loom.float16
    assert m.num_batches_tracked.dtype is loom.int64  # integer buffers keep their dtype
    m.float()
    out = m(loom.randn(4, 3))
    assert out.dtype is loom.float32


@pytest.mark.parametrize("name,shape", [("InstanceNorm1d", (2, 3, 5)), ("InstanceNorm2d", (2, 3, 3, 2)),
                                        ("InstanceNorm3d", (2, 3, 2, 2, 2))])
@pytest.mark.parametrize("affine,track", [(False, False), (True, False), (True, True), (False, True)])
def test_instance_norm_matches_pytorch(device, name, shape, affine, track):
    tm, lm = make(name, 3, affine=affine, track_running_stats=track)
    if affine:
        randomize_affine(tm)
    lm.to(device)
    check_against_torch(tm, lm, [randn(*shape)], device, train_steps=2)
    tm.eval()
    lm.eval()
    x = randn(*shape, seed=3)
    assert_close(lm(to_loom(x, device)), tm(x))
    assert repr(lm) == repr(tm)


def test_instance_norm_unbatched_input(device):
    tm, lm = make("InstanceNorm1d", 3, affine=True)
    randomize_affine(tm)
    copy_weights(tm, lm)
    x = randn(3, 6)
    assert_close(lm.to(device)(to_loom(x, device)), tm(x))
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        lm(loom.zeros(1, 3, 2, 2, device=device))


@pytest.mark.parametrize("groups,channels,shape", [(2, 4, (3, 4, 5)), (1, 6, (2, 6)), (3, 3, (2, 3, 2, 2))])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_matches_pytorch(device, groups, channels, shape, affine):
    tm, lm = make("GroupNorm", groups, channels, affine=affine)
    if affine:
        randomize_affine(tm)
    check_against_torch(tm, lm.to(device), [randn(*shape)], device)
    assert repr(lm) == repr(tm)


def test_group_norm_errors():
    with pytest.raises(ValueError, match="num_channels must be divisible by num_groups"):
        loom.nn.GroupNorm(3, 4)
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        loom.nn.functional.group_norm(loom.zeros(2, 4, 3), 3)


@pytest.mark.parametrize("shape,normalized", [((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)), ((5, 6), 6)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_matches_pytorch(device, shape, normalized, affine):
    tm, lm = make("LayerNorm", normalized, elementwise_affine=affine, eps=1e-4)
    if affine:
        randomize_affine(tm)
    check_against_torch(tm, lm.to(device), [randn(*shape)], device)
    assert repr(lm) == repr(tm)


def test_layer_norm_without_bias(device):
    """LayerNorm(bias=False) (PyTorch >= 2.1): a weight only."""
    m = loom.nn.LayerNorm(4, bias=False).double().to(device)
    assert [n for n, _ in m.named_parameters()] == ["weight"] and m.bias is None
    with loom.no_grad():
        m.weight.copy_(loom.tensor([1.0, 2.0, 3.0, 4.0], dtype=loom.float64))
    x = np.random.default_rng(0).standard_normal((3, 4))
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * np.array([1, 2, 3, 4])
    np.testing.assert_allclose(np_(m(loom.tensor(x, device=device))), want, rtol=1e-12)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("eps", [None, 1e-3])
def test_rms_norm_matches_its_formula(device, affine, eps):
    """RMSNorm (PyTorch >= 2.4): x / sqrt(mean(x^2) + eps) * weight, eps the dtype's machine
    epsilon by default; the gradient checked against finite differences."""
    m = loom.nn.RMSNorm((3, 4), eps=eps, elementwise_affine=affine).double().to(device)
    assert repr(m) == f"RMSNorm((3, 4), eps={eps}, elementwise_affine={affine})"
    weight = np.arange(12.0).reshape(3, 4) / 6 + 0.5
    if affine:
        with loom.no_grad():
            m.weight.copy_(loom.tensor(weight))
    x = np.random.default_rng(1).standard_normal((2, 3, 4))
    e = np.finfo(np.float64).eps if eps is None else eps
    want = x / np.sqrt((x * x).mean((-2, -1), keepdims=True) + e) * (weight if affine else 1)
    np.testing.assert_allclose(np_(m(loom.tensor(x, device=device))), want, rtol=1e-12)
    m32 = loom.nn.RMSNorm(4)
    x32 = np.ones((2, 4), np.float32) * 1e-4
    np.testing.assert_allclose(np_(m32(loom.tensor(x32))), x32 / np.sqrt(1e-8 + np.finfo(np.float32).eps),
                               rtol=1e-5)
    if device == "cpu":
        xg = loom.tensor(x).requires_grad_()
        assert loom.autograd.gradcheck(lambda t: m(t), [xg])


@pytest.mark.parametrize("size,shape", [(3, (2, 5, 4)), (2, (2, 4, 3, 3)), (5, (1, 6, 2, 2, 2)), (1, (2, 3, 2))])
def test_local_response_norm_matches_pytorch(device, size, shape):
    tm = torch.nn.LocalResponseNorm(size, alpha=0.3, beta=0.6, k=2.0)
    lm = loom.nn.LocalResponseNorm(size, alpha=0.3, beta=0.6, k=2.0)
    check_against_torch(tm, lm, [randn(*shape)], device)
    assert repr(lm) == repr(tm)
    with pytest.raises(ValueError, match=r"Expected 3D or higher dimensionality input \(got 2 dimensions\)"):
        lm(loom.zeros(2, 3))


def test_functional_forms_match_pytorch(device):
    x = randn(4, 3, 5)
    rm, rv = randn(3, seed=1), randn(3, seed=2).abs() + 0.5
    w, b = randn(3, seed=3), randn(3, seed=4)
    TF, LF = torch.nn.functional, loom.nn.functional
    L = lambda t: to_loom(t, device)  # noqa: E731
    for training in (False, True):
        lrm, lrv = L(rm), L(rv)
        trm, trv = rm.clone(), rv.clone()
        assert_close(LF.batch_norm(L(x), lrm, lrv, L(w), L(b), training, 0.2, 1e-3),
                     TF.batch_norm(x, trm, trv, w, b, training, 0.2, 1e-3))
        assert_close(lrm, trm)
        assert_close(lrv, trv)
    assert_close(LF.instance_norm(L(x), weight=L(w), bias=L(b)), TF.instance_norm(x, weight=w, bias=b))
    assert_close(LF.group_norm(L(x), 3, L(w), L(b)), TF.group_norm(x, 3, w, b))
    assert_close(LF.layer_norm(L(x), (3, 5)), TF.layer_norm(x, (3, 5)))
    assert_close(LF.local_response_norm(L(x), 2), TF.local_response_norm(x, 2))
