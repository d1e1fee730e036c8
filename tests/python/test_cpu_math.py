"""loom's own float32 erf and exp in CPU kernels (loom_erff, loom_expf: fusion/targets.cpp,
coefficients from scripts/fit_cpu_math.py), and GELU built on them.

- Accuracy: float32 inputs spread over the whole range (every 4099th bit pattern;
  LOOM_MATH_SWEEP=1 tries all 2^32 in 256 kernel runs: 12 minutes for erf here), densely around
  the ends of erf's pieces and exp's over- and underflow, through a compiled kernel, against
  float64: erf at most 1.31 ulp (2.27 where the compiler targets a CPU without FMA), exp 1.011 ulp
  (0.99 without FMA): the bounds fusion/targets.cpp states, measured over all inputs with the
  functions' text in a C driver.
- Special values exactly: erf keeps the sign of +-0, denormals, +-inf give +-1, NaN stays NaN,
  large arguments give exactly +-1, and erf never leaves [-1, 1]; exp's are test_kernel_forms'.
- The CPU rendering calls loom_erff and loom's loom_expf (no C library exp, no underflow mask: a
  clamp); the CUDA rendering keeps CUDA's erff, expf (behind the underflow mask).
- GELU, both forms, float32 and float64: fused, unfused, the interpreter, eager loom and PyTorch
  against float64 (bounds that allow for the erf's error), and gradients against PyTorch's.
"""

import os

import numpy as np
import pytest

import loom
from _fusion_helpers import dumping_to, run_lazy

torch = pytest.importorskip("torch")

FMA = "fma" in open("/proc/cpuinfo").read().split() if os.path.exists("/proc/cpuinfo") else True
BOUNDS = {"erf": 1.31 if FMA else 2.27, "exp": 1.011}  # ulp, measured over all inputs


def lazy(fn, x):
    (got,) = run_lazy(lambda t: (getattr(t, fn)(),), [x], "compiled")
    return got


def ulp_errors(fn, x, got):
    """|got - fn(x)| in units of the float32 spacing at fn(x) (denormal spacing below 2^-126)."""
    with np.errstate(over="ignore"):
        ref = getattr(torch, fn)(torch.from_numpy(x.astype(np.float64))).numpy()
        exact = got.astype(np.float64) == ref.astype(np.float32)  # infinities and exact zeros
        _, exponent = np.frexp(np.abs(ref).astype(np.float32).astype(np.float64))
    ulp = np.maximum(np.ldexp(1.0, exponent - 24), 2.0**-149)
    with np.errstate(invalid="ignore"):
        return np.where(exact, 0.0, np.abs(got.astype(np.float64) - ref) / ulp)


def floats(first_bits, last_bits, stride=1):
    return np.arange(first_bits, last_bits, stride, dtype=np.uint64).astype(np.uint32).view(np.float32)


def check_bound(fn, x):
    x = x[~np.isnan(x)]
    errors = ulp_errors(fn, x, lazy(fn, x))
    worst = int(np.argmax(errors))
    assert errors[worst] <= BOUNDS[fn], f"{fn}({x[worst]!r}) is {errors[worst]:.3f} ulp off"
    return errors[worst]


@pytest.mark.parametrize("fn", ["erf", "exp"])
def test_within_the_bound_over_the_whole_range(fn):
    if os.environ.get("LOOM_MATH_SWEEP") == "1":
        worst = max(check_bound(fn, floats(start, start + (1 << 24))) for start in range(0, 1 << 32, 1 << 24))
    else:
        worst = check_bound(fn, floats(0, 1 << 32, 4099))
    assert worst > 0.5  # the sweep did reach inputs a float32 evaluation cannot get exactly


def test_erf_within_its_bound_around_the_ends_of_its_pieces():
    for end in (1.0, 3.92):  # loom_erff's split points
        bits = int(np.float32(end).view(np.uint32))
        chunk = floats(bits - 100_000, bits + 100_000)
        check_bound("erf", np.concatenate([chunk, -chunk]))
    check_bound("erf", floats(0, 200_000))  # denormals and the smallest normals
    check_bound("erf", floats(0x80000000, 0x80000000 + 200_000))


def test_exp_within_its_bound_where_it_overflows_and_underflows():
    for end in (88.72, -87.3, -103.97):  # overflow; results turn denormal; the last nonzero results
        bits = int(np.float32(end).view(np.uint32))
        check_bound("exp", floats(bits - 200_000, bits + 200_000))
    check_bound("exp", floats(0, 200_000))  # tiny arguments: e^x rounds to 1
    check_bound("exp", floats(0x80000000, 0x80000000 + 200_000))


def test_erf_special_values():
    tiny = np.finfo(np.float32).smallest_subnormal
    x = np.array([0.0, -0.0, tiny, -tiny, 1e-40, -1e-40, 1.1754942e-38, np.inf, -np.inf, np.nan, 3.9192, 3.92, 4.0,
                  -4.0, 10.0, 1e30, -1e30, np.finfo(np.float32).max, -np.finfo(np.float32).max], dtype=np.float32)
    x = np.concatenate([np.roll(x, k) for k in range(17)])  # every value in vector lanes and the scalar tail
    got = lazy("erf", x)
    want = torch.erf(torch.from_numpy(x.astype(np.float64))).numpy().astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(x))
    finite = ~np.isnan(x)
    np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(x[finite]))  # -0 stays -0
    assert np.all(np.abs(got[finite]) <= 1)
    big = np.abs(x) >= 3.92
    np.testing.assert_array_equal(got[big], np.sign(x[big]))
    small = np.abs(x) < 1e-30  # erf(x) = 2x / sqrt(pi) to within float32's resolution, denormals included
    np.testing.assert_allclose(got[small], want[small], rtol=0, atol=2 * tiny)
    assert np.all(got[small & (x != 0)] != 0)


def test_cpu_kernels_call_loom_erff_and_expf_and_cuda_its_own(tmp_path):
    with dumping_to(tmp_path / "dump") as dump:
        run_lazy(lambda t: (t.erf() * 2, t.double().erf(), t.exp() * 2), [np.ones(100, np.float32)], "fused")
    cpp = "".join(p.read_text() for p in dump.glob("*.cpp"))
    cu = "".join(p.read_text() for p in dump.glob("*.cu"))
    kernels = cpp.split("LOOM_FN float loom_erff", 1)[1]  # what follows the prelude's definitions
    assert "loom_erff(" in kernels and "loom_expf(" in kernels
    prelude_exp = cpp.split("LOOM_FN float loom_expf(float x) {", 1)[1].split("\n}\n", 1)[0]
    assert "expf(" not in prelude_exp and "loom_mask_f" not in prelude_exp  # loom's polynomial, clamped
    assert " erf(" in cpp  # float64 keeps the C library's
    if cu:
        assert "loom_erff" not in cu and "erff(" in cu and "loom_mask_f(expf(" in cu and "0x1.715476p+0f" not in cu


# ---- GELU ----

def gelu_inputs(dtype):
    rng = np.random.default_rng(16)
    special = [0.0, -0.0, 1e-40, -1e-40, 0.5, -0.5, 1.0, -1.0, 1.4142135, -1.4142135, 2.8, -2.8, 5.5, -5.5, 6.0,
               -6.0, 40.0, -40.0, np.inf, -np.inf, np.nan]
    x = np.concatenate([rng.standard_normal(4000) * 3, np.linspace(-8, 8, 2001), special]).astype(dtype)
    return x


def gelu_bound(x, ref, dtype):
    """Allowed |error|: a few ulp of the result, plus |x| / 2 times the erf's and 1 + erf's error
    (0.5 x (1 + erf(x / sqrt 2)) cancels for negative x, as PyTorch's formula does)."""
    eps = np.finfo(dtype).eps
    return 4 * eps * np.abs(ref) + np.abs(x.astype(np.float64)) * (2 * eps if dtype == np.float32 else 4 * eps)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_fused_unfused_eager_and_torch_agree_with_float64(dtype, approximate):
    x = gelu_inputs(dtype)

    def program(t):
        return (loom.nn.functional.gelu(t, approximate=approximate), )

    ref = torch.nn.functional.gelu(torch.from_numpy(x.astype(np.float64)), approximate=approximate).numpy()
    results = {executor: run_lazy(program, [x], executor)[0] for executor in ("fused", "unfused", "interpreter")}
    results["eager"] = program(loom.tensor(x))[0].numpy()
    results["torch"] = torch.nn.functional.gelu(torch.from_numpy(x), approximate=approximate).numpy()
    finite = np.isfinite(ref)
    for name, got in results.items():
        assert got.dtype == dtype, name
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref), err_msg=name)
        np.testing.assert_array_equal(got[~finite], ref[~finite], err_msg=name)
        err = np.abs(got[finite].astype(np.float64) - ref[finite])
        bad = np.flatnonzero(err > gelu_bound(x[finite], ref[finite], dtype))
        assert bad.size == 0, f"{name}: gelu({x[finite][bad[0]]!r}) off by {err[bad[0]]:.3g}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_gradient_matches_torch(dtype, approximate):
    x = gelu_inputs(dtype)[:-3]  # finite inputs
    g = np.random.default_rng(3).standard_normal(x.shape).astype(dtype)
    t = torch.from_numpy(x.astype(np.float64)).requires_grad_()
    torch.nn.functional.gelu(t, approximate=approximate).backward(torch.from_numpy(g.astype(np.float64)))
    ref = t.grad.numpy()
    for device in ("lazy", "cpu"):
        xs = loom.tensor(x, device=device).requires_grad_()
        loom.nn.functional.gelu(xs, approximate=approximate).backward(loom.tensor(g, device=device))
        got = xs.grad.numpy()
        eps = np.finfo(dtype).eps
        bound = 8 * eps * np.abs(ref) + 8 * eps * np.abs(g) * (1 + np.abs(x.astype(np.float64)))
        bad = np.flatnonzero(np.abs(got - ref) > bound)
        assert bad.size == 0, f"{device}: gelu'({x[bad[0]]!r}) is {got[bad[0]]!r}, not {ref[bad[0]]!r}"
