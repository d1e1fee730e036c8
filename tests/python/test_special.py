"""loom.special against torch.special: every function loom provides, float64 and float32, on cpu
and lazy, over inputs that reach each function's edges (zeros, negative values, both tails of
log_ndtr, the infinities xlog1py must hide); gradients in float64 against torch's, including
where a function's masked branch would be infinite."""

import numpy as np
import pytest

import loom
from _ops_helpers import torch  # noqa: F401

RNG = np.random.default_rng(3)
WIDE = np.concatenate([RNG.standard_normal(20) * 4, [0.0, -0.0, 1.0, -1.0, 1e-30]])
POSITIVE = np.concatenate([RNG.uniform(0.01, 8, 20), [1.0, 2.0, 0.5]])
UNIT = np.concatenate([RNG.uniform(0.001, 0.999, 20), [0.5]])
TAILS = np.array([-60.0, -45.0, -25.0, -20.5, -19.5, -12.0, -9.5, -3.0, -1e-3, 0.0, 1e-3, 2.0, 6.0, 9.0, 40.0])

UNARY = {
    "expit": WIDE, "logit": UNIT, "erf": WIDE, "erfc": WIDE, "erfinv": UNIT * 2 - 1, "exp2": WIDE, "expm1": WIDE,
    "log1p": POSITIVE - 0.5, "gammaln": POSITIVE, "digamma": POSITIVE, "psi": POSITIVE, "sinc": WIDE,
    "round": WIDE * 3.3, "entr": np.concatenate([POSITIVE, [0.0, -1.0]]), "ndtr": WIDE, "ndtri": UNIT,
    "log_ndtr": TAILS,
}


def tensors(x, dtype, device):
    return (loom.tensor(x, dtype=getattr(loom, dtype), device=device),
            torch.tensor(x, dtype=getattr(torch, dtype)))


def close(got, want, dtype, rtol=None):
    rtol = rtol or (1e-12 if dtype == "float64" else 2e-6)
    # float32: a few ulps of values near 1 where a function crosses 0 (gammaln between 1 and 2).
    atol = rtol * 1e-2 if dtype == "float64" else 4e-6
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_functions_match_torch(name, dtype, device):
    x, tx = tensors(UNARY[name], dtype, device)
    rtol = 1e-10 if name in ("gammaln", "digamma", "psi", "log_ndtr") and dtype == "float64" else None
    close(getattr(loom.special, name)(x), getattr(torch.special, name)(tx), dtype, rtol)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_binary_and_reducing_functions_match_torch(device):
    a = np.array([0.0, 0.0, 2.0, -1.5, 3.0, 0.5])
    b = np.array([-1.0, np.inf, 0.5, 2.0, -0.5, np.nan])
    x, tx = tensors(a, "float64", device)
    y, ty = tensors(b, "float64", device)
    close(loom.special.xlog1py(x, y), torch.special.xlog1py(tx, ty), "float64")
    close(loom.special.xlogy(x, y.abs()), torch.special.xlogy(tx, ty.abs()), "float64")
    m, tm = tensors(RNG.standard_normal((3, 4)), "float64", device)
    close(loom.special.logsumexp(m, 1), torch.special.logsumexp(tm, 1), "float64")
    close(loom.special.softmax(m, 0), torch.special.softmax(tm, 0), "float64")
    close(loom.special.log_softmax(m, 1), torch.special.log_softmax(tm, 1), "float64")
    p, tp = tensors(POSITIVE + 2, "float64", device)
    close(loom.special.multigammaln(p, 3), torch.special.multigammaln(tp, 3), "float64", 1e-10)
    with pytest.raises(ValueError, match="p has to be greater"):
        loom.special.multigammaln(p, 0)


@pytest.mark.parametrize("name,x", [("log_ndtr", TAILS), ("entr", np.array([0.5, 2.0, 1e-3, 3.0])),
                                    ("ndtri", UNIT), ("ndtr", WIDE)])
def test_gradients_match_torch(name, x):
    ours = loom.tensor(x, dtype=loom.float64, requires_grad=True)
    theirs = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    getattr(loom.special, name)(ours).sum().backward()
    getattr(torch.special, name)(theirs).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-9, atol=1e-300)


def test_xlog1py_gradient_is_finite_where_input_is_zero():
    x = loom.tensor([0.0, 0.0, 2.0], dtype=loom.float64, requires_grad=True)
    y = loom.tensor([-1.0, 3.0, 0.5], dtype=loom.float64, requires_grad=True)
    tx = torch.tensor([0.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    ty = torch.tensor([-1.0, 3.0, 0.5], dtype=torch.float64, requires_grad=True)
    loom.special.xlog1py(x, y).sum().backward()
    torch.special.xlog1py(tx, ty).sum().backward()
    # At input 0 and other -1, PyTorch's gradient for other is 0 * inf = NaN; loom's is 0.
    assert y.grad.numpy()[0] == 0 and np.isnan(ty.grad.numpy()[0])
    np.testing.assert_allclose(y.grad.numpy()[1:], ty.grad.numpy()[1:])
    np.testing.assert_allclose(x.grad.numpy()[1:], tx.grad.numpy()[1:])


def test_entr_gradient_at_zero_is_zero_not_nan():
    x = loom.tensor([0.0, 0.5], dtype=loom.float64, requires_grad=True)
    loom.special.entr(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, -(np.log(0.5) + 1)])
