"""Tensor methods written in Python (loom/_tensor_methods.py) against torch: fill_diagonal_ on
square, tall (with and without wrap), wide and cubic tensors; sum_to_size with its gradient and
error; matrix_power (0, 1, odd and even powers, batches, gradients); mvlgamma; on cpu and lazy."""

import numpy as np
import pytest

import loom
from _ops_helpers import torch  # noqa: F401

RNG = np.random.default_rng(21)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("shape,wrap", [((4, 4), False), ((7, 3), False), ((7, 3), True), ((3, 5), True),
                                        ((3, 3, 3), False)])
def test_fill_diagonal_matches_torch(shape, wrap, device):
    x = RNG.standard_normal(shape)
    ours = loom.tensor(x, device=device)
    theirs = torch.tensor(x)
    assert ours.fill_diagonal_(5.0, wrap=wrap) is ours
    theirs.fill_diagonal_(5.0, wrap=wrap)
    np.testing.assert_array_equal(ours.cpu().numpy(), theirs.numpy())


def test_fill_diagonal_rejects_what_torch_rejects():
    with pytest.raises(RuntimeError, match="equal length"):
        loom.zeros(2, 3, 3).fill_diagonal_(1)
    with pytest.raises(RuntimeError, match="larger than 1"):
        loom.zeros(3).fill_diagonal_(1)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_sum_to_size_matches_torch_with_its_gradient(device):
    x = RNG.standard_normal((2, 3, 4))
    for size in [(3, 1), (1, 3, 4), (4,), (2, 1, 1), ((3, 4),)]:
        ours = loom.tensor(x, device=device, requires_grad=True)
        theirs = torch.tensor(x, requires_grad=True)
        a, b = ours.sum_to_size(*size), theirs.sum_to_size(*size)
        np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().numpy(), rtol=1e-12)
        (a * a).sum().backward()
        (b * b).sum().backward()
        np.testing.assert_allclose(ours.grad.cpu().numpy(), theirs.grad.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="not expandable"):
        loom.zeros(2, 3).sum_to_size(2)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 6])
def test_matrix_power_matches_torch(n, device):
    a = RNG.standard_normal((2, 3, 3)) * 0.7
    ours = loom.tensor(a, device=device, requires_grad=True)
    theirs = torch.tensor(a, requires_grad=True)
    p, q = ours.matrix_power(n), torch.matrix_power(theirs, n)
    np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(loom.linalg.matrix_power(ours, n).detach().cpu().numpy(), q.detach().numpy(),
                               rtol=1e-10, atol=1e-12)
    if n:
        p.sum().backward()
        q.sum().backward()
        np.testing.assert_allclose(ours.grad.cpu().numpy(), theirs.grad.numpy(), rtol=1e-10)
    # a negative power is the inverse's (linalg.inv, a LAPACK step)
    np.testing.assert_allclose(ours.detach().matrix_power(-2).cpu().numpy(),
                               torch.matrix_power(theirs.detach(), -2).numpy(), rtol=1e-8, atol=1e-10)
    with pytest.raises(RuntimeError, match="square"):
        loom.zeros(2, 3).matrix_power(2)


def test_mvlgamma_matches_torch():
    x = RNG.uniform(2, 6, (3, 4))
    for p in (1, 3):
        np.testing.assert_allclose(loom.tensor(x).mvlgamma(p).numpy(), torch.tensor(x).mvlgamma(p).numpy(), rtol=1e-10)
        np.testing.assert_allclose(loom.mvlgamma(loom.tensor(x), p).numpy(), torch.mvlgamma(torch.tensor(x), p).numpy(),
                                   rtol=1e-10)
    y = loom.tensor(x)
    y.mvlgamma_(2)
    np.testing.assert_allclose(y.numpy(), torch.tensor(x).mvlgamma(2).numpy(), rtol=1e-10)
    with pytest.raises(RuntimeError, match=r"greater than \(p-1\)/2"):
        loom.tensor([0.5]).mvlgamma(3)
