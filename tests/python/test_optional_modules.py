"""Modules that training scripts import for optional features (pytorch/examples' word language
model imports torch.onnx at its top and uses torch.accelerator behind a flag): they import, say
what loom has, and refuse clearly what it does not."""

import subprocess
import sys

import pytest

import loom


def test_they_import_as_torchs_do():
    code = "import loom.onnx, loom.accelerator; from loom import onnx, accelerator; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_onnx_export_says_how_to_get_a_graph(tmp_path):
    assert loom.onnx.is_in_onnx_export() is False
    with pytest.raises(NotImplementedError, match="torch.load reads that file"):
        loom.onnx.export(loom.nn.Linear(2, 2), loom.ones(1, 2), str(tmp_path / "m.onnx"))
    assert not (tmp_path / "m.onnx").exists()


def test_accelerator_is_the_gpu():
    assert loom.accelerator.is_available() == loom.cuda.is_available()
    assert loom.accelerator.device_count() == loom.cuda.device_count()
    if loom.cuda.is_available():
        assert loom.accelerator.current_accelerator(check_available=True) == loom.device("cuda")
        assert loom.accelerator.current_device_index() == 0
    else:
        assert loom.accelerator.current_accelerator(check_available=True) is None
        assert loom.accelerator.current_device_index() == -1
        loom.accelerator.synchronize()  # nothing queued, nothing to wait for
    if loom.cuda.is_compiled():
        assert loom.accelerator.current_accelerator() == loom.device("cuda")
