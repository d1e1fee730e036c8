"""Lazy-mode regressions found by running PyTorch's OpInfo database (perf/tools/opinfo_suite.py)
and edge-value probes on the "lazy" device against eager loom and torch 1.13 (perf/RESULTS.md,
lazyops-s33).

Integer arithmetic in fused kernels: PyTorch's (and loom's eager) integer +, -, * and negation
wrap modulo 2^bits. The C++ that fusion generates once wrote them as signed C arithmetic, whose
overflow is undefined, and GCC used that: fused into one kernel, `(x + 1) > x` of an int32 or int64
was folded to true even where x + 1 wraps to the most negative value. Each case here compares the
lazy result (one fused kernel) with eager loom and with torch.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import loom  # noqa: E402

I32_MAX = 2**31 - 1
I64_MAX = 2**63 - 1


def _run(fn, device):
    prev = loom.get_default_device()
    loom.set_default_device(device)
    try:
        r = fn(loom)
        return r.cpu().numpy(), str(r.dtype).split(".")[-1]
    finally:
        loom.set_default_device(prev)


def _check(fn):
    want = fn(torch)
    want = want.numpy(), str(want.dtype).split(".")[-1]
    for device in ("cpu", "lazy"):
        got = _run(fn, device)
        assert got[1] == want[1], (device, got, want)
        np.testing.assert_array_equal(got[0], want[0], err_msg=device)


# each: a chain the lazy device fuses into one kernel, whose result depends on wrapping
WRAPS = {
    # the compare of a wrapped sum with its operand: folded to true without wrapping semantics
    "int32 x + 1 > x": lambda m: (lambda x: (x + 1) > x)(m.tensor([I32_MAX, 5, -3], dtype=m.int32)),
    "int64 x + 1 > x": lambda m: (lambda x: (x + 1) > x)(m.tensor([I64_MAX, 5, -3], dtype=m.int64)),
    "int64 x - 1 < x": lambda m: (lambda x: (x - 1) < x)(m.tensor([-I64_MAX - 1, 0], dtype=m.int64)),
    "int32 x * 2 > x": lambda m: (lambda x: (x * 2) > x)(m.tensor([I32_MAX, 7], dtype=m.int32)),
    "int32 -x > 0": lambda m: (lambda x: (-x) > 0)(m.tensor([-I32_MAX - 1, -4], dtype=m.int32)),
    "int8 x + 10 < 0": lambda m: (lambda x: (x + 10) < 0)(m.tensor([120, -120], dtype=m.int8)),
    "uint8 x * x == 0": lambda m: (lambda x: (x * x) == 0)(m.tensor([16, 3], dtype=m.uint8)),
    "uint8 x - 10 > x": lambda m: (lambda x: (x - 10) > x)(m.tensor([3, 250], dtype=m.uint8)),
    "int16 x * y": lambda m: m.tensor([300, -300, 181], dtype=m.int16) * m.tensor([300, 300, 181], dtype=m.int16),
    "int32 wrap then floor_divide": lambda m: (m.tensor([I32_MAX, 7], dtype=m.int32) + 1) // 2,
    "int64 wrap then float": lambda m: ((m.tensor([I64_MAX, 1], dtype=m.int64) + 1) > 0).to(m.float64) * 2.5,
}


@pytest.mark.parametrize("case", sorted(WRAPS))
def test_integer_arithmetic_wraps_in_fused_kernels(case):
    _check(WRAPS[case])


def test_wrapping_arithmetic_keeps_float_kernels_unchanged():
    # floating +, -, * are not routed through the unsigned types: -0.0 and inf keep their IEEE results
    def fn(m):
        x = m.tensor([-0.0, float("inf"), 1.5], dtype=m.float64)
        return m.signbit(-(x * 1.0 - 0.0)) | ((x + x) == x)
    _check(fn)


# Float16 / bfloat16 ops compute in float, but each operand is first stored in the op's dtype
# (PyTorch's CPU kernels and loom's eager ones): a Python number or an integer tensor entering the
# op is rounded to float16 / bfloat16 before the arithmetic. Fused lazy kernels used the number's
# float value: x / 70000 in float16 gave 1.4e-5 where eager and torch divide by inf (70000 is past
# float16's range) and give 0; x ** 1.0001 of a negative x gave NaN where 1.0001 rounds to 1.0.
NARROW = {
    "div past the range": lambda m, x: x / 70000,
    "pow rounds the exponent": lambda m, x: x ** 1.0001,
    "number to the power x": lambda m, x: 1.0001 ** x,
    "compare with a number": lambda m, x: x < 1.0001,
    "equal to a number": lambda m, x: x == 3.0001,
    "fmod by a number": lambda m, x: m.fmod(x, 0.30001),
    "remainder by a number": lambda m, x: m.remainder(x, 0.7001),
    "mul by a number": lambda m, x: x * 70000,
    "chain": lambda m, x: ((x / 70000) * 70000) + 0.30001,
    "int64 tensor operand": lambda m, x: x * m.tensor([2049, 4097, 3], dtype=m.int64),
    "int32 tensor operand": lambda m, x: (x * 0) + m.tensor([2049, 4097, 257], dtype=m.int32),
}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", sorted(NARROW))
def test_narrow_float_ops_round_their_operands_first(case, dtype):
    fn = NARROW[case]
    base = [1.0, 3.0, -2.5]
    want = fn(torch, torch.tensor(base, dtype=getattr(torch, dtype)))
    want = (want.float() if want.is_floating_point() else want).numpy()
    for device in ("cpu", "lazy"):
        prev = loom.get_default_device()
        loom.set_default_device(device)   # the integer operand is made on the same device
        try:
            got = fn(loom, loom.tensor(base, dtype=getattr(loom, dtype)))
            got = (got.float() if got.dtype in (loom.float16, loom.bfloat16) else got).cpu().numpy()
        finally:
            loom.set_default_device(prev)
        np.testing.assert_array_equal(got, want, err_msg=device)
