"""Random sampling beyond rand / randn / randint: bernoulli, normal (every overload), poisson,
multinomial, randperm, the *_like functions' options, and the in-place fills (uniform_, normal_,
exponential_, geometric_, log_normal_, cauchy_, random_, bernoulli_).

Distributions are checked statistically with fixed seeds (Kolmogorov-Smirnov and chi-square tests
at a strict level, and exact properties: ranges, permutations, no repeats without replacement),
not against PyTorch's numbers, which come from another generator. Values depend only on the seed,
the op count and the shape: eager, lazy and the CUDA lowering's host emulator give the same
samples. Errors and gradients (zero for the distributions' parameters) are PyTorch's."""

import math

import numpy as np
import pytest

import loom
from _ops_helpers import assert_close, check, device, torch  # noqa: F401

stats = pytest.importorskip("scipy.stats")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

LEVEL = 1e-4  # a fixed seed passes or fails for good: reject only clear mismatches


@pytest.fixture(autouse=True)
def _reseed():
    loom.manual_seed(0)
    yield
    loom.manual_seed(0)


def draw(make, device="cpu", seed=123):
    loom.manual_seed(seed)
    return make(device).double().numpy().ravel()


def ks(sample, cdf, *args):
    p = stats.kstest(sample, cdf, args=args).pvalue
    assert p > LEVEL, f"KS p-value {p}"


def chi_square(counts, probabilities):
    counts = np.asarray(counts, dtype=np.float64)
    expected = np.asarray(probabilities, dtype=np.float64) * counts.sum()
    p = stats.chisquare(counts, expected).pvalue
    assert p > LEVEL, f"chi-square p-value {p}: {counts} vs {expected}"


def empty(device, *shape, dtype=None):
    return loom.empty(*shape, dtype=dtype or loom.float32, device=device)


N = 20000

# ---- every sampler: same seed, same values, on every device and executor ----

SAMPLERS = {
    "bernoulli": lambda d: loom.bernoulli(loom.full((50, 40), 0.3, device=d)),
    "bernoulli_p": lambda d: loom.bernoulli(loom.zeros(50, 40, device=d), 0.7),
    "bernoulli_tensor_p": lambda d: loom.bernoulli(loom.linspace(0, 1, 300).to(d)),
    "bernoulli_": lambda d: empty(d, 80, 25).bernoulli_(0.25),
    "bernoulli_tensor_": lambda d: empty(d, 80, 25, dtype=loom.int64).bernoulli_(loom.full((25,), 0.6, device=d)),
    "normal_tensors": lambda d: loom.normal(loom.arange(40.0, device=d), loom.linspace(0.5, 2, 40).to(d)),
    "normal_tensor_float": lambda d: loom.normal(loom.zeros(30, 20, device=d), 2.0),
    "normal_float_tensor": lambda d: loom.normal(1.5, loom.ones(30, 20, dtype=loom.float64, device=d)),
    "normal_size": lambda d: loom.normal(2.0, 3.0, size=(40, 30), device=d),
    "poisson_small": lambda d: loom.poisson(loom.full((40, 30), 3.5, device=d)),
    "poisson_large": lambda d: loom.poisson(loom.full((40, 30), 250.0, dtype=loom.float64, device=d)),
    "poisson_mixed": lambda d: loom.poisson(loom.linspace(0, 40, 600).to(d)),
    "multinomial": lambda d: loom.multinomial(loom.tensor([[0.1, 0.2, 0.7], [1.0, 0.0, 3.0]], device=d), 50, True),
    "multinomial_without": lambda d: loom.multinomial(loom.arange(1.0, 21.0, device=d), 12),
    "randperm": lambda d: loom.randperm(300, device=d),
    "uniform_": lambda d: empty(d, 60, 30).uniform_(-2, 3),
    "normal_": lambda d: empty(d, 60, 30, dtype=loom.float64).normal_(1, 0.5),
    "exponential_": lambda d: empty(d, 60, 30).exponential_(2.5),
    "geometric_": lambda d: empty(d, 60, 30, dtype=loom.int64).geometric_(0.3),
    "log_normal_": lambda d: empty(d, 60, 30).log_normal_(0.5, 0.75),
    "cauchy_": lambda d: empty(d, 60, 30, dtype=loom.float64).cauchy_(1, 2),
    "random_": lambda d: empty(d, 60, 30, dtype=loom.int32).random_(),
    "random_to": lambda d: empty(d, 60, 30).random_(17),
    "random_from_to": lambda d: empty(d, 60, 30, dtype=loom.int64).random_(-5, 9),
}


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_same_seed_same_values_on_every_device(name):
    make = SAMPLERS[name]
    eager = draw(make)
    again = draw(make)
    np.testing.assert_array_equal(again, eager)
    assert not np.array_equal(draw(make, seed=124), eager)
    for executor in ["interpreter", "fused", "cuda-emulated"]:
        loom._C._set_executor(executor)
        try:
            lazy = draw(make, "lazy")
        finally:
            loom._C._set_executor("compiled")
        # The same draws; elementwise transforms of them may round differently in fused kernels
        # (vector math): integers and bits agree exactly, floats to a few ulps.
        np.testing.assert_allclose(lazy, eager, rtol=1e-6, atol=1e-6, err_msg=executor)


def test_a_replayed_graph_draws_new_numbers():
    loom.manual_seed(5)
    x = loom.full((1000,), 4.0, device="lazy")
    first = loom.poisson(x).tolist()
    second = loom.poisson(x).tolist()
    assert first != second


# ---- distributions ----

def test_bernoulli_frequencies(device):
    p = np.array([0.0, 0.05, 0.3, 0.5, 0.95, 1.0])
    x = loom.bernoulli(loom.tensor(np.tile(p, (N, 1)), device=device)).numpy()
    assert set(np.unique(x)) <= {0.0, 1.0}
    assert x[:, 0].sum() == 0 and x[:, -1].sum() == N
    for j in range(1, 5):
        chi_square([N - x[:, j].sum(), x[:, j].sum()], [1 - p[j], p[j]])
    y = empty(device, N, dtype=loom.bool).bernoulli_(0.2).numpy()
    chi_square([N - y.sum(), y.sum()], [0.8, 0.2])


@pytest.mark.parametrize("name", ["normal_tensors", "normal_tensor_float", "normal_float_tensor", "normal_size", "normal_"])
def test_normal_overloads(device, name):
    loom.manual_seed(7)
    if name == "normal_tensors":
        mean, std = np.linspace(-3, 3, N), np.linspace(0.5, 2, N)
        x = loom.normal(loom.tensor(mean, device=device), loom.tensor(std, device=device)).numpy()
        ks((x - mean) / std, "norm")
        return
    shape_mean_std = {"normal_tensor_float": (0.0, 2.0), "normal_float_tensor": (1.5, 1.0), "normal_size": (2.0, 3.0),
                      "normal_": (1.0, 0.5)}[name]
    x = SAMPLERS[name](device).double().numpy().ravel()
    while x.size < N:
        x = np.concatenate([x, SAMPLERS[name](device).double().numpy().ravel()])
    ks(x, "norm", *shape_mean_std)


def test_normal_dtypes_and_shapes(device):
    assert loom.normal(0.0, 1.0, (2, 3), dtype=loom.float64, device=device).dtype == loom.float64
    assert loom.normal(loom.zeros(2, 1, device=device), loom.ones(3, device=device)).shape == (2, 3)
    assert loom.normal(loom.zeros(4, dtype=loom.float64, device=device)).dtype == loom.float64
    t = loom.normal(0.0, 1.0, size=(2,), requires_grad=True)
    assert t.requires_grad and t.is_leaf


@pytest.mark.parametrize("rate", [0.0, 0.4, 3.5, 9.9, 10.0, 27.0, 500.0])
def test_poisson(device, rate):
    x = loom.poisson(loom.full((N,), rate, dtype=loom.float64, device=device)).numpy()
    assert np.all(x == np.round(x)) and np.all(x >= 0)
    if rate == 0:
        assert np.all(x == 0)
        return
    # chi-square over the pmf's values, bins of too little mass merged into their neighbours
    hi = int(stats.poisson.ppf(0.9999, rate))
    counts = [np.sum(x == k) for k in range(hi)] + [np.sum(x >= hi)]
    probs = [stats.poisson.pmf(k, rate) for k in range(hi)] + [stats.poisson.sf(hi - 1, rate)]
    chi_square(*merge_small_bins(counts, probs))


def merge_small_bins(counts, probs, least=5):
    """Adjacent bins merged until each expects at least `least` of the N samples."""
    out_c, out_p, c, p = [], [], 0, 0.0
    for ci, pi in zip(counts, probs):
        c, p = c + ci, p + pi
        if p * N >= least:
            out_c.append(c)
            out_p.append(p)
            c, p = 0, 0.0
    out_c[-1] += c
    out_p[-1] += p
    return out_c, np.array(out_p) / sum(out_p)


def test_poisson_dtypes_and_errors(device):
    assert loom.poisson(loom.ones(3, dtype=loom.float64, device=device)).dtype == loom.float64
    for values, dtype in [([-1.0, 0.0, 3.0], "float32"), ([float("nan")], "float32"), ([1, 2], "int64"),
                          ([1.0, 2.0], "float16")]:
        check(device, lambda m, r: m.poisson(r), np.array(values, dtype=dtype))


def test_multinomial_with_replacement_frequencies(device):
    w = np.array([[1.0, 0.0, 2.0, 5.0, 2.0], [0.0, 0.0, 0.0, 1.0, 0.0]])
    s = loom.multinomial(loom.tensor(w, device=device), N, replacement=True).numpy()
    assert s.shape == (2, N) and s.dtype == np.int64
    chi_square(np.bincount(s[0], minlength=5)[[0, 2, 3, 4]], w[0, [0, 2, 3, 4]] / w[0].sum())
    assert np.bincount(s[0], minlength=5)[1] == 0
    assert np.all(s[1] == 3)
    one = loom.multinomial(loom.tensor([0.25, 0.75], device=device), 7, True)
    assert one.shape == (7,)


def test_multinomial_without_replacement(device):
    w = np.array([1.0, 2.0, 3.0, 4.0, 0.0, 10.0])
    firsts = []
    for _ in range(4):
        s = loom.multinomial(loom.tensor(np.tile(w, (2000, 1)), device=device), 5).numpy()
        assert all(len(set(row)) == 5 for row in s) and not np.any(s == 4)
        firsts.append(s[:, 0])
    chi_square(np.bincount(np.concatenate(firsts), minlength=6)[[0, 1, 2, 3, 5]], w[[0, 1, 2, 3, 5]] / w.sum())


MULTINOMIAL_ERRORS = [
    (lambda m, p: m.multinomial(p, 4), [0.2, 0.8]),
    (lambda m, p: m.multinomial(p, 2), [0.2, 0.0]),
    (lambda m, p: m.multinomial(p, 1), [0.2, -1.0]),
    (lambda m, p: m.multinomial(p, 1), [0.0, 0.0]),
    (lambda m, p: m.multinomial(p, 1), [[[0.2]]]),
    (lambda m, p: m.multinomial(p, 0), [0.2, 0.3]),
    (lambda m, p: m.multinomial(p.long(), 1), [1.0, 2.0]),
    (lambda m, p: m.multinomial(p, 1), [0.2, float("inf")]),
    (lambda m, p: m.multinomial(p, 1, True), [float("nan"), 1.0]),
]


@pytest.mark.parametrize("case", range(len(MULTINOMIAL_ERRORS)))
def test_multinomial_errors(device, case):
    call, values = MULTINOMIAL_ERRORS[case]
    check(device, call, np.array(values))


def test_randperm(device):
    for n in (0, 1, 7, 5000):
        p = loom.randperm(n, device=device)
        assert p.dtype == loom.int64 and sorted(p.tolist()) == list(range(n))
    assert loom.randperm(5, dtype=loom.float32, device=device).dtype == loom.float32
    # each position is uniform over the values
    firsts = np.array([loom.randperm(4, device=device).tolist() for _ in range(2000)])
    for column in range(4):
        chi_square(np.bincount(firsts[:, column], minlength=4), [0.25] * 4)
    check(device, lambda m: m.randperm(-1))


def test_uniform_exponential_log_normal_cauchy(device):
    loom.manual_seed(11)
    ks(empty(device, N).uniform_(-2, 3).double().numpy(), "uniform", -2, 5)
    ks(empty(device, N, dtype=loom.float64).exponential_(2.5).numpy(), "expon", 0, 1 / 2.5)
    ks(empty(device, N).log_normal_(0.5, 0.75).double().numpy(), "lognorm", 0.75, 0, math.exp(0.5))
    ks(empty(device, N, dtype=loom.float64).cauchy_(1, 2).numpy(), "cauchy", 1, 2)
    x = empty(device, 1000, dtype=loom.float16).uniform_()
    assert 0 <= x.min().item() and x.max().item() < 1


def test_geometric(device):
    x = empty(device, N, dtype=loom.int64).geometric_(0.3).numpy()
    assert x.min() >= 1
    counts = [np.sum(x == k) for k in range(1, 15)] + [np.sum(x >= 15)]
    probs = [stats.geom.pmf(k, 0.3) for k in range(1, 15)] + [stats.geom.sf(14, 0.3)]
    chi_square(counts, probs)
    assert empty(device, 5).geometric_(0.5).dtype == loom.float32


def test_random_ranges(device):
    x = empty(device, N, dtype=loom.int64).random_(-5, 9).numpy()
    assert x.min() == -5 and x.max() == 8
    chi_square(np.bincount(x + 5, minlength=14), [1 / 14] * 14)
    assert set(empty(device, 1000).random_(3).numpy().tolist()) == {0.0, 1.0, 2.0}
    assert set(empty(device, 1000, dtype=loom.bool).random_().numpy().tolist()) == {False, True}
    u8 = empty(device, N, dtype=loom.uint8).random_().numpy()
    assert u8.min() == 0 and u8.max() == 255
    h = empty(device, N, dtype=loom.float16).random_().numpy()
    assert h.min() >= 0 and h.max() <= 2048 and np.all(h == np.round(h))
    big = empty(device, 1000, dtype=loom.int32).random_(-3, None).numpy()
    assert big.min() >= -3 and big.max() > 2**30
    check(device, lambda m: m.empty(3, dtype=m.int64).random_(0, 3).shape)


# (call, inputs...): the inputs are made on the device under test.
SAMPLING_ERRORS = [
    (lambda m, x: x.exponential_(-1), np.zeros(3)),
    (lambda m, x: x.exponential_(), np.zeros(3, np.int64)),
    (lambda m, x: x.geometric_(0), np.zeros(3)),
    (lambda m, x: x.geometric_(1.5), np.zeros(3)),
    (lambda m, x: x.log_normal_(1, -1), np.zeros(3)),
    (lambda m, x: x.uniform_(2, 1), np.zeros(3)),
    (lambda m, x: x.uniform_(), np.zeros(3, np.int64)),
    (lambda m, x: x.normal_(0, -1), np.zeros(3)),
    (lambda m, x: x.normal_(), np.zeros(3, np.int64)),
    (lambda m, x: x.random_(5, 3), np.zeros(3, np.int64)),
    (lambda m, x: x.random_(0, 300), np.zeros(3, np.uint8)),
    (lambda m, x: m.bernoulli(x), np.array([1, 0])),
    (lambda m, x: m.bernoulli(x), np.array([1.5, 0.0])),
    (lambda m, x: m.bernoulli(x, 1.5), np.array([1.0, 0.0])),
    (lambda m, x, s: m.normal(x, s), np.array([1.0, 2.0]), np.array([-1.0, 2.0])),
    (lambda m, x, s: m.normal(1.0, s), np.array([1.0, 2.0]), np.array([-1.0, 2.0])),
    (lambda m, x: m.normal(x.long(), 1.0), np.array([1.0, 2.0])),
    (lambda m, x: x.requires_grad_().uniform_(), np.zeros(3)),
]


@pytest.mark.parametrize("case", range(len(SAMPLING_ERRORS)))
def test_sampling_errors(device, case):
    call, *inputs = SAMPLING_ERRORS[case]
    check(device, call, *inputs)


def test_normal_of_numbers_errors():
    for call in (lambda m: m.normal(0.0, -1.0, (2,)), lambda m: m.normal(0.0, 1.0)):
        try:
            call(torch)
        except Exception as e:
            with pytest.raises(type(e)):
                call(loom)


def test_a_generator_argument_of_another_type_is_refused():
    with pytest.raises(TypeError, match="must be loom.Generator, not object"):
        loom.bernoulli(loom.ones(2) * 0.5, generator=object())
    loom.bernoulli(loom.ones(2) * 0.5, generator=None)


def test_like_functions_take_dtype_and_device(device):
    base = loom.zeros(3, 4, dtype=loom.float64, device=device)
    assert loom.rand_like(base).dtype == loom.float64 and loom.rand_like(base).device == base.device
    assert loom.randn_like(base, dtype=loom.float32).dtype == loom.float32
    r = loom.randint_like(base, 3, 9, dtype=loom.int32, device="cpu")
    assert r.dtype == loom.int32 and not r.is_lazy and r.min() >= 3 and r.max() < 9
    assert loom.rand_like(base, device="lazy").is_lazy
    assert loom.randn_like(base, requires_grad=True).requires_grad


# ---- gradients: zero for the parameters, as PyTorch's ----

GRADIENT_CASES = {
    "normal_tensors": lambda m, a, b: m.normal(a, b.abs() + 0.1),
    "normal_tensor_float": lambda m, a, b: m.normal(a, 2.0),
    "normal_float_tensor": lambda m, a, b: m.normal(0.5, b.abs()),
    "poisson": lambda m, a, b: m.poisson(a.abs() + 1),
    "bernoulli": lambda m, a, b: m.bernoulli(a.sigmoid()),
    "uniform_": lambda m, a, b: (a * 2).uniform_(),
    "normal_": lambda m, a, b: (b + 1).normal_() * a,
}


@pytest.mark.parametrize("name", list(GRADIENT_CASES))
def test_gradients_of_samples_are_zero(device, name):
    fn = GRADIENT_CASES[name]
    values = np.random.default_rng(0).standard_normal((2, 3, 4))
    grads = {}
    for lib, dev in ((torch, None), (loom, device)):
        a, b = (lib.tensor(v, dtype=lib.float64, requires_grad=True) if lib is torch
                else loom.tensor(v, dtype=loom.float64, device=dev, requires_grad=True) for v in values)
        out = fn(lib, a, b)
        assert out.requires_grad
        (out * out.detach()).sum().backward()
        grads[lib] = [None if t.grad is None else t.grad.detach().numpy() if lib is torch else t.grad.numpy()
                      for t in (a, b)]
    for got, want in zip(grads[loom], grads[torch]):
        if want is None:
            assert got is None or not np.any(got)
        elif name == "normal_":
            assert got is not None and got.shape == want.shape  # the sample differs: shapes only
        else:
            np.testing.assert_array_equal(got, want)
