"""Worker functions of test_multiprocessing.py: spawned processes import them by module name."""

import os
import signal

import loom


def write_rank(rank, out):
    """out[rank] = 10 * rank + 1, in place, into a tensor shared with the parent."""
    out[rank] = 10 * rank + 1


def hogwild_rows(rank, model, steps):
    """Updates row `rank` of the shared model's weight, in place, `steps` times (rows are
    disjoint, so the result is exact whatever the interleaving)."""
    for _ in range(steps):
        with loom.no_grad():
            model.weight[rank].add_(1.0)


def train_shared(rank, model, steps):
    """A few SGD steps of each worker on the one shared model (Hogwild)."""
    opt = loom.optim.SGD(model.parameters(), lr=0.01)
    x = loom.full((4, 3), float(rank + 1))
    for _ in range(steps):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()


def fail(rank, which):
    if rank != which:
        return
    raise ValueError(f"worker {rank} failed on purpose")


def exit_with(rank, code):
    if rank == 1:
        os._exit(code)


def kill_self(rank):
    if rank == 0:
        os.kill(os.getpid(), signal.SIGKILL)


def echo_back(inbox, outbox):
    """Receives tensors, changes the first in place, sends back a fresh shared one and a plain
    one, then drops them before the parent reads them."""
    shared, plain, param = inbox.get()
    shared.mul_(2)
    plain.mul_(2)
    fresh = loom.arange(4.0).share_memory_()
    outbox.put((fresh, loom.ones(2), param.requires_grad, type(param).__name__, shared.is_shared(),
                plain.is_shared()))
    del fresh
    fresh_again = loom.zeros(1)  # noqa: F841  (the address may be reused; the parent must not care)
    inbox.get()  # wait until the parent has read everything
