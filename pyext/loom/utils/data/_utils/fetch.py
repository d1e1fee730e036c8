"""Fetchers (torch.utils.data._utils.fetch): one batch (or one sample, without auto-collation)
from a map-style or iterable-style dataset."""

from loom.utils.data._utils.collate import default_collate


class MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn
        # a dataset that gathers a whole batch at once gives default_collate's result directly
        self._batched = auto_collation and collate_fn is default_collate and hasattr(dataset, "_fetch_batch")

    def fetch(self, index):
        if self._batched:
            return self.dataset._fetch_batch(index)
        if self.auto_collation:
            return self.collate_fn([self.dataset[i] for i in index])
        return self.collate_fn(self.dataset[index])


class IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset_iter = iter(dataset)
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.ended = False

    def fetch(self, batch_size):
        """The next batch of batch_size samples (or the next sample without auto-collation);
        StopIteration when the stream has ended (or only a partial batch is left with drop_last)."""
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        data = []
        for _ in range(batch_size):
            try:
                data.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < batch_size):
            raise StopIteration
        return self.collate_fn(data)


def make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last):
    cls = IterableFetcher if iterable else MapFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)
