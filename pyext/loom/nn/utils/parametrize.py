"""Parametrizations, as torch.nn.utils.parametrize: a module's tensor (a parameter or a buffer)
becomes the output of a chain of modules applied to the stored original, recomputed at each
access, so a constraint (a norm, a symmetry) holds by construction and gradients reach the
original.

register_parametrization(module, "weight", P) moves module.weight to
module.parametrizations.weight.original (original0, original1, ... where P.right_inverse splits a
value into several) and gives the module a class of its own, made once per parametrized module,
whose property `weight` evaluates the chain. State dicts use PyTorch's keys
(parametrizations.weight.original). Assigning module.weight = value stores the right inverse of
value in the original. Inside `with cached():` each parametrized tensor is computed once."""

import contextlib

import loom
from loom.nn.modules.container import ModuleDict, ModuleList
from loom.nn.parameter import Parameter

_cache_enabled = 0
_cache = {}


@contextlib.contextmanager
def cached():
    """Computes each parametrized tensor once inside the block (for a forward that reads a weight
    many times, a recurrent net's)."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _register_original(owner, name, value, like):
    """Stores value under name, as a Parameter where `like` (what was parametrized) was one."""
    if isinstance(like, Parameter):
        owner.register_parameter(name, Parameter(value.detach(), requires_grad=like.requires_grad))
    else:
        owner.register_buffer(name, value.detach())


def _check_unchanged(value, original):
    """A parametrization's output must keep the tensor's shape and dtype (unless unsafe=True)."""
    if not isinstance(value, loom.Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(value).__name__}.")
    if value.dtype != original.dtype or value.shape != original.shape:
        raise ValueError(f"Registering a parametrization may not change the shape or dtype of the tensor "
                         f"(unsafe=False).\nunparametrized dtype: {original.dtype}\nparametrized dtype: "
                         f"{value.dtype}\nunparametrized shape: {tuple(original.shape)}\n"
                         f"parametrized shape: {tuple(value.shape)}")


class ParametrizationList(ModuleList):
    """The chain of parametrizations of one tensor, holding its original (or originals)."""

    def __init__(self, modules, original, unsafe=False):
        if not modules:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        with loom.no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    new = module.right_inverse(new)
        self.is_tensor = isinstance(new, loom.Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if not unsafe and (new.dtype != original.dtype or new.shape != original.shape):
                raise ValueError(f"When `right_inverse` outputs one tensor, it may not change the dtype or shape.\n"
                                 f"original.dtype: {original.dtype}\nright_inverse(original).dtype: {new.dtype}\n"
                                 f"original.shape: {tuple(original.shape)}\n"
                                 f"right_inverse(original).shape: {tuple(new.shape)}")
            _register_original(self, "original", new, original)
        else:
            for i, part in enumerate(new):
                if not isinstance(part, loom.Tensor):
                    raise ValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors. Got "
                                     f"{type(part).__name__}")
                _register_original(self, f"original{i}", part, original)
        if not unsafe:
            _check_unchanged(self(), original)

    def originals(self):
        return [self.original] if self.is_tensor else [getattr(self, f"original{i}") for i in range(self.ntensors)]

    def right_inverse(self, value):
        """Stores in the original(s) what makes the chain return `value`."""
        with loom.no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement right_inverse.")
                value = module.right_inverse(value)
            parts = [value] if self.is_tensor else list(value)
            if len(parts) != self.ntensors:
                raise ValueError(f"'right_inverse' must return a sequence of {self.ntensors} tensors, got {len(parts)}")
            for target, part in zip(self.originals(), parts):
                if target.shape != part.shape or target.dtype != part.dtype:
                    raise ValueError(f"The tensor returned by right_inverse has shape {tuple(part.shape)} and dtype "
                                     f"{part.dtype}; the original has shape {tuple(target.shape)} and dtype "
                                     f"{target.dtype}")
                target.copy_(part)

    def forward(self):
        value = self[0](*self.originals())
        for module in list(self)[1:]:
            value = module(value)
        return value


def _parametrized_property(name):
    def get(self):
        chain = self.parametrizations[name]
        if not _cache_enabled:
            return chain()
        key = (id(self), name)
        if key not in _cache:
            _cache[key] = chain()
        return _cache[key]

    def set(self, value):
        self.parametrizations[name].right_inverse(value)

    return property(get, set)


def _inject_class(module):
    cls = module.__class__
    param_cls = type(f"Parametrized{cls.__name__}", (cls,), {"_unparametrized_class": cls})
    module.__class__ = param_cls


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Makes module.<tensor_name> the output of `parametrization` (a Module) applied to the stored
    tensor; a second call on the same name appends to the chain. Returns module."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        chain = module.parametrizations[tensor_name]
        if not unsafe:
            current = getattr(module, tensor_name)
            _check_unchanged(parametrization(current), current)
        chain.append(parametrization)
        chain.unsafe |= unsafe
        return module
    if tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        if original is None:
            raise ValueError(f"Module '{module}' parameter or buffer with name '{tensor_name}' is None")
        chain = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_class(module)
            module.parametrizations = ModuleDict()
        setattr(module.__class__, tensor_name, _parametrized_property(tensor_name))
        module.parametrizations[tensor_name] = chain
        return module
    raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with name "
                     f"'{tensor_name}'")


def is_parametrized(module, tensor_name=None):
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def type_before_parametrizations(module):
    return module.__class__._unparametrized_class if is_parametrized(module) else type(module)


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Takes the parametrization of tensor_name away: the tensor becomes its current value
    (leave_parametrized) or the stored original again."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    chain = module.parametrizations[tensor_name]
    if leave_parametrized:
        with loom.no_grad():
            value = getattr(module, tensor_name)
    else:
        if not chain.is_tensor:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized "
                             "in terms of a sequence of tensors.")
        value = chain.original
    like = chain.original if chain.is_tensor else chain.original0
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_original(module, tensor_name, value, like)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__._unparametrized_class
    return module


__all__ = ["ParametrizationList", "cached", "is_parametrized", "register_parametrization",
           "remove_parametrizations", "type_before_parametrizations"]
