"""loom.random (torch.random): the global random state.

loom.manual_seed reseeds every device's default generator and returns loom.default_generator
(the CPU's, as PyTorch returns its CPU generator). get_rng_state / set_rng_state save and restore
the CPU's default generator (lazy tensors on the CPU draw from it); the state is loom's
(runtime/random.h: seed and offset), not PyTorch's, so it moves between loom processes only.
"""

import contextlib

import loom
from loom import _C

default_generator = _C.default_generator


def manual_seed(seed):
    """Reseeds the default generator of every device; returns loom.default_generator."""
    if not isinstance(seed, int):
        seed = int(seed)
    _C.manual_seed(seed)
    return default_generator


def seed():
    """Reseeds every device's default generator from the system's entropy; returns the seed."""
    s = default_generator.seed()
    _C.manual_seed(s)
    return s


def initial_seed():
    """The seed the CPU's default generator was last seeded with."""
    return default_generator.initial_seed()


def get_rng_state():
    """The CPU default generator's state: a uint8 tensor (see the module's note)."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restores a state get_rng_state() returned."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True):
    """Restores the CPU's and the GPUs' (all, or `devices`) default generators on exit, as
    torch.random.fork_rng."""
    if not enabled:
        yield
        return
    if devices is None:
        devices = range(loom.cuda.device_count())
    indices = [d if isinstance(d, int) else loom.device(d).index or 0 for d in devices]
    generators = [default_generator] + [_C._default_generator(f"cuda:{i}") for i in indices]
    states = [g.get_state() for g in generators]
    try:
        yield
    finally:
        for g, state in zip(generators, states):
            g.set_state(state)
