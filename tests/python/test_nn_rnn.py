"""RNN, LSTM, GRU and their cells against torch.nn: parameter names, shapes and order,
outputs, final states and gradients (float64, weights copied) over num_layers,
bidirectional, batch_first, proj_size, bias, h0/c0 and unbatched input, in eager and lazy
mode; PyTorch's initialization distribution; argument and shape errors; an LSTM language model
trained 20 steps reaches PyTorch's losses; a lazy training step with dropout and a scheduled lr
replays one cached graph per step."""

import numpy as np
import pytest
from scipy import stats

import loom
from _nn_helpers import assert_close, check_against_torch, copy_weights, np_, to_loom
from _ops_helpers import device, torch  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

CONFIGS = [
    ("RNN", dict(input_size=3, hidden_size=4)),
    ("RNN", dict(input_size=3, hidden_size=4, num_layers=2, nonlinearity="relu", bidirectional=True)),
    ("RNN", dict(input_size=3, hidden_size=4, bias=False, batch_first=True)),
    ("LSTM", dict(input_size=3, hidden_size=4)),
    ("LSTM", dict(input_size=3, hidden_size=5, num_layers=2, bidirectional=True, batch_first=True)),
    ("LSTM", dict(input_size=3, hidden_size=5, num_layers=2, proj_size=2, bidirectional=True)),
    ("LSTM", dict(input_size=3, hidden_size=4, proj_size=3, bias=False, batch_first=True)),
    ("GRU", dict(input_size=3, hidden_size=4)),
    ("GRU", dict(input_size=3, hidden_size=4, num_layers=3, bidirectional=True, batch_first=True)),
]


def make(name, **kwargs):
    return getattr(torch.nn, name)(**kwargs).double(), getattr(loom.nn, name)(**kwargs).double()


def randn(*shape, seed=0):
    return torch.tensor(np.random.default_rng(seed).standard_normal(shape))


def state_shapes(name, kw, batch):
    """The (h0[, c0]) shapes of a configuration, batch None for unbatched input."""
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    lead = (layers,) if batch is None else (layers, batch)
    h = kw.get("proj_size", 0) or kw["hidden_size"]
    return [lead + (h,), lead + (kw["hidden_size"],)] if name == "LSTM" else [lead + (h,)]


@pytest.mark.parametrize("name,kw", CONFIGS)
def test_parameters_match_pytorch(name, kw):
    tm, lm = make(name, **kw)
    assert [(n, tuple(p.shape)) for n, p in lm.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    assert list(lm.state_dict()) == list(tm.state_dict())
    assert repr(lm) == repr(tm)
    assert [n for n in lm._flat_weights_names] == list(tm._flat_weights_names)
    assert len(lm.all_weights) == len(tm.all_weights)


@pytest.mark.parametrize("name,kw", CONFIGS)
@pytest.mark.parametrize("with_state", [False, True])
def test_forward_and_gradients_match_pytorch(device, name, kw, with_state):
    tm, lm = make(name, **kw)
    lm.to(device)
    x = randn(2, 5, 3) if kw.get("batch_first") else randn(5, 2, 3)
    inputs = [x]
    if with_state:
        states = [randn(*s, seed=i + 1) for i, s in enumerate(state_shapes(name, kw, 2))]
        copy_weights(tm, lm, device)
        tstate = tuple(s.requires_grad_() for s in states) if name == "LSTM" else states[0].requires_grad_()
        lstate = (tuple(to_loom(s, device).requires_grad_() for s in states) if name == "LSTM"
                  else to_loom(states[0], device).requires_grad_())
        tout, lout = tm(x, tstate), lm(to_loom(x, device), lstate)
        assert_close(lout, tout)
        (tout[0].sum() + sum(s.pow(2).sum() for s in (tout[1] if name == "LSTM" else [tout[1]]))).backward()
        (lout[0].sum() + sum(s.pow(2).sum() for s in (lout[1] if name == "LSTM" else [lout[1]]))).backward()
        for t, lt in zip(tstate if name == "LSTM" else [tstate], lstate if name == "LSTM" else [lstate]):
            assert_close(lt.grad, t.grad)
        lp = dict(lm.named_parameters())
        for n, p in tm.named_parameters():
            assert_close(lp[n].grad, p.grad, what=n)
    else:
        check_against_torch(tm, lm, inputs, device)


@pytest.mark.parametrize("name,kw", [CONFIGS[1], CONFIGS[5], CONFIGS[8]])
def test_unbatched_input_matches_pytorch(device, name, kw):
    tm, lm = make(name, **kw)
    copy_weights(tm, lm.to(device), device)
    x = randn(4, 3)
    assert_close(lm(to_loom(x, device)), tm(x))
    states = [randn(*s, seed=i + 1) for i, s in enumerate(state_shapes(name, kw, None))]
    hx = tuple(states) if name == "LSTM" else states[0]
    lhx = tuple(to_loom(s, device) for s in states) if name == "LSTM" else to_loom(states[0], device)
    assert_close(lm(to_loom(x, device), lhx), tm(x, hx))


def test_dropout_between_layers_only_in_training(device):
    m = loom.nn.LSTM(3, 4, num_layers=2, dropout=0.5).to(device)
    x = loom.randn(6, 2, 3, device=device)
    m.eval()
    a, b = m(x)[0], m(x)[0]
    np.testing.assert_array_equal(np_(a), np_(b))  # no dropout in eval
    m.train()
    c, d = m(x)[0], m(x)[0]
    assert not np.array_equal(np_(c), np_(d))  # a new mask each call
    single = loom.nn.GRU(3, 4, dropout=0.0).to(device)
    single.train()
    np.testing.assert_array_equal(np_(single(x)[0]), np_(single(x)[0]))


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("bias", [True, False])
def test_cells_match_pytorch(device, name, bias):
    tm, lm = getattr(torch.nn, name)(3, 4, bias=bias).double(), getattr(loom.nn, name)(3, 4, bias=bias).double()
    assert [n for n, _ in lm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert repr(lm) == repr(tm)
    lm.to(device)
    check_against_torch(tm, lm, [randn(2, 3)], device)
    hx = (randn(2, 4, seed=1), randn(2, 4, seed=2)) if name == "LSTMCell" else randn(2, 4, seed=1)
    lhx = tuple(to_loom(h, device) for h in hx) if name == "LSTMCell" else to_loom(hx, device)
    x = randn(2, 3, seed=5)
    assert_close(lm(to_loom(x, device), lhx), tm(x, hx))
    assert_close(lm(to_loom(x[0], device)), tm(x[0]))  # unbatched


def test_rnn_cell_relu_repr_and_values(device):
    tm, lm = torch.nn.RNNCell(3, 2, nonlinearity="relu").double(), loom.nn.RNNCell(3, 2, nonlinearity="relu").double()
    assert repr(lm) == repr(tm) == "RNNCell(3, 2, nonlinearity=relu)"
    copy_weights(tm, lm.to(device), device)
    x = randn(4, 3)
    assert_close(lm(to_loom(x, device)), tm(x))


@pytest.mark.parametrize("name,kw", [CONFIGS[0], CONFIGS[5], ("GRUCell", dict(input_size=7, hidden_size=9))])
def test_initialization_is_uniform_in_inverse_sqrt_hidden(name, kw):
    """Every parameter ~ U(-1/sqrt(hidden), 1/sqrt(hidden)), as PyTorch initializes them."""
    loom.manual_seed(0)
    m = getattr(loom.nn, name)(**kw)
    bound = 1 / np.sqrt(kw["hidden_size"])
    values = np.concatenate([np_(p).ravel() for p in m.parameters()])
    assert values.min() >= -bound and values.max() <= bound
    assert stats.kstest(values, stats.uniform(-bound, 2 * bound).cdf).pvalue > 1e-3
    loom.manual_seed(0)
    again = getattr(loom.nn, name)(**kw)
    for p, q in zip(m.parameters(), again.parameters()):
        np.testing.assert_array_equal(np_(p), np_(q))


def test_argument_and_shape_errors():
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        loom.nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        loom.nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        loom.nn.RNN(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        loom.nn.RNN(3, 4, nonlinearity="gelu")
    m = loom.nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 3, got 5"):
        m(loom.zeros(2, 1, 5))
    with pytest.raises(ValueError, match="Expected input to be 2-D or 3-D but received 4-D tensor"):
        m(loom.zeros(2, 1, 1, 3))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(2, 1, 4\), got \[1, 1, 4\]"):
        m(loom.zeros(2, 1, 3), (loom.zeros(1, 1, 4), loom.zeros(2, 1, 4)))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(2, 1, 4\), got \[2, 1, 3\]"):
        m(loom.zeros(2, 1, 3), (loom.zeros(2, 1, 4), loom.zeros(2, 1, 3)))
    with pytest.raises(RuntimeError, match="For batched 3-D input, hx should also be 3-D but got 2-D tensor"):
        loom.nn.GRU(3, 4)(loom.zeros(2, 1, 3), loom.zeros(1, 4))
    with pytest.raises(RuntimeError, match="input has inconsistent input_size: got 2 expected 3"):
        loom.nn.GRUCell(3, 4)(loom.zeros(1, 2))
    # torch raises the same kinds of errors for the same calls
    with pytest.raises(ValueError):
        torch.nn.GRU(3, 4, proj_size=2)
    with pytest.raises(RuntimeError):
        torch.nn.LSTM(3, 4, num_layers=2)(torch.zeros(2, 1, 5))


def test_flatten_parameters_is_accepted():
    m = loom.nn.LSTM(2, 3)
    assert m.flatten_parameters() is None


# ---- training ----

class LanguageModel:
    """An embedding, a 2-layer LSTM and a decoder: the word language model of PyTorch's examples,
    written once for both libraries."""

    @staticmethod
    def build(lib, vocab=11, dropout=0.0):
        nn = lib.nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Embedding(vocab, 6)
                self.rnn = nn.LSTM(6, 8, num_layers=2, dropout=dropout)
                self.drop = nn.Dropout(dropout)
                self.decoder = nn.Linear(8, vocab)

            def forward(self, tokens, hidden=None):
                out, hidden = self.rnn(self.drop(self.encoder(tokens)), hidden)
                return self.decoder(self.drop(out)), hidden

        return Model()

    @staticmethod
    def data(steps, seq=7, batch=3, vocab=11):
        """Learnable text: each sequence counts up (mod vocab) from a random start."""
        g = np.random.default_rng(0)
        return [(g.integers(0, vocab, size=(1, batch)) + np.arange(seq + 1)[:, None]) % vocab for _ in range(steps)]


def lm_losses(lib, model, batches, device="cpu", optimizer="SGD"):
    opt = lib.optim.SGD(model.parameters(), lr=0.5) if optimizer == "SGD" else lib.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for b in batches:
        tokens = lib.tensor(b) if lib is torch else loom.tensor(b, device=device)
        opt.zero_grad()
        out, _ = model(tokens[:-1])
        loss = lib.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), tokens[1:].reshape(-1))
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_lstm_language_model_reaches_pytorch_losses(device, optimizer):
    torch.manual_seed(0)
    tm = LanguageModel.build(torch)
    lm = LanguageModel.build(loom)
    copy_weights(tm, lm)
    lm.to(device)
    batches = LanguageModel.data(20)
    want = lm_losses(torch, tm, batches, optimizer=optimizer)
    got = lm_losses(loom, lm, batches, device, optimizer)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert got[-1] < got[0]


def test_lazy_lstm_steady_state_compiles_nothing():
    """Dropout on, lr scheduled every step: after warm-up each step is one trace and one replay
    of a cached graph, and the parameters and optimizer state stay where they are."""
    loom.manual_seed(0)
    model = LanguageModel.build(loom, dropout=0.2).to("lazy")
    opt = loom.optim.Adam(model.parameters(), lr=1e-2)
    sched = loom.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=20)
    batches = LanguageModel.data(10)

    def step(b):
        tokens = loom.tensor(b, device="lazy")
        opt.zero_grad()
        out, _ = model(tokens[:-1])
        loss = loom.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), tokens[1:].reshape(-1))
        loss.backward()
        opt.step()
        sched.step()
        return loss.item()

    for b in batches[:3]:
        step(b)
    params = [p.data_ptr() for p in model.parameters()]
    lrs = set()
    for b in batches[3:]:
        before = loom.metrics()
        step(b)
        after = loom.metrics()
        lrs.add(opt.param_groups[0]["lr"])
        delta = {k: after[k] - before[k] for k in ("traces", "graph_replays", "kernels_compiled",
                                                      "graph_cache_misses")}
        assert delta == {"traces": 1, "graph_replays": 1, "kernels_compiled": 0, "graph_cache_misses": 0}
    assert len(lrs) == 7  # the learning rate changed every step
    assert [p.data_ptr() for p in model.parameters()] == params
