"""The ranks of the jobs tests/python/test_distributed*.py start (_dist.run_job): one function per
case, run as `python3 _dist_workers.py CASE [args]` with torchrun's environment. A case checks
what it can itself (every rank knows every rank's inputs: they are functions of the rank) with
numpy references, and reports what the test must compare across ranks with report()."""

import json
import os
import sys
import time

import numpy as np

import loom
import loom.distributed as dist
from loom import nn

# The threads of this process before init_process_group (case_threads tells loom's from Gloo's).
THREADS_AT_IMPORT = set(int(t) for t in os.listdir("/proc/self/task"))

RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))

NUMPY = {loom.float32: np.float32, loom.float64: np.float64, loom.int64: np.int64, loom.int32: np.int32,
         loom.uint8: np.uint8, loom.bool: np.bool_, loom.float16: np.float16}


def report(value):
    with open(os.path.join(os.environ["LOOM_TEST_OUT"], f"rank{RANK}.json"), "w") as f:
        json.dump(value, f)


def data(rank, shape, dtype, salt=0):
    """Rank `rank`'s input: distinct per rank, exact in every dtype used."""
    rng = np.random.default_rng(1000 * rank + salt)
    if dtype == loom.bool:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype in (loom.float32, loom.float64, loom.float16):
        return (rng.integers(-8, 9, shape) / 4).astype(NUMPY[dtype])  # exact sums and products
    return rng.integers(1, 5, shape).astype(NUMPY[dtype])


def check(actual, expected, what):
    a = actual.to("cpu").numpy() if isinstance(actual, loom.Tensor) else np.asarray(actual)
    expected = np.asarray(expected)
    assert a.shape == expected.shape, f"{what}: shape {a.shape}, expected {expected.shape}"
    assert a.dtype == expected.dtype, f"{what}: dtype {a.dtype}, expected {expected.dtype}"
    np.testing.assert_allclose(a.astype(np.float64), expected.astype(np.float64), rtol=1e-6, atol=1e-6,
                               err_msg=what)


REDUCE = {dist.ReduceOp.SUM: lambda xs: np.sum(xs, axis=0).astype(xs[0].dtype),
          dist.ReduceOp.PRODUCT: lambda xs: np.prod(xs, axis=0).astype(xs[0].dtype),
          dist.ReduceOp.MIN: lambda xs: np.min(xs, axis=0),
          dist.ReduceOp.MAX: lambda xs: np.max(xs, axis=0),
          dist.ReduceOp.AVG: lambda xs: (np.sum(xs, axis=0) / len(xs)).astype(xs[0].dtype)}


def bool_reduce(op, xs):
    if op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
        return np.any(xs, axis=0)
    return np.all(xs, axis=0)


def on(device, x):
    return loom.tensor(x, device=device)


def collectives_on(device, group=None, ranks=None):
    """Every collective on `device` ("cpu" eager, "lazy"), against numpy; `group` over global
    `ranks` (the world by default)."""
    ranks = list(range(WORLD)) if ranks is None else ranks
    size = len(ranks)
    me = ranks.index(RANK)
    shape = (3, 5)
    for dtype in (loom.float32, loom.float64, loom.int64, loom.float16, loom.bool):
        ops = [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN]
        if dtype != loom.bool:
            ops.append(dist.ReduceOp.PRODUCT)
        if dtype in (loom.float32, loom.float64):
            ops.append(dist.ReduceOp.AVG)
        for op in ops:
            xs = [data(r, shape, dtype, 1) for r in ranks]
            t = on(device, xs[me])
            dist.all_reduce(t, op=op, group=group)
            want = bool_reduce(op, xs) if dtype == loom.bool else REDUCE[op](xs)
            check(t, want, f"all_reduce {op.name} {dtype} on {device}")
    x = [data(r, shape, loom.float32, 2) for r in ranks]
    for root in ranks:
        t = on(device, x[me])
        dist.broadcast(t, src=root, group=group)
        check(t, x[ranks.index(root)], f"broadcast from {root} on {device}")
        t = on(device, x[me])
        dist.reduce(t, dst=root, op=dist.ReduceOp.SUM, group=group)
        check(t, np.sum(x, axis=0) if RANK == root else x[me], f"reduce to {root} on {device}")
        outs = [on(device, np.zeros(shape, np.float32)) for _ in ranks] if RANK == root else None
        dist.gather(on(device, x[me]), outs, dst=root, group=group)
        if RANK == root:
            for r in range(size):
                check(outs[r], x[r], f"gather to {root}: rank {ranks[r]}'s on {device}")
        chunks = [on(device, data(r, shape, loom.float32, 3 + root)) for r in range(size)] if RANK == root else None
        t = on(device, np.zeros(shape, np.float32))
        dist.scatter(t, chunks, src=root, group=group)
        check(t, data(me, shape, loom.float32, 3 + root), f"scatter from {root} on {device}")
    outs = [on(device, np.zeros(shape, np.float32)) for _ in ranks]
    dist.all_gather(outs, on(device, x[me]), group=group)
    for r in range(size):
        check(outs[r], x[r], f"all_gather: rank {ranks[r]}'s on {device}")
    for out_shape in ((size * 3, 5), (size, 3, 5)):
        out = on(device, np.zeros(out_shape, np.float32))
        dist.all_gather_into_tensor(out, on(device, x[me]), group=group)
        check(out, np.stack(x).reshape(out_shape), f"all_gather_into_tensor {out_shape} on {device}")
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MAX):
        big = [data(r, (size * 2, 3), loom.float64, 4) for r in ranks]
        out = on(device, np.zeros((2, 3), np.float64))
        dist.reduce_scatter_tensor(out, on(device, big[me]), op=op, group=group)
        check(out, REDUCE[op](big)[2 * me:2 * me + 2], f"reduce_scatter_tensor {op.name} on {device}")
        out = on(device, np.zeros((2, 3), np.float64))
        dist.reduce_scatter(out, [on(device, b[2 * i:2 * i + 2]) for i, b in enumerate([big[me]] * size)],
                            op=op, group=group)
        check(out, REDUCE[op](big)[2 * me:2 * me + 2], f"reduce_scatter {op.name} on {device}")
    # A non-contiguous tensor, reduced in place through its view.
    base = on(device, np.zeros((5, 3), np.float32))
    view = base.t()
    view.copy_(on(device, x[me]))
    dist.all_reduce(view, group=group)
    check(view, np.sum(x, axis=0), f"all_reduce of a transposed view on {device}")
    check(base, np.sum(x, axis=0).T, f"all_reduce writes through the view into its base on {device}")


def p2p_and_objects(group=None, ranks=None):
    ranks = list(range(WORLD)) if ranks is None else ranks
    size = len(ranks)
    me = ranks.index(RANK)
    nxt, prev = ranks[(me + 1) % size], ranks[(me - 1) % size]
    for device in ("cpu", "lazy"):
        for tag in (0, 7):
            out = on(device, np.zeros(4, np.float64))
            if me % 2 == 0:
                dist.send(on(device, data(RANK, 4, loom.float64, tag)), nxt, group=group, tag=tag)
                dist.recv(out, prev, group=group, tag=tag)
            else:
                dist.recv(out, prev, group=group, tag=tag)
                dist.send(on(device, data(RANK, 4, loom.float64, tag)), nxt, group=group, tag=tag)
            check(out, data(prev, 4, loom.float64, tag), f"send/recv ring on {device}, tag {tag}")
    dist.barrier(group=group)
    objects = [None] * size
    dist.all_gather_object(objects, {"rank": RANK, "text": "x" * RANK}, group=group)
    assert objects == [{"rank": r, "text": "x" * r} for r in ranks], objects
    items = [("a", RANK), [1, 2, RANK]] if me == 0 else [None, None]
    dist.broadcast_object_list(items, src=ranks[0], group=group)
    assert items == [("a", ranks[0]), [1, 2, ranks[0]]], items
    got = [None] * size if me == size - 1 else None
    dist.gather_object(RANK * 10, got, dst=ranks[-1], group=group)
    if me == size - 1:
        assert got == [r * 10 for r in ranks], got


def async_work():
    """async_op=True on eager tensors: the call runs on the group's thread; wait() returns once
    it is done; calls keep their order with synchronous ones."""
    shape = (4, 6)
    xs = [data(r, shape, loom.float32, 5) for r in range(WORLD)]
    t = loom.tensor(xs[RANK])
    work = dist.all_reduce(t, async_op=True)
    u = loom.tensor(xs[RANK])
    dist.all_reduce(u)  # waits for the queued one first
    assert work.wait() is True and work.is_completed()
    check(t, np.sum(xs, axis=0), "async all_reduce")
    check(u, np.sum(xs, axis=0), "all_reduce after an async one")
    strided = loom.tensor(xs[RANK]).t()
    dist.broadcast(strided, src=WORLD - 1, async_op=True).wait()
    check(strided, xs[WORLD - 1].T, "async broadcast into a transposed view")
    outs = [loom.zeros(shape) for _ in range(WORLD)]
    dist.all_gather(outs, loom.tensor(xs[RANK]), async_op=True).wait()
    for r in range(WORLD):
        check(outs[r], xs[r], "async all_gather")
    out = loom.zeros(shape[0] // 2 if WORLD == 2 else 1, shape[1]) if WORLD in (2, 4) else None
    if out is not None:
        big = [data(r, (out.shape[0] * WORLD, shape[1]), loom.float32, 6) for r in range(WORLD)]
        dist.reduce_scatter_tensor(out, loom.tensor(big[RANK]), async_op=True).wait()
        k = out.shape[0]
        check(out, np.sum(big, axis=0)[RANK * k:(RANK + 1) * k], "async reduce_scatter_tensor")
    works = [dist.all_reduce(loom.full((3,), float(RANK + i)), async_op=True) for i in range(5)]
    for w in works:
        w.wait()
    buf = loom.zeros(3)
    if RANK == 0:
        dist.isend(loom.tensor([1.0, 2.0, 3.0]), 1).wait()
    elif RANK == 1:
        dist.irecv(buf, 0).wait()
        check(buf, np.array([1.0, 2.0, 3.0], np.float32), "isend/irecv")
    dist.barrier(async_op=True).wait()
    lazy = loom.tensor(xs[RANK], device="lazy")
    w = dist.all_reduce(lazy, async_op=True)
    assert w.is_completed()
    w.wait()
    check(lazy, np.sum(xs, axis=0), "async all_reduce on a lazy tensor")


def case_collectives():
    """Every collective against numpy: eager, lazy, lazy through the CUDA lowering's host
    emulator, and on a subgroup of ranks (0 and the last)."""
    collectives_on("cpu")
    loom.metrics_reset()
    collectives_on("lazy")
    assert not loom._C._dist_pending(loom.device("lazy"))
    loom._C._set_executor("cuda-emulated")
    try:
        collectives_on("lazy")
    finally:
        loom._C._set_executor("compiled")
    p2p_and_objects()
    async_work()
    sub_ranks = [0, WORLD - 1]
    sub = dist.new_group(sub_ranks)
    if RANK in sub_ranks:
        assert dist.get_rank(sub) == sub_ranks.index(RANK) and dist.get_world_size(sub) == 2
        collectives_on("cpu", sub, sub_ranks)
        collectives_on("lazy", sub, sub_ranks)
        p2p_and_objects(sub, sub_ranks)
    else:
        assert sub is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(sub) == -1
        assert dist.all_reduce(loom.ones(2), group=sub) is None
    dist.barrier()
    report({"rank": dist.get_rank(), "size": dist.get_world_size(), "backend": dist.get_backend()})


def case_lazy_order():
    """Lazy collectives run in program order whatever a rank's syncs: rank 0 reads a value
    between two all-reduces (two traces), the others read nothing until the end (one trace)."""
    a = loom.full((4,), float(RANK + 1), device="lazy")
    b = loom.full((2, 3), float(10 * (RANK + 1)), device="lazy")
    dist.all_reduce(a)
    if RANK == 0:
        a.sum().item()  # runs the first all-reduce now, alone
    dist.all_reduce(b)
    dropped = loom.full((5,), 1.0, device="lazy")
    dist.all_reduce(dropped)
    del dropped  # never read: it must still run, or the other ranks would wait for it
    c = loom.full((3,), 2.0, device="lazy")
    dist.all_reduce(c, op=dist.ReduceOp.PRODUCT)
    total = sum(range(1, WORLD + 1))
    check(a, np.full(4, total, np.float32), "first all_reduce")
    check(b, np.full((2, 3), 10 * total, np.float32), "second all_reduce")
    check(c, np.full(3, 2.0 ** WORLD, np.float32), "the all_reduce after a dropped one")


def case_mismatch():
    """Ranks passing different shapes (and then different collectives) all raise, naming them."""
    errors = []
    for device in ("cpu", "lazy"):
        t = loom.ones(3 + RANK, device=device)
        try:
            dist.all_reduce(t)
            t.sum().item()
        except dist.DistBackendError as e:
            errors.append(str(e))
    try:
        t = loom.ones(2)
        if RANK == 0:
            dist.broadcast(t, src=0)
        else:
            dist.all_reduce(t)
    except dist.DistBackendError as e:
        errors.append(str(e))
    # The group still works after a disagreement every rank saw, and so do lazy syncs: the
    # failed collective took only what was computed from it.
    for device in ("cpu", "lazy"):
        t = loom.ones(2, device=device)
        dist.all_reduce(t)
        check(t, np.full(2, WORLD, np.float32), f"all_reduce on {device} after the mismatches")
    report({"errors": errors})


def case_sizes():
    """Gathers of several chunks (runtime/distributed/gloo.cpp, Note [One message per peer]: a
    chunk is at most 2 MiB), and ranks disagreeing on sizes where one side sends more than a
    chunk: every rank raises, and the group still works. With LOOM_DIST_CHECK=0 (no header to
    tell the calls apart), the error names each rank's size instead."""
    checked = os.environ.get("LOOM_DIST_CHECK") != "0"
    n = 3 << 18  # 3 MiB of float32
    big = [data(r, n, loom.float32) for r in range(WORLD)]
    t = loom.tensor(big[RANK])
    dist.all_reduce(t)
    check(t, np.sum(big, axis=0), "all_reduce of 3 MiB")
    parts = [loom.empty(n) for _ in range(WORLD)]
    dist.all_gather(parts, loom.tensor(big[RANK]))
    for r in range(WORLD):
        check(parts[r], big[r], f"all_gather of 3 MiB, rank {r}'s part")
    errors = []
    for device in ("cpu", "lazy"):
        t = loom.ones(n if RANK == 0 else 3, device=device)
        try:
            dist.all_reduce(t)
            t.sum().item()
        except dist.DistBackendError as e:
            errors.append(str(e))
    t = loom.tensor(big[RANK])
    dist.all_reduce(t)
    check(t, np.sum(big, axis=0), "all_reduce of 3 MiB after the disagreements")
    report({"errors": errors, "checked": checked})


def _collective_loop(how, done=lambda steps: None):
    """Runs collectives until one fails: eager all-reduces ("eager"), lazy ones read at a sync
    ("lazy"), or DDP training steps on lazy tensors ("ddp"); calls done(n) after the n-th."""
    if how == "ddp":
        loom.manual_seed(0)
        m = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 4)).to("lazy")
        ddp = nn.parallel.DistributedDataParallel(m, bucket_cap_mb=0.05)  # a few buckets
        opt = loom.optim.SGD(ddp.parameters(), lr=0.01)
    t = loom.ones(1 << 18)
    steps = 0
    while True:
        if how == "eager":
            dist.all_reduce(t)
        elif how == "lazy":
            u = loom.ones(1 << 18, device="lazy") * 2
            dist.all_reduce(u)
            u.sum().item()
        else:
            opt.zero_grad()
            loss = ddp(loom.randn(16, 64, device="lazy")).square().mean()
            loss.backward()
            opt.step()
            loss.item()
        steps += 1
        done(steps)


STOPPED = os.path.join(os.environ.get("LOOM_TEST_OUT", "."), "stopped")


def _note_stop():
    """Notes when rank 1 stopped (and its pid) in a file the other ranks read."""
    with open(STOPPED + ".tmp", "w") as f:
        json.dump({"time": time.time(), "pid": os.getpid()}, f)
    os.replace(STOPPED + ".tmp", STOPPED)


# Iterations of _collective_loop rank 1 completes before it is stopped. Each one's collectives
# needed every rank, so by then every rank is past its set-up (DDP's broadcast) and inside the
# loop, and every kernel of the loop is compiled: the stop lands in a steady-state iteration.
# (A timer from the barrier, as before, could land in the first step's kernel compile, where
# rank 0 waited in a different collective, or had waited for long already.)
STEPS_BEFORE_STOP = 3


def _loop_then_stop(how, sig):
    """Rank 1: runs _collective_loop(how) and, once STEPS_BEFORE_STOP iterations are done, sends
    `sig` to this process from a thread a moment later (the main thread is inside the next
    iteration by then), first noting it (_note_stop)."""
    import threading

    ready = threading.Event()

    def stop():
        ready.wait()
        time.sleep(0.01)
        _note_stop()
        os.kill(os.getpid(), sig)

    threading.Thread(target=stop, daemon=True).start()
    _collective_loop(how, lambda steps: steps == STEPS_BEFORE_STOP and ready.set())


def _fail_and_report(how):
    """Ranks other than 1: run _collective_loop until it raises; report the error, how long
    after rank 1 stopped it came, and what a call on the broken group raises then."""
    try:
        _collective_loop(how)
    except dist.DistBackendError as e:
        now = time.time()
        elapsed = now - json.load(open(STOPPED))["time"] if os.path.exists(STOPPED) else None
        try:  # the broken group refuses further calls at once
            dist.all_reduce(loom.ones(2))
            again = None
        except dist.DistBackendError as e2:
            again = str(e2)
        report({"error": str(e), "elapsed": elapsed, "again": again})


def case_killed(how):
    """Rank 1 dies: before the collective ("exits": os._exit after a barrier) or by SIGKILL in
    the middle of a loop of eager all-reduces, lazy ones or lazy DDP steps (a thread of its own
    kills it once STEPS_BEFORE_STOP of them have run, while its main thread is inside the next).
    The other ranks, inside their own collectives then, raise DistBackendError well within the
    timeout."""
    import signal

    dist.barrier()
    if RANK == 1:
        if how == "exits":
            _note_stop()
            os._exit(3)
        _loop_then_stop(how, signal.SIGKILL)
    _fail_and_report("eager" if how == "exits" else how)


def case_timeout(how):
    """Rank 1 stops (alive, not exiting: SIGSTOP) in the middle of a loop of collectives, and
    stays stopped past the timeout; the other ranks' collective raises when the timeout ends.
    Rank 0 then kills it (the test reaps it)."""
    import signal

    dist.barrier()
    if RANK == 1:
        _loop_then_stop(how, signal.SIGSTOP)
    _fail_and_report(how)
    if RANK == 0:
        os.kill(json.load(open(STOPPED))["pid"], signal.SIGKILL)


def case_autograd():
    """The derivatives of the differentiable collectives (loom.distributed.nn.functional), eager
    and lazy, against their closed forms: rank r's loss is sum(y * w_r)."""
    F = dist.nn.functional
    n = 4
    w = [data(r, WORLD * n, loom.float64, 7) for r in range(WORLD)]
    x = [data(r, WORLD * n, loom.float64, 8) for r in range(WORLD)]
    for device in ("cpu", "lazy"):
        def leaf():
            return loom.tensor(x[RANK], device=device, requires_grad=True)

        def weight(k=None):
            return loom.tensor(w[RANK] if k is None else w[RANK][:k], device=device)

        xr = leaf()
        y = F.all_reduce(xr * (RANK + 1))
        check(y, sum((r + 1) * x[r] for r in range(WORLD)), f"all_reduce forward on {device}")
        (y * weight()).sum().backward()
        check(xr.grad, (RANK + 1) * np.sum(w, axis=0), f"all_reduce backward on {device}")
        xr = leaf()
        (F.all_reduce(xr, op=dist.ReduceOp.AVG) * weight()).sum().backward()
        check(xr.grad, np.sum(w, axis=0) / WORLD, f"all_reduce AVG backward on {device}")
        xr = leaf()
        parts = F.all_gather(xr[:n])
        (loom.cat(parts) * weight()).sum().backward()
        want = np.zeros(WORLD * n)
        want[:n] = np.sum(w, axis=0)[RANK * n:(RANK + 1) * n]
        check(xr.grad, want, f"all_gather backward on {device}")
        xr = leaf()
        out = F.reduce_scatter(loom.empty(n), [xr[i * n:(i + 1) * n] for i in range(WORLD)])
        check(out, np.sum(x, axis=0)[RANK * n:(RANK + 1) * n], f"reduce_scatter forward on {device}")
        (out * weight(n)).sum().backward()
        check(xr.grad, np.concatenate([w[r][:n] for r in range(WORLD)]), f"reduce_scatter backward on {device}")
        xr = leaf()
        (F.broadcast(xr, src=WORLD - 1) * weight()).sum().backward()
        check(xr.grad, np.sum(w, axis=0) if RANK == WORLD - 1 else np.zeros(WORLD * n),
              f"broadcast backward on {device}")
        xr = leaf()
        try:
            F.all_reduce(xr, op=dist.ReduceOp.MAX).sum().backward()
            raise AssertionError("all_reduce MAX had a gradient")
        except RuntimeError as e:
            assert "not differentiable" in str(e), e


# ---- data-parallel training ----

def model(dtype, norm=False):
    """With `norm`, a BatchNorm1d: buffers that DDP broadcasts from rank 0 at every forward."""
    loom.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 16), *([nn.BatchNorm1d(16)] if norm else []), nn.Tanh(), nn.Linear(16, 16),
                      nn.Tanh(), nn.Linear(16, 3))
    return m.to(dtype)


def batch(step, dtype, n):
    rng = np.random.default_rng(step)
    return rng.standard_normal((n, 6)), rng.integers(0, 3, n)


def loss_of(m, x, y):
    return nn.functional.cross_entropy(m(x), y)


def full_batch_training(device, steps, n, lr, dtype):
    """The single-process reference: the same model trained on every rank's samples at once."""
    m = model(dtype).to(device)
    opt = loom.optim.SGD(m.parameters(), lr=lr, momentum=0.9)
    for s in range(steps):
        x, y = batch(s, dtype, n * WORLD)
        opt.zero_grad()
        loss_of(m, loom.tensor(x, dtype=dtype, device=device), loom.tensor(y, device=device)).backward()
        opt.step()
    return [p.to("cpu").numpy() for p in m.parameters()]


def case_ddp(device, accumulate, bucket_mb, as_view):
    """DDP training (float64, 20 steps, each rank its slice of the batch) ends where
    single-process training on the full batch does, within 1e-6. `accumulate` > 1 splits each
    rank's slice into micro-batches, all but the last under no_sync()."""
    accumulate, bucket_mb, as_view = int(accumulate), float(bucket_mb), as_view == "1"
    if device == "emulated":  # lazy, through the CUDA lowering on the host: captured graphs replay the all-reduces
        loom._C._set_executor("cuda-emulated")
        device = "lazy"
    dtype, steps, n, lr = loom.float64, 20, 4 * int(accumulate), 0.1
    # Ranks start from different weights: the construction's broadcast must equalize them.
    loom.manual_seed(RANK)
    m = model(dtype)
    if RANK != 0:
        with loom.no_grad():
            for p in m.parameters():
                p.add_(loom.randn(p.shape, dtype=dtype))
    m = m.to(device)
    ddp = nn.parallel.DistributedDataParallel(m, bucket_cap_mb=bucket_mb, gradient_as_bucket_view=as_view)
    opt = loom.optim.SGD(ddp.parameters(), lr=lr, momentum=0.9)
    loom.metrics_reset()
    per_step = []
    for s in range(steps):
        x, y = batch(s, dtype, n * WORLD)
        x, y = x[RANK * n:(RANK + 1) * n], y[RANK * n:(RANK + 1) * n]
        before = loom.metrics()
        opt.zero_grad()
        k = n // accumulate
        losses = []
        for i in range(accumulate):
            xi = loom.tensor(x[i * k:(i + 1) * k], dtype=dtype, device=device)
            yi = loom.tensor(y[i * k:(i + 1) * k], device=device)
            context = ddp.no_sync() if i < accumulate - 1 else _nothing()
            with context:
                losses.append(loss_of(ddp, xi, yi) / accumulate)
                losses[-1].backward()
        opt.step()
        if RANK == 0 or device != "lazy":
            sum(loss.item() for loss in losses)  # the step's one sync
        # Lazy ranks other than 0 never read a value: their step runs when the next forward
        # finds its all-reduces pending (DDP syncs then), still one trace per step.
        after = loom.metrics()
        per_step.append({k2: after[k2] - before[k2] for k2 in ("traces", "graph_cache_misses", "kernels_compiled",
                                                               "collectives", "graph_replays")})
    mine = [p.to("cpu").numpy() for p in ddp.parameters()]
    reference = full_batch_training(device, steps, n, lr, dtype)
    worst = max(float(np.abs(a - b).max()) for a, b in zip(mine, reference))
    sd = ddp.state_dict()
    assert all(not k.startswith("module.") for k in sd), list(sd)
    plain = model(dtype).to(device)
    plain.load_state_dict(sd)
    ddp.load_state_dict({"module." + k: v for k, v in sd.items()})
    report({"worst": worst, "per_step": per_step, "buckets": len(ddp._buckets),
            "params": [float(p.to("cpu").numpy().sum()) for p in ddp.parameters()]})


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def case_compiled_ddp(mode):
    """A loom.compile'd DDP training step (float64, 20 steps, a bucket per layer) against the same
    step uncompiled: the parameters end within 1e-6, and the steps after warm-up are replays (no
    trace built) whose plan runs every bucket's all-reduce. mode "unused": find_unused_parameters
    runs an eager all-reduce inside the step, which a replay would skip: the step is never
    captured and explain() says why. mode "emulated": lazy through the CUDA lowering's emulator.
    mode "buffers": a BatchNorm1d, whose buffers DDP's forward broadcasts (one broadcast per
    dtype: the float64 running statistics, the int64 batch count) inside the step."""
    if mode == "emulated":
        loom._C._set_executor("cuda-emulated")
    dtype, steps, n, lr = loom.float64, 20, 4, 0.1
    params, per_step, explanation = {}, [], None
    for compiled in (False, True):
        loom.manual_seed(RANK)  # ranks start apart: the construction's broadcast equalizes them
        m = model(dtype, norm=mode == "buffers")
        if RANK != 0:
            with loom.no_grad():
                for p in m.parameters():
                    p.add_(loom.randn(p.shape, dtype=dtype))
        ddp = nn.parallel.DistributedDataParallel(m.to("lazy"), bucket_cap_mb=0.0001,
                                                  find_unused_parameters=mode == "unused")
        opt = loom.optim.SGD(ddp.parameters(), lr=lr, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = loss_of(ddp, x, y)
            loss.backward()
            opt.step()
            return loss

        fn = loom.compile(step) if compiled else step
        for s in range(steps):
            x, y = batch(s, dtype, n * WORLD)
            x = loom.tensor(x[RANK * n:(RANK + 1) * n], dtype=dtype, device="lazy")
            y = loom.tensor(y[RANK * n:(RANK + 1) * n], device="lazy")
            before = loom.metrics()
            loss = fn(x, y)
            if RANK == 0:
                loss.item()  # rank 0 alone reads: the others' steps must still run every all-reduce
            after = loom.metrics()
            if compiled:
                per_step.append({k: after[k] - before[k] for k in ("traces", "collectives", "compiled_replays")})
        params[compiled] = [p.to("cpu").numpy() for p in ddp.parameters()]
        if compiled:
            explanation = str(loom.compile.explain(fn))
    worst = max(float(np.abs(a - b).max()) for a, b in zip(params[False], params[True]))
    report({"worst": worst, "per_step": per_step, "buckets": len(ddp._buckets), "explanation": explanation,
            "broadcasts": 2 if mode == "buffers" else 0, "params": [float(p.sum()) for p in params[True]]})


def case_unused(device):
    """find_unused_parameters: a layer no rank uses keeps .grad None; one only rank 0 uses gets
    the average of rank 0's gradient and zeros; without the option, an unused layer raises."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 2)
            self.b = nn.Linear(3, 2)
            self.never = nn.Linear(3, 2)

        def forward(self, x, use_b):
            return self.a(x) + (self.b(x) if use_b else 0)

    loom.manual_seed(0)
    net = Net().double().to(device)
    ddp = nn.parallel.DistributedDataParallel(net, find_unused_parameters=True)
    x = loom.tensor(np.full((2, 3), RANK + 1.0), device=device)
    ddp(x, RANK == 0).sum().backward()
    assert net.never.weight.grad is None
    g = net.b.weight.grad.to("cpu").numpy()
    np.testing.assert_allclose(g, np.full((2, 3), 2.0 / WORLD))  # rank 0: x=1, summed over 2 rows
    strict = nn.parallel.DistributedDataParallel(Net().double().to(device))
    try:
        strict(x, True).sum().backward()
        raised = None
    except RuntimeError as e:
        raised = str(e)
    report({"raised": raised})


def case_lazy_ddp_metrics():
    """A lazy DDP step after warm-up: one trace, nothing lowered or compiled, its all-reduces
    inside the trace (counted by loom.metrics()['collectives'])."""
    case_ddp("lazy", 1, 25, "0")


def case_unread_at_exit(how):
    """Rank 0 reads the result of a lazy all-reduce; the others never do and leave, through
    destroy_process_group or by ending the script without it: the all-reduce still runs on every
    rank, as it would have when called in PyTorch."""
    t = loom.full((3,), float(RANK + 1), device="lazy")
    dist.all_reduce(t)
    if RANK == 0:
        time.sleep(0.5)  # the others are leaving meanwhile
        check(t, np.full(3, sum(range(1, WORLD + 1)), np.float32), "the all_reduce read by rank 0 alone")
    if how == "destroy":
        dist.destroy_process_group()


def case_exchange_reads(calls):
    """`calls` eager all-reduces of a direct (one all-gather) size and lazy ones read at a sync,
    right: the counts of loom.metrics() over them, for test_distributed's checks of how their
    reads waited (runtime/distributed/gloo.cpp, Note [Spinning before a blocking read])."""
    calls = int(calls)
    n = 1000  # direct at 4 ranks too: 3 * 4000 bytes <= kDirectBytes
    expected = np.sum([data(r, n, loom.float32) for r in range(WORLD)], axis=0)
    before = loom.metrics()
    for i in range(calls):
        t = loom.tensor(data(RANK, n, loom.float32), device="lazy" if i % 2 else "cpu")
        dist.all_reduce(t)
        check(t, expected, f"all_reduce {i}")
    after = loom.metrics()
    report({k: after[k] - before[k] for k in ("collectives", "exchange_reads_polled", "exchange_reads_blocked")})


def _thread_use():
    """{tid: (CPU seconds, voluntary switches, involuntary switches)} of this process's threads."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            status = dict(line.split(":", 1) for line in open(f"/proc/self/task/{tid}/status").read().splitlines()
                          if ":" in line)
            cpu = time.clock_gettime((~int(tid) << 3) | 6)  # the thread's CPU clock (Linux's encoding)
        except (OSError, ValueError):
            continue
        out[int(tid)] = (cpu, int(status["voluntary_ctxt_switches"]), int(status["nonvoluntary_ctxt_switches"]))
    return out


def _delta(before, after):
    return {tid: tuple(a - b for a, b in zip(after[tid], before.get(tid, (0, 0, 0)))) for tid in after}


def case_threads():
    """What each thread of a rank does: over eager and lazy all-reduces of a DDP bucket's size,
    the threads init_process_group started (Gloo's network thread, the store's server) and
    their context switches; over large matrix products, the CPU time of every thread but the
    main one."""
    x = loom.ones(42624)  # mlp's bucket: 166.5 KiB
    lazy = loom.ones(42624, device="lazy")
    start, t0 = _thread_use(), time.monotonic()
    for _ in range(200):
        dist.all_reduce(x)
    for _ in range(100):
        dist.all_reduce(lazy)
        lazy.sum().item()
    collectives = _delta(start, _thread_use())
    elapsed = time.monotonic() - t0
    a = loom.tensor(data(RANK, (600, 600), loom.float32))
    start = _thread_use()
    for _ in range(6):
        (a @ a).sum().item()
    products = _delta(start, _thread_use())
    main = os.getpid()
    report({"elapsed_s": elapsed, "collectives": 300,
            "distributed_threads": [list(v) for t, v in collectives.items() if t not in THREADS_AT_IMPORT],
            "main_cpu_products_s": products[main][0],
            "other_cpu_products_s": sum(v[0] for t, v in products.items() if t != main)})


if __name__ == "__main__":
    case = sys.argv[1]
    timeout = float(os.environ.get("LOOM_TEST_TIMEOUT", "30"))
    dist.init_process_group("gloo", timeout=timeout)
    fn = globals()["case_" + case]
    fn(*sys.argv[2:])
    if case not in ("killed", "timeout", "unread_at_exit"):
        dist.destroy_process_group()
