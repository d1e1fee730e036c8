"""cross_entropy (and nll_loss) with class indices, as PyTorch's nll_loss: the target and weight
are saved for backward (written in place before it, they make it raise, naming the tensor and
its versions), and a weight that requires grad is refused while grad mode is on."""

import numpy as np
import pytest

import loom
import loom.nn.functional as F

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "lazy"]
SHAPES = [((3, 4), (3,)), ((2, 4, 3, 3), (2, 3, 3)), ((2, 4, 5), (2, 5))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_a_target_written_before_backward_raises(device, shapes, smoothing):
    x_shape, t_shape = shapes
    x = loom.randn(*x_shape, device=device, requires_grad=True)
    target = loom.randint(0, 4, t_shape, device=device)
    loss = F.cross_entropy(x, target, label_smoothing=smoothing)
    target.view(-1)[0] = 1
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*is at version 1; expected version 0"):
        loss.backward()


@pytest.mark.parametrize("device", DEVICES)
def test_a_weight_written_before_backward_raises(device):
    x = loom.randn(3, 4, device=device, requires_grad=True)
    weight = loom.rand(4, device=device)
    loss = F.cross_entropy(x, loom.tensor([0, 1, 2], device=device), weight=weight)
    weight.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize("device", DEVICES)
def test_an_untouched_target_still_differentiates_as_pytorch(device):
    rng = np.random.default_rng(0)
    x, t, w = rng.standard_normal((5, 4)), rng.integers(0, 4, 5), rng.random(4)
    mine = loom.tensor(x, device=device, requires_grad=True)
    F.cross_entropy(mine, loom.tensor(t, device=device), weight=loom.tensor(w, device=device),
                    label_smoothing=0.2).backward()
    theirs = torch.tensor(x, requires_grad=True)
    torch.nn.functional.cross_entropy(theirs, torch.tensor(t), weight=torch.tensor(w), label_smoothing=0.2).backward()
    np.testing.assert_allclose(mine.grad.cpu().numpy(), theirs.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ["cross_entropy", "nll_loss"])
def test_a_weight_that_requires_grad_is_refused_as_pytorch(device, fn):
    x = loom.randn(3, 4, device=device, requires_grad=True)
    weight = loom.rand(4, device=device, requires_grad=True)
    t = loom.tensor([0, 1, 2], device=device)
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'weight'"):
        getattr(F, fn)(x, t, weight=weight)
    with loom.no_grad():  # as PyTorch: only recording refuses it
        getattr(F, fn)(x, t, weight=weight)
    # class probabilities differentiate the weight, as PyTorch's
    F.cross_entropy(x, loom.rand(3, 4, device=device), weight=weight).backward()
    assert weight.grad is not None
