"""Programs of pytorch/examples ported as a user ports them (_ported_examples.py: their code verbatim,
`torch` bound to loom): vae, dcgan, super_resolution, fast_neural_style's TransformerNet,
mnist_rnn, gcn, gat and word_language_model (its LSTM, GRU, RNN and Transformer models). Each trains a few steps on synthetic data of its dataset's shapes, on `cpu` and
`lazy`, from PyTorch's initial weights (copied), and its losses are PyTorch's. Randomness inside
the programs (the VAE's noise, dropout) cannot be PyTorch's draws: the comparisons give both the
same noise, or turn dropout off; the runs with loom's own randomness compare cpu with lazy."""

import time

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
