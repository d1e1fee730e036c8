"""torch.linalg's SVD, QR, LU and least-squares family (lazy/ops_lapack.cpp): values against torch
1.13 on cpu and lazy (float64 and float32, batched, an empty batch, square, tall and wide
matrices), gradients against finite differences (loom.autograd.gradcheck, float64) and torch's,
PyTorch's errors and LinAlgError, the deprecated names' warnings, and linalg.inv's derivative
reading only its result (an in-place write to A after inv leaves backward working)."""

import warnings

import numpy as np
import pytest

import loom
from _ops_helpers import recorded_then_replayed, torch  # noqa: F401

RNG = np.random.default_rng(31)
DEVICES = ["cpu", "lazy"]
DTYPES = {"float64": (loom.float64, torch.float64, 1e-9), "float32": (loom.float32, torch.float32, 3e-4)}
BATCHES = [(), (3,), (2, 2), (0,)]
SHAPES = [(4, 4), (5, 3), (3, 5)]


def both(array, device="cpu", dtype="float64", grad=False):
    ld, td, _ = DTYPES[dtype]
    return (loom.tensor(array, dtype=ld, device=device, requires_grad=grad),
            torch.tensor(array, dtype=td, requires_grad=grad))


def npy(t):
    return t.detach().cpu().numpy()


def close(got, want, tol):
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else want
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(npy(got), want, rtol=tol, atol=tol)


def well_conditioned(batch, m, n):
    """Random matrices with distinct singular values spread over [1, 3]."""
    k = min(m, n)
    u = np.linalg.qr(RNG.standard_normal(batch + (m, m)))[0][..., :k]
    v = np.linalg.qr(RNG.standard_normal(batch + (n, n)))[0][..., :k]
    s = np.linspace(3.0, 1.0, k) if k else np.zeros(0)
    return (u * s[..., None, :]) @ np.swapaxes(v, -1, -2)


# ---- values against torch ----

# name -> (loom function, torch function, how to compare: "exact" or "svd")
VALUES = {
    "svdvals": (lambda m, a: m.linalg.svdvals(a), "exact"),
    "matrix_norm nuc": (lambda m, a: m.linalg.matrix_norm(a, "nuc"), "exact"),
    "matrix_norm 2": (lambda m, a: m.linalg.matrix_norm(a, 2), "exact"),
    "matrix_norm -2 keepdim": (lambda m, a: m.linalg.matrix_norm(a, -2, keepdim=True), "exact"),
    "norm nuc": (lambda m, a: m.linalg.norm(a, "nuc", dim=(-2, -1)), "exact"),
    "pinv": (lambda m, a: m.linalg.pinv(a), "exact"),
    "pinv rcond": (lambda m, a: m.linalg.pinv(a, 0.5), "exact"),
    "pinv atol": (lambda m, a: m.linalg.pinv(a, atol=2.0), "exact"),
    "pinverse": (lambda m, a: m.pinverse(a), "exact"),
    "matrix_rank": (lambda m, a: m.linalg.matrix_rank(a), "exact"),
    "matrix_rank atol": (lambda m, a: m.linalg.matrix_rank(a, atol=1.5), "exact"),
    "matrix_rank rtol": (lambda m, a: m.linalg.matrix_rank(a, rtol=0.6), "exact"),
    "cond": (lambda m, a: m.linalg.cond(a), "exact"),
    "cond -2": (lambda m, a: m.linalg.cond(a, -2), "exact"),
    "qr reduced": (lambda m, a: m.linalg.qr(a), "exact"),
    "qr complete": (lambda m, a: m.linalg.qr(a, mode="complete"), "exact"),
    "qr r": (lambda m, a: m.linalg.qr(a, mode="r").R, "exact"),
    "lu_factor": (lambda m, a: m.linalg.lu_factor_ex(a), "exact"),
    "lu": (lambda m, a: m.linalg.lu(a), "exact"),
    "svd": (lambda m, a: m.linalg.svd(a, full_matrices=False), "svd"),
    "svd full": (lambda m, a: m.linalg.svd(a), "svd"),
    "torch.svd": (lambda m, a: m.svd(a), "svd"),
    "torch.svd some=False": (lambda m, a: m.svd(a, some=False), "svd"),
}


def check_svd(got, want, a, tol, full):
    u, s, vh = got
    if len(got) == 3 and hasattr(want, "V"):  # torch.svd: V, not Vh
        vh = vh.mT
    wu, ws, wvh = want[0], want[1], (want[2].mT if hasattr(want, "V") else want[2])
    close(s, ws, tol)
    assert tuple(u.shape) == tuple(wu.shape) and tuple(vh.shape) == tuple(wvh.shape)
    k = s.shape[-1]
    un, vhn = npy(u), npy(vh)
    # the factorization, and columns equal to torch's up to sign (distinct singular values)
    np.testing.assert_allclose((un[..., :k] * npy(s)[..., None, :]) @ vhn[..., :k, :], a, rtol=tol * 10, atol=tol * 10)
    np.testing.assert_allclose(np.abs(un[..., :k]), np.abs(wu.numpy()[..., :k]), rtol=tol * 10, atol=tol * 10)
    np.testing.assert_allclose(np.abs(vhn[..., :k, :]), np.abs(wvh.numpy()[..., :k, :]), rtol=tol * 10, atol=tol * 10)
    eye_u = np.broadcast_to(np.eye(un.shape[-1]), un.shape[:-2] + (un.shape[-1],) * 2)
    np.testing.assert_allclose(np.swapaxes(un, -1, -2) @ un, eye_u, atol=tol * 10)
    eye_v = np.broadcast_to(np.eye(vhn.shape[-2]), vhn.shape[:-2] + (vhn.shape[-2],) * 2)
    np.testing.assert_allclose(vhn @ np.swapaxes(vhn, -1, -2), eye_v, atol=tol * 10)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", VALUES)
def test_values_match_torch(name, device, dtype, batch, shape):
    fn, how = VALUES[name]
    if name.startswith("cond") and name != "cond" and name != "cond -2":
        pytest.skip("square only")
    array = well_conditioned(batch, *shape)
    if name.startswith("matrix_rank"):  # a rank-deficient matrix among them
        array = array.copy()
        if array.size:
            array[..., -1] = array[..., 0]
    ours, theirs = both(array, device, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, want = fn(loom, ours), fn(torch, theirs)
    tol = DTYPES[dtype][2]
    if how == "svd":
        return check_svd(got, want, array, tol, "full" in name)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == {torch.float64: loom.float64, torch.float32: loom.float32, torch.int64: loom.int64,
                           torch.int32: loom.int32}[w.dtype], name
        assert g.device.type == device
        close(g, w, tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_cond_of_other_orders_and_singular_matrices(device, dtype):
    a = well_conditioned((2,), 4, 4)
    a[1, :, 0] = 0.0  # singular, a zero column: an exact zero on U's diagonal in any LAPACK; inf, as torch's
    ours, theirs = both(a, device, dtype)
    for p in ["fro", "nuc", 1, -1, float("inf"), float("-inf"), 2, None]:
        got, want = loom.linalg.cond(ours, p), torch.linalg.cond(theirs, p)
        if p in (2, None):  # the ratio of singular values: huge, not inf, for a rounding-singular matrix
            close(got[0], want[0], DTYPES[dtype][2])
            continue
        close(got, want, DTYPES[dtype][2] * 10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("left,adjoint", [(True, False), (True, True), (False, False), (False, True)])
def test_lu_solve_matches_torch(device, dtype, left, adjoint):
    a = well_conditioned((3,), 4, 4)
    b = RNG.standard_normal((3, 4, 2) if left else (3, 2, 4))
    (oa, ta), (ob, tb) = both(a, device, dtype), both(b, device, dtype)
    lu, piv = loom.linalg.lu_factor(oa)
    tlu, tpiv = torch.linalg.lu_factor(ta)
    close(loom.linalg.lu_solve(lu, piv, ob, left=left, adjoint=adjoint),
          torch.linalg.lu_solve(tlu, tpiv, tb, left=left, adjoint=adjoint), DTYPES[dtype][2] * 10)
    if left and not adjoint:  # the deprecated name, its argument order and warning
        with pytest.warns(UserWarning, match="torch.lu_solve is deprecated"):
            got = loom.lu_solve(ob, lu, piv)
        close(got, torch.linalg.lu_solve(tlu, tpiv, tb), DTYPES[dtype][2] * 10)


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shape", [(6, 3), (3, 3), (3, 5)], ids=str)
@pytest.mark.parametrize("device", DEVICES)
def test_lstsq_matches_torch(device, shape, driver):
    if driver == "gels" and shape[0] < shape[1]:
        shape = shape[::-1]  # gels: full rank, as torch requires
    a = well_conditioned((2,), *shape)
    b = RNG.standard_normal((2, shape[0], 2))
    for dtype in DTYPES:
        (oa, ta), (ob, tb) = both(a, device, dtype), both(b, device, dtype)
        got = loom.linalg.lstsq(oa, ob, driver=driver)
        want = torch.linalg.lstsq(ta, tb, driver=driver)
        tol = DTYPES[dtype][2] * 10
        for field in ["solution", "residuals", "rank", "singular_values"]:
            g, w = getattr(got, field), getattr(want, field)
            assert tuple(g.shape) == tuple(w.shape), (field, tuple(g.shape), tuple(w.shape))
            close(g, w, tol)
    # a vector right-hand side and a broadcast batch
    v = RNG.standard_normal((shape[0],))
    got = loom.linalg.lstsq(loom.tensor(a), loom.tensor(RNG.standard_normal((3, 1, shape[0], 1))))
    assert tuple(got.solution.shape) == (3, 2, shape[1], 1)
    close(loom.linalg.lstsq(loom.tensor(a[0]), loom.tensor(v), driver=driver).solution,
          torch.linalg.lstsq(torch.tensor(a[0]), torch.tensor(v), driver=driver).solution, 1e-8)


def test_lstsq_rank_deficient_gelsd_has_no_residuals_and_names_its_fields():
    a = well_conditioned((2,), 6, 3)
    a[1, :, 2] = a[1, :, 1]
    b = RNG.standard_normal((2, 6, 2))
    got = loom.linalg.lstsq(loom.tensor(a), loom.tensor(b), driver="gelsd")
    want = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver="gelsd")
    assert got.rank.tolist() == want.rank.tolist() == [3, 2]
    assert tuple(got.residuals.shape) == tuple(want.residuals.shape) == (0,)
    close(got.solution, want.solution, 1e-8)
    assert type(got).__name__ == "linalg_lstsq"


# ---- gradients ----

def sign_invariant_svd(fn):
    """Functions of the SVD that do not depend on each singular pair's sign: S, u_i v_i^T
    weighted, and the squares of U and V."""
    def f(a):
        u, s, vh = fn(a)
        k = s.shape[-1]
        u, vh = u[..., :k], vh[..., :k, :]
        w = loom.tensor(np.linspace(1.0, 2.0, k), dtype=a.dtype)
        return s, (u * w) @ vh, u * u, vh * vh
    return f


GRADIENTS = {
    "svd tall": ((4, 3), sign_invariant_svd(lambda a: loom.linalg.svd(a, full_matrices=False))),
    "svd wide": ((3, 4), sign_invariant_svd(lambda a: loom.linalg.svd(a, full_matrices=False))),
    "svd square full": ((3, 3), sign_invariant_svd(lambda a: loom.linalg.svd(a))),
    "svd full tall": ((4, 3), sign_invariant_svd(lambda a: loom.linalg.svd(a))),
    "torch.svd": ((4, 3), sign_invariant_svd(lambda a: (lambda r: (r.U, r.S, r.V.mT))(loom.svd(a)))),
    "svdvals": ((3, 4), loom.linalg.svdvals),
    "matrix_norm nuc": ((4, 3), lambda a: loom.linalg.matrix_norm(a, "nuc")),
    "matrix_norm 2": ((4, 3), lambda a: loom.linalg.matrix_norm(a, 2)),
    "cond": ((3, 3), loom.linalg.cond),
    "qr tall": ((4, 3), lambda a: tuple(loom.linalg.qr(a))),
    "qr square complete": ((3, 3), lambda a: tuple(loom.linalg.qr(a, mode="complete"))),
    "qr wide": ((3, 5), lambda a: tuple(loom.linalg.qr(a))),
    "pinv tall": ((5, 3), loom.linalg.pinv),
    "pinv wide": ((3, 5), loom.linalg.pinv),
    "pinv hermitian": ((3, 3), lambda a: loom.linalg.pinv(a @ a.mT + loom.eye(3, dtype=a.dtype), hermitian=True)),
    "lu": ((3, 3), lambda a: loom.linalg.lu(a)[1:]),
    "inv": ((3, 3), loom.linalg.inv),
}


@pytest.mark.parametrize("name", GRADIENTS)
def test_gradients_match_finite_differences(name):
    shape, fn = GRADIENTS[name]
    a = loom.tensor(well_conditioned((2,), *shape) + 0.05 * RNG.standard_normal((2,) + shape), requires_grad=True)
    assert loom.autograd.gradcheck(fn, [a], atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (3, 3)], ids=str)
def test_lstsq_gradients_match_finite_differences_and_torch(shape):
    a = well_conditioned((2,), *shape)
    b = RNG.standard_normal((2, shape[0], 2))
    oa, ta = both(a, grad=True)
    ob, tb = both(b, grad=True)
    assert loom.autograd.gradcheck(lambda x, y: loom.linalg.lstsq(x, y).solution, [oa, ob], atol=1e-6, rtol=1e-4)
    w = RNG.standard_normal((2, shape[1], 2))
    (loom.linalg.lstsq(oa, ob).solution * loom.tensor(w)).sum().backward()
    (torch.linalg.lstsq(ta, tb).solution * torch.tensor(w)).sum().backward()
    close(oa.grad, ta.grad, 1e-8)
    close(ob.grad, tb.grad, 1e-8)
    assert loom.linalg.lstsq(oa, ob).solution.grad_fn.name() == "LinalgLstsqBackward0"


@pytest.mark.parametrize("left,adjoint", [(True, False), (True, True), (False, False), (False, True)])
def test_lu_solve_gradients_match_finite_differences_and_torch(left, adjoint):
    a = well_conditioned((2,), 3, 3) + 0.3 * np.eye(3)
    b = RNG.standard_normal((2, 3, 2) if left else (2, 2, 3))
    tlu, tpiv = torch.linalg.lu_factor(torch.tensor(a))
    lu = loom.tensor(tlu.numpy(), requires_grad=True)
    piv = loom.tensor(tpiv.numpy())
    ob = loom.tensor(b, requires_grad=True)

    def f(lu_, b_):
        return loom.linalg.lu_solve(lu_, piv, b_, left=left, adjoint=adjoint)
    assert loom.autograd.gradcheck(f, [lu, ob], atol=1e-6, rtol=1e-4)
    tlu = tlu.clone().requires_grad_()
    tb = torch.tensor(b, requires_grad=True)
    w = RNG.standard_normal(b.shape)
    (f(lu, ob) * loom.tensor(w)).sum().backward()
    (torch.linalg.lu_solve(tlu, tpiv, tb, left=left, adjoint=adjoint) * torch.tensor(w)).sum().backward()
    close(lu.grad, tlu.grad, 1e-8)
    close(ob.grad, tb.grad, 1e-8)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["svd", "qr", "pinv", "lu"])
def test_gradients_match_torch(device, name):
    a = well_conditioned((2,), 4, 3) if name != "lu" else well_conditioned((2,), 3, 3)
    oa, ta = both(a, device, grad=True)
    fns = {
        "svd": lambda m, x: m.linalg.svd(x, full_matrices=False).S.sum() + (
            lambda r: (r.U * r.U).sum(-1) @ m.arange(4, dtype=x.dtype, device=x.device))(
            m.linalg.svd(x, full_matrices=False)).sum(),
        "qr": lambda m, x: (lambda r: (r.Q * 2).sum() + (r.R ** 2).sum())(m.linalg.qr(x)),
        "pinv": lambda m, x: (m.linalg.pinv(x) ** 3).sum(),
        "lu": lambda m, x: (lambda r: (r.L * 3).sum() + (r.U ** 2).sum())(m.linalg.lu(x)),
    }
    fns[name](loom, oa).backward()
    fns[name](torch, ta).backward()
    close(oa.grad, ta.grad, 1e-8)


def test_grad_fn_names():
    a = loom.tensor(well_conditioned((), 4, 3), requires_grad=True)
    assert loom.linalg.pinv(a).grad_fn.name() == "LinalgPinvBackward0"
    assert loom.linalg.inv(a[:3]).grad_fn.name() == "LinalgInvExBackward0"


def test_qr_derivative_errors_are_torchs():
    for mode, shape in [("r", (3, 3)), ("complete", (4, 3))]:
        msgs = []
        for m in (torch, loom):
            a = m.tensor(well_conditioned((), *shape), requires_grad=True)
            q, r = m.linalg.qr(a, mode=mode)
            with pytest.raises(RuntimeError) as e:
                r.sum().backward()
            msgs.append(str(e.value))
        assert msgs[1] == msgs[0]


# ---- linalg.inv's derivative reads its result ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ["linalg.inv", "inverse", "inv_ex"])
def test_an_inplace_write_to_a_after_inv_leaves_backward_working(device, fn):
    a = well_conditioned((2,), 3, 3)
    results = []
    for m in (torch, loom):
        leaf = m.tensor(a, requires_grad=True) if m is torch else loom.tensor(a, device=device, requires_grad=True)
        x = leaf * 1.0
        inv = {"linalg.inv": lambda t: m.linalg.inv(t), "inverse": lambda t: t.inverse(),
               "inv_ex": lambda t: m.linalg.inv_ex(t).inverse}[fn](x)
        x.add_(1.0)  # PyTorch's inverse saves only its result: this does not break the backward
        (inv * inv).sum().backward()
        results.append(npy(leaf.grad) if m is loom else leaf.grad.numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-9, atol=1e-10)


# ---- errors, LinAlgError, deprecations ----

ERRORS = [
    lambda m: m.linalg.svd(m.zeros(3)),
    lambda m: m.linalg.svd(m.zeros(3, 3, dtype=m.int64)),
    lambda m: m.linalg.svdvals(m.zeros(3)),
    lambda m: m.linalg.qr(m.zeros(3, 3), mode="full"),
    lambda m: m.linalg.qr(m.zeros(3)),
    lambda m: m.linalg.qr(m.zeros(2, 2, dtype=m.int32)),
    lambda m: m.linalg.lu_factor(m.zeros(3)),
    lambda m: m.linalg.lu_factor(m.zeros(3, 3, dtype=m.int64)),
    lambda m: m.linalg.lstsq(m.zeros(3, 2), m.zeros(4, 1)),
    lambda m: m.linalg.lstsq(m.zeros(3, 2), m.zeros(3, 1), driver="foo"),
    lambda m: m.linalg.lstsq(m.zeros(3, 2), m.zeros(3, 1, dtype=m.float64)),
    lambda m: m.linalg.lu_solve(m.eye(3), m.ones(3, dtype=m.int32), m.zeros(4, 1)),
    lambda m: m.linalg.lu_solve(m.zeros(3, 2), m.ones(3, dtype=m.int32), m.zeros(3, 1)),
    lambda m: m.linalg.matrix_rank(m.zeros(3)),
    lambda m: m.linalg.pinv(m.zeros(3)),
    lambda m: m.linalg.cond(m.zeros(3, 2), "fro"),
    lambda m: m.linalg.svd(m.zeros(3, 3), driver="gesvd"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_are_torchs(case):
    fn = ERRORS[case]
    with pytest.raises((RuntimeError, ValueError)) as theirs:
        fn(torch)
    for device in DEVICES:
        with loom.device(device):
            with pytest.raises(type(theirs.value)) as ours:
                fn(loom)
        assert str(ours.value).replace("loom", "torch") == str(theirs.value), (device, case)


def test_lu_factor_of_a_singular_matrix_raises_linalg_error_and_the_ex_form_reports_it():
    singular = np.stack([np.eye(2), [[1.0, 2.0], [2.0, 4.0]]])
    # PyTorch 1.13 raises a plain RuntimeError here (not LinAlgError), and so does loom
    with pytest.raises(RuntimeError) as theirs:
        torch.linalg.lu_factor(torch.tensor(singular))
    with pytest.raises(RuntimeError) as ours:
        loom.linalg.lu_factor(loom.tensor(singular))
    assert str(ours.value) == str(theirs.value)
    assert type(ours.value) is RuntimeError and type(theirs.value) is RuntimeError
    lazy = loom.linalg.lu_factor(loom.tensor(singular, device="lazy")).LU * 2
    with pytest.raises(RuntimeError, match="U.2,2. is zero"):
        lazy.tolist()
    got = loom.linalg.lu_factor_ex(loom.tensor(singular))
    want = torch.linalg.lu_factor_ex(torch.tensor(singular))
    assert got.info.tolist() == want.info.tolist() == [0, 2]


DEPRECATED = [
    (lambda m, a: m.cholesky(a @ a.mT + m.eye(3, dtype=a.dtype)), "torch.cholesky is deprecated"),
    (lambda m, a: m.triangular_solve(a, a.triu() + 3 * m.eye(3, dtype=a.dtype)), "torch.triangular_solve is deprecated"),
    (lambda m, a: m.qr(a), "torch.qr is deprecated"),
    (lambda m, a: m.lu(a), "torch.lu is deprecated"),
    (lambda m, a: a.lu(get_infos=True), "torch.lu is deprecated"),
    (lambda m, a: m.symeig(a + a.mT), "torch.symeig is deprecated"),
]


@pytest.mark.parametrize("case", range(len(DEPRECATED)))
def test_deprecated_names_warn_as_torch_and_give_its_values(case):
    fn, text = DEPRECATED[case]
    a = well_conditioned((), 3, 3)
    with warnings.catch_warnings(record=True) as theirs:  # PyTorch warns once per process (TORCH_WARN_ONCE)
        warnings.simplefilter("always")
        want = fn(torch, torch.tensor(a))
    with pytest.warns(UserWarning, match=text) as ours:
        got = fn(loom, loom.tensor(a))
    if theirs:
        assert str(theirs[0].message).startswith(str(ours[0].message))  # torch adds "(Triggered internally at ...)"
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        close(g, w, 1e-9)


def test_torch_svd_without_uv_and_some():
    a = well_conditioned((2,), 4, 3)
    got, want = loom.svd(loom.tensor(a), compute_uv=False), torch.svd(torch.tensor(a), compute_uv=False)
    for g, w in zip(got, want):
        close(g, w, 1e-9)
    assert type(got).__name__ == "svd" and got.V is got[2]


def test_svd_and_qr_of_empty_matrices_are_torchs():
    for shape in [(0, 3), (3, 0), (0, 0), (2, 0, 3)]:
        for full in (True, False):
            got, want = loom.linalg.svd(loom.zeros(*shape), full_matrices=full), torch.linalg.svd(
                torch.zeros(*shape), full_matrices=full)
            for g, w in zip(got, want):
                close(g, w, 0)
        for mode in ("reduced", "complete"):
            got, want = loom.linalg.qr(loom.zeros(*shape), mode=mode), torch.linalg.qr(torch.zeros(*shape), mode=mode)
            for g, w in zip(got, want):
                close(g, w, 0)
        close(loom.linalg.pinv(loom.zeros(*shape)), torch.linalg.pinv(torch.zeros(*shape)), 0)
        close(loom.linalg.matrix_rank(loom.zeros(*shape)), torch.linalg.matrix_rank(torch.zeros(*shape)), 0)


def test_a_lazy_program_records_them_without_a_sync_and_replays_its_plan():
    x = loom.tensor(well_conditioned((4,), 5, 3), device="lazy")
    b = loom.tensor(RNG.standard_normal((4, 5, 2)), device="lazy")

    def program():
        s = loom.linalg.svdvals(x * 1.5)
        q, r = loom.linalg.qr(x)
        lu, piv = loom.linalg.lu_factor(x[..., :3, :])
        return s.sum() + r.abs().sum() + loom.linalg.pinv(x).sum() + loom.linalg.lstsq(x, b).solution.sum() + \
            loom.linalg.lu_solve(lu, piv, b[..., :3, :]).sum() + loom.linalg.matrix_norm(x, "nuc").sum()

    value = recorded_then_replayed(program)
    xt, bt = torch.tensor(npy(x)), torch.tensor(npy(b))
    lu, piv = torch.linalg.lu_factor(xt[..., :3, :])
    want = torch.linalg.svdvals(xt * 1.5).sum() + torch.linalg.qr(xt).R.abs().sum() + torch.linalg.pinv(xt).sum() + \
        torch.linalg.lstsq(xt, bt).solution.sum() + torch.linalg.lu_solve(lu, piv, bt[..., :3, :]).sum() + \
        torch.linalg.matrix_norm(xt, "nuc").sum()
    assert value == pytest.approx(want.item(), rel=1e-9)


@pytest.mark.parametrize("fn,op", [
    (lambda a: loom.linalg.svdvals(a), "LinalgSvd"),
    (lambda a: loom.linalg.qr(a).R, "LinalgQr"),
    (lambda a: loom.linalg.lu_factor(a).LU, "LinalgLu"),
    (lambda a: loom.linalg.lstsq(a, a).solution, "LinalgLstsq"),
])
def test_the_emulated_cuda_executor_names_the_op_it_lacks(fn, op):
    loom._C._set_executor("cuda-emulated")
    try:
        a = loom.tensor(well_conditioned((), 3, 3), device="lazy:cpu")
        with pytest.raises(NotImplementedError, match=f"{op}.*CUDA"):
            fn(a).tolist()
    finally:
        loom._C._set_executor("compiled")


@pytest.mark.parametrize("name", ["lstsq", "solve", "matrix_rank", "eig"])
def test_names_removed_in_1_9_raise_torchs_error(name):
    with pytest.raises(RuntimeError) as theirs:
        getattr(torch, name)(torch.eye(2), torch.eye(2)) if name in ("lstsq", "solve") else getattr(torch, name)(
            torch.eye(2))
    with pytest.raises(RuntimeError) as ours:
        getattr(loom, name)(loom.eye(2), loom.eye(2)) if name in ("lstsq", "solve") else getattr(loom, name)(
            loom.eye(2))
    assert str(ours.value) == str(theirs.value)


def test_the_missing_torch_names_went_down():
    missing = [n for n in dir(torch) if not n.startswith("_") and not hasattr(loom, n)]
    for name in ("svd", "qr", "pinverse", "lu", "lu_solve", "lstsq", "solve", "matrix_rank", "eig", "symeig"):
        assert name not in missing
    for name in ("svd", "svdvals", "qr", "pinv", "matrix_rank", "cond", "lu_factor", "lu_factor_ex", "lu",
                 "lu_solve", "lstsq"):
        assert hasattr(loom.linalg, name)
    assert len(missing) <= 340
