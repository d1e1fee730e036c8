"""Failures found by running a peer project's op suite against loom (perf/tools/peer_ops_suite.py
on tinygrad's test_ops.py, session 30), each checked against PyTorch on cpu and on lazy with the
compiled executor (the suite's lazy runs compile kernels; the op suites' lazy half runs on the
interpreter, which is how these stayed hidden).

- A reduction of a 0-d float32 tensor (sum, mean, softmax, logsumexp, and the backward of max,
  min and cumsum, which sum a 0-d gradient) rendered a C++ row kernel that added into the
  blocked-sum accumulator f<s> without the block loop that declares it: the module failed to
  compile.
- cumprod / logcumsumexp of a 0-d tensor accepted any dim; PyTorch range-checks it ([-1, 0]).
"""

import numpy as np
import pytest

import loom
from _ops_helpers import check, device  # noqa: F401

torch = pytest.importorskip("torch")

COMPILED = True  # the device fixture keeps the compiled executor for lazy (see _ops_helpers.device)


def _grads(m, dev, fn, values, dtype):
    """Gradients of fn(x).sum() with respect to x, in library m ("lazy" only for loom)."""
    kw = {"device": dev} if m is loom else {}
    x = m.tensor(values, dtype=getattr(m, dtype), requires_grad=True, **kw)
    (g,) = m.autograd.grad(fn(m, x).sum(), [x])
    return g.detach().cpu().numpy()


ZERO_DIM_REDUCTIONS = {
    "sum": lambda m, x: x.sum(),
    "sum_dim0": lambda m, x: x.sum(0),
    "sum_dim_neg1": lambda m, x: x.sum(-1),
    "sum_dims_empty": lambda m, x: x.sum(()),
    "mean": lambda m, x: x.mean(),
    "softmax": lambda m, x: x.softmax(0),
    "log_softmax": lambda m, x: m.nn.functional.log_softmax(x, dim=0),
    "logsumexp": lambda m, x: m.logsumexp(x, 0),
    "max": lambda m, x: x.max(),
    "min": lambda m, x: x.min(),
    "cumsum": lambda m, x: m.cumsum(x, dim=0),
    "cross_entropy_probs": lambda m, x: m.nn.functional.cross_entropy(x.reshape(1, 1), x.reshape(1, 1).sigmoid()),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(ZERO_DIM_REDUCTIONS))
def test_zero_dim_reductions_and_gradients(device, name, dtype):
    fn = ZERO_DIM_REDUCTIONS[name]
    values = np.array(-0.75, dtype=dtype)
    check(device, fn, values)
    got = _grads(loom, device, fn, values, dtype)
    want = _grads(torch, None, fn, values, dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_zero_dim_sum_inside_a_fused_program(device):
    """The 0-d row stage next to ordinary stages of the same trace."""
    def fn(m, x, y):
        return (x * 2).sum() + (y.exp().sum(1) * x.sum()).sum()
    check(device, fn, np.array(1.25, np.float32), np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), rtol=1e-5)


@pytest.mark.parametrize("name", ["cumprod", "logcumsumexp", "cumsum"])
@pytest.mark.parametrize("dim", [1, -2, 0, -1])
def test_scan_dim_range_on_zero_dim(device, name, dim):
    """dim 1 / -2 raise IndexError as in PyTorch; 0 / -1 are the 0-d tensor's one dim."""
    check(device, lambda m, x: getattr(m, name)(x, dim), np.array(2.0, np.float32))



def test_unbatched_cross_entropy_with_class_probabilities(device):
    """An unbatched (C,) input with (C,) probabilities: its loss is a 0-d sum, then a 0-d mean."""
    x = np.linspace(-2, 2, 7, dtype=np.float32)
    p = np.abs(np.sin(np.arange(7, dtype=np.float32)))
    fn = lambda m, a, b: m.nn.functional.cross_entropy(a, b)  # noqa: E731
    check(device, fn, x, p, rtol=1e-5, atol=1e-6)
    grads = []
    for m, dev in ((loom, device), (torch, None)):
        kw = {"device": dev} if dev else {}
        a = m.tensor(x, requires_grad=True, **kw)
        (g,) = m.autograd.grad(fn(m, a, m.tensor(p, **kw)), [a])
        grads.append(g.detach().cpu().numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)
