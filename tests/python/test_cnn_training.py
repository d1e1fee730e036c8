"""A LeNet-style CNN trained on MNIST-shaped random data against PyTorch: the same initial weights
and data give the same loss trajectory over 20 steps (to 1e-5) with SGD (momentum) and Adam, in
loom's eager and lazy modes; a lazy step in the steady state compiles nothing and replays one
cached graph, updating the parameters where they are."""

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")

STEPS = 20
BATCH = 16


def lenet(m):
    """conv (5x5, padding 2) - relu - max pool - conv (5x5) - relu - max pool - 3 linear layers."""
    F = m.nn.functional

    class LeNet(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = m.nn.Conv2d(1, 6, 5, padding=2)
            self.conv2 = m.nn.Conv2d(6, 16, 5)
            self.fc1 = m.nn.Linear(16 * 5 * 5, 120)
            self.fc2 = m.nn.Linear(120, 84)
            self.fc3 = m.nn.Linear(84, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), (2, 2))
            x = x.view(-1, 16 * 5 * 5)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    return LeNet()


def data():
    g = np.random.default_rng(0)
    images = g.standard_normal((BATCH, 1, 28, 28)).astype(np.float32)
    labels = g.integers(0, 10, BATCH).astype(np.int64)
    return images, labels


OPTIMIZERS = {
    "sgd": lambda m, params: m.optim.SGD(params, lr=0.05, momentum=0.9),
    "adam": lambda m, params: m.optim.Adam(params, lr=2e-3),
}


def step(m, model, optimizer, x, y):
    optimizer.zero_grad()
    loss = m.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def torch_run(optimizer_name):
    torch.manual_seed(0)
    model = lenet(torch)
    initial = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = OPTIMIZERS[optimizer_name](torch, model.parameters())
    x, y = (torch.from_numpy(a) for a in data())
    losses = [step(torch, model, optimizer, x, y).item() for _ in range(STEPS)]
    return initial, losses, {k: v.detach().numpy() for k, v in model.state_dict().items()}


def loom_setup(optimizer_name, initial, device):
    model = lenet(loom)
    assert list(model.state_dict()) == list(initial)
    model.load_state_dict({k: loom.tensor(v) for k, v in initial.items()})
    model = model.to(device)
    optimizer = OPTIMIZERS[optimizer_name](loom, model.parameters())
    x, y = (loom.tensor(a, device=device) for a in data())
    return model, optimizer, x, y


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("optimizer_name", ["sgd", "adam"])
def test_loss_trajectory_matches_pytorch(optimizer_name, device):
    initial, want, want_state = torch_run(optimizer_name)
    model, optimizer, x, y = loom_setup(optimizer_name, initial, device)
    got = [step(loom, model, optimizer, x, y).item() for _ in range(STEPS)]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert got[-1] < 0.8 * got[0]  # it trains (random labels: it memorizes the batch)
    for k, v in model.state_dict().items():
        np.testing.assert_allclose(v.cpu().numpy(), want_state[k], rtol=1e-3, atol=1e-4, err_msg=k)


def test_lazy_steady_state_compiles_nothing_and_replays_one_graph():
    torch.manual_seed(0)
    initial = {k: v.detach().numpy().copy() for k, v in lenet(torch).state_dict().items()}
    model, optimizer, x, y = loom_setup("adam", initial, "lazy")
    for _ in range(3):  # the first steps differ (optimizer state and gradients appear)
        step(loom, model, optimizer, x, y).item()
    params = [p.data_ptr() for p in model.parameters()]
    for _ in range(4):
        before = loom.metrics()
        step(loom, model, optimizer, x, y).item()
        after = loom.metrics()
        delta = {k: after[k] - before[k] for k in ("traces", "graph_replays", "kernels_compiled",
                                                      "graph_cache_misses")}
        assert delta == {"traces": 1, "graph_replays": 1, "kernels_compiled": 0, "graph_cache_misses": 0}
    assert [p.data_ptr() for p in model.parameters()] == params
