"""Where the data utilities' randomness comes from: a numpy generator seeded from loom's
generator (so loom.manual_seed decides shuffles, splits and worker seeds), or from the
`generator` a caller passes: a numpy.random.Generator is used as it is; any other object is
handed to loom.randint as its generator."""

import numpy as np

import loom


def draw_seed(generator=None):
    """A 63-bit seed: from loom's global generator, or from `generator`."""
    if isinstance(generator, np.random.Generator):
        return int(generator.integers(0, 2**63 - 1))
    kwargs = {} if generator is None else {"generator": generator}
    high, low = loom.randint(0, 2**31 - 1, (2,), device="cpu", **kwargs).tolist()
    return (high << 31) | low


def rng(generator=None):
    """A numpy generator for one use (one epoch of a sampler, one split)."""
    if isinstance(generator, np.random.Generator):
        return generator
    return np.random.default_rng(draw_seed(generator))


def permutation(n, generator=None):
    return rng(generator).permutation(n)
