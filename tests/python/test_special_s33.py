"""torch.special's Bessel functions (i0, i0e, i1, i1e, modified_bessel_i0/i1/k0/k1, the scaled k0/k1,
spherical_bessel_j0), erfcx, zeta and polygamma: values against scipy (float64, float32, over wide
ranges and at the edges) and torch, eager and lazy (the compiled executor, so the fused CPU kernel
and the CUDA rendering are generated from the same expression: test_zz_cuda_renders.py compiles
the latter), integer inputs promoted, gradients where PyTorch has them and errors where it raises.
"""

import math

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")
scipy_special = pytest.importorskip("scipy.special")

COMPILED = True  # lazy mode through the compiled executor (fused kernels), not the interpreter

RNG = np.random.default_rng(33)
EDGES = [0.0, -0.0, 1e-300, 1e-30, 1e-8, 0.5, 1.0, 2.0, 3.0, 19.999, 20.0, 20.001, 50.0, 88.0, 90.0, 700.0, 709.0, 712.0,
         1e5, 1e300, math.inf, -math.inf, math.nan]
WIDE = np.concatenate([RNG.uniform(-30, 30, 200), np.exp(RNG.uniform(-40, 7, 200)), -np.exp(RNG.uniform(-40, 7, 60)),
                       EDGES, [-e for e in EDGES]])

# name -> (loom function, scipy reference, torch function)
UNARY = {
    "i0": (lambda x: loom.i0(x), scipy_special.i0, torch.i0),
    "special.i0": (lambda x: loom.special.i0(x), scipy_special.i0, torch.special.i0),
    "i0e": (lambda x: loom.special.i0e(x), scipy_special.i0e, torch.special.i0e),
    "i1": (lambda x: loom.special.i1(x), scipy_special.i1, torch.special.i1),
    "i1e": (lambda x: loom.special.i1e(x), scipy_special.i1e, torch.special.i1e),
    "modified_bessel_i0": (lambda x: loom.special.modified_bessel_i0(x), scipy_special.i0,
                           torch.special.modified_bessel_i0),
    "modified_bessel_i1": (lambda x: loom.special.modified_bessel_i1(x), scipy_special.i1,
                           torch.special.modified_bessel_i1),
    "modified_bessel_k0": (lambda x: loom.special.modified_bessel_k0(x), scipy_special.k0,
                           torch.special.modified_bessel_k0),
    "modified_bessel_k1": (lambda x: loom.special.modified_bessel_k1(x), scipy_special.k1,
                           torch.special.modified_bessel_k1),
    "scaled_modified_bessel_k0": (lambda x: loom.special.scaled_modified_bessel_k0(x), scipy_special.k0e,
                                  torch.special.scaled_modified_bessel_k0),
    "scaled_modified_bessel_k1": (lambda x: loom.special.scaled_modified_bessel_k1(x), scipy_special.k1e,
                                  torch.special.scaled_modified_bessel_k1),
    "spherical_bessel_j0": (lambda x: loom.special.spherical_bessel_j0(x),
                            lambda x: scipy_special.spherical_jn(0, x), torch.special.spherical_bessel_j0),
    "erfcx": (lambda x: loom.special.erfcx(x), scipy_special.erfcx, torch.special.erfcx),
}


def _run(fn, x, device):
    t = loom.tensor(x, device=device)
    return fn(t).cpu().numpy() if device == "lazy" else fn(t).numpy()


def _reference(ref, x):
    with np.errstate(all="ignore"):
        return np.asarray(ref(x.astype(np.float64)))


def _close(got, want, rtol, atol=0.0):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def _domain(name, x):
    # spherical j0 is sin(x)/x: far out, the sine of a huge argument is all rounding, and scipy's
    # float64 sin agrees with the C library's only there where both reduce the argument exactly.
    if name == "spherical_bessel_j0":
        return x[np.abs(x) < 1e4]
    return x


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_float64_matches_scipy(name, device):
    fn, ref, _ = UNARY[name]
    x = _domain(name, WIDE.astype(np.float64))
    _close(_run(fn, x, device), _reference(ref, x), rtol=4e-15, atol=1e-300)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_float32_matches_scipy_rounded(name, device):
    # Computed in double and rounded once: within one float32 rounding of scipy's value.
    fn, ref, _ = UNARY[name]
    x = _domain(name, WIDE.astype(np.float32))
    want = _reference(ref, x).astype(np.float32)
    _close(_run(fn, x, device), want, rtol=2.4e-7, atol=3e-45)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_matches_torch(name, dtype):
    fn, _, tfn = UNARY[name]
    x = _domain(name, WIDE).astype(dtype)
    if dtype == "float32":
        # torch computes float32 in float32, so its exp(|x|) overflows from 88.7 where the value
        # (computed here in double) may still be finite: compared with scipy above instead.
        x = x[(np.abs(x) <= 80) | ~np.isfinite(x)]
    want = tfn(torch.tensor(x)).numpy()
    got = _run(fn, x, "cpu")
    assert got.dtype == want.dtype
    rtol = 1e-5 if dtype == "float32" else 1e-13  # torch computes float32 in float32
    finite = np.isfinite(want)
    _close(got[finite], want[finite], rtol=rtol, atol=1e-30)
    # NaN and infinities where torch has them (inf vs a huge finite value counts as a mismatch)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])


@pytest.mark.parametrize("name", sorted(UNARY))
def test_integer_input_is_promoted(name):
    fn, _, tfn = UNARY[name]
    x = np.arange(-5, 6, dtype=np.int64)
    got = fn(loom.tensor(x))
    want = tfn(torch.tensor(x))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1] == "float32"
    _close(got.numpy(), want.numpy(), rtol=2e-6)


# ---- zeta and polygamma ----

S = np.concatenate([RNG.uniform(1.0, 12.0, 150), [2.0, 3.0, 4.0, 6.0, 1.5, 50.0, 1.0, 0.5, 2.0, 2.0, 2.5, math.nan]])
Q = np.concatenate([RNG.uniform(-10.9, 40.0, 150), [0.5, 1.0, 2.0, -2.5, 1e-3, 100.0, 1.0, 1.0, 0.0, -2.0, -2.5, 1.0]])


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_zeta_matches_torch(dtype, device):
    s, q = S.astype(dtype), Q.astype(dtype)
    got = loom.special.zeta(loom.tensor(s, device=device), loom.tensor(q, device=device)).cpu().numpy()
    want = torch.special.zeta(torch.tensor(s), torch.tensor(q)).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite], want[~finite])
    _close(got[finite], want[finite], rtol=2e-6 if dtype == "float32" else 1e-13)


def test_zeta_float64_against_scipy_where_q_is_positive():
    s, q = S[:150], np.abs(Q[:150]) + 1e-3
    _close(loom.special.zeta(loom.tensor(s), loom.tensor(q)).numpy(), scipy_special.zeta(s, q), rtol=2e-14)


def test_zeta_number_operands_and_integers():
    q = torch.tensor([1.0, 2.5, 7.0])
    _close(loom.special.zeta(2.0, loom.tensor(q.numpy())).numpy(), torch.special.zeta(2.0, q).numpy(), rtol=1e-6)
    _close(loom.special.zeta(loom.tensor(q.numpy()), 3.0).numpy(), torch.special.zeta(q, 3.0).numpy(), rtol=1e-6)
    got = loom.special.zeta(loom.tensor([2, 3]), loom.tensor([1, 2]))
    want = torch.special.zeta(torch.tensor([2, 3]), torch.tensor([1, 2]))
    assert got.dtype == loom.float32 and want.dtype == torch.float32
    _close(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 8])
def test_polygamma_matches_torch(n, device):
    x = np.concatenate([RNG.uniform(-9, 9, 100), RNG.uniform(0.01, 200, 50), [0.5, 1.0, 3.0, 1e-3]])
    got = loom.polygamma(n, loom.tensor(x, device=device)).cpu().numpy()
    want = torch.polygamma(n, torch.tensor(x)).numpy()
    # torch's trigamma (n = 1) has its own series, good to about 5e-10 (loom's zeta to 1e-13 of
    # scipy's: test_polygamma_against_scipy_and_in_place)
    rtol = 1e-9 if n == 1 else 1e-10
    _close(got, want, rtol=rtol)
    _close(loom.tensor(x).polygamma(n).numpy(), want, rtol=rtol)
    _close(loom.special.polygamma(n, loom.tensor(x)).numpy(), want, rtol=rtol)


def test_polygamma_against_scipy_and_in_place():
    x = RNG.uniform(0.05, 30, 100)
    for n in (1, 2, 3, 6):
        _close(loom.polygamma(n, loom.tensor(x)).numpy(), scipy_special.polygamma(n, x), rtol=1e-13)
    t = loom.tensor(x)
    assert t.polygamma_(2) is t
    _close(t.numpy(), scipy_special.polygamma(2, x), rtol=1e-13)


def test_polygamma_negative_n_raises_as_torch():
    with pytest.raises(RuntimeError, match="does not support negative n"):
        loom.polygamma(-1, loom.tensor([1.0]))


# ---- derivatives ----

GRAD_CASES = {
    "i0": (loom.i0, torch.i0, "I0Backward0"),
    "i0e": (loom.special.i0e, torch.special.i0e, "SpecialI0EBackward0"),
    "i1": (loom.special.i1, torch.special.i1, "SpecialI1Backward0"),
    "i1e": (loom.special.i1e, torch.special.i1e, "SpecialI1EBackward0"),
    "erfcx": (loom.special.erfcx, torch.special.erfcx, "SpecialErfcxBackward0"),
}


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradient_matches_torch(name, device):
    fn, tfn, grad_fn = GRAD_CASES[name]
    x = np.array([-3.5, -1.0, 0.0, 0.25, 2.0, 7.0, 25.0])
    w = np.linspace(0.5, 2.0, x.size)
    t = loom.tensor(x, device=device, requires_grad=True)
    y = fn(t)
    assert y.grad_fn.name() == grad_fn
    (y * loom.tensor(w, device=device)).sum().backward()
    tt = torch.tensor(x, requires_grad=True)
    (tfn(tt) * torch.tensor(w)).sum().backward()
    _close(t.grad.cpu().numpy(), tt.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_second_derivative_of_i0e_matches_torch():
    x = np.array([-2.0, 0.5, 3.0])
    t = loom.tensor(x, requires_grad=True)
    (g,) = loom.autograd.grad(loom.special.i0e(t).sum(), t, create_graph=True)
    g.sum().backward()
    tt = torch.tensor(x, requires_grad=True)
    (tg,) = torch.autograd.grad(torch.special.i0e(tt).sum(), tt, create_graph=True)
    tg.sum().backward()
    _close(t.grad.numpy(), tt.grad.numpy(), rtol=1e-12)


def test_zeta_and_polygamma_gradients():
    s = np.array([2.0, 3.5, 5.0])
    q = np.array([0.7, 2.0, 9.0])
    qs = loom.tensor(q, requires_grad=True)
    z = loom.special.zeta(loom.tensor(s), qs)
    assert z.grad_fn.name() == "SpecialZetaBackward0"
    z.sum().backward()
    tq = torch.tensor(q, requires_grad=True)
    torch.special.zeta(torch.tensor(s), tq).sum().backward()
    _close(qs.grad.numpy(), tq.grad.numpy(), rtol=1e-12)
    # polygamma's gradient is polygamma(n + 1)
    for n in (1, 2, 3):
        x = loom.tensor(q, requires_grad=True)
        loom.polygamma(n, x).sum().backward()
        _close(x.grad.numpy(), scipy_special.polygamma(n + 1, q), rtol=1e-12)


def test_zeta_gradient_for_s_raises_as_torch():
    s = loom.tensor([2.0, 3.0], requires_grad=True)
    z = loom.special.zeta(s, loom.tensor([1.0, 2.0]))
    with pytest.raises(NotImplementedError, match="the derivative for 'zeta' is not implemented"):
        z.sum().backward()


@pytest.mark.parametrize("name", ["modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
                                  "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
                                  "spherical_bessel_j0"])
def test_not_differentiable_as_torch(name):
    fn, _, tfn = UNARY[name]
    assert not tfn(torch.tensor([1.0], requires_grad=True)).requires_grad
    assert not fn(loom.tensor([1.0], requires_grad=True)).requires_grad


def test_lazy_program_fuses_the_special_functions():
    # Several special functions and ordinary ops in one lazy program: one compiled module whose
    # values equal eager mode's.
    x = np.linspace(0.1, 40.0, 257)

    def program(t):
        return (loom.special.i0e(t) * loom.special.erfcx(t) + loom.special.scaled_modified_bessel_k1(t)
                - loom.special.zeta(loom.full_like(t, 3.0), t) + loom.polygamma(2, t).exp())

    eager = program(loom.tensor(x)).numpy()
    lazy = program(loom.tensor(x, device="lazy")).cpu().numpy()
    _close(lazy, eager, rtol=1e-14)
