"""loom.nn: layers and the Module system, as torch.nn."""

from loom.nn.parameter import Parameter
from loom.nn import functional, init
from loom.nn.modules import *  # noqa: F401,F403  every layer class
from loom.nn.modules import __all__ as _modules_all
from loom.nn import modules, parallel, parameter, utils

__all__ = ["functional", "init", "modules", "parallel", "parameter", "utils", "Parameter"] + _modules_all
