"""loom.accelerator, as torch.accelerator (PyTorch 2.6): the machine's accelerator, for loom a CUDA
GPU. Lazy mode is not an accelerator in this sense: it is a mode on a device (`device="lazy"`)."""

from loom import _C, cuda


def is_available():
    """True when a usable GPU is present."""
    return cuda.is_available()


def current_accelerator(check_available=False):
    """device('cuda') in a build with the CUDA backend (and, with check_available, a usable GPU);
    else None."""
    if not cuda.is_compiled() or (check_available and not cuda.is_available()):
        return None
    return _C.device("cuda")


def device_count():
    return cuda.device_count()


def current_device_index():
    """The GPU loom uses by default (cuda:0), or -1 without one."""
    return 0 if cuda.is_available() else -1


def synchronize(device=None):
    """Waits for the GPU's queued work (cuda.synchronize); nothing to wait for without one."""
    if cuda.is_available():
        cuda.synchronize(device)
