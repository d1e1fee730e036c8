"""loom.nn.Parameter: a tensor that is a module's parameter (torch.nn.parameter)."""

import loom


class Parameter(loom.Tensor):
    """A tensor that is a module's parameter: a leaf that requires grad by default. Assigning
    one to a Module attribute registers it. Pickling and copy.deepcopy are loom.Tensor's
    (loom/_tensor.py): a Parameter stays a Parameter, with its requires_grad."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = loom.empty(0)
        p = loom.Tensor._make_subclass(cls, data)
        p.requires_grad_(requires_grad)
        return p

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()
