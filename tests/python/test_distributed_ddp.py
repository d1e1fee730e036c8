"""loom.nn.parallel.DistributedDataParallel: training on several ranks equals training on the
full batch in one process; gradient accumulation under no_sync; unused parameters; lazy steps
that are one trace with their all-reduces inside and compile nothing after warm-up."""

import pytest

import loom
import loom.distributed as dist
from _dist import expect_success, needs_gloo, run_job
from loom import nn


# (device, micro-batches per step, bucket_cap_mb, gradient_as_bucket_view): one bucket, a bucket
# per layer (0.0001 MB), accumulation under no_sync(), eager, lazy, and lazy through the CUDA
# lowering's host emulator (its steps replay as captured graphs, all-reduces included).
CONFIGS = [("lazy", 1, 25, 0), ("lazy", 3, 0.0001, 1), ("cpu", 1, 0.0001, 0), ("cpu", 3, 25, 1),
           ("emulated", 1, 0.0001, 0)]


@needs_gloo
@pytest.mark.parametrize("device,accumulate,bucket_mb,as_view", CONFIGS)
def test_ddp_training_equals_full_batch_training(device, accumulate, bucket_mb, as_view):
    """20 float64 SGD-momentum steps, each rank its slice of the batch, ranks starting from
    different weights: the parameters end within 1e-6 of single-process training on the full
    batch (the reference each rank computes itself)."""
    results = expect_success(run_job("ddp", 2, deadline=180, args=[device, str(accumulate), str(bucket_mb),
                                                                     str(as_view)]))
    for r in results:
        assert r["worst"] < 1e-6, r["worst"]
        assert r["buckets"] == (1 if bucket_mb == 25 else 6)
        # One all-reduce per bucket per step, however many micro-batches no_sync() accumulated.
        assert all(s["collectives"] == r["buckets"] for s in r["per_step"][3:]), r["per_step"]
        if device == "emulated":  # each steady-state step is one replay of the captured graph
            assert all(s["graph_replays"] == 1 for s in r["per_step"][3:]), r["per_step"]
    assert results[0]["params"] == results[1]["params"]  # the replicas stayed equal


@needs_gloo
def test_lazy_ddp_steps_are_one_trace_with_their_all_reduces_and_compile_nothing_after_warm_up():
    results = expect_success(run_job("ddp", 4, deadline=180, args=["lazy", "1", "0.0001", "0"]))
    for r in results:
        assert r["worst"] < 1e-6
        # Two plans to warm up (the first step has no momentum yet); ranks other than 0 read no
        # value, so each of their steps runs at the next step's forward: one step later.
        warm = r["per_step"][3:]
        assert all(s["traces"] == 1 for s in warm), warm
        assert all(s["graph_cache_misses"] == 0 and s["kernels_compiled"] == 0 for s in warm), warm
        assert all(s["collectives"] == r["buckets"] == 6 for s in warm), warm


@needs_gloo
@pytest.mark.parametrize("mode", ["lazy", "emulated", "buffers"])
def test_a_compiled_ddp_step_replays_with_its_all_reduces_and_equals_the_uncompiled_one(mode):
    """loom.compile over a whole DDP training step (forward, backward, the buckets' all-reduces,
    the optimizer; with "buffers", a BatchNorm whose buffers the forward broadcasts): after
    warm-up each call replays the captured step, no trace built, and the replay runs one
    all-reduce per bucket (and the broadcasts); 20 float64 steps end within 1e-6 of the same
    steps uncompiled, on every rank alike."""
    results = expect_success(run_job("compiled_ddp", 2, deadline=180, args=[mode]))
    for r in results:
        assert r["worst"] < 1e-6, r["worst"]
        assert r["buckets"] == (8 if mode == "buffers" else 6)
        calls = r["buckets"] + r["broadcasts"]
        replays = r["per_step"][3:]  # call 1 makes the momentum buffers, 2 and 3 record and capture
        assert all(s == {"traces": 0, "collectives": calls, "compiled_replays": 1} for s in replays), r["per_step"]
    assert results[0]["params"] == results[1]["params"]


@needs_gloo
def test_a_compiled_ddp_step_with_eager_collectives_inside_is_not_captured():
    """find_unused_parameters=True all-reduces the used-parameter flags eagerly inside the step: a
    replay would skip that collective while other ranks wait in it, so the step runs uncompiled,
    equal to the uncompiled one, and explain() names the cause."""
    for r in expect_success(run_job("compiled_ddp", 2, deadline=180, args=["unused"])):
        assert r["worst"] < 1e-6, r["worst"]
        assert all(s["compiled_replays"] == 0 for s in r["per_step"]), r["per_step"]
        assert "runs a collective on an eager tensor (a replay would not run it)" in r["explanation"]


@needs_gloo
@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_find_unused_parameters(device):
    for r in expect_success(run_job("unused", 2, args=[device])):
        assert r["raised"] and "find_unused_parameters=True" in r["raised"]
        assert "did not receive grad for rank" in r["raised"]


@needs_gloo
def test_state_dict_has_no_wrapper_prefix():
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
    try:
        bare = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
        ddp = nn.parallel.DistributedDataParallel(bare)
        assert ddp.module is bare
        sd = ddp.state_dict()
        assert list(sd) == list(bare.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]
        fresh = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
        fresh.load_state_dict(sd)  # a DDP checkpoint loads into the bare model
        other = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)))
        other.load_state_dict({"module." + k: v for k, v in sd.items()})  # and PyTorch's prefixed form too
        for a, b in zip(other.parameters(), bare.parameters()):
            assert a.tolist() == b.tolist()
        assert [n for n, _ in ddp.named_parameters()][0] == "module.0.weight"
    finally:
        dist.destroy_process_group()


def test_ddp_needs_a_process_group():
    with pytest.raises(RuntimeError, match="Default process group has not been initialized"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2))
    assert loom.nn.parallel.DistributedDataParallel is nn.parallel.DistributedDataParallel
