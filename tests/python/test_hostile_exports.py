"""Exported memory outlives whatever later happens to the tensor (issue 12, item 3).

A numpy array, a memoryview or a DLPack capsule of a tensor points into the tensor's storage.
When the tensor object later holds other data (Module.double(), Module.to(), Tensor._set_data,
the tensor dropped), the export must keep the old storage alive and keep using it alone: were
the storage freed, the caching allocator would hand its block to the next tensor of that size,
and the export would read and write that unrelated tensor (pyext/buffer.cpp, Note [Exports own
their storage]).

Each test exports, swaps the tensor's data, then allocates and writes many tensors of the same
size (which reuse a freed block at once), and checks both directions: the export still holds the
old values, and writes through it change no tensor.
"""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom

SHAPE = (48, 40)  # 7,680 bytes of float32: one size class, reused by the next allocation of it


def fill_same_size(value, dtype=loom.float32, device="cpu"):
    """Tensors of SHAPE that would take over a freed block of that size, filled with value."""
    return [loom.full(SHAPE, value, dtype=dtype, device=device) for _ in range(16)]


def check_export_is_private(export, expected, others, others_value):
    """The export holds `expected`; writes through it reach none of `others`."""
    array = np.asarray(export)
    np.testing.assert_array_equal(array, expected)
    if array.flags.writeable:  # numpy 1.x marks from_dlpack arrays read-only
        array[...] = -123.0
    for o in others:
        np.testing.assert_array_equal(o.numpy(), np.full(SHAPE, others_value, np.float32))


def exporters():
    """Ways to take memory out of a tensor without a copy, each returning an array-like view."""
    def via_numpy(t):
        return t.numpy()

    def via_asarray(t):
        return np.asarray(t)

    def via_array_method(t):
        return t.__array__()

    def via_memoryview(t):
        return np.asarray(memoryview(t))

    def via_dlpack_legacy(t):
        return np.asarray(loom.from_dlpack(t.__dlpack__()))

    def via_dlpack_versioned(t):
        return np.asarray(loom.from_dlpack(t.__dlpack__(max_version=(1, 0))))

    def via_numpy_from_dlpack(t):
        return np.from_dlpack(t)

    return [via_numpy, via_asarray, via_array_method, via_memoryview, via_dlpack_legacy, via_dlpack_versioned,
            via_numpy_from_dlpack]


def swaps():
    """Ways to make a tensor object hold other data; each takes (module, parameter)."""
    def module_double(m, p):
        m.double()

    def module_to_float64(m, p):
        m.to(loom.float64)

    def set_data_other_tensor(m, p):
        p._set_data(loom.zeros(SHAPE))

    def set_data_lazy(m, p):
        p._set_data(p.detach().to("lazy") * 2)

    def dropped(m, p):
        m.weight = None

    return [module_double, module_to_float64, set_data_other_tensor, set_data_lazy, dropped]


@pytest.mark.parametrize("export", exporters(), ids=lambda f: f.__name__)
@pytest.mark.parametrize("swap", swaps(), ids=lambda f: f.__name__)
def test_export_keeps_the_storage_it_exposes(export, swap):
    m = loom.nn.Linear(SHAPE[1], SHAPE[0], bias=False)
    with loom.no_grad():
        m.weight.copy_(loom.arange(SHAPE[0] * SHAPE[1], dtype=loom.float32).reshape(SHAPE))
    p = m.weight
    a = export(p)
    expected = np.arange(SHAPE[0] * SHAPE[1], dtype=np.float32).reshape(SHAPE)
    swap(m, p)
    del p
    others = fill_same_size(7.0)
    check_export_is_private(a, expected, others, 7.0)


@pytest.mark.parametrize("export", exporters(), ids=lambda f: f.__name__)
def test_export_outlives_a_lazy_tensor_rebound_by_a_sync(export):
    """A lazy tensor exported, given new data, then synced: the export keeps the old storage."""
    t = loom.full(SHAPE, 5.0, device="lazy")
    a = export(t)
    t._set_data(loom.full(SHAPE, 1.0, device="lazy") + t)  # pending, reads the old value
    np.testing.assert_array_equal(t.numpy(), np.full(SHAPE, 6.0, np.float32))
    others = fill_same_size(7.0, device="lazy")
    loom.sync()
    check_export_is_private(a, np.full(SHAPE, 5.0, np.float32), others, 7.0)
    np.testing.assert_array_equal(t.numpy(), np.full(SHAPE, 6.0, np.float32))


def test_writes_through_an_export_before_the_swap_are_shared():
    """Until the swap the export and the tensor are one memory, as in PyTorch."""
    t = loom.zeros(SHAPE)
    a = t.numpy()
    a[0, 0] = 5.0
    assert t[0, 0].item() == 5.0
    t.add_(1)
    assert a[0, 0] == 6.0


def test_export_survives_an_emptied_cache():
    """The old block is still the export's after the allocator returns its free blocks to the
    system: reading and writing it does not fault (run in a child, a fault fails the test)."""
    program = textwrap.dedent("""
        import numpy as np, loom
        m = loom.nn.Linear(400, 300)
        a, v = m.weight.numpy(), memoryview(m.bias)
        expected = a.copy()
        m.double()
        loom.empty_cache()
        junk = [loom.ones(300, 400) for _ in range(50)]
        del junk
        loom.empty_cache()
        assert (a == expected).all()
        a[...] = 1.0
        np.asarray(v)[...] = 2.0
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
