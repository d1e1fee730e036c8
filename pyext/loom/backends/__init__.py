"""loom.backends: switches of the compute backends, as torch.backends (cuda, cudnn, mps)."""

from loom.backends import cuda, cudnn, mps  # noqa: F401
