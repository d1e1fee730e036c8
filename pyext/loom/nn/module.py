"""loom.nn.Module and Parameter, with PyTorch's registration and traversal semantics."""

from collections import OrderedDict, namedtuple
from collections.abc import Mapping

import loom


class Parameter(loom.Tensor):
    """A tensor that is a module's parameter: a leaf that requires grad by default."""

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


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns, as PyTorch: a named tuple (missing_keys, unexpected_keys)."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class Module:
    """Base class of layers: parameters, buffers and submodules registered by attribute
    assignment, as in PyTorch."""

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required \"forward\" function")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- registration ----

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove(name)
            params[name] = value
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove(name)
            self._modules[name] = value
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            params[name] = None
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, loom.Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _remove(self, name):
        for d in (self.__dict__, self._parameters, self._buffers, self._modules):
            d.pop(name, None)

    def __getattr__(self, name):
        for key in ("_parameters", "_buffers", "_modules"):
            d = self.__dict__.get(key)
            if d is not None and name in d:
                return d[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for key in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(key, {}):
                del self.__dict__[key][name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        self._remove(name)
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        if tensor is not None and not isinstance(tensor, loom.Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        self._remove(name)
        self._buffers[name] = tensor
        non_persistent = self.__dict__.setdefault("_non_persistent", set())
        if persistent:
            non_persistent.discard(name)
        else:
            non_persistent.add(name)

    def add_module(self, name, module):
        self._remove(name)
        self._modules[name] = module

    register_module = add_module

    # ---- traversal ----

    def named_modules(self, memo=None, prefix=""):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, prefix + ("." if prefix else "") + name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named(self, attr, prefix, recurse):
        seen = set()
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for module_prefix, m in modules:
            for name, value in getattr(m, attr).items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True):
        yield from self._named("_parameters", prefix, recurse)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        yield from self._named("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- state ----

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        out = OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p if keep_vars else p.detach()
        skip = self.__dict__.get("_non_persistent", set())
        for name, b in self._buffers.items():
            if b is not None and name not in skip:
                out[prefix + name] = b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(out, prefix + name + ".", keep_vars)
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copies the values of state_dict into the parameters and persistent buffers in place
        (they keep their objects and storage) and returns a named tuple (missing_keys,
        unexpected_keys), as PyTorch. Every problem is collected first; then strict mode raises
        for missing and unexpected keys, and both modes raise for values that do not fit (a
        shape mismatch, a non-tensor), with PyTorch's messages. Values that fit are copied even
        when another one raises, as in PyTorch."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []

        def load(module, prefix):
            module._load_from_state_dict(state_dict, prefix, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        with loom.no_grad():
            load(self, "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(type(self).__name__,
                                                                                    "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    def _load_from_state_dict(self, state_dict, prefix, missing, unexpected, errors):
        """This module's own entries (PyTorch's algorithm, including which keys count as
        unexpected: those under prefix whose first name is neither a child nor an entry)."""
        skip = self.__dict__.get("_non_persistent", set())
        local = {k: v for k, v in self._parameters.items() if v is not None}
        local.update((k, v) for k, v in self._buffers.items() if v is not None and k not in skip)
        for name, target in local.items():
            key = prefix + name
            if key not in state_dict:
                missing.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, loom.Tensor):
                errors.append(f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like '
                              f"object from checkpoint but received {type(value)}")
                continue
            if target.dim() == 0 and value.dim() == 1:  # PyTorch reads old 1-element checkpoints of 0-d values
                value = value[0]
            if tuple(value.shape) != tuple(target.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape {value.shape} from checkpoint, "
                              f"the shape in current model is {target.shape}.")
                continue
            try:
                target.copy_(value)
            except Exception as ex:  # noqa: BLE001  reported with the others, as PyTorch does
                errors.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                              f"{target.shape} and whose dimensions in the checkpoint are {value.shape}, an "
                              f"exception occurred : {ex.args}.")
        for key in state_dict.keys():
            if isinstance(key, str) and key.startswith(prefix):
                first = key[len(prefix):].split(".", 1)[0]
                if first not in self._modules and first not in local:
                    unexpected.append(key)

    # ---- modes, devices, gradients ----

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        loom.autograd._zero_grads(self.parameters(), set_to_none)

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _convert(self, fn):
        """Applies fn (a device move or cast) to every parameter, its gradient and every buffer,
        as PyTorch's Module._apply: a Parameter stays the same object and gets fn's result as its
        data (it stays a leaf and keeps requires_grad), so an optimizer made before the move
        still updates the module's parameters. Buffers are replaced by fn's result."""
        for m in self.modules():
            for p in m._parameters.values():
                if p is None:
                    continue
                with loom.no_grad():
                    moved = fn(p)
                if moved is not p:
                    p._set_data(moved)
                grad = p.grad
                if grad is not None:
                    with loom.no_grad():
                        moved = fn(grad)
                    if moved is not grad:
                        p.grad = moved
            for name, b in list(m._buffers.items()):
                if b is not None:
                    m._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """Moves parameters and buffers to a device (or lazy mode: module.to("lazy")) and casts the
        floating ones to a dtype, in place: Parameters keep their objects (see _convert)."""
        device, dtype = kwargs.get("device"), kwargs.get("dtype")
        for a in args:
            if isinstance(a, loom.dtype):
                dtype = a
            elif isinstance(a, loom.Tensor):
                device, dtype = a.device, a.dtype
            else:
                device = a
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired dtype={dtype}")

        def convert(t):
            if dtype is not None and t.is_floating_point():
                t = t.to(dtype)
            return t.to(device) if device is not None else t

        return self._convert(convert)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device)

    def float(self):
        return self._convert(lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        return self._convert(lambda t: t.double() if t.is_floating_point() else t)

    def half(self):
        return self._convert(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self):
        return self._convert(lambda t: t.bfloat16() if t.is_floating_point() else t)

    # ---- printing ----

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        children = []
        for name, m in self._modules.items():
            text = repr(m).replace("\n", "\n  ")
            children.append(f"({name}): {text}")
        lines = lines + children
        body = type(self).__name__ + "("
        if lines:
            if len(lines) == 1 and not children:
                body += lines[0]
            else:
                body += "\n  " + "\n  ".join(lines) + "\n"
        return body + ")"

    def __dir__(self):
        return list(object.__dir__(self)) + list(self._parameters) + list(self._buffers) + list(self._modules)

