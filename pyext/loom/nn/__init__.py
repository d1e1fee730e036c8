"""loom.nn: layers and the Module system, as torch.nn."""

from loom.nn.parameter import Parameter
from loom.nn import functional, init
from loom.nn.modules import *  # noqa: F401,F403  every layer class
from loom.nn.modules import __all__ as _modules_all
from loom.nn import attention, common_types, modules, parallel, parameter, utils
from loom.nn.modules.lazy import (LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d,  # noqa: F401
                                  LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d,
                                  LazyConvTranspose3d, LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d,
                                  LazyLinear)
from loom.nn.parallel import DataParallel  # noqa: F401

__all__ = ["attention", "common_types", "functional", "init", "modules", "parallel", "parameter", "utils", "Parameter", "DataParallel",
           "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"] + _modules_all
