"""loom.cuda: GPU availability and memory, as torch.cuda.

loom is built with its CUDA backend whenever the CUDA toolkit is present, and loads on machines
without a GPU or a driver; there `is_available()` is False and `unavailable_reason()` says why.
"""

from loom import _C


def is_available():
    """True when at least one usable GPU is present."""
    return _C._cuda_device_count() > 0


def device_count():
    """The number of usable GPUs (0 without a driver)."""
    return _C._cuda_device_count()


def is_compiled():
    """True when this build of loom contains the CUDA backend."""
    return _C._cuda_compiled()


def unavailable_reason():
    """Why no GPU can be used ('' when one can). Not in PyTorch; handy in skip messages."""
    return _C._cuda_unavailable_reason()


def _device(device):
    return "cuda:0" if device is None else device


def memory_stats(device=None):
    """The caching allocator's statistics for a GPU."""
    return _C._memory_stats(_device(device))


def memory_allocated(device=None):
    return memory_stats(device)["allocated_bytes"]


def memory_reserved(device=None):
    return memory_stats(device)["reserved_bytes"]


def max_memory_allocated(device=None):
    return memory_stats(device)["peak_allocated_bytes"]


def empty_cache(device=None):
    """Returns cached free GPU blocks to the driver."""
    if is_available():
        _C._empty_cache(_device(device))


def reset_peak_memory_stats(device=None):
    _C._reset_peak_memory_stats(_device(device))


def synchronize(device=None):
    """Waits until the work queued on a GPU has finished (loom runs it on one stream per GPU).
    Raises what a kernel reported since the last wait: a fault, or a data error such as an index
    out of range, which GPU kernels can only report asynchronously."""
    _C._cuda_synchronize(_device(device))


def manual_seed(seed):
    """Reseeds the current GPU's generator (cuda:0; lazy tensors on a GPU draw from it too). Like
    PyTorch's, it does nothing visible on a machine without a GPU and never touches the CPU's."""
    _C._manual_seed_device("cuda:0", int(seed))


def manual_seed_all(seed):
    """Reseeds the generator of every GPU."""
    for index in range(max(1, device_count())):
        _C._manual_seed_device(f"cuda:{index}", int(seed))


def is_bf16_supported():
    """True where a GPU is present: loom computes bfloat16 on any GPU (through float32 arithmetic)."""
    return is_available()
