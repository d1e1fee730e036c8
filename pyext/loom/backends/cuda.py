"""loom.backends.cuda, as torch.backends.cuda.

- `matmul.allow_tf32`: whether float32 matrix products on a GPU may use tensor-float-32 (faster,
  with 10-bit mantissa inputs). False by default, as in PyTorch; the CUDA executor keys its plans
  by it. `loom.set_float32_matmul_precision("high" or "medium")` turns it on, "highest" off, as
  PyTorch's does.
- `matmul.allow_fp16_reduced_precision_reduction` / `allow_bf16_...`: accepted and kept; loom's
  half-precision products always accumulate in float32.
- The scaled-dot-product-attention backend switches (`enable_flash_sdp`, `flash_sdp_enabled`, ...,
  `sdp_kernel`; loom.nn.attention.sdpa_kernel sets the same flags): kept and readable, but loom
  has one attention implementation, which serves every choice.
"""

import contextlib
import enum

from loom import _C


class _Matmul:
    def __init__(self):
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self):
        return _C._cuda_allow_tf32()

    @allow_tf32.setter
    def allow_tf32(self, value):
        _C._cuda_allow_tf32(bool(value))


matmul = _Matmul()


def is_built():
    """Whether this loom was built with its CUDA backend."""
    return _C._cuda_compiled()


class SDPBackend(enum.IntEnum):
    """The attention backends PyTorch chooses among (torch.nn.attention.SDPBackend)."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_sdp_enabled = {backend: True for backend in SDPBackend if backend is not SDPBackend.ERROR}


def _switch(backend):
    def enable(enabled: bool):
        _sdp_enabled[backend] = bool(enabled)

    def enabled():
        return _sdp_enabled[backend]
    return enable, enabled


enable_math_sdp, math_sdp_enabled = _switch(SDPBackend.MATH)
enable_flash_sdp, flash_sdp_enabled = _switch(SDPBackend.FLASH_ATTENTION)
enable_mem_efficient_sdp, mem_efficient_sdp_enabled = _switch(SDPBackend.EFFICIENT_ATTENTION)
enable_cudnn_sdp, cudnn_sdp_enabled = _switch(SDPBackend.CUDNN_ATTENTION)


@contextlib.contextmanager
def _sdp_flags(enabled):
    """Sets the backends' flags to `enabled` ({backend: bool}) inside the block."""
    before = dict(_sdp_enabled)
    _sdp_enabled.update(enabled)
    try:
        yield
    finally:
        _sdp_enabled.clear()
        _sdp_enabled.update(before)


def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
    """The attention backends enabled inside a `with` block (PyTorch's older form of sdpa_kernel)."""
    return _sdp_flags({SDPBackend.FLASH_ATTENTION: enable_flash, SDPBackend.MATH: enable_math,
                       SDPBackend.EFFICIENT_ATTENTION: enable_mem_efficient,
                       SDPBackend.CUDNN_ATTENTION: enable_cudnn})
