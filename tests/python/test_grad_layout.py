"""Gradient layouts: a gradient has the layout PyTorch gives it, so the kernels that consume it
(accumulation into .grad, an optimizer step) read it with unit strides."""

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")


def _pair(shape_x, shape_w, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape_x).astype(np.float32), rng.standard_normal(shape_w).astype(np.float32)


@pytest.mark.parametrize("shape_x", [(4, 3), (2, 4, 3)])
def test_gradient_of_a_transposed_weight_is_row_major(shape_x):
    xs, ws = _pair(shape_x, (5, 3))
    x, w = loom.tensor(xs, requires_grad=True), loom.tensor(ws, requires_grad=True)
    tx, tw = torch.tensor(xs, requires_grad=True), torch.tensor(ws, requires_grad=True)
    gx, gw = loom.autograd.grad((x @ w.t()).sum(), [x, w])
    tgx, tgw = torch.autograd.grad((tx @ tw.t()).sum(), [tx, tw])
    assert gw.stride() == tgw.stride() == (3, 1)
    assert gx.stride() == tgx.stride()
    np.testing.assert_allclose(gw.numpy(), tgw.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-5, atol=1e-5)


def test_gradient_of_a_transposed_left_operand_keeps_its_layout():
    xs, ws = _pair((3, 4), (3, 5))
    x, w = loom.tensor(xs, requires_grad=True), loom.tensor(ws, requires_grad=True)
    tx, tw = torch.tensor(xs, requires_grad=True), torch.tensor(ws, requires_grad=True)
    gx, gw = loom.autograd.grad((x.t() @ w).square().sum(), [x, w])
    tgx, tgw = torch.autograd.grad((tx.t() @ tw).square().sum(), [tx, tw])
    assert gx.stride() == tgx.stride() == (4, 1)
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gw.numpy(), tgw.numpy(), rtol=1e-5, atol=1e-5)


def test_linear_weight_gradient_lazy_equals_eager():
    xs, ws = _pair((8, 6), (4, 6), seed=1)
    grads = []
    for device in ["cpu", "lazy"]:
        x = loom.tensor(xs, device=device)
        w = loom.tensor(ws, device=device, requires_grad=True)
        loom.nn.functional.linear(x, w).tanh().sum().backward()
        grads.append(w.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6, atol=1e-6)
