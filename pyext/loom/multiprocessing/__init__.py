"""loom.multiprocessing (torch.multiprocessing): Python's multiprocessing, plus tensors shared
between processes (tensor_sharing.py: Tensor.share_memory_(), Module.share_memory(), shared
tensors sent by descriptor through Queues, Pipes and process arguments) and spawn /
start_processes (spawn.py) for one worker per rank, as distributed training scripts start them.

Sharing strategies: loom shares memory files by descriptor (PyTorch's "file_descriptor"). PyTorch's
other strategy, "file_system", exists to avoid running out of descriptors; it is accepted, and
recorded by set_sharing_strategy, but loom still passes descriptors (one per shared tensor)."""

import multiprocessing
from multiprocessing import *  # noqa: F401,F403  (torch.multiprocessing re-exports it)

from loom.multiprocessing.tensor_sharing import is_shared, register_reducers, share_memory_
from loom.multiprocessing.spawn import (ProcessContext, ProcessException, ProcessExitedException,  # noqa: F401
                                        ProcessRaisedException, SpawnContext, spawn, start_processes)

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies", "spawn", "start_processes",
           "ProcessContext", "ProcessException", "ProcessRaisedException", "ProcessExitedException",
           "SpawnContext"] + multiprocessing.__all__

_STRATEGIES = {"file_descriptor", "file_system"}
_strategy = "file_descriptor"


def set_sharing_strategy(new_strategy):
    """Records the strategy (see the module docstring); an unknown one raises ValueError."""
    global _strategy
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"unknown sharing strategy {new_strategy!r}: one of {sorted(_STRATEGIES)}")
    _strategy = new_strategy


def get_sharing_strategy():
    return _strategy


def get_all_sharing_strategies():
    return set(_STRATEGIES)


register_reducers()
