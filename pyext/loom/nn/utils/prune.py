"""Pruning by masks (torch.nn.utils.prune).

Pruning parameter `name` of a module re-parametrizes it: the original values move to the parameter
`name + "_orig"`, a buffer `name + "_mask"` (1 keeps an entry, 0 prunes it) is added, and `name`
becomes a plain attribute holding `mask * orig`, recomputed before every forward by the pruning
method itself, registered as a forward pre-hook. Gradients therefore reach `name_orig` through the
mask, and state_dict carries both `name_orig` and `name_mask`, as in PyTorch.

Invariants:
- a module has at most one pruning hook per parameter name. Pruning an already pruned parameter
  again combines the methods in a PruningContainer (which replaces the earlier hook), and the new
  method only sees the entries (or, for structured methods, the channels) the earlier masks kept;
- `remove(module, name)` makes the pruning permanent: `name` becomes a Parameter again holding
  `mask * orig`, and `name_orig`, `name_mask` and the hook are gone.

A method's `compute_mask(t, default_mask)` returns a mask of t's shape and never writes into
default_mask."""

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

import loom
from loom.nn.utils.convert_parameters import parameters_to_vector

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]


class BasePruningMethod(ABC):
    """A way of choosing which entries of a tensor to prune. Subclasses set PRUNING_TYPE
    ("unstructured": entries independently; "structured": whole slices along `self.dim`;
    "global": the method sees the whole tensor even inside a container) and compute_mask."""

    _tensor_name = None

    def __call__(self, module, inputs):
        # The forward pre-hook: the pruned value is recomputed from name_orig before each call.
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The mask for tensor t, given the mask of earlier pruning (default_mask)."""

    def apply_mask(self, module):
        """`name_mask * name_orig` of the module this method prunes."""
        if self._tensor_name is None:
            raise RuntimeError(f"Module {module} has to be pruned")
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prunes module.<name> with cls(*args, **kwargs) (see the module docstring)."""
        method = cls(*args, **kwargs)
        method._tensor_name = name
        orig = getattr(module, name)
        if importance_scores is None:
            importance_scores = orig
        if not isinstance(importance_scores, loom.Tensor) or importance_scores.shape != orig.shape:
            shape = importance_scores.shape if isinstance(importance_scores, loom.Tensor) else type(importance_scores)
            raise ValueError(f"importance_scores should have the same shape as parameter {name} of {module}: "
                             f"{tuple(shape)} against {tuple(orig.shape)}")

        earlier = _take_pruning_hook(module, name)
        if earlier is not None:
            # A new container (the earlier hook is left as it was, to be put back on failure).
            container = PruningContainer(*(earlier if isinstance(earlier, PruningContainer) else (earlier,)))
            container.add_pruning_method(method)
            method = container

        first = earlier is None
        saved = {table: dict(getattr(module, table)) for table in ("_parameters", "_buffers")}
        if first:
            # name moves to name_orig; name itself becomes a plain attribute set below.
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = loom.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone(memory_format=loom.contiguous_format)

        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            # Leave the module as it was, in its order: nothing half-pruned.
            if first:
                module.__dict__.pop(name, None)
            else:
                module.register_forward_pre_hook(earlier)
            for table, entries in saved.items():
                getattr(module, table).clear()
                getattr(module, table).update(entries)
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """t with this method's mask applied (t itself is not changed)."""
        if importance_scores is not None and importance_scores.shape != t.shape:
            raise ValueError(f"importance_scores should have the same shape as tensor t: "
                             f"{tuple(importance_scores.shape)} against {tuple(t.shape)}")
        scores = t if importance_scores is None else importance_scores
        mask = self.compute_mask(scores, default_mask=loom.ones_like(t) if default_mask is None else default_mask)
        return t * mask

    def remove(self, module):
        """Makes the pruning permanent (see the module docstring)."""
        if self._tensor_name is None:
            raise RuntimeError(f"Module {module} has to be pruned before pruning can be removed")
        pruned = self.apply_mask(module)
        module.__dict__.pop(self._tensor_name, None)
        orig = module._parameters.pop(self._tensor_name + "_orig")
        with loom.no_grad():
            orig.copy_(pruned)
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


def _take_pruning_hook(module, name):
    """Removes and returns the pruning method registered for module.<name>, or None."""
    keys = [k for k, hook in module._forward_pre_hooks.items()
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
    if len(keys) > 1:
        raise RuntimeError(f"Parameter {name} of module {module} has more than one pruning hook")
    return module._forward_pre_hooks.pop(keys[0]) if keys else None


class PruningContainer(BasePruningMethod):
    """Several pruning methods of one parameter, applied in order: each later method computes its
    mask over what the earlier ones kept."""

    def __init__(self, *methods):
        self._pruning_methods = ()
        if methods:
            self._tensor_name = methods[0]._tensor_name
        for method in methods:
            self.add_pruning_method(method)

    def add_pruning_method(self, method):
        if not isinstance(method, BasePruningMethod):
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' "
                             f"to PruningContainer. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """The last method's mask, computed over the part of t that default_mask keeps."""
        method = self._pruning_methods[-1]
        mask = default_mask.to(dtype=t.dtype)
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            kept = default_mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError("Pruning methods of PRUNING_TYPE 'structured' need to have the attribute `dim` "
                                     "defined.")
            dim = method.dim + t.dim() if method.dim < 0 else method.dim
            if not 0 <= dim < t.dim():
                raise IndexError(f"Pruning dimension {method.dim} out of range for a tensor of {t.dim()} dimensions")
            others = [d for d in range(t.dim()) if d != dim]
            channels_kept = default_mask.sum(dim=others) != 0
            kept = tuple(channels_kept if d == dim else slice(None) for d in range(t.dim()))
        elif kind == "global":
            kept = tuple(slice(None) for _ in range(t.dim()))
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        partial = method.compute_mask(t[kept], default_mask=mask[kept])
        mask[kept] = partial.to(dtype=mask.dtype)
        return mask


class Identity(BasePruningMethod):
    """Prunes nothing: the parameter gets a mask of ones."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


def _check_amount(amount):
    """amount: a number of entries (a non-negative int) or a fraction (a float in [0, 1])."""
    if isinstance(amount, bool) or not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if isinstance(amount, numbers.Integral) and amount < 0 or \
            not isinstance(amount, numbers.Integral) and not 0.0 <= float(amount) <= 1.0:
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _count_to_prune(amount, size):
    """How many of `size` entries (or channels) `amount` prunes."""
    if isinstance(amount, numbers.Integral):
        if amount > size:
            raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={size}")
        return int(amount)
    return round(amount * size)


def _check_structured(t):
    if t.dim() <= 1:
        raise ValueError(f"Structured pruning can only be applied to multidimensional tensors. Found tensor of shape "
                         f"{tuple(t.shape)} with {t.dim()} dims")


class _Unstructured(BasePruningMethod):
    """Prunes the `amount` entries that rank first by _pruned_first(t): the largest of a flat
    score, or (largest=False) the smallest."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        mask = default_mask.clone(memory_format=loom.contiguous_format)
        count = _count_to_prune(self.amount, t.nelement())
        if count:
            scores, largest = self._pruned_first(t)
            mask.view(-1)[loom.topk(scores.view(-1), k=count, largest=largest).indices] = 0
        return mask


class RandomUnstructured(_Unstructured):
    """Prunes `amount` entries chosen uniformly at random."""

    def _pruned_first(self, t):
        return loom.rand_like(t), True

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_Unstructured):
    """Prunes the `amount` entries of smallest absolute value."""

    def _pruned_first(self, t):
        return loom.abs(t), False

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class _Structured(BasePruningMethod):
    """Prunes `amount` whole slices of t along `dim`; _kept(t, dim, channels, count) says which
    slices stay (indices or a bool vector over the channels)."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _check_amount(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _check_structured(t)
        channels = t.shape[self.dim]
        count = _count_to_prune(self.amount, channels)
        if count == 0:
            return default_mask
        dim = self.dim % t.dim()
        mask = loom.zeros_like(t)
        mask[tuple(self._kept(t, dim, channels, count) if d == dim else slice(None) for d in range(t.dim()))] = 1
        return mask * default_mask.to(dtype=mask.dtype)


class RandomStructured(_Structured):
    """Prunes `amount` whole slices along `dim`, chosen uniformly at random."""

    def _kept(self, t, dim, channels, count):
        draws = loom.rand(channels, device=t.device)
        return draws > loom.kthvalue(draws, k=count).values

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_Structured):
    """Prunes the `amount` slices along `dim` of smallest L`n` norm (n: as the `p` of
    torch.norm: a number, inf, -inf, 'fro' or 'nuc')."""

    def __init__(self, amount, n, dim=-1):
        super().__init__(amount, dim)
        self.n = n

    def _kept(self, t, dim, channels, count):
        norms = loom.norm(t, p=self.n, dim=[d for d in range(t.dim()) if d != dim])
        return loom.topk(norms, k=channels - count, largest=True).indices

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where a given mask is 0."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise ValueError(f"the mask's shape {tuple(self.mask.shape)} differs from the parameter's "
                             f"{tuple(default_mask.shape)}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    """Re-parametrizes module.<name> with a mask of ones (nothing pruned). Returns module."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prunes `amount` random entries of module.<name>. Returns module."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prunes the `amount` entries of module.<name> with the smallest |importance_scores| (by
    default the parameter itself). Returns module."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prunes `amount` random slices of module.<name> along dim. Returns module."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prunes the `amount` slices of module.<name> along dim with the smallest L`n` norm of
    importance_scores (by default the parameter). Returns module."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    """Prunes module.<name> where mask is 0. Returns module."""
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prunes the (module, name) pairs of `parameters` together, as one vector: with
    L1Unstructured and amount=0.2, the 20% smallest entries across all of them. Each parameter
    then carries its own slice of the joint mask (a CustomFromMask)."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = parameters_to_vector([importance_scores.get((m, n), getattr(m, n)) for m, n in parameters])
    earlier = parameters_to_vector([_mask_or_ones(m, n) for m, n in parameters])

    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f'{pruning_method} of type {method.PRUNING_TYPE}')
    container = PruningContainer(method)
    joint = container.compute_mask(scores, earlier)

    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        custom_from_mask(module, name, mask=joint[start:start + param.numel()].view_as(param))
        start += param.numel()


def _mask_or_ones(module, name):
    mask = getattr(module, name + "_mask", None)
    return loom.ones_like(getattr(module, name)) if mask is None else mask


def remove(module, name):
    """Makes the pruning of module.<name> permanent (see the module docstring). Returns module."""
    method = _take_pruning_hook(module, name)
    if method is None:
        raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")
    method.remove(module)
    return module


def is_pruned(module):
    """Whether module or any of its submodules has a pruned parameter."""
    return any(isinstance(hook, BasePruningMethod)
               for m in module.modules() for hook in m._forward_pre_hooks.values())
