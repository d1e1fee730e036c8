"""loom.multiprocessing: spawn / start_processes (results, failures, join=False), tensors shared
between processes (share_memory_, Module.share_memory, Hogwild updates seen by the parent,
Queues in both directions, the fork method), and what is refused."""

import multiprocessing as std_mp

import numpy as np
import pytest

import loom
import loom.multiprocessing as mp
import _mp_workers as W


def test_reexports_python_multiprocessing():
    assert mp.Queue is std_mp.Queue and mp.Process is std_mp.Process and mp.get_context is std_mp.get_context
    assert mp.get_sharing_strategy() in mp.get_all_sharing_strategies()
    mp.set_sharing_strategy("file_system")
    assert mp.get_sharing_strategy() == "file_system"
    mp.set_sharing_strategy("file_descriptor")
    with pytest.raises(ValueError):
        mp.set_sharing_strategy("carrier pigeon")


def test_share_memory_in_place():
    p = loom.nn.Parameter(loom.arange(6.0).reshape(2, 3).t())  # non-contiguous: strides survive
    stride = p.stride()
    assert not p.is_shared()
    assert p.share_memory_() is p and p.is_shared()
    assert p.stride() == stride and p.requires_grad and p.is_leaf
    np.testing.assert_array_equal(p.detach().numpy(), np.arange(6.0).reshape(2, 3).T)
    assert p[1:].is_shared()  # a view of shared memory is shared
    assert not p.detach().clone().is_shared()
    m = loom.nn.BatchNorm1d(3)
    weight = m.weight
    m.share_memory()
    assert m.weight is weight and all(t.is_shared() for t in list(m.parameters()) + list(m.buffers()))


def test_lazy_tensors_are_refused():
    x = loom.ones(3, device="lazy")
    assert not x.is_shared()
    with pytest.raises(RuntimeError, match="lazy"):
        x.share_memory_()


def test_spawn_writes_into_a_shared_tensor():
    out = loom.zeros(3).share_memory_()
    assert mp.spawn(W.write_rank, args=(out,), nprocs=3) is None
    np.testing.assert_array_equal(out.numpy(), [1, 11, 21])


def test_hogwild_updates_reach_the_parent():
    model = loom.nn.Linear(3, 2, bias=False)
    with loom.no_grad():
        model.weight.zero_()
    model.share_memory()
    context = mp.spawn(W.hogwild_rows, args=(model, 50), nprocs=2, join=False)
    assert len(context.pids()) == 2
    while not context.join():
        pass
    np.testing.assert_array_equal(model.weight.detach().numpy(), np.full((2, 3), 50.0))


def test_hogwild_training_changes_the_shared_model():
    loom.manual_seed(0)
    model = loom.nn.Linear(3, 2).share_memory()
    before = model.weight.detach().clone()
    mp.spawn(W.train_shared, args=(model, 3), nprocs=2)
    assert not np.allclose(model.weight.detach().numpy(), before.numpy())


def test_a_raising_worker_is_reported_with_its_traceback():
    with pytest.raises(mp.ProcessRaisedException) as info:
        mp.spawn(W.fail, args=(1,), nprocs=2)
    assert info.value.error_index == 1
    assert "ValueError: worker 1 failed on purpose" in str(info.value)
    assert "Process 1 terminated with the following error" in str(info.value)


def test_exit_codes_and_signals():
    with pytest.raises(mp.ProcessExitedException) as info:
        mp.spawn(W.exit_with, args=(7,), nprocs=2)
    assert info.value.exit_code == 7 and info.value.error_index == 1
    with pytest.raises(mp.ProcessExitedException) as info:
        mp.start_processes(W.kill_self, nprocs=1, start_method="spawn")
    assert info.value.signal_name == "SIGKILL" and info.value.exit_code < 0


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_queues_in_both_directions(method):
    """A shared tensor changed by the child is changed for the parent; a plain one travels by
    value; a tensor the child shares and drops before the parent reads it still arrives (it
    travels as a descriptor, not a name)."""
    context = mp.get_context(method)
    inbox, outbox = context.Queue(), context.Queue()
    worker = context.Process(target=W.echo_back, args=(inbox, outbox))
    worker.start()
    shared = loom.tensor([1.0, 2.0]).share_memory_()
    plain = loom.tensor([1.0, 2.0])
    inbox.put((shared, plain, loom.nn.Parameter(loom.ones(1))))
    fresh, ones, requires_grad, cls, child_shared, child_plain = outbox.get(timeout=60)
    inbox.put("done")
    worker.join(60)
    assert worker.exitcode == 0
    np.testing.assert_array_equal(shared.numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(plain.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(fresh.numpy(), [0, 1, 2, 3])
    assert fresh.is_shared() and not ones.is_shared()
    assert requires_grad and cls == "Parameter" and child_shared and not child_plain
