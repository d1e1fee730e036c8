"""torch.nn.utils.stateless: functional_call, as loom.func's (the same function)."""

from loom.func import functional_call

__all__ = ["functional_call"]
