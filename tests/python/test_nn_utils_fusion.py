"""loom.nn.utils' fuse_conv_bn_eval / fuse_linear_bn_eval (and their *_weights forms) against
torch 1.13 and against running the two layers, and skip_init. On cpu and lazy, float64."""

import pytest

import loom
from _nn_helpers import assert_close, copy_weights, to_loom
from _ops_helpers import device  # noqa: F401  (the cpu / lazy fixture)

torch = pytest.importorskip("torch")


def trained_bn(nn, bn_cls, channels, affine):
    """A batch norm with non-trivial running statistics and affine parameters."""
    bn = bn_cls(channels, affine=affine).double()
    bn.running_mean.copy_(torch.linspace(-1, 1, channels, dtype=torch.float64))
    bn.running_var.copy_(torch.linspace(0.5, 2, channels, dtype=torch.float64))
    if affine:
        with torch.no_grad():
            bn.weight.copy_(torch.linspace(0.3, 1.7, channels, dtype=torch.float64))
            bn.bias.copy_(torch.linspace(-0.2, 0.4, channels, dtype=torch.float64))
    return bn


CASES = {
    "conv2d": (lambda nn: nn.Conv2d(3, 4, 3), "BatchNorm2d", 4, (2, 3, 6, 6), False),
    "conv1d-no-bias": (lambda nn: nn.Conv1d(3, 5, 2, bias=False), "BatchNorm1d", 5, (2, 3, 7), False),
    "conv-transpose2d": (lambda nn: nn.ConvTranspose2d(3, 4, 3, stride=2), "BatchNorm2d", 4, (2, 3, 4, 4), True),
    "conv-transpose1d-groups": (lambda nn: nn.ConvTranspose1d(4, 6, 3, groups=2), "BatchNorm1d", 6, (2, 4, 5), True),
}


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fuse_conv_bn_eval(device, case, affine):
    make, bn_name, channels, shape, transpose = CASES[case]
    torch.manual_seed(0)
    tconv = make(torch.nn).double().eval()
    tbn = trained_bn(torch.nn, getattr(torch.nn, bn_name), channels, affine).eval()
    lconv = make(loom.nn).double().to(device).eval()
    lbn = getattr(loom.nn, bn_name)(channels, affine=affine).double().to(device).eval()
    copy_weights(tconv, lconv, device)
    copy_weights(tbn, lbn, device)
    x = torch.randn(*shape, dtype=torch.float64)

    lfused = loom.nn.utils.fuse_conv_bn_eval(lconv, lbn, transpose=transpose)
    if "groups" not in case:  # torch 1.13 cannot fold into a grouped transposed convolution
        tfused = torch.nn.utils.fuse_conv_bn_eval(tconv, tbn, transpose=transpose)
        assert_close(lfused.weight, tfused.weight, what="weight")
        assert_close(lfused.bias, tfused.bias, what="bias")
    assert isinstance(lfused.weight, loom.nn.Parameter) and lfused.weight.is_leaf
    assert_close(lfused(to_loom(x, device)), lbn(lconv(to_loom(x, device))).detach(), what="fused vs two layers")
    assert_close(lfused(to_loom(x, device)), tbn(tconv(x)), what="fused vs torch's two layers")
    # The inputs are untouched (the fused layer is a copy).
    assert_close(lconv.weight, tconv.weight)
    if tconv.bias is None:
        assert lconv.bias is None


def test_fuse_linear_bn_eval(device):
    torch.manual_seed(0)
    tlin = torch.nn.Linear(5, 4).double().eval()
    tbn = trained_bn(torch.nn, torch.nn.BatchNorm1d, 4, True).eval()
    llin = loom.nn.Linear(5, 4).double().to(device).eval()
    lbn = loom.nn.BatchNorm1d(4).double().to(device).eval()
    copy_weights(tlin, llin, device)
    copy_weights(tbn, lbn, device)
    fused = loom.nn.utils.fuse_linear_bn_eval(llin, lbn)
    x = torch.randn(3, 5, dtype=torch.float64)
    assert_close(fused(to_loom(x, device)), tbn(tlin(x)))
    w, b = loom.nn.utils.fuse_linear_bn_weights(llin.weight, llin.bias, lbn.running_mean, lbn.running_var,
                                                lbn.eps, lbn.weight, lbn.bias)
    assert_close(w, fused.weight)
    assert_close(b, fused.bias)


def test_fusion_needs_eval_mode():
    conv, bn = loom.nn.Conv2d(3, 4, 3), loom.nn.BatchNorm2d(4)
    with pytest.raises(AssertionError, match="eval"):
        loom.nn.utils.fuse_conv_bn_eval(conv, bn)
    with pytest.raises(AssertionError, match="out_features"):
        loom.nn.utils.fuse_linear_bn_eval(loom.nn.Linear(3, 5).eval(), loom.nn.BatchNorm1d(4).eval())


def test_skip_init(device):
    m = loom.nn.utils.skip_init(loom.nn.Linear, 5, 3, bias=True, device=device, dtype=loom.float64)
    assert isinstance(m, loom.nn.Linear)
    assert m.weight.shape == (3, 5) and m.bias.shape == (3,)
    assert m.weight.dtype is loom.float64 and m.weight.device.type == device
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    assert m.weight.requires_grad and isinstance(m.weight, loom.nn.Parameter)

    class NoDevice(loom.nn.Module):
        def __init__(self, n):
            super().__init__()

    with pytest.raises(RuntimeError, match="device"):
        loom.nn.utils.skip_init(NoDevice, 3)
