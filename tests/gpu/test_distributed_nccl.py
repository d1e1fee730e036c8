"""loom.distributed on NCCL, in a world of one process (one GPU suffices): every collective on
cuda and lazy:cuda tensors against numpy, and a DistributedDataParallel training step whose
all-reduce is captured in the step's CUDA Graph (a steady-state step is one graph replay, no
collective issued from the host, nothing launched outside the graph), training as the bare
model does."""

import datetime

import numpy as np
import pytest

import loom
import loom.distributed as dist
from loom import nn


@pytest.fixture(scope="module")
def world():
    if not dist.is_nccl_available():
        pytest.skip(f"no NCCL: {loom._C._dist_unavailable('nccl')}")
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:0", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60), device_id=0)
    yield
    dist.destroy_process_group()


def values(t):
    return t.to("cpu").numpy()


@pytest.mark.parametrize("device", ["cuda", "lazy:cuda"])
def test_every_collective_in_a_world_of_one(world, device):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT):
        t = loom.tensor(x, device=device)
        dist.all_reduce(t, op=op)
        np.testing.assert_array_equal(values(t), x)
    t = loom.tensor(x, device=device)
    dist.broadcast(t, src=0)
    dist.reduce(t, dst=0)
    np.testing.assert_array_equal(values(t), x)
    outs = [loom.zeros(3, 5, device=device)]
    dist.all_gather(outs, loom.tensor(x, device=device))
    np.testing.assert_array_equal(values(outs[0]), x)
    out = loom.zeros(1, 3, 5, device=device)
    dist.all_gather_into_tensor(out, loom.tensor(x, device=device))
    np.testing.assert_array_equal(values(out)[0], x)
    out = loom.zeros(3, 5, device=device)
    dist.reduce_scatter_tensor(out, loom.tensor(x, device=device))
    np.testing.assert_array_equal(values(out), x)
    gathered = [loom.zeros(3, 5, device=device)]
    dist.gather(loom.tensor(x, device=device), gathered, dst=0)
    np.testing.assert_array_equal(values(gathered[0]), x)
    t = loom.zeros(3, 5, device=device)
    dist.scatter(t, [loom.tensor(x, device=device)], src=0)
    np.testing.assert_array_equal(values(t), x)
    strided = loom.tensor(x.T.copy(), device=device).t()  # a transposed view: copied to a fixed slot and back
    dist.all_reduce(strided)
    np.testing.assert_array_equal(values(strided), x)
    dist.barrier()


def test_a_ddp_step_is_one_graph_replay_with_its_all_reduce_inside(world):
    def model():
        loom.manual_seed(0)
        return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to("lazy:cuda")

    rng = np.random.default_rng(1)
    x = loom.tensor(rng.standard_normal((8, 16)).astype(np.float32), device="lazy:cuda")
    y = loom.tensor(rng.integers(0, 4, 8), device="lazy:cuda")
    losses = {}
    for wrapped in (False, True):
        m = model()
        net = nn.parallel.DistributedDataParallel(m) if wrapped else m
        opt = loom.optim.AdamW(net.parameters(), lr=1e-2)

        def step():
            loss = nn.functional.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.item()

        run = [step() for _ in range(4)]  # direct runs, then the capture
        before = loom.metrics()
        run += [step() for _ in range(6)]
        after = loom.metrics()
        delta = {k: after[k] - before[k] for k in before}
        assert delta["traces"] == 6 and delta["graph_replays"] == 6, delta
        assert delta["graph_cache_misses"] == 0 and delta["kernels_compiled"] == 0, delta
        assert delta["kernel_launches"] == 0, "a steady-state step launched work outside its graph"
        # The all-reduce is part of the graph: replays issue no collective from the host.
        assert delta["collectives"] == 0, delta
        losses[wrapped] = run
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-6, atol=1e-6)
