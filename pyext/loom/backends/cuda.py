"""loom.backends.cuda, as torch.backends.cuda.

- `matmul.allow_tf32`: whether float32 matrix products on a GPU may use tensor-float-32 (faster,
  with 10-bit mantissa inputs). False by default, as in PyTorch; the CUDA executor keys its plans
  by it. `loom.set_float32_matmul_precision("high" or "medium")` turns it on, "highest" off, as
  PyTorch's does.
- `matmul.allow_fp16_reduced_precision_reduction` / `allow_bf16_...`: accepted and kept; loom's
  half-precision products always accumulate in float32.
"""

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
