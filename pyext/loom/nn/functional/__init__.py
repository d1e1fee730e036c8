"""loom.nn.functional: the functional layer API, as torch.nn.functional.

Everything here is written in loom ops, so it runs eagerly, records lazily, fuses, and
differentiates without code of its own. One file per family (activations, normalization,
losses, convolution, ...); this package gathers their public names, as torch.nn.functional has
them. A family's private helpers stay in its file.
"""

from loom.nn.functional._activation import *  # noqa: F401,F403
from loom.nn.functional._attention import *  # noqa: F401,F403
from loom.nn.functional._conv import *  # noqa: F401,F403
from loom.nn.functional._ctc import *  # noqa: F401,F403
from loom.nn.functional._distance import *  # noqa: F401,F403
from loom.nn.functional._dropout import *  # noqa: F401,F403
from loom.nn.functional._linear import *  # noqa: F401,F403
from loom.nn.functional._loss import *  # noqa: F401,F403
from loom.nn.functional._normalization import *  # noqa: F401,F403
from loom.nn.functional._padding import *  # noqa: F401,F403
from loom.nn.functional._pooling import *  # noqa: F401,F403
from loom.nn.functional._sparse import *  # noqa: F401,F403
from loom.nn.functional._vision import *  # noqa: F401,F403


def _under_autocast(namespace):
    """The composites that autocast's policy table names (layer_norm, group_norm, the losses,
    bilinear, ...) cast their arguments by it and run as one op inside an autocast region
    (pyext/autocast.h); the others autocast op by op, as PyTorch's decompositions do. The wrapped
    function replaces the plain one in its family file too, so calls between families and
    pickling by name (which looks the function up in its own module) see the same object."""
    import sys

    from loom import _C
    for name, value in list(namespace.items()):
        if name.startswith("_") or type(value) is not type(_under_autocast):
            continue
        wrapped = _C._autocast_function(name, value)
        if wrapped is value:
            continue
        namespace[name] = wrapped
        family = sys.modules.get(value.__module__)
        if family is not None and getattr(family, name, None) is value:
            setattr(family, name, wrapped)


_under_autocast(globals())  # last: after every family's names are here
