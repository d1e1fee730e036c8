"""loom.Generator: every random function takes generator=, draws from that generator's stream
(independent of the global one, and the global one of it), repeatably, on cpu and lazy alike;
loom.utils.data's random_split, RandomSampler and DataLoader take one too. Errors as PyTorch's."""

import numpy as np
import pytest

import loom
from loom.utils.data import DataLoader, RandomSampler, TensorDataset, random_split

DEVICES = ["cpu", "lazy"]

# Each random function, called with generator=g on `device`.
DRAWS = {
    "rand": lambda g, d: loom.rand(5, generator=g, device=d),
    "randn": lambda g, d: loom.randn(2, 3, generator=g, device=d),
    "randint": lambda g, d: loom.randint(0, 100, (6,), generator=g, device=d),
    "randint_high": lambda g, d: loom.randint(7, (6,), generator=g, device=d),
    "randperm": lambda g, d: loom.randperm(9, generator=g, device=d),
    "normal_sizes": lambda g, d: loom.normal(0.0, 2.0, (4,), generator=g, device=d),
    "normal_tensors": lambda g, d: loom.normal(loom.zeros(4, device=d), loom.ones(4, device=d), generator=g),
    "normal_mean": lambda g, d: loom.normal(loom.zeros(4, device=d), 1.0, generator=g),
    "bernoulli": lambda g, d: loom.bernoulli(loom.full((8,), 0.5, device=d), generator=g),
    "bernoulli_p": lambda g, d: loom.bernoulli(loom.zeros(8, device=d), 0.5, generator=g),
    "poisson": lambda g, d: loom.poisson(loom.full((5,), 3.0, device=d), generator=g),
    "multinomial": lambda g, d: loom.multinomial(loom.ones(6, device=d), 3, generator=g),
    "uniform_": lambda g, d: loom.empty(5, device=d).uniform_(-1, 1, generator=g),
    "normal_": lambda g, d: loom.empty(5, device=d).normal_(generator=g),
    "exponential_": lambda g, d: loom.empty(5, device=d).exponential_(generator=g),
    "random_": lambda g, d: loom.empty(5, device=d).random_(0, 10, generator=g),
    "bernoulli_": lambda g, d: loom.empty(5, device=d).bernoulli_(0.5, generator=g),
    "geometric_": lambda g, d: loom.empty(5, device=d).geometric_(0.3, generator=g),
    "cauchy_": lambda g, d: loom.empty(5, device=d).cauchy_(generator=g),
    "log_normal_": lambda g, d: loom.empty(5, device=d).log_normal_(generator=g),
}


def values(t):
    return t.detach().cpu().numpy()


@pytest.mark.parametrize("name", sorted(DRAWS))
@pytest.mark.parametrize("device", DEVICES)
def test_a_generators_stream_is_its_own_and_repeatable(name, device):
    draw = DRAWS[name]
    loom.manual_seed(0)
    g = loom.Generator().manual_seed(123)
    first = values(draw(g, device))
    second = values(draw(g, device))  # the generator advanced
    global_after = values(loom.rand(4, device=device))
    # The same seed gives the same values, whatever the global generator did meanwhile.
    loom.manual_seed(55)
    loom.rand(3, device=device)
    g2 = loom.Generator().manual_seed(123)
    np.testing.assert_array_equal(values(draw(g2, device)), first)
    np.testing.assert_array_equal(values(draw(g2, device)), second)
    # Drawing from g did not advance the global generator.
    loom.manual_seed(0)
    np.testing.assert_array_equal(values(loom.rand(4, device=device)), global_after)
    # cpu and lazy draw the same values from the same generator state.
    other = "lazy" if device == "cpu" else "cpu"
    np.testing.assert_array_equal(values(draw(loom.Generator().manual_seed(123), other)), first)


def test_different_seeds_differ_and_a_continuous_distribution_has_no_repeats():
    a = values(loom.rand(100, generator=loom.Generator().manual_seed(1)))
    b = values(loom.rand(100, generator=loom.Generator().manual_seed(2)))
    assert not np.array_equal(a, b) and len(set(a.tolist())) == 100


def test_state_seed_and_device():
    g = loom.Generator()
    assert g.initial_seed() == 67280421310721  # PyTorch's default seed
    assert g.device == loom.device("cpu") and loom.Generator("lazy").device == loom.device("lazy")
    assert g.manual_seed(-1).initial_seed() == 2**64 - 1
    g.manual_seed(7)
    loom.rand(3, generator=g)
    state = g.get_state()
    assert state.dtype == loom.uint8 and state.shape == (16,)
    after = values(loom.rand(3, generator=g))
    g.manual_seed(99)
    assert g.set_state(state) is g
    np.testing.assert_array_equal(values(loom.rand(3, generator=g)), after)
    s = g.seed()
    assert isinstance(s, int) and g.initial_seed() == s
    # the global state: get_rng_state / set_rng_state / fork_rng, and manual_seed's result
    assert loom.manual_seed(3) is loom.default_generator
    saved = loom.get_rng_state()
    x = values(loom.rand(3))
    loom.set_rng_state(saved)
    np.testing.assert_array_equal(values(loom.rand(3)), x)
    with loom.random.fork_rng():
        loom.rand(10)
    y = values(loom.rand(3))
    loom.set_rng_state(saved)
    loom.rand(3)
    np.testing.assert_array_equal(values(loom.rand(3)), y)
    assert loom.initial_seed() == 3


def test_errors_as_pytorch():
    g = loom.Generator()
    with pytest.raises(TypeError, match="argument 'generator' must be loom.Generator, not int"):
        loom.rand(2, generator=5)
    with pytest.raises(RuntimeError, match="manual_seed expected a long, but got str"):
        g.manual_seed("a")
    with pytest.raises(RuntimeError, match="Overflow when unpacking long"):
        g.manual_seed(2**64 + 3)
    with pytest.raises(TypeError, match="RNG state must be a torch.ByteTensor"):
        g.set_state(loom.zeros(16))
    with pytest.raises(TypeError, match="expected a torch.ByteTensor, but got int"):
        g.set_state(5)
    with pytest.raises(RuntimeError, match="RNG state size to be 3"):
        g.set_state(loom.zeros(3, dtype=loom.uint8))
    with pytest.raises(TypeError, match="unexpected keyword argument 'generator'"):
        loom.rand_like(loom.ones(2), generator=g)  # as PyTorch's: the _like functions take none


def test_a_compiled_step_drawing_from_a_generator_runs_uncompiled_and_advances_it():
    g = loom.Generator().manual_seed(5)

    @loom.compile
    def step(x):
        return x + loom.rand(3, generator=g, device="lazy")

    x = loom.zeros(3, device="lazy")
    with pytest.warns(RuntimeWarning, match="draws from a loom.Generator"):  # says why, once it gives up
        got = [values(step(x)) for _ in range(8)]
    reference = loom.Generator().manual_seed(5)
    expected = [values(loom.rand(3, generator=reference)) for _ in range(8)]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_data_utilities_take_a_generator():
    data = TensorDataset(loom.arange(20))
    a = [list(s.indices) for s in random_split(data, [15, 5], generator=loom.Generator().manual_seed(42))]
    loom.rand(5)  # the global generator moves: the split does not
    b = [list(s.indices) for s in random_split(data, [15, 5], generator=loom.Generator().manual_seed(42))]
    assert a == b and sorted(a[0] + a[1]) == list(range(20))
    c = [list(s.indices) for s in random_split(data, [15, 5], generator=loom.Generator().manual_seed(43))]
    assert c != a
    order = lambda seed: list(RandomSampler(range(10), generator=loom.Generator().manual_seed(seed)))
    assert order(1) == order(1) and sorted(order(1)) == list(range(10)) and order(1) != order(2)
    batches = lambda seed: [b[0].tolist() for b in DataLoader(data, batch_size=4, shuffle=True,
                                                              generator=loom.Generator().manual_seed(seed))]
    assert batches(3) == batches(3) and batches(3) != batches(4)
    # one generator across epochs: each epoch a new order, the sequence repeatable
    g = loom.Generator().manual_seed(9)
    loader = DataLoader(data, batch_size=20, shuffle=True, generator=g)
    epochs = [next(iter(loader))[0].tolist() for _ in range(2)]
    g.manual_seed(9)
    assert [next(iter(loader))[0].tolist() for _ in range(2)] == epochs and epochs[0] != epochs[1]
