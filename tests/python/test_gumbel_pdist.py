"""F.gumbel_softmax: soft samples lie on the simplex, hard ones are one-hot with the soft sample's
gradient (straight-through), and argmax frequencies follow softmax(logits) at tau 1 (the
Gumbel-max property), on cpu and lazy. F.pdist against torch."""

import numpy as np
import pytest

import loom
from _ops_helpers import torch  # noqa: F401

F = loom.nn.functional


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_gumbel_softmax_samples_follow_the_softmax(device):
    loom.manual_seed(0)
    logits = loom.tensor([[1.0, 0.0, -1.0, 2.0]], device=device).expand(20000, 4)
    hard = F.gumbel_softmax(logits, tau=1.0, hard=True)
    h = hard.cpu().numpy()
    assert set(np.unique(h)) <= {0.0, 1.0} and (h.sum(1) == 1).all()
    freq = h.mean(0)
    want = np.exp([1.0, 0.0, -1.0, 2.0]) / np.exp([1.0, 0.0, -1.0, 2.0]).sum()
    np.testing.assert_allclose(freq, want, atol=0.015)
    soft = F.gumbel_softmax(logits[:100], tau=0.5, dim=1).cpu().numpy()
    assert (soft >= 0).all()
    np.testing.assert_allclose(soft.sum(1), 1, rtol=1e-5)


def test_hard_gumbel_softmax_passes_the_soft_gradient_through():
    logits = loom.tensor([[0.3, -0.2, 1.0]], dtype=loom.float64, requires_grad=True)
    weights = loom.tensor([[1.0, 2.0, 3.0]], dtype=loom.float64)
    loom.manual_seed(3)
    (F.gumbel_softmax(logits, tau=0.7, hard=True) * weights).sum().backward()
    hard_grad = logits.grad.numpy().copy()
    logits.grad = None
    loom.manual_seed(3)  # the same noise
    (F.gumbel_softmax(logits, tau=0.7) * weights).sum().backward()
    np.testing.assert_allclose(hard_grad, logits.grad.numpy(), rtol=1e-12)
    assert np.abs(hard_grad).sum() > 0


@pytest.mark.parametrize("p", [1.0, 2.0, 3.5])
def test_pdist_matches_torch(p):
    x = np.random.default_rng(4).standard_normal((6, 3))
    ours = loom.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    a, b = F.pdist(ours, p), torch.nn.functional.pdist(theirs, p)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-10)
