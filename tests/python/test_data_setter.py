"""`tensor.data = value` as PyTorch has it: the Python tensor (a Parameter an optimizer holds, a
module attribute) takes value's data, shared with value, keeping its own autograd state. The idioms
older training scripts use it for, on cpu and lazy, against torch 1.13."""

import numpy as np
import pytest

import loom
from _nn_helpers import assert_close, copy_weights, np_, to_loom
from _ops_helpers import device  # noqa: F401  (the cpu / lazy fixture)

torch = pytest.importorskip("torch")


def test_shares_the_assigned_data(device):
    x = loom.ones(3, device=device)
    y = loom.arange(3.0, device=device)
    x.data = y
    y.add_(10)
    np.testing.assert_array_equal(np_(x), [10, 11, 12])
    x.mul_(2)
    np.testing.assert_array_equal(np_(y), [20, 22, 24])


def test_shape_and_dtype_may_change(device):
    lin = loom.nn.Linear(4, 3).to(device)
    weight = lin.weight
    lin.weight.data = loom.ones(5, 4, dtype=loom.float64, device=device)
    lin.bias.data = loom.zeros(5, dtype=loom.float64, device=device)
    out = lin(loom.ones(2, 4, dtype=loom.float64, device=device))
    assert lin.weight is weight and lin.weight.requires_grad and lin.weight.is_leaf
    assert out.shape == (2, 5) and out.dtype is loom.float64
    out.sum().backward()
    np.testing.assert_array_equal(np_(lin.weight.grad), np.full((5, 4), 2.0))


def test_keeps_autograd_state(device):
    w = loom.ones(3, device=device, requires_grad=True)
    (w * 2).sum().backward()
    w.data = loom.full((3,), 5.0, device=device)
    assert w.requires_grad and w.is_leaf and w.grad_fn is None
    np.testing.assert_array_equal(np_(w.grad), [2, 2, 2])  # .grad survives, as in PyTorch
    w.grad = None
    (w * w).sum().backward()
    np.testing.assert_array_equal(np_(w.grad), [10, 10, 10])


def test_old_style_training_loop(device):
    """The pre-optimizer idiom of old tutorials: p.data = p.data - lr * p.grad.data, with clamping
    through .data, equals torch's trajectory."""
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()
    lnet = loom.nn.Sequential(loom.nn.Linear(4, 8), loom.nn.Tanh(), loom.nn.Linear(8, 1)).double().to(device)
    copy_weights(tnet, lnet, device)
    g = torch.Generator().manual_seed(1)
    for _ in range(4):
        x = torch.randn(16, 4, dtype=torch.float64, generator=g)
        y = x.sum(1, keepdim=True).sin()
        for net, lib, xs, ys in ((tnet, torch, x, y), (lnet, loom, to_loom(x, device), to_loom(y, device))):
            net.zero_grad()
            loss = ((net(xs) - ys) ** 2).mean()
            loss.backward()
            for p in net.parameters():
                p.data = p.data - 0.1 * p.grad.data
                p.data = p.data.clamp(-0.5, 0.5)
    for (name, tp), (_, lp) in zip(tnet.named_parameters(), lnet.named_parameters()):
        assert_close(lp, tp, what=name)


def test_optimizer_keeps_stepping_the_parameter(device):
    """An optimizer made before the assignment steps the new data (it holds the Parameter)."""
    p = loom.nn.Parameter(loom.zeros(2, device=device))
    opt = loom.optim.SGD([p], lr=1.0)
    p.data = loom.tensor([3.0, 4.0], device=device)
    p.sum().backward()
    opt.step()
    np.testing.assert_array_equal(np_(p), [2.0, 3.0])


@pytest.mark.parametrize("value, error", [(3, TypeError), ([1.0], TypeError), (None, TypeError)])
def test_bad_values(value, error):
    x = loom.ones(3)
    with pytest.raises(error, match="tensor"):
        x.data = value
    t = torch.ones(3)
    with pytest.raises(error):
        t.data = value
    np.testing.assert_array_equal(np_(x), [1, 1, 1])


def test_integer_data_for_a_tensor_that_requires_grad():
    w = loom.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError):
        w.data = loom.ones(3, dtype=loom.int64)
    with pytest.raises(RuntimeError, match="floating point"):
        torch.ones(3, requires_grad=True).data = torch.ones(3, dtype=torch.int64)
    np.testing.assert_array_equal(np_(w), [1, 1, 1])
    assert w.dtype is loom.float32


def test_delete_is_refused():
    x = loom.ones(3)
    with pytest.raises(TypeError):
        del x.data
