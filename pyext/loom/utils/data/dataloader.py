"""DataLoader (torch.utils.data.dataloader): batches from a dataset, in this process or in
worker processes.

Batches are made on the CPU (or wherever the dataset's tensors are): the program moves them to
its device, as with PyTorch. A TensorDataset of lazy tensors is batched by one index_select
per tensor with the batch's indices as tensor data, so iterating it records ops and never syncs,
and every full batch has the same trace.

Worker processes (num_workers > 0) are started with multiprocessing (the platform's default
start method unless multiprocessing_context says otherwise) and return batches through a queue,
tensors pickled by value (_utils/worker.py). Each worker is seeded with base_seed + worker_id
(Python's random, numpy's global generator and loom's), base_seed drawn from loom's generator
(or `generator`) per iterator. pin_memory is accepted: loom's host memory is what its devices
read.
"""

import itertools
import multiprocessing
import queue
import threading

from loom.utils.data._utils import worker as _worker
from loom.utils.data._utils.collate import default_collate, default_convert
from loom.utils.data._utils.fetch import make_fetcher
from loom.utils.data._utils.random import draw_seed
from loom.utils.data.dataset import IterableDataset
from loom.utils.data.sampler import BatchSampler, RandomSampler, SequentialSampler


_STATUS_CHECK_INTERVAL = 5.0  # seconds between checks that the workers are still alive


class _InfiniteConstantSampler:
    """The 'indices' of an iterable dataset: None, forever (each fetch takes the next batch)."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    _frozen = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device=""):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None:
            if iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        if isinstance(multiprocessing_context, str):
            multiprocessing_context = multiprocessing.get_context(multiprocessing_context)

        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.num_workers = sampler, batch_sampler, num_workers
        self.collate_fn, self.pin_memory, self.pin_memory_device = collate_fn, pin_memory, pin_memory_device
        self.timeout, self.worker_init_fn, self.generator = timeout, worker_init_fn, generator
        self.multiprocessing_context = multiprocessing_context
        self.prefetch_factor, self.persistent_workers = prefetch_factor, persistent_workers
        self._iterable = iterable
        self._iterator = None
        self._initialized = True

    def __setattr__(self, name, value):
        if self.__dict__.get("_initialized") and name in self._frozen:
            raise ValueError(f"{name} attribute should not be set after {type(self).__name__} is initialized")
        object.__setattr__(self, name, value)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if self.persistent_workers:
            if self._iterator is None:
                self._iterator = _MultiProcessIter(self)
            else:
                self._iterator._reset(self)
            return self._iterator
        return _MultiProcessIter(self)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)


class _BaseIter:
    def __init__(self, loader):
        self._dataset, self._iterable = loader.dataset, loader._iterable
        self._auto_collation, self._collate_fn = loader._auto_collation, loader.collate_fn
        self._drop_last, self._index_sampler = loader.drop_last, loader._index_sampler
        self._batch_size = loader.batch_size
        self._num_yielded = 0
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter=False):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0

    def _next_index(self):
        return next(self._sampler_iter)

    def __iter__(self):
        return self

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        return data

    def __len__(self):
        return len(self._index_sampler)


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = make_fetcher(self._iterable, self._dataset, self._auto_collation, self._collate_fn,
                                     self._drop_last)

    def _next_data(self):
        index = self._next_index()
        if self._iterable:
            return self._fetcher.fetch(self._batch_size)
        return self._fetcher.fetch(index)


class _MultiProcessIter(_BaseIter):
    """Tasks go round-robin to the workers that still have data; up to prefetch_factor tasks
    per worker are in flight; results are returned in task order."""

    def __init__(self, loader):
        self._loader = loader
        self._num_workers = loader.num_workers
        self._prefetch_factor = loader.prefetch_factor
        self._timeout = loader.timeout
        self._persistent = loader.persistent_workers
        ctx = loader.multiprocessing_context or multiprocessing
        self._base_seed = draw_seed(loader.generator)
        self._worker_result_queue = ctx.Queue()
        self._done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        self._shutdown = False
        iterable = isinstance(loader.dataset, IterableDataset)
        for i in range(self._num_workers):
            index_queue = ctx.Queue()
            index_queue.cancel_join_thread()
            w = ctx.Process(target=_worker.worker_loop,
                            args=(iterable, loader.dataset, index_queue, self._worker_result_queue, self._done_event,
                                  loader._auto_collation, loader.collate_fn, loader.drop_last, self._base_seed,
                                  loader.worker_init_fn, i, self._num_workers), daemon=True)
            w.start()
            self._index_queues.append(index_queue)
            self._workers.append(w)
        super().__init__(loader)

    def _reset(self, loader, first_iter=False):
        super()._reset(loader, first_iter)
        self._send_idx = 0  # the next task's id
        self._rcvd_idx = 0  # the next task whose result is returned
        self._task_info = {}  # task id -> (worker,) while in flight, (worker, data) once arrived
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            # persistent workers: each worker acknowledges a ResumeIteration after every result
            # of the last epoch it still had to send; those are dropped
            for q in self._index_queues:
                q.put(_worker.ResumeIteration())
            pending = self._num_workers
            while pending:
                task_id, _ = self._get_data()
                if isinstance(task_id, _worker.ResumeIteration):
                    pending -= 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_put_index(self):
        if self._tasks_outstanding >= self._prefetch_factor * self._num_workers:
            return
        try:
            index = self._next_index()
        except StopIteration:
            return
        if self._iterable:  # an iterable dataset's worker is asked for its next batch_size samples
            index = self._batch_size
        for _ in range(self._num_workers):  # the next worker that still has data
            worker = next(self._worker_queue_idx_cycle)
            if self._workers_status[worker]:
                break
        else:
            return  # every worker's stream has ended
        self._index_queues[worker].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _get_data(self):
        """(task id, data) from the result queue, checking that the workers are alive while it
        waits and honouring the loader's timeout."""
        waited = 0.0
        while True:
            wait = _STATUS_CHECK_INTERVAL if self._timeout <= 0 else min(_STATUS_CHECK_INTERVAL,
                                                                        self._timeout - waited)
            try:
                return self._worker_result_queue.get(timeout=wait)
            except queue.Empty:
                waited += wait
                dead = [w.pid for w in self._workers if not w.is_alive() and w.exitcode not in (None, 0)]
                if dead:
                    self._shutdown_workers()
                    raise RuntimeError(f"DataLoader worker (pid(s) {', '.join(map(str, dead))}) exited "
                                       "unexpectedly") from None
                if self._timeout > 0 and waited >= self._timeout:
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None

    def _next_data(self):
        while True:
            # skip tasks sent to workers whose stream has ended: they will not answer
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2 or self._workers_status[info[0]]:
                    break
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:  # arrived earlier, out of order
                data = self._task_info.pop(self._rcvd_idx)[1]
                return self._process(data)
            task_id, data = self._get_data()
            self._tasks_outstanding -= 1
            if isinstance(data, _worker.IterableDatasetStopIteration):
                # this task and the worker's later ones are skipped above
                self._workers_status[data.worker_id] = False
                self._try_put_index()
                continue
            if task_id != self._rcvd_idx:
                self._task_info[task_id] += (data,)
                continue
            del self._task_info[task_id]
            return self._process(data)

    def _process(self, data):
        self._rcvd_idx += 1
        self._try_put_index()
        if isinstance(data, _worker.ExceptionWrapper):
            data.reraise()
        return data

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        self._done_event.set()
        for q in self._index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        for w in self._workers:
            w.join(timeout=_STATUS_CHECK_INTERVAL)
            if w.is_alive():
                w.terminate()
        for q in self._index_queues:
            q.close()
        self._worker_result_queue.cancel_join_thread()
        self._worker_result_queue.close()

    def __del__(self):
        if threading is not None:  # not while the interpreter shuts down
            self._shutdown_workers()
