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
import dataclasses
import inspect
import io
import itertools
import math
import os
import pickle
import random
import sys
import time
import types
import typing

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


# ---- nanoGPT ----

NANOGPT_SIZES = dict(dataset="syn", eval_interval=2, eval_iters=2, gradient_accumulation_steps=2, batch_size=4,
                     block_size=16, n_layer=2, n_head=2, n_embd=32, warmup_iters=2, lr_decay_iters=6, bias=True)


def nanogpt_data(root):
    """data/syn as nanoGPT's prepare.py scripts leave a dataset: train.bin, val.bin, meta.pkl."""
    os.makedirs(root / "data" / "syn", exist_ok=True)
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        rng.integers(0, 65, 3000).astype(np.uint16).tofile(root / "data" / "syn" / f"{split}.bin")
    with open(root / "data" / "syn" / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": 65}, f)


def nanogpt(lib, device, out_dir, max_iters, init_from, flash=True, compile=False, seed=1):
    """train.py run as configurator.py would with these overrides (the working directory holds
    data/syn). get_batch's torch.randint draws from a numpy generator seeded with `seed`. Without
    `flash`, the model sees a torch.nn.functional without scaled_dot_product_attention (PyTorch
    1.13's): CausalSelfAttention takes its own masked-softmax path and keeps the `bias` mask."""
    functional = lib.nn.functional
    model_torch = lib
    if not flash:
        functional = proxy(functional)
        functional.__dict__.pop("scaled_dot_product_attention", None)
        model_torch = proxy(lib, nn=proxy(lib.nn, functional=functional))
    model = run(src.NANOGPT_MODEL, namespace_of(model_torch, F=functional, dataclass=dataclasses.dataclass),
                "model.py")
    draws = np.random.default_rng(seed)
    script_torch = proxy(lib, randint=lambda high, size: lib.tensor(draws.integers(0, high, size)))
    ns = namespace_of(script_torch, pickle=pickle, nullcontext=contextlib.nullcontext, GPT=model["GPT"],
                      GPTConfig=model["GPTConfig"], DDP=None, init_process_group=None, destroy_process_group=None)
    run(src.NANOGPT_CONFIG, ns, "train.py")
    ns.update(NANOGPT_SIZES, out_dir=str(out_dir), max_iters=max_iters, init_from=init_from, device=device,
              compile=compile)
    return run(src.NANOGPT_TRAIN, ns, "train.py")


def iter_losses(text):
    return [float(line.split("loss ")[1].split(",")[0]) for line in text.splitlines() if line.startswith("iter ")]


@pytest.fixture(scope="module")
def nanogpt_checkpoint(tmp_path_factory):
    """PyTorch's train.py from scratch: 3 iterations, a checkpoint written at iteration 2; then
    the same checkpoint resumed by PyTorch for 3 more (the reference every port must reach)."""
    root = tmp_path_factory.mktemp("nanogpt")
    nanogpt_data(root)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        with pytest.warns(UserWarning, match="GradScaler"):  # dtype float16 on a machine without CUDA
            nanogpt(torch, "cpu", root / "torch", 2, "scratch", flash=False)
        ckpt = torch.load(root / "torch" / "ckpt.pt")
        assert ckpt["iter_num"] == 2
        torch.save(ckpt, root / "reference.pt")
        ns = nanogpt(torch, "cpu", root / "torch", 5, "resume", flash=False)
        return root, state_of(ns["raw_model"]), ns["best_val_loss"].item()
    finally:
        os.chdir(cwd)


def resume_from(root, name, strip_mask):
    """out_dir holding PyTorch's checkpoint, without the attention masks where the model in loom
    (PyTorch 2's path, scaled_dot_product_attention) has none: as GPT.from_pretrained drops them."""
    os.makedirs(root / name, exist_ok=True)
    ckpt = torch.load(root / "reference.pt")
    if strip_mask:
        ckpt["model"] = {k: v for k, v in ckpt["model"].items() if not k.endswith(".attn.bias")}
    torch.save(ckpt, root / name / "ckpt.pt")
    return root / name


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("flash", [False, True], ids=["masked", "sdpa"])
def test_nanogpt_resumes_pytorch_checkpoint(nanogpt_checkpoint, device, flash, capsys, monkeypatch):
    root, theirs, their_best = nanogpt_checkpoint
    monkeypatch.chdir(root)
    out = resume_from(root, f"loom-{device}-{flash}", strip_mask=flash)
    capsys.readouterr()
    ns = nanogpt(loom, device, out, 5, "resume", flash=flash)
    printed = capsys.readouterr().out
    assert "using fused AdamW: False" in printed  # inspect.signature(AdamW) names `fused`; no CUDA
    assert ns["iter_num"] == 6 and len(iter_losses(printed)) == 4
    mine = state_of(ns["raw_model"])
    if flash:
        theirs = {k: v for k, v in theirs.items() if not k.endswith(".attn.bias")}
    assert_states_close(mine, theirs, 2e-4)
    assert ns["best_val_loss"].item() == pytest.approx(their_best, rel=1e-4)
    # The checkpoint loom wrote at iteration 4 is one PyTorch reads.
    ckpt = torch.load(out / "ckpt.pt")
    assert ckpt["iter_num"] == 4 and ckpt["model_args"]["n_layer"] == 2
    assert set(ckpt["optimizer"]["state"]) == set(range(len(ckpt["model"]) - (0 if flash else 2) - 1))


def test_nanogpt_compiled_model(nanogpt_checkpoint, capsys, monkeypatch):
    """compile=True: train.py's torch.compile(model) is loom.compile's module wrapper on lazy."""
    root, theirs, _ = nanogpt_checkpoint
    monkeypatch.chdir(root)
    out = resume_from(root, "loom-compiled", strip_mask=False)
    calls = loom.metrics()["compiled_calls"]
    ns = nanogpt(loom, "lazy", out, 5, "resume", flash=False, compile=True)
    assert loom.metrics()["compiled_calls"] > calls
    assert_states_close(state_of(ns["unoptimized_model"]), theirs, 2e-4)
    # nanoGPT strips the "_orig_mod." a compiled model's state_dict carries, on resuming.
    assert all(k.startswith("_orig_mod.") for k in torch.load(out / "ckpt.pt")["model"])


@pytest.mark.parametrize("device", DEVICES)
def test_nanogpt_from_scratch_and_generate(tmp_path, device, monkeypatch, capsys):
    """train.py from scratch in loom (its own initial weights): the loss falls, PyTorch loads the
    checkpoint into its GPT, and GPT.generate (top_k's masked assignment, multinomial) samples."""
    nanogpt_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    ns = nanogpt(loom, device, tmp_path / "out", 4, "scratch")
    losses = iter_losses(capsys.readouterr().out)
    assert len(losses) == 5 and all(math.isfinite(v) for v in losses)
    ckpt = torch.load(tmp_path / "out" / "ckpt.pt")
    model = run(src.NANOGPT_MODEL, namespace_of(torch, dataclass=dataclasses.dataclass), "model.py")
    theirs = model["GPT"](model["GPTConfig"](**ckpt["model_args"]))
    missing, unexpected = theirs.load_state_dict(ckpt["model"], strict=False)
    assert not unexpected and all(k.endswith(".attn.bias") for k in missing)  # PyTorch 1.13's masks
    for k, v in loom.load(tmp_path / "out" / "ckpt.pt")["model"].items():
        np.testing.assert_array_equal(theirs.state_dict()[k].numpy(), v.numpy(), err_msg=k)
    ns["raw_model"].eval()
    out = ns["raw_model"].generate(loom.zeros((2, 1), dtype=loom.long, device=device), 20, temperature=0.8, top_k=5)
    assert out.shape == (2, 21) and out.device.type == device
    assert 0 <= int(out.min()) and int(out.max()) < 65


# ---- makemore ----

WORDS = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "charlotte", "amelia", "harper", "evelyn", "abigail",
         "emily", "ella", "luna", "zoe"] * 3


def makemore(lib, **names):
    return run(src.MAKEMORE, namespace_of(lib, dataclass=dataclasses.dataclass, List=typing.List,
                                          Dataset=lib.utils.data.Dataset, DataLoader=lib.utils.data.DataLoader,
                                          SummaryWriter=NullWriter, **names), "makemore.py")


MAKEMORE_KINDS = {"transformer": lambda ns, c: ns["Transformer"](c), "bigram": lambda ns, c: ns["Bigram"](c),
                  "mlp": lambda ns, c: ns["MLP"](c), "rnn": lambda ns, c: ns["RNN"](c, cell_type="rnn"),
                  "gru": lambda ns, c: ns["RNN"](c, cell_type="gru"), "bow": lambda ns, c: ns["BoW"](c)}


def makemore_steps(lib, device, kind, batches, reference=None):
    """makemore's training loop body (forward, zero_grad(set_to_none=True), backward, AdamW) on the
    given batches of its CharDataset."""
    ns = makemore(lib)
    dataset = ns["CharDataset"](WORDS, sorted(set("".join(WORDS))), max(len(w) for w in WORDS))
    config = ns["ModelConfig"](vocab_size=dataset.get_vocab_size(), block_size=dataset.get_output_length(),
                               n_layer=2, n_head=2, n_embd=16, n_embd2=16)
    lib.manual_seed(0)
    model = MAKEMORE_KINDS[kind](ns, config)
    if reference is not None:
        model = copy_weights(reference, model, device)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = lib.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8)
    losses = []
    for indices in batches:
        batch = [lib.stack([dataset[i][j] for i in indices]) for j in range(2)]
        batch = [t.to(device) for t in batch]
        X, Y = batch
        logits, loss = model(X, Y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, model, initial


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", list(MAKEMORE_KINDS))
def test_makemore_models_train_as_pytorch(kind, device):
    rng = np.random.default_rng(2)
    batches = [rng.integers(0, len(WORDS), 8).tolist() for _ in range(3)]
    theirs, their_model, _ = makemore_steps(torch, "cpu", kind, batches)
    mine, my_model, _ = makemore_steps(loom, device, kind, batches, reference=initial_model(kind))
    np.testing.assert_allclose(mine, theirs, rtol=2e-5, atol=2e-5)
    # Parameters whose gradient is rounding noise (the key projection's bias: softmax ignores a
    # constant per query) move by AdamW's normalized noise, up to lr a step, in either library.
    assert_states_close(state_of(my_model), state_of(their_model), 1e-4, atol=1e-3)


def initial_model(kind):
    """PyTorch's makemore model as makemore_steps builds it, before training."""
    ns = makemore(torch)
    dataset = ns["CharDataset"](WORDS, sorted(set("".join(WORDS))), max(len(w) for w in WORDS))
    config = ns["ModelConfig"](vocab_size=dataset.get_vocab_size(), block_size=dataset.get_output_length(),
                               n_layer=2, n_head=2, n_embd=16, n_embd2=16)
    torch.manual_seed(0)
    return MAKEMORE_KINDS[kind](ns, config)


@pytest.mark.parametrize("device", DEVICES)
def test_makemore_main(tmp_path, device, monkeypatch, capsys):
    """makemore's __main__ after its argument parsing: create_datasets, InfiniteDataLoader (a
    RandomSampler of num_samples=1e10 with replacement), 3 AdamW steps, then its evaluate
    (inference_mode, a shuffled DataLoader) and print_samples (generate: multinomial sampling)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "names.txt").write_text("\n".join(WORDS) + "\n")
    ns = makemore(loom)
    ns["args"] = types.SimpleNamespace(
        input_file="names.txt", work_dir="out", resume=False, sample_only=False, num_workers=0, max_steps=3,
        device=device, seed=3407, top_k=-1, type="transformer", n_layer=2, n_head=2, n_embd=16, n_embd2=16,
        batch_size=8, learning_rate=5e-4, weight_decay=0.01)
    start = time.monotonic()
    run(src.MAKEMORE_MAIN, ns, "makemore.py")
    assert time.monotonic() - start < 60  # the loader does not draw its 1e10 indices up front
    assert ns["step"] == 3
    test_loss = ns["evaluate"](ns["model"], ns["test_dataset"], batch_size=4, max_batches=2)
    assert math.isfinite(test_loss)
    ns["print_samples"](num=3)
    printed = capsys.readouterr().out
    assert "samples that are new" in printed


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


@pytest.mark.parametrize("kind", list(MAKEMORE_KINDS))
def test_makemore_step_compiled(kind):
    """makemore's loop body under loom.compile on lazy: replayed, and PyTorch's losses."""
    rng = np.random.default_rng(2)
    batches = [rng.integers(0, len(WORDS), 8).tolist() for _ in range(4)]
    theirs, _, _ = makemore_steps(torch, "cpu", kind, batches)
    ns = makemore(loom)
    dataset = ns["CharDataset"](WORDS, sorted(set("".join(WORDS))), max(len(w) for w in WORDS))
    config = ns["ModelConfig"](vocab_size=dataset.get_vocab_size(), block_size=dataset.get_output_length(),
                               n_layer=2, n_head=2, n_embd=16, n_embd2=16)
    model = copy_weights(initial_model(kind), MAKEMORE_KINDS[kind](ns, config), "lazy")
    optimizer = loom.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8)

    @loom.compile
    def step(X, Y):
        logits, loss = model(X, Y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    replays = loom.metrics()["compiled_replays"]
    mine = [step(*(loom.stack([dataset[i][j] for i in indices]).to("lazy") for j in range(2))).item()
            for indices in batches]
    assert loom.metrics()["compiled_replays"] > replays
    np.testing.assert_allclose(mine, theirs, rtol=2e-5, atol=2e-5)
