"""loom.nn.parallel: data parallelism over processes, as torch.nn.parallel."""

from loom.nn.parallel.data_parallel import DataParallel
from loom.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
