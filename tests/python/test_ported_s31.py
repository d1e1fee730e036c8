"""Third-party training programs ported as a user ports them (_ported_s31.py: their code verbatim,
`torch` bound to loom): karpathy/nanoGPT (model.py and train.py's loop: configure_optimizers'
inspect.signature check, the disabled GradScaler, checkpoints written and resumed), karpathy/makemore
(its six models, AdamW, its infinite RandomSampler loader, sampling), vwxyzjn/cleanrl's PPO for
continuous actions (Normal, GAE, advantage normalization, clip_grad_norm_, minibatches picked by
numpy index arrays), pytorch/examples' REINFORCE and actor-critic (Categorical, a deque of
returns, smooth_l1_loss), time_sequence_prediction (LSTMCell, LBFGS, float64), regression (SGD by
hand through .data) and mnist_forward_forward (a Linear subclass with its own Adam and train()). Each runs a few steps on `cpu` and `lazy` from PyTorch's weights (copied,
or resumed from PyTorch's checkpoint) and ends where PyTorch 1.13 ends. Their random draws
(batches, actions) come from one numpy generator in both, so loom and PyTorch draw the same."""

import contextlib
import inspect
import io
import itertools
import math
import os
import random
import sys
import time
import types

import numpy as np
import pytest

import loom
import _ported_s31 as src

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "lazy"]


def namespace_of(lib, **names):
    return {"torch": lib, "nn": lib.nn, "F": lib.nn.functional, "optim": lib.optim, "np": np, "math": math,
            "os": os, "sys": sys, "time": time, "random": random, "inspect": inspect, **names}


def run(source, ns, name):
    exec(compile(source, name, "exec"), ns)
    return ns


def proxy(module, **replaced):
    """module's names, some replaced: how the harness hands a program the same random draws in
    both libraries (their generators differ) without editing the program."""
    p = types.SimpleNamespace(**{n: getattr(module, n) for n in dir(module) if not n.startswith("__")})
    p.__dict__.update(replaced)
    return p


def state_of(module):
    return {k: v.detach().cpu().double().numpy() for k, v in module.state_dict().items()}


def assert_states_close(mine, theirs, rtol, atol=None):
    assert mine.keys() == theirs.keys()
    for k in theirs:
        np.testing.assert_allclose(mine[k], theirs[k], rtol=rtol, atol=rtol if atol is None else atol, err_msg=k)


def copy_weights(theirs, mine, device, lib=loom):
    mine.load_state_dict({k: lib.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return lib.nn.Module.to(mine, device)


class NullWriter:
    """tensorboard's SummaryWriter, which the programs log to (not under test)."""

    def __init__(self, *args, **kwargs):
        pass

    def add_scalar(self, *args):
        pass

    def add_text(self, *args):
        pass

    def flush(self):
        pass


# ---- pytorch/examples time_sequence_prediction ----

def time_sequence(lib, device, root, reference=None):
    """generate_sine_wave.py, then train.py's __main__ for one LBFGS step (up to 20 evaluations of
    its closure) on the first 6 waves' first 24 points, and its 1000-point prediction, all float64.
    The file generate_sine_wave.py saves is a pickled numpy array: loom.load reads it as PyTorch
    2.6 does, refusing numpy's globals unless allowed (torch 1.13 read anything)."""
    ns = run(src.GENERATE_SINE_WAVE, namespace_of(lib), "generate_sine_wave.py")
    Sequence = run(src.TIME_SEQUENCE, namespace_of(lib), "train.py")["Sequence"]
    if reference is not None:
        class Sequence(Sequence):  # noqa: F811 -- PyTorch's initial weights
            def __init__(self):
                super().__init__()
                copy_weights(reference, self, device, lib)
    ns = namespace_of(lib, Sequence=Sequence, opt=types.SimpleNamespace(steps=1))
    allowed = [np.core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype("float64"))]
    with lib.serialization.safe_globals(allowed) if lib is loom else contextlib.nullcontext():
        run(src.TIME_SEQUENCE_DATA, ns, "train.py")
    for k in ("input", "target", "test_input", "test_target"):
        ns[k] = ns[k][:6, :24].to(device)  # the port's device line; the script names none
    with loom.device(device) if lib is loom else contextlib.nullcontext():
        with contextlib.redirect_stdout(None):
            run(src.TIME_SEQUENCE_TRAIN, ns, "train.py")
    return ns


@pytest.mark.parametrize("device", DEVICES)
def test_time_sequence_prediction_lbfgs(tmp_path, monkeypatch, device):
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    reference = run(src.TIME_SEQUENCE, namespace_of(torch), "train.py")["Sequence"]().double()
    theirs = time_sequence(torch, "cpu", tmp_path, reference)
    with pytest.raises(loom.serialization.UnsafeFileError, match="numpy"):
        loom.load("traindata.pt")
    mine = time_sequence(loom, device, tmp_path, reference)
    assert mine["loss"].item() == pytest.approx(theirs["loss"].item(), rel=1e-9)
    np.testing.assert_allclose(mine["y"], theirs["y"], rtol=1e-9, atol=1e-12)
    assert_states_close(state_of(mine["seq"]), state_of(theirs["seq"]), 1e-9)


# ---- pytorch/examples regression ----

def regression(lib, device, reference):
    """regression/main.py whole: SGD by hand (param.data.add_) on a Linear until the smooth L1
    loss is under 1e-3, then its report ('{:+.2f}'.format of 0-dim tensors). torch.randn draws
    from a numpy generator; the Linear starts from PyTorch's weights; the script names no device."""
    draws = np.random.default_rng(0)

    class Linear(lib.nn.Linear):
        def __init__(self, *args):
            super().__init__(*args)
            copy_weights(reference, self, device, lib)

    script_torch = proxy(lib, randn=lambda *size: lib.tensor(draws.standard_normal(size).astype(np.float32)),
                         nn=proxy(lib.nn, Linear=Linear))
    ns = namespace_of(script_torch, F=lib.nn.functional, count=itertools.count)
    out = io.StringIO()
    with loom.device(device) if lib is loom else contextlib.nullcontext(), contextlib.redirect_stdout(out):
        run(src.REGRESSION, ns, "main.py")
    return ns, out.getvalue()


@pytest.mark.parametrize("device", DEVICES)
def test_regression(device):
    torch.manual_seed(0)
    reference = torch.nn.Linear(4, 1)
    theirs, their_report = regression(torch, "cpu", reference)
    mine, my_report = regression(loom, device, reference)
    assert mine["batch_idx"] == theirs["batch_idx"]
    # The loss is a residual near the fit (cancellation): float32 rounding moves it by ~1e-6.
    assert mine["loss"] == pytest.approx(theirs["loss"], abs=5e-6)
    assert my_report.splitlines()[1:] == their_report.splitlines()[1:]  # the learned polynomial


# ---- pytorch/examples mnist_forward_forward ----

def forward_forward(lib, device, data, references):
    """main.py's __main__ after loading MNIST (its loaders: one batch of MNIST's shapes), 3 epochs
    a layer; the Layers start from PyTorch's weights; get_y_neg's torch.randint draws from numpy."""
    draws = np.random.default_rng(4)
    script_torch = proxy(lib, randint=lambda high, size: lib.tensor(draws.integers(0, high, size)))
    args = types.SimpleNamespace(epochs=3, lr=0.03, threshold=2.0, log_interval=1)
    ns = run(src.FORWARD_FORWARD, namespace_of(script_torch, Adam=lib.optim.Adam, args=args,
                                               device=lib.device(device)), "main.py")
    weights = iter(references)

    class Layer(ns["Layer"]):
        def __init__(self, *sizes):
            super().__init__(*sizes)
            copy_weights(next(weights), self, "cpu", lib)

    x, y, x_te, y_te = (lib.tensor(a) for a in data)
    ns.update(Layer=Layer, train_loader=[(x, y)], test_loader=[(x_te, y_te)])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        run(src.FORWARD_FORWARD_MAIN, ns, "main.py")
    return ns, [float(line.split()[-1]) for line in out.getvalue().splitlines() if line.startswith("Loss")]


@pytest.mark.parametrize("device", DEVICES)
def test_mnist_forward_forward(device):
    rng = np.random.default_rng(0)
    data = (rng.standard_normal((64, 784)).astype(np.float32), rng.integers(0, 10, 64),
            rng.standard_normal((32, 784)).astype(np.float32), rng.integers(0, 10, 32))
    torch.manual_seed(0)
    references = [torch.nn.Linear(784, 500), torch.nn.Linear(500, 500)]
    theirs, their_losses = forward_forward(torch, "cpu", data, references)
    mine, my_losses = forward_forward(loom, device, data, references)
    assert len(my_losses) == 6
    np.testing.assert_allclose(my_losses, their_losses, rtol=1e-5)
    np.testing.assert_array_equal(to_np(mine["net"].predict(mine["x"])), theirs["net"].predict(theirs["x"]).numpy())
    for a, b in zip(mine["net"].layers, theirs["net"].layers):
        assert_states_close(state_of(a), state_of(b), 1e-4)


def to_np(t):
    return t.cpu().numpy()
