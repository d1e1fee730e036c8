"""loom.nn.init against torch.nn.init: calculate_gain's table and errors; the distribution each
initializer draws from (Kolmogorov-Smirnov tests of large draws against the exact
distribution, and against PyTorch's own draws), the deterministic ones value for value
(eye_, dirac_, constant_), orthogonality, sparsity, repeatability under loom.manual_seed, and
that every initializer writes in place, without gradient history, on cpu and lazy tensors."""

import math

import numpy as np
import pytest
from scipy import stats

import loom
from _nn_helpers import np_
from _ops_helpers import torch  # noqa: F401

init = loom.nn.init
P_MIN = 1e-3  # the KS tests' p-value threshold: a correct sampler fails it once in a thousand runs


def drawn(fn, shape=(200, 300), device="cpu", dtype=loom.float64, seed=0):
    loom.manual_seed(seed)
    t = loom.empty(*shape, dtype=dtype, device=device)
    out = fn(t)
    assert out is t
    return np_(t).ravel()


@pytest.mark.parametrize("nonlinearity,param", [("linear", None), ("conv2d", None), ("conv_transpose3d", None),
                                                ("sigmoid", None), ("tanh", None), ("relu", None),
                                                ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", 3),
                                                ("selu", None)])
def test_calculate_gain_matches_pytorch(nonlinearity, param):
    assert init.calculate_gain(nonlinearity, param) == torch.nn.init.calculate_gain(nonlinearity, param)


def test_calculate_gain_errors():
    for lib in (torch, loom):
        with pytest.raises(ValueError, match="Unsupported nonlinearity gelu"):
            lib.nn.init.calculate_gain("gelu")
        with pytest.raises(ValueError, match="negative_slope True not a valid number"):
            lib.nn.init.calculate_gain("leaky_relu", True)


def uniform_cdf(a, b):
    return stats.uniform(a, b - a).cdf


def normal_cdf(mean, std):
    return stats.norm(mean, std).cdf


# (loom initializer, torch initializer, the exact distribution's CDF for a (200, 300) tensor)
FAN_IN, FAN_OUT = 300, 200
DISTRIBUTIONS = {
    "uniform": (lambda t: init.uniform_(t, -2, 3), lambda t: torch.nn.init.uniform_(t, -2, 3), uniform_cdf(-2, 3)),
    "normal": (lambda t: init.normal_(t, 1.5, 0.5), lambda t: torch.nn.init.normal_(t, 1.5, 0.5),
               normal_cdf(1.5, 0.5)),
    "xavier_uniform": (lambda t: init.xavier_uniform_(t, gain=2.0), lambda t: torch.nn.init.xavier_uniform_(t, 2.0),
                       uniform_cdf(-2 * math.sqrt(6 / 500), 2 * math.sqrt(6 / 500))),
    "xavier_normal": (lambda t: init.xavier_normal_(t), lambda t: torch.nn.init.xavier_normal_(t),
                      normal_cdf(0, math.sqrt(2 / 500))),
    "kaiming_uniform": (lambda t: init.kaiming_uniform_(t, a=math.sqrt(5)),
                        lambda t: torch.nn.init.kaiming_uniform_(t, a=math.sqrt(5)),
                        uniform_cdf(-1 / math.sqrt(FAN_IN), 1 / math.sqrt(FAN_IN))),
    "kaiming_normal_fan_out": (lambda t: init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
                               lambda t: torch.nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
                               normal_cdf(0, math.sqrt(2 / FAN_OUT))),
    "trunc_normal": (lambda t: init.trunc_normal_(t, 0.5, 2.0, -1.0, 3.0),
                     lambda t: torch.nn.init.trunc_normal_(t, 0.5, 2.0, -1.0, 3.0),
                     stats.truncnorm((-1.0 - 0.5) / 2, (3.0 - 0.5) / 2, 0.5, 2.0).cdf),
    "trunc_normal_default": (lambda t: init.trunc_normal_(t), lambda t: torch.nn.init.trunc_normal_(t),
                             stats.truncnorm(-2, 2).cdf),
}


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_distribution_matches_exact_and_pytorch(name):
    lfn, tfn, cdf = DISTRIBUTIONS[name]
    values = drawn(lfn)
    assert stats.kstest(values, cdf).pvalue > P_MIN
    torch.manual_seed(0)
    tvalues = tfn(torch.empty(200, 300, dtype=torch.float64)).numpy().ravel()
    assert stats.ks_2samp(values, tvalues).pvalue > P_MIN
    np.testing.assert_array_equal(values, drawn(lfn))  # repeatable under manual_seed
    assert not np.array_equal(values, drawn(lfn, seed=1))


def test_trunc_normal_stays_in_bounds_in_every_dtype():
    for dtype in (loom.float32, loom.float16, loom.bfloat16, loom.float64):
        values = drawn(lambda t: init.trunc_normal_(t, 0.0, 1.0, -0.5, 0.25), (300, 300), dtype=dtype)
        assert values.min() >= -0.5 and values.max() <= 0.25
        assert values.min() < -0.49 and values.max() > 0.24  # the whole interval is reached


def test_erfinv_composition_is_accurate():
    y = np.linspace(-0.999999, 0.999999, 2001)
    x = np_(init._erfinv(loom.tensor(y)))
    from scipy.special import erfinv
    np.testing.assert_allclose(x, erfinv(y), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(5, 5), (3, 7), (8, 2), (4, 3, 2)])
@pytest.mark.parametrize("gain", [1.0, 2.5])
def test_orthogonal(shape, gain):
    values = drawn(lambda t: init.orthogonal_(t, gain), shape).reshape(shape[0], -1) / gain
    rows, cols = values.shape
    if rows <= cols:
        np.testing.assert_allclose(values @ values.T, np.eye(rows), atol=1e-12)
    else:
        np.testing.assert_allclose(values.T @ values, np.eye(cols), atol=1e-12)
    # uniform over the orthogonal group (Haar): an entry of a 5x5 one has the distribution
    # PyTorch's draws have
    if shape == (5, 5) and gain == 1.0:
        many = np.concatenate([drawn(lambda t: init.orthogonal_(t), (5, 5), seed=s)[:1] for s in range(400)])
        torch.manual_seed(0)
        tmany = np.concatenate([torch.nn.init.orthogonal_(torch.empty(5, 5)).numpy().ravel()[:1]
                                for _ in range(400)])
        assert stats.ks_2samp(many, tmany).pvalue > P_MIN
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        init.orthogonal_(loom.empty(3))


def test_sparse():
    values = drawn(lambda t: init.sparse_(t, 0.3, std=0.5), (40, 50)).reshape(40, 50)
    zeros_per_column = (values == 0).sum(0)
    assert (zeros_per_column == math.ceil(0.3 * 40)).all()
    nonzero = values[values != 0]
    assert stats.kstest(nonzero, normal_cdf(0, 0.5)).pvalue > P_MIN
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.sparse_(loom.empty(2, 2, 2), 0.1)


@pytest.mark.parametrize("shape,groups", [((4, 4, 3), 1), ((6, 2, 3, 3), 2), ((2, 5, 3, 3, 3), 1), ((3, 2, 4), 3)])
def test_dirac_matches_pytorch(shape, groups):
    want = torch.nn.init.dirac_(torch.empty(*shape), groups).numpy()
    np.testing.assert_array_equal(np_(init.dirac_(loom.empty(*shape), groups)), want)
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        init.dirac_(loom.empty(5, 2, 3), 2)


def test_eye_constant_ones_zeros():
    np.testing.assert_array_equal(np_(init.eye_(loom.empty(3, 5))), torch.nn.init.eye_(torch.empty(3, 5)).numpy())
    assert np_(init.constant_(loom.empty(2, 2), 0.25)).tolist() == [[0.25, 0.25], [0.25, 0.25]]
    assert np_(init.ones_(loom.empty(2))).tolist() == [1.0, 1.0]
    assert np_(init.zeros_(loom.ones(2))).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.eye_(loom.empty(2, 2, 2))


def test_fan_errors_and_modes():
    for lib in (torch, loom):
        with pytest.raises(ValueError, match="Fan in and fan out can not be computed"):
            lib.nn.init.xavier_uniform_(lib.empty(3))
        with pytest.raises(ValueError, match="Mode fan_avg not supported"):
            lib.nn.init.kaiming_uniform_(lib.empty(3, 3), mode="fan_avg")
    assert init._calculate_fan_in_and_fan_out(loom.empty(4, 3, 2, 5)) == (30, 40)


def test_in_place_without_history_on_parameters_and_lazy_tensors():
    p = loom.nn.Parameter(loom.zeros(20, 30))
    ptr = p.data_ptr()
    for fn in (init.kaiming_uniform_, init.xavier_normal_, init.orthogonal_, init.trunc_normal_, init.eye_,
               lambda t: init.sparse_(t, 0.5)):
        fn(p)
        assert p.is_leaf and p.requires_grad and p.grad_fn is None and p.data_ptr() == ptr
    lazy = loom.zeros(20, 30, device="lazy")
    for fn in (init.kaiming_uniform_, init.trunc_normal_, init.orthogonal_, init.eye_):
        assert fn(lazy) is lazy and lazy.is_lazy
    np.testing.assert_array_equal(np_(lazy), np.eye(20, 30))


def test_deprecated_aliases_warn():
    with pytest.warns(FutureWarning, match="nn.init.uniform is now deprecated in favor of nn.init.uniform_"):
        init.uniform(loom.empty(2))
