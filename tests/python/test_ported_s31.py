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

import collections
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


# ---- cleanrl PPO (continuous actions) ----

class Box:
    def __init__(self, shape):
        self.shape = shape


class PointEnvs:
    """gymnasium's vector-environment interface (reset, step's five results) over a point that the
    actions push, its reward the negative squared distance from the origin; episodes of 5 steps."""
    single_observation_space = Box((3,))
    single_action_space = Box((2,))

    def __init__(self, n):
        self.n, self.rng = n, np.random.default_rng(5)

    def reset(self, seed=None):
        self.t, self.state = 0, self.rng.standard_normal((self.n, 3)).astype(np.float32)
        return self.state, {}

    def step(self, action):
        self.t += 1
        self.state = (self.state + 0.1 * np.pad(action, ((0, 0), (0, 1)))).astype(np.float32)
        reward = -np.square(self.state).sum(1)
        return self.state, reward, np.full(self.n, self.t % 5 == 0), np.zeros(self.n, bool), {}


def ppo(lib, device, Normal, reference=None):
    """cleanrl's __main__ with a small Args: 2 iterations of 2 envs x 8 steps, 2 epochs of 2
    minibatches. Normal.sample (the rollout's actions) draws its noise from a numpy generator."""
    noise = np.random.default_rng(7)

    class SameNoiseNormal(Normal):
        def sample(self, sample_shape=()):
            eps = noise.standard_normal(tuple(self.loc.shape)).astype(np.float32)
            return (self.loc + self.scale * lib.tensor(eps).to(self.loc.device)).detach()

    args = types.SimpleNamespace(
        seed=1, torch_deterministic=True, cuda=True, env_id="Point", capture_video=False, gamma=0.99,
        learning_rate=3e-4, num_envs=2, num_steps=8, anneal_lr=True, gae_lambda=0.95, num_minibatches=2,
        update_epochs=2, norm_adv=True, clip_coef=0.2, clip_vloss=True, ent_coef=0.01, vf_coef=0.5,
        max_grad_norm=0.5, target_kl=None, total_timesteps=32)
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    gym = types.SimpleNamespace(vector=types.SimpleNamespace(SyncVectorEnv=lambda thunks: PointEnvs(len(thunks))),
                                spaces=types.SimpleNamespace(Box=Box))
    ns = run(src.PPO_AGENT, namespace_of(lib, Normal=SameNoiseNormal), "ppo_continuous_action.py")
    Agent = ns["Agent"]
    if reference is not None:
        class Agent(ns["Agent"]):  # noqa: F811 -- PyTorch's initial weights, on the device
            def to(self, _):
                return copy_weights(reference, self, device, lib)
    ns.update(Agent=Agent, args=args, gym=gym, run_name="point", make_env=lambda *a: None, writer=NullWriter())
    if device == "lazy":
        # The script's device is "cuda" where available, else "cpu": the port's device line.
        ns["torch"] = proxy(lib, device=lambda _: loom.device("lazy"))
    with contextlib.redirect_stdout(None):
        run(src.PPO_MAIN, ns, "ppo_continuous_action.py")
    return ns


@pytest.mark.parametrize("device", DEVICES)
def test_cleanrl_ppo_continuous(device):
    from torch.distributions.normal import Normal as TorchNormal
    torch.manual_seed(1)
    initial = run(src.PPO_AGENT, namespace_of(torch, Normal=TorchNormal), "ppo")["Agent"](PointEnvs(2))
    reference = {k: v.clone() for k, v in initial.state_dict().items()}
    theirs = ppo(torch, "cpu", TorchNormal, reference=initial_from(reference))
    mine = ppo(loom, device, loom.distributions.Normal, reference=initial_from(reference))
    for name in ("v_loss", "pg_loss", "entropy_loss", "old_approx_kl", "approx_kl"):
        assert mine[name].item() == pytest.approx(theirs[name].item(), rel=1e-4, abs=1e-6), name
    assert mine["clipfracs"] == pytest.approx(theirs["clipfracs"], abs=1e-6)
    np.testing.assert_allclose(mine["advantages"].cpu().numpy(), theirs["advantages"].numpy(), rtol=1e-4, atol=1e-5)
    assert_states_close(state_of(mine["agent"]), state_of(theirs["agent"]), 1e-4)


def initial_from(state):
    module = torch.nn.Module()
    module.state_dict = lambda: state
    return module


# ---- pytorch/examples reinforcement_learning ----

class CartPole:
    """gymnasium's CartPole interface, a pole that stays up 12 steps whatever the actions; the
    reward threshold ends main() after its 7th episode."""
    spec = types.SimpleNamespace(reward_threshold=10.6)

    def __init__(self):
        self.rng = np.random.default_rng(3)

    def reset(self, seed=None):
        self.t, self.state = 0, self.rng.uniform(-0.05, 0.05, 4)
        return self.state, {}

    def step(self, action):
        self.t += 1
        self.state = self.state + (0.1 if action else -0.1) * np.array([1.0, 0.5, -0.2, 0.3])
        return self.state, 1.0, self.t >= 12, False, {}


def reinforcement(lib, device, source, Categorical, reference=None):
    """REINFORCE or actor-critic's main(): Categorical.sample draws from a numpy generator."""
    draws = np.random.default_rng(11)

    class SameDraws(Categorical):
        def sample(self, sample_shape=()):
            p = self.probs.detach().cpu().double().numpy()
            u = draws.random(p.shape[:-1] + (1,))
            return lib.tensor((p.cumsum(-1) < u).sum(-1)).to(self.probs.device)

    gym = types.SimpleNamespace(make=lambda name, render_mode=None: CartPole())
    args = types.SimpleNamespace(gamma=0.99, seed=543, render=False, log_interval=10)
    script_torch = lib
    if device == "lazy":
        # The scripts name no device: on lazy, their states are made there (from_numpy's copy).
        script_torch = proxy(lib, from_numpy=lambda a: lib.from_numpy(a).to("lazy"),
                             tensor=lambda data, **kw: lib.tensor(data, **kw).to("lazy"))
    ns = namespace_of(script_torch, F=lib.nn.functional, gym=gym, args=args, Categorical=SameDraws,
                      count=itertools.count, deque=collections.deque, namedtuple=collections.namedtuple)
    ns["nn"] = lib.nn
    run(source.split("\ndef main():")[0], ns, "rl")
    net = ns.get("policy") or ns.get("model")
    if hasattr(net, "dropout"):
        net.dropout.p = 0.0  # the same mask in both cannot be drawn: dropout off
    if reference is not None:
        copy_weights(reference, net, device, lib)
        net.saved_log_probs = [] if hasattr(net, "saved_log_probs") else None
        ns["optimizer"] = lib.optim.Adam(net.parameters(), lr=ns["optimizer"].param_groups[0]["lr"])
    run("def main():" + source.split("\ndef main():")[1], ns, "rl")
    with contextlib.redirect_stdout(None):
        ns["main"]()
    return net


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("program", ["REINFORCE", "ACTOR_CRITIC"])
def test_reinforcement_learning(program, device):
    from torch.distributions import Categorical as TorchCategorical
    theirs_initial = reinforcement_initial(program)
    torch_net = reinforcement(torch, "cpu", getattr(src, program), TorchCategorical, reference=theirs_initial)
    mine = reinforcement(loom, device, getattr(src, program), loom.distributions.Categorical,
                         reference=theirs_initial)
    assert_states_close(state_of(mine), state_of(torch_net), 2e-4)


def reinforcement_initial(program):
    torch.manual_seed(0)
    ns = namespace_of(torch, gym=types.SimpleNamespace(make=lambda *a, **k: CartPole()),
                      args=types.SimpleNamespace(gamma=0.99, seed=543, render=False, log_interval=10),
                      Categorical=None, count=itertools.count, deque=collections.deque,
                      namedtuple=collections.namedtuple)
    run(getattr(src, program).split("\ndef main():")[0], ns, "rl")
    net = ns.get("policy") or ns.get("model")
    return net


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
