"""What the CUDA runtime of today does on a GPU: discovery, device memory from the caching
allocator, copies between host and device. Skipped (with the reason) where no GPU is present;
run by tests/gpu/check.sh on a GPU machine. The CUDA executor and kernels (issue 6) add their
suites here."""

import numpy as np
import pytest

import loom

pytestmark = pytest.mark.skipif(not loom.cuda.is_available(),
                                reason=f"no GPU: {loom.cuda.unavailable_reason() or 'none found'}")


def test_device_discovery():
    assert loom.cuda.is_compiled()
    assert loom.cuda.device_count() >= 1
    assert loom.cuda.unavailable_reason() == ""


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint8])
def test_round_trip_through_device_memory(dtype):
    a = (np.arange(1000) % 251).astype(dtype).reshape(10, 100)
    x = loom.tensor(a, device="cuda")
    assert x.is_cuda and x.device == loom.device("cuda:0")
    np.testing.assert_array_equal(x.cpu().numpy(), a)
    y = x.to("cpu")
    assert not y.is_cuda
    np.testing.assert_array_equal(y.numpy(), a)


def test_views_of_device_tensors_copy_back_strided():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = loom.tensor(a, device="cuda")
    np.testing.assert_array_equal(x.T[1:, ::2].cpu().numpy(), a.T[1:, ::2])


def test_caching_allocator_reuses_device_blocks():
    loom.cuda.empty_cache()
    before = loom.cuda.memory_stats()
    for _ in range(100):
        loom.tensor(np.zeros(1024, np.float32), device="cuda")
    after = loom.cuda.memory_stats()
    assert after["num_system_allocations"] - before["num_system_allocations"] <= 2
    assert after["num_cache_hits"] - before["num_cache_hits"] >= 98
    loom.cuda.empty_cache()
    assert loom.cuda.memory_stats()["reserved_bytes"] <= after["reserved_bytes"]


def test_device_queries_and_the_current_device():
    props = loom.cuda.get_device_properties(0)
    assert props.name == loom.cuda.get_device_name() and props.name
    assert (props.major, props.minor) == loom.cuda.get_device_capability(0) and props.major >= 7
    assert props.total_memory > 1 << 30 and props.multi_processor_count > 0
    assert "_CudaDeviceProperties(name=" in repr(props)
    last = loom.cuda.device_count() - 1
    with loom.cuda.device(last):
        assert loom.cuda.current_device() == last
        assert loom.ones(2, device="cuda").device == loom.device(f"cuda:{last}")
    assert loom.cuda.current_device() == 0
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        loom.cuda.set_device(last + 1)
