"""Threads and lazy mode (lazy/sync.h): a thread's pending tensors are its own, so a sync captures
only its own thread's work and threads training their own models replay cached plans without
recompiling; a tensor another thread recorded is computed when it is read; the GIL is released
while a trace runs, so other Python threads make progress meanwhile."""

import threading

import numpy as np
import pytest

import loom


def run_threads(fns):
    """Runs each fn on a thread of its own and returns their results (re-raising the first error)."""
    results, errors = [None] * len(fns), []

    def body(k):
        try:
            results[k] = fns[k]()
        except BaseException as e:  # noqa: BLE001 (handed back to the test)
            errors.append(e)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


# ---- threads training models of their own ----

def make_run(k, steps, barrier=None, midstep=None, warmup=2):
    """Model k (its own seed and data) and a function training it for `steps` steps on lazy; at the
    barrier (if any) after `warmup` steps, and at `midstep` (if any) in the middle of every step."""
    loom.manual_seed(100 + k)
    nn = loom.nn
    model = nn.Sequential(nn.Linear(32, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 4)).to("lazy")
    opt = loom.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(k)
    batches = [(loom.tensor(rng.standard_normal((64, 32)).astype(np.float32), device="lazy"),
                loom.tensor(rng.standard_normal((64, 4)).astype(np.float32), device="lazy")) for _ in range(steps)]

    def train():
        losses = []
        for i, (x, y) in enumerate(batches):
            if barrier is not None and i == warmup:
                barrier.wait()  # warm-up done
                barrier.wait()  # metrics reset
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            if midstep is not None:
                midstep.wait()  # every thread has half a step recorded when the first one syncs
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().numpy().copy() for p in model.parameters()]

    loom.sync()
    return train


def test_threads_training_their_own_models_replay_cached_plans_and_match_one_thread():
    n, steps = 4, 12
    alone = [make_run(k, steps)() for k in range(n)]  # the same runs, one after another
    barrier, midstep = threading.Barrier(n + 1), threading.Barrier(n)
    runs = [make_run(k, steps, barrier, midstep) for k in range(n)]
    outcome = {}

    def coordinator():
        barrier.wait()  # every thread finished its warm-up steps
        loom.metrics_reset()
        barrier.wait()

    watcher = threading.Thread(target=coordinator)
    watcher.start()
    together = run_threads(runs)
    watcher.join()
    outcome.update(loom.metrics())
    # Each thread's steps are its own traces: after warm-up, every one is a cached plan.
    assert outcome["graph_cache_misses"] == 0
    assert outcome["kernels_compiled"] == 0
    assert outcome["traces"] == n * (steps - 2)
    for (losses, params), (want_losses, want_params) in zip(together, alone):
        np.testing.assert_allclose(losses, want_losses, rtol=1e-6)
        for p, q in zip(params, want_params):
            np.testing.assert_allclose(p, q, rtol=1e-6, atol=1e-7)


def test_a_sync_leaves_other_threads_pending_work_alone():
    recorded, synced = threading.Event(), threading.Event()

    def other():
        x = loom.arange(4.0, device="lazy") * 2  # pending on this thread
        recorded.set()
        synced.wait()
        pending = loom._C._pending_count("cpu")
        return pending, x.tolist(), loom._C._pending_count("cpu")

    def main():
        recorded.wait()
        y = loom.ones(3, device="lazy") + 1
        value = y.tolist()  # syncs this thread's work only
        synced.set()
        return value, loom._C._pending_count("cpu")

    (pending, values, after), (value, mine) = run_threads([other, main])
    assert pending == 1 and values == [0.0, 2.0, 4.0, 6.0] and after == 0
    assert value == [2.0, 2.0, 2.0] and mine == 0


# ---- tensors another thread recorded ----

def test_reading_a_tensor_another_thread_recorded_computes_it():
    p = loom.arange(4.0, device="lazy")
    loom.sync()
    handed = {}
    ready, done = threading.Event(), threading.Event()

    def recorder():
        handed["fresh"] = p * 10  # a fresh value
        handed["read"] = p + 0  # reads p's old values ...
        p.add_(1)  # ... before this write into p, pending on this thread
        handed["after"] = p * 2
        ready.set()
        done.wait()
        return handed["read"].tolist(), handed["after"].tolist(), loom._C._pending_count("cpu")

    def reader():
        ready.wait()
        fresh = handed["fresh"].tolist()  # computed alone
        derived = (handed["fresh"] + 1).tolist()  # an op on it computes it first
        written = p.tolist()  # a write of the recorder: its registry is synced (the read before the write first)
        done.set()
        return fresh, derived, written

    (read, after, left), (fresh, derived, written) = run_threads([recorder, reader])
    assert fresh == [0.0, 10.0, 20.0, 30.0] and derived == [1.0, 11.0, 21.0, 31.0]
    assert written == [1.0, 2.0, 3.0, 4.0]
    assert read == [0.0, 1.0, 2.0, 3.0] and after == [2.0, 4.0, 6.0, 8.0] and left == 0


def test_an_op_on_a_tensor_another_thread_recorded_reads_it_as_it_was_then():
    # The other thread's write lands before this thread's sync: this thread's op must have
    # computed the value it read (as it was when read), not recorded the other's pending graph.
    p = loom.arange(3.0, device="lazy")
    loom.sync()
    handed = {}
    recorded, used, landed = threading.Event(), threading.Event(), threading.Event()

    def writer():
        handed["doubled"] = p * 2  # reads p's storage
        p.add_(1)  # then writes it, pending
        recorded.set()
        used.wait()
        loom.sync()  # the write lands
        landed.set()

    def user():
        recorded.wait()
        z = handed["doubled"] + 1
        used.set()
        landed.wait()
        return z.tolist()

    _, z = run_threads([writer, user])
    assert z == [1.0, 3.0, 5.0]
    assert p.tolist() == [1.0, 2.0, 3.0]


def test_a_thread_that_needs_what_another_threads_sync_computes_waits_for_it():
    n, k = 256, 60
    w = loom.tensor(np.eye(n, dtype=np.float32) * 0.5, device="lazy")
    p = loom.ones(n, n, device="lazy")
    loom.sync()
    y = p
    for _ in range(k):
        y = y @ w  # a long trace of the main thread
    p.add_(1)  # and a write into p, made by the same sync
    start = loom.metrics()["kernel_launches"]
    seen = {}

    def reader():
        while loom.metrics()["kernel_launches"] < start + 2:  # the sync is running
            pass
        seen["y"] = (y * 2).sum().item()  # y is in flight: this waits for it, then uses its value
        seen["p"] = p[0, 0].item()  # so is p's write

    thread = threading.Thread(target=reader)
    thread.start()
    loom.sync()
    thread.join()
    assert seen["y"] == pytest.approx(2 * n * n * 0.5 ** k, rel=1e-5)
    assert seen["p"] == 2.0
    # The reader used the values the sync computed: it did not run the products again.
    assert loom.metrics()["kernel_launches"] - start < 2 * k


def test_pending_work_of_a_thread_that_ended_is_computed_when_needed():
    base = loom.zeros(4, device="lazy")
    loom.sync()
    handed = {}

    def worker():
        handed["value"] = base + 5
        base[1:3].add_(7)  # the view dies: an orphan write, left pending when the thread ends

    run_threads([worker])
    assert handed["value"].tolist() == [5.0, 5.0, 5.0, 5.0]
    assert base.tolist() == [0.0, 7.0, 7.0, 0.0]


# ---- the GIL is released while a trace runs ----

def test_python_threads_run_while_a_long_trace_runs():
    n = 192
    w = loom.tensor(np.eye(n, dtype=np.float32) * 0.999, device="lazy")
    x = loom.ones(n, n, device="lazy")
    loom.sync()
    seen, started, stop = [], threading.Event(), threading.Event()

    def observer():
        while not stop.is_set():
            seen.append(loom.metrics()["kernel_launches"])  # a little Python work, and loom's counter
            started.set()

    thread = threading.Thread(target=observer)
    thread.start()
    started.wait()
    y = x
    for _ in range(60):
        y = y @ w  # 60 products: one trace of library steps
    before = loom.metrics()["kernel_launches"]
    total = y.sum().item()
    after = loom.metrics()["kernel_launches"]
    stop.set()
    thread.join()
    assert total == pytest.approx(n * n * 0.999 ** 60, rel=1e-4)
    # The observer ran while the trace did: it saw some but not all of its steps done.
    assert any(before < s < after for s in seen), (before, after, sorted(set(seen))[-5:])
