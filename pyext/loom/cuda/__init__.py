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
    return f"cuda:{current_device()}" if device is None else device


def current_device():
    """The index of the GPU that "cuda" without an index means on this thread (0 until
    set_device changes it), as PyTorch's."""
    return _C._cuda_current_device()


def set_device(device):
    """Makes `device` (an index, "cuda:N" or a loom.device) the GPU that "cuda" means on this
    thread. A negative index does nothing, as in PyTorch; a GPU that cannot be used raises."""
    if isinstance(device, int) and device < 0:
        return
    _C._cuda_current_device(device)


class device:
    """`with loom.cuda.device(i):` makes GPU i the current one inside the block (None or a
    negative index: no change)."""

    def __init__(self, device):
        self.device = device
        self._previous = None

    def __enter__(self):
        if self.device is not None and not (isinstance(self.device, int) and self.device < 0):
            self._previous = current_device()
            set_device(self.device)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            _C._cuda_current_device(self._previous)
        return False


class _CudaDeviceProperties:
    """What get_device_properties returns: name, major, minor (the compute capability),
    total_memory (bytes) and multi_processor_count, as PyTorch's."""

    def __init__(self, name, major, minor, total_memory, multi_processor_count):
        self.name, self.major, self.minor = name, major, minor
        self.total_memory, self.multi_processor_count = total_memory, multi_processor_count

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def get_device_properties(device=None):
    return _CudaDeviceProperties(*_C._cuda_device_properties(_device(device)))


def get_device_name(device=None):
    return get_device_properties(device).name


def get_device_capability(device=None):
    props = get_device_properties(device)
    return props.major, props.minor


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


def _generators(device):
    indices = range(max(1, device_count())) if device == "all" else [_C.device(_device(device)).index or 0]
    return [_C._default_generator(f"cuda:{i}") for i in indices]


def get_rng_state(device="cuda"):
    """The state of a GPU's default generator (loom.Generator.get_state: seed and offset)."""
    return _generators(device)[0].get_state()


def get_rng_state_all():
    return [g.get_state() for g in _generators("all")]


def set_rng_state(new_state, device="cuda"):
    _generators(device)[0].set_state(new_state)


def set_rng_state_all(new_states):
    for g, state in zip(_generators("all"), new_states):
        g.set_state(state)


def seed():
    """Reseeds the current GPU's generator from the system's entropy."""
    manual_seed(_generators("cuda")[0].seed())


def seed_all():
    s = _generators("cuda")[0].seed()
    manual_seed_all(s)


def initial_seed():
    return _generators("cuda")[0].initial_seed()


def is_bf16_supported():
    """True where a GPU is present: loom computes bfloat16 on any GPU (through float32 arithmetic)."""
    return is_available()


from loom._legacy_tensor import cuda_classes as _legacy_classes  # noqa: E402

globals().update(_legacy_classes)  # loom.cuda.FloatTensor, ... (legacy constructors on a GPU)
