"""In-place results written straight into their destination (graph/compiled.cpp, donation).

A lazy in-place update computes its result into the tensor's own storage instead of fresh memory
copied over it at the end. That is only right where nothing reads the old values after the
write; each case here is a way of reading them, and lazy mode must give eager mode's result,
on the first run (lowering) and on replays. The order of reads and writes is every executor's
contract, not only the compiled one's: each case runs on the compiled executor, on the reference
interpreter and on the host emulator of the CUDA lowering.
"""

import numpy as np
import pytest

import loom

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True, params=["compiled", "interpreter", "cuda-emulated"])
def executor(request):
    loom._C._set_executor(request.param)
    try:
        yield request.param
    finally:
        loom._C._set_executor("compiled")


def both(program, *arrays, replays=3):
    """Runs program eagerly and lazily (several times: lowering, then replays); returns both."""
    eager = program(*[loom.tensor(a) for a in arrays])
    for _ in range(replays):
        lazy = program(*[loom.tensor(a, device="lazy") for a in arrays])
    return [t.numpy() for t in eager], [t.numpy() for t in lazy]


def check(program, *arrays):
    eager, lazy = both(program, *arrays)
    for e, z in zip(eager, lazy):
        np.testing.assert_allclose(z, e, rtol=1e-6, atol=1e-6)


def data(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_pointwise_update_reading_its_own_elements():
    def program(x, g):
        x.mul_(0.9).add_(g, alpha=0.1).sqrt_()
        return [x]
    check(program, np.abs(data(64)), np.abs(data(64)))


def test_optimizer_style_updates_keep_addresses_and_values():
    p, m = loom.tensor(data(32, 8), device="lazy"), loom.zeros(32, 8, device="lazy")
    loom.sync()
    addresses = (p.data_ptr(), m.data_ptr())
    pe, me = p.numpy().copy(), np.zeros((32, 8), np.float32)
    for step in range(5):
        g = data(32, 8)
        m.mul_(0.9).add_(loom.tensor(g, device="lazy"))
        p.sub_(m * 0.01)
        loom.sync()
        me = me * np.float32(0.9) + g
        pe = pe - me * np.float32(0.01)
        assert (p.data_ptr(), m.data_ptr()) == addresses
    np.testing.assert_allclose(p.numpy(), pe, rtol=1e-5, atol=1e-6)


def test_shifted_read_of_the_destination():
    def program(x):
        x[1:] = x[:-1] * 2  # each element reads its neighbour's old value
        return [x]
    check(program, data(10))


def test_reversed_read_of_the_destination():
    def program(x):
        x.copy_(x.index_select(0, loom.arange(8, -1, -1, device=x.device)) + 1)
        return [x]
    check(program, data(9))


def test_transposed_read_of_the_destination():
    def program(x):
        x.add_(x.t())
        return [x]
    check(program, data(6, 6))


def test_a_later_library_op_reads_the_old_values():
    def program(x, w):
        y = x @ w
        x.add_(1)
        z = x.sum() + y.sum()
        return [x, y, z]
    check(program, data(4, 5), data(5, 3))


def test_a_reduction_over_the_destination_feeds_its_update():
    def program(x):
        x.sub_(x.mean(dim=1, keepdim=True))
        return [x]
    check(program, data(5, 7))


def test_old_value_copied_elsewhere_in_the_same_sync():
    def program(a, x):
        a.copy_(x)  # a gets x's old values
        x.add_(1)
        return [a, x]
    check(program, data(8), data(8))


def test_two_updates_of_one_storage():
    def program(x):
        x[:3].add_(1)
        x[3:].mul_(x[:3].sum())
        return [x]
    check(program, data(6))


def test_update_through_a_transposed_view():
    def program(x, g):
        x.t().add_(g)
        return [x]
    check(program, data(3, 4), data(4, 3))


def test_replays_with_an_operand_that_starts_elsewhere_in_the_storage():
    # Same trace key (same shapes and aliasing), but the operand read element for element
    # starts where the destination does in the first run and elsewhere in the second.
    base_values = data(8)
    for offsets in [(0, 0), (0, 4), (4, 0), (0, 0)]:
        results = []
        for device in ["cpu", "lazy"]:
            base = loom.tensor(base_values, device=device)
            x, y = base[offsets[0]:offsets[0] + 4], base[offsets[1]:offsets[1] + 4]
            x.add_(y * 2)
            results.append(base.numpy())
        np.testing.assert_allclose(results[1], results[0], rtol=1e-6)


def test_a_failed_sync_writes_nothing():
    # The write of q comes before a step that fails on its data: a failed sync writes no
    # destination (test_failed_sync.py), so q keeps its value from before the sync.
    q = loom.tensor([1.0, 2.0], device="lazy")
    loom.sync()
    q.add_(1)
    bad = q.gather(0, loom.tensor([5], device="lazy"))
    with pytest.raises(RuntimeError, match="out of bounds"):
        loom.sync()
    assert q.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="out of bounds"):
        bad.tolist()
    q.add_(1)
    assert q.tolist() == [2.0, 3.0]


# ---- random programs of in-place writes into materialized tensors ----
#
# Tensors share storage as parameters and their views do (two slices of one base overlap), and
# each program reads some of them while writing others, in one sync, replayed several times (the
# cached plan, donation decided once, must hold for every replay). Lazy must equal eager. (This
# found two lazy bugs in writes through overlapping views: lazy/sync.cpp aliasable_base and
# lazy/dispatch.cpp sync_before_aliased_write.)

def _state(device, seed):
    rng = np.random.default_rng(seed)
    base = loom.tensor(rng.uniform(-1, 1, 12).astype(np.float32), device=device)
    other = loom.tensor(rng.uniform(-1, 1, 4).astype(np.float32), device=device)
    views = [base[0:4], base[4:8], base[2:6], base[8:12], other, base[1::3]]
    return base, other, views


def _random_program(seed, length=5):
    import random
    r = random.Random(seed)
    ops = []
    for _ in range(length):
        kind = r.choice(["add", "mul", "copy", "sub_sum", "shift", "lerp", "fill", "setitem"])
        ops.append((kind, r.randrange(6), r.randrange(6), round(r.uniform(-1.5, 1.5), 3)))
    return ops


def _apply(views, ops):
    for kind, i, j, c in ops:
        t, u = views[i], views[j]
        if kind == "add":
            t.add_(u * c)
        elif kind == "mul":
            t.mul_(c)
        elif kind == "copy":
            t.copy_(u + c)
        elif kind == "sub_sum":
            t.sub_(u.sum() * c)
        elif kind == "shift":
            t[1:].add_(u[:-1] * c)
        elif kind == "fill":
            t[::2].fill_(c)
        elif kind == "setitem":
            t[u.argmax()] = u.sum() * c
        else:
            t.lerp_(u, 0.25)


@pytest.mark.parametrize("seed", range(60))
def test_random_in_place_programs_lazy_equals_eager(seed):
    ops = _random_program(seed)
    results = {}
    for device in ["cpu", "lazy"]:
        base, other, views = _state(device, seed)
        if device == "lazy":
            loom.sync()
        for _ in range(3):  # lowering, then replays of the cached plan
            _apply(views, ops)
            if device == "lazy":
                loom.sync()
        results[device] = (base.numpy().copy(), other.numpy().copy())
    np.testing.assert_allclose(results["lazy"][0], results["cpu"][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(results["lazy"][1], results["cpu"][1], rtol=1e-5, atol=1e-5)


def test_writes_into_disjoint_parts_of_a_tensor_stay_in_one_trace():
    x = loom.zeros(6, device="lazy")
    loom.sync()
    loom.metrics_reset()
    left, right = x[:3], x[3:]
    left.fill_(1)
    right.add_(2)  # another view of the same storage, disjoint: no sync before it
    assert loom.metrics()["traces"] == 0
    assert x.tolist() == [1, 1, 1, 2, 2, 2]
    assert loom.metrics()["traces"] == 1


def test_a_write_overlapping_a_pending_write_applies_after_it():
    x = loom.tensor([1.0, 2.0, 3.0, 4.0], device="lazy")
    loom.sync()
    a, b = x[:3], x[1:]
    a.mul_(10)
    b.add_(1)  # overlaps a's pending write: must see it
    assert x.tolist() == [10.0, 21.0, 31.0, 5.0]
