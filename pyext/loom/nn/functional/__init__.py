"""loom.nn.functional: the functional layer API, as torch.nn.functional.

Everything here is written in loom ops, so it runs eagerly, records lazily, fuses, and
differentiates without code of its own. One file per family (activations, normalization,
losses, convolution, ...); this package gathers their public names, as torch.nn.functional has
them. A family's private helpers stay in its file.
"""

from loom.nn.functional._activation import *  # noqa: F401,F403
from loom.nn.functional._attention import *  # noqa: F401,F403
from loom.nn.functional._conv import *  # noqa: F401,F403
from loom.nn.functional._distance import *  # noqa: F401,F403
from loom.nn.functional._dropout import *  # noqa: F401,F403
from loom.nn.functional._linear import *  # noqa: F401,F403
from loom.nn.functional._loss import *  # noqa: F401,F403
from loom.nn.functional._normalization import *  # noqa: F401,F403
from loom.nn.functional._padding import *  # noqa: F401,F403
from loom.nn.functional._pooling import *  # noqa: F401,F403
from loom.nn.functional._sparse import *  # noqa: F401,F403
from loom.nn.functional._vision import *  # noqa: F401,F403
