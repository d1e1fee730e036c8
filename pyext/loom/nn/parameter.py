"""loom.nn.Parameter: a tensor that is a module's parameter (torch.nn.parameter)."""

import loom


class Parameter(loom.Tensor):
    """A tensor that is a module's parameter: a leaf that requires grad by default. Assigning
    one to a Module attribute registers it."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = loom.empty(0)
        p = loom.Tensor._make_subclass(cls, data)
        p.requires_grad_(requires_grad)
        return p

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return (Parameter, (self.detach(), self.requires_grad))

    def __deepcopy__(self, memo):
        """A parameter with a copy of the values, as PyTorch: the same requires_grad, no grad
        history, storage of its own."""
        if id(self) not in memo:
            memo[id(self)] = Parameter(self.detach().clone(), self.requires_grad)
        return memo[id(self)]
