"""Third-party programs ported as a user ports them (_ported_s32.py: their code verbatim, `torch`
bound to loom), each run on `cpu` and `lazy` from PyTorch's weights and the same random draws and
compared with PyTorch 1.13 where it ends:

- tonyduan/normalizing-flows: RealNVP, MAF, the neural spline flows (autoregressive and coupling:
  searchsorted by comparison, boolean-mask assignment, gather), Planar, ActNorm and the Glow 1x1
  convolution (scipy's LU), under a MultivariateNormal prior, trained by examples/ex_2d.py's loop;
  then inverted (NormalizingFlowModel.inverse) and sampled.

The lazy runs set loom.set_default_device("lazy") first (PyTorch 2's torch.set_default_device,
the one line such a port adds), because these programs make their accumulators with
torch.zeros(n) and no device."""

import argparse
import contextlib
import itertools
import logging
import math
import os
import sys

import numpy as np
import pytest

import loom
import _ported_s32 as src

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "lazy"]


def namespace_of(lib, **names):
    return {"torch": lib, "nn": lib.nn, "F": lib.nn.functional, "optim": lib.optim, "np": np, "math": math,
            "os": os, "sys": sys, **names}


def run(source, ns, name):
    exec(compile(source, name, "exec"), ns)
    return ns


@contextlib.contextmanager
def default_device(lib, device):
    if lib is loom and device != "cpu":
        loom.set_default_device(device)
    try:
        yield
    finally:
        if lib is loom:
            loom.set_default_device(None)


def state_of(module):
    return {k: v.detach().cpu().double().numpy() for k, v in module.state_dict().items()}


def assert_states_close(mine, theirs, rtol, atol=None):
    assert mine.keys() == theirs.keys()
    for k in theirs:
        np.testing.assert_allclose(mine[k], theirs[k], rtol=rtol, atol=rtol if atol is None else atol, err_msg=k)


def numpy_of(t):
    return t.detach().cpu().double().numpy()


# ---- tonyduan/normalizing-flows ----

NF_FLOWS = ["RealNVP", "MAF", "NSF_AR", "NSF_CL", "Planar"]


def normalizing_flows(lib, device, argv, initial=None, seed=0):
    """examples/ex_2d.py's __main__ with `argv` as its command line. The script imports
    NormalizingFlowModel from src.models; the harness hands it a subclass that records the
    model's initial weights (PyTorch's run) or loads them (loom's), so both start alike.
    gen_data and OneByOneConv draw from numpy's global generator, seeded alike."""
    scipy = pytest.importorskip("scipy")
    import scipy.linalg  # noqa: F401  (flows.py's `import scipy.linalg`)
    ns = namespace_of(lib, init=lib.nn.init, sp=scipy, itertools=itertools, logging=logging,
                      ArgumentParser=argparse.ArgumentParser, MultivariateNormal=lib.distributions.MultivariateNormal)
    run(src.NF_UTILS, ns, "src/utils.py")
    run(src.NF_FLOWS, ns, "src/flows.py")
    run(src.NF_MODELS, ns, "src/models.py")
    upstream = ns["NormalizingFlowModel"]
    made = {}

    class NormalizingFlowModel(upstream):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if initial is None:
                made["initial"] = {k: v.detach().clone() for k, v in self.state_dict().items()}
            else:
                self.load_state_dict({k: lib.tensor(v.numpy()) for k, v in initial.items()})
            made["model"] = self

    ns["NormalizingFlowModel"] = NormalizingFlowModel
    run(src.NF_EX2D_DATA, ns, "examples/ex_2d.py")
    np.random.seed(seed)
    argv_before = sys.argv
    sys.argv = ["ex_2d.py"] + argv
    try:
        with default_device(lib, device):
            run(src.NF_EX2D_MAIN, ns, "examples/ex_2d.py")
    finally:
        sys.argv = argv_before
    ns.update(made)
    return ns


def nf_argv(flow):
    return ["--n", "96", "--iterations", "3", "--flow", flow, "--convolve", "--actnorm"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("flow", NF_FLOWS)
def test_normalizing_flows_train(flow, device):
    theirs = normalizing_flows(torch, "cpu", nf_argv(flow))  # its own each time: inverse() caches in the model
    mine = normalizing_flows(loom, device, nf_argv(flow), initial=theirs["initial"])
    model = mine["model"]
    assert all(p.device.type == device for p in model.parameters())
    assert mine["loss"].item() == pytest.approx(theirs["loss"].item(), rel=1e-4)
    assert_states_close(state_of(model), state_of(theirs["model"]), 1e-4)
    np.testing.assert_allclose(numpy_of(mine["z"]), numpy_of(theirs["z"]), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(numpy_of(mine["log_det"]), numpy_of(theirs["log_det"]), rtol=1e-4, atol=1e-4)
    if flow == "Planar":  # no algebraic inverse
        return
    # NormalizingFlowModel.inverse (each flow's inverse: the splines' root-finding branch, the 1x1
    # convolution's torch.inverse) maps the latents back to the data, as PyTorch's does.
    with default_device(loom, device):
        x_back, log_det = model.inverse(model(mine["x"])[0])
    their_back, their_log_det = theirs["model"].inverse(theirs["model"](theirs["x"])[0])
    np.testing.assert_allclose(numpy_of(x_back), numpy_of(their_back), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(numpy_of(x_back), numpy_of(mine["x"]), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(numpy_of(log_det), numpy_of(their_log_det), rtol=1e-3, atol=1e-3)
    # OneByOneConv caches W_inv and tests it with `if not self.W_inv`: from the second inverse on
    # (model.sample) that is the truth value of a 2x2 tensor, which PyTorch refuses, and so must loom.
    with pytest.raises(RuntimeError, match="ambiguous") as their_error:
        theirs["model"].sample(5)
    with default_device(loom, device), pytest.raises(RuntimeError) as my_error:
        model.sample(5)
    assert str(my_error.value) == str(their_error.value)
