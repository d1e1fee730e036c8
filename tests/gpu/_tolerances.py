"""How close GPU results must be, by dtype, as the CPU suites decide it (tests/python/_ops_helpers.py
TOLERANCES), plus the rounding bound of matrix products, whose error grows with their inner
dimension and with the precision of their inputs: a product in the wrong precision (TF32 where
float32 was asked for, float16 accumulation) lands outside it."""

import numpy as np

import loom

# Unit roundoff (half an ulp at 1): float32 and float64 as numpy has them; TF32 keeps float32's
# exponent and 10 of its 23 mantissa bits.
UNIT = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8, "tf32": 2.0**-11}

# (rtol, atol) of a GPU result against the CPU backend's, for the same program. The CPU suites'
# float32 row is (1e-5, 1e-6); the GPU sums in other orders (block reductions, cuBLAS), which moves
# a float32 sum of ~20 terms of magnitude ~1 by up to ~1e-5 where it cancels to near 0.
TOLERANCES = {"float64": (1e-12, 1e-12), "float32": (1e-5, 1e-5), "float16": (1e-3, 1e-3), "bfloat16": (8e-3, 8e-3)}


def dtype_name(dtype):
    return str(dtype).split(".")[-1]


def assert_close(got, want, dtype, err_msg=""):
    """got and want (numpy) are the same values of a result of loom dtype `dtype`: within its row of
    TOLERANCES for floating dtypes, exactly for integers and bools."""
    name = dtype_name(dtype)
    assert got.shape == want.shape, (got.shape, want.shape, err_msg)
    if name not in TOLERANCES:
        np.testing.assert_array_equal(got, want, err_msg=err_msg)
        return
    rtol, atol = TOLERANCES[name]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, err_msg=err_msg)


def product_bound(a, b, inputs="float32", output="float32", accumulate="float32"):
    """The largest error a product a @ b (float64 arrays, batched as numpy's matmul) can have when
    its inputs are rounded to `inputs`, summed in `accumulate` (cuBLAS's compute type) and rounded
    to `output`: 2 u_in |a| @ |b| + k u_acc |a| @ |b| + u_out |a @ b| (Higham's bound of a dot
    product, first order in u)."""
    k = a.shape[-1]
    magnitude = np.abs(a) @ np.abs(b)
    return (2 * UNIT[inputs] + k * UNIT[accumulate]) * magnitude + UNIT[output] * np.abs(a @ b)


def assert_product_close(got, a, b, dtype, inputs=None):
    """got (numpy) is a @ b computed in loom dtype `dtype` (float32 accumulation, as loom asks of
    cuBLAS for every floating dtype but float64) within product_bound; `inputs` overrides the
    precision the inputs were rounded to (tf32)."""
    name = dtype_name(dtype)
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    want = a @ b
    accumulate = "float64" if name == "float64" else "float32"
    bound = product_bound(a, b, inputs or name, name, accumulate)
    error = np.abs(got.astype(np.float64) - want)
    worst = np.unravel_index(np.argmax(error - bound), error.shape)
    assert np.all(error <= bound), (f"{name} product off by {error[worst]:.3g} at {worst}, over its rounding bound "
                                    f"{bound[worst]:.3g}")


def host(t):
    """A tensor's values on the host, bfloat16 as float32 (numpy has no bfloat16)."""
    return (t.float() if t.dtype == loom.bfloat16 else t).cpu().numpy()
