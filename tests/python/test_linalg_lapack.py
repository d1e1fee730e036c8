"""torch.linalg's factorizations and solvers (lazy/ops_lapack.cpp, LAPACK steps): values and
gradients against torch 1.13 on cpu and lazy, batched and unbatched, float32 and float64; the
gradients against finite differences (loom.autograd.gradcheck); grad_fn names; PyTorch's errors
for bad shapes and dtypes; LinAlgError for singular and not positive-definite inputs, at the call
on cpu and at the read on lazy (where the rest of the trace is still computed); no sync while a
lazy program records them; NotImplementedError on the emulated CUDA executor."""

import numpy as np
import pytest

import loom
from _ops_helpers import recorded_then_replayed, torch  # noqa: F401

RNG = np.random.default_rng(11)
DEVICES = ["cpu", "lazy"]
DTYPES = {"float64": (loom.float64, torch.float64, 1e-10), "float32": (loom.float32, torch.float32, 2e-4)}
BATCHES = [(), (3,), (2, 2)]


def spd(batch, n):
    """Well-conditioned symmetric positive-definite matrices."""
    x = RNG.standard_normal(batch + (n, n))
    return x @ np.swapaxes(x, -1, -2) + n * np.eye(n)


def general(batch, n):
    return RNG.standard_normal(batch + (n, n)) + 2 * np.eye(n)


def lower(batch, n):
    return np.tril(RNG.standard_normal(batch + (n, n))) + 3 * np.eye(n)


def both(array, device, dtype="float64", grad=False):
    ld, td, _ = DTYPES[dtype]
    ours = loom.tensor(array, dtype=ld, device=device, requires_grad=grad)
    theirs = torch.tensor(array, dtype=td, requires_grad=grad)
    return ours, theirs


def numpy_of(t):
    return t.detach().cpu().numpy()


def close(got, want, tol):
    np.testing.assert_allclose(numpy_of(got), want.detach().numpy(), rtol=tol, atol=tol)


# name -> (inputs as arrays (batch, n), loom function, torch function)
CASES = {
    "linalg.cholesky": (lambda b, n: [spd(b, n)], lambda a: loom.linalg.cholesky(a), lambda a: torch.linalg.cholesky(a)),
    "linalg.cholesky upper": (lambda b, n: [spd(b, n)], lambda a: loom.linalg.cholesky(a, upper=True),
                              lambda a: torch.linalg.cholesky(a, upper=True)),
    "cholesky": (lambda b, n: [spd(b, n)], lambda a: loom.cholesky(a), lambda a: torch.linalg.cholesky(a)),
    "linalg.inv": (lambda b, n: [general(b, n)], loom.linalg.inv, torch.linalg.inv),
    "inverse": (lambda b, n: [general(b, n)], lambda a: a.inverse(), lambda a: a.inverse()),
    "linalg.solve": (lambda b, n: [general(b, n), RNG.standard_normal(b + (n, 2))], loom.linalg.solve,
                     torch.linalg.solve),
    "linalg.solve vector": (lambda b, n: [general(b, n), RNG.standard_normal((n,))], loom.linalg.solve,
                            torch.linalg.solve),
    "linalg.solve batch of vectors": (lambda b, n: [general(b, n), RNG.standard_normal(b + (n,))],
                                      loom.linalg.solve, torch.linalg.solve),
    "linalg.solve left=False": (lambda b, n: [general(b, n), RNG.standard_normal(b + (2, n))],
                                lambda a, x: loom.linalg.solve(a, x, left=False),
                                lambda a, x: torch.linalg.solve(a, x, left=False)),
    "linalg.solve broadcast": (lambda b, n: [general((), n), RNG.standard_normal((3,) + b + (n, 2))],
                               loom.linalg.solve, torch.linalg.solve),
    "solve_triangular lower": (lambda b, n: [lower(b, n), RNG.standard_normal(b + (n, 3))],
                               lambda a, x: loom.linalg.solve_triangular(a, x, upper=False),
                               lambda a, x: torch.linalg.solve_triangular(a, x, upper=False)),
    "solve_triangular upper right unit": (
        lambda b, n: [np.swapaxes(lower(b, n), -1, -2), RNG.standard_normal(b + (3, n))],
        lambda a, x: loom.linalg.solve_triangular(a, x, upper=True, left=False, unitriangular=True),
        lambda a, x: torch.linalg.solve_triangular(a, x, upper=True, left=False, unitriangular=True)),
    "triangular_solve transpose": (lambda b, n: [RNG.standard_normal(b + (n, 2)), lower(b, n)],
                                   lambda x, a: loom.triangular_solve(x, a, upper=False, transpose=True)[0],
                                   lambda x, a: torch.triangular_solve(x, a, upper=False, transpose=True)[0]),
    "cholesky_solve": (lambda b, n: [RNG.standard_normal(b + (n, 2)), np.linalg.cholesky(spd(b, n))],
                       loom.cholesky_solve, torch.cholesky_solve),
    "cholesky_solve upper": (lambda b, n: [RNG.standard_normal(b + (n, 2)),
                                           np.swapaxes(np.linalg.cholesky(spd(b, n)), -1, -2)],
                             lambda x, u: loom.cholesky_solve(x, u, upper=True),
                             lambda x, u: torch.cholesky_solve(x, u, upper=True)),
    "cholesky_inverse": (lambda b, n: [np.linalg.cholesky(spd(b, n))], loom.cholesky_inverse,
                         torch.cholesky_inverse),
    "linalg.det": (lambda b, n: [general(b, n)], loom.linalg.det, torch.linalg.det),
    "det": (lambda b, n: [general(b, n)], lambda a: a.det(), lambda a: a.det()),
    "slogdet logabsdet": (lambda b, n: [general(b, n)], lambda a: loom.linalg.slogdet(a)[1],
                          lambda a: torch.linalg.slogdet(a)[1]),
    "slogdet sign": (lambda b, n: [general(b, n) - 2.5 * np.eye(n)], lambda a: loom.linalg.slogdet(a).sign,
                     lambda a: torch.linalg.slogdet(a).sign),
    "logdet": (lambda b, n: [spd(b, n)], loom.logdet, torch.logdet),
}
DIFFERENTIABLE = [name for name in CASES if name != "slogdet sign"]


@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", CASES)
def test_values_match_torch(name, device, dtype, batch):
    make, ours_fn, theirs_fn = CASES[name]
    arrays = make(batch, 4)
    pairs = [both(a, device, dtype) for a in arrays]
    got = ours_fn(*[p[0] for p in pairs])
    want = theirs_fn(*[p[1] for p in pairs])
    assert got.dtype == DTYPES[dtype][0] and tuple(got.shape) == tuple(want.shape)
    assert got.device.type == device
    close(got, want, DTYPES[dtype][2] * (10 if "det" in name and dtype == "float32" else 1))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradients_match_torch(name, device):
    make, ours_fn, theirs_fn = CASES[name]
    arrays = make((2,), 3)
    pairs = [both(a, device, grad=True) for a in arrays]
    got = ours_fn(*[p[0] for p in pairs])
    want = theirs_fn(*[p[1] for p in pairs])
    weights = RNG.standard_normal(tuple(want.shape))
    (got * loom.tensor(weights, device=device)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours.grad.cpu().numpy(), theirs.grad.numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradients_match_finite_differences(name):
    make, ours_fn, _ = CASES[name]
    arrays = make((2,), 3)
    inputs = [loom.tensor(a, dtype=loom.float64, requires_grad=True) for a in arrays]
    if "cholesky" in name and "solve" not in name and "inverse" not in name:
        # The factorization reads one triangle: differentiate through a symmetric input.
        fn = lambda a: ours_fn((a + a.mT) / 2)  # noqa: E731
    elif name.startswith("cholesky_"):
        # PyTorch's (and loom's) gradient of the factor is that of a full matrix L in L L^T, while
        # the solves read one triangle: compare on the triangle the forward reads.
        tri = (lambda u: u.triu()) if "upper" in name else (lambda l: l.tril())
        fn = lambda *xs: ours_fn(*xs[:-1], tri(xs[-1]))  # noqa: E731
    else:
        fn = ours_fn
    assert loom.autograd.gradcheck(fn, inputs, atol=1e-6, rtol=1e-4)


def test_second_derivatives_through_inv_and_cholesky():
    a = spd((), 3)
    ours = loom.tensor(a, requires_grad=True)
    theirs = torch.tensor(a, requires_grad=True)
    g1 = loom.autograd.grad(loom.linalg.cholesky(ours).sum() + loom.linalg.inv(ours).pow(2).sum(), ours,
                            create_graph=True)[0]
    t1 = torch.autograd.grad(torch.linalg.cholesky(theirs).sum() + torch.linalg.inv(theirs).pow(2).sum(), theirs,
                             create_graph=True)[0]
    (g2,) = loom.autograd.grad(g1.pow(2).sum(), ours)
    (t2,) = torch.autograd.grad(t1.pow(2).sum(), theirs)
    np.testing.assert_allclose(g2.numpy(), t2.numpy(), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name,expected", [
    (lambda a: loom.linalg.cholesky(a), "LinalgCholeskyExBackward0"),
    (lambda a: loom.cholesky(a), "CholeskyBackward0"),
    (lambda a: loom.linalg.inv(a), "LinalgInvExBackward0"),
    (lambda a: loom.linalg.solve(a, a), "LinalgSolveExBackward0"),
    (lambda a: loom.linalg.solve_triangular(a, a, upper=True), "LinalgSolveTriangularBackward0"),
    (lambda a: loom.triangular_solve(a, a)[0], "TriangularSolveBackward0"),
    (lambda a: loom.cholesky_solve(a, a), "CholeskySolveBackward0"),
    (lambda a: loom.cholesky_inverse(a), "CholeskyInverseBackward0"),
    (lambda a: loom.linalg.det(a), "LinalgDetBackward0"),
])
def test_grad_fn_names_are_torchs(name, expected):
    a = loom.tensor(spd((), 3), requires_grad=True)
    assert name(a).grad_fn.name() == expected


def test_named_tuples_and_ex_forms():
    good, bad = spd((), 3), np.array([[1.0, 2.0], [2.0, 1.0]])
    ex = loom.linalg.cholesky_ex(loom.tensor(good))
    assert type(ex).__name__ == "linalg_cholesky_ex" and ex.info.dtype == loom.int32 and int(ex.info) == 0
    np.testing.assert_allclose(ex.L.numpy(), np.linalg.cholesky(good), rtol=1e-12)
    for device in DEVICES:
        info = loom.linalg.cholesky_ex(loom.tensor(np.stack([np.eye(2), bad]), device=device)).info
        assert info.tolist() == torch.linalg.cholesky_ex(torch.tensor(np.stack([np.eye(2), bad]))).info.tolist()
        singular = loom.tensor(np.stack([np.eye(2), np.ones((2, 2))]), device=device)
        assert loom.linalg.inv_ex(singular).info.tolist() == [0, 2]
    with pytest.raises(loom.linalg.LinAlgError):
        loom.linalg.cholesky_ex(loom.tensor(bad), check_errors=True)
    s = loom.linalg.slogdet(loom.tensor(general((), 3)))
    assert type(s).__name__ == "linalg_slogdet" and s.sign is s[0] and s.logabsdet is s[1]
    t = loom.triangular_solve(loom.ones(3, 1), loom.tensor(lower((), 3), dtype=loom.float32))
    assert t.solution is t[0] and t.cloned_coefficient is t[1]
    # singular: det 0, slogdet (0, -inf), logdet -inf; negative determinant: logdet NaN
    z = loom.tensor([[0.0, 0.0], [0.0, 1.0]])
    assert float(loom.linalg.det(z)) == 0 and loom.linalg.slogdet(z).sign.item() == 0
    assert loom.linalg.slogdet(z).logabsdet.item() == -np.inf and loom.logdet(z).item() == -np.inf
    assert np.isnan(loom.logdet(loom.tensor([[-1.0, 0.0], [0.0, 1.0]])).item())
    # empty matrices
    assert loom.linalg.det(loom.zeros(0, 0)).item() == 1.0
    assert tuple(loom.linalg.inv(loom.zeros(2, 0, 0)).shape) == (2, 0, 0)


ERRORS = [
    (lambda m: m.linalg.cholesky(m.zeros(2, 3)), RuntimeError),
    (lambda m: m.linalg.cholesky(m.zeros(2, 2, dtype=m.int64)), RuntimeError),
    (lambda m: m.linalg.cholesky(m.zeros(2)), RuntimeError),
    (lambda m: m.linalg.cholesky(m.zeros(2, 2, dtype=m.float16)), RuntimeError),
    (lambda m: m.linalg.inv(m.zeros(2, 3)), RuntimeError),
    (lambda m: m.linalg.inv(m.zeros(2)), RuntimeError),
    (lambda m: m.linalg.inv(m.zeros(2, 2, dtype=m.float16)), RuntimeError),
    (lambda m: m.linalg.det(m.zeros(2, 3)), RuntimeError),
    (lambda m: m.linalg.det(m.zeros(2, 2, dtype=m.int32)), RuntimeError),
    (lambda m: m.linalg.slogdet(m.zeros(2, 3)), RuntimeError),
    (lambda m: m.linalg.solve(m.eye(3), m.ones(2)), RuntimeError),
    (lambda m: m.linalg.solve(m.eye(3), m.ones(3, dtype=m.float64)), RuntimeError),
    (lambda m: m.linalg.solve(m.zeros(2, 3), m.ones(2)), RuntimeError),
    (lambda m: m.linalg.solve(m.zeros(2), m.ones(2)), RuntimeError),
    (lambda m: m.linalg.solve_triangular(m.eye(3), m.ones(3), upper=True), RuntimeError),
    (lambda m: m.linalg.solve_triangular(m.eye(3), m.ones(2, 3), upper=True), RuntimeError),
    (lambda m: m.linalg.solve_triangular(m.eye(3, dtype=m.int64), m.ones(3, 1, dtype=m.int64), upper=True),
     RuntimeError),
    (lambda m: m.cholesky_solve(m.ones(2, 1), m.eye(3)), RuntimeError),
    (lambda m: m.cholesky_solve(m.ones(3, 1, dtype=m.float64), m.eye(3)), RuntimeError),
    (lambda m: m.triangular_solve(m.ones(3, 1), m.eye(2)), RuntimeError),
    (lambda m: m.cholesky_inverse(m.zeros(2, 3)), RuntimeError),
    (lambda m: m.linalg.solve_triangular(m.eye(2), m.ones(2, 2)), TypeError),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_are_torchs(case):
    fn, kind = ERRORS[case]
    with pytest.raises(kind) as theirs:
        fn(torch)
    for device in DEVICES:
        with loom.device(device):
            with pytest.raises(kind) as ours:
                fn(loom)
        assert str(ours.value).replace("loom", "torch") == str(theirs.value), (device, case)


NOT_PD = np.array([[1.0, 2.0], [2.0, 1.0]])
SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])
FAILURES = [
    (lambda m, a: m.linalg.cholesky(a), NOT_PD),
    (lambda m, a: m.cholesky(a), NOT_PD),
    (lambda m, a: m.linalg.cholesky(a), np.stack([np.eye(2), NOT_PD])),
    (lambda m, a: m.linalg.inv(a), SINGULAR),
    (lambda m, a: m.linalg.inv(a), np.stack([SINGULAR, np.eye(2)])),
    (lambda m, a: m.linalg.solve(a, m.ones(2, dtype=a.dtype, device=a.device)), SINGULAR),
    (lambda m, a: m.linalg.solve(a, m.ones(2, dtype=a.dtype, device=a.device)), np.stack([np.eye(2), SINGULAR])),
]


@pytest.mark.parametrize("case", range(len(FAILURES)))
def test_singular_and_not_positive_definite_inputs_raise_linalg_error(case):
    fn, array = FAILURES[case]
    with pytest.raises(torch.linalg.LinAlgError) as theirs:
        fn(torch, torch.tensor(array))
    with pytest.raises(loom.linalg.LinAlgError) as ours:
        fn(loom, loom.tensor(array))
    assert str(ours.value) == str(theirs.value)
    assert isinstance(ours.value, RuntimeError)
    # lazy: recorded without an error, raised when a result computed from it is read; the rest of
    # the trace is computed
    a = loom.tensor(array, device="lazy")
    failed = fn(loom, a) * 2
    fine = a.sum() + 1
    with pytest.raises(loom.linalg.LinAlgError) as lazy:
        failed.tolist()
    assert str(lazy.value).startswith(str(theirs.value))  # then loom names the node: "(LinalgSolveEx at a sync)"
    assert fine.item() == pytest.approx(array.sum() + 1)
    with pytest.raises(loom.linalg.LinAlgError):
        failed.sum().item()


def test_a_lazy_program_records_them_without_a_sync_and_replays_its_plan():
    x = loom.tensor(spd((4,), 5), device="lazy")
    b = loom.tensor(RNG.standard_normal((4, 5, 2)), device="lazy")

    def program():
        l = loom.linalg.cholesky(x * 1.5)
        y = loom.linalg.solve_triangular(l, b, upper=False)
        return y.sum() + loom.linalg.slogdet(x).logabsdet.sum() + loom.linalg.inv(x).sum() + \
            loom.linalg.solve(x, b).sum() + loom.linalg.det(x).sum()

    value = recorded_then_replayed(program)
    xt, bt = torch.tensor(numpy_of(x)), torch.tensor(numpy_of(b))
    lt = torch.linalg.cholesky(xt * 1.5)
    want = torch.linalg.solve_triangular(lt, bt, upper=False).sum() + torch.linalg.slogdet(xt).logabsdet.sum() + \
        torch.linalg.inv(xt).sum() + torch.linalg.solve(xt, bt).sum() + torch.linalg.det(xt).sum()
    assert value == pytest.approx(want.item(), rel=1e-5)


def test_the_emulated_cuda_executor_names_the_op_it_lacks():
    loom._C._set_executor("cuda-emulated")
    try:
        a = loom.tensor(spd((), 3), device="lazy:cpu")
        with pytest.raises(NotImplementedError, match="LinalgCholeskyEx.*CUDA|CUDA.*LinalgCholeskyEx"):
            loom.linalg.cholesky(a).tolist()
    finally:
        loom._C._set_executor("compiled")


def test_matrix_power_with_a_negative_exponent_and_show_config():
    a = general((2,), 3)
    np.testing.assert_allclose(loom.tensor(a).matrix_power(-3).numpy(),
                               torch.matrix_power(torch.tensor(a), -3).numpy(), rtol=1e-9, atol=1e-12)
    assert "LAPACKE" in loom.show_config() if isinstance(loom.show_config(), str) else True


# ---- eigh / eigvalsh (syevd): eigenvectors are unique up to sign, so values compare V with its
# columns' signs aligned to torch's, and gradients go through sign-invariant functions ----

@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_eigh_matches_torch(device, dtype, batch, uplo):
    a = spd(batch, 4) - 4 * np.eye(4)  # eigenvalues of both signs
    a = a + np.triu(RNG.standard_normal(batch + (4, 4)), 1) * (uplo == "L")  # the triangle not read differs
    ours, theirs = both(a, device, dtype)
    w, v = loom.linalg.eigh(ours, UPLO=uplo)
    tw, tv = torch.linalg.eigh(theirs, UPLO=uplo)
    tol = DTYPES[dtype][2] * 10
    close(w, tw, tol)
    close(loom.linalg.eigvalsh(ours, uplo), tw, tol)
    signs = np.sign(np.sum(numpy_of(v) * tv.numpy(), axis=-2, keepdims=True))
    np.testing.assert_allclose(numpy_of(v) * signs, tv.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("device", DEVICES)
def test_eigh_gradients_match_torch_and_finite_differences(device):
    a = spd((2,), 3)
    ours, theirs = both(a, device, grad=True)
    weights = RNG.standard_normal((2, 3, 3))

    def f(m, x, w):  # sign-invariant in the eigenvectors: V diag(w) W-weighted V^T, plus the values
        vals, vecs = m.linalg.eigh(x)
        return (vecs * vecs * w).sum() + (vals ** 2).sum()

    f(loom, ours, loom.tensor(weights, device=device)).backward()
    f(torch, theirs, torch.tensor(weights)).backward()
    np.testing.assert_allclose(ours.grad.cpu().numpy(), theirs.grad.numpy(), rtol=1e-8, atol=1e-10)
    x = loom.tensor(a, requires_grad=True)
    wts = loom.tensor(weights)
    assert loom.autograd.gradcheck(lambda m: f(loom, (m + m.mT) / 2, wts), [x], atol=1e-6, rtol=1e-4)
    # eigh's results are views of one packed result: their grad_fn leads to LinalgEighBackward0
    view_fn = loom.linalg.eigh(loom.tensor(a, requires_grad=True))[0].grad_fn
    assert view_fn.next_functions[0][0].name() == "LinalgEighBackward0"
    with pytest.raises(RuntimeError, match="Expected UPLO argument to be 'L' or 'U', but got X"):
        loom.linalg.eigh(loom.tensor(a), UPLO="X")
    with pytest.raises(RuntimeError, match="must be batches of square matrices"):
        loom.linalg.eigh(loom.zeros(2, 3))
