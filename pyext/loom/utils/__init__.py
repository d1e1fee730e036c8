"""loom.utils: data loading (loom.utils.data, as torch.utils.data), activation checkpointing
(loom.utils.checkpoint) and hook handles."""

from loom.utils import checkpoint, data, hooks

__all__ = ["checkpoint", "data", "hooks"]
