"""Programs of pytorch/examples ported as a user ports them (_ported_examples.py: their code verbatim,
`torch` bound to loom): vae, dcgan, super_resolution, fast_neural_style's TransformerNet,
mnist_rnn, gcn, gat and word_language_model (its LSTM, GRU, RNN and Transformer models). Each trains a few steps on synthetic data of its dataset's shapes, on `cpu` and
`lazy`, from PyTorch's initial weights (copied), and its losses are PyTorch's. Randomness inside
the programs (the VAE's noise, dropout) cannot be PyTorch's draws: the comparisons give both the
same noise, or turn dropout off; the runs with loom's own randomness compare cpu with lazy."""

import copy
import math
import time
import types

import numpy as np
import pytest

import loom
import _ported_examples as examples

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "lazy"]


def program(lib, source, **names):
    """The namespace of `source` executed with lib as `torch` (and its nn, F, init, optim)."""
    namespace = {"torch": lib, "nn": lib.nn, "F": lib.nn.functional, "init": lib.nn.init, "optim": lib.optim,
                 "np": np, "time": time, "device": "cpu", **names}
    exec(compile(source, "example", "exec"), namespace)
    return namespace


def copy_weights(theirs, mine, device):
    """mine gets theirs' parameters and buffers (PyTorch's initial weights)."""
    state = {k: loom.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    mine.load_state_dict(state)
    return mine.to(device)


def as_lib(lib, array, device=None):
    t = lib.tensor(array)
    return t.to(device) if device else t


def assert_close(mine, theirs, rtol):
    np.testing.assert_allclose(np.array(mine), np.array(theirs), rtol=rtol, atol=rtol)


# ---- vae ----

def vae_losses(lib, device, data, noises, reference=None):
    """Steps of vae/main.py's train() loop; randn_like (the reparameterization's noise) returns
    the given noises in turn, so loom and PyTorch draw the same."""
    queue = list(noises)
    proxy = types.SimpleNamespace(**{n: getattr(lib, n) for n in dir(lib) if not n.startswith("__")})
    proxy.randn_like = lambda t: as_lib(lib, queue.pop(0), t.device)
    ns = program(proxy, examples.VAE)
    ns["nn"], ns["F"] = lib.nn, lib.nn.functional
    lib.manual_seed(1)
    model = ns["VAE"]()
    initial = copy.deepcopy(model)
    if reference is not None:
        model = copy_weights(reference, model, device)
    optimizer = lib.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    model.train()
    for batch in data:
        batch = as_lib(lib, batch, device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(batch)
        loss = ns["loss_function"](recon_batch, batch, mu, logvar)
        loss.backward()
        losses.append(loss.item())
        optimizer.step()
    return losses, initial


@pytest.mark.parametrize("device", DEVICES)
def test_vae(device):
    rng = np.random.default_rng(0)
    data = [rng.random((16, 1, 28, 28), dtype=np.float32) for _ in range(3)]
    noises = [rng.standard_normal((16, 20)).astype(np.float32) for _ in range(3)]
    theirs, initial = vae_losses(torch, None, data, noises)
    mine, _ = vae_losses(loom, device, data, noises, reference=initial)
    assert_close(mine, theirs, 1e-4)
    assert theirs[-1] < theirs[0]


# ---- dcgan ----

def dcgan_losses(lib, device, nets, images, noises):
    """dcgan/main.py's training loop body (D on real, D on fake, G), for each batch."""
    netG, netD = nets
    criterion = lib.nn.BCELoss()
    optimizerD = lib.optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
    optimizerG = lib.optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))
    real_label, fake_label = 1, 0
    out = []
    for real, z in zip(images, noises):
        netD.zero_grad()
        real_cpu = as_lib(lib, real, device)
        batch_size = real_cpu.size(0)
        label = lib.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()
        noise = as_lib(lib, z, device)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()
        out.append((errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_dcgan(device):
    sizes = dict(nz=16, ngf=8, ndf=8, nc=3, ngpu=1)  # the script's --nz/--ngf/--ndf options, smaller
    rng = np.random.default_rng(1)
    images = [rng.uniform(-1, 1, (4, 3, 64, 64)).astype(np.float32) for _ in range(2)]
    noises = [rng.standard_normal((4, sizes["nz"], 1, 1)).astype(np.float32) for _ in range(2)]
    torch.manual_seed(0)
    t = program(torch, examples.DCGAN, **sizes)
    theirs_nets = [t["Generator"](1), t["Discriminator"](1)]
    for net in theirs_nets:
        net.apply(t["weights_init"])
    m = program(loom, examples.DCGAN, **sizes)
    mine_nets = [m["Generator"](1), m["Discriminator"](1)]
    for net in mine_nets:
        net.apply(m["weights_init"])  # runs (loom's draws), then PyTorch's weights replace them
    mine_nets = [copy_weights(a, b, device) for a, b in zip(theirs_nets, mine_nets)]
    theirs = dcgan_losses(torch, None, theirs_nets, images, noises)
    mine = dcgan_losses(loom, device, mine_nets, images, noises)
    assert_close(mine, theirs, 2e-4)


# ---- super_resolution ----

@pytest.mark.parametrize("device", DEVICES)
def test_super_resolution(device):
    rng = np.random.default_rng(2)
    batches = [(rng.random((4, 1, 16, 16), dtype=np.float32), rng.random((4, 1, 48, 48), dtype=np.float32))
               for _ in range(3)]

    def losses(lib, model, device):
        criterion = lib.nn.MSELoss()
        optimizer = lib.optim.Adam(model.parameters(), lr=0.01)
        out = []
        for x, y in batches:  # super_resolution/main.py's train()
            input, target = as_lib(lib, x, device), as_lib(lib, y, device)
            optimizer.zero_grad()
            loss = criterion(model(input), target)
            out.append(loss.item())
            loss.backward()
            optimizer.step()
        return out

    torch.manual_seed(0)
    theirs_model = program(torch, examples.SUPER_RESOLUTION)["Net"](upscale_factor=3)
    mine_model = copy_weights(theirs_model, program(loom, examples.SUPER_RESOLUTION)["Net"](upscale_factor=3),
                              device)
    # loom's orthogonal_ init (the model's own) is orthogonal as PyTorch's
    w = program(loom, examples.SUPER_RESOLUTION)["Net"](3).conv2.weight.detach().reshape(64, -1).numpy()
    np.testing.assert_allclose(w @ w.T, 2 * np.eye(64), atol=1e-4)  # gain('relu')^2 = 2
    assert_close(losses(loom, mine_model, device), losses(torch, theirs_model, None), 1e-4)


# ---- fast_neural_style ----

@pytest.mark.parametrize("device", DEVICES)
def test_fast_neural_style_transformer_net(device):
    # neural_style.py's training step with its content loss on pixels (its VGG16 features come
    # from torchvision, which loom has not): InstanceNorm2d, ReflectionPad2d, nearest upsampling.
    rng = np.random.default_rng(3)
    images = [rng.random((2, 3, 32, 32), dtype=np.float32) * 255 for _ in range(2)]

    def losses(lib, model, device):
        optimizer = lib.optim.Adam(model.parameters(), 1e-3)
        mse_loss = lib.nn.MSELoss()
        out = []
        for x in images:
            optimizer.zero_grad()
            x = as_lib(lib, x, device)
            y = model(x)
            total_loss = 1e5 * mse_loss(y, x) / 255.0 ** 2
            total_loss.backward()
            optimizer.step()
            out.append(total_loss.item())
        return out

    torch.manual_seed(0)
    theirs_model = program(torch, examples.TRANSFORMER_NET)["TransformerNet"]()
    mine_model = copy_weights(theirs_model, program(loom, examples.TRANSFORMER_NET)["TransformerNet"](), device)
    assert_close(losses(loom, mine_model, device), losses(torch, theirs_model, None), 2e-4)


# ---- mnist_rnn ----

def mnist_rnn_losses(lib, model, device, batches, capsys):
    """mnist_rnn/main.py's train() for one epoch, reading the losses it prints."""
    ns = program(lib, examples.MNIST_RNN)
    optimizer = lib.optim.Adadelta(model.parameters(), lr=0.1)
    scheduler = lib.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    args = types.SimpleNamespace(log_interval=1, dry_run=False)
    data = lib.utils.data.TensorDataset(as_lib(lib, np.concatenate([x for x, _ in batches])),
                                        as_lib(lib, np.concatenate([y for _, y in batches])))
    loader = lib.utils.data.DataLoader(data, batch_size=len(batches[0][1]), shuffle=False)
    capsys.readouterr()
    ns["train"](args, model, lib.device(device) if device else "cpu", loader, optimizer, 1)
    scheduler.step()
    text = capsys.readouterr().out
    return [float(line.rsplit("Loss: ", 1)[1]) for line in text.splitlines() if "Loss: " in line]


@pytest.mark.parametrize("device", DEVICES)
def test_mnist_rnn(device, capsys):
    rng = np.random.default_rng(4)
    batches = [(rng.random((8, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, 8)) for _ in range(3)]
    torch.manual_seed(0)
    theirs_model = program(torch, examples.MNIST_RNN)["Net"]()
    mine_model = copy_weights(theirs_model, program(loom, examples.MNIST_RNN)["Net"](), device)
    for model in (theirs_model, mine_model):  # dropout's masks are each library's own draws
        model.dropout1.p = model.dropout2.p = 0.0
    mine = mnist_rnn_losses(loom, mine_model, device, batches, capsys)
    theirs = mnist_rnn_losses(torch, theirs_model, None, batches, capsys)
    assert len(mine) == 3
    assert_close(mine, theirs, 1e-5)  # printed with 6 decimals


def test_mnist_rnn_with_dropout_is_the_same_on_cpu_and_lazy(capsys):
    rng = np.random.default_rng(5)
    batches = [(rng.random((8, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, 8)) for _ in range(2)]
    runs = []
    for device in DEVICES:
        loom.manual_seed(7)
        model = program(loom, examples.MNIST_RNN)["Net"]().to(device)
        runs.append(mnist_rnn_losses(loom, model, device, batches, capsys))
    assert_close(runs[1], runs[0], 1e-5)


# ---- gcn ----

@pytest.mark.parametrize("device", DEVICES)
def test_gcn(device, capsys):
    # gcn/main.py on a random graph of Cora's kind (row-normalized features, a renormalized
    # adjacency with self-loops), dense where the script makes them sparse (spmm takes both)
    rng = np.random.default_rng(6)
    nodes, features, classes = 40, 12, 3
    x = rng.random((nodes, features)).astype(np.float32)
    x /= x.sum(1, keepdims=True)
    a = (rng.random((nodes, nodes)) < 0.1).astype(np.float32)
    a = np.maximum(a, a.T) + np.eye(nodes, dtype=np.float32)
    d = 1 / np.sqrt(a.sum(1))
    adj = (d[:, None] * a * d[None, :]).astype(np.float32)
    labels = rng.integers(0, classes, nodes)
    mask_train, mask_val = np.arange(nodes) < 30, np.arange(nodes) >= 30

    def losses(lib, model, device):
        ns = program(lib, examples.GCN)
        optimizer = lib.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
        criterion = lib.nn.NLLLoss()
        inputs = (as_lib(lib, x, device), as_lib(lib, adj, device))
        target = as_lib(lib, labels, device)
        masks = as_lib(lib, mask_train, device), as_lib(lib, mask_val, device)
        out = []
        for epoch in range(1, 4):
            ns["train_iter"](epoch, model, optimizer, criterion, inputs, target, *masks, print_every=10)
            out.append(ns["test"](model, criterion, inputs, target, masks[0]))
        return out

    torch.manual_seed(0)
    theirs_model = program(torch, examples.GCN)["GCN"](features, 16, classes, use_bias=True, dropout_p=0.0)
    mine_model = copy_weights(theirs_model, program(loom, examples.GCN)["GCN"](features, 16, classes, use_bias=True,
                                                                               dropout_p=0.0), device)
    assert_close(losses(loom, mine_model, device), losses(torch, theirs_model, None), 1e-5)


# ---- gat ----

def gat_graph(rng, nodes, features, classes):
    """A random graph of Cora's kind: row-normalized features, an adjacency with self-loops."""
    x = rng.random((nodes, features)).astype(np.float32)
    x /= x.sum(1, keepdims=True)
    a = (rng.random((nodes, nodes)) < 0.15).astype(np.float32)
    adj = np.maximum(a, a.T) + np.eye(nodes, dtype=np.float32)
    labels = rng.integers(0, classes, nodes)
    return x, adj, labels


@pytest.mark.parametrize("concat", [False, True], ids=["mean-heads", "concat-heads"])
@pytest.mark.parametrize("device", DEVICES)
def test_gat(device, concat, capsys):
    # gat/main.py's training loop (train_iter, test) on a random graph; the split is index tensors
    # (a permutation), as the script makes it. Dropout off, so the losses are PyTorch's.
    rng = np.random.default_rng(11)
    nodes, features, classes = 36, 10, 3
    x, adj, labels = gat_graph(rng, nodes, features, classes)
    perm = rng.permutation(nodes)

    def losses(lib, model, device):
        ns = program(lib, examples.GAT)
        optimizer = lib.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
        criterion = lib.nn.NLLLoss()
        inputs = (as_lib(lib, x, device), as_lib(lib, adj, device))
        target = as_lib(lib, labels, device)
        idx = as_lib(lib, perm, device)
        idx_test, idx_val, idx_train = idx[:8], idx[8:16], idx[16:]
        out = []
        for epoch in range(1, 4):
            ns["train_iter"](epoch, model, optimizer, criterion, inputs, target, idx_train, idx_val, print_every=1)
            out.append(ns["test"](model, criterion, inputs, target, idx_test))
        return out

    def make(lib):
        return program(lib, examples.GAT)["GAT"](in_features=features, n_hidden=8, n_heads=2, num_classes=classes,
                                                   concat=concat, dropout=0.0, leaky_relu_slope=0.2)

    torch.manual_seed(0)
    theirs_model = make(torch)
    mine_model = copy_weights(theirs_model, make(loom), device)
    assert_close(losses(loom, mine_model, device), losses(torch, theirs_model, None), 1e-4)
    assert "loss_train" in capsys.readouterr().out


def test_gat_with_dropout_is_the_same_on_cpu_and_lazy(capsys):
    rng = np.random.default_rng(12)
    x, adj, labels = gat_graph(rng, 24, 8, 3)
    results = []
    for device in DEVICES:
        loom.manual_seed(5)
        ns = program(loom, examples.GAT)
        model = ns["GAT"](in_features=8, n_hidden=8, n_heads=2, num_classes=3, dropout=0.4).to(device)
        optimizer = loom.optim.Adam(model.parameters(), lr=0.005)
        inputs = (as_lib(loom, x, device), as_lib(loom, adj, device))
        target = as_lib(loom, labels, device)
        idx = loom.arange(24).to(device)
        for epoch in range(1, 3):
            ns["train_iter"](epoch, model, optimizer, loom.nn.NLLLoss(), inputs, target, idx[8:], idx[:8], 5)
        results.append(ns["test"](model, loom.nn.NLLLoss(), inputs, target, idx[:8]))
    assert_close(results[0], results[1], 1e-5)


# ---- word_language_model ----

def word_language_model_losses(lib, model_type, model, device, tokens, capsys):
    """One epoch of word_language_model/main.py's train() (plain SGD through p.data.add_, gradient
    clipping), then evaluate() on held-out tokens: the validation loss after each of two epochs."""
    ns = program(lib, examples.WORD_LANGUAGE_MODEL, device=device or "cpu", math=math)
    ntokens = int(tokens.max()) + 1
    args = types.SimpleNamespace(bptt=5, model=model_type, batch_size=4, use_optimizer=False, clip=0.25,
                                 log_interval=3, dry_run=False)
    corpus = types.SimpleNamespace(dictionary=list(range(ntokens)))
    data = lib.tensor(tokens)
    train_data = ns["batchify"](data[:120], args.batch_size)
    val_data = ns["batchify"](data[120:], 2)
    ns.update(args=args, corpus=corpus, model=model, criterion=lib.nn.NLLLoss(), lr=2.0, train_data=train_data,
              eval_batch_size=2)
    out = []
    for epoch in range(1, 3):
        ns["epoch"] = epoch
        ns["train"]()
        out.append(ns["evaluate"](val_data))
    assert "| epoch   1 |" in capsys.readouterr().out
    return out


def without_dropout(model):
    """Every dropout of the model set to 0 (nn.Transformer's layers have their own, at 0.1)."""
    for m in model.modules():
        if type(m).__name__ == "Dropout":
            m.p = 0.0
        if type(m).__name__ == "MultiheadAttention":
            m.dropout = 0.0
    return model


@pytest.mark.parametrize("model_type", ["LSTM", "GRU", "RNN_TANH", "Transformer"])
@pytest.mark.parametrize("device", DEVICES)
def test_word_language_model(device, model_type, capsys):
    rng = np.random.default_rng(13)
    tokens = rng.integers(0, 20, 160)

    def make(lib):
        ns = program(lib, examples.WORD_LANGUAGE_MODEL, math=math)
        if model_type == "Transformer":
            return ns["TransformerModel"](20, 16, 2, 32, 2, dropout=0.0)
        return ns["RNNModel"](model_type, 20, 16, 16, 2, dropout=0.0, tie_weights=True)

    torch.manual_seed(0)
    theirs = without_dropout(make(torch))
    mine = without_dropout(copy_weights(theirs, make(loom), device))
    assert_close(word_language_model_losses(loom, model_type, mine, device, tokens, capsys),
                 word_language_model_losses(torch, model_type, theirs, None, tokens, capsys), 1e-4)
