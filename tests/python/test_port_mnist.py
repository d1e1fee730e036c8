"""A real program ported as a user ports it: PyTorch's MNIST example (_port_mnist.py: Conv2d,
max_pool2d, Dropout, flatten, log_softmax, nll_loss, Adadelta, StepLR, DataLoader, save) with only
`import loom as torch` changed. It runs unmodified on `cpu` and `lazy` (the same seed gives both
the same data, weights, shuffles and dropout masks, so the same losses), learns as under PyTorch
(the file with its import changed back), compiles nothing after its first epoch on `lazy`, and
its checkpoint has PyTorch's state_dict keys."""

import pathlib
import re

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")

SOURCE = pathlib.Path(__file__).with_name("_port_mnist.py").read_text()


def run(source, device, capsys, save_to, after_epoch=None):
    """Runs the program's main() and reads back what it prints: the logged training losses and,
    per epoch, the test set's average loss and number correct. after_epoch() is called after each
    epoch's test."""
    namespace = {"__name__": "port_mnist"}
    exec(compile(source, "_port_mnist.py", "exec"), namespace)
    if after_epoch:
        test = namespace["test"]
        namespace["test"] = lambda *args: (test(*args), after_epoch())
    namespace["main"](device, save_to=str(save_to))
    out = capsys.readouterr().out
    train = [float(v) for v in re.findall(r"\tLoss: ([0-9.]+)", out)]
    tests = [(float(loss), int(correct))
             for loss, correct in re.findall(r"Average loss: ([0-9.]+), Accuracy: (\d+)/", out)]
    assert train and len(tests) == 4, out
    return train, tests


def test_mnist_example_runs_on_both_devices_and_learns_as_under_pytorch(capsys, tmp_path):
    assert "import loom as torch" in SOURCE and "import torch\n" not in SOURCE
    cpu = run(SOURCE, "cpu", capsys, tmp_path / "cpu.pt")
    epochs = []
    lazy = run(SOURCE, "lazy", capsys, tmp_path / "lazy.pt", after_epoch=lambda: epochs.append(loom.metrics()))
    theirs = run(SOURCE.replace("import loom as torch", "import torch"), "cpu", capsys, tmp_path / "torch.pt")
    # printed with 6 decimals (training) and 4 (test)
    np.testing.assert_allclose(lazy[0], cpu[0], atol=2e-6)
    np.testing.assert_allclose([t[0] for t in lazy[1]], [t[0] for t in cpu[1]], atol=2e-4)
    assert [t[1] for t in lazy[1]] == [t[1] for t in cpu[1]]
    # after the first epoch, lazy mode compiles nothing and traces nothing new: dropout's masks
    # and StepLR's learning rate change every step or epoch without a new graph
    for key in ["kernels_compiled", "graph_cache_misses"]:
        assert [e[key] for e in epochs[1:]] == [epochs[1][key]] * (len(epochs) - 1), (key, epochs)
    assert epochs[-1]["graph_cache_hits"] > epochs[1]["graph_cache_hits"]
    # separable data (noisy class prototypes): both libraries fit the 32 test images
    for name, (train, tests) in {"loom": cpu, "torch": theirs}.items():
        assert train[-1] < train[0], (name, train)
        assert tests[-1][1] >= 28, (name, tests)
    # the checkpoint: PyTorch's keys and shapes, loadable back into the model
    mine = loom.load(str(tmp_path / "cpu.pt"))
    reference = torch.load(str(tmp_path / "torch.pt"))
    assert list(mine) == list(reference)
    assert [tuple(v.shape) for v in mine.values()] == [tuple(v.shape) for v in reference.values()]
