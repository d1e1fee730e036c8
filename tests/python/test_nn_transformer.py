"""MultiheadAttention and the Transformer modules against torch.nn (float64, weights copied):
parameter names and layout (in_proj_weight, or q/k/v_proj_weight with kdim/vdim), reprs,
outputs, attention weights and gradients with masks (bool and float attn_mask, key_padding_mask),
bias_k/v, add_zero_attn, batch_first, unbatched input; encoder and decoder layers (post-norm
and norm_first, relu / gelu / a callable activation), stacks with a final norm, the full
Transformer and its causal mask; initialization; an encoder-decoder trained 20 steps reaches
PyTorch's losses; a lazy step with dropout and a scheduled lr replays one cached graph."""

import numpy as np
import pytest
from scipy import stats

import loom
from _nn_helpers import assert_close, check_against_torch, copy_weights, np_, to_loom
from _ops_helpers import device, torch  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def randn(*shape, seed=0):
    return torch.tensor(np.random.default_rng(seed).standard_normal(shape))


def make(name, *args, **kwargs):
    return getattr(torch.nn, name)(*args, **kwargs).double(), getattr(loom.nn, name)(*args, **kwargs).double()


MHA_CONFIGS = [dict(), dict(batch_first=True), dict(kdim=3, vdim=5), dict(add_bias_kv=True),
               dict(add_zero_attn=True, bias=False), dict(kdim=3, vdim=5, add_bias_kv=True, add_zero_attn=True)]


@pytest.mark.parametrize("kw", MHA_CONFIGS)
def test_mha_parameters_match_pytorch(kw):
    tm, lm = make("MultiheadAttention", 8, 2, **kw)
    assert [(n, tuple(p.shape)) for n, p in lm.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    assert list(lm.state_dict()) == list(tm.state_dict())
    assert repr(lm) == repr(tm)
    assert (lm.embed_dim, lm.kdim, lm.vdim, lm.head_dim, lm._qkv_same_embed_dim) == \
        (tm.embed_dim, tm.kdim, tm.vdim, tm.head_dim, tm._qkv_same_embed_dim)


def mha_inputs(kw, self_attention):
    first = (lambda *s: (s[1], s[0]) + s[2:]) if kw.get("batch_first") else (lambda *s: s)
    q = randn(*first(4, 2, 8))
    if self_attention:
        return [q, q, q]
    return [q, randn(*first(6, 2, kw.get("kdim", 8)), seed=1), randn(*first(6, 2, kw.get("vdim", 8)), seed=2)]


@pytest.mark.parametrize("kw", MHA_CONFIGS)
@pytest.mark.parametrize("masks", ["none", "bool", "float", "padding", "both", "per_head"])
def test_mha_matches_pytorch(device, kw, masks):
    tm, lm = make("MultiheadAttention", 8, 2, **kw)
    lm.to(device)
    self_attention = "kdim" not in kw and masks in ("none", "bool")
    q, k, v = mha_inputs(kw, self_attention)
    src = q.shape[0 if not kw.get("batch_first") else 1] if self_attention else 6
    extra = {"none": {}, "bool": {"attn_mask": torch.triu(torch.ones(4, src, dtype=torch.bool), 1)},
             "float": {"attn_mask": randn(4, src, seed=7)},
             "padding": {"key_padding_mask": torch.tensor([[False] * (src - 2) + [True] * 2, [False] * src])},
             "both": {"attn_mask": randn(4, src, seed=7),
                      "key_padding_mask": torch.tensor([[False] * (src - 1) + [True], [False] * src])},
             "per_head": {"attn_mask": randn(4, 4, src, seed=8), "average_attn_weights": False}}[masks]

    class Call(torch.nn.Module):  # the masks as keyword arguments of both modules
        def __init__(self, m, lib):
            super().__init__()
            self.m, self.lib = m, lib

        def forward(self, *args):
            convert = (lambda t: t) if self.lib is torch else (lambda t: to_loom(t, device))
            kwargs = {n: convert(t) if isinstance(t, torch.Tensor) else t for n, t in extra.items()}
            if self_attention:
                args = (args[0], args[0], args[0])
            return self.m(*args, **kwargs)

    tcall = Call(tm, torch)
    copy_weights(tm, lm, device)
    tins = [t.clone().requires_grad_() for t in ([q] if self_attention else [q, k, v])]
    lins = [to_loom(t, device).requires_grad_() for t in tins]
    tout = tcall(*tins)
    lout = lm(*(lins * 3 if self_attention else lins), **{n: to_loom(t, device) if isinstance(t, torch.Tensor) else t
                                                          for n, t in extra.items()})
    assert_close(lout, tout)
    (tout[0] * randn(*tout[0].shape, seed=9)).sum().backward()
    (lout[0] * to_loom(randn(*tout[0].shape, seed=9), device)).sum().backward()
    for t, lt in zip(tins, lins):
        assert_close(lt.grad, t.grad)
    lp = dict(lm.named_parameters())
    for n, p in tm.named_parameters():
        assert_close(lp[n].grad, p.grad, what=n)


def test_mha_need_weights_false_and_unbatched(device):
    tm, lm = make("MultiheadAttention", 6, 3)
    copy_weights(tm, lm.to(device), device)
    q, k = randn(4, 6), randn(5, 6, seed=1)
    out, weights = lm(to_loom(q, device), to_loom(k, device), to_loom(k, device), need_weights=False)
    assert weights is None
    assert_close(out, tm(q, k, k, need_weights=False)[0])
    assert_close(lm(to_loom(q, device), to_loom(k, device), to_loom(k, device),
                    key_padding_mask=to_loom(torch.tensor([False, False, True, False, True]), device)),
                 tm(q, k, k, key_padding_mask=torch.tensor([False, False, True, False, True])))


def test_mha_initialization():
    """in_proj_weight xavier_uniform_, biases zero, out_proj a Linear's default, bias_k/v
    xavier_normal_: the distributions PyTorch draws from."""
    loom.manual_seed(0)
    m = loom.nn.MultiheadAttention(64, 4, add_bias_kv=True)
    bound = np.sqrt(6 / (64 + 3 * 64))
    w = np_(m.in_proj_weight).ravel()
    assert w.min() >= -bound and w.max() <= bound
    assert stats.kstest(w, stats.uniform(-bound, 2 * bound).cdf).pvalue > 1e-3
    assert not np_(m.in_proj_bias).any() and not np_(m.out_proj.bias).any()
    out_bound = 1 / np.sqrt(64)
    assert np.abs(np_(m.out_proj.weight)).max() <= out_bound
    separate = loom.nn.MultiheadAttention(8, 2, kdim=3, vdim=5)
    assert separate.in_proj_weight is None and tuple(separate.k_proj_weight.shape) == (8, 3)


def test_mha_errors():
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        loom.nn.MultiheadAttention(6, 4)
    m = loom.nn.MultiheadAttention(4, 2)
    with pytest.raises(RuntimeError, match=r"The shape of the 2D attn_mask is .*, but should be \(3, 5\)"):
        m(loom.zeros(3, 1, 4), loom.zeros(5, 1, 4), loom.zeros(5, 1, 4), attn_mask=loom.zeros(3, 4))
    with pytest.raises(AssertionError, match="was expecting embedding dimension of 4, but got 5"):
        m(loom.zeros(3, 1, 5), loom.zeros(3, 1, 5), loom.zeros(3, 1, 5))


LAYER_CONFIGS = [dict(), dict(norm_first=True), dict(activation="gelu", batch_first=True),
                 dict(activation=torch.nn.functional.silu), dict(norm_first=True, layer_norm_eps=1e-3)]


def _loom_kw(kw):
    """The same configuration for loom: a torch callable activation becomes loom's."""
    if kw.get("activation") is torch.nn.functional.silu:
        return dict(kw, activation=loom.nn.functional.silu)
    return kw


@pytest.mark.parametrize("kw", LAYER_CONFIGS)
def test_encoder_layer_matches_pytorch(device, kw):
    tm = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **kw).double()
    lm = loom.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **_loom_kw(kw)).double().to(device)
    assert repr(lm) == repr(tm)
    assert list(lm.state_dict()) == list(tm.state_dict())
    x = randn(2, 5, 8) if kw.get("batch_first") else randn(5, 2, 8)
    check_against_torch(tm, lm, [x], device)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5).double()
    kpm = torch.tensor([[False] * 4 + [True], [False] * 5])
    copy_weights(tm, lm, device)
    assert_close(lm(to_loom(x, device), src_mask=to_loom(mask, device), src_key_padding_mask=to_loom(kpm, device)),
                 tm(x, src_mask=mask, src_key_padding_mask=kpm))


@pytest.mark.parametrize("kw", LAYER_CONFIGS)
def test_decoder_layer_matches_pytorch(device, kw):
    tm = torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, **kw).double()
    lm = loom.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, **_loom_kw(kw)).double().to(device)
    assert repr(lm) == repr(tm)
    assert list(lm.state_dict()) == list(tm.state_dict())
    bf = kw.get("batch_first")
    tgt, mem = (randn(2, 4, 8), randn(2, 6, 8, seed=1)) if bf else (randn(4, 2, 8), randn(6, 2, 8, seed=1))
    check_against_torch(tm, lm, [tgt, mem], device)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(4).double()
    mkpm = torch.tensor([[False] * 5 + [True], [False] * 6])
    assert_close(lm(to_loom(tgt, device), to_loom(mem, device), tgt_mask=to_loom(mask, device),
                    memory_key_padding_mask=to_loom(mkpm, device)),
                 tm(tgt, mem, tgt_mask=mask, memory_key_padding_mask=mkpm))


def test_activation_module_is_registered_as_pytorch_does():
    tm = torch.nn.TransformerEncoderLayer(4, 2, 8, activation=torch.nn.GELU())
    lm = loom.nn.TransformerEncoderLayer(4, 2, 8, activation=loom.nn.GELU())
    assert [n for n, _ in lm.named_children()] == [n for n, _ in tm.named_children()]
    assert repr(lm) == repr(tm)
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        loom.nn.TransformerEncoderLayer(4, 2, activation="tanh")


@pytest.mark.parametrize("kw", [dict(), dict(norm_first=True, batch_first=True, activation="gelu")])
def test_transformer_matches_pytorch(device, kw):
    torch.manual_seed(0)
    tm = torch.nn.Transformer(8, 2, 2, 2, 16, dropout=0.0, **kw).double()
    lm = loom.nn.Transformer(8, 2, 2, 2, 16, dropout=0.0, **kw).double().to(device)
    assert repr(lm) == repr(tm)
    assert [(n, tuple(p.shape)) for n, p in lm.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    bf = kw.get("batch_first")
    src, tgt = (randn(2, 5, 8), randn(2, 3, 8, seed=1)) if bf else (randn(5, 2, 8), randn(3, 2, 8, seed=1))

    class WithMask(torch.nn.Module):
        def __init__(self, m, mask):
            super().__init__()
            self.m, self.mask = m, mask

        def forward(self, s, t):
            return self.m(s, t, tgt_mask=self.mask)

        def state_dict(self, *args, **kwargs):
            return self.m.state_dict(*args, **kwargs)

        def named_parameters(self, *args, **kwargs):
            return self.m.named_parameters(*args, **kwargs)

    tmask = torch.nn.Transformer.generate_square_subsequent_mask(3).double()
    lmask = loom.nn.Transformer.generate_square_subsequent_mask(3, dtype=loom.float64, device=device)
    np.testing.assert_array_equal(np_(lmask), np_(tmask))
    tw, lw = WithMask(tm, tmask), WithMask(lm, lmask)
    lw.load_state_dict = lm.load_state_dict
    check_against_torch(tw, lw, [src, tgt], device)


def test_transformer_stacks_clone_their_layer(device):
    layer = loom.nn.TransformerEncoderLayer(4, 2, 8)
    stack = loom.nn.TransformerEncoder(layer, 3, norm=loom.nn.LayerNorm(4))
    assert [n for n, _ in stack.named_parameters()] == \
        [n for n, _ in torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(4, 2, 8), 3,
                                                   norm=torch.nn.LayerNorm(4)).named_parameters()]
    # copies: equal values, storage of their own
    a, b = stack.layers[0].linear1.weight, stack.layers[1].linear1.weight
    np.testing.assert_array_equal(np_(a), np_(b))
    assert a.data_ptr() != b.data_ptr() and a.data_ptr() != layer.linear1.weight.data_ptr()
    assert isinstance(stack.layers[2].linear1.weight, loom.nn.Parameter) and a.requires_grad


def test_transformer_initialization_and_errors():
    loom.manual_seed(0)
    m = loom.nn.Transformer(16, 2, 1, 1, 32)
    w = np_(m.encoder.layers[0].linear1.weight).ravel()  # xavier_uniform_ over every matrix
    bound = np.sqrt(6 / (16 + 32))
    assert w.min() >= -bound and w.max() <= bound
    assert stats.kstest(w, stats.uniform(-bound, 2 * bound).cdf).pvalue > 1e-3
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        m(loom.zeros(3, 2, 16), loom.zeros(3, 1, 16))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal to d_model"):
        m(loom.zeros(3, 2, 16), loom.zeros(3, 2, 8))


# ---- training ----

def build_seq2seq(lib, dropout=0.0, vocab=13):
    nn = lib.nn

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, 16)
            self.transformer = nn.Transformer(16, 2, 2, 2, 32, dropout=dropout, batch_first=True)
            self.head = nn.Linear(16, vocab)

        def forward(self, src, tgt, tgt_mask):
            return self.head(self.transformer(self.embed(src), self.embed(tgt), tgt_mask=tgt_mask))

    return Seq2Seq()


def seq2seq_data(steps, batch=4, length=6, vocab=13):
    """Copy task: the target is the source shifted by one token (learnable)."""
    g = np.random.default_rng(0)
    out = []
    for _ in range(steps):
        src = g.integers(1, vocab, size=(batch, length))
        out.append((src, np.concatenate([np.zeros((batch, 1), np.int64), src], 1)))
    return out


def seq2seq_losses(lib, model, data, device="cpu", scheduler=False):
    opt = lib.optim.AdamW(model.parameters(), lr=3e-3)
    sched = lib.optim.lr_scheduler.LinearLR(opt, 0.2, 1.0, total_iters=10) if scheduler else None
    length = data[0][1].shape[1] - 1
    mask = lib.nn.Transformer.generate_square_subsequent_mask(length)
    if lib is loom:
        mask = mask.to(device)
    losses = []
    for src, tgt in data:
        s, t = (torch.tensor(src), torch.tensor(tgt)) if lib is torch else (loom.tensor(src, device=device),
                                                                           loom.tensor(tgt, device=device))
        opt.zero_grad()
        logits = model(s, t[:, :-1], mask)
        loss = lib.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), t[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_encoder_decoder_reaches_pytorch_losses(device):
    torch.manual_seed(0)
    tm = build_seq2seq(torch)
    lm = build_seq2seq(loom)
    copy_weights(tm, lm)
    lm.to(device)
    data = seq2seq_data(20)
    want = seq2seq_losses(torch, tm, data, scheduler=True)
    got = seq2seq_losses(loom, lm, data, device, scheduler=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert got[-1] < got[0]


def test_lazy_transformer_steady_state_compiles_nothing():
    loom.manual_seed(0)
    model = build_seq2seq(loom, dropout=0.1).to("lazy")
    opt = loom.optim.AdamW(model.parameters(), lr=1e-3)
    sched = loom.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=8)
    mask = loom.nn.Transformer.generate_square_subsequent_mask(6).to("lazy")
    data = seq2seq_data(9)

    def step(src, tgt):
        s, t = loom.tensor(src, device="lazy"), loom.tensor(tgt, device="lazy")
        opt.zero_grad()
        logits = model(s, t[:, :-1], mask)
        loss = loom.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), t[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        sched.step()
        return loss.item()

    for src, tgt in data[:3]:
        step(src, tgt)
    for src, tgt in data[3:]:
        lr = opt.param_groups[0]["lr"]
        before = loom.metrics()
        step(src, tgt)
        after = loom.metrics()
        assert opt.param_groups[0]["lr"] != lr
        delta = {k: after[k] - before[k] for k in ("traces", "graph_replays", "kernels_compiled",
                                                      "graph_cache_misses")}
        assert delta == {"traces": 1, "graph_replays": 1, "kernels_compiled": 0, "graph_cache_misses": 0}
