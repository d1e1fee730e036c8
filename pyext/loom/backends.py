"""loom.backends: switches of the compute backends, as torch.backends.

Only `loom.backends.cuda.matmul.allow_tf32` exists: whether float32 matrix products on a GPU may
use tensor-float-32 (faster, with 10-bit mantissa inputs). False by default, as in PyTorch.
"""

from loom import _C


class _Matmul:
    @property
    def allow_tf32(self):
        return _C._cuda_allow_tf32()

    @allow_tf32.setter
    def allow_tf32(self, value):
        _C._cuda_allow_tf32(bool(value))


class _Cuda:
    matmul = _Matmul()


cuda = _Cuda()
