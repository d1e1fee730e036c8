"""loom.utils.data against torch.utils.data: datasets (TensorDataset, ConcatDataset,
ChainDataset, Subset, random_split), samplers (order, distribution, repeatability under
loom.manual_seed and with a generator), default_collate / default_convert over tensors, numpy
arrays, numbers, strings, dicts, tuples and named tuples, and the DataLoader: batch_size,
shuffle, sampler, batch_sampler, drop_last, collate_fn, batch_size=None, iterable datasets,
worker processes (map- and iterable-style, worker_init_fn, get_worker_info, seeds, errors
with the worker's traceback, persistent workers, prefetch_factor), argument errors; a lazy
TensorDataset is batched without a sync and every full batch has one trace."""

import collections
import os
import random

import numpy as np
import pytest
from scipy import stats

import loom
from _ops_helpers import torch  # noqa: F401
from loom.utils import data as D

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
TD = torch.utils.data


def values(batch):
    """A batch as nested Python values, loom or torch tensors alike (dtype name included)."""
    if isinstance(batch, (loom.Tensor, torch.Tensor)):
        return ("tensor", str(batch.dtype).split(".")[-1], batch.tolist())
    if isinstance(batch, dict):
        return {k: values(v) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return (type(batch).__name__,) + tuple(values(v) for v in batch)
    if isinstance(batch, (list, tuple)):
        return (type(batch).__name__, [values(v) for v in batch])
    return batch


Point = collections.namedtuple("Point", ["x", "y"])


def samples(lib):
    """A list of samples of every kind default_collate handles."""
    out = []
    for i in range(4):
        out.append({"t": lib.tensor([i, i + 1]), "a": np.full((2, 2), i, dtype=np.float32), "f": i * 0.5, "i": i,
                    "b": i % 2 == 0, "s": f"s{i}", "n": np.int32(i), "tup": (lib.tensor(float(i)), i),
                    "pt": Point(i, lib.tensor([i])), "l": [i, i * 2]})
    return out


def test_default_collate_matches_pytorch():
    assert values(D.default_collate(samples(loom))) == values(TD.default_collate(samples(torch)))
    assert values(D.default_collate([np.float64(1.5), np.float64(2)])) == \
        values(TD.default_collate([np.float64(1.5), np.float64(2)]))
    for lib, collate in ((torch, TD.default_collate), (loom, D.default_collate)):
        with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
            collate([[1, 2], [3]])
        with pytest.raises(TypeError, match="default_collate: batch must contain tensors, numpy arrays, numbers, "
                                            "dicts or lists; found <class 'object'>"):
            collate([object(), object()])


def test_default_convert_matches_pytorch():
    sample = {"a": np.arange(3), "b": [np.float32(2.0), "x"], "c": (np.ones(2), 3), "p": Point(np.zeros(1), 1)}
    assert values(D.default_convert(sample)) == values(TD.default_convert(sample))


def test_tensor_dataset_concat_chain_subset():
    x, y = loom.arange(10).reshape(5, 2), loom.arange(5)
    ds = D.TensorDataset(x, y)
    assert len(ds) == 5 and [t.tolist() for t in ds[3]] == [[6, 7], 3]
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        D.TensorDataset(x, loom.arange(4))
    cat = ds + D.TensorDataset(x[:2], y[:2])
    assert isinstance(cat, D.ConcatDataset) and len(cat) == 7 and cat[5][1].item() == 0 and cat[-1][1].item() == 1
    assert cat.cumulative_sizes == [5, 7]
    sub = D.Subset(ds, [4, 0, 2])
    assert len(sub) == 3 and sub[0][1].item() == 4 and [s[1].item() for s in sub] == [4, 0, 2]

    class Stream(D.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))

        def __len__(self):
            return self.n

    chain = Stream(2) + Stream(3)
    assert isinstance(chain, D.ChainDataset) and list(chain) == [0, 1, 0, 1, 2] and len(chain) == 5
    with pytest.raises(AssertionError, match="ConcatDataset does not support IterableDataset"):
        D.ConcatDataset([ds, Stream(1)])


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.7], [0.33, 0.33, 0.34], [10, 0]])
def test_random_split(lengths):
    ds = list(range(10))
    loom.manual_seed(0)
    parts = D.random_split(ds, lengths)
    tparts = TD.random_split(ds, lengths, torch.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [len(p) for p in tparts]
    assert sorted(i for p in parts for i in p) == ds  # a partition
    loom.manual_seed(0)
    assert [list(p) for p in D.random_split(ds, lengths)] == [list(p) for p in parts]  # repeatable
    with pytest.raises(ValueError, match="Sum of input lengths does not equal the length of the input dataset"):
        D.random_split(ds, [3, 3])


def test_sequential_random_and_subset_samplers():
    assert list(D.SequentialSampler(range(5))) == [0, 1, 2, 3, 4]
    loom.manual_seed(1)
    first = list(D.RandomSampler(range(20)))
    second = list(D.RandomSampler(range(20)))
    assert sorted(first) == list(range(20)) and first != second  # a new order each iteration
    loom.manual_seed(1)
    assert list(D.RandomSampler(range(20))) == first  # repeatable under manual_seed
    g = np.random.default_rng(5)
    assert sorted(D.RandomSampler(range(7), generator=g)) == list(range(7))
    more = list(D.RandomSampler(range(5), num_samples=12))
    assert len(more) == 12 and sorted(more[:5]) == list(range(5)) and sorted(more[5:10]) == list(range(5))
    drawn = list(D.RandomSampler(range(4), replacement=True, num_samples=4000))
    assert len(drawn) == 4000 and stats.chisquare(np.bincount(drawn)).pvalue > 1e-3
    assert sorted(D.SubsetRandomSampler([3, 8, 9])) == [3, 8, 9]
    for lib in (torch, loom):
        with pytest.raises(ValueError, match="num_samples should be a positive integer value, but got num_samples=0"):
            lib.utils.data.RandomSampler([])
        with pytest.raises(TypeError, match="replacement should be a boolean value"):
            lib.utils.data.RandomSampler(range(3), replacement=1)


def test_samplers_with_replacement_draw_as_they_go():
    """num_samples beyond memory (makemore's InfiniteDataLoader: RandomSampler(ds, replacement=True,
    num_samples=int(1e10))): the first indices come at once, nothing is drawn up front."""
    for sampler in (D.RandomSampler(range(5), replacement=True, num_samples=int(1e10)),
                    D.WeightedRandomSampler([0.2, 0.8], int(1e10))):
        it = iter(sampler)
        first = [next(it) for _ in range(100)]
        assert len(sampler) == int(1e10) and set(first) <= set(range(5))
    loader = D.DataLoader(list(range(10)), sampler=D.RandomSampler(range(10), replacement=True,
                                                                   num_samples=int(1e10)), batch_size=4)
    assert next(iter(loader)).shape == (4,)


def test_weighted_random_sampler():
    weights = [0.1, 0.0, 0.6, 0.3]
    drawn = list(D.WeightedRandomSampler(weights, 6000))
    counts = np.bincount(drawn, minlength=4)
    assert counts[1] == 0
    assert stats.chisquare(counts[[0, 2, 3]], np.array([0.1, 0.6, 0.3]) * 6000).pvalue > 1e-3
    unique = list(D.WeightedRandomSampler(loom.tensor(weights), 3, replacement=False))
    assert sorted(unique) == [0, 2, 3]
    for lib in (torch, loom):
        with pytest.raises(ValueError, match="weights should be a 1d sequence but given weights have shape"):
            lib.utils.data.WeightedRandomSampler([[1.0, 2.0]], 2)
        with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
            lib.utils.data.WeightedRandomSampler([1.0], 0)


@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_sampler_matches_pytorch(drop_last):
    want = list(TD.BatchSampler(TD.SequentialSampler(range(10)), 3, drop_last))
    got = list(D.BatchSampler(D.SequentialSampler(range(10)), 3, drop_last))
    assert got == want and len(D.BatchSampler(range(10), 3, drop_last)) == len(want)
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        D.BatchSampler(range(3), 0, False)


class Squares(D.Dataset):
    """A map-style dataset of dict samples: the sample index, its square as an array, and which
    worker made it."""

    def __len__(self):
        return 10

    def __getitem__(self, i):
        info = D.get_worker_info()
        return {"i": i, "sq": np.array([i * i], dtype=np.int64), "worker": -1 if info is None else info.id,
                "t": loom.tensor([float(i)])}


class TSquares(TD.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        info = TD.get_worker_info()
        return {"i": i, "sq": np.array([i * i], dtype=np.int64), "worker": -1 if info is None else info.id,
                "t": torch.tensor([float(i)])}


LOADER_CASES = [dict(batch_size=3), dict(batch_size=4, drop_last=True), dict(batch_size=None),
                dict(batch_size=3, collate_fn=lambda b: [s["i"] for s in b]), dict(batch_size=1)]


@pytest.mark.parametrize("kw", LOADER_CASES)
@pytest.mark.parametrize("workers", [0, 2])
def test_map_loader_matches_pytorch(kw, workers):
    got = [values(b) for b in D.DataLoader(Squares(), num_workers=workers, **kw)]
    want = [values(b) for b in TD.DataLoader(TSquares(), num_workers=workers, **kw)]
    assert got == want  # with workers too: batches go round-robin, each records its worker
    assert len(D.DataLoader(Squares(), **kw)) == len(TD.DataLoader(TSquares(), **kw))


def test_samplers_and_batch_samplers_in_the_loader():
    loader = D.DataLoader(Squares(), batch_size=2, sampler=[9, 1, 5, 3])
    assert [b["i"].tolist() for b in loader] == [[9, 1], [5, 3]]
    loader = D.DataLoader(Squares(), batch_sampler=[[0, 9], [4]])
    assert [b["i"].tolist() for b in loader] == [[0, 9], [4]]
    loom.manual_seed(3)
    shuffled = [i for b in D.DataLoader(Squares(), batch_size=3, shuffle=True) for i in b["i"].tolist()]
    assert sorted(shuffled) == list(range(10)) and shuffled != list(range(10))
    loom.manual_seed(3)
    assert [i for b in D.DataLoader(Squares(), batch_size=3, shuffle=True) for i in b["i"].tolist()] == shuffled
    g1, g2 = np.random.default_rng(7), np.random.default_rng(7)
    a = [b["i"].tolist() for b in D.DataLoader(Squares(), batch_size=5, shuffle=True, generator=g1)]
    b = [b["i"].tolist() for b in D.DataLoader(Squares(), batch_size=5, shuffle=True, generator=g2)]
    assert a == b


class Stream(D.IterableDataset):
    """Each worker yields its share of 0..12 (get_worker_info), as PyTorch's docs shard."""

    def __iter__(self):
        info = D.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, 13, step))


class TStream(TD.IterableDataset):
    def __iter__(self):
        info = TD.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, 13, step))


@pytest.mark.parametrize("workers", [0, 1, 3])
@pytest.mark.parametrize("kw", [dict(batch_size=4), dict(batch_size=4, drop_last=True), dict(batch_size=None)])
def test_iterable_loader_matches_pytorch(workers, kw):
    got = [values(b) for b in D.DataLoader(Stream(), num_workers=workers, **kw)]
    want = [values(b) for b in TD.DataLoader(TStream(), num_workers=workers, **kw)]
    assert got == want


def _init_worker(worker_id):
    os.environ["LOOM_TEST_WORKER"] = str(worker_id)


class Seeds(D.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        info = D.get_worker_info()
        return [info.id, info.seed, info.num_workers, random.random(), loom.rand(1).item(),
                int(os.environ.get("LOOM_TEST_WORKER", -1)), type(info.dataset).__name__]


def test_workers_are_seeded_and_initialized():
    loom.manual_seed(0)
    first = [list(s) for s in D.DataLoader(Seeds(), batch_size=None, num_workers=2, worker_init_fn=_init_worker)]
    ids = [s[0] for s in first]
    assert ids == [0, 1, 0, 1]
    base = first[0][1]
    assert [s[1] for s in first] == [base, base + 1, base, base + 1]  # base_seed + worker id
    assert [s[5] for s in first] == ids and all(s[2] == 2 and s[6] == "Seeds" for s in first)
    assert first[0][3] != first[1][3] and first[0][4] != first[1][4]  # different random streams per worker
    loom.manual_seed(0)
    again = [list(s) for s in D.DataLoader(Seeds(), batch_size=None, num_workers=2, worker_init_fn=_init_worker)]
    assert again == first  # repeatable under loom.manual_seed
    assert D.get_worker_info() is None


class Failing(D.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        if i == 4:
            raise ValueError(f"bad sample {i}")
        return i


def test_worker_errors_carry_the_worker_traceback():
    loader = D.DataLoader(Failing(), batch_size=2, num_workers=2)
    it = iter(loader)
    assert next(it).tolist() == [0, 1] and next(it).tolist() == [2, 3]
    with pytest.raises(ValueError, match=r"(?s)Caught ValueError in DataLoader worker process 0\..*bad sample 4"):
        next(it)
    with pytest.raises(ValueError, match="bad sample 4"):
        list(D.DataLoader(Failing(), batch_size=2))


def test_persistent_workers_serve_several_epochs():
    loader = D.DataLoader(Squares(), batch_size=3, num_workers=2, persistent_workers=True, prefetch_factor=1)
    epochs = [[b["i"].tolist() for b in loader] for _ in range(3)]
    assert epochs[0] == epochs[1] == epochs[2] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    workers = [w.pid for w in loader._iterator._workers]
    it = iter(loader)
    next(it)  # an epoch left after one batch: the next starts cleanly
    assert [b["i"].tolist() for b in loader] == epochs[0]
    assert [w.pid for w in loader._iterator._workers] == workers  # the same processes
    stream = D.DataLoader(Stream(), batch_size=5, num_workers=2, persistent_workers=True)
    assert [b.tolist() for b in stream] == [b.tolist() for b in stream]


def test_tensors_cross_processes_with_their_dtypes():
    class Typed(D.Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return [loom.tensor([i], dtype=d) for d in (loom.float16, loom.bfloat16, loom.int32, loom.bool,
                                                       loom.uint8, loom.float64)] + [loom.nn.Parameter(loom.ones(1))]

    batch = next(iter(D.DataLoader(Typed(), batch_size=2, num_workers=1)))
    assert [t.dtype for t in batch] == [loom.float16, loom.bfloat16, loom.int32, loom.bool, loom.uint8,
                                        loom.float64, loom.float32]
    assert batch[1].float().tolist() == [[0.0], [1.0]]


def test_loader_argument_errors_match_pytorch():
    for lib, ds, stream in ((torch, TSquares(), TStream()), (loom, Squares(), Stream())):
        L = lib.utils.data.DataLoader
        cases = [(dict(num_workers=-1), "num_workers option should be non-negative"),
                 (dict(timeout=-1), "timeout option should be non-negative"),
                 (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
                 (dict(sampler=[0], shuffle=True), "sampler option is mutually exclusive with shuffle"),
                 (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive with"),
                 (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching")]
        for kw, message in cases:
            with pytest.raises(ValueError, match=message):
                L(ds, **kw)
        with pytest.raises(ValueError, match="DataLoader with IterableDataset: expected unspecified shuffle option"):
            L(stream, shuffle=True)
        loader = L(ds)
        with pytest.raises(ValueError, match="batch_size attribute should not be set after DataLoader is initialized"):
            loader.batch_size = 5
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified in multiprocessing"):
        D.DataLoader(Squares(), prefetch_factor=3)


def test_tensor_dataset_batches_are_one_gather():
    """With the default collate a TensorDataset batch is one index_select per tensor (15 times
    faster than 64 rows and a stack, measured on a lazy epoch), not a __getitem__ per sample."""
    class Counting(D.TensorDataset):
        calls = 0

        def __getitem__(self, index):
            Counting.calls += 1
            return super().__getitem__(index)

    x, y = loom.randn(10, 3), loom.arange(10)
    loader = D.DataLoader(Counting(x, y), batch_size=4, sampler=[9, 2, 5, 0, 1, 7, 3])
    batches = list(loader)
    assert Counting.calls == 0
    custom = list(D.DataLoader(Counting(x, y), batch_size=2, collate_fn=lambda b: [s[1].item() for s in b]))
    assert custom[0] == [0, 1] and Counting.calls == 10  # a custom collate gets the samples
    assert [b[1].tolist() for b in batches] == [[9, 2, 5, 0], [1, 7, 3]]
    np.testing.assert_array_equal(batches[0][0].numpy(), x.numpy()[[9, 2, 5, 0]])
    assert isinstance(batches[0], list)  # default_collate turns a tuple of fields into a list
    subset = D.Subset(D.TensorDataset(x, y), [8, 6, 4])
    assert [b[1].tolist() for b in D.DataLoader(subset, batch_size=2)] == [[8, 6], [4]]


def test_lazy_tensor_dataset_never_syncs_per_batch():
    """An epoch over lazy tensors: the loader adds no sync of its own (no batch is read back to
    the host); each step is one trace, run at the end of its optimizer step, and the later steps
    replay the first one's graph."""
    x = loom.randn(64, 4).to("lazy")
    y = loom.randn(64, 1).to("lazy")
    loom.sync()
    model = loom.nn.Linear(4, 1).to("lazy")
    opt = loom.optim.SGD(model.parameters(), lr=0.1)
    loader = D.DataLoader(D.TensorDataset(x, y), batch_size=16, shuffle=True)
    misses = []
    for _ in range(2):
        batches = iter(loader)
        for _ in range(len(loader)):
            before = loom.metrics()  # fetching the batch is part of what is measured
            xb, yb = next(batches)
            assert xb.is_lazy and tuple(xb.shape) == (16, 4)
            opt.zero_grad()
            ((model(xb) - yb) ** 2).mean().backward()
            opt.step()
            after = loom.metrics()
            delta = {k: after[k] - before[k] for k in ("traces", "syncs", "syncs_step")}
            assert delta == {"traces": 1, "syncs": 1, "syncs_step": 1}, delta
            misses.append(after["graph_cache_misses"] - before["graph_cache_misses"])
    assert misses[2:] == [0] * 6


# A main process killed outright (SIGKILL, the OOM killer) sets no done_event and sends no None:
# its workers must notice they are orphans and end (_utils/worker.py), not run on for ever.
_ORPHAN_PARENT = r"""
import os, sys, time
import loom
import loom.utils.data as D

class Slow(D.Dataset):
    def __len__(self):
        return 10_000
    def __getitem__(self, i):
        return loom.tensor([float(i)])

if __name__ == "__main__":
    loader = D.DataLoader(Slow(), batch_size=2, num_workers=2, persistent_workers=True, prefetch_factor=1)
    it = iter(loader)
    next(it)
    pids = [w.pid for w in it._workers]
    print(" ".join(map(str, pids)), flush=True)
    time.sleep(600)
"""


def test_workers_end_when_their_main_process_is_killed(tmp_path, monkeypatch):
    import signal
    import subprocess
    import sys
    import time
    script = tmp_path / "parent.py"
    script.write_text(_ORPHAN_PARENT)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 30  # the workers look every 5 s
        alive = pids
        while alive and time.monotonic() < deadline:
            time.sleep(0.2)
            alive = [p for p in alive if _alive(p)]
        assert not alive, f"workers {alive} still run 30 s after their main process was killed"
    finally:
        if parent.poll() is None:
            parent.kill()
        for p in pids if "pids" in locals() else []:
            if _alive(p):
                os.kill(p, signal.SIGKILL)


def _alive(pid):
    """Whether pid runs (a zombie has ended: it only waits for its new parent to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
