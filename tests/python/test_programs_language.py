"""Language-model programs written for these tests after well-known projects' patterns: a word-level
model (tied LSTM / GRU / tanh-RNN, or an encoder of an nn.Transformer subclass) trained by plain SGD
through `.data` with truncated backpropagation; a small GPT with a training script of the usual
shape (memory-mapped token files, warmup and cosine rate, gradient accumulation, a float16
GradScaler that turns itself off without CUDA, clipping, decayed and undecayed parameter groups
chosen after inspecting AdamW's signature, evaluation, checkpoints written and resumed across
PyTorch and loom, loom.compile, top-k sampling); and character-level name models of six kinds
(transformer, bigram, MLP, RNN, GRU, bag of words) with AdamW, an endless RandomSampler loader,
inference-mode evaluation and multinomial sampling. Each runs on `cpu` and `lazy` from PyTorch's
weights (copied, or resumed from PyTorch's checkpoint) with the same random draws, and ends where
PyTorch 1.13 ends."""

import contextlib
import dataclasses
import inspect
import math
import os
import pickle
import time
import types

import numpy as np
import pytest

import loom
from _programs import DEVICES, Shim, assert_close, assert_same_state, load_from, numpy_state

torch = pytest.importorskip("torch")


# ---- a word-level model, trained by hand ----

def word_model(torch):
    nn, F = torch.nn, torch.nn.functional

    class Recurrent(nn.Module):
        """Embedding -> a stacked recurrent net -> a decoder sharing the embedding's weights."""

        def __init__(self, kind, vocab, width, depth, dropout=0.0):
            super().__init__()
            self.kind, self.vocab, self.width, self.depth = kind, vocab, width, depth
            self.drop = nn.Dropout(dropout)
            self.embed = nn.Embedding(vocab, width)
            if kind == "RNN_TANH":
                self.rnn = nn.RNN(width, width, depth, nonlinearity="tanh", dropout=dropout)
            else:
                self.rnn = getattr(nn, kind)(width, width, depth, dropout=dropout)
            self.decode = nn.Linear(width, vocab)
            self.decode.weight = self.embed.weight
            nn.init.uniform_(self.embed.weight, -0.1, 0.1)
            nn.init.zeros_(self.decode.bias)

        def initial_state(self, batch):
            w = next(self.parameters())
            zeros = w.new_zeros(self.depth, batch, self.width)
            return (zeros, w.new_zeros(self.depth, batch, self.width)) if self.kind == "LSTM" else zeros

        def forward(self, tokens, state):
            out, state = self.rnn(self.drop(self.embed(tokens)), state)
            scores = self.decode(self.drop(out)).view(-1, self.vocab)
            return F.log_softmax(scores, dim=1), state

    class Positions(nn.Module):
        def __init__(self, width, longest=256):
            super().__init__()
            where = torch.arange(0, longest, dtype=torch.float).unsqueeze(1)
            rate = torch.exp(torch.arange(0, width, 2).float() * (-math.log(10000.0) / width))
            table = torch.zeros(longest, width)
            table[:, 0::2] = torch.sin(where * rate)
            table[:, 1::2] = torch.cos(where * rate)
            self.register_buffer("table", table.unsqueeze(1))  # (longest, 1, width)

        def forward(self, x):
            return x + self.table[:x.size(0)]

    class Attentive(nn.Transformer):
        """nn.Transformer's encoder alone, a causal mask made as the log of a lower-triangular
        matrix of ones (0 and -inf)."""

        def __init__(self, vocab, width, heads, hidden, depth):
            super().__init__(d_model=width, nhead=heads, dim_feedforward=hidden, num_encoder_layers=depth)
            self.kind, self.vocab, self.width = "Transformer", vocab, width
            self.positions = Positions(width)
            self.embed = nn.Embedding(vocab, width)
            # nn.Transformer's own decoder replaced by the output layer (a submodule reassigned)
            self.decoder = nn.Linear(width, vocab)
            self.mask = None
            nn.init.uniform_(self.embed.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

        def forward(self, tokens, state=None):
            n = len(tokens)
            if self.mask is None or self.mask.size(0) != n:
                self.mask = torch.log(torch.tril(torch.ones(n, n))).to(tokens.device)
            x = self.positions(self.embed(tokens) * math.sqrt(self.width))
            return F.log_softmax(self.decoder(self.encoder(x, mask=self.mask)), dim=-1).view(-1, self.vocab), None

    def columns(stream, batch, device):
        """A 1-d token stream as `batch` columns (time along dim 0)."""
        rows = stream.size(0) // batch
        return stream.narrow(0, 0, rows * batch).view(batch, -1).t().contiguous().to(device)

    def detached(state):
        if state is None or isinstance(state, torch.Tensor):
            return None if state is None else state.detach()
        return tuple(detached(s) for s in state)

    def chunk(source, i, bptt):
        n = min(bptt, len(source) - 1 - i)
        return source[i:i + n], source[i + 1:i + 1 + n].reshape(-1)

    def epoch(model, data, bptt, lr, clip, batch):
        model.train()
        state = None if model.kind == "Transformer" else model.initial_state(batch)
        losses = []
        for i in range(0, data.size(0) - 1, bptt):
            inputs, targets = chunk(data, i, bptt)
            model.zero_grad()
            scores, state = model(inputs, detached(state))
            loss = F.nll_loss(scores, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            losses.append(loss.item())
        return losses

    def held_out(model, data, bptt, batch):
        model.eval()
        state = None if model.kind == "Transformer" else model.initial_state(batch)
        total = 0.0
        with torch.no_grad():
            for i in range(0, data.size(0) - 1, bptt):
                inputs, targets = chunk(data, i, bptt)
                scores, state = model(inputs, state)
                state = detached(state)
                total += len(inputs) * F.nll_loss(scores, targets).item()
        return total / (len(data) - 1)

    return types.SimpleNamespace(**locals())


def no_dropout(model):
    """Dropout off everywhere (nn.Transformer's layers have their own, at 0.1)."""
    for m in model.modules():
        if type(m).__name__ == "Dropout":
            m.p = 0.0
        if type(m).__name__ == "MultiheadAttention":
            m.dropout = 0.0
    return model


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN_TANH", "Transformer"])
@pytest.mark.parametrize("device", DEVICES)
def test_word_model(device, kind):
    tokens = np.random.default_rng(13).integers(0, 20, 160)

    def run(lib, model, device):
        p = word_model(lib)
        stream = lib.tensor(tokens)
        train, val = p.columns(stream[:120], 4, device), p.columns(stream[120:], 2, device)
        out = []
        for _ in range(2):
            out += p.epoch(model, train, 5, 2.0, 0.25, 4)
            out.append(p.held_out(model, val, 5, 2))
        return out

    def make(lib):
        p = word_model(lib)
        return p.Attentive(20, 16, 2, 32, 2) if kind == "Transformer" else p.Recurrent(kind, 20, 16, 2)

    torch.manual_seed(0)
    theirs = no_dropout(make(torch))
    mine = no_dropout(load_from(theirs, make(loom), device))
    assert kind == "Transformer" or mine.decode.weight is mine.embed.weight
    assert_close(run(loom, mine, device), run(torch, theirs, None), 1e-4)


# ---- a small GPT and its training script ----

def gpt(torch, F=None):
    """The model; F is the functional module it sees (tests hide scaled_dot_product_attention, as
    PyTorch 1.13 lacks it, to take the explicit masked-softmax path)."""
    nn = torch.nn
    F = F or torch.nn.functional

    @dataclasses.dataclass
    class Shape:
        vocab: int = 65
        context: int = 16
        depth: int = 2
        heads: int = 2
        width: int = 32
        dropout: float = 0.0
        bias: bool = True

    class Norm(nn.Module):
        """LayerNorm whose bias can be left out."""

        def __init__(self, n, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))
            self.bias = nn.Parameter(torch.zeros(n)) if bias else None

        def forward(self, x):
            return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)

    class SelfAttention(nn.Module):
        def __init__(self, s):
            super().__init__()
            self.heads, self.p = s.heads, s.dropout
            self.qkv = nn.Linear(s.width, 3 * s.width, bias=s.bias)
            self.proj = nn.Linear(s.width, s.width, bias=s.bias)
            self.drop_scores, self.drop_out = nn.Dropout(s.dropout), nn.Dropout(s.dropout)
            self.sdpa = getattr(F, "scaled_dot_product_attention", None)
            if self.sdpa is None:
                ones = torch.ones(s.context, s.context)
                self.register_buffer("causal", torch.tril(ones).view(1, 1, s.context, s.context))

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
                       for z in self.qkv(x).split(c, dim=2))
            if self.sdpa is not None:
                y = self.sdpa(q, k, v, attn_mask=None, dropout_p=self.p if self.training else 0.0, is_causal=True)
            else:
                scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(k.size(-1))
                scores = scores.masked_fill(self.causal[:, :, :t, :t] == 0, float("-inf"))
                y = torch.matmul(self.drop_scores(F.softmax(scores, dim=-1)), v)
            return self.drop_out(self.proj(y.transpose(1, 2).contiguous().view(b, t, c)))

    class Block(nn.Module):
        def __init__(self, s):
            super().__init__()
            self.norm1, self.attn = Norm(s.width, s.bias), SelfAttention(s)
            self.norm2 = Norm(s.width, s.bias)
            self.up = nn.Linear(s.width, 4 * s.width, bias=s.bias)
            self.act = nn.GELU()
            self.down_proj = nn.Linear(4 * s.width, s.width, bias=s.bias)
            self.drop = nn.Dropout(s.dropout)

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.drop(self.down_proj(self.act(self.up(self.norm2(x)))))

    class GPT(nn.Module):
        def __init__(self, s):
            super().__init__()
            self.shape = s
            self.tokens = nn.Embedding(s.vocab, s.width)
            self.places = nn.Embedding(s.context, s.width)
            self.drop = nn.Dropout(s.dropout)
            self.blocks = nn.ModuleList([Block(s) for _ in range(s.depth)])
            self.norm = Norm(s.width, s.bias)
            self.head = nn.Linear(s.width, s.vocab, bias=False)
            self.tokens.weight = self.head.weight  # tied
            self.apply(self._init)
            for name, p in self.named_parameters():  # residual projections scaled by depth
                if name.endswith("proj.weight"):
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * s.depth))

        @staticmethod
        def _init(m):
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

        def forward(self, idx, targets=None):
            t = idx.size(1)
            x = self.tokens(idx) + self.places(torch.arange(0, t, dtype=torch.long, device=idx.device))
            x = self.drop(x)
            for block in self.blocks:
                x = block(x)
            x = self.norm(x)
            if targets is None:
                return self.head(x[:, [-1], :]), None
            logits = self.head(x)
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

        def optimizer(self, decay, lr, betas, device_type):
            params = [p for p in self.parameters() if p.requires_grad]
            groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": decay},
                      {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
            fused = "fused" in inspect.signature(torch.optim.AdamW).parameters and device_type == "cuda"
            print(f"AdamW fused={fused}")
            return torch.optim.AdamW(groups, lr=lr, betas=betas, **({"fused": True} if fused else {}))

        @torch.no_grad()
        def sample(self, idx, steps, temperature=1.0, top_k=None):
            for _ in range(steps):
                window = idx if idx.size(1) <= self.shape.context else idx[:, -self.shape.context:]
                logits = self(window)[0][:, -1, :] / temperature
                if top_k is not None:
                    kth = torch.topk(logits, min(top_k, logits.size(-1)))[0][:, [-1]]
                    logits[logits < kth] = -float("inf")
                nxt = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
                idx = torch.cat((idx, nxt), dim=1)
            return idx

    return types.SimpleNamespace(Shape=Shape, GPT=GPT)


GPT_RUN = dict(data_dir="data", eval_every=2, eval_iters=2, accumulate=2, batch=4, context=16, depth=2, heads=2,
               width=32, lr=6e-4, min_lr=6e-5, warmup=2, decay_iters=6, weight_decay=0.1, betas=(0.9, 0.95),
               grad_clip=1.0, dtype="float16", always_save=True)


def train_gpt(torch, model_lib, run):
    """The training script: `torch` is the library the script sees (its randint may be the test's),
    model_lib the model's namespace. Returns the script's final locals."""
    o = dict(GPT_RUN, **run)
    device = o["device"]
    device_type = "cuda" if "cuda" in device else "cpu"
    os.makedirs(o["out_dir"], exist_ok=True)
    # float16 asks for loss scaling, which is CUDA's: on the CPU the scaler warns and turns itself
    # off, and its calls below pass through
    autocast = contextlib.nullcontext()
    scaler = torch.cuda.amp.GradScaler(enabled=o["dtype"] == "float16")
    ctx = o["context"]

    def batch(split):
        tokens = np.memmap(os.path.join(o["data_dir"], f"{split}.bin"), dtype=np.uint16, mode="r")
        starts = torch.randint(len(tokens) - ctx, (o["batch"],))
        x = torch.stack([torch.from_numpy(tokens[i:i + ctx].astype(np.int64)) for i in starts])
        y = torch.stack([torch.from_numpy(tokens[i + 1:i + 1 + ctx].astype(np.int64)) for i in starts])
        return x.to(device), y.to(device)

    with open(os.path.join(o["data_dir"], "meta.pkl"), "rb") as f:
        vocab = pickle.load(f)["vocab"]
    if o["init"] == "scratch":
        shape = model_lib.Shape(vocab=vocab, context=ctx, depth=o["depth"], heads=o["heads"], width=o["width"])
        model = model_lib.GPT(shape)
        step, best = 0, 1e9
    else:
        saved = torch.load(os.path.join(o["out_dir"], "ckpt.pt"), map_location=device)
        shape = model_lib.Shape(**saved["model_args"])
        model = model_lib.GPT(shape)
        prefix = "_orig_mod."
        weights = {(k[len(prefix):] if k.startswith(prefix) else k): v for k, v in saved["model"].items()}
        model.load_state_dict(weights)
        step, best = saved["iter_num"], saved["best_val_loss"]  # best: a 0-dim tensor, on `device`
    model.to(device)
    optimizer = model.optimizer(o["weight_decay"], o["lr"], o["betas"], device_type)
    if o["init"] == "resume":
        optimizer.load_state_dict(saved["optimizer"])
        saved = None
    plain = model
    if o.get("compile"):
        model = torch.compile(model)
    raw = model  # what is checkpointed: a compiled model's keys carry "_orig_mod."

    @torch.no_grad()
    def estimate():
        result = {}
        model.eval()
        for split in ("train", "val"):
            losses = torch.zeros(o["eval_iters"])  # on the CPU, filled from .item()
            for k in range(o["eval_iters"]):
                x, y = batch(split)
                with autocast:
                    losses[k] = model(x, y)[1].item()
            result[split] = losses.mean()
        model.train()
        return result

    def rate(it):
        if it < o["warmup"]:
            return o["lr"] * (it + 1) / (o["warmup"] + 1)
        if it > o["decay_iters"]:
            return o["min_lr"]
        progress = (it - o["warmup"]) / (o["decay_iters"] - o["warmup"])
        return o["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * progress)) * (o["lr"] - o["min_lr"])

    x, y = batch("train")
    while True:
        for group in optimizer.param_groups:
            group["lr"] = rate(step)
        if step % o["eval_every"] == 0:
            losses = estimate()
            print(f"eval {step}: train {losses['train']:.4f} val {losses['val']:.4f}")
            # resumed on lazy, best is a lazy 0-dim tensor: the CPU 0-dim loss joins that op
            if losses["val"] < best or o["always_save"]:
                best = min(best, losses["val"])
                if step > 0:
                    torch.save({"model": raw.state_dict(), "optimizer": optimizer.state_dict(),
                                "model_args": dataclasses.asdict(shape), "iter_num": step, "best_val_loss": best,
                                "config": {k: v for k, v in o.items() if k != "device"}},
                               os.path.join(o["out_dir"], "ckpt.pt"))
        for _ in range(o["accumulate"]):
            with autocast:
                loss = model(x, y)[1] / o["accumulate"]
            x, y = batch("train")  # the next batch drawn while this step's graph waits
            scaler.scale(loss).backward()
        if o["grad_clip"]:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), o["grad_clip"])
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item() * o['accumulate']:.4f}")
        step += 1
        if step > o["max_iters"]:
            break
    return dict(locals())


def write_tokens(root):
    """data/: train.bin and val.bin (uint16 tokens) and meta.pkl, as a data preparation step leaves them."""
    os.makedirs(root / "data", exist_ok=True)
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        rng.integers(0, 65, 3000).astype(np.uint16).tofile(root / "data" / f"{split}.bin")
    with open(root / "data" / "meta.pkl", "wb") as f:
        pickle.dump({"vocab": 65}, f)


def run_gpt(lib, device, out_dir, max_iters, init, sdpa=True, compile=False, seed=1):
    """The script on `lib`; its randint draws from a numpy generator seeded with `seed`."""
    functional = lib.nn.functional if sdpa else Shim(lib.nn.functional, scaled_dot_product_attention=None)
    draws = np.random.default_rng(seed)
    script_lib = Shim(lib, randint=lambda high, size: lib.tensor(draws.integers(0, high, size)))
    return train_gpt(script_lib, gpt(lib, functional),
                     dict(out_dir=str(out_dir), max_iters=max_iters, init=init, device=device, compile=compile))


def step_losses(text):
    return [float(line.split("loss ")[1]) for line in text.splitlines() if line.startswith("step ")]


@pytest.fixture(scope="module")
def gpt_checkpoint(tmp_path_factory):
    """PyTorch's run from scratch (3 steps, a checkpoint at step 2), then PyTorch resuming it for 4
    more: the end every resumed run must reach."""
    root = tmp_path_factory.mktemp("gpt")
    write_tokens(root)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        with pytest.warns(UserWarning, match="GradScaler"):
            run_gpt(torch, "cpu", root / "torch", 2, "scratch")
        saved = torch.load(root / "torch" / "ckpt.pt")
        assert saved["iter_num"] == 2
        torch.save(saved, root / "reference.pt")
        with pytest.warns(UserWarning, match="GradScaler"):
            end = run_gpt(torch, "cpu", root / "torch", 5, "resume")
        return root, numpy_state(end["plain"]), end["best"].item()
    finally:
        os.chdir(cwd)


def checkpoint_dir(root, name, drop_masks):
    """A run directory holding PyTorch's checkpoint; without the masked path's `causal` buffers
    when the model in loom takes scaled_dot_product_attention (which has none)."""
    os.makedirs(root / name, exist_ok=True)
    saved = torch.load(root / "reference.pt")
    if drop_masks:
        saved["model"] = {k: v for k, v in saved["model"].items() if not k.endswith(".causal")}
    torch.save(saved, root / name / "ckpt.pt")
    return root / name


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sdpa", [False, True], ids=["masked", "sdpa"])
def test_gpt_resumes_pytorch_checkpoint(gpt_checkpoint, device, sdpa, capsys, monkeypatch):
    root, theirs, their_best = gpt_checkpoint
    monkeypatch.chdir(root)
    out = checkpoint_dir(root, f"loom-{device}-{sdpa}", drop_masks=sdpa)
    capsys.readouterr()
    with pytest.warns(UserWarning, match="GradScaler is enabled, but CUDA is not available"):
        end = run_gpt(loom, device, out, 5, "resume", sdpa=sdpa)
    printed = capsys.readouterr().out
    assert "AdamW fused=False" in printed  # loom's AdamW signature names `fused`; no CUDA here
    assert end["step"] == 6 and len(step_losses(printed)) == 4
    if sdpa:
        theirs = {k: v for k, v in theirs.items() if not k.endswith(".causal")}
    mine = numpy_state(end["plain"])
    assert mine.keys() == theirs.keys()
    for k in theirs:
        np.testing.assert_allclose(mine[k], theirs[k], rtol=2e-4, atol=2e-4, err_msg=k)
    assert end["best"].item() == pytest.approx(their_best, rel=1e-4)
    # loom's checkpoint of step 4 is one PyTorch reads: its model, optimizer state and settings
    saved = torch.load(out / "ckpt.pt")
    assert saved["iter_num"] == 4 and saved["model_args"]["depth"] == 2
    parameters = len(saved["model"]) - (0 if sdpa else 2) - 1  # less the masks and the tied copy
    assert set(saved["optimizer"]["state"]) == set(range(parameters))
    assert [g["weight_decay"] for g in saved["optimizer"]["param_groups"]] == [0.1, 0.0]


def test_gpt_compiled_model(gpt_checkpoint, monkeypatch):
    """compile: the script's torch.compile(model) is loom.compile's module wrapper on lazy."""
    root, theirs, _ = gpt_checkpoint
    monkeypatch.chdir(root)
    out = checkpoint_dir(root, "loom-compiled", drop_masks=False)
    calls = loom.metrics()["compiled_calls"]
    with contextlib.redirect_stdout(None), pytest.warns(UserWarning, match="GradScaler"):
        end = run_gpt(loom, "lazy", out, 5, "resume", sdpa=False, compile=True)
    assert loom.metrics()["compiled_calls"] > calls
    mine = numpy_state(end["plain"])
    for k in theirs:
        np.testing.assert_allclose(mine[k], theirs[k], rtol=2e-4, atol=2e-4, err_msg=k)
    assert all(k.startswith("_orig_mod.") for k in torch.load(out / "ckpt.pt")["model"])


@pytest.mark.parametrize("device", DEVICES)
def test_gpt_from_scratch_then_sampled(tmp_path, device, monkeypatch, capsys):
    """From loom's own initial weights: the losses are finite, PyTorch loads the checkpoint into its
    GPT (which has the masks loom's sdpa path lacks), and sampling with top-k draws valid tokens."""
    write_tokens(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.warns(UserWarning, match="GradScaler"):
        end = run_gpt(loom, device, tmp_path / "out", 4, "scratch")
    losses = step_losses(capsys.readouterr().out)
    assert len(losses) == 5 and all(math.isfinite(v) for v in losses)
    saved = torch.load(tmp_path / "out" / "ckpt.pt")
    t = gpt(torch)
    theirs = t.GPT(t.Shape(**saved["model_args"]))
    missing, unexpected = theirs.load_state_dict(saved["model"], strict=False)
    assert not unexpected and missing and all(k.endswith(".causal") for k in missing)
    for k, v in loom.load(tmp_path / "out" / "ckpt.pt")["model"].items():
        np.testing.assert_array_equal(theirs.state_dict()[k].numpy(), v.numpy(), err_msg=k)
    end["plain"].eval()
    out = end["plain"].sample(loom.zeros((2, 1), dtype=loom.long, device=device), 20, temperature=0.8, top_k=5)
    assert out.shape == (2, 21) and out.device.type == device
    assert 0 <= int(out.min()) and int(out.max()) < 65


# ---- character-level name models ----

NAMES = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "charlotte", "amelia", "harper", "evelyn", "abigail",
         "emily", "ella", "luna", "zoe"] * 3


def names(torch):
    nn, F = torch.nn, torch.nn.functional

    @dataclasses.dataclass
    class Sizes:
        vocab: int
        block: int
        depth: int = 2
        heads: int = 2
        embed: int = 16
        hidden: int = 16

    def next_token_loss(logits, targets):
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    def tanh_gelu(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    class Attention(nn.Module):
        def __init__(self, s):
            super().__init__()
            self.h = s.heads
            self.q, self.k, self.v = (nn.Linear(s.embed, s.embed) for _ in range(3))
            self.o = nn.Linear(s.embed, s.embed)
            self.register_buffer("allowed", torch.tril(torch.ones(s.block, s.block)).view(1, 1, s.block, s.block))

        def forward(self, x):
            b, t, c = x.size()
            q, k, v = (f(x).view(b, t, self.h, c // self.h).transpose(1, 2) for f in (self.q, self.k, self.v))
            w = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            w = F.softmax(w.masked_fill(self.allowed[:, :, :t, :t] == 0, float("-inf")), dim=-1)
            return self.o((w @ v).transpose(1, 2).contiguous().view(b, t, c))

    class Layer(nn.Module):
        def __init__(self, s):
            super().__init__()
            self.n1, self.att, self.n2 = nn.LayerNorm(s.embed), Attention(s), nn.LayerNorm(s.embed)
            self.ff = nn.ModuleDict(dict(inner=nn.Linear(s.embed, 4 * s.embed), outer=nn.Linear(4 * s.embed, s.embed)))

        def forward(self, x):
            x = x + self.att(self.n1(x))
            return x + self.ff.outer(tanh_gelu(self.ff.inner(self.n2(x))))

    class Transformer(nn.Module):
        def __init__(self, s):
            super().__init__()
            self.block = s.block
            self.parts = nn.ModuleDict(dict(tok=nn.Embedding(s.vocab, s.embed), pos=nn.Embedding(s.block, s.embed),
                                            layers=nn.ModuleList([Layer(s) for _ in range(s.depth)]),
                                            norm=nn.LayerNorm(s.embed)))
            self.out = nn.Linear(s.embed, s.vocab, bias=False)

        def forward(self, idx, targets=None):
            t = idx.size(1)
            where = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
            x = self.parts.tok(idx) + self.parts.pos(where)
            for layer in self.parts.layers:
                x = layer(x)
            logits = self.out(self.parts.norm(x))
            return logits, None if targets is None else next_token_loss(logits, targets)

    class Bigram(nn.Module):
        def __init__(self, s):
            super().__init__()
            self.block = 1
            self.table = nn.Parameter(torch.zeros((s.vocab, s.vocab)))

        def forward(self, idx, targets=None):
            logits = self.table[idx]
            return logits, None if targets is None else next_token_loss(logits, targets)

    class ContextMLP(nn.Module):
        """Each position sees the embeddings of its `block` predecessors (a blank token before
        the start), concatenated, through a tanh layer."""

        def __init__(self, s):
            super().__init__()
            self.block, self.blank = s.block, s.vocab
            self.embed = nn.Embedding(s.vocab + 1, s.embed)
            self.net = nn.Sequential(nn.Linear(s.block * s.embed, s.hidden), nn.Tanh(), nn.Linear(s.hidden, s.vocab))

        def forward(self, idx, targets=None):
            parts = []
            for _ in range(self.block):
                parts.append(self.embed(idx))
                idx = torch.roll(idx, 1, 1)
                idx[:, 0] = self.blank
            logits = self.net(torch.cat(parts, -1))
            return logits, None if targets is None else next_token_loss(logits, targets)

    class Recurrent(nn.Module):
        """A hand-written recurrence over the embeddings, from a learned first state: tanh or gated."""

        def __init__(self, s, gated):
            super().__init__()
            self.block, self.gated = s.block, gated
            self.first = nn.Parameter(torch.zeros(1, s.hidden))
            self.embed = nn.Embedding(s.vocab, s.embed)
            both = s.embed + s.hidden
            self.mix = nn.Linear(both, s.hidden)
            if gated:
                self.update, self.reset = nn.Linear(both, s.hidden), nn.Linear(both, s.hidden)
            self.out = nn.Linear(s.hidden, s.vocab)

        def cell(self, x, h):
            if not self.gated:
                return F.tanh(self.mix(torch.cat([x, h], dim=1)))
            xh = torch.cat([x, h], dim=1)
            r, z = F.sigmoid(self.reset(xh)), F.sigmoid(self.update(xh))
            candidate = F.tanh(self.mix(torch.cat([x, r * h], dim=1)))
            return (1 - z) * h + z * candidate

        def forward(self, idx, targets=None):
            e = self.embed(idx)
            h = self.first.expand((idx.size(0), -1))
            states = []
            for t in range(idx.size(1)):
                h = self.cell(e[:, t, :], h)
                states.append(h)
            logits = self.out(torch.stack(states, 1))
            return logits, None if targets is None else next_token_loss(logits, targets)

    class BagOfWords(nn.Module):
        """Each position averages its predecessors (a causal uniform attention), then an MLP."""

        def __init__(self, s):
            super().__init__()
            self.block = s.block
            self.tok, self.pos = nn.Embedding(s.vocab, s.embed), nn.Embedding(s.block, s.embed)
            self.register_buffer("past", torch.tril(torch.ones(s.block, s.block)).view(1, s.block, s.block))
            self.up, self.down = nn.Linear(s.embed, s.hidden), nn.Linear(s.hidden, s.embed)
            self.out = nn.Linear(s.embed, s.vocab)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            x = self.tok(idx) + self.pos(torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0))
            weights = torch.zeros(b, t, t, device=x.device).masked_fill(self.past[:, :t, :t] == 0, float("-inf"))
            x = x + F.softmax(weights, dim=-1) @ x
            x = x + self.down(F.tanh(self.up(x)))
            logits = self.out(x)
            return logits, None if targets is None else next_token_loss(logits, targets)

    kinds = {"transformer": Transformer, "bigram": Bigram, "mlp": ContextMLP,
             "rnn": lambda s: Recurrent(s, gated=False), "gru": lambda s: Recurrent(s, gated=True),
             "bow": BagOfWords}

    class Names(torch.utils.data.Dataset):
        """Words as (input, target) rows: a start token 0, the letters, targets -1 past the end."""

        def __init__(self, words, letters, longest):
            self.words, self.longest = words, longest
            self.code = {ch: i + 1 for i, ch in enumerate(letters)}
            self.letter = {i: ch for ch, i in self.code.items()}

        def __len__(self):
            return len(self.words)

        def vocab(self):
            return len(self.code) + 1

        def row_length(self):
            return self.longest + 1

        def has(self, word):
            return word in self.words

        def decode(self, ids):
            return "".join(self.letter[i] for i in ids)

        def __getitem__(self, i):
            ids = torch.tensor([self.code[ch] for ch in self.words[i]], dtype=torch.long)
            x = torch.zeros(self.longest + 1, dtype=torch.long)
            y = torch.zeros(self.longest + 1, dtype=torch.long)
            x[1:1 + len(ids)] = ids
            y[:len(ids)] = ids
            y[len(ids) + 1:] = -1
            return x, y

    class Endless:
        """Batches drawn with replacement from a sampler that never runs out (1e10 draws long)."""

        def __init__(self, data, batch_size):
            sampler = torch.utils.data.RandomSampler(data, replacement=True, num_samples=int(1e10))
            self.batches = iter(torch.utils.data.DataLoader(data, sampler=sampler, batch_size=batch_size))

        def next(self):
            return next(self.batches)

    @torch.no_grad()
    def complete(model, idx, steps, top_k=None):
        for _ in range(steps):
            window = idx if idx.size(1) <= model.block else idx[:, -model.block:]
            logits = model(window)[0][:, -1, :]
            if top_k is not None:
                kth = torch.topk(logits, top_k)[0][:, [-1]]
                logits[logits < kth] = -float("inf")
            idx = torch.cat((idx, torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)), dim=1)
        return idx

    @torch.inference_mode()
    def mean_loss(model, data, device, batch_size, max_batches):
        model.eval()
        losses = []
        for i, (x, y) in enumerate(torch.utils.data.DataLoader(data, shuffle=True, batch_size=batch_size)):
            losses.append(model(x.to(device), y.to(device))[1].item())
            if i + 1 >= max_batches:
                break
        model.train()
        return torch.tensor(losses).mean().item()

    def main(words, kind, device, steps, seed=3407, top_k=None):
        """Split, train with an endless loader, evaluate, and sample (what a names script does)."""
        torch.manual_seed(seed)
        letters = sorted(set("".join(words)))
        longest = max(len(w) for w in words)
        order = torch.randperm(len(words)).tolist()
        held = min(10, len(words) // 10)
        train = Names([words[i] for i in order[held:]], letters, longest)
        test = Names([words[i] for i in order[:held]], letters, longest)
        model = kinds[kind](Sizes(vocab=train.vocab(), block=train.row_length())).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8)
        loader = Endless(train, batch_size=8)
        for step in range(steps):
            x, y = (t.to(device) for t in loader.next())
            loss = model(x, y)[1]
            model.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        held_loss = mean_loss(model, test, device, 4, 2)
        drawn = complete(model, torch.zeros(3, 1, dtype=torch.long).to(device), train.row_length() - 1,
                         top_k=top_k).to("cpu")
        words_drawn = []
        for row in drawn[:, 1:].tolist():
            words_drawn.append(train.decode(row[:row.index(0)] if 0 in row else row))
        return step + 1, held_loss, words_drawn

    return types.SimpleNamespace(**locals())


def name_rows(lib, indices):
    """The batch a loader would give for these dataset indices."""
    p = names(lib)
    data = p.Names(NAMES, sorted(set("".join(NAMES))), max(len(w) for w in NAMES))
    return [lib.stack([data[i][j] for i in indices]) for j in range(2)], data


def name_model(lib, kind):
    p = names(lib)
    _, data = name_rows(lib, [0])
    lib.manual_seed(0)
    return p.kinds[kind](p.Sizes(vocab=data.vocab(), block=data.row_length()))


def name_steps(lib, model, device, batches):
    opt = lib.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8)
    losses = []
    for indices in batches:
        x, y = (t.to(device) for t in name_rows(lib, indices)[0])
        loss = model(x, y)[1]
        model.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


NAME_KINDS = ["transformer", "bigram", "mlp", "rnn", "gru", "bow"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", NAME_KINDS)
def test_name_models_train_as_pytorch(kind, device):
    rng = np.random.default_rng(2)
    batches = [rng.integers(0, len(NAMES), 8).tolist() for _ in range(3)]
    theirs = name_model(torch, kind)
    mine = load_from(theirs, name_model(loom, kind), device)
    want = name_steps(torch, theirs, "cpu", batches)
    assert_close(name_steps(loom, mine, device, batches), want, 2e-5)
    # a parameter whose gradient is rounding noise (a key projection's bias: softmax ignores a
    # constant per query) moves by AdamW's normalized noise, up to lr a step, in either library
    assert_same_state(mine, theirs, 1e-4, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_names_script(device):
    start = time.monotonic()
    steps, held_loss, drawn = names(loom).main(NAMES, "transformer", device, 3, top_k=4)
    assert time.monotonic() - start < 60  # the endless sampler does not draw its 1e10 indices up front
    assert steps == 3 and math.isfinite(held_loss)
    assert len(drawn) == 3 and all(set(w) <= set("".join(NAMES)) for w in drawn)


@pytest.mark.parametrize("kind", NAME_KINDS)
def test_name_model_step_compiled(kind):
    """The training step under loom.compile on lazy: replayed, with PyTorch's losses."""
    rng = np.random.default_rng(2)
    batches = [rng.integers(0, len(NAMES), 8).tolist() for _ in range(4)]
    theirs = name_model(torch, kind)
    want = name_steps(torch, theirs, "cpu", batches)
    model = load_from(name_model(torch, kind), name_model(loom, kind), "lazy")
    opt = loom.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8)

    @loom.compile
    def step(x, y):
        loss = model(x, y)[1]
        model.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    replays = loom.metrics()["compiled_replays"]
    got = [step(*(t.to("lazy") for t in name_rows(loom, indices)[0])).item() for indices in batches]
    assert loom.metrics()["compiled_replays"] > replays
    assert_close(got, want, 2e-5)
