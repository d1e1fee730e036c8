"""DistributedSampler, as torch.utils.data.distributed: each rank of a data-parallel job draws its
own share of a dataset's indices, the shares disjoint and of equal length.

Differences from PyTorch: the shuffle is numpy's permutation seeded with seed + epoch (the same
on every rank, so the shares stay disjoint), not torch.randperm's, so the order differs from
PyTorch's for the same seed.
"""

import math

import numpy as np

from loom.utils.data.sampler import Sampler


class DistributedSampler(Sampler):
    """Indices of `dataset` for rank `rank` of `num_replicas` (by default the default process
    group's rank and size). With shuffle, call set_epoch(epoch) at the start of each epoch to
    draw a new order. Without drop_last the indices are padded by repeating the first ones so
    every rank gets the same number; with it, the tail that does not divide evenly is dropped."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            from loom import distributed as dist

            if not dist.is_initialized():
                raise RuntimeError("Requires distributed package to be available (init_process_group), or pass "
                                   "num_replicas and rank")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            indices = np.random.default_rng(self.seed + self.epoch).permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        assert len(indices) == self.total_size
        share = indices[self.rank:self.total_size:self.num_replicas]
        assert len(share) == self.num_samples
        return iter(share)

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch whose order the next iteration draws (with shuffle): every rank must set the
        same one."""
        self.epoch = epoch
