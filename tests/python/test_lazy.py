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
