"""loom.utils.data: datasets, samplers and the DataLoader, as torch.utils.data."""

from loom.utils.data._utils.collate import default_collate, default_convert
from loom.utils.data._utils.worker import get_worker_info
from loom.utils.data.dataloader import DataLoader
from loom.utils.data.dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset, Subset,
                                     TensorDataset, random_split)
from loom.utils.data.distributed import DistributedSampler
from loom.utils.data.sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
                                     WeightedRandomSampler)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset", "StackDataset", "Subset",
           "random_split",
           "DataLoader", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler",
           "DistributedSampler", "default_collate", "default_convert", "get_worker_info"]
