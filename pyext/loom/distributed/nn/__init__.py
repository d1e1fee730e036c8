"""loom.distributed.nn: collectives that autograd differentiates, as torch.distributed.nn."""

from loom.distributed.nn import functional

__all__ = ["functional"]
