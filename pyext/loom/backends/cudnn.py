"""loom.backends.cudnn, as torch.backends.cudnn (`import torch.backends.cudnn as cudnn` works).

loom does not use cuDNN: is_available() is False. The switches are accepted with PyTorch's
defaults and change nothing: loom's convolutions are its own kernels, deterministic and never
autotuned, so `benchmark` has nothing to choose and `deterministic` nothing to forbid.
"""

import contextlib
import sys

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available():
    return False


def version():
    return None


def is_acceptable(tensor):
    return False


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True):
    """with loom.backends.cudnn.flags(...): the switches set inside, restored after."""
    module = sys.modules[__name__]
    values = dict(enabled=enabled, benchmark=benchmark, benchmark_limit=benchmark_limit,
                  deterministic=deterministic, allow_tf32=allow_tf32)
    saved = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(module, k, v)
