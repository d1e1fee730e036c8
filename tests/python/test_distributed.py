"""loom.distributed: process groups, collectives, failures and the launcher.

Jobs of 2 and 4 processes on the loopback run the cases of _dist_workers.py (each rank checks its
results against numpy itself and reports what the test compares across ranks); every process is
reaped, whatever happens (_dist.run_job). The checks that need no second process run here."""

import datetime
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import loom
import loom.distributed as dist
from _dist import expect_success, free_port, needs_gloo, run_job
from loom.distributed import rendezvous
from loom.utils.data.distributed import DistributedSampler


# ---- without other processes ----

def test_rendezvous_reads_the_environment_as_pytorch(monkeypatch):
    for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="environment variable MASTER_ADDR expected, but not set"):
        rendezvous.parse("env://")
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1234")
    with pytest.raises(ValueError, match="environment variable RANK expected"):
        rendezvous.parse("env://")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "8")
    assert rendezvous.parse("env://") == ("tcp", "10.0.0.1", 1234, 3, 8)
    assert rendezvous.parse("env://", rank=1, world_size=2) == ("tcp", "10.0.0.1", 1234, 1, 2)
    assert rendezvous.parse("tcp://node0:29500?rank=2&world_size=4") == ("tcp", "node0", 29500, 2, 4)
    assert rendezvous.parse("file:///tmp/x%20y", rank=0, world_size=2) == ("file", "/tmp/x y", 0, 0, 2)
    with pytest.raises(ValueError, match="rank parameter missing"):
        rendezvous.parse("tcp://node0:29500")
    with pytest.raises(ValueError, match="No rendezvous handler for udp://"):
        rendezvous.parse("udp://x:1")
    # a port out of range fails here, not as a failed connect on one rank while the others wait
    for bad in ("297400300", "65536", "-1"):
        monkeypatch.setenv("MASTER_PORT", bad)
        with pytest.raises(ValueError, match=f"MASTER_PORT must be a port number from 0 to 65535, got {bad}"):
            rendezvous.parse("env://")
    for bad in ("tcp://node0:297400300?rank=0&world_size=1", "tcp://node0:http?rank=0&world_size=1"):
        with pytest.raises(ValueError, match="with a port from 0 to 65535"):
            rendezvous.parse(bad)


def test_calls_before_init_raise_as_pytorch():
    assert not dist.is_initialized() and dist.is_available()
    for call in (dist.get_rank, dist.get_world_size, lambda: dist.all_reduce(loom.ones(1)), dist.barrier):
        with pytest.raises(RuntimeError, match="Default process group has not been initialized"):
            call()
    with pytest.raises(ValueError, match="Invalid backend"):
        dist.Backend("mpi")
    assert dist.Backend("GLOO") == dist.Backend.GLOO == "gloo"
    assert issubclass(dist.DistBackendError, dist.DistError) and issubclass(dist.DistError, RuntimeError)


@needs_gloo
def test_a_world_of_one_in_this_process(tmp_path):
    """init over tcp:// (port 0: rank 0 picks one) and file://, collectives, a second init
    refused, destroy and init again, and bad arguments raising where they are given."""
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=10))
    try:
        assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
        assert dist.get_backend() == "gloo"
        with pytest.raises(RuntimeError, match="initialize the default process group twice"):
            dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
        for device in ("cpu", "lazy"):
            t = loom.arange(6.0, device=device)
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
            with pytest.raises(ValueError, match="AVG needs a floating-point tensor, got int64"):
                dist.all_reduce(loom.arange(3, device=device), op=dist.ReduceOp.AVG)
            with pytest.raises(ValueError, match="src rank 1 is not part of the group"):
                dist.broadcast(t, src=1)
            with pytest.raises(ValueError, match="cannot be split into 1 equal chunks|must be the same size"):
                dist.reduce_scatter_tensor(loom.empty(4, device=device), loom.ones(5, device=device))
            with pytest.raises(ValueError, match="output tensor size must be equal to world_size times"):
                dist.all_gather_into_tensor(loom.empty(4, device=device), loom.ones(5, device=device))
        objects = [None]
        dist.all_gather_object(objects, {"a": [1, 2]})
        assert objects == [{"a": [1, 2]}]
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()
    store = tmp_path / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        t = loom.ones(3)
        dist.broadcast(t, src=0)
        assert t.tolist() == [1.0, 1.0, 1.0]
    finally:
        dist.destroy_process_group()
    assert not store.exists()  # the last process out removes the file


def test_nccl_without_a_gpu_says_so():
    if loom.cuda.is_available():
        pytest.skip("a GPU is present: tests/gpu/test_distributed_nccl.py runs NCCL")
    if not dist.is_nccl_available():
        assert "NCCL" in loom._C._dist_unavailable("nccl")  # a build without it says why
        return
    with pytest.raises(RuntimeError, match="the nccl backend needs a GPU for rank 0"):
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
    assert not dist.is_initialized()  # nothing half-made: gloo can still start
    if dist.is_gloo_available():
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
        dist.destroy_process_group()


@pytest.mark.parametrize("backend", ["gloo", "nccl"])
def test_a_backend_missing_from_the_build_says_so_at_use(backend):
    """A build without Gloo (no libgloo-dev when it was configured, or LOOM_GLOO=OFF) or without
    NCCL (no CUDA toolkit with nccl.h) still imports loom.distributed; asking for the backend
    raises a RuntimeError saying what the build lacks and how to get it."""
    why = loom._C._dist_unavailable(backend)
    available = dist.is_gloo_available() if backend == "gloo" else dist.is_nccl_available()
    assert available == (why == "")
    if available:
        assert f"loom.distributed {backend}: available" in loom.show_config()
        pytest.skip(f"this build has {backend}: the stub of a build without it is not compiled in")
    assert f"loom.distributed {backend}: {why}" in loom.show_config()
    assert ("libgloo-dev" if backend == "gloo" else "nccl.h") in why
    with pytest.raises(RuntimeError, match=f"the {backend} backend is not available: this build of loom has no"):
        dist.init_process_group(backend, init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
    assert not dist.is_initialized()
    assert dist.is_available()  # the package itself works: the other backend, the sampler, the launcher


@needs_gloo
def test_a_collective_recorded_on_a_destroyed_group_raises():
    """A lazy collective recorded before destroy_process_group runs then (its value stays
    readable, as PyTorch's ran when called); one recorded after it on the old group (the
    backward of a differentiable collective) raises naming the cause."""
    from loom.distributed.nn import functional as dist_fn

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
    t = loom.ones(2, device="lazy")
    dist.all_reduce(t)
    x = loom.ones(2, device="lazy", requires_grad=True)
    y = dist_fn.all_reduce(x)
    dist.destroy_process_group()
    assert t.tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="process group used here was destroyed"):
        y.sum().backward()
        x.grad.tolist()


def test_distributed_sampler_shares():
    data = list(range(10))
    for shuffle in (False, True):
        for drop_last in (False, True):
            shares = [list(DistributedSampler(data, num_replicas=3, rank=r, shuffle=shuffle, seed=5,
                                              drop_last=drop_last)) for r in range(3)]
            lengths = {len(s) for s in shares}
            assert lengths == {3 if drop_last else 4}
            flat = sorted(i for s in shares for i in s)
            if drop_last:
                assert len(set(flat)) == 9  # disjoint, the tail of 1 dropped
            else:
                assert set(flat) == set(data) and len(flat) == 12  # padded by repeating
    samplers = [DistributedSampler(data, num_replicas=2, rank=r, shuffle=True) for r in range(2)]
    first = list(samplers[0])
    assert list(samplers[0]) == first  # the same epoch, the same order
    for s in samplers:
        s.set_epoch(1)
    assert list(samplers[0]) != first
    assert sorted(list(samplers[0]) + list(samplers[1])) == data  # still disjoint shares of everything
    with pytest.raises(ValueError, match="Invalid rank 2"):
        DistributedSampler(data, num_replicas=2, rank=2)


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (2, 4, False), (12, 4, True)])
def test_distributed_sampler_unshuffled_is_pytorchs(n, replicas, drop_last):
    """Without shuffling the shares are PyTorch's exactly (padding included: a dataset smaller
    than the world repeats itself); with it, only the order differs (a different generator)."""
    torch_data = pytest.importorskip("torch.utils.data")
    data = list(range(n))
    for rank in range(replicas):
        ours = DistributedSampler(data, num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
        theirs = torch_data.DistributedSampler(data, num_replicas=replicas, rank=rank, shuffle=False,
                                               drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
        shuffled = DistributedSampler(data, num_replicas=replicas, rank=rank, shuffle=True, drop_last=drop_last)
        assert len(list(shuffled)) == len(theirs)


def test_distributed_sampler_feeds_a_data_loader():
    from loom.utils import data as loom_data

    assert loom_data.DistributedSampler is DistributedSampler and issubclass(DistributedSampler, loom_data.Sampler)
    dataset = loom_data.TensorDataset(loom.arange(10.0))
    seen = []
    for rank in range(2):
        sampler = loom_data.DistributedSampler(dataset, num_replicas=2, rank=rank, seed=3)
        sampler.set_epoch(2)
        loader = loom_data.DataLoader(dataset, batch_size=2, sampler=sampler)
        batches = [b.tolist() for (b,) in loader]
        assert [len(b) for b in batches] == [2, 2, 1]
        seen += [v for b in batches for v in b]
    assert sorted(seen) == [float(i) for i in range(10)]


# ---- jobs ----

@needs_gloo
@pytest.mark.parametrize("world", [2, 4])
def test_every_collective_against_numpy(world):
    """Eager, lazy and lazy through the CUDA lowering's emulator; point to point; objects; async
    handles; a subgroup."""
    results = expect_success(run_job("collectives", world, deadline=120))
    assert results == [{"rank": r, "size": world, "backend": "gloo"} for r in range(world)]


@needs_gloo
def test_lazy_collectives_run_in_program_order_whatever_the_syncs():
    expect_success(run_job("lazy_order", 2))


@needs_gloo
def test_differentiable_collectives():
    expect_success(run_job("autograd", 2))


@needs_gloo
@pytest.mark.parametrize("how", ["destroy", "exit"])
def test_lazy_collectives_a_rank_never_read_run_before_it_leaves(how):
    expect_success(run_job("unread_at_exit", 2, args=(how,)))


@needs_gloo
def test_mismatched_shapes_and_calls_raise_naming_each_rank():
    results = expect_success(run_job("mismatch", 2))
    for r in results:
        shapes, calls = r["errors"][:2], r["errors"][2]
        assert len(r["errors"]) == 3
        for e in shapes:  # eager, then lazy (at the sync)
            assert "rank 0 called all_reduce(SUM) on float32[3]; rank 1 called all_reduce(SUM) on float32[4]" in e
        assert "rank 0 called broadcast(root 0) on float32[2]; rank 1 called all_reduce(SUM) on float32[2]" in calls


@needs_gloo
@pytest.mark.parametrize("checked", [True, False])
def test_gathers_of_several_chunks_and_disagreeing_sizes(checked):
    env = {} if checked else {"LOOM_DIST_CHECK": "0"}
    for r in expect_success(run_job("sizes", 2, env=env)):
        assert r["checked"] == checked and len(r["errors"]) == 2, r
        for e in r["errors"]:  # eager, then lazy (at the sync)
            if checked:
                assert "rank 0 called all_reduce(SUM) on float32[786432]; rank 1 called all_reduce(SUM) on float32[3]" \
                    in e, e
            else:
                assert "passed inputs of different sizes: rank 0 3145728 bytes, rank 1 12 bytes" in e, e


# How rank 1 fails while the others run collectives (_dist_workers.case_killed): it exits after
# a barrier, or is SIGKILLed in the middle of eager all-reduces, lazy ones read at a sync, or lazy
# DDP training steps.
KILLS = [(4, "exits"), (2, "eager"), (2, "lazy"), (2, "ddp")]


@needs_gloo
@pytest.mark.parametrize("world,how", KILLS)
def test_a_killed_rank_fails_the_others_clearly_and_quickly(world, how):
    """The other ranks raise DistBackendError naming the collective, the rank and the cause long
    before the timeout (a dead peer's connection closes: nothing waits for the timeout), and the
    broken group refuses later calls at once."""
    timeout = 30
    ranks = run_job("killed", world, env={"LOOM_TEST_TIMEOUT": str(timeout)}, args=[how], deadline=90)
    assert ranks[1].returncode == (3 if how == "exits" else -signal.SIGKILL), ranks[1].stderr[-3000:]
    for r in ranks:
        if r.rank == 1:
            continue
        assert r.returncode == 0, r.stderr[-3000:]
        error = r.result["error"]
        assert f"failed on rank {r.rank} of {world} (gloo)" in error, error
        assert "another rank has probably exited or crashed" in error, error
        if how in ("lazy", "ddp"):
            assert "computed by the lazy op AllReduce at a sync" in error, error
        assert r.result["elapsed"] is not None and r.result["elapsed"] < timeout / 2, r.result
        assert "cannot be used after an earlier failure" in r.result["again"]


@needs_gloo
@pytest.mark.parametrize("how", ["eager", "ddp"])
def test_a_stuck_rank_fails_the_others_at_the_timeout(how):
    """Rank 1 stops (SIGSTOP: alive, its connections open) inside a loop of collectives: rank 0's
    collective raises once the process group's timeout has passed, not before, not never."""
    timeout = 3
    ranks = run_job("timeout", 2, env={"LOOM_TEST_TIMEOUT": str(timeout)}, args=[how], deadline=60)
    assert ranks[0].returncode == 0, ranks[0].stderr[-3000:]
    assert ranks[1].returncode == -signal.SIGKILL  # rank 0 ended it
    error, elapsed = ranks[0].result["error"], ranks[0].result["elapsed"]
    assert f"timed out after {timeout} s waiting for the other ranks" in error, error
    assert elapsed is not None and timeout - 0.5 < elapsed < timeout + 10, elapsed


@needs_gloo
def test_init_over_a_file(tmp_path):
    store = tmp_path / "rendezvous"
    code = textwrap.dedent(f"""
        import os, loom, loom.distributed as dist
        dist.init_process_group("gloo", init_method="file://{store}", rank=int(os.environ["RANK"]),
                                world_size=2)
        t = loom.full((2,), float(dist.get_rank() + 1))
        dist.all_reduce(t)
        assert t.tolist() == [3.0, 3.0], t
        dist.destroy_process_group()
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ, RANK=str(r)), stderr=subprocess.PIPE,
                              text=True) for r in range(2)]
    try:
        for p in procs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert not store.exists()


# ---- the launcher ----

SCRIPT = textwrap.dedent("""
    import os, sys, time
    import loom, loom.distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    assert os.environ["LOCAL_RANK"] == str(rank) and os.environ["LOCAL_WORLD_SIZE"] == os.environ["WORLD_SIZE"]
    t = loom.ones(3) * (rank + 1)
    dist.all_reduce(t)
    with open(f"rank{rank}.txt", "w") as f:  # a file each: lines of ranks sharing a pipe may interleave
        f.write(f"rank {rank} of {dist.get_world_size()} sum {t.tolist()[0]} args {sys.argv[1:]} "
                f"threads {loom.get_num_threads()}")
    if sys.argv[1:2] == ["fail"] and rank == 1:
        raise ValueError("rank 1 gives up")
    if sys.argv[1:2] == ["hang"]:
        open(f"ready{rank}", "w").close()
        time.sleep(120)
    dist.destroy_process_group()
""")


def launch(tmp_path, *args, nproc=2, **kwargs):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    return subprocess.Popen([sys.executable, "-m", "loom.distributed.run", "--nproc-per-node", str(nproc),
                             "--master-port", str(free_port()), str(script), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, **kwargs)


@needs_gloo
@pytest.mark.parametrize("threads", [None, "2"])
def test_launcher_runs_a_job(tmp_path, monkeypatch, threads):
    """Each rank gets its share of the cores (LOOM_NUM_THREADS), unless the user chose."""
    if threads is None:
        monkeypatch.delenv("LOOM_NUM_THREADS", raising=False)
        expected = max(1, len(os.sched_getaffinity(0)) // 3)
    else:
        monkeypatch.setenv("LOOM_NUM_THREADS", threads)
        expected = int(threads)
    p = launch(tmp_path, "--lr", "0.1", nproc=3)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    lines = [(tmp_path / f"rank{r}.txt").read_text() for r in range(3)]
    assert lines == [f"rank {r} of 3 sum 6.0 args ['--lr', '0.1'] threads {expected}" for r in range(3)]


@needs_gloo
def test_launcher_stops_the_job_when_a_rank_fails(tmp_path):
    p = launch(tmp_path, "fail")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1
    assert "rank 1 (local rank 1, pid" in err and "failed with exit code 1" in err
    assert "its last error: ValueError: rank 1 gives up" in err


@needs_gloo
def test_launcher_forwards_signals(tmp_path):
    p = launch(tmp_path, "hang")
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"ready{r}").exists() for r in range(2)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert p.poll() is None, p.stderr.read()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
        assert p.returncode == 128 + signal.SIGTERM
        assert "stopped by SIGTERM" in p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@needs_gloo
@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("spin", ["0", "200000", None])
def test_exchange_reads_poll_before_blocking(world, spin):
    """A read of loom's own exchanges polls its socket for the message up to LOOM_DIST_SPIN_US
    before it blocks (runtime/distributed/gloo.cpp, Note [Spinning before a blocking read]);
    every read is one or the other. A direct all-reduce of under 16 KiB reads one message from
    each peer, its header and its data (Note [One message per peer]). With a budget of 0.2 s (set explicitly, so ranks poll even where they
    outnumber the cores), a peer's message arrives while polling unless the machine stops the
    peer for that long: most reads are polled, which they can only be where the socket of every
    peer's pair was found. By default, ranks that outnumber the cores do not poll at all."""
    calls = 20
    env = {} if spin is None else {"LOOM_DIST_SPIN_US": spin}
    if spin is None and world <= len(os.sched_getaffinity(0)):
        pytest.skip("the default polls here: whether a read gets its message in 100 us depends on the load")
    for r in expect_success(run_job("exchange_reads", world, env=env, args=[str(calls)])):
        reads = calls * (world - 1)
        assert r["collectives"] == calls
        assert r["exchange_reads_polled"] + r["exchange_reads_blocked"] == reads, r
        if spin == "200000":
            assert r["exchange_reads_polled"] >= reads // 2, r
        else:
            assert r["exchange_reads_polled"] == 0, r


@needs_gloo
def test_one_thread_per_rank_and_no_network_thread_in_loom_collectives():
    """A rank with LOOM_NUM_THREADS=1 computes on its one thread, OpenBLAS included (OMP_NUM_THREADS
    unset, so OpenBLAS started a worker per core), and Gloo's network thread takes no part in
    loom's collectives: they run on synchronous pairs (runtime/distributed/gloo.cpp, Note [The
    exchange context]). Before, that thread woke for every message, two to six times per
    all-reduce, and spun while the calling thread held a pair's lock. Now it only wakes on its
    10 ms epoll timeout; the bound leaves it half as many again, and 20. Kernels compile at -O3 at
    once (LOOM_QUICK_KERNELS=0): with an empty kernel cache the -O3 recompiles' background thread
    (runtime/background.h) would join the threads started after import."""
    results = expect_success(run_job("threads", 2, env={"OMP_NUM_THREADS": "", "OPENBLAS_NUM_THREADS": "",
                                                        "LOOM_QUICK_KERNELS": "0"}))
    for rank, r in enumerate(results):
        threads = r["distributed_threads"]
        assert 1 <= len(threads) <= 2, threads  # Gloo's loop; the store's server on rank 0
        ticks = r["elapsed_s"] / 0.010
        for cpu, voluntary, involuntary in threads:
            assert voluntary + involuntary <= 1.5 * ticks + 20, (
                f"rank {rank}: a thread of Gloo or the store switched {voluntary} + {involuntary} times over "
                f"{r['collectives']} collectives in {r['elapsed_s']:.3f} s ({cpu:.4f} s CPU)")
        assert r["other_cpu_products_s"] < 0.1 * r["main_cpu_products_s"], r
