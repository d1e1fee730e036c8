"""loom.backends (cuda, cudnn, mps), the float32 matmul precision, deterministic algorithms and
loom.cuda's seeds, against PyTorch 1.13's behaviour."""

import warnings

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _restore():
    yield
    loom.backends.cuda.matmul.allow_tf32 = False
    loom.set_float32_matmul_precision("highest")
    loom.use_deterministic_algorithms(False)
    loom.backends.cudnn.benchmark = False
    loom.backends.cudnn.deterministic = False


def test_matmul_precision_as_torch():
    for lib in (torch, loom):
        assert lib.get_float32_matmul_precision() == "highest"
        lib.backends.cuda.matmul.allow_tf32 = True
        assert lib.get_float32_matmul_precision() == "high"
        lib.set_float32_matmul_precision("medium")
        assert lib.backends.cuda.matmul.allow_tf32 and lib.get_float32_matmul_precision() == "medium"
        lib.set_float32_matmul_precision("highest")
        assert not lib.backends.cuda.matmul.allow_tf32
    with pytest.warns(UserWarning, match="Invalid value"):
        loom.set_float32_matmul_precision("fastest")
    assert loom.get_float32_matmul_precision() == "highest"


def test_cudnn_switches_as_torch():
    import loom.backends.cudnn as cudnn  # the import programs write
    for name in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert getattr(cudnn, name) == getattr(torch.backends.cudnn, name), name
    cudnn.benchmark = True
    assert loom.backends.cudnn.benchmark
    with cudnn.flags(enabled=False, deterministic=True):
        assert cudnn.deterministic and not cudnn.enabled
    assert not cudnn.deterministic and cudnn.enabled
    assert not cudnn.is_available() and not loom.backends.mps.is_available()


def test_deterministic_algorithms_as_torch():
    for lib in (torch, loom):
        assert not lib.are_deterministic_algorithms_enabled() and lib.get_deterministic_debug_mode() == 0
        lib.use_deterministic_algorithms(True, warn_only=True)
        assert lib.are_deterministic_algorithms_enabled() and lib.is_deterministic_algorithms_warn_only_enabled()
        assert lib.get_deterministic_debug_mode() == 1
        lib.set_deterministic_debug_mode("error")
        assert lib.get_deterministic_debug_mode() == 2 and not lib.is_deterministic_algorithms_warn_only_enabled()
        lib.set_deterministic_debug_mode(0)
        assert not lib.are_deterministic_algorithms_enabled()
        with pytest.raises(TypeError, match="must be bool"):
            lib.use_deterministic_algorithms("yes")
        with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
            lib.set_deterministic_debug_mode("loud")
    torch.use_deterministic_algorithms(False)


def test_deterministic_mode_warns_for_gpu_scatter_add():
    """The CUDA lowering (run here through its host emulator) warns once that scatter_add's float
    sums are ordered by atomics, while the mode is on."""
    loom.use_deterministic_algorithms(True)
    loom._C._set_executor("cuda-emulated")
    try:
        x = loom.zeros(7, dtype=loom.float64, device="lazy")  # a trace no other test lowers
        index = loom.tensor([0, 1, 1, 4, 6], device="lazy")
        with pytest.warns(RuntimeWarning, match="atomics"):
            out = x.scatter_add(0, index, loom.ones(5, dtype=loom.float64, device="lazy"))
            assert out.tolist() == [1.0, 2.0, 0.0, 0.0, 1.0, 0.0, 1.0]
    finally:
        loom._C._set_executor("compiled")


def test_cuda_manual_seed_leaves_the_cpu_generator_alone():
    loom.manual_seed(3)
    a = loom.rand(4).tolist()
    loom.manual_seed(3)
    loom.cuda.manual_seed(7)
    loom.cuda.manual_seed_all(7)
    assert loom.rand(4).tolist() == a
