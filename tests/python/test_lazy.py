"""Lazy mode from Python: deferred execution, sync points, trace keys, in-place donation,
errors at the recording line, and lazy results equal to eager ones."""

import numpy as np
import pytest

import loom


def metric(name):
    return loom.metrics()[name]


def test_ops_record_without_running():
    x = loom.arange(6.0, device="lazy").reshape(2, 3)
    loom.sync()
    launches = metric("kernel_launches")
    y = (x * 2 + 1).exp().sum(1)
    assert metric("kernel_launches") == launches  # nothing ran yet
    assert y.shape == (2,) and y.dtype == loom.float32  # metadata needs no sync
    assert metric("kernel_launches") == launches
    expected = np.exp(np.arange(6.0).reshape(2, 3) * 2 + 1).sum(1)
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5)  # numpy() is a sync point
    assert metric("kernel_launches") > launches


@pytest.mark.parametrize("sync_point", ["item", "tolist", "numpy", "repr", "bool", "to_cpu", "sync", "synchronize"])
def test_sync_points_materialize(sync_point):
    x = loom.ones(1, device="lazy") * 3
    traces = metric("traces")
    {
        "item": lambda: x.item(),
        "tolist": lambda: x.tolist(),
        "numpy": lambda: x.numpy(),
        "repr": lambda: repr(x),
        "bool": lambda: bool(x),
        "to_cpu": lambda: x.to("cpu"),
        "sync": loom.sync,
        "synchronize": loom.synchronize,
    }[sync_point]()
    assert metric("traces") == traces + 1
    assert loom._C._pending_count("cpu") == 0


def test_a_sync_materializes_every_live_pending_tensor_as_one_trace():
    x = loom.arange(4.0, device="lazy")
    a, b, c = x + 1, x * 2, (x - 1).sum()
    traces = metric("traces")
    assert c.item() == 2.0
    assert metric("traces") == traces + 1
    traces = metric("traces")
    assert a.tolist() == [1.0, 2.0, 3.0, 4.0] and b.tolist() == [0.0, 2.0, 4.0, 6.0]
    assert metric("traces") == traces  # already materialized by the first sync


def step_key(lr, n=8, seed=0):
    loom.manual_seed(seed)
    p = loom.randn(n, device="lazy")
    g = loom.randn(n, device="lazy")
    loom.sync()
    p.sub_(g * lr)
    loom.sync()
    return loom._C._last_trace_key()


def test_trace_keys():
    assert step_key(0.1) == step_key(0.1)  # the same program twice
    assert step_key(0.1) == step_key(0.05)  # another learning rate: a parameter, not a constant
    assert step_key(0.1) == step_key(0.1, seed=3)  # other values: leaves hash by description
    assert step_key(0.1) != step_key(0.1, n=9)  # another shape: another trace


def test_inplace_donation_keeps_address():
    p = loom.zeros(16, device="lazy")
    loom.sync()
    address = p.data_ptr()
    expected = np.zeros(16, dtype=np.float32)
    for step in range(100):
        g = loom.full((16,), float(step), device="lazy")
        p.sub_(0.01 * g)
        loom.sync()
        expected -= np.float32(0.01) * np.float32(step)
        assert p.data_ptr() == address
    np.testing.assert_allclose(p.numpy(), expected, rtol=1e-5)


def test_lazy_equals_eager_on_a_small_network():
    rng = np.random.default_rng(0)
    x, w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in [(8, 5), (5, 7), (7, 3)])
    results = []
    for device in ["cpu", "lazy"]:
        t = [loom.tensor(a, device=device) for a in (x, w1, w2)]
        h = (t[0] @ t[1]).relu()
        logits = h @ t[2]
        loss = (logits.log_softmax(-1) * -1).mean()
        results.append((logits.numpy(), loss.item()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    assert results[0][1] == pytest.approx(results[1][1], rel=1e-6)


def test_errors_raise_at_the_recording_line():
    a = loom.zeros(2, 3, device="lazy")
    traces = metric("traces")
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        a + loom.zeros(4, device="lazy")
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        a @ a
    with pytest.raises(IndexError, match="Dimension out of range"):
        a.sum(5)
    with pytest.raises(RuntimeError, match="same device"):
        a + loom.zeros(2, 3)
    assert metric("traces") == traces  # raised while recording, not at a sync


def test_views_and_inplace_in_lazy_mode():
    x = loom.arange(12.0, device="lazy").reshape(3, 4) * 1  # pending
    row = x[1]
    row.mul_(-1)  # writes through to x
    col = x[:, 0]
    x.add_(100)  # col, taken before, sees it
    expected = np.arange(12.0).reshape(3, 4)
    expected[1] *= -1
    expected += 100
    np.testing.assert_array_equal(x.numpy(), expected)
    np.testing.assert_array_equal(col.numpy(), expected[:, 0])
    np.testing.assert_array_equal(row.numpy(), expected[1])


def test_random_ops_are_parameters_and_reproducible():
    loom.manual_seed(7)
    a = loom.rand(5, device="lazy").tolist()
    key_a = loom._C._last_trace_key()
    b = loom.rand(5, device="lazy").tolist()
    key_b = loom._C._last_trace_key()
    assert a != b and key_a == key_b  # a new offset, the same trace
    loom.manual_seed(7)
    assert loom.rand(5, device="lazy").tolist() == a
    loom.manual_seed(7)
    np.testing.assert_array_equal(loom.rand(5).numpy(), np.array(a, dtype=np.float32))  # eager draws the same


def test_lazy_to_eager_round_trip():
    e = loom.arange(5.0)
    z = e.to("lazy")
    assert z.device == loom.device("lazy:cpu") and z.is_lazy and not e.is_lazy
    back = (z * 2).to("cpu")
    assert not back.is_lazy
    assert back.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert str(loom.device("lazy")) == "lazy"


# ---- failures that depend on the data: the sync raises them, they fail the tensors computed from
# them and nothing else (test_failed_sync.py has the rest) ----

def test_a_data_error_fails_only_the_tensors_computed_from_it():
    x = loom.tensor([4, 5], device="lazy")
    q = x // loom.tensor([0, 1], device="lazy")  # found only when the kernel runs
    after = q + 1
    unrelated = x * 2
    with pytest.raises(RuntimeError, match="ZeroDivisionError.*FloorDiv"):
        unrelated.tolist()  # the sync that computes it runs q too, which fails: the sync raises
    assert unrelated.tolist() == [8, 10]  # and computes what does not depend on q
    assert loom._C._pending_count("cpu") == 0
    assert q.shape == (2,) and q.dtype == loom.int64  # metadata remains
    for read in (q.tolist, after.tolist, q.numpy, lambda: repr(after), lambda: q[0].item()):
        with pytest.raises(RuntimeError, match="ZeroDivisionError.*FloorDiv"):
            read()
    for use in (lambda: q + 1, lambda: q[0], lambda: q.sum(), lambda: loom.cat([q, x]), lambda: q.add_(1),
                lambda: x.copy_(q), lambda: q.to("cpu")):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            use()
    assert x.tolist() == [4, 5]
    assert (x + 1).tolist() == [5, 6]
    del q, after
    assert (x * 3).tolist() == [12, 15]


def test_data_errors_keep_their_exception_type():
    x = loom.arange(3.0, device="lazy")
    picked = x[loom.tensor([5], device="lazy")]
    gathered = x.gather(0, loom.tensor([5], device="lazy"))
    with pytest.raises((IndexError, RuntimeError), match="index 5 is out of bounds"):
        loom.sync()
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        picked.tolist()
    with pytest.raises(RuntimeError, match="index 5 is out of bounds"):
        gathered.tolist()


def test_a_failed_inplace_op_leaves_the_tensor_as_it_was():
    p = loom.tensor([1, 2], device="lazy")
    view = p[:]  # shares p's storage
    p.add_(p.gather(0, loom.tensor([7, 0], device="lazy")))
    with pytest.raises(RuntimeError, match="out of bounds"):
        loom.sync()
    assert p.tolist() == [1, 2]  # readable, with its value from before the sync
    assert view.tolist() == [1, 2]
    view.add_(1)  # the storage is as usable as ever
    assert view.tolist() == [2, 3]


def test_failed_writes_of_dead_tensors_are_dropped():
    p = loom.tensor([1, 2, 3], device="lazy")
    p[1:].add_(p.gather(0, loom.tensor([0, 9], device="lazy")))  # the view dies before the sync
    with pytest.raises(RuntimeError, match="out of bounds"):
        loom.sync()
    assert p.tolist() == [1, 2, 3]
    loom.sync()  # nothing is left to fail again
    assert (p + 1).tolist() == [2, 3, 4]


def test_checks_of_numbers_raise_at_the_call():
    """Checks that need no data raise where the op is called, as in eager mode: nothing is left
    pending to fail at a sync."""
    t = loom.tensor(np.array([1, 2], np.uint8), device="lazy")
    for call in (lambda: t.fill_(300), lambda: t.__setitem__(0, 300), lambda: t.masked_fill(t > 1, 300),
                 lambda: t // 256, lambda: loom.full((2,), 300, dtype=loom.uint8, device="lazy")):
        with pytest.raises(RuntimeError, match="overflow|ZeroDivisionError"):
            call()
        assert loom._C._pending_count("cpu") == 0
    assert t.tolist() == [1, 2]


def test_one_hot_checks_its_classes_in_lazy_mode():
    idx = loom.tensor([0, 3], device="lazy") * 1  # pending
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        loom.one_hot(idx, 3)
    with pytest.raises(RuntimeError, match="Class values must be non-negative"):
        loom.one_hot(idx - 1, 5)
    assert loom.one_hot(idx, 4).tolist() == [[1, 0, 0, 0], [0, 0, 0, 1]]
