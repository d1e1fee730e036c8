"""loom.nn: layers and the Module system, as torch.nn."""

from loom.nn import functional, init
from loom.nn.layers import (
    GELU,
    Dropout,
    Embedding,
    Identity,
    LayerNorm,
    Linear,
    ModuleDict,
    ModuleList,
    ReLU,
    Sequential,
    SiLU,
    Sigmoid,
    Softmax,
    Tanh,
)
from loom.nn.module import Module, Parameter

__all__ = ["functional", "init", "Module", "Parameter", "Identity", "Linear", "Embedding", "LayerNorm", "Dropout",
           "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "Sequential", "ModuleList", "ModuleDict"]
from loom.nn import parallel  # noqa: E402,F401  (loom.nn.parallel.DistributedDataParallel)
