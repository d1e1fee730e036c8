"""The CUDA backend, checked where there is no GPU: every CUDA module loom can build besides the
fused ones (the runtime's fills, copies and random kernels; the library kernels) compiles with
NVRTC for Hopper, targets are chosen from the device's compute capability, and a machine
without a GPU reports so cleanly at every entry. tests/gpu/ runs the same code on a GPU."""

import pytest

import loom

needs_nvrtc = pytest.mark.skipif(not loom._C._nvrtc_available(),
                                 reason="this build of loom has no NVRTC (built without the CUDA toolkit)")
no_gpu = pytest.mark.skipif(loom.cuda.is_available(), reason="checks the behaviour without a GPU")


@needs_nvrtc
@pytest.mark.parametrize("module", ["runtime", "library"])
@pytest.mark.parametrize("ptx", [False, True])
def test_hand_written_cuda_modules_compile_for_hopper(module, ptx):
    source = loom._C._cuda_kernel_sources()[module]
    assert loom._C._nvrtc_compile(source, 90, f"{module}.cu", ptx) > 0


@needs_nvrtc
def test_every_kernel_the_executor_names_is_in_its_module():
    sources = loom._C._cuda_kernel_sources()
    runtime = ["loom_copy_1", "loom_copy_2", "loom_copy_4", "loom_copy_8", "loom_convert", "loom_fill_1", "loom_fill_2",
               "loom_fill_4", "loom_fill_8", "loom_arange", "loom_linspace", "loom_uniform", "loom_normal",
               "loom_randint"]
    library = ["loom_gather", "loom_scatter_add", "loom_index", "loom_index_put", "loom_cumsum", "loom_int_divmod",
               "loom_int_matmul"]
    library += ["loom_scan", "loom_sort", "loom_searchsorted", "loom_poisson"]  # lazy/ops_scan, ops_sort, ops_random
    for name in runtime:
        assert f"LOOM_KERNEL {name}(" in sources["runtime"], name
    for name in library:
        assert f"LOOM_KERNEL {name}(" in sources["library"], name


@needs_nvrtc
def test_the_target_is_a_cubin_for_known_architectures_and_ptx_otherwise():
    assert loom._C._cuda_target(90) == (90, False)  # Hopper: H100, H200
    assert loom._C._cuda_target(80) == (80, False)
    # A capability NVRTC has no cubin target for gets PTX of the newest architecture below it,
    # which the driver compiles for the device.
    assert loom._C._cuda_target(95) == (90, True)
    with pytest.raises(RuntimeError, match="cannot compile for a GPU of compute capability 1.0"):
        loom._C._cuda_target(10)


@no_gpu
def test_without_a_gpu_the_driver_table_says_why():
    status = loom._C._cuda_driver_status()
    assert status.startswith("CUDA is not available")
    assert loom.cuda.unavailable_reason() in status


@no_gpu
@pytest.mark.parametrize("make", [
    lambda: loom.zeros(3, device="cuda"),
    lambda: loom.tensor([1.0, 2.0]).to("cuda"),
    lambda: loom.randn(4, device="cuda"),
    lambda: loom.ones(2, device="lazy:cuda") + 1,
    lambda: loom.cuda.synchronize(),
])
def test_without_a_gpu_cuda_tensors_raise_cleanly(make):
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        make()


def test_allow_tf32_switch_is_off_by_default_and_settable():
    flag = loom.backends.cuda.matmul
    assert flag.allow_tf32 is False
    flag.allow_tf32 = True
    try:
        assert flag.allow_tf32 is True and loom._C._cuda_allow_tf32() is True
    finally:
        flag.allow_tf32 = False
    assert loom._C._cuda_allow_tf32() is False


def test_cpu_tensors_have_no_cuda_array_interface():
    # As PyTorch: consumers probe with hasattr and fall back to the buffer protocol.
    assert not hasattr(loom.ones(3), "__cuda_array_interface__")


@no_gpu
def test_without_a_gpu_the_device_queries_raise_cleanly():
    """torch.cuda's device API (what GPU scripts call first): without a GPU, setting or querying
    one raises naming why; the current device stays 0, and a negative index or None is no change."""
    assert loom.cuda.current_device() == 0
    for call in (lambda: loom.cuda.set_device(0), lambda: loom.cuda.set_device("cuda:1"),
                 lambda: loom.cuda.get_device_name(), lambda: loom.cuda.get_device_capability(0),
                 lambda: loom.cuda.get_device_properties(0)):
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            call()
    with pytest.raises(ValueError, match="Expected a cuda device"):
        loom.cuda.get_device_properties("cpu")
    loom.cuda.set_device(-1)
    with loom.cuda.device(None), loom.cuda.device(-1):
        assert loom.cuda.current_device() == 0
    assert loom.cuda.current_device() == 0
