"""Smaller programs written for these tests after well-known example projects' patterns: graph
networks on a dense adjacency (a graph convolution net through spmm, a multi-head graph attention
net with masked scores), the forward-forward algorithm (nn.Linear subclasses each with its own Adam,
kept in a plain list), a two-LSTMCell sine-wave predictor fit by LBFGS in float64 from a file holding
a pickled numpy array, and a polynomial fit by hand-written SGD that prints 0-dim tensors through
format(). Each runs on `cpu` and `lazy` from PyTorch's initial weights with the same random draws,
and ends where PyTorch 1.13 ends."""

import contextlib
import io
import itertools
import types

import numpy as np
import pytest

import loom
from _programs import DEVICES, Shim, assert_close, assert_same_state, load_from, tensor

torch = pytest.importorskip("torch")


# ---- graph networks ----

def graphs(torch):
    nn, F = torch.nn, torch.nn.functional

    class Convolution(nn.Module):
        """H' = A_hat H W (+ b), A_hat a normalized dense adjacency."""

        def __init__(self, n_in, n_out, bias=True):
            super().__init__()
            self.weight = nn.Parameter(torch.Tensor(n_in, n_out))  # uninitialized, then Xavier
            nn.init.xavier_normal_(self.weight)
            self.bias = None
            if bias:
                self.bias = nn.Parameter(torch.Tensor(n_out))
                nn.init.zeros_(self.bias)

        def forward(self, h, adj):
            out = torch.spmm(adj, torch.mm(h, self.weight))
            return out if self.bias is None else out + self.bias

    class ConvNet(nn.Module):
        def __init__(self, n_in, hidden, classes, p=0.0):
            super().__init__()
            self.first, self.second = Convolution(n_in, hidden), Convolution(hidden, classes)
            self.drop = nn.Dropout(p)

        def forward(self, h, adj):
            return F.log_softmax(self.second(self.drop(F.relu(self.first(h, adj))), adj), dim=1)

    class Attention(nn.Module):
        """Multi-head attention over each node's neighbours: scores from a learned vector on the
        pair's transformed features, non-edges masked to a huge negative, heads joined or averaged."""

        def __init__(self, n_in, n_out, heads, concat, p, slope):
            super().__init__()
            self.heads, self.concat, self.p = heads, concat, p
            self.per_head = n_out // heads if concat else n_out
            self.n_out = n_out
            self.W = nn.Parameter(torch.empty(size=(n_in, self.per_head * heads)))
            self.a = nn.Parameter(torch.empty(size=(heads, 2 * self.per_head, 1)))
            self.act = nn.LeakyReLU(slope)
            nn.init.xavier_normal_(self.W)
            nn.init.xavier_normal_(self.a)

        def forward(self, h, adj):
            n = h.shape[0]
            z = F.dropout(torch.mm(h, self.W), self.p, training=self.training)
            z = z.view(n, self.heads, self.per_head).permute(1, 0, 2)  # heads, nodes, features
            src = torch.matmul(z, self.a[:, :self.per_head, :])
            dst = torch.matmul(z, self.a[:, self.per_head:, :])
            scores = self.act(src + dst.mT)
            scores = torch.where(adj > 0, scores, -9e16 * torch.ones_like(scores))
            weights = F.dropout(F.softmax(scores, dim=-1), self.p, training=self.training)
            out = torch.matmul(weights, z)
            if self.concat:
                return out.permute(1, 0, 2).contiguous().view(n, self.n_out)
            return out.mean(dim=0)

    class AttentionNet(nn.Module):
        def __init__(self, n_in, hidden, heads, classes, concat=False, p=0.4, slope=0.2):
            super().__init__()
            self.first = Attention(n_in, hidden, heads, concat, p, slope)
            self.second = Attention(hidden, classes, 1, False, p, slope)

        def forward(self, h, adj):
            return F.log_softmax(self.second(F.elu(self.first(h, adj)), adj), dim=1)

    def score(model, inputs, labels, which):
        """Loss and accuracy on the nodes `which` picks (a boolean mask or an index tensor)."""
        model.eval()
        with torch.no_grad():
            out, want = model(*inputs)[which], labels[which]
            loss = F.nll_loss(out, want)
            accuracy = (out.argmax(dim=1) == want).float().sum() / len(want)
        return loss.item(), accuracy.item()

    def fit(model, inputs, labels, train, val, epochs, lr, decay):
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=decay)
        history = []
        for _ in range(epochs):
            model.train()
            opt.zero_grad()
            loss = F.nll_loss(model(*inputs)[train], labels[train])
            loss.backward()
            opt.step()
            history.append(score(model, inputs, labels, train) + score(model, inputs, labels, val))
        return history

    return types.SimpleNamespace(ConvNet=ConvNet, AttentionNet=AttentionNet, fit=fit)


def random_graph(rng, nodes, features, classes, density, normalize):
    x = rng.random((nodes, features)).astype(np.float32)
    x /= x.sum(1, keepdims=True)
    a = (rng.random((nodes, nodes)) < density).astype(np.float32)
    a = np.maximum(a, a.T) + np.eye(nodes, dtype=np.float32)
    if normalize:  # D^-1/2 (A + I) D^-1/2
        d = 1 / np.sqrt(a.sum(1))
        a = (d[:, None] * a * d[None, :]).astype(np.float32)
    return x, a, rng.integers(0, classes, nodes)


@pytest.mark.parametrize("device", DEVICES)
def test_graph_convolution_net(device):
    x, adj, labels = random_graph(np.random.default_rng(6), 40, 12, 3, 0.1, normalize=True)
    train, val = np.arange(40) < 30, np.arange(40) >= 30  # boolean node masks

    def run(lib, model, device):
        inputs = (tensor(lib, x, device), tensor(lib, adj, device))
        return graphs(lib).fit(model, inputs, tensor(lib, labels, device), tensor(lib, train, device),
                               tensor(lib, val, device), 3, 0.01, 5e-4)

    torch.manual_seed(0)
    theirs = graphs(torch).ConvNet(12, 16, 3)
    mine = load_from(theirs, graphs(loom).ConvNet(12, 16, 3), device)
    assert_close(run(loom, mine, device), run(torch, theirs, None), 1e-5)


@pytest.mark.parametrize("concat", [False, True], ids=["mean-heads", "concat-heads"])
@pytest.mark.parametrize("device", DEVICES)
def test_graph_attention_net(device, concat):
    rng = np.random.default_rng(11)
    x, adj, labels = random_graph(rng, 36, 10, 3, 0.15, normalize=False)
    order = rng.permutation(36)

    def run(lib, model, device):
        idx = tensor(lib, order, device)  # the split as index tensors (slices of a permutation)
        inputs = (tensor(lib, x, device), tensor(lib, adj, device))
        return graphs(lib).fit(model, inputs, tensor(lib, labels, device), idx[16:], idx[8:16], 3, 0.005, 5e-4)

    def make(lib):
        return graphs(lib).AttentionNet(10, 8, 2, 3, concat=concat, p=0.0)

    torch.manual_seed(0)
    theirs = make(torch)
    mine = load_from(theirs, make(loom), device)
    assert_close(run(loom, mine, device), run(torch, theirs, None), 1e-4)


def test_graph_attention_net_with_dropout_is_the_same_on_cpu_and_lazy():
    x, adj, labels = random_graph(np.random.default_rng(12), 24, 8, 3, 0.15, normalize=False)
    results = []
    for device in DEVICES:
        loom.manual_seed(5)
        model = graphs(loom).AttentionNet(8, 8, 2, 3, p=0.4).to(device)
        idx = loom.arange(24).to(device)
        inputs = (tensor(loom, x, device), tensor(loom, adj, device))
        results.append(graphs(loom).fit(model, inputs, tensor(loom, labels, device), idx[8:], idx[:8], 2, 0.005, 0.0))
    assert_close(results[0], results[1], 1e-5)


# ---- forward-forward ----

def forward_forward(torch, device, epochs=3, lr=0.03, threshold=2.0):
    nn = torch.nn

    class Local(nn.Linear):
        """A layer trained on its own: high goodness (mean squared activity) for positive data,
        low for negative; its optimizer is made before the layer moves to its device."""

        def __init__(self, n_in, n_out, bias=True, device=None, dtype=None):
            super().__init__(n_in, n_out, bias, device, dtype)
            self.act = nn.ReLU()
            self.opt = torch.optim.Adam(self.parameters(), lr=lr)

        def forward(self, x):
            unit = x / (x.norm(2, 1, keepdim=True) + 1e-4)
            return self.act(torch.mm(unit, self.weight.T) + self.bias.unsqueeze(0))

        def fit(self, pos, neg, log):
            for _ in range(epochs):
                good, bad = self(pos).pow(2).mean(1), self(neg).pow(2).mean(1)
                loss = torch.log1p(torch.exp(torch.cat([threshold - good, bad - threshold]))).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                log.append(loss.item())
            return self(pos).detach(), self(neg).detach()

    def with_label(x, y):
        """The first ten pixels replaced by a one-hot label at the image's maximum."""
        out = x.clone()
        out[:, :10] *= 0.0
        out[range(x.shape[0]), y] = x.max()
        return out

    def wrong_labels(y):
        wrong = y.clone()
        for i, label in enumerate(y):
            others = [c for c in range(10) if c != label.item()]
            wrong[i] = torch.tensor(others)[torch.randint(len(others), size=(1,))].item()
        return wrong.to(device)

    class Stack(nn.Module):
        def __init__(self, sizes):
            super().__init__()
            self.layers = [Local(a, b).to(device) for a, b in zip(sizes, sizes[1:])]  # a plain list

        def fit(self, pos, neg):
            log = []
            for layer in self.layers:
                pos, neg = layer.fit(pos, neg, log)
            return log

        def predict(self, x):
            per_label = []
            for label in range(10):
                h, goodness = with_label(x, label), 0
                for layer in self.layers:
                    h = layer(h)
                    goodness = goodness + h.pow(2).mean(1)
                per_label.append(goodness.unsqueeze(1))
            return torch.cat(per_label, 1).argmax(1)

    return types.SimpleNamespace(Local=Local, Stack=Stack, with_label=with_label, wrong_labels=wrong_labels)


def run_forward_forward(lib, device, data, starts):
    """Training on one batch of digit-shaped data; randint (the wrong labels) draws from numpy, and
    each layer starts from PyTorch's weights."""
    draws = np.random.default_rng(4)
    program_lib = Shim(lib, randint=lambda high, size: lib.tensor(draws.integers(0, high, size)))
    p = forward_forward(program_lib, lib.device(device))
    weights = iter(starts)
    original_init = p.Local.__init__

    def init(self, *sizes):
        original_init(self, *sizes)
        self.load_state_dict({k: lib.tensor(v.detach().numpy()) for k, v in next(weights).state_dict().items()})

    p.Local.__init__ = init
    net = p.Stack([784, 128, 128])
    x, y = (lib.tensor(a).to(device) for a in data)
    log = net.fit(p.with_label(x, y), p.with_label(x, p.wrong_labels(y)))
    return net, log, net.predict(x)


@pytest.mark.parametrize("device", DEVICES)
def test_forward_forward(device):
    rng = np.random.default_rng(0)
    data = (rng.standard_normal((64, 784)).astype(np.float32), rng.integers(0, 10, 64))
    torch.manual_seed(0)
    starts = [torch.nn.Linear(784, 128), torch.nn.Linear(128, 128)]
    theirs, their_log, their_guess = run_forward_forward(torch, "cpu", data, starts)
    mine, my_log, my_guess = run_forward_forward(loom, device, data, starts)
    assert len(my_log) == 6
    np.testing.assert_allclose(my_log, their_log, rtol=1e-5)
    np.testing.assert_array_equal(my_guess.cpu().numpy(), their_guess.numpy())
    for a, b in zip(mine.layers, theirs.layers):
        assert a.weight.device.type == device  # the optimizer's parameters moved, not copies
        assert a.opt.param_groups[0]["params"][0] is a.weight
        assert_same_state(a, b, 1e-4)


# ---- a sine-wave predictor fit by LBFGS ----

def waves(torch, nn):
    class Predictor(nn.Module):
        """Two stacked LSTM cells read a wave one value a step, then run on their own outputs."""

        def __init__(self, width=24):
            super().__init__()
            self.width = width
            self.low, self.high = nn.LSTMCell(1, width), nn.LSTMCell(width, width)
            self.out = nn.Linear(width, 1)

        def forward(self, series, future=0):
            n = series.size(0)
            states = [torch.zeros(n, self.width, dtype=torch.double) for _ in range(4)]  # default device
            outputs = []

            def advance(value):
                states[0:2] = self.low(value, (states[0], states[1]))
                states[2:4] = self.high(states[0], (states[2], states[3]))
                return self.out(states[2])

            for column in series.split(1, dim=1):
                outputs.append(advance(column))
            for _ in range(future):
                outputs.append(advance(outputs[-1]))
            return torch.cat(outputs, dim=1)

    def make_data(path):
        """Phase-shifted sines, saved as a pickled numpy array."""
        rng = np.random.default_rng(2)
        t = np.arange(200)[None, :] + rng.integers(-80, 80, 9)[:, None]
        with open(path, "wb") as f:
            torch.save(np.sin(t / 20.0).astype("float64"), f)

    def fit(model, path, future):
        data = torch.load(path)
        device = next(model.parameters()).device
        x, y, test_x, test_y = (torch.from_numpy(a).to(device) for a in (data[3:, :24], data[3:, 1:25],
                                                                           data[:3, :24], data[:3, 1:25]))
        model.double()
        mse = nn.MSELoss()
        opt = torch.optim.LBFGS(model.parameters(), lr=0.8)

        def closure():
            opt.zero_grad()
            loss = mse(model(x), y)
            loss.backward()
            return loss

        opt.step(closure)
        with torch.no_grad():
            guess = model(test_x, future=future)
            return mse(guess[:, :-future], test_y).item(), guess.detach().numpy()

    return types.SimpleNamespace(Predictor=Predictor, make_data=make_data, fit=fit)


@pytest.mark.parametrize("device", DEVICES)
def test_lstm_cells_fit_by_lbfgs(tmp_path, device):
    path = tmp_path / "waves.pt"
    waves(torch, torch.nn).make_data(path)
    torch.manual_seed(0)
    theirs = waves(torch, torch.nn).Predictor().double()
    start = {k: v.clone() for k, v in theirs.state_dict().items()}
    their_loss, their_guess = waves(torch, torch.nn).fit(theirs, path, 100)
    # loom reads a pickled numpy array as PyTorch 2.6 does: refused unless its globals are allowed
    with pytest.raises(loom.serialization.UnsafeFileError, match="numpy"):
        loom.load(path)
    allowed = [np.core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype("float64"))]
    with loom.device(device), loom.serialization.safe_globals(allowed):  # a script that names no device
        mine = waves(loom, loom.nn).Predictor()
        mine.load_state_dict({k: loom.tensor(v.numpy()) for k, v in start.items()})
        my_loss, my_guess = waves(loom, loom.nn).fit(mine, path, 100)
    assert mine.out.weight.device.type == device
    assert my_loss == pytest.approx(their_loss, rel=1e-9)
    np.testing.assert_allclose(my_guess, their_guess, rtol=1e-9, atol=1e-12)
    assert_same_state(mine, theirs, 1e-9)


# ---- a polynomial fit by hand ----

def polynomial_fit(torch, start):
    """Fits y = w . (x, x^2, x^3, x^4) + b by SGD on .data until the smooth L1 loss is small, and
    reports the fit; `start` is the Linear's initial state (numpy arrays)."""
    degree = 4
    w_true, b_true = torch.randn(degree, 1) * 5, torch.randn(1) * 5

    def features(x):
        return torch.cat([x.unsqueeze(1) ** k for k in range(1, degree + 1)], 1)

    def batch(size=32):
        x = features(torch.randn(size))
        return x, x.mm(w_true) + b_true.item()

    def describe(w, b):
        return "y = " + " ".join("{:+.2f} x^{}".format(c, k + 1) for k, c in enumerate(w)) + " {:+.2f}".format(b[0])

    fc = torch.nn.Linear(degree, 1)
    fc.load_state_dict({k: torch.tensor(v) for k, v in start.items()})
    for step in itertools.count(1):
        x, y = batch()
        fc.zero_grad()
        out = torch.nn.functional.smooth_l1_loss(fc(x), y)
        loss = out.item()
        out.backward()
        for p in fc.parameters():
            p.data.add_(-0.1 * p.grad)
        if loss < 1e-3:
            break
    print(f"loss {loss:.6f} after {step} batches")
    print("learned:", describe(fc.weight.view(-1), fc.bias))
    print("actual: ", describe(w_true.view(-1), b_true))
    return step, loss, fc


@pytest.mark.parametrize("device", DEVICES)
def test_polynomial_fit(device):
    torch.manual_seed(0)
    start = {k: v.detach().numpy() for k, v in torch.nn.Linear(4, 1).state_dict().items()}

    def run(lib, device):
        draws = np.random.default_rng(0)
        program_lib = Shim(lib, randn=lambda *size: lib.tensor(draws.standard_normal(size).astype(np.float32)))
        out = io.StringIO()
        with (lib.device(device) if device else contextlib.nullcontext()), contextlib.redirect_stdout(out):
            result = polynomial_fit(program_lib, start)
        return result, out.getvalue().splitlines()

    (their_steps, their_loss, _), their_report = run(torch, None)
    (steps, loss, fc), report = run(loom, device)
    assert fc.weight.device.type == device
    assert steps == their_steps
    # a residual near the fit (cancellation): float32 rounding moves it by ~1e-6
    assert loss == pytest.approx(their_loss, abs=5e-6)
    assert report[1:] == their_report[1:]
