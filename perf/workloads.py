"""The workloads of BENCH.md, written once as plain PyTorch-style code.

Every function takes the library as an argument (`loom` or `torch`), so the same program runs in
every mode of the harness, and the training tests reuse the models. Models are built in PyTorch
from a fixed seed and copied, so every mode starts from the same initial weights.
"""

import math

import numpy as np

# ---- models (one definition, either library) ----


def mlp_model(m):
    """64 -> 128 -> 128 -> 128 -> 10 with GELU."""
    nn = m.nn
    return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 128),
                         nn.GELU(), nn.Linear(128, 10))


GPT = dict(vocab=65, context=32, width=64, layers=2, heads=4, batch=16)


def gpt_model(m, vocab=GPT["vocab"], context=GPT["context"], width=GPT["width"], layers=GPT["layers"],
              heads=GPT["heads"]):
    """A character transformer: token and position embeddings, pre-norm blocks of causal
    self-attention and a GELU MLP, a final norm and a linear head."""
    nn, F = m.nn, m.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(width, 3 * width)
            self.proj = nn.Linear(width, width)

        def forward(self, x):
            b, t, c = x.shape
            qkv = self.qkv(x).view(b, t, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // heads))
            causal = m.ones(t, t, dtype=m.bool, device=x.device).tril()
            scores = scores.masked_fill(~causal, float("-inf"))
            y = F.softmax(scores, dim=-1) @ v
            return self.proj(y.transpose(1, 2).reshape(b, t, c))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(width)
            self.attn = Attention()
            self.ln2 = nn.LayerNorm(width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPTModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(vocab, width)
            self.positions = nn.Embedding(context, width)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(width)
            self.head = nn.Linear(width, vocab)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.tokens(idx) + self.positions(m.arange(t, device=idx.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    return GPTModel()


def copy_weights(torch_model, loom_model, loom):
    """Loads a PyTorch model's weights into the equivalent loom model."""
    loom_model.load_state_dict({k: loom.tensor(v.detach().numpy()) for k, v in torch_model.state_dict().items()})


# ---- data ----


def mlp_data(batch=32, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, 64)).astype(np.float32), rng.integers(0, 10, batch).astype(np.int64)


def gpt_data(seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, GPT["vocab"], (GPT["batch"], GPT["context"] + 1)).astype(np.int64)
    return tokens[:, :-1].copy(), tokens[:, 1:].copy()


# ---- steps ----


def train_step(m, model, optimizer, x, y):
    """One training step: forward, cross-entropy, backward, optimizer update. Returns the loss
    tensor (reading it is the sync point)."""
    logits = model(x)
    loss = m.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


def chain(m, x):
    """16 elementwise ops."""
    y = x * 1.5 + 0.5
    y = y.tanh() * 0.9
    y = y.sigmoid() - 0.25
    y = (y * y + 0.1).sqrt()
    y = y.exp() * 0.5
    y = m.where(y > 0.6, y, y * 2.0)
    y = (y - 0.3).abs() + 1.0
    return y.log() * 0.7


def chain_numpy(x):
    y = x * np.float32(1.5) + np.float32(0.5)
    y = np.tanh(y) * np.float32(0.9)
    y = 1 / (1 + np.exp(-y)) - np.float32(0.25)
    y = np.sqrt(y * y + np.float32(0.1))
    y = np.exp(y) * np.float32(0.5)
    y = np.where(y > np.float32(0.6), y, y * np.float32(2.0))
    y = np.abs(y - np.float32(0.3)) + np.float32(1.0)
    return np.log(y) * np.float32(0.7)


def chain_sum(m, x):
    """The chain, then a full sum (issue 15: a split reduction, two kernels)."""
    return chain(m, x).sum()


def chain_sum_numpy(x):
    return chain_numpy(x).sum(dtype=np.float64).astype(np.float32)


def softmax_layer_norm(m, x, weight, bias):
    """Row softmax and layer norm of the same input (forward only)."""
    F = m.nn.functional
    return F.softmax(x, dim=-1), F.layer_norm(x, (x.shape[-1],), weight, bias)
