"""softmax and log_softmax as composites with derivatives of their own (lazy/ops.cpp).

Their backward is PyTorch's formula on the saved result (softmax: y * (g - sum(g * y));
log_softmax: g - exp(y) * sum(g)) instead of the chain of their primitives' derivatives. Checked:
values and gradients against PyTorch in float64, fused against unfused executors and eager
mode, gradients against finite differences, second derivatives, -inf / NaN / all-masked rows,
every floating dtype, PyTorch's grad_fn names and in-place checks on the saved result, and the
size of the backward pass (one row reduction, one elementwise kernel).
"""

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(1515)
OPS = ["softmax", "log_softmax"]


def grads_of(lib, op, x_np, g_np, dim, device=None, dtype=None):
    """(y, dy/dx . g) of lib's op at x (float64 unless dtype says otherwise)."""
    kw = {"device": device} if device else {}
    x = lib.tensor(x_np, requires_grad=True, **kw)
    y = getattr(x, op)(dim) if dtype is None else getattr(x, op)(dim, dtype=dtype)
    (y * lib.tensor(g_np, **kw)).sum().backward()
    return y.detach().numpy(), x.grad.numpy()


def run_in(executor, fn):
    loom._C._set_executor(executor)
    try:
        return fn()
    finally:
        loom._C._set_executor("compiled")


SHAPES = [((5, 7), -1), ((5, 7), 0), ((2, 3, 4), 1), ((6,), 0), ((), 0), ((3, 0), 1), ((0, 4), 1)]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape,dim", SHAPES)
def test_values_and_gradients_match_torch_fused_unfused_and_eager(op, shape, dim):
    x = RNG.standard_normal(shape) * 3
    g = RNG.standard_normal(shape)
    want_y, want_g = grads_of(torch, op, x, g, dim)
    results = {"eager": grads_of(loom, op, x, g, dim)}
    for executor in ("fused", "unfused"):
        results[executor] = run_in(executor, lambda: grads_of(loom, op, x, g, dim, device="lazy"))
    for name, (y, gx) in results.items():
        np.testing.assert_allclose(y, want_y, rtol=1e-12, atol=1e-14, err_msg=name)
        np.testing.assert_allclose(gx, want_g, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("op", OPS)
def test_gradient_matches_finite_differences(op):
    x = RNG.standard_normal((3, 5)) * 2
    g = RNG.standard_normal((3, 5))
    _, analytic = grads_of(loom, op, x, g, 1)
    h = 1e-6
    numeric = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[i] += h
        minus[i] -= h
        f = lambda v: (getattr(loom.tensor(v), op)(1).numpy() * g).sum()
        numeric[i] = (f(plus) - f(minus)) / (2 * h)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("device", [None, "lazy"])
def test_second_derivatives_match_torch(op, device):
    x_np, v_np, w_np = (RNG.standard_normal((3, 4)) for _ in range(3))
    out = []
    for lib in (torch, loom):
        kw = {"device": device} if lib is loom and device else {}
        x = lib.tensor(x_np, requires_grad=True, **kw)
        v = lib.tensor(v_np, requires_grad=True, **kw)
        (gx,) = lib.autograd.grad((getattr(x, op)(1) * v).sum(), [x], create_graph=True)
        gxx, gv = lib.autograd.grad((gx * lib.tensor(w_np, **kw)).sum(), [x, v])
        out.append((gx.detach().numpy(), gxx.numpy(), gv.numpy()))
    for got, want in zip(out[1], out[0]):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def special_rows():
    """Rows with -inf (a causal mask), a NaN, +inf, all -inf (NaN out, as PyTorch), and huge spread."""
    ninf, nan, inf = -np.inf, np.nan, np.inf
    return np.array([[0.5, ninf, ninf, 1.0], [ninf, ninf, ninf, ninf], [0.0, nan, 1.0, 2.0],
                     [inf, 0.0, 1.0, 2.0], [-1000.0, 0.0, 1000.0, ninf], [1.0, 1.0, 1.0, 1.0]])


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("executor", ["eager", "fused", "unfused"])
def test_special_values_match_torch(op, executor):
    x = special_rows()
    g = RNG.standard_normal(x.shape)
    want_y, want_g = grads_of(torch, op, x, g, 1)
    if executor == "eager":
        y, gx = grads_of(loom, op, x, g, 1)
    else:
        y, gx = run_in(executor, lambda: grads_of(loom, op, x, g, 1, device="lazy"))
    np.testing.assert_allclose(y, want_y, rtol=1e-12, atol=1e-14, equal_nan=True)
    np.testing.assert_allclose(gx, want_g, rtol=1e-10, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("device", [None, "lazy"])
def test_every_floating_dtype(op, dtype, device):
    """Result and gradient in the input's dtype, against PyTorch on the same rounded inputs
    (PyTorch 1.13 has no float16 softmax on the CPU: its reference runs in float32 there)."""
    kw = {"device": device} if device else {}
    dt = getattr(loom, dtype)
    x = loom.tensor(RNG.standard_normal((4, 9)) * 2, **kw).to(dt)
    g = loom.tensor(RNG.standard_normal((4, 9)), **kw).to(dt)
    t = x.detach().requires_grad_()
    y = getattr(t, op)(-1)
    (y * g).sum().backward()
    assert y.dtype == dt and t.grad.dtype == dt
    ref_dt = torch.float32 if dtype == "float16" else getattr(torch, dtype)
    tx = torch.tensor(x.double().numpy()).to(ref_dt).requires_grad_()
    ty = getattr(tx, op)(-1)
    (ty * torch.tensor(g.double().numpy()).to(ref_dt)).sum().backward()
    tol = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12}[dtype]
    np.testing.assert_allclose(y.detach().double().numpy(), ty.detach().double().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(t.grad.double().numpy(), tx.grad.double().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("op", OPS)
def test_dtype_argument_casts_first_and_the_cast_is_differentiated(op):
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    g = RNG.standard_normal((3, 5))
    want_y, want_g = grads_of(torch, op, x, g, 1, dtype=torch.float64)
    y, gx = grads_of(loom, op, x, g, 1, dtype=loom.float64)
    assert y.dtype == np.float64 and gx.dtype == np.float32
    np.testing.assert_allclose(y, want_y, rtol=1e-12)
    np.testing.assert_allclose(gx, want_g, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,name", [("softmax", "SoftmaxBackward0"), ("log_softmax", "LogSoftmaxBackward0")])
def test_grad_fn_is_pytorchs_and_edits_of_the_result_are_caught(op, name):
    x = loom.tensor(RNG.standard_normal((2, 3)), requires_grad=True)
    y = getattr(x, op)(1)
    assert y.grad_fn.name() == name == getattr(torch.randn(2, 3, requires_grad=True), op)(1).grad_fn.name()
    assert y.grad_fn.next_functions[0][0].name() == "AccumulateGrad"
    y.mul_(2)  # the backward reads y: PyTorch raises, so does loom
    with pytest.raises(RuntimeError, match=f"modified by an inplace operation.*output 0 of {name}"):
        y.sum().backward()
    with loom.no_grad():
        assert getattr(x, op)(1).grad_fn is None


@pytest.mark.parametrize("op", OPS)
def test_backward_is_one_row_kernel_of_one_small_reduction(op, tmp_path, monkeypatch):
    """The gradient from the saved result: one row kernel computing one sum (sum(g * y) or
    sum(g)) and then, in its element epilogue, the gradient. The chain of the primitives'
    derivatives took a row kernel of three reductions (one counting the ties of the max) and 36
    expressions, exp recomputed in both of its kernels."""
    x = loom.tensor(RNG.standard_normal((8, 33)).astype(np.float32), device="lazy", requires_grad=True)
    g = loom.tensor(RNG.standard_normal((8, 33)).astype(np.float32), device="lazy")
    y = getattr(x, op)(-1)
    y.detach().numpy()  # the forward, in a trace of its own
    monkeypatch.setenv("LOOM_DUMP_DIR", str(tmp_path))
    loom.metrics_reset()
    y.backward(g)
    got = x.grad.numpy()
    assert loom.metrics()["kernel_launches"] == 1
    (groups,) = [p.read_text() for p in tmp_path.glob("*.groups")]
    kernels = [line for line in groups.splitlines() if line.startswith("kernel")]
    assert len(kernels) == 1 and "(row)" in kernels[0], groups
    assert int(kernels[0].split(": ")[1].split(" exprs")[0]) <= 12, groups
    _, want = grads_of(torch, op, x.detach().numpy().astype(np.float64), g.numpy().astype(np.float64), -1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
