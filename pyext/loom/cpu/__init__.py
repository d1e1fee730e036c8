"""loom.cpu: as torch.cpu (its amp submodule)."""

from loom.cpu import amp  # noqa: F401
