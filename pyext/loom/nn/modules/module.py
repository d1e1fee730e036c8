"""loom.nn.Module (torch.nn.modules.module): registration of parameters, buffers and submodules,
traversal, state dicts, modes, dtype and device conversion, forward hooks, with PyTorch's
semantics."""

from collections import OrderedDict, namedtuple
from collections.abc import Mapping

import loom
from loom.nn.parameter import Parameter
from loom.nn.modules._backward_hook import BackwardHook
from loom.utils.hooks import RemovableHandle


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns, as PyTorch: a named tuple (missing_keys, unexpected_keys)."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _check_name(kind, name, module, existing):
    """PyTorch's checks of a name given to register_buffer / register_parameter / add_module."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain "."')
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if hasattr(module, name) and name not in existing:
        raise KeyError(f"attribute '{name}' already exists")


class Module:
    """Base class of layers: parameters, buffers and submodules registered by attribute
    assignment, as in PyTorch."""

    _version = 1  # a state dict's _metadata version, as PyTorch's (subclasses raise it)

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_backward_hooks", OrderedDict())
        object.__setattr__(self, "_backward_pre_hooks", OrderedDict())
        # hook ids registered with with_kwargs=True
        object.__setattr__(self, "_hooks_with_kwargs", set())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required \"forward\" function")

    def __call__(self, *args, **kwargs):
        backward_hooks = self.__dict__.get("_backward_hooks") or self.__dict__.get("_backward_pre_hooks")
        if not (self._forward_pre_hooks or self._forward_hooks or backward_hooks):
            return self.forward(*args, **kwargs)
        with_kwargs = self._hooks_with_kwargs
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {result}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        backward_hook = None
        if backward_hooks:
            backward_hook = BackwardHook(self, list(self._backward_hooks.values()),
                                         list(self._backward_pre_hooks.values()))
            args = backward_hook.setup_input_hook(args)
        output = self.forward(*args, **kwargs)
        for hook_id, hook in list(self._forward_hooks.items()):
            result = hook(self, args, kwargs, output) if hook_id in with_kwargs else hook(self, args, output)
            if result is not None:
                output = result
        if backward_hook is not None:
            output = backward_hook.setup_output_hook(output)
        return output

    # ---- hooks ----

    def _add_hook(self, hooks, hook, prepend, with_kwargs):
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        if with_kwargs:
            self._hooks_with_kwargs.add(handle.id)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) runs before forward and may return new args (a lone value becomes a
        1-tuple); with_kwargs=True: hook(module, args, kwargs) may return (args, kwargs)."""
        return self._add_hook(self._forward_pre_hooks, hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args, output) runs after forward and may return a new output;
        with_kwargs=True: hook(module, args, kwargs, output)."""
        return self._add_hook(self._forward_hooks, hook, prepend, with_kwargs)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) runs when the gradients of a call's positional
        arguments have been computed (grad_input: one entry per argument, None for one that is
        not a tensor or needs no gradient; grad_output: one per output) and may return new
        grad_input. If no argument needs a gradient it runs once the outputs' gradients are known."""
        return self._add_hook(self._backward_hooks, hook, prepend, False)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) runs when the gradients of a call's outputs have been
        computed, before the module's own backward, and may return new grad_output."""
        return self._add_hook(self._backward_pre_hooks, hook, prepend, False)

    def _hook_table(self, name):
        # Made on first use: modules built without Module.__init__ (unpickled, older
        # subclasses) still take these hooks.
        table = self.__dict__.get(name)
        if table is None:
            table = OrderedDict()
            object.__setattr__(self, name, table)
        return table

    def register_load_state_dict_pre_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs) runs before this module's entries are loaded, and may change state_dict."""
        return self._add_hook(self._hook_table("_load_state_dict_pre_hooks"), hook, False, False)

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) runs once load_state_dict has loaded everything, before
        strict mode raises: it may remove keys from incompatible_keys.missing_keys and
        .unexpected_keys (it must return None)."""
        return self._add_hook(self._hook_table("_load_state_dict_post_hooks"), hook, False, False)

    def register_backward_hook(self, hook):
        """PyTorch's deprecated form; loom gives it register_full_backward_hook's meaning."""
        return self.register_full_backward_hook(hook)

    # ---- registration ----

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove(name, params)
            params[name] = value
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove(name, self._modules)
            self._modules[name] = value
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            params[name] = None
        elif params is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(torch.nn.Module or None expected)")
            self._modules[name] = None
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, loom.Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _remove(self, name, keep=None):
        """Drops `name` from every place an attribute can live except `keep` (the dict it is
        about to be stored in, where it keeps its position, as in PyTorch)."""
        for d in (self.__dict__, self._parameters, self._buffers, self._modules):
            if d is not keep:
                d.pop(name, None)
        if keep is not self._buffers:
            self._non_persistent_buffers_set.discard(name)

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
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name("parameter", name, self, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created "
                             "explicitly. To express '" + name + "' as a function of another Tensor, compute the "
                             "value in the forward() method.")
        self._remove(name, self._parameters)
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """A tensor of the module's state that is not a parameter (running statistics): moved
        and cast with the module, saved in its state_dict unless persistent=False."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name("buffer", name, self, self._buffers)
        if tensor is not None and not isinstance(tensor, loom.Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        self._remove(name, self._buffers)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__module__}.{type(module).__name__} is not a Module subclass")
        _check_name("module", name, self, self._modules)
        self._remove(name, self._modules)
        self._modules[name] = module

    def register_module(self, name, module):
        self.add_module(name, module)

    def get_submodule(self, target):
        """The submodule at dotted path `target` ("" is self), with PyTorch's errors."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target, module, strict=False):
        """Puts `module` at dotted path `target`, replacing what is there (strict: only an existing
        submodule)."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(parent._get_name() + " has no attribute `" + name + "`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError("`" + name + "` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        param = getattr(mod, name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        if name not in mod._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return getattr(mod, name)

    def _get_name(self):
        return type(self).__name__

    # ---- traversal ----

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(name, module) of self and every submodule, depth first; a module reachable under
        several names appears once unless remove_duplicate=False."""
        memo = set() if memo is None else memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

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

    def _named(self, attr, prefix, recurse, remove_duplicate=True):
        seen = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse
                   else [(prefix, self)])
        for module_prefix, m in modules:
            for name, value in getattr(m, attr).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- state ----

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """This module's own entries: parameters, then persistent buffers (PyTorch's override
        point)."""
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        skip = self._non_persistent_buffers_set
        for name, b in self._buffers.items():
            if b is not None and name not in skip:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of every parameter and persistent buffer by dotted name, with
        PyTorch's `_metadata` (each module's `_version`, which _load_from_state_dict reads)."""
        if args:  # PyTorch's deprecated positional form state_dict(destination, prefix, keep_vars)
            destination, prefix, keep_vars = (list(args) + [destination, prefix, keep_vars][len(args):])[:3]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        metadata = getattr(destination, "_metadata", None)
        if metadata is not None:
            metadata[prefix[:-1]] = {"version": self._version}
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

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
        metadata = getattr(state_dict, "_metadata", None)

        state_dict = OrderedDict(state_dict)  # pre-hooks may change it; the caller's stays as it was
        if metadata is not None:
            state_dict._metadata = metadata
        loaded = []

        def load(module, prefix):
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            for hook in list(module.__dict__.get("_load_state_dict_pre_hooks", {}).values()):
                hook(module, state_dict, prefix, local_metadata, True, missing, unexpected, errors)
            module._load_from_state_dict(state_dict, prefix, local_metadata, True, missing, unexpected, errors)
            loaded.append(module)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        with loom.no_grad():
            load(self, "")
        incompatible = _IncompatibleKeys(missing, unexpected)
        for module in loaded:
            for hook in list(module.__dict__.get("_load_state_dict_post_hooks", {}).values()):
                if hook(module, incompatible) is not None:
                    raise RuntimeError("Hooks registered with ``register_load_state_dict_post_hook`` are not expected "
                                       "to return new values, if incompatible_keys need to be modified, it should be "
                                       "done inplace.")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(type(self).__name__,
                                                                                    "\n\t".join(errors)))
        return incompatible

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        """This module's own entries (PyTorch's algorithm and signature, including which keys
        count as unexpected: those under prefix whose first name is neither a child nor an
        entry). `local_metadata` is what state_dict() saved for this module ({"version": ...})."""
        skip = self._non_persistent_buffers_set
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
        for key in state_dict.keys() if strict else ():
            if isinstance(key, str) and key.startswith(prefix):
                first = key[len(prefix):].split(".", 1)[0]
                if first not in self._modules and first not in local:
                    unexpected.append(key)

    # ---- modes, devices, gradients ----

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
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
        floating ones to a dtype, in place: Parameters keep their objects (see _convert).
        non_blocking and memory_format are accepted; loom keeps one (row-major) memory format."""
        unknown = set(kwargs) - {"device", "dtype", "non_blocking", "memory_format", "copy"}
        if unknown:
            raise TypeError(f"to() received an invalid combination of arguments: unexpected {sorted(unknown)}")
        device, dtype = kwargs.get("device"), kwargs.get("dtype")
        memory_format = kwargs.get("memory_format")
        if memory_format is not None and not isinstance(memory_format, loom.memory_format):
            raise TypeError(f"to(): argument 'memory_format' must be torch.memory_format, not "
                            f"{type(memory_format).__name__}")
        for a in args:
            if isinstance(a, bool):  # to(device, dtype, non_blocking)
                continue
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

    def to_empty(self, *, device, recurse=True):
        """Parameters and buffers moved to `device` as uninitialized storage of their shapes and
        dtypes (for a model built on the meta device, then initialized in place)."""
        if not recurse:
            raise NotImplementedError("loom's to_empty moves every submodule (recurse=True)")
        return self._convert(lambda t: loom.empty_like(t, device=device))

    def share_memory(self):
        """Moves every parameter, gradient and buffer into memory shared between processes, in
        place (Tensor.share_memory_; loom.multiprocessing). Returns self."""
        for p in self.parameters():
            p.share_memory_()
            if p.grad is not None:
                p.grad.share_memory_()
        for b in self.buffers():
            if b is not None:
                b.share_memory_()
        return self

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

    def type(self, dst_type):
        """Casts floating parameters and buffers to `dst_type` (a dtype)."""
        return self._convert(lambda t: t.to(dst_type))

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

