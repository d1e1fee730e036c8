"""Identity, Linear and Bilinear (torch.nn.modules.linear), with PyTorch's initialization."""

import math

import loom
from loom.nn import functional as F
from loom.nn import init
from loom.nn.modules.module import Module
from loom.nn.parameter import Parameter


def _factory(device, dtype):
    """The keyword arguments that make a parameter of a module built with (device, dtype)."""
    return {"device": device, "dtype": dtype if dtype is not None else loom.get_default_dtype()}


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments, as PyTorch's."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        kw = _factory(device, dtype)
        self.weight = Parameter(loom.empty(out_features, in_features, **kw))
        if bias:
            self.bias = Parameter(loom.empty(out_features, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class NonDynamicallyQuantizableLinear(Linear):
    """MultiheadAttention's output projection: a Linear under the name PyTorch gives it (its
    repr shows it)."""


class Bilinear(Module):
    """y = x1^T A x2 + b, with weight (out_features, in1_features, in2_features)."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        kw = _factory(device, dtype)
        self.weight = Parameter(loom.empty(out_features, in1_features, in2_features, **kw))
        if bias:
            self.bias = Parameter(loom.empty(out_features, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
