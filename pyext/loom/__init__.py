"""loom: a lazy graph-capture engine for PyTorch-style tensor programs.

The API follows PyTorch's names and semantics, so a script ports by changing its import and its
device string. Where loom differs from PyTorch, the docstring says so.
"""

from loom import _C
from loom._C import *  # noqa: F401,F403  the tensor type, dtypes, creation ops and the op library
from loom._C import bool, bfloat16, float16, float32, float64, int8, int16, int32, int64, uint8  # noqa: A001
from loom._tensor_str import set_printoptions
from loom import accelerator, autograd, backends, cuda, jit, linalg, onnx, testing, version
del linalg_vector_norm, linalg_matrix_norm, linalg_norm, linalg_multi_dot, linalg_vecdot, linalg_cross  # noqa: F821
from loom._functional import (atleast_1d, atleast_2d, atleast_3d, block_diag, broadcast_shapes,  # noqa: F401
                              broadcast_tensors, cartesian_prod, chain_matmul, einsum, meshgrid, result_type, spmm,
                              tensordot)
from loom._dtype_info import can_cast, finfo, iinfo  # noqa: F401
from loom._config import show_config
from loom._memory_format import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format
from loom.autograd import enable_grad, inference_mode, no_grad, set_grad_enabled
from loom import profiler
from loom.profiler import explain_syncs

__version__ = version.__version__

# PyTorch's constants (torch.pi, torch.e, torch.inf, torch.nan).
pi = 3.141592653589793
e = 2.718281828459045
inf = float("inf")
nan = float("nan")

# PyTorch's dtype aliases.
float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16
byte = uint8


def memory_stats(device="cpu"):
    """Statistics of the caching allocator of `device` (bytes allocated, reserved, peaks, counts)."""
    return _C._memory_stats(device)


def empty_cache(device="cpu"):
    """Returns the allocator's cached free blocks of `device` to the system.

    Memory held by cached plans (their arenas) is not free: clear_plan_cache() first to give
    that back too."""
    _C._empty_cache(device)


def clear_plan_cache():
    """Drops every cached plan (what lazy traces and eager GPU ops were compiled into), freeing
    their memory: arenas go back to the allocator (empty_cache() then returns them to the system),
    a GPU plan's CUDA Graph and private pool are released. Kernel modules no remaining plan uses
    are unloaded; the disk cache keeps them, so a trace seen again is lowered again without
    compiling. Not in PyTorch. The cache is bounded (LOOM_PLAN_CACHE_MB, LOOM_PLAN_CACHE_ENTRIES;
    loom.metrics() reports plan_cache_entries, plan_cache_bytes and plan_cache_evictions)."""
    _C._clear_plan_cache()


def reset_peak_memory_stats(device="cpu"):
    """Starts the peak statistics of `device` again from the current values."""
    _C._reset_peak_memory_stats(device)


from loom.serialization import load, save  # noqa: E402
from loom import distributions, func, nn, optim, special, utils  # noqa: E402  (they import loom)
# PyTorch names these resampling functions torch.<name> too (the same function).
from loom.nn.functional import channel_shuffle, pixel_shuffle, pixel_unshuffle  # noqa: E402,F401
from loom import amp, cpu  # noqa: E402
from loom import multiprocessing  # noqa: E402  (registers how shared tensors travel between processes)
from loom.cuda import amp as _cuda_amp  # noqa: E402,F401  (loom.cuda.amp, as torch.cuda.amp)
from loom._backend_settings import (are_deterministic_algorithms_enabled, get_deterministic_debug_mode,  # noqa: E402
                                    get_float32_matmul_precision, is_deterministic_algorithms_warn_only_enabled,
                                    set_deterministic_debug_mode, set_float32_matmul_precision,
                                    use_deterministic_algorithms)
from loom.amp.autocast_mode import (autocast, autocast_decrement_nesting, autocast_increment_nesting,  # noqa: E402
                                    clear_autocast_cache, get_autocast_cpu_dtype, get_autocast_dtype,
                                    get_autocast_gpu_dtype, is_autocast_cache_enabled, is_autocast_cpu_enabled,
                                    is_autocast_enabled, set_autocast_cache_enabled, set_autocast_cpu_dtype,
                                    set_autocast_cpu_enabled, set_autocast_dtype, set_autocast_enabled,
                                    set_autocast_gpu_dtype)
from loom._compile import compile  # noqa: E402,A001  (loom.compile, as torch.compile)
from loom import compiler  # noqa: E402
from loom import _aliasing  # noqa: E402
from loom import random  # noqa: E402
from loom.random import (fork_rng, get_rng_state, initial_seed, manual_seed, seed,  # noqa: E402,F401,F811
                         set_rng_state)
from loom._creation import (asarray, empty_strided, frombuffer, logspace, range, scalar_tensor,  # noqa: E402,A001
                            to_dlpack)
from loom._legacy_tensor import cpu_classes as _legacy_classes  # noqa: E402
from loom._threads import (get_num_interop_threads, init_num_threads, set_num_interop_threads,  # noqa: E402,F401
                           set_num_threads)
from loom._nn_function_forms import *  # noqa: E402,F401,F403  (torch.dropout, torch.layer_norm, ...)
from loom._tensor_methods import matrix_power, mvlgamma  # noqa: E402,F401  (torch.matrix_power, torch.mvlgamma)
# torch.lstsq, solve, matrix_rank, eig: removed in PyTorch 1.9, names that raise its RuntimeError in 1.13
lstsq, solve, matrix_rank, eig = (linalg._removed("lstsq", True), linalg._removed("solve", False),
                                  linalg._removed("matrix_rank", True), linalg._removed("eig", False))
from loom.autograd import (is_anomaly_check_nan_enabled, is_anomaly_enabled, is_inference_mode_enabled,  # noqa: E402
                           set_anomaly_enabled)
from loom._type_functions import is_storage, set_default_tensor_type, typename  # noqa: E402,F401
from loom._tensor_functions import (cumulative_trapezoid, gradient, histogram, isin, lu_unpack,  # noqa: E402,F401
                                    trapezoid, trapz, vander)
from loom._windows import (bartlett_window, blackman_window, hamming_window, hann_window,  # noqa: E402,F401
                           kaiser_window)
from loom._view_copies import *  # noqa: E402,F401,F403  (view_copy, permute_copy, ..., split_with_sizes, fill)

globals().update(_legacy_classes)  # loom.FloatTensor, loom.LongTensor, ... (legacy constructors)

_aliasing.install()  # `sys.modules["torch"] = loom` then `import torch.nn` gives loom.nn itself

__all__ = [name for name in dir() if not name.startswith("_")]

from loom._tensor_methods import resize_as_  # noqa: E402,F401  (torch.resize_as_)
from loom import _out  # noqa: E402  (last: the functions of _out_names.py, from every module above, take out=)
_out.enable()
