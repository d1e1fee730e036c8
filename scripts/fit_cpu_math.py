#!/usr/bin/python3
"""Fits the coefficients of loom_erff and loom_expf, the float32 erf and exp of CPU kernels
(fusion/targets.cpp), and prints the functions' polynomials as they stand there. Needs numpy and
mpmath (Debian: python3-mpmath).

loom_erff(x), a = |x|:
  a < 1          x * (c0 + s * P(s)), s = x * x: c0 = 2 / sqrt(pi) as a float pair hi + lo and P of
                 degree 5 fitted to (erf(a) / a - c0) / s for least maximum relative error of erf;
  1 <= a < 3.92  sign(x) * (1 - Q(a - m)): Q of degree 14 fitted to erfc on [1, 3.92] for least
                 maximum absolute error (erf is close to 1 there: its ulp is fixed);
  a >= 3.92      sign(x) (erf(3.92) rounds to 1 in float32).
A fit is Lawson's iteratively reweighted least squares (it converges to the minimax polynomial);
the coefficients are then rounded to float one at a time, from the constant term up, refitting
the rest after each rounding so that the rounding of one is absorbed by the next.

loom_expf(x): e^x = 2^n e^r, r = x - n ln2, |r| <= ln2 / 2, e^r = 1 + r + r^2 P(r) with P of
degree 4 fitted to (e^r - 1 - r) / r^2 for least maximum relative error of e^r.

The error bounds of the results (erf 1.31 ulp, exp 1.011 ulp over all 2^32 float32 inputs against
double precision, with FMA) are measured, not derived: tests/python/test_cpu_math.py sweeps the
inputs through a compiled kernel (LOOM_MATH_SWEEP=1 for all of them).
"""

import mpmath as mp
import numpy as np

mp.mp.dps = 40
SPLIT, TOP = 1.0, 3.92  # where the small-argument form ends; where erf rounds to 1


def lawson(basis, f, weight, iterations=150):
    """Coefficients c minimizing max |(basis @ c - f) * weight| (approximately), and that error."""
    w = np.ones(len(f))
    for _ in range(iterations):
        scale = np.sqrt(w) * weight
        c = np.linalg.lstsq(basis * scale[:, None], f * scale, rcond=None)[0]
        e = np.abs((basis @ c - f) * weight)
        w = w * e / np.sum(w * e)
    return c, float(np.max(np.abs((basis @ c - f) * weight)))


def rounded_to_float(basis, f, weight):
    """A fit whose coefficients are floats: round one, refit the ones after it."""
    c = lawson(basis, f, weight)[0]
    for k in range(len(c)):
        c[k] = np.float32(c[k])
        if k + 1 < len(c):
            c[k + 1:] = lawson(basis[:, k + 1:], f - basis[:, :k + 1] @ c[:k + 1], weight)[0]
    return c, float(np.max(np.abs((basis @ c - f) * weight)))


def hexf(v):
    return float(np.float32(v)).hex().replace("0000000p", "p") + "f"


def exp_polynomial():
    half = float(mp.log(2) / 2) * 1.0001
    r = np.linspace(-half, half, 8000)
    r = r[r != 0]
    target = np.array([float((mp.exp(v) - 1 - v) / mp.mpf(v) ** 2) for v in r])
    p, err = rounded_to_float(np.stack([r**k for k in range(5)], 1), target, r * r / np.exp(r))
    print(f"// loom_expf: e^r = 1 + r + r^2 P(r), relative error {err:.2e}")
    print("  float p = " + hexf(p[-1]) + ";")
    for c in p[-2::-1]:
        print(f"  p = LOOM_FMAF(p, r, {hexf(c)});")


def main():
    exp_polynomial()
    c0 = 2 / mp.sqrt(mp.pi)
    # hi rounded toward zero, so lo > 0 and x * lo keeps the sign of x = -0.
    hi = np.float32(float(c0))
    if mp.mpf(float(hi)) > c0:
        hi = np.nextafter(hi, np.float32(0))
    lo = np.float32(float(c0 - mp.mpf(float(hi))))

    a = np.linspace(0, SPLIT, 6000)[1:]
    s = a * a
    erf_over_a = np.array([float(mp.erf(v) / v) for v in a])
    target = np.array([float((mp.erf(v) / v - c0) / mp.mpf(v) ** 2) for v in a])
    p, p_err = rounded_to_float(np.stack([s**k for k in range(6)], 1), target, s / erf_over_a)

    m = np.float32((SPLIT + TOP) / 2)
    a = np.linspace(SPLIT, TOP, 12000)
    erfc = np.array([float(mp.erfc(v)) for v in a])
    q, q_err = rounded_to_float(np.stack([(a - float(m))**k for k in range(15)], 1), erfc, np.ones_like(a))

    print(f"// loom_erff: small form: relative error {p_err:.2e}; large form: absolute error {q_err:.2e}")
    print("LOOM_FN float loom_erff(float x) {")
    print("  const float a = __builtin_fabsf(x), s = x * x;")
    print(f"  float p = {hexf(p[-1])};")
    for c in p[-2::-1]:
        print(f"  p = LOOM_FMAF(p, s, {hexf(c)});")
    print(f"  p = LOOM_FMAF(p, s, {hexf(lo)});")
    print(f"  const float small = LOOM_FMAF(x, {hexf(hi)}, x * p);")
    print(f"  const float u = a - {hexf(m)};")
    print(f"  float q = {hexf(q[-1])};")
    for c in q[-2::-1]:
        print(f"  q = LOOM_FMAF(q, u, {hexf(c)});")
    print(f"  const float large = loom_bits_f(loom_f_bits(a < {TOP}f ? 1.0f - q : 1.0f) | (loom_f_bits(x) & 0x80000000u));")
    print(f"  return a < {SPLIT}f ? small : (a == a ? large : x);")
    print("}")


if __name__ == "__main__":
    main()
