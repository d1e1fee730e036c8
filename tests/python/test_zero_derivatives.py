"""Gradients where PyTorch defines them as zero: results that do not vary with a differentiable
input, and a p-norm at zero.

PyTorch gives every differentiable op's result a history when an input requires grad, also
where the derivative is zero everywhere: a count of nonzeros (norm of order 0, cdist with p=0),
the identity (matrix_power(A, 0)), an empty result (combinations of too few elements), the
all-zero distances of points with no coordinates. A loss built from them must backpropagate
(zeros) instead of raising that nothing requires grad. lazy/autograd.h: record_zero_derivative.
"""
import numpy as np
import pytest
import torch

import loom

DEVICES = ["cpu", "lazy"]


def _check(fn, shapes, device, dtype=np.float64):
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s).astype(dtype) for s in shapes]
    values = [np.where(np.abs(v) < 0.3, 0.0, v).astype(dtype) for v in values]  # some exact zeros
    xs = [loom.tensor(v, device=device, requires_grad=True) for v in values]
    ts = [torch.tensor(v, requires_grad=True) for v in values]
    out, ref = fn(loom, xs), fn(torch, ts)
    assert out.requires_grad and out.grad_fn is not None
    assert tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_array_equal(out.detach().cpu().numpy(), ref.detach().numpy())
    (out * 2).sum().backward()
    for x in xs:
        assert x.grad is not None
        np.testing.assert_array_equal(x.grad.cpu().numpy(), np.zeros(x.shape))
    # No history where nothing requires grad, or under no_grad.
    assert not fn(loom, [x.detach() for x in xs]).requires_grad
    with loom.no_grad():
        assert not fn(loom, xs).requires_grad


CASES = {
    "norm p=0": (lambda m, a: m.norm(a[0], 0), [(4, 5)]),
    "norm p=0 over a dim": (lambda m, a: m.norm(a[0], 0, dim=1, keepdim=True), [(4, 5)]),
    "vector_norm ord=0": (lambda m, a: m.linalg.vector_norm(a[0], 0, dim=(0, 1)), [(3, 4, 2)]),
    "linalg.norm ord=0": (lambda m, a: m.linalg.norm(a[0], 0), [(6,)]),
    "cdist p=0": (lambda m, a: m.cdist(a[0], a[1], p=0), [(3, 4), (5, 4)]),
    "cdist, no coordinates": (lambda m, a: m.cdist(a[0], a[1]), [(3, 0), (2, 0)]),
    "matrix_power 0": (lambda m, a: m.linalg.matrix_power(a[0], 0), [(2, 3, 3)]),
    "Tensor.matrix_power 0": (lambda m, a: a[0].matrix_power(0), [(4, 4)]),
    "combinations of an empty vector": (lambda m, a: m.combinations(a[0]), [(0,)]),
    "combinations, r past n": (lambda m, a: m.combinations(a[0], r=4), [(3,)]),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_zero_derivative_results_require_grad(case, device):
    fn, shapes = CASES[case]
    _check(fn, shapes, device)


@pytest.mark.parametrize("device", DEVICES)
def test_matrix_power_zero_of_nan_is_the_identity(device):
    a = loom.full((3, 3), float("nan"), device=device, requires_grad=True)
    out = loom.linalg.matrix_power(a, 0)
    np.testing.assert_array_equal(out.detach().cpu().numpy(), np.eye(3))
    out.sum().backward()
    np.testing.assert_array_equal(a.grad.cpu().numpy(), np.zeros((3, 3)))


def test_a_loss_through_a_zero_derivative_term_keeps_the_other_gradients():
    x = loom.tensor([1.0, 0.0, -2.0], requires_grad=True)
    loss = (x * x).sum() + loom.norm(x, 0)
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, -4.0])


# A p-norm's gradient where the norm or an element is 0: PyTorch's subgradient (0), where the chain
# of pow's and the root's derivatives gives inf * 0 = NaN (orders below 1: at every zero element;
# negative orders: the norm is 0 as soon as one element is).
NORM_INPUT = np.array([[0.0, 1.5, -2.0], [0.3, -0.7, 0.0], [0.0, 0.0, 0.0], [0.25, 4.0, -1.0]])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim,keepdim", [(1, False), (1, True), (None, False), ((0, 1), True), (0, False)])
@pytest.mark.parametrize("p", [0.5, -0.5, -1, -2, -3.5, 1.5, 3.5])
def test_vector_norm_gradient_at_zero_is_torchs_subgradient(p, dim, keepdim, device):
    x = loom.tensor(NORM_INPUT, device=device, requires_grad=True)
    t = torch.tensor(NORM_INPUT, requires_grad=True)
    out = loom.linalg.vector_norm(x, p, dim=dim, keepdim=keepdim)
    ref = torch.linalg.vector_norm(t, p, dim=dim, keepdim=keepdim)
    assert tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_allclose(out.detach().cpu().numpy(), ref.detach().numpy(), rtol=1e-12)
    cotangent = np.arange(1.0, 1.0 + ref.numel()).reshape(ref.shape)
    out.backward(loom.tensor(cotangent, device=device))
    ref.backward(torch.tensor(cotangent))
    assert not np.isnan(x.grad.cpu().numpy()).any()
    np.testing.assert_allclose(x.grad.cpu().numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("device", DEVICES)
def test_vector_norm_double_backward_matches_torch(device):
    x = loom.tensor([1.0, -2.0, 3.0], device=device, requires_grad=True, dtype=loom.float64)
    t = torch.tensor([1.0, -2.0, 3.0], requires_grad=True, dtype=torch.float64)
    (g,) = loom.autograd.grad(loom.norm(x, 3.5), x, create_graph=True)
    (h,) = loom.autograd.grad((g * g).sum(), x)
    (tg,) = torch.autograd.grad(torch.norm(t, 3.5), t, create_graph=True)
    (th,) = torch.autograd.grad((tg * tg).sum(), t)
    np.testing.assert_allclose(h.cpu().numpy(), th.numpy(), rtol=1e-10)


def test_vector_norm_saves_its_result_as_torchs_does():
    x = loom.tensor([1.0, 2.0, 0.0], requires_grad=True)
    n = loom.norm(x, 0.5)
    n.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        n.backward()
