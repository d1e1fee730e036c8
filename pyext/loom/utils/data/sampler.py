"""Samplers (torch.utils.data.sampler): the order in which a DataLoader visits a map-style
dataset's indices, and how BatchSampler groups them. Random samplers draw a new order each
epoch from loom's generator (repeatable after loom.manual_seed) or from `generator`; the
orders are not PyTorch's (a different generator), only the same distributions."""

import numbers

import numpy as np

import loom
from loom.utils.data._utils.random import rng

# Draws with replacement come this many at a time: a sampler may be asked for more indices than
# memory holds (makemore's InfiniteDataLoader: RandomSampler(..., num_samples=int(1e10))), and
# the first batch must not wait for the rest. PyTorch draws in chunks of 32 as well.
_CHUNK = 32


def _chunks(count, draw):
    """draw(k) k at a time until count indices came, as Python ints."""
    while count > 0:
        k = min(count, _CHUNK)
        yield from draw(k).tolist()
        count -= k


class Sampler:
    """Iterates over indices (or, for a batch sampler, lists of indices)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation each epoch, or num_samples indices drawn with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source, self.replacement, self._num_samples, self.generator = (data_source, replacement,
                                                                                 num_samples, generator)
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
        if not isinstance(self.num_samples, int) or isinstance(self.num_samples, bool) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        g = rng(self.generator)
        if self.replacement:
            yield from _chunks(self.num_samples, lambda k: g.integers(0, n, size=k))
            return
        for _ in range(self.num_samples // n):
            yield from g.permutation(n).tolist()
        yield from g.permutation(n)[:self.num_samples % n].tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order each epoch."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        for i in rng(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices of range(len(weights)), index i drawn with probability proportional to
    weights[i] (with replacement unless replacement=False)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if (not isinstance(num_samples, numbers.Integral) or isinstance(num_samples, bool) or num_samples <= 0):
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        weights = weights.detach().cpu().numpy() if isinstance(weights, loom.Tensor) else weights
        weights = np.asarray(weights, dtype=np.float64)
        if weights.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(weights.shape)}")
        if (weights < 0).any() or not np.isfinite(weights).all() or weights.sum() <= 0:
            raise RuntimeError("invalid multinomial distribution (weights must be finite, non-negative and sum to "
                               "more than 0)")
        if not replacement and num_samples > np.count_nonzero(weights):
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        self.weights = loom.tensor(weights, dtype=loom.float64)
        self._p = weights / weights.sum()
        self.num_samples, self.replacement, self.generator = int(num_samples), replacement, generator

    def __iter__(self):
        g = rng(self.generator)
        if self.replacement:
            yield from _chunks(self.num_samples, lambda k: g.choice(len(self._p), size=k, p=self._p))
            return
        yield from g.choice(len(self._p), size=self.num_samples, replace=False, p=self._p).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of batch_size (the last one shorter unless
    drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
