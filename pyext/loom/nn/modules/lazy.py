"""The lazy modules (LazyLinear, LazyConv1d, LazyBatchNorm2d, ...): a layer whose input size
(in_features, in_channels, num_features) is read from its first input, as torch.nn's.

Until then its parameters are placeholder Parameters without elements, so an optimizer made
before the first call holds the very objects that the first call fills (each keeps its identity:
the data is swapped in with _set_data). The first call builds the concrete module (cls_to_become)
with the size it read, moves its values into the placeholders and turns this object into that
class, as PyTorch does; that build draws the initial values from the random stream then, as
PyTorch's materialization does.

load_state_dict() on a module not called yet takes each placeholder's shape from the checkpoint
(PyTorch's lazy load hook does the same), so the usual "build, load a checkpoint, run" works; the
first call then keeps those loaded values and builds only what was not loaded (without drawing
from the random stream when everything was loaded, as PyTorch skips reset_parameters then).
Unlike PyTorch 1.13, whose loaded LazyConv keeps in_channels=0, the first call still reads the
input size, so the module's attributes and repr are those of the concrete module."""

import loom
from loom.nn.modules.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from loom.nn.modules.conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from loom.nn.modules.instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from loom.nn.modules.linear import Linear
from loom.nn.modules.module import Module
from loom.nn.parameter import Parameter


class LazyModuleMixin:
    cls_to_become = None  # the concrete class: its constructor takes the inferred size first

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        object.__setattr__(self, "_lazy_arguments", (args, kwargs))
        with loom.random.fork_rng():  # the template's initial values are not drawn from the stream
            template = self.cls_to_become(1, *args, **kwargs)
        for name, p in template._parameters.items():
            self.register_parameter(name, None if p is None else
                                    Parameter(loom.empty(0, dtype=p.dtype, device=p.device)))
        for name, b in template._buffers.items():
            self.register_buffer(name, None if b is None else loom.empty(0, dtype=b.dtype, device=b.device),
                                 persistent=name not in template._non_persistent_buffers_set)

    def has_uninitialized_params(self):
        loaded = self.__dict__.get("_lazy_loaded", ())
        return any(p is not None and n not in loaded for n, p in self._parameters.items())

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        # a placeholder whose key the checkpoint has takes that value's shape first, so the copy fits
        if "_lazy_arguments" in self.__dict__:
            loaded = self.__dict__.setdefault("_lazy_loaded", set())
            for name, p in self._parameters.items():
                value = state_dict.get(prefix + name)
                if p is not None and name not in loaded and isinstance(value, loom.Tensor):
                    p._set_data(loom.empty(tuple(value.shape), dtype=p.dtype, device=p.device))
                    loaded.add(name)
            for name, b in self._buffers.items():
                value = state_dict.get(prefix + name)
                if b is not None and name not in loaded and isinstance(value, loom.Tensor) \
                        and name not in self._non_persistent_buffers_set:
                    self._buffers[name] = loom.empty(tuple(value.shape), dtype=b.dtype, device=b.device)
                    loaded.add(name)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)

    def extra_repr(self):
        return "uninitialized"

    def initialize_parameters(self, input, *args, **kwargs):
        """Builds the concrete module for `input`'s size and becomes it."""
        positional, keywords = self._lazy_arguments
        loaded = self.__dict__.get("_lazy_loaded", set())
        everything_loaded = all(n in loaded for n, v in list(self._parameters.items()) + list(self._buffers.items())
                                if v is not None and n not in self._non_persistent_buffers_set)
        with loom.random.fork_rng(enabled=everything_loaded):   # nothing to draw when it was all loaded
            real = self.cls_to_become(self._inferred_size(input), *positional, **keywords)
        for name, p in real._parameters.items():
            mine = self._parameters[name]
            if p is not None and name not in loaded:
                mine._set_data(p.detach().to(dtype=mine.dtype, device=mine.device))
        for name, b in real._buffers.items():
            if b is not None and name not in loaded:
                self._buffers[name] = b.to(device=self._buffers[name].device)
        for key, value in real.__dict__.items():
            if key not in ("_parameters", "_buffers", "_modules", "training") and not key.endswith("hooks") \
                    and key != "_hooks_with_kwargs" and key != "_non_persistent_buffers_set":
                object.__setattr__(self, key, value)
        del self.__dict__["_lazy_arguments"]
        self.__dict__.pop("_lazy_loaded", None)
        self.__class__ = self.cls_to_become

    def forward(self, input, *args, **kwargs):
        self.initialize_parameters(input)
        return self.forward(input, *args, **kwargs)

    def _inferred_size(self, input):
        return input.shape[1] if input.dim() > self._unbatched_dims else input.shape[0]


def _lazy(concrete, unbatched_dims):
    """The lazy class of `concrete` (whose first constructor argument is read from the input:
    dim 1 of a batched input, dim 0 of an unbatched one with `unbatched_dims` dims)."""
    name = "Lazy" + concrete.__name__
    return type(name, (LazyModuleMixin, concrete), {"cls_to_become": concrete, "_unbatched_dims": unbatched_dims,
                                                    "__doc__": f"{concrete.__name__} whose input size is read from "
                                                               f"its first input (torch.nn.{name})."})


class LazyLinear(LazyModuleMixin, Linear):
    """Linear whose in_features is the last dim of its first input (torch.nn.LazyLinear)."""
    cls_to_become = Linear

    def _inferred_size(self, input):
        return input.shape[-1]


LazyConv1d, LazyConv2d, LazyConv3d = _lazy(Conv1d, 2), _lazy(Conv2d, 3), _lazy(Conv3d, 4)
LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d = (
    _lazy(ConvTranspose1d, 2), _lazy(ConvTranspose2d, 3), _lazy(ConvTranspose3d, 4))
LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d = _lazy(BatchNorm1d, 1), _lazy(BatchNorm2d, 3), _lazy(BatchNorm3d, 4)
LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d = (
    _lazy(InstanceNorm1d, 2), _lazy(InstanceNorm2d, 3), _lazy(InstanceNorm3d, 4))
