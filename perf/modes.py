"""The modes of BENCH.md: which library runs a workload, on which device, with which settings.

A mode knows how to make itself current (loom's lazy modes switch executors; each executor keeps
its graph cache, so alternating modes does not lower traces again), how to wait for its device,
and how to read loom's counters. Workload code never branches on the mode beyond `mode.lib`.
"""

import importlib

import loom

try:
    import torch
except ImportError:  # the harness runs the loom modes alone and says so
    torch = None


class Mode:
    def __init__(self, name, lib, what, executor=None, gpu_only=False, capture=None):
        self.name = name
        self.lib = lib            # "loom", "torch" or "numpy"
        self.what = what          # one line for --help
        self.executor = executor  # loom lazy modes: the executor kind installed while it runs
        self.gpu_only = gpu_only
        self.capture = capture    # torch GPU modes: "cudagraph" or "compile"; "loom-compile"

    @property
    def module(self):
        return importlib.import_module(self.lib)

    @property
    def lazy(self):
        return self.executor is not None

    def unavailable(self, device):
        """Why this mode cannot run here, or None."""
        if self.gpu_only and device != "cuda":
            return "GPU only"
        if self.lib == "torch" and torch is None:
            return "PyTorch is not installed"
        if device == "cuda":
            if self.lib == "torch" and not torch.cuda.is_available():
                return "PyTorch has no CUDA device"
            if self.lib == "loom" and not loom.cuda.is_available():
                return "loom has no CUDA device: " + loom._C._cuda_unavailable_reason()
        return None

    def device(self, device):
        """The device string this mode puts tensors on."""
        if self.lazy:
            return "lazy:" + device
        return device

    def enter(self):
        """Makes this mode current before any of its work runs."""
        if self.lazy:
            loom._C._set_executor(self.executor)

    def synchronize(self, device):
        """Waits until the work launched so far has finished."""
        if self.lib == "loom":
            loom.synchronize()
        elif self.lib == "torch" and device == "cuda":
            torch.cuda.synchronize()

    def settle(self):
        """After a warm-up: waits until loom's background work is done (kernels of plans that kept
        running compiled again at -O3 and swapped in), so timed steps run the kernels a long run does."""
        if self.lib == "loom":
            loom._C._wait_for_optimized_kernels()

    def counters(self):
        """loom's counters now (None for other libraries)."""
        return loom.metrics() if self.lib == "loom" else None

    def memory(self, device):
        """(bytes allocated now, peak since the last reset) of this mode's allocator, or None."""
        if self.lib == "loom":
            stats = loom._C._memory_stats(_allocator_device(device))
            return stats["allocated_bytes"], stats["peak_allocated_bytes"]
        if self.lib == "torch" and device == "cuda":
            return torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated()
        return None

    def reset_peak_memory(self, device):
        if self.lib == "loom":
            loom._C._reset_peak_memory_stats(_allocator_device(device))
        elif self.lib == "torch" and device == "cuda":
            torch.cuda.reset_peak_memory_stats()


def _allocator_device(device):
    return "cuda:0" if device == "cuda" else "cpu"


MODES = [
    Mode("loom-lazy", "loom", 'device="lazy": fusion + cached graph replay', executor="fused"),
    Mode("loom-compile", "loom", "loom.compile(step): the whole step captured once, replayed without Python",
         executor="fused", capture="loom-compile"),
    Mode("loom-lazy-nofuse", "loom", "graph replay without fusion (ablation, as LOOM_FUSION=0)", executor="unfused"),
    Mode("loom-lazy-nograph", "loom", "fusion without CUDA graph replay (ablation, as LOOM_CUDA_GRAPHS=0)",
         executor="fused-nograph", gpu_only=True),
    Mode("loom-eager", "loom", "one kernel per op"),
    Mode("torch-eager", "torch", "PyTorch, the same program"),
    Mode("torch-cudagraph", "torch", "the PyTorch step captured with torch.cuda.graph and replayed", gpu_only=True,
         capture="cudagraph"),
    Mode("torch-compile", "torch", 'torch.compile(step, mode="reduce-overhead")', gpu_only=True, capture="compile"),
    Mode("numpy", "numpy", "numpy (ops and chain only)"),
]

BY_NAME = {m.name: m for m in MODES}

# The baselines ratios are reported against, in this order.
BASELINES = ["torch-eager", "torch-cudagraph", "torch-compile"]
