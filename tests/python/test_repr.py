"""repr(tensor) is PyTorch's, with "torch." spelled "loom."."""

import math

import numpy as np
import pytest

import loom
from conftest import torch_dtype

torch = pytest.importorskip("torch")

nan, inf = math.nan, math.inf
rng = np.random.default_rng(2024)

# (id, values as a numpy array or nested list, dtype name or None for torch.tensor's inference)
CASES = [
    # floats that are all integers ("1." style)
    ("int_valued", [1.0, 2.0, 3.0], None),
    ("int_valued_2d", [[1.0, -2.0], [30.0, 400.0]], None),
    ("int_valued_big", [1e8, 1.0], None),
    ("int_valued_sci", [1e9, 1.0], None),
    ("int_valued_ratio", [1.0, 2000.0], None),
    ("zeros", [0.0, 0.0], None),
    ("zero_one", [0.0, 1.0], None),
    # fractional values
    ("plain", [0.5, 1.25, -3.75], None),
    ("precision", [1 / 3, 2 / 3, 1e-3], None),
    ("wide_fixed", [123.456, -0.5], None),
    ("sci_ratio", [1e-3, 1.5], None),
    ("sci_big", [1.5, 1e8], None),
    ("sci_big2", [123456789.5, 1.0], None),
    ("sci_small", [1e-5, 1.0], None),
    ("tiny", [1e-10], None),
    ("tiny_pair", [1e-4, 2e-4], None),
    ("boundary_1e-4", [0.0001, 0.5], None),
    ("ratio_edge", [0.001, 1.0], None),
    ("ratio_edge2", [0.0011, 1.0], None),
    ("negative_sci", [-1e-7, 5.0, -3e5], None),
    # non-finite and signed zero
    ("nan_inf", [nan, inf, -inf], None),
    ("nan_frac", [nan, 1.5], None),
    ("inf_int", [inf, 1.0], None),
    ("neg_inf_int", [-inf, 1.0, 2.0], None),
    ("zero_nan", [0.0, nan], None),
    ("inf_sci", [-inf, 1e10, 1.0], None),
    ("all_nan", [nan, nan], None),
    ("neg_zero", [-0.0], None),
    ("neg_zero_pos_zero", [-0.0, 0.0], None),
    ("neg_zero_frac", [-0.0, 1.5], None),
    ("neg_zero_int", [-0.0, 3.0], None),
    # bool and ints
    ("bool", [True, False, True], None),
    ("bool_2d", [[True], [False]], None),
    ("int", [1, -200, 3000], None),
    ("int_2d", [[0, 10], [-5, 7]], None),
    ("int_big", [2**62, -1], None),
    # other dtypes
    ("int32", [1, -2, 300], "int32"),
    ("uint8", [0, 7, 255], "uint8"),
    ("float64", [1.5, -2.25, 1e-3], "float64"),
    ("float64_int", [1.0, 2.0], "float64"),
    ("float64_sci", [1e-20, 1.0], "float64"),
    ("float16", [0.1, 1.5, -2.0], "float16"),
    ("float16_int", [1.0, 2048.0], "float16"),
    ("float16_inf", [65504.0, inf, 1e-7], "float16"),
    ("bfloat16", [0.1, 1.5, -2.0], "bfloat16"),
    ("bfloat16_big", [1e20, 3.0], "bfloat16"),
    ("bool_dtype", [1, 0], "bool"),
    ("int64_from_float", [1.7, -2.2], "int64"),
    # 0-d
    ("scalar_float", 3.5, None),
    ("scalar_int_valued", 3.0, None),
    ("scalar_int", 7, None),
    ("scalar_bool", True, None),
    ("scalar_small", 1e-8, None),
    ("scalar_nan", nan, None),
    ("scalar_neg_zero", -0.0, None),
    ("scalar_float64", 2.5, "float64"),
    ("scalar_float16", 2.5, "float16"),
    ("scalar_bfloat16", 2.5, "bfloat16"),
    ("scalar_int32", -4, "int32"),
    ("scalar_uint8", 200, "uint8"),
    # 3-d and more
    ("3d_int", np.arange(24).reshape(2, 3, 4), None),
    ("3d_float", np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7, None),
    ("4d", np.arange(16, dtype=np.float64).reshape(2, 2, 2, 2) * 1.5, None),
    ("3d_size1", np.ones((1, 1, 3), np.float32), None),
    # random values
    ("randn_small", rng.standard_normal((4, 5)).astype(np.float32), None),
    ("randn_scaled", (rng.standard_normal((3, 4)) * 1e5).astype(np.float32), None),
    ("rand_float64", rng.random((3, 3)), None),
    # wide rows that wrap at 80 columns
    ("wide_row", np.arange(30, dtype=np.float32) * 1.5, None),
    ("wide_ints", np.arange(60) * 1000, None),
    ("wide_2d", rng.standard_normal((3, 20)).astype(np.float32), None),
    ("wide_sci", np.linspace(1e-5, 1e5, 25).astype(np.float32), None),
    ("wide_bool", (np.arange(40) % 3 == 0), None),
    ("wide_3d", np.arange(2 * 2 * 30, dtype=np.float32).reshape(2, 2, 30) / 3, None),
    ("wide_dtype_suffix", np.arange(24, dtype=np.float64) / 3, "float64"),
    ("wide_int32_suffix", np.arange(40), "int32"),
    # large tensors: summarized with "..."
    ("large_1d", np.arange(2000, dtype=np.float32), None),
    ("large_1d_int", np.arange(1001), None),
    ("large_1d_exact_threshold", np.arange(1000, dtype=np.float32), None),
    ("large_2d", rng.standard_normal((40, 40)).astype(np.float32), None),
    ("large_tall", np.arange(1200, dtype=np.float32).reshape(400, 3), None),
    ("large_wide", np.arange(1200).reshape(3, 400), None),
    ("large_3d", np.arange(2000, dtype=np.float32).reshape(10, 10, 20) / 10, None),
    ("large_sci", np.logspace(-6, 6, 1500).astype(np.float32), None),
    ("large_float16", np.arange(1500, dtype=np.float32) / 8, "float16"),
    ("large_bool", np.arange(1500) % 2 == 0, None),
    ("large_edges_differ", np.concatenate([np.full(600, 1e-6), np.full(600, 1.0)]).astype(np.float32), None),
]


def _make(values, dtype):
    """The same tensor in loom and torch."""
    if isinstance(values, np.ndarray):
        lt, tt = loom.tensor(values), torch.tensor(values)
    else:
        lt, tt = loom.tensor(values), torch.tensor(values)
    if dtype is not None:
        if dtype in ("float16", "bfloat16") and not isinstance(values, np.ndarray):
            # Round from float32 in both libraries, the same way.
            lt, tt = loom.tensor(values, dtype=loom.float32), torch.tensor(values, dtype=torch.float32)
        lt = lt.to(getattr(loom, dtype))
        tt = tt.to(getattr(torch, dtype))
    return lt, tt


def expected_repr(t):
    return repr(t).replace("torch.", "loom.")


@pytest.mark.parametrize("values,dtype", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_repr_matches_torch(values, dtype):
    lt, tt = _make(values, dtype)
    assert lt.tolist() == tt.tolist() or dtype in ("float16", "bfloat16") or "nan" in repr(values)
    assert repr(lt) == expected_repr(tt)
    assert str(lt) == str(tt).replace("torch.", "loom.")


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0), (2, 0, 3), (0, 0), (1, 0)], ids=repr)
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float64", "float16", "bfloat16", "uint8"])
def test_repr_empty(shape, dtype):
    lt = loom.zeros(shape, dtype=getattr(loom, dtype))
    tt = torch.zeros(shape, dtype=getattr(torch, dtype))
    assert repr(lt) == expected_repr(tt)


@pytest.mark.parametrize("op", [lambda x: x.t(), lambda x: x[:, ::2], lambda x: x[1:, None, 1],
                                lambda x: x[:1].expand(3, 4)],
                         ids=["t", "strided", "none", "expand"])
def test_repr_of_views(op):
    values = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 4
    assert repr(op(loom.tensor(values))) == expected_repr(op(torch.tensor(values)))


@pytest.fixture
def print_options():
    yield
    loom.set_printoptions(profile="default")
    torch.set_printoptions(profile="default")


@pytest.mark.parametrize("options", [
    {"precision": 2},
    {"precision": 8},
    {"linewidth": 40},
    {"linewidth": 200},
    {"threshold": 10},
    {"threshold": 10, "edgeitems": 1},
    {"edgeitems": 5, "threshold": 20},
    {"sci_mode": True},
    {"sci_mode": False},
    {"profile": "short"},
    {"profile": "full"},
    {"precision": 0},
    {"linewidth": 10},
    {"threshold": 0},
    {"precision": 1, "sci_mode": True},
], ids=repr)
def test_repr_with_print_options(print_options, options):
    loom.set_printoptions(**options)
    torch.set_printoptions(**options)
    for values in (np.arange(30, dtype=np.float32) / 7, np.array([1e-6, 1.0, 1e6], np.float32), np.arange(50),
                   np.arange(64, dtype=np.float32).reshape(8, 8) * 1.25, np.array([1.0, 2.0], np.float32),
                   np.array(2.5, np.float32), np.array([True, False]), np.zeros((2, 0), np.float32),
                   np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 3):
        lt, tt = loom.tensor(values), torch.tensor(values)
        assert repr(lt) == expected_repr(tt)


def test_repr_with_default_dtype_float64(restore_default_dtype):
    before = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        loom.set_default_dtype(loom.float64)
        for values, dtype in (([1.5, 2.0], None), ([1.5, 2.0], "float32"), ([], "float32"), ([], None)):
            lt, tt = _make(values, dtype)
            assert repr(lt) == expected_repr(tt)
    finally:
        torch.set_default_dtype(before)


def test_repr_does_not_change_tensor():
    t = loom.tensor([1.5, 2.5], dtype=loom.bfloat16)
    before = t.tolist()
    repr(t)
    assert t.tolist() == before and t.dtype is loom.bfloat16
