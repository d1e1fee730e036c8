"""DataLoader worker processes (torch.utils.data._utils.worker).

A worker takes tasks (task id, indices) from its own index queue, fetches and collates the batch
and puts (task id, batch) on the shared result queue; an exception travels back as an
ExceptionWrapper and is raised in the main process with the worker's traceback. None on the
index queue ends the worker; a ResumeIteration restarts an iterable dataset's stream for the
next epoch of persistent workers.

Tensors cross the process boundary by pickling (Tensor.__reduce_ex__, loom/_tensor.py: by
value), so a batch arrives as new tensors in the main process.
"""

import os
import queue
import random
import sys
import traceback
from dataclasses import dataclass

import numpy as np

import loom
from loom.utils.data._utils.fetch import make_fetcher


# ---- what a worker knows about itself ----

@dataclass(frozen=True)
class WorkerInfo:
    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info = None

# How often a waiting worker looks for done_event and for its parent (seconds).
_PARENT_CHECK_SECONDS = 5.0


def get_worker_info():
    """In a DataLoader worker: its WorkerInfo (id, num_workers, seed, its copy of the dataset);
    in the main process: None."""
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, with its traceback as text, to re-raise in the main
    process."""

    def __init__(self, exc_info, where):
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:  # KeyError quotes its message: keep it readable
            raise KeyError(msg)
        try:
            exc = self.exc_type(msg)
        except Exception:  # noqa: BLE001  an exception type whose constructor wants more
            raise RuntimeError(msg) from None
        raise exc


class IterableDatasetStopIteration:
    """A worker's iterable dataset has ended."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class ResumeIteration:
    """Persistent workers: start the next epoch (a new iterator over an iterable dataset)."""


def _seed_worker(seed):
    random.seed(seed)
    loom.manual_seed(seed)
    np.random.seed(seed % 2**32)


def worker_loop(iterable, dataset, index_queue, result_queue, done_event, auto_collation, collate_fn, drop_last,
                base_seed, init_fn, worker_id, num_workers):
    global _worker_info
    # A worker outlives a main process that was killed (SIGKILL, the OOM killer): nothing sets
    # done_event or sends None then. So while it waits for tasks it checks that its parent is
    # still the process that started it (an orphan is re-parented to init or a subreaper), and
    # ends when not, as PyTorch's workers do, instead of running until someone kills it.
    parent, orphaned = os.getppid(), False
    try:
        seed = base_seed + worker_id
        # Batches cross to the main process through pickles of host memory: a worker makes its
        # tensors on the CPU whatever default device the parent set (the main process moves them).
        loom.set_default_device(None)
        _seed_worker(seed)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        init_error = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
        except Exception:  # noqa: BLE001  reported with the first task
            init_error = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
        stream_ended = False
        while True:
            try:
                task = index_queue.get(timeout=_PARENT_CHECK_SECONDS)
            except queue.Empty:
                if done_event.is_set():
                    break
                if os.getppid() != parent:
                    orphaned = True
                    break
                continue
            if task is None:
                break
            if isinstance(task, ResumeIteration):
                stream_ended = False
                fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
                result_queue.put((task, None))  # every result of the last epoch is ahead of this
                continue
            if done_event.is_set() or stream_ended:
                continue
            task_id, index = task
            if init_error is not None:
                data, init_error = init_error, None
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    stream_ended = True
                    data = IterableDatasetStopIteration(worker_id)
                except Exception:  # noqa: BLE001  raised again in the main process
                    data = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
            result_queue.put((task_id, data))
            del data
    except KeyboardInterrupt:
        pass
    if done_event.is_set() or orphaned:
        # Nobody reads the queue any more: exit without waiting for its feeder thread to flush.
        result_queue.cancel_join_thread()
        result_queue.close()
