"""Third-party programs ported as a user ports them (_ported_s32.py: their code verbatim, `torch`
bound to loom), each run on `cpu` and `lazy` from PyTorch's weights and the same random draws and
compared with PyTorch 1.13 where it ends:

- tonyduan/normalizing-flows: RealNVP, MAF, the neural spline flows (autoregressive and coupling:
  searchsorted by comparison, boolean-mask assignment, gather), Planar, ActNorm and the Glow 1x1
  convolution (scipy's LU), under a MultivariateNormal prior, trained by examples/ex_2d.py's loop;
  then inverted (NormalizingFlowModel.inverse) and sampled.
- pytorch/examples as whole scripts (test_ported_examples runs their models and loops; here their
  command lines, data pipelines, devices and checkpoints too): vae (torch.accelerator, a
  DataLoader with workers and pinned memory), dcgan (its `fake` dataset, --netG / --netD from
  PyTorch's checkpoints), word_language_model (torch.save of the whole model, loaded back under
  torch.serialization.safe_globals), and language_translation (nn.Transformer as
  encoder-decoder with padding masks, greedy decoding; torch.ones(1, 1).type_as(src.data) found
  type_as keeping its own device where PyTorch takes the other's).
- karpathy/minGPT: the model, the Trainer and the adder project end to end.

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
import types

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
# On lazy (kernels compiled per shape: CI's time) one flow of each kind: the splines (NSF_AR
# shares NSF_CL's unconstrained_RQS), MAF's per-dimension loop, Planar's vector algebra.
NF_CASES = [(f, "cpu") for f in NF_FLOWS] + [(f, "lazy") for f in ("MAF", "NSF_CL", "Planar")]


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


@pytest.mark.parametrize("flow, device", NF_CASES)
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


# ---- pytorch/examples: vae, dcgan ----

class Torchvision:
    """What these scripts import from torchvision (not installed; the harness's stand-ins, in the
    library under test): MNIST and FakeData as a few images drawn from a numpy generator,
    ToTensor (an H x W (x C) uint8 array to a C x H x W float tensor in [0, 1]), Compose,
    Normalize, and save_image, which keeps what it was given."""

    def __init__(self, lib, seed=0, images=16):
        self.lib, self.rng, self.images, self.saved = lib, np.random.default_rng(seed), images, []
        tv = self

        class Dataset:
            def __init__(self, shape, n, transform=None):
                self.data = tv.rng.integers(0, 256, (n,) + shape, dtype=np.uint8)
                self.targets = tv.rng.integers(0, 10, n)
                self.transform = transform

            def __len__(self):
                return len(self.data)

            def __getitem__(self, i):
                image = self.data[i]
                return (self.transform(image) if self.transform else image), int(self.targets[i])

        def mnist(root, train=True, download=False, transform=None):
            return Dataset((28, 28), images if train else images // 2, transform)

        def fake_data(size=None, image_size=(3, 224, 224), num_classes=10, transform=None):
            c, h, w = image_size
            return Dataset((h, w, c), size or images, transform)

        def to_tensor():
            def convert(image):
                a = image.astype(np.float32) / 255
                a = a[None] if a.ndim == 2 else a.transpose(2, 0, 1)
                return lib.tensor(np.ascontiguousarray(a))
            return convert

        def normalize(mean, std):
            return lambda t: (t - lib.tensor(mean).view(-1, 1, 1)) / lib.tensor(std).view(-1, 1, 1)

        def compose(steps):
            def apply(x):
                for step in steps:
                    x = step(x)
                return x
            return apply

        def save_image(tensor, fp, **kwargs):
            tv.saved.append((tuple(tensor.shape), os.path.basename(str(fp))))

        self.datasets = types.SimpleNamespace(MNIST=mnist, FakeData=fake_data)
        self.transforms = types.SimpleNamespace(ToTensor=to_tensor, Normalize=normalize, Compose=compose)
        self.utils = types.SimpleNamespace(save_image=save_image)


def numpy_draws(lib, seed):
    """torch.randn / randn_like replaced by one numpy generator's normal draws (placed and typed
    as the call asks), so both libraries draw the same noise."""
    draws = np.random.default_rng(seed)

    def randn(*size, dtype=None, device=None, **kwargs):
        size = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        return lib.tensor(draws.standard_normal(size).astype(np.float32), dtype=dtype, device=device)

    def randn_like(t, **kwargs):
        return lib.tensor(draws.standard_normal(tuple(t.shape)).astype(np.float32), dtype=t.dtype, device=t.device)
    return randn, randn_like


def accelerator_of(lib, device):
    """torch.accelerator as the scripts query it: the lazy device is the port's accelerator."""
    if device == "cpu":
        return types.SimpleNamespace(is_available=lambda: False, current_accelerator=lambda: None)
    return types.SimpleNamespace(is_available=lambda: True, current_accelerator=lambda: lib.device(device))


@pytest.fixture
def same_shuffle(monkeypatch):
    """RandomSampler (DataLoader(shuffle=True), and with replacement) in both libraries draws from
    one numpy generator: PyTorch's calls torch.randperm / torch.randint, loom's its sampler's
    generator (permutation / integers, 32 at a time as PyTorch's)."""
    import loom.utils.data.sampler as loom_sampler
    theirs = np.random.default_rng(11)
    mine = np.random.default_rng(11)
    monkeypatch.setattr(torch, "randperm",
                        lambda n, generator=None, **kw: torch.tensor(theirs.permutation(n), dtype=torch.int64))
    monkeypatch.setattr(torch, "randint", lambda high, size, dtype=None, generator=None:
                        torch.tensor(theirs.integers(0, high, size), dtype=torch.int64))
    monkeypatch.setattr(loom_sampler, "rng", lambda generator=None: mine)


def vae(lib, device, argv, initial=None):
    """vae/main.py with `argv`: its set-up (the model and optimizer built), then, where `initial`
    is given, PyTorch's initial weights copied in (the optimizer holds the same parameters), then
    its loss, train/test and __main__ block."""
    tv = Torchvision(lib)
    randn, randn_like = numpy_draws(lib, 5)
    script_torch = proxy(lib, randn=randn, randn_like=randn_like, accelerator=accelerator_of(lib, device))
    ns = namespace_of(script_torch, argparse=argparse, datasets=tv.datasets, transforms=tv.transforms,
                      save_image=tv.utils.save_image, __name__="__main__")
    argv_before = sys.argv
    sys.argv = ["main.py"] + argv
    try:
        run(src.VAE_SETUP, ns, "vae/main.py")
        ns["initial"] = {k: v.detach().clone() for k, v in ns["model"].state_dict().items()}
        if initial is not None:
            ns["model"].load_state_dict({k: lib.tensor(v.numpy()) for k, v in initial.items()})
        run(src.VAE_TRAIN, ns, "vae/main.py")
    finally:
        sys.argv = argv_before
    ns["saved"] = tv.saved
    return ns


def proxy(module, **replaced):
    p = types.SimpleNamespace(**{n: getattr(module, n) for n in dir(module) if not n.startswith("__")})
    p.__dict__.update(replaced)
    return p


def epoch_losses(text):
    return [float(line.split("Average loss: ")[1]) for line in text.splitlines() if "Average loss" in line]


VAE_ARGV = ["--epochs", "2", "--batch-size", "8", "--log-interval", "1"]


@pytest.mark.parametrize("device", DEVICES)
def test_vae(device, same_shuffle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    theirs = vae(torch, "cpu", VAE_ARGV)
    their_out = capsys.readouterr().out
    mine = vae(loom, device, VAE_ARGV, initial=theirs["initial"])
    out = capsys.readouterr().out
    assert f"Using device: {'cpu' if device == 'cpu' else 'lazy'}" in out
    assert all(p.device.type == device for p in mine["model"].parameters())
    np.testing.assert_allclose(epoch_losses(out), epoch_losses(their_out), rtol=1e-4)
    test_losses = [float(line.split(": ")[1]) for line in out.splitlines() if "Test set loss" in line]
    their_test = [float(line.split(": ")[1]) for line in their_out.splitlines() if "Test set loss" in line]
    np.testing.assert_allclose(test_losses, their_test, rtol=1e-4)
    # atol: Adam's step is lr * m / sqrt(v), as large for a gradient of 1e-9 as for 1: where a
    # summation order flips such a gradient's sign a weight moves by up to 2 lr (one in 3e5 here).
    assert_states_close(state_of(mine["model"]), state_of(theirs["model"]), 1e-4, atol=5e-3)
    assert mine["saved"] == theirs["saved"]  # reconstructions and samples, per epoch


def dcgan(lib, device, argv, outf):
    tv = Torchvision(lib, images=4)
    randn, _ = numpy_draws(lib, 9)
    script_torch = proxy(lib, randn=randn, accelerator=accelerator_of(lib, device))
    ns = namespace_of(script_torch, argparse=argparse, random=__import__("random"), cudnn=lib.backends.cudnn,
                      dset=tv.datasets, transforms=tv.transforms, vutils=tv.utils)
    argv_before = sys.argv
    sys.argv = ["main.py"] + argv + ["--outf", str(outf)]
    try:
        run(src.DCGAN, ns, "dcgan/main.py")
    finally:
        sys.argv = argv_before
    ns["saved"] = tv.saved
    return ns


def dcgan_losses(text):
    return [[float(v) for v in line.split("Loss_D: ")[1].replace("Loss_G:", "").replace("D(x):", "")
             .replace("D(G(z)):", "").replace("/", "").split()] for line in text.splitlines() if "Loss_D" in line]


@pytest.mark.parametrize("device", DEVICES)
def test_dcgan(device, capsys, tmp_path):
    """dcgan/main.py on its `fake` dataset (FakeData of 4 images: one batch, so the shuffle does not
    matter), tiny widths; both runs start from PyTorch's initial weights through the script's own
    --netG / --netD (torch.load of a PyTorch checkpoint); 2 epochs of the alternating D/G updates."""
    argv = ["--dataset", "fake", "--batchSize", "4", "--nz", "8", "--ngf", "4", "--ndf", "4", "--niter", "2",
            "--manualSeed", "3", "--workers", "0"]
    theirs = dcgan(torch, "cpu", argv, tmp_path / "torch")
    torch.save(theirs["netG"].state_dict(), tmp_path / "netG0.pth")
    torch.save(theirs["netD"].state_dict(), tmp_path / "netD0.pth")
    # The reference itself, again from those weights (its own run drew them).
    argv += ["--netG", str(tmp_path / "netG0.pth"), "--netD", str(tmp_path / "netD0.pth")]
    capsys.readouterr()
    theirs = dcgan(torch, "cpu", argv, tmp_path / "torch")
    their_out = capsys.readouterr().out
    mine = dcgan(loom, device, ["--accel"] + argv if device != "cpu" else argv, tmp_path / device)
    out = capsys.readouterr().out
    assert all(p.device.type == device for p in mine["netG"].parameters())
    np.testing.assert_allclose(dcgan_losses(out), dcgan_losses(their_out), rtol=2e-4, atol=1e-5)
    assert_states_close(state_of(mine["netG"]), state_of(theirs["netG"]), 2e-4)
    assert_states_close(state_of(mine["netD"]), state_of(theirs["netD"]), 2e-4)
    assert mine["saved"] == theirs["saved"]
    # The checkpoints loom wrote each epoch are PyTorch's to load.
    ckpt = torch.load(tmp_path / device / "netG_epoch_1.pth")
    assert set(ckpt) == set(theirs["netG"].state_dict())


# ---- pytorch/examples: word_language_model ----

# The models and the loop train in test_ported_examples; here the whole script, once with
# RNNModel (its safe_globals list) and once with TransformerModel (its own list).
WLM_MODELS = ["LSTM", "Transformer"]


def wlm_corpus(root, seed=0):
    """data/ as the script expects it (train.txt, valid.txt, test.txt): lines of words from a
    small vocabulary, drawn from a numpy generator."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(23)]
    root.mkdir(parents=True, exist_ok=True)
    for name, lines in (("train", 24), ("valid", 8), ("test", 8)):
        with open(root / f"{name}.txt", "w", encoding="utf8") as f:
            for _ in range(lines):
                f.write(" ".join(rng.choice(words, rng.integers(3, 9))) + "\n")


def module_of(name, source, lib, **names):
    """A real module named `name` holding `source` run with `torch` bound to lib: what
    `import data` / `from model import ...` find, and where pickle finds RNNModel again."""
    m = types.ModuleType(name)
    m.__dict__.update(namespace_of(lib, **names))
    exec(compile(source, f"{name}.py", "exec"), m.__dict__)
    return m


def word_language_model(lib, device, argv, root, monkeypatch, initial=None):
    """main.py with `argv`, its data.py and model.py as the modules `data` and `model`. After
    the model is built the harness copies PyTorch's initial weights in (where `initial` is given)
    and sets every Dropout's p (and MultiheadAttention's dropout) to 0: nn.Transformer's layers
    keep dropout=0.1 whatever --dropout says, and masks are each library's own draws. PyTorch
    1.13, the reference, has neither torch.accelerator nor torch.serialization.safe_globals (it
    loads whole modules by default): its run gets a no-op safe_globals."""
    from io import open as io_open
    data = module_of("data", src.WLM_DATA, lib, open=io_open)
    model_module = module_of("model", src.WLM_MODEL, lib)
    monkeypatch.setitem(sys.modules, "data", data)
    monkeypatch.setitem(sys.modules, "model", model_module)
    replaced = {"accelerator": accelerator_of(lib, device)}
    if lib is torch:
        replaced["serialization"] = proxy(torch.serialization, safe_globals=lambda names: contextlib.nullcontext())
    script_torch = proxy(lib, **replaced)
    ns = namespace_of(script_torch, argparse=argparse, time=__import__("time"), data=data,
                      PositionalEncoding=model_module.PositionalEncoding, RNNModel=model_module.RNNModel,
                      TransformerModel=model_module.TransformerModel)
    root.mkdir(exist_ok=True)
    monkeypatch.setattr(sys, "argv", ["main.py", "--data", str(root.parent / "data"), "--save", str(root / "model.pt")]
                        + argv)
    run(src.WLM_SETUP, ns, "main.py")
    model = ns["model"]
    ns["initial"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if initial is not None:
        model.load_state_dict({k: lib.tensor(v.numpy()) for k, v in initial.items()})
    for m in model.modules():
        if isinstance(m, lib.nn.Dropout):
            m.p = 0.0
        elif isinstance(m, lib.nn.MultiheadAttention):
            m.dropout = 0.0  # attention dropout, a float attribute
    run(src.WLM_TRAIN, ns, "main.py")
    return ns


def wlm_numbers(text):
    """The losses main.py prints: every epoch's validation loss and the final test loss."""
    found = [float(line.split("valid loss")[1].split("|")[0]) for line in text.splitlines() if "valid loss" in line]
    return found + [float(line.split("test loss")[1].split("|")[0]) for line in text.splitlines()
                    if "test loss" in line]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", WLM_MODELS)
def test_word_language_model(model, device, tmp_path, monkeypatch, capsys):
    """Each of main.py's models trained 2 epochs (SGD by hand through p.data, clip_grad_norm_),
    the best model saved whole with torch.save(model) and loaded back under
    torch.serialization.safe_globals (weights_only), then tested: every printed loss as PyTorch's,
    and the final (reloaded) model's weights as PyTorch's."""
    wlm_corpus(tmp_path / "data")
    argv = ["--model", model, "--emsize", "16", "--nhid", "16", "--nlayers", "2", "--lr", "5", "--epochs", "2",
            "--batch_size", "4", "--bptt", "6", "--dropout", "0", "--log-interval", "3"]
    theirs = word_language_model(torch, "cpu", argv, tmp_path / "torch", monkeypatch)
    their_out = capsys.readouterr().out
    mine = word_language_model(loom, device, argv + (["--accel"] if device != "cpu" else []), tmp_path / device,
                               monkeypatch, initial=theirs["initial"])
    out = capsys.readouterr().out
    assert f"Using device: {device}" in out.replace("lazy:cpu", "lazy")
    assert out.count("end of epoch") == 2 and "| epoch   1 |     3/" in out
    np.testing.assert_allclose(wlm_numbers(out), wlm_numbers(their_out), atol=0.0051)  # printed to 2 places
    final = mine["model"]  # the model loaded back from main.py's checkpoint
    assert type(final).__name__ == ("TransformerModel" if model == "Transformer" else "RNNModel")
    assert_states_close(state_of(final), state_of(theirs["model"]), 2e-4)


# ---- karpathy/minGPT ----

def mingpt_modules(lib, monkeypatch):
    """The package mingpt (utils, model, trainer) as real modules, `torch` bound to lib."""
    import collections
    import json
    import random
    from ast import literal_eval
    package = types.ModuleType("mingpt")
    package.__path__ = []
    utils = module_of("mingpt.utils", src.MINGPT_UTILS, lib, json=json, random=random, literal_eval=literal_eval)
    model = module_of("mingpt.model", src.MINGPT_MODEL, lib, CN=utils.CfgNode)
    trainer = module_of("mingpt.trainer", src.MINGPT_TRAINER, lib, time=__import__("time"),
                        defaultdict=collections.defaultdict, DataLoader=lib.utils.data.DataLoader, CN=utils.CfgNode)
    for name, m in (("mingpt", package), ("mingpt.utils", utils), ("mingpt.model", model), ("mingpt.trainer", trainer)):
        monkeypatch.setitem(sys.modules, name, m)
        if "." in name:
            setattr(package, name.split(".")[1], m)
    return utils, model, trainer


def mingpt_adder(lib, argv, monkeypatch, initial=None):
    """projects/adder/adder.py's __main__ with `argv` (its CfgNode command-line overrides).
    AdditionDataset's split is torch.randperm with a seeded torch.Generator: both libraries get
    one numpy permutation instead (their generators differ). The GPT it builds is handed
    PyTorch's initial weights (`initial`) or records them."""
    import json
    utils, model_module, trainer_module = mingpt_modules(lib, monkeypatch)
    made = {}

    class GPT(model_module.GPT):
        def __init__(self, config):
            super().__init__(config)
            if initial is None:
                made["initial"] = {k: v.detach().clone() for k, v in self.state_dict().items()}
            else:
                self.load_state_dict({k: lib.tensor(v.numpy()) for k, v in initial.items()})
            made["model"] = self

    split = np.random.default_rng(1337)
    script_torch = proxy(lib, randperm=lambda n, generator=None: lib.tensor(split.permutation(n)))
    ns = namespace_of(script_torch, json=json, Dataset=lib.utils.data.Dataset, DataLoader=lib.utils.data.DataLoader,
                      GPT=GPT, Trainer=trainer_module.Trainer, set_seed=utils.set_seed,
                      setup_logging=utils.setup_logging, CN=utils.CfgNode)
    run(src.MINGPT_ADDER, ns, "adder.py")
    monkeypatch.setattr(sys, "argv", ["adder.py"] + argv)
    run(src.MINGPT_ADDER_MAIN, ns, "adder.py")
    ns.update(made)
    return ns


def adder_report(text):
    """What adder.py prints of its run: the train losses and the train/test scores."""
    keep = ("train loss", "final score", "GPT claims", "saving model")
    return [line.split("; ")[-1] for line in text.splitlines() if any(k in line for k in keep)]


@pytest.mark.parametrize("device", DEVICES)
def test_mingpt_adder(device, tmp_path, monkeypatch, capsys, same_shuffle):
    """minGPT's adder: GPT.configure_optimizers' decay / no-decay groups (named_modules x
    named_parameters, isinstance against torch.nn.Linear / LayerNorm / Embedding), AdamW, the
    Trainer's infinite RandomSampler(replacement=True, num_samples=1e10) loader, cross_entropy
    with ignore_index=-1, the iteration-0 evaluation (GPT.generate greedy through topk, flip,
    per-element prints of tensors) and its checkpoint, 11 iterations on 1-digit sums."""
    argv = ["--data.ndigit=1", "--model.model_type=gpt-nano", "--model.embd_pdrop=0.0", "--model.resid_pdrop=0.0",
            "--model.attn_pdrop=0.0", "--trainer.max_iters=11", "--trainer.batch_size=16", "--trainer.num_workers=0"]
    monkeypatch.chdir(tmp_path)  # work_dir relative: merge_from_args' literal_eval takes no path
    theirs = mingpt_adder(torch, argv + ["--system.work_dir=torch", "--trainer.device=cpu"], monkeypatch)
    their_out = capsys.readouterr().out
    mine = mingpt_adder(loom, argv + [f"--system.work_dir={device}", f"--trainer.device={device}"], monkeypatch,
                        initial=theirs["initial"])
    out = capsys.readouterr().out
    assert f"running on device {device}" in out
    report = adder_report(out)
    assert len([line for line in report if "train loss" in line]) == 2 and "test final score" in out
    assert report == adder_report(their_out)
    model = mine["model"]
    assert all(p.device.type == device for p in model.parameters())
    groups = mine["trainer"].optimizer.param_groups
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    assert [len(g["params"]) for g in groups] == [len(g["params"]) for g in theirs["trainer"].optimizer.param_groups]
    assert_states_close(state_of(model), state_of(theirs["model"]), 2e-4)
    # The checkpoint adder.py saved at its first evaluation is one PyTorch loads.
    assert set(torch.load(tmp_path / device / "model.pt")) == set(theirs["initial"])


# ---- pytorch/examples: language_translation ----

LT_SPECIALS = {"<unk>": 0, "<pad>": 1, "<bos>": 2, "<eos>": 3}


def lt_get_data(lib, seed=0):
    """get_data's stand-in (the upstream one downloads Multi30k through torchtext): sentence pairs
    of a small vocabulary (the target a fixed word-by-word mapping of the source, reversed), with
    upstream's special symbols, tokenized, wrapped in <bos>/<eos> and padded by
    pad_sequence in a DataLoader's collate_fn, as upstream's pipeline does."""
    rng = np.random.default_rng(seed)
    words = [f"s{i}" for i in range(12)]
    vocab = {w: i + len(LT_SPECIALS) for i, w in enumerate(words)}
    pairs = []
    for _ in range(24):
        src = list(rng.choice(words, rng.integers(2, 7)))
        pairs.append((" ".join(src), " ".join(f"s{(int(w[1:]) * 5) % 12}" for w in reversed(src))))

    def transform(text):
        ids = [vocab[w] for w in text.split()]
        return lib.cat((lib.tensor([LT_SPECIALS["<bos>"]]), lib.tensor(ids), lib.tensor([LT_SPECIALS["<eos>"]])))

    def collate(batch):
        src = lib.nn.utils.rnn.pad_sequence([transform(s) for s, _ in batch], padding_value=LT_SPECIALS["<pad>"])
        tgt = lib.nn.utils.rnn.pad_sequence([transform(t) for _, t in batch], padding_value=LT_SPECIALS["<pad>"])
        return src, tgt

    def get_data(opts):
        loader = lib.utils.data.DataLoader
        train = loader(pairs[:16], batch_size=opts.batch, collate_fn=collate)
        valid = loader(pairs[16:], batch_size=opts.batch, collate_fn=collate)
        size = len(vocab) + len(LT_SPECIALS)
        return train, valid, range(size), range(size), transform, transform, LT_SPECIALS
    return get_data, transform, pairs


def language_translation(lib, device, logging_dir, initial=None):
    """main.py's main(opts) for 2 epochs (its __main__ block only parses the options and picks
    DEVICE: "cuda" for --backend gpu; the harness sets DEVICE to the device under test), then
    greedy_decode of a training sentence with the trained model. The Translator main() builds is
    handed PyTorch's initial weights (or records them)."""
    get_data, transform, pairs = lt_get_data(lib)
    model_ns = run(src.LT_MODEL, namespace_of(lib), "src/model.py")
    masks = run(src.LT_MASKS, namespace_of(lib), "src/data.py")
    made = {}

    class Translator(model_ns["Translator"]):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if initial is None:
                made["initial"] = {k: v.detach().clone() for k, v in self.state_dict().items()}
            else:
                self.load_state_dict({k: lib.tensor(v.numpy()) for k, v in initial.items()})
            made["model"] = self

    ns = namespace_of(lib, time=__import__("time").time, logging=logging, tqdm=lambda it, **kw: it,
                      Translator=Translator, get_data=get_data, create_mask=masks["create_mask"],
                      generate_square_subsequent_mask=masks["generate_square_subsequent_mask"])
    run(src.LT_MAIN, ns, "main.py")
    ns["DEVICE"] = lib.device(device)
    opts = argparse.Namespace(src="de", tgt="en", epochs=2, lr=1e-3, batch=8, attn_heads=2, enc_layers=2,
                              dec_layers=2, embed_size=16, dim_feedforward=32, dropout=0.0,
                              logging_dir=str(logging_dir) + "/", dry_run=False)
    handlers = list(logging.getLogger().handlers)
    try:
        ns["main"](opts)
    finally:
        for h in logging.getLogger().handlers[len(handlers):]:
            logging.getLogger().removeHandler(h)  # main() adds a console handler per call
    model = made["model"]
    model.eval()
    src_tokens = transform(pairs[0][0]).view(-1, 1)
    n = src_tokens.shape[0]
    src_mask = (lib.zeros(n, n)).type(lib.bool)
    with lib.no_grad():
        decoded = ns["greedy_decode"](model, src_tokens, src_mask, max_len=n + 5,
                                      start_symbol=LT_SPECIALS["<bos>"], end_symbol=LT_SPECIALS["<eos>"])
    made["decoded"] = decoded.flatten().tolist()
    return made


def assert_attention_states_close(mine, theirs):
    """assert_states_close, but the key third of each in_proj_bias loosely: softmax ignores a
    constant added to every score of a row, so that bias's exact gradient is 0 and what is computed
    is rounding noise (1e-9), which Adam scales to steps of lr either way in both libraries."""
    loose = {}
    for k in theirs:
        if k.endswith("in_proj_bias"):
            third = len(theirs[k]) // 3
            loose[k] = (mine[k][third:2 * third], theirs[k][third:2 * third])
            mine = {**mine, k: np.delete(mine[k], np.s_[third:2 * third])}
            theirs = {**theirs, k: np.delete(theirs[k], np.s_[third:2 * third])}
    assert_states_close(mine, theirs, 2e-4)
    for k, (a, b) in loose.items():
        np.testing.assert_allclose(a, b, atol=0.01, err_msg=k)  # 4 Adam steps of lr 1e-3 apart at most


@pytest.mark.parametrize("device", DEVICES)
def test_language_translation(device, tmp_path):
    """nn.Transformer as encoder-decoder: bool src_mask, float (-inf) causal tgt_mask, bool key
    padding masks of the padded batches, CrossEntropyLoss(ignore_index=<pad>), Adam with
    eps=1e-9; main() saves best.pt / last.pt each epoch; greedy_decode grows the target one token
    at a time through model.encode / model.decode (item() of each argmax)."""
    theirs = language_translation(torch, "cpu", tmp_path / "torch")
    mine = language_translation(loom, device, tmp_path / device, initial=theirs["initial"])
    model = mine["model"]
    assert all(p.device.type == device for p in model.parameters())
    assert_attention_states_close(state_of(model), state_of(theirs["model"]))
    # The checkpoints main() wrote through loom are PyTorch's, and hold what PyTorch's run holds.
    for name in ("best.pt", "last.pt"):
        mine_ckpt = torch.load(tmp_path / device / name)
        theirs_ckpt = torch.load(tmp_path / "torch" / name)
        assert_attention_states_close({k: v.double().numpy() for k, v in mine_ckpt.items()},
                                      {k: v.double().numpy() for k, v in theirs_ckpt.items()})
    assert mine["decoded"] == theirs["decoded"] and mine["decoded"][0] == LT_SPECIALS["<bos>"]
