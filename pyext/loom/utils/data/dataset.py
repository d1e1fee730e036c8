"""Datasets (torch.utils.data.dataset): map-style (__getitem__ and __len__) and iterable-style
(__iter__), and the wrappers that combine them."""

import bisect
import math
import warnings

import loom
from loom.utils.data._utils.random import permutation


class Dataset:
    """A map-style dataset: dataset[i] is sample i. Subclasses give __getitem__ (and usually
    __len__, which samplers need)."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream of samples: subclasses give __iter__. With worker processes each worker iterates
    its own copy; get_worker_info() tells it which share to produce."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample i is (t[i] for t in tensors), every tensor sharing its first dim.

    A DataLoader with the default collate fetches a whole batch as one index_select per tensor
    (`_fetch_batch`), with the indices as a tensor: on the lazy device that is one op in the
    step's trace whatever the batch holds, so batches neither sync nor change the trace."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        if any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]

    def _fetch_batch(self, indices):
        """default_collate([self[i] for i in indices]), computed as one gather per tensor."""
        out = []
        for t in self.tensors:
            index = loom.tensor(list(indices), dtype=loom.int64, device=t.device)
            out.append(t.index_select(0, index))
        return out


class ConcatDataset(Dataset):
    """The datasets one after the other."""

    @staticmethod
    def cumsum(sequence):
        out, total = [], 0
        for d in sequence:
            total += len(d)
            out.append(total)
        return out

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)

    def __getattr__(self, name):
        if name == "_fetch_batch" and hasattr(self.dataset, "_fetch_batch"):
            return lambda batch: self.dataset._fetch_batch([self.indices[i] for i in batch])
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


class StackDataset(Dataset):
    """Several datasets of one length read together: StackDataset(a, b)[i] is (a[i], b[i]) and
    StackDataset(x=a, y=b)[i] is {"x": a[i], "y": b[i]}."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like input/output,"
                             " but both types are given.")
        datasets = list(args) or list(kwargs.values())
        if not datasets:
            raise ValueError("At least one dataset should be passed")
        self._length = len(datasets[0])
        if any(self._length != len(d) for d in datasets):
            raise ValueError("Size mismatch between datasets")
        self.datasets = tuple(args) if args else dict(kwargs)

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self):
        return self._length


def random_split(dataset, lengths, generator=None):
    """Subsets of a random permutation of the dataset with the given lengths, or fractions of
    its length that sum to 1 (the remainder goes one by one to the first subsets)."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        n = len(dataset)
        sizes = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.")
        lengths = sizes
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = permutation(sum(lengths), generator).tolist()
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, order[offset:offset + length]))
        offset += length
    return out
