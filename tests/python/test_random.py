"""Random creation: seeding and reproducibility, ranges and rough distributions."""

import numpy as np
import pytest

import loom
from conftest import to_numpy

FLOATS = [loom.float16, loom.bfloat16, loom.float32, loom.float64]


@pytest.fixture(autouse=True)
def _reseed():
    """Each test starts from a known generator state, and leaves a reseeded one behind."""
    loom.manual_seed(0)
    yield
    loom.manual_seed(0)


GENERATORS = [
    ("rand", lambda: loom.rand(50, 7)),
    ("randn", lambda: loom.randn(50, 7)),
    ("randint", lambda: loom.randint(0, 1000, (50, 7))),
    ("rand_float64", lambda: loom.rand(33, dtype=loom.float64)),
    ("randn_half", lambda: loom.randn(33, dtype=loom.float16)),
    ("rand_like", lambda: loom.rand_like(loom.zeros(4, 5))),
    ("randn_like", lambda: loom.randn_like(loom.zeros(4, 5))),
    ("randint_like", lambda: loom.randint_like(loom.zeros(4, 5, dtype=loom.int32), 100)),
]


@pytest.mark.parametrize("make", [g[1] for g in GENERATORS], ids=[g[0] for g in GENERATORS])
def test_same_seed_same_values(make):
    loom.manual_seed(1234)
    a = make().tolist()
    b = make().tolist()
    loom.manual_seed(1234)
    assert make().tolist() == a
    assert make().tolist() == b
    assert a != b  # consecutive calls differ


@pytest.mark.parametrize("make", [g[1] for g in GENERATORS], ids=[g[0] for g in GENERATORS])
def test_different_seeds_differ(make):
    loom.manual_seed(1)
    a = make().tolist()
    loom.manual_seed(2)
    assert make().tolist() != a


def test_sequence_of_ops_is_reproducible():
    def run():
        return [loom.rand(3).tolist(), loom.randn(2, 2).tolist(), loom.randint(10, (4,)).tolist(), loom.rand(1).tolist()]

    loom.manual_seed(99)
    first = run()
    loom.manual_seed(99)
    assert run() == first


def test_values_depend_on_seed_and_shape_only():
    # Element i of a random op depends on (seed, op count, i): the same op with a longer shape
    # starts with the same values.
    loom.manual_seed(5)
    short = loom.rand(10).tolist()
    loom.manual_seed(5)
    long = loom.rand(1000).tolist()
    assert long[:10] == short
    loom.manual_seed(5)
    assert loom.rand(2, 5).view(-1).tolist() == short


def test_manual_seed_accepts_large_and_negative_seeds():
    loom.manual_seed(2**64 - 1)
    a = loom.rand(4).tolist()
    loom.manual_seed(-1)  # taken modulo 2**64, as in PyTorch
    assert loom.rand(4).tolist() == a
    loom.manual_seed(np.int64(7))
    b = loom.rand(4).tolist()
    loom.manual_seed(7)
    assert loom.rand(4).tolist() == b


def test_initial_seed():
    loom.manual_seed(42)
    assert loom.initial_seed() == 42
    loom.manual_seed(2**63 + 5)
    assert loom.initial_seed() == 2**63 + 5


def test_manual_seed_takes_what_int_takes_as_pytorchs():
    # torch.manual_seed calls int(seed): 1.5 and "1" seed with 1; "a" and None raise int()'s errors
    assert loom.manual_seed(1.5).initial_seed() == 1 and loom.manual_seed("1").initial_seed() == 1
    with pytest.raises(ValueError):
        loom.manual_seed("a")
    with pytest.raises(TypeError):
        loom.manual_seed(None)


@pytest.mark.parametrize("dtype", FLOATS, ids=repr)
def test_rand_in_unit_interval(dtype):
    x = to_numpy(loom.rand(100_000, dtype=dtype)).astype(np.float64)
    assert x.min() >= 0.0 and x.max() < 1.0
    assert abs(x.mean() - 0.5) < 0.01
    assert abs(x.std() - np.sqrt(1 / 12)) < 0.01
    # Roughly uniform: every tenth of [0, 1) gets about a tenth of the samples.
    counts = np.histogram(x, bins=10, range=(0, 1))[0]
    if dtype in (loom.float32, loom.float64):
        assert (np.abs(counts - 10_000) < 600).all(), counts


def test_rand_float32_has_full_resolution():
    x = to_numpy(loom.rand(100_000))
    assert len(np.unique(x)) > 99_000
    assert x.min() < 1e-4 and x.max() > 1 - 1e-4


@pytest.mark.parametrize("dtype", FLOATS, ids=repr)
def test_randn_moments(dtype):
    x = to_numpy(loom.randn(100_000, dtype=dtype)).astype(np.float64)
    assert np.isfinite(x).all()
    assert abs(x.mean()) < 0.02
    assert abs(x.std() - 1.0) < 0.02
    # Tails as a normal's: about 31.7% beyond 1 sigma, 4.6% beyond 2, 0.27% beyond 3.
    assert abs((np.abs(x) > 1).mean() - 0.3173) < 0.01
    assert abs((np.abs(x) > 2).mean() - 0.0455) < 0.005
    assert abs((np.abs(x) > 3).mean() - 0.0027) < 0.001
    # Symmetric.
    assert abs((x > 0).mean() - 0.5) < 0.01


def test_randn_samples_are_independent():
    x = to_numpy(loom.randn(100_001)).astype(np.float64)
    corr = np.corrcoef(x[:-1], x[1:])[0, 1]
    assert abs(corr) < 0.02


@pytest.mark.parametrize("low,high", [(0, 10), (-5, 5), (3, 4), (100, 117), (-(2**40), -(2**40) + 7)])
def test_randint_bounds_and_coverage(low, high):
    x = np.array(loom.randint(low, high, (20_000,)).tolist())
    assert x.min() >= low and x.max() < high
    assert set(x.tolist()) == set(range(low, high))  # every value is hit
    counts = np.bincount(x - low)
    expected = 20_000 / (high - low)
    assert (np.abs(counts - expected) < 6 * np.sqrt(expected) + 1).all()


def test_randint_high_only_and_dtypes():
    x = loom.randint(3, (1000,))
    assert set(x.tolist()) == {0, 1, 2}
    for dtype, low, high in ((loom.uint8, 250, 256), (loom.int32, -(2**31), -(2**31) + 3), (loom.int64, 0, 2),
                             (loom.float32, -3, 3), (loom.float64, 0, 5)):
        r = loom.randint(low, high, (2000,), dtype=dtype)
        assert r.dtype is dtype
        vals = np.array(r.tolist())
        assert vals.min() >= low and vals.max() < high and set(vals.tolist()) == set(range(low, high))


def test_randint_huge_range():
    x = np.array(loom.randint(-(2**62), 2**62, (10_000,)).tolist(), dtype=np.float64)
    assert x.min() >= -(2**62) and x.max() < 2**62
    assert (x < 0).mean() > 0.45 and (x > 0).mean() > 0.45


def test_randint_like_bounds():
    src = loom.zeros(100, 100, dtype=loom.int64)
    x = np.array(loom.randint_like(src, 5, 9).tolist())
    assert x.shape == (100, 100) and x.min() == 5 and x.max() == 8
    x = np.array(loom.randint_like(src, 4).tolist())
    assert x.min() == 0 and x.max() == 3
    x = np.array(loom.randint_like(src, low=2, high=4).tolist())
    assert set(x.ravel().tolist()) == {2, 3}
    x = np.array(loom.randint_like(src, high=3).tolist())
    assert set(x.ravel().tolist()) == {0, 1, 2}


@pytest.mark.parametrize("dtype", [loom.int64, loom.int32, loom.uint8, loom.bool])
def test_rand_with_int_dtype_raises(dtype):
    with pytest.raises(TypeError):
        loom.rand(3, dtype=dtype)
    with pytest.raises(TypeError):
        loom.randn(3, dtype=dtype)
    with pytest.raises(TypeError):
        loom.rand_like(loom.zeros(3, dtype=dtype))
    with pytest.raises(TypeError):
        loom.randn_like(loom.zeros(3, dtype=dtype))


def test_failed_random_call_does_not_advance_generator():
    loom.manual_seed(3)
    expected = loom.rand(5).tolist()
    loom.manual_seed(3)
    with pytest.raises(TypeError):
        loom.rand(5, dtype=loom.int64)
    assert loom.rand(5).tolist() == expected


def test_random_tensors_are_contiguous_and_new():
    a = loom.rand(3, 4)
    b = loom.rand(3, 4)
    assert a.is_contiguous() and a.data_ptr() != b.data_ptr()
    assert loom.rand(0).numel() == 0 and loom.randn(0, 3).shape == (0, 3)
    assert loom.randint(5, ()).dim() == 0
