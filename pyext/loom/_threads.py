"""PyTorch's thread-count functions: torch.set_num_threads(n) sizes loom's CPU thread pool (the
threads generated kernels split their loops over, runtime/thread_pool.h) and OpenBLAS's, as it
sizes PyTorch's intra-op pool and BLAS; get_num_threads() reports the pool's size.

The inter-op count (set_num_interop_threads / get_num_interop_threads) is PyTorch's pool for
running independent ops side by side (torch.jit.fork). loom runs the ops of a trace in one
compiled program and has no such pool: the count is checked and kept as PyTorch does (settable
once, before any is asked for) so programs that tune it run, and it changes nothing.
"""

import os

from loom import _C

get_num_threads = _C.get_num_threads
set_num_threads = _C.set_num_threads

_interop_threads = None  # None: never set, the default (the machine's cores) until it is asked for


def get_num_interop_threads():
    """The inter-op thread count: set_num_interop_threads's, else the machine's cores."""
    global _interop_threads
    if _interop_threads is None:
        _interop_threads = os.cpu_count() or 1
    return _interop_threads


def set_num_interop_threads(n):
    """Sets the inter-op thread count, once, before it is first read (PyTorch's rule)."""
    global _interop_threads
    if isinstance(n, bool) or not isinstance(n, int):
        raise RuntimeError(f"set_num_interop_threads expects an int, but got {type(n).__name__}")
    if n <= 0:
        raise RuntimeError("Expected num_threads > 0 to be true, but got false.")
    if _interop_threads is not None:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work has started or "
                           "set_num_interop_threads called")
    _interop_threads = n


def init_num_threads():
    """Makes the calling thread use the set thread count (PyTorch initializes OpenMP/MKL per
    thread). loom's pool is process-wide and already sized: nothing to do."""
