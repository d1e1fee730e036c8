"""L-BFGS against PyTorch's (1.13 here): the same problems from the same start follow the same
iterates, with and without the strong-Wolfe line search, through a short history (pairs dropped),
the evaluation budget and the stopping tests; on cpu and lazy; its state saved and loaded
resumes the same trajectory. pytorch/examples' time_sequence_prediction trains an LSTMCell
model with it."""

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A, B = RNG.standard_normal((20, 5)), RNG.standard_normal(20)


def regression(m, device):
    kw = {} if m is torch else {"device": device}
    w = m.tensor(np.zeros(5), dtype=m.float64, requires_grad=True, **kw)
    a, b = m.tensor(A, **kw), m.tensor(B, **kw)
    return [w], lambda: ((a @ w).tanh() - b).pow(2).sum() + (w ** 4).sum() * 0.1


def network(m, device):
    """Parameters of several shapes (the flat vector's order matters), float64."""
    g = np.random.default_rng(1)
    x, y = g.standard_normal((16, 3)), g.standard_normal((16, 1))
    shapes = [(3, 8), (8,), (8, 1), (1,)]
    kw = {} if m is torch else {"device": device}
    params = [m.tensor(g.standard_normal(s) * 0.5, dtype=m.float64, requires_grad=True, **kw) for s in shapes]
    xt, yt = m.tensor(x, **kw), m.tensor(y, **kw)

    def loss():
        h = (xt @ params[0] + params[1]).sigmoid()
        return ((h @ params[2] + params[3] - yt) ** 2).mean()
    return params, loss


def run(m, device, make, steps, **options):
    params, loss_fn = make(m, device)
    opt = m.optim.LBFGS(params, **options)

    def closure():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss
    losses = [float(opt.step(closure)) for _ in range(steps)]
    state = opt.state[params[0]]
    return losses, [p.detach().cpu().numpy().copy() for p in params], (state["func_evals"], state["n_iter"])


CASES = {
    "plain": (regression, dict(lr=0.5, max_iter=7)),
    "short history": (regression, dict(lr=0.5, max_iter=9, history_size=2)),
    "strong wolfe": (regression, dict(max_iter=7, history_size=4, line_search_fn="strong_wolfe")),
    "eval budget": (network, dict(lr=0.3, max_iter=20, max_eval=6)),
    "network wolfe": (network, dict(max_iter=10, line_search_fn="strong_wolfe")),
    "converges": (regression, dict(max_iter=50, line_search_fn="strong_wolfe", tolerance_grad=1e-5,
                                   tolerance_change=1e-12)),
}


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_iterates_match_pytorch(case, device):
    make, options = CASES[case]
    want_losses, want_params, want_counts = run(torch, None, make, 5, **options)
    losses, params, counts = run(loom, device, make, 5, **options)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-10, atol=1e-12)
    for got, want in zip(params, want_params):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert counts == want_counts  # the same number of closure calls and iterations


def test_its_state_resumes_the_trajectory(tmp_path):
    make, options = CASES["strong wolfe"]
    _, straight, _ = run(loom, "cpu", make, 6, **options)
    params, loss_fn = make(loom, "cpu")
    opt = loom.optim.LBFGS(params, **options)

    def closure(opt, params, loss_fn):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss
    for _ in range(3):
        opt.step(lambda: closure(opt, params, loss_fn))
    loom.save(opt.state_dict(), tmp_path / "lbfgs.pt")
    resumed_params = [p.detach().clone().requires_grad_() for p in params]
    resumed = loom.optim.LBFGS(resumed_params, **options)
    resumed.load_state_dict(loom.load(tmp_path / "lbfgs.pt"))
    a, b = loom.tensor(A), loom.tensor(B)

    def loss2():
        w = resumed_params[0]
        return ((a @ w).tanh() - b).pow(2).sum() + (w ** 4).sum() * 0.1
    for _ in range(3):
        resumed.step(lambda: closure(resumed, resumed_params, loss2))
    np.testing.assert_allclose(resumed_params[0].detach().numpy(), straight[0], rtol=1e-12, atol=1e-14)


def test_an_optimum_stops_at_once_and_a_lazy_step_ends_with_a_sync():
    w = loom.zeros(3, dtype=loom.float64, device="lazy", requires_grad=True)
    opt = loom.optim.LBFGS([w])
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = (w * w).sum()  # gradient 0 at the start
        loss.backward()
        return loss
    assert float(opt.step(closure)) == 0.0 and len(calls) == 1
    assert opt.state[w]["n_iter"] == 0


def test_errors():
    w = loom.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="requires a closure"):
        loom.optim.LBFGS([w]).step(None)
    with pytest.raises(ValueError, match="parameter groups"):
        loom.optim.LBFGS([{"params": [w]}, {"params": [loom.zeros(1, requires_grad=True)]}])
    with pytest.raises(RuntimeError, match="only 'strong_wolfe'"):
        loom.optim.LBFGS([w], line_search_fn="armijo").step(lambda: (w * w).sum())
    with pytest.raises(ValueError, match="Invalid learning rate"):
        loom.optim.LBFGS([w], lr=-1)


def test_an_lstm_cell_sequence_model_trains_as_pytorchs():
    """time_sequence_prediction's model (two LSTMCells and a linear head over a sine batch,
    float64), two L-BFGS steps from copied weights."""
    def model(m):
        class Sequence(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm1, self.lstm2, self.linear = m.nn.LSTMCell(1, 12), m.nn.LSTMCell(12, 12), m.nn.Linear(12, 1)

            def forward(self, x):
                h = c = h2 = c2 = m.zeros(x.size(0), 12, dtype=m.float64)
                out = []
                for x_t in x.split(1, dim=1):
                    h, c = self.lstm1(x_t, (h, c))
                    h2, c2 = self.lstm2(h, (h2, c2))
                    out.append(self.linear(h2))
                return m.cat(out, dim=1)
        return Sequence().double()
    t = np.arange(21)[None, :] + np.arange(4)[:, None] * 3
    data = np.sin(t / 4.0)
    torch.manual_seed(0)
    reference = model(torch)
    ours = model(loom)
    ours.load_state_dict({k: loom.tensor(v.detach().numpy()) for k, v in reference.state_dict().items()})
    results = []
    for m, net in ((torch, reference), (loom, ours)):
        x, y = m.tensor(data[:, :-1]), m.tensor(data[:, 1:])
        opt = m.optim.LBFGS(net.parameters(), lr=0.8)

        def closure():
            opt.zero_grad()
            loss = m.nn.functional.mse_loss(net(x), y)
            loss.backward()
            return loss
        results.append([float(opt.step(closure)) for _ in range(2)])
    np.testing.assert_allclose(results[1], results[0], rtol=1e-8)
