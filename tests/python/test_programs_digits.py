"""_program_digits.py, a whole script importing `loom as torch`, run unmodified on `cpu` and `lazy`
(one seed gives both the same data, weights, shuffles and dropout masks, so the same losses) and,
with its import changed back, under PyTorch: it learns in both libraries, lazy mode compiles and
traces nothing new after the first epoch (dropout's masks and the decayed rate change without a new
graph), and its checkpoint has PyTorch's keys and shapes."""

import pathlib
import re

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")

SOURCE = pathlib.Path(__file__).with_name("_program_digits.py").read_text()


def run(source, device, capsys, save_to, after_epoch=None):
    """Runs main() and parses what it prints: the training losses, and (mean loss, right) per
    evaluation. after_epoch() runs after each epoch's evaluation."""
    namespace = {"__name__": "program_digits"}
    exec(compile(source, "_program_digits.py", "exec"), namespace)
    if after_epoch:
        evaluate = namespace["evaluate"]
        namespace["evaluate"] = lambda *args: (evaluate(*args), after_epoch())
    namespace["main"](device, save_to=str(save_to))
    out = capsys.readouterr().out
    train = [float(v) for v in re.findall(r"loss=([0-9.]+)", out)]
    evals = [(float(a), int(b)) for a, b in re.findall(r"mean_loss=([0-9.]+) right=(\d+)/", out)]
    assert train and len(evals) == 4, out
    return train, evals


def test_digits_script_runs_on_both_devices_and_learns_as_under_pytorch(capsys, tmp_path):
    assert "import loom as torch" in SOURCE and "import torch\n" not in SOURCE
    cpu = run(SOURCE, "cpu", capsys, tmp_path / "cpu.pt")
    epochs = []
    lazy = run(SOURCE, "lazy", capsys, tmp_path / "lazy.pt", after_epoch=lambda: epochs.append(loom.metrics()))
    theirs = run(SOURCE.replace("import loom as torch", "import torch"), "cpu", capsys, tmp_path / "torch.pt")
    # printed with 6 decimals (training) and 4 (evaluation)
    np.testing.assert_allclose(lazy[0], cpu[0], atol=2e-6)
    np.testing.assert_allclose([e[0] for e in lazy[1]], [e[0] for e in cpu[1]], atol=2e-4)
    assert [e[1] for e in lazy[1]] == [e[1] for e in cpu[1]]
    for key in ["kernels_compiled", "graph_cache_misses"]:
        assert [e[key] for e in epochs[1:]] == [epochs[1][key]] * (len(epochs) - 1), (key, epochs)
    assert epochs[-1]["graph_cache_hits"] > epochs[1]["graph_cache_hits"]
    # separable classes: both libraries fit most of the 32 held-out images
    for name, (train, evals) in {"loom": cpu, "torch": theirs}.items():
        assert train[-1] < train[0], (name, train)
        assert evals[-1][1] >= 28, (name, evals)
    mine, reference = loom.load(str(tmp_path / "cpu.pt")), torch.load(str(tmp_path / "torch.pt"))
    assert list(mine) == list(reference)
    assert [tuple(v.shape) for v in mine.values()] == [tuple(v.shape) for v in reference.values()]
