"""loom.utils: data loading (loom.utils.data, as torch.utils.data) and hook handles."""

from loom.utils import data, hooks

__all__ = ["data", "hooks"]
