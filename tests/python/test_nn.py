"""loom.nn against torch.nn: Module registration and traversal, state dicts, modes, conversion
to a dtype and to lazy mode, every layer's forward (and backward) with weights copied from
PyTorch, default initializations, reprs, and the functional API.
"""

import math
from collections import OrderedDict

import numpy as np
import pytest

import loom
from _ops_helpers import device, torch  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TF = torch.nn.functional
LF = loom.nn.functional


def np_(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    if t.dtype is loom.bfloat16:
        t = t.float()
    return np.asarray(t.numpy())


def to_loom(t, device="cpu"):
    return loom.tensor(t.detach().numpy().copy(), device=device)


def copy_weights(tmodel, lmodel, device="cpu"):
    """loads PyTorch's parameters and buffers into the loom model (strict)."""
    state = OrderedDict((k, to_loom(v, device)) for k, v in tmodel.state_dict().items())
    lmodel.load_state_dict(state)


def close(a, b, rtol=1e-5, atol=1e-6):
    a, b = np_(a), np.asarray(np_(b) if not isinstance(b, np.ndarray) else b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# ---- a model written once for both libraries ----

def build(m):
    nn = m.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(4)
            self.fc = nn.Linear(4, 4)
            self.register_buffer("running", m.zeros(4))
            self.register_buffer("scratch", m.ones(1), persistent=False)
            self.scale = nn.Parameter(m.ones(1))
            self.act = nn.GELU()

        def forward(self, x):
            return self.act(self.fc(self.norm(x))) * self.scale + self.running

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(4, 3, bias=False)
            self.extra = nn.ModuleDict({"z": nn.Linear(4, 1), "a": nn.Identity()})
            self.seq = nn.Sequential(nn.Tanh(), nn.Dropout(0.25))
            self.shared = self.head  # the same module twice

        def forward(self, i):
            h = self.emb(i)
            for b in self.blocks:
                h = b(h)
            return self.head(self.seq(h))

    return Net()


@pytest.fixture
def models():
    torch.manual_seed(0)
    t, lm = build(torch), build(loom)
    copy_weights(t, lm)
    return t, lm


# ---- registration and traversal ----

def test_parameters_buffers_modules_traversal_matches_pytorch(models):
    t, lm = models
    assert [n for n, _ in lm.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in lm.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert [n for n, _ in lm.named_modules()] == [n for n, _ in t.named_modules()]
    assert [n for n, _ in lm.named_children()] == [n for n, _ in t.named_children()]
    assert len(list(lm.parameters())) == len(list(t.parameters())) == 14  # shared head counted once
    assert len(list(lm.modules())) == len(list(t.modules()))
    assert len(list(lm.children())) == len(list(t.children()))
    assert [type(c).__name__ for c in lm.children()] == [type(c).__name__ for c in t.children()]
    assert [n for n, _ in lm.named_parameters(prefix="model")] == [n for n, _ in t.named_parameters(prefix="model")]
    assert [n for n, _ in lm.blocks[0].named_parameters(recurse=False)] == ["scale"]
    assert [n for n, _ in lm.blocks[0].named_buffers(recurse=False)] == ["running", "scratch"]
    assert list(lm.parameters(recurse=False)) == []
    assert all(isinstance(p, loom.nn.Parameter) and p.requires_grad and p.is_leaf for p in lm.parameters())
    assert all(not b.requires_grad for b in lm.buffers())


def test_state_dict_keys_order_and_values_match_pytorch(models):
    t, lm = models
    ts, ls = t.state_dict(), lm.state_dict()
    assert list(ls.keys()) == list(ts.keys())
    assert "blocks.0.scratch" not in ls  # non-persistent buffer
    assert "shared.weight" in ls  # as PyTorch: a shared module appears under each name
    for k in ts:
        assert tuple(ls[k].shape) == tuple(ts[k].shape)
        close(ls[k], ts[k], rtol=0, atol=0)
        assert not ls[k].requires_grad


def test_state_dict_shares_storage_and_keep_vars(models):
    _, lm = models
    sd = lm.state_dict()
    assert sd["head.weight"].data_ptr() == lm.head.weight.data_ptr()
    kv = lm.state_dict(keep_vars=True)
    assert kv["head.weight"] is lm.head.weight
    assert kv["blocks.0.running"] is lm.blocks[0].running


def test_load_state_dict_strict(models):
    _, lm = models
    sd = lm.state_dict()
    del sd["head.weight"]
    sd["unexpected.weight"] = loom.zeros(1)
    with pytest.raises(RuntimeError, match=r"Error\(s\) in loading state_dict for Net") as e:
        lm.load_state_dict(sd)
    assert "head.weight" in str(e.value) and "unexpected.weight" in str(e.value)


def test_load_state_dict_non_strict_reports_missing_and_unexpected(models):
    _, lm = models
    before = np_(lm.head.weight).copy()
    sd = {"emb.weight": loom.ones(10, 4), "bogus": loom.zeros(2)}
    missing, unexpected = lm.load_state_dict(sd, strict=False)
    assert unexpected == ["bogus"]
    assert "emb.weight" not in missing and "head.weight" in missing and "blocks.1.fc.bias" in missing
    assert missing == [k for k in lm.state_dict() if k != "emb.weight"]
    np.testing.assert_array_equal(np_(lm.emb.weight), np.ones((10, 4), np.float32))
    np.testing.assert_array_equal(np_(lm.head.weight), before)


def test_load_state_dict_result_has_named_fields():
    lin = loom.nn.Linear(2, 2)
    result = lin.load_state_dict({"weight": loom.zeros(2, 2)}, strict=False)
    assert result.missing_keys == ["bias"] and result.unexpected_keys == []


def test_load_state_dict_result_and_errors_match_torch():
    results = {}
    for lib in (torch, loom):
        lin = lib.nn.Linear(2, 2)
        ok = lin.load_state_dict(lib.nn.Linear(2, 2).state_dict())
        partial = lin.load_state_dict({"weight": lib.zeros(2, 2), "x": lib.ones(1)}, strict=False)
        assert isinstance(ok, tuple) and tuple(partial) == (["bias"], ["x"])
        seq = lib.nn.Sequential(lib.nn.Linear(2, 2))
        # "0.bias.q" names an entry of a child: PyTorch does not count it as unexpected
        bad = {"0.weight": lib.zeros(3, 2), "x": lib.ones(1), "0.bias.q": lib.zeros(1), "1.w": lib.ones(1)}
        with pytest.raises(RuntimeError) as strict:
            seq.load_state_dict(bad)
        with pytest.raises(RuntimeError) as lenient:
            seq.load_state_dict(bad, strict=False)
        with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
            seq.load_state_dict([("0.weight", lib.zeros(2, 2))])
        results[lib] = [repr(ok), repr(partial), str(partial), str(strict.value).replace("loom.", "torch."),
                        str(lenient.value).replace("loom.", "torch.")]
    assert results[loom] == results[torch]
    assert results[loom][0] == "<All keys matched successfully>"


def test_load_state_dict_copies_the_values_that_fit_before_raising():
    for lib in (torch, loom):
        seq = lib.nn.Sequential(lib.nn.Linear(2, 2))
        with pytest.raises(RuntimeError, match="size mismatch for 0.weight"):
            seq.load_state_dict({"0.weight": lib.zeros(3, 2), "0.bias": lib.full((2,), 7.0)})
        assert seq[0].bias.tolist() == [7.0, 7.0]


def test_load_state_dict_non_persistent_buffer_is_unexpected():
    m = loom.nn.Module()
    m.register_buffer("kept", loom.zeros(1))
    m.register_buffer("scratch", loom.zeros(1), persistent=False)
    assert tuple(m.load_state_dict({"kept": loom.ones(1), "scratch": loom.ones(1)}, strict=False)) == ([], ["scratch"])
    m.register_buffer("scratch", loom.zeros(1))  # persistent again, as in PyTorch
    assert "scratch" in m.state_dict()
    with pytest.raises(TypeError, match="cannot assign"):
        m.register_buffer("x", 3)


def test_load_state_dict_size_mismatch_raises(models):
    _, lm = models
    sd = lm.state_dict()
    sd["head.weight"] = loom.zeros(4, 4)
    with pytest.raises(RuntimeError, match="size mismatch for head.weight"):
        lm.load_state_dict(sd)
    with pytest.raises(RuntimeError, match="size mismatch"):
        lm.load_state_dict(sd, strict=False)


def test_load_state_dict_copies_in_place(device):
    lin = loom.nn.Linear(3, 2).to(device)
    w = lin.weight
    ptr = w.data_ptr() if device == "cpu" else None
    lin.load_state_dict({"weight": loom.full((2, 3), 0.5, device=device), "bias": loom.zeros(2, device=device)})
    assert lin.weight is w and w.requires_grad and w.is_leaf
    if ptr is not None:
        assert w.data_ptr() == ptr
    np.testing.assert_array_equal(np_(w), np.full((2, 3), 0.5, np.float32))


def test_setattr_registration_rules():
    m = loom.nn.Module()
    m.w = loom.nn.Parameter(loom.ones(2))
    m.child = loom.nn.Linear(2, 2)
    m.plain = loom.ones(2)  # a plain tensor attribute is neither parameter nor buffer
    m.register_buffer("buf", loom.zeros(2))
    assert list(m._parameters) == ["w"] and list(m._modules) == ["child"] and list(m._buffers) == ["buf"]
    assert [n for n, _ in m.named_parameters()] == ["w", "child.weight", "child.bias"]
    with pytest.raises(TypeError, match="cannot assign"):
        m.w = loom.ones(2)
    with pytest.raises(TypeError, match="cannot assign"):
        torch.nn.Linear(2, 2).weight = torch.ones(2, 2)
    m.w = None
    assert [n for n, _ in m.named_parameters()] == ["child.weight", "child.bias"]
    m.buf = loom.ones(3)
    assert m.buf.shape == (3,) and "buf" in m.state_dict()
    with pytest.raises(TypeError):
        m.buf = 3
    del m.child
    assert not hasattr(m, "child")
    with pytest.raises(AttributeError, match="has no attribute"):
        m.nothing
    with pytest.raises(TypeError):
        m.register_parameter("q", loom.ones(2))
    m.register_parameter("q", None)
    assert "q" not in m.state_dict()
    with pytest.raises(AttributeError):
        class Early(loom.nn.Module):
            def __init__(self):
                self.p = loom.nn.Parameter(loom.ones(1))
                super().__init__()
        Early()


def test_reassigning_a_name_moves_it_between_kinds():
    m = loom.nn.Module()
    m.x = loom.nn.Linear(1, 1)
    m.x = loom.nn.Parameter(loom.ones(1))
    assert "x" in m._parameters and "x" not in m._modules
    m.x = loom.nn.Tanh()
    assert "x" in m._modules and "x" not in m._parameters


def test_missing_forward_raises():
    with pytest.raises(NotImplementedError, match='missing the required "forward" function'):
        loom.nn.Module()(loom.ones(1))


def test_parameter_basics(device):
    p = loom.nn.Parameter(loom.ones(2, 3, device=device))
    assert isinstance(p, loom.Tensor) and isinstance(p, loom.nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    q = loom.nn.Parameter(loom.ones(2), requires_grad=False)
    assert not q.requires_grad
    assert loom.nn.Parameter().shape == (0,)
    r = p * 2  # ops on parameters give plain tensors with history
    assert r.requires_grad and r.grad_fn is not None
    assert repr(loom.nn.Parameter(loom.ones(2))) == repr(torch.nn.Parameter(torch.ones(2)))


# ---- modes and bulk operations ----

def test_train_eval(models):
    _, lm = models
    assert all(m.training for m in lm.modules())
    assert lm.eval() is lm
    assert not any(m.training for m in lm.modules())
    lm.train()
    assert all(m.training for m in lm.modules())
    lm.blocks.train(False)
    assert lm.training and not lm.blocks.training and not lm.blocks[1].fc.training and lm.head.training


def test_apply_visits_children_first(models):
    t, lm = models
    seen, tseen = [], []
    assert lm.apply(lambda m: seen.append(type(m).__name__)) is lm
    t.apply(lambda m: tseen.append(type(m).__name__))
    assert seen == tseen


def test_apply_can_initialize(device):
    model = loom.nn.Sequential(loom.nn.Linear(3, 4), loom.nn.ReLU(), loom.nn.Linear(4, 2)).to(device)

    def init(m):
        if isinstance(m, loom.nn.Linear):
            loom.nn.init.constant_(m.weight, 0.5)
            loom.nn.init.zeros_(m.bias)

    model.apply(init)
    out = model(loom.ones(1, 3, device=device))
    np.testing.assert_allclose(np_(out), [[3.0, 3.0]])


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(device, set_to_none):
    model = loom.nn.Sequential(loom.nn.Linear(3, 2), loom.nn.Linear(2, 1)).to(device)
    model(loom.ones(4, 3, device=device)).sum().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None for g in grads)
    model.zero_grad(set_to_none=set_to_none)
    for p, g in zip(model.parameters(), grads):
        if set_to_none:
            assert p.grad is None
        else:
            assert p.grad is not None
            if device == "cpu":
                assert p.grad.data_ptr() == g.data_ptr()  # zeroed in place
            assert not np.any(np_(p.grad)) and not np.any(np_(g))


def test_requires_grad_on_a_module():
    model = loom.nn.Linear(3, 2)
    assert model.requires_grad_(False) is model
    assert not any(p.requires_grad for p in model.parameters())
    out = model(loom.ones(1, 3))
    assert not out.requires_grad


def test_to_dtype_and_back(models):
    _, lm = models
    lm.to(loom.float64)
    assert all(p.dtype is loom.float64 for p in lm.parameters())
    assert all(b.dtype is loom.float64 for b in lm.buffers())
    assert all(isinstance(p, loom.nn.Parameter) and p.requires_grad and p.is_leaf for p in lm.parameters())
    lm.float()
    assert all(p.dtype is loom.float32 for p in lm.parameters())
    lm.double()
    assert all(p.dtype is loom.float64 for p in lm.parameters())
    lm.half()
    assert all(p.dtype is loom.float16 for p in lm.parameters())
    assert lm.to(dtype=loom.float32) is lm


def test_to_keeps_integer_buffers():
    m = loom.nn.Linear(2, 2)
    m.register_buffer("steps", loom.zeros(1, dtype=loom.int64))
    m.to(loom.float64)
    assert m.steps.dtype is loom.int64 and m.weight.dtype is loom.float64


def test_to_lazy_moves_parameters_and_buffers_to_lazy_mode(models):
    t, lm = models
    values = {k: np_(v).copy() for k, v in lm.state_dict().items()}
    assert lm.to("lazy") is lm
    for name, p in lm.named_parameters():
        assert p.is_lazy and isinstance(p, loom.nn.Parameter) and p.requires_grad and p.is_leaf, name
    assert all(b.is_lazy for b in lm.buffers())
    for k, v in lm.state_dict().items():
        np.testing.assert_array_equal(np_(v), values[k])
    lm.eval()
    t.eval()
    i = np.array([[1, 2, 9], [0, 0, 3]])
    out = lm(loom.tensor(i, device="lazy"))
    assert out.is_lazy
    close(out, t(torch.from_numpy(i)))
    lm.to("cpu")
    assert not any(p.is_lazy for p in lm.parameters())
    lm.to(device="lazy", dtype=loom.float64)
    assert all(p.is_lazy and p.dtype is loom.float64 for p in lm.parameters())


@pytest.mark.parametrize("move", ["float64", "lazy", "lazy_float64", "double", "half_then_float"])
def test_to_keeps_the_parameter_objects(move):
    """As PyTorch: Module.to() changes the Parameters' data in place, so an optimizer made before
    the move keeps training the module (and the gradient moves with the parameter)."""
    loom.manual_seed(0)
    m = loom.nn.Sequential(loom.nn.Linear(3, 4), loom.nn.ReLU(), loom.nn.Linear(4, 2))
    before = list(m.parameters())
    opt = loom.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    x = loom.randn(5, 3)
    m(x).sum().backward()
    if move == "float64":
        m.to(loom.float64)
    elif move == "lazy":
        m.to("lazy")
    elif move == "lazy_float64":
        m.to(device="lazy", dtype=loom.float64)
    elif move == "double":
        m.double()
    else:
        m.half().float()
    dtype = loom.float32 if move in ("lazy", "half_then_float") else loom.float64
    lazy = move.startswith("lazy")
    after = list(m.parameters())
    assert all(a is b for a, b in zip(after, before)) and len(after) == 4
    for p in after:
        assert isinstance(p, loom.nn.Parameter) and p.is_leaf and p.requires_grad
        assert p.dtype is dtype and p.is_lazy == lazy
        assert p.grad is not None and p.grad.dtype is dtype and p.grad.is_lazy == lazy
    values = [np_(p).copy() for p in after]
    x = x.to(device="lazy" if lazy else "cpu", dtype=dtype)
    for _ in range(2):
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()
    assert all(p is q for p, q in zip(m.parameters(), opt.param_groups[0]["params"]))
    for p, v in zip(after, values):
        assert p.is_leaf and p.requires_grad and p.dtype is dtype and p.is_lazy == lazy
        assert not np.array_equal(np_(p), v)  # the optimizer made before the move trained them


def test_to_rejects_integer_dtypes_like_torch():
    for lib in (torch, loom):
        with pytest.raises(TypeError, match="only accepts floating point"):
            lib.nn.Linear(2, 2).to(lib.int64)


def test_to_like_a_tensor():
    m = loom.nn.Linear(2, 2)
    m.to(loom.zeros(1, dtype=loom.float64, device="lazy"))
    assert all(p.is_lazy and p.dtype is loom.float64 for p in m.parameters())


def test_whole_model_forward_and_backward_match_pytorch(models, device):
    t, lm = models
    lm.to(device)
    t.eval()
    lm.eval()
    i = np.array([[1, 2, 9, 4], [0, 0, 3, 7]])
    target = np.array([[0, 2, 1, 1], [2, 2, 0, 1]])
    tl = TF.cross_entropy(t(torch.from_numpy(i)).reshape(-1, 3), torch.from_numpy(target).reshape(-1))
    ll = LF.cross_entropy(lm(loom.tensor(i, device=device)).reshape(-1, 3),
                          loom.tensor(target, device=device).reshape(-1))
    tl.backward()
    ll.backward()
    assert ll.item() == pytest.approx(tl.item(), rel=1e-5)
    tparams = dict(t.named_parameters())
    for name, p in lm.named_parameters():
        if tparams[name].grad is None:  # extra.* is not used by forward
            assert p.grad is None, name
            continue
        assert p.grad is not None, name
        assert p.grad.is_lazy == (device == "lazy")
        close(p.grad, tparams[name].grad, rtol=1e-4, atol=1e-6)


# ---- containers ----

def test_sequential():
    a, b, c = loom.nn.Linear(2, 3), loom.nn.ReLU(), loom.nn.Linear(3, 1)
    s = loom.nn.Sequential(a, b, c)
    assert len(s) == 3 and s[0] is a and s[-1] is c and list(s) == [a, b, c]
    sub = s[1:]
    assert isinstance(sub, loom.nn.Sequential) and list(sub) == [b, c]
    x = loom.randn(4, 2)
    close(s(x), c(b(a(x))), rtol=0, atol=0)
    s.append(loom.nn.Tanh())
    assert len(s) == 4 and [n for n, _ in s.named_children()] == ["0", "1", "2", "3"]
    named = loom.nn.Sequential(OrderedDict([("first", a), ("act", b)]))
    assert [n for n, _ in named.named_children()] == ["first", "act"] and named.first is a
    assert [n for n, _ in named.named_parameters()] == ["first.weight", "first.bias"]
    assert loom.nn.Sequential()(x) is x


def test_module_list():
    layers = loom.nn.ModuleList([loom.nn.Linear(2, 2) for _ in range(2)])
    assert len(layers) == 2
    layers.append(loom.nn.Tanh())
    layers.extend([loom.nn.Identity(), loom.nn.ReLU()])
    assert len(layers) == 5 and isinstance(layers[-1], loom.nn.ReLU)
    assert [type(m).__name__ for m in layers] == ["Linear", "Linear", "Tanh", "Identity", "ReLU"]
    assert isinstance(layers[1:3], loom.nn.ModuleList) and len(layers[1:3]) == 2
    new = loom.nn.Linear(2, 2)
    layers[0] = new
    assert layers[0] is new
    assert [n for n, _ in layers.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert len(loom.nn.ModuleList()) == 0


def test_module_dict():
    d = loom.nn.ModuleDict({"b": loom.nn.Linear(1, 1), "a": loom.nn.ReLU()})
    assert list(d.keys()) == ["b", "a"] and len(d) == 2 and "a" in d and "z" not in d
    assert list(d) == ["b", "a"]
    d["c"] = loom.nn.Tanh()
    assert list(d.keys()) == ["b", "a", "c"]
    assert [type(v).__name__ for v in d.values()] == ["Linear", "ReLU", "Tanh"]
    assert [k for k, _ in d.items()] == ["b", "a", "c"]
    del d["a"]
    assert list(d.keys()) == ["b", "c"]
    assert [n for n, _ in d.named_parameters()] == ["b.weight", "b.bias"]


# ---- every layer against PyTorch ----

LAYERS = {
    "Linear": (lambda m: m.nn.Linear(5, 3), (4, 5)),
    "Linear_no_bias": (lambda m: m.nn.Linear(5, 3, bias=False), (2, 4, 5)),
    "Linear_1d_input": (lambda m: m.nn.Linear(5, 3), (5,)),
    "LayerNorm": (lambda m: m.nn.LayerNorm(5), (4, 5)),
    "LayerNorm_2d": (lambda m: m.nn.LayerNorm((3, 5), eps=1e-3), (2, 3, 5)),
    "LayerNorm_no_affine": (lambda m: m.nn.LayerNorm(5, elementwise_affine=False), (4, 5)),
    "Dropout_eval": (lambda m: m.nn.Dropout(0.5), (4, 5)),
    "ReLU": (lambda m: m.nn.ReLU(), (4, 5)),
    "GELU": (lambda m: m.nn.GELU(), (4, 5)),
    "GELU_tanh": (lambda m: m.nn.GELU(approximate="tanh"), (4, 5)),
    "SiLU": (lambda m: m.nn.SiLU(), (4, 5)),
    "Tanh": (lambda m: m.nn.Tanh(), (4, 5)),
    "Sigmoid": (lambda m: m.nn.Sigmoid(), (4, 5)),
    "Softmax": (lambda m: m.nn.Softmax(dim=1), (4, 5)),
    "Softmax_dim0": (lambda m: m.nn.Softmax(dim=0), (4, 5)),
    "Identity": (lambda m: m.nn.Identity(3, unused=True), (4, 5)),
    "Sequential": (lambda m: m.nn.Sequential(m.nn.Linear(5, 8), m.nn.GELU(), m.nn.LayerNorm(8), m.nn.Linear(8, 2)),
                   (3, 5)),
    "ModuleList_chain": (lambda m: _Chain(m), (3, 5)),
}


def _Chain(m):
    class Chain(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = m.nn.ModuleList([m.nn.Linear(5, 5), m.nn.SiLU(), m.nn.Linear(5, 4)])
            self.heads = m.nn.ModuleDict({"a": m.nn.Linear(4, 2), "b": m.nn.Tanh()})

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.heads["b"](self.heads["a"](x))

    return Chain()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(LAYERS))
def test_layer_forward_and_backward_match_pytorch(device, name, dtype):
    make_layer, shape = LAYERS[name]
    torch.manual_seed(1)
    t = make_layer(torch).to(getattr(torch, dtype))
    lm = make_layer(loom)
    lm.to(getattr(loom, dtype))
    copy_weights(t, lm)
    lm.to(device)
    t.eval()
    lm.eval()
    x = np.random.default_rng(3).standard_normal(shape).astype(dtype)
    tx = torch.from_numpy(x.copy()).requires_grad_()
    lx = loom.tensor(x, device=device).requires_grad_()
    tout, lout = t(tx), lm(lx)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-13)
    assert tuple(lout.shape) == tuple(tout.shape) and lout.dtype is getattr(loom, dtype)
    close(lout, tout, **tol)
    g = np.random.default_rng(4).standard_normal(tuple(tout.shape)).astype(dtype)
    tout.backward(torch.from_numpy(g))
    lout.backward(loom.tensor(g, device=device))
    close(lx.grad, tx.grad, **tol)
    tparams = dict(t.named_parameters())
    for n, p in lm.named_parameters():
        close(p.grad, tparams[n].grad, **tol)


def test_embedding_forward_and_backward_match_pytorch(device):
    torch.manual_seed(0)
    t = torch.nn.Embedding(7, 3)
    lm = loom.nn.Embedding(7, 3)
    copy_weights(t, lm)
    lm.to(device)
    i = np.array([[0, 6, 2], [2, 2, 5]])
    tout, lout = t(torch.from_numpy(i)), lm(loom.tensor(i, device=device))
    close(lout, tout, rtol=0, atol=0)
    g = np.random.default_rng(0).standard_normal((2, 3, 3)).astype(np.float32)
    tout.backward(torch.from_numpy(g))
    lout.backward(loom.tensor(g, device=device))
    close(lm.weight.grad, t.weight.grad)
    assert tuple(lm(loom.tensor(3, device=device)).shape) == (3,)


def test_embedding_padding_idx_row_is_zero():
    loom.manual_seed(0)
    e = loom.nn.Embedding(5, 3, padding_idx=1)
    np.testing.assert_array_equal(np_(e.weight)[1], np.zeros(3, np.float32))
    assert e.padding_idx == 1


def test_embedding_padding_idx_row_gets_no_gradient(device):
    e = loom.nn.Embedding(5, 3, padding_idx=1).to(device)
    e(loom.tensor([[1, 2, 1]], device=device)).sum().backward()
    np.testing.assert_array_equal(np_(e.weight.grad)[1], np.zeros(3, np.float32))


def test_dropout_eval_is_identity_and_p_zero(device):
    x = loom.randn(4, 5, device=device)
    d = loom.nn.Dropout(0.7).eval()
    close(d(x), x, rtol=0, atol=0)
    close(loom.nn.Dropout(0.0)(x), x, rtol=0, atol=0)
    close(LF.dropout(x, 0.4, training=False), x, rtol=0, atol=0)
    np.testing.assert_array_equal(np_(loom.nn.Dropout(1.0)(x)), np.zeros((4, 5), np.float32))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_train_statistics_and_scaling(device, p):
    loom.manual_seed(123)
    n = 200_000
    x = loom.ones(n, device=device)
    out = np_(loom.nn.Dropout(p)(x))
    kept = out != 0
    np.testing.assert_allclose(out[kept], 1.0 / (1.0 - p), rtol=1e-6)
    frac = 1.0 - kept.mean()
    assert abs(frac - p) < 5 * math.sqrt(p * (1 - p) / n), frac
    assert abs(out.mean() - 1.0) < 0.02


def test_dropout_masks_differ_between_calls_and_gradient_uses_the_mask(device):
    loom.manual_seed(5)
    x = loom.ones(1000, device=device).requires_grad_()
    d = loom.nn.Dropout(0.5)
    a = d(x)
    b = np_(d(x))
    a_np = np_(a)
    assert (a_np != b).any()
    a.sum().backward()
    np.testing.assert_array_equal(np_(x.grad), a_np)  # d(x * mask * 2)/dx = mask * 2 = a


def test_dropout_reproducible_with_manual_seed(device):
    outs = []
    for _ in range(2):
        loom.manual_seed(42)
        outs.append(np_(LF.dropout(loom.ones(64, device=device), 0.5)))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_dropout_inplace_and_invalid_p(device):
    x = loom.ones(100, device=device)
    out = loom.nn.Dropout(0.5, inplace=True)(x)
    assert out is x
    assert set(np.unique(np_(x))) <= {0.0, 2.0}
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        loom.nn.Dropout(1.5)
    with pytest.raises(ValueError):
        LF.dropout(x, -0.1)


def test_relu_inplace(device):
    x = loom.tensor([-1.0, 2.0, -3.0], device=device)
    out = loom.nn.ReLU(inplace=True)(x)
    assert out is x
    np.testing.assert_array_equal(np_(x), [0.0, 2.0, 0.0])


# ---- default initializations ----

def test_linear_default_init_statistics():
    loom.manual_seed(0)
    fan_in, fan_out = 256, 512
    lin = loom.nn.Linear(fan_in, fan_out)
    w, b = np_(lin.weight), np_(lin.bias)
    bound = 1 / math.sqrt(fan_in)
    assert w.shape == (fan_out, fan_in) and b.shape == (fan_out,)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.99 * bound  # fills the range
    np.testing.assert_allclose(w.var(), bound ** 2 / 3, rtol=0.02)  # uniform variance
    assert abs(w.mean()) < 0.01 * bound
    # uniform: each tenth of the range holds a tenth of the values
    hist, _ = np.histogram(w, bins=10, range=(-bound, bound))
    np.testing.assert_allclose(hist / w.size, 0.1, atol=0.005)
    assert np.abs(b).max() > 0.9 * bound
    assert lin.weight.dtype is loom.float32


def test_linear_init_matches_torch_bounds_for_small_fan_in():
    for fan_in in [1, 3, 10]:
        lin = loom.nn.Linear(fan_in, 1000)
        assert np.abs(np_(lin.weight)).max() <= 1 / math.sqrt(fan_in)


def test_embedding_default_init_is_standard_normal():
    loom.manual_seed(1)
    w = np_(loom.nn.Embedding(2000, 64).weight)
    assert abs(w.mean()) < 0.01
    assert abs(w.std() - 1.0) < 0.01
    assert abs((np.abs(w) < 1).mean() - 0.6827) < 0.01


def test_layer_norm_default_init():
    ln = loom.nn.LayerNorm((2, 3))
    np.testing.assert_array_equal(np_(ln.weight), np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(np_(ln.bias), np.zeros((2, 3), np.float32))
    assert ln.normalized_shape == (2, 3) and ln.eps == 1e-5
    ln2 = loom.nn.LayerNorm(4, elementwise_affine=False)
    assert ln2.weight is None and ln2.bias is None and list(ln2.parameters()) == []


def test_factory_kwargs():
    lin = loom.nn.Linear(2, 3, dtype=loom.float64, device="lazy")
    assert lin.weight.dtype is loom.float64 and lin.weight.is_lazy
    e = loom.nn.Embedding(4, 2, dtype=loom.float64)
    assert e.weight.dtype is loom.float64


def test_default_dtype_is_used(restore_default_dtype):
    loom.set_default_dtype(loom.float64)
    assert loom.nn.Linear(2, 2).weight.dtype is loom.float64


def test_init_functions():
    loom.manual_seed(0)
    t = loom.empty(300, 200)
    I = loom.nn.init
    assert I.calculate_gain("relu") == torch.nn.init.calculate_gain("relu")
    assert I.calculate_gain("tanh") == torch.nn.init.calculate_gain("tanh")
    assert I.calculate_gain("leaky_relu", 0.2) == pytest.approx(torch.nn.init.calculate_gain("leaky_relu", 0.2))
    I.xavier_uniform_(t)
    bound = math.sqrt(6 / 500)
    assert np.abs(np_(t)).max() <= bound and np_(t).var() == pytest.approx(bound ** 2 / 3, rel=0.03)
    I.kaiming_normal_(t, nonlinearity="relu")
    assert np_(t).std() == pytest.approx(math.sqrt(2 / 200), rel=0.03)
    I.normal_(t, 2.0, 0.5)
    assert np_(t).mean() == pytest.approx(2.0, abs=0.01) and np_(t).std() == pytest.approx(0.5, rel=0.02)
    I.uniform_(t, -3, -1)
    assert np_(t).min() >= -3 and np_(t).max() <= -1
    assert I.ones_(t) is t and np.all(np_(t) == 1)
    with pytest.raises(ValueError, match="Fan in and fan out can not be computed"):
        I.xavier_uniform_(loom.empty(3))
    p = loom.nn.Parameter(loom.empty(3, 4))
    I.kaiming_uniform_(p)
    assert p.requires_grad and p.is_leaf and p.grad_fn is None


# ---- reprs ----

REPRS = [
    lambda m: m.nn.Linear(8, 16),
    lambda m: m.nn.Linear(3, 2, bias=False),
    lambda m: m.nn.Embedding(10, 3),
    lambda m: m.nn.LayerNorm(8),
    lambda m: m.nn.LayerNorm((2, 3), eps=1e-3, elementwise_affine=False),
    lambda m: m.nn.Dropout(),
    lambda m: m.nn.Dropout(0.1, inplace=True),
    lambda m: m.nn.ReLU(),
    lambda m: m.nn.GELU(),
    lambda m: m.nn.GELU(approximate="tanh"),
    lambda m: m.nn.SiLU(),
    lambda m: m.nn.Tanh(),
    lambda m: m.nn.Sigmoid(),
    lambda m: m.nn.Softmax(dim=1),
    lambda m: m.nn.Softmax(),
    lambda m: m.nn.Identity(),
    lambda m: m.nn.Sequential(m.nn.Linear(2, 3), m.nn.ReLU(), m.nn.Sequential(m.nn.Linear(3, 1))),
    lambda m: m.nn.ModuleList([m.nn.Tanh(), m.nn.Linear(1, 1)]),
    lambda m: m.nn.ModuleDict({"a": m.nn.ReLU(), "b": m.nn.Linear(2, 2)}),
    lambda m: m.nn.Sequential(),
    lambda m: m.nn.ModuleList(),
    build,
]


@pytest.mark.parametrize("k", range(len(REPRS)))
def test_repr_matches_pytorch(k):
    assert repr(REPRS[k](loom)) == repr(REPRS[k](torch))


def test_linear_repr_example():
    assert repr(loom.nn.Linear(8, 16)) == "Linear(in_features=8, out_features=16, bias=True)"


@pytest.mark.parametrize("make", [lambda m: m.nn.ReLU(inplace=True), lambda m: m.nn.Embedding(10, 3, padding_idx=0),
                                  lambda m: m.nn.Embedding(10, 3, padding_idx=-1), lambda m: m.nn.SiLU(inplace=True),
                                  lambda m: m.nn.Sequential(m.nn.ReLU(inplace=True), m.nn.Embedding(4, 2, 3))],
                         ids=["ReLU_inplace", "Embedding_padding_idx", "Embedding_negative_padding_idx", "SiLU_inplace",
                              "nested"])
def test_repr_shows_non_default_arguments(make):
    assert repr(make(loom)) == repr(make(torch))


def test_embedding_padding_idx_is_normalized_and_checked_like_torch():
    assert loom.nn.Embedding(10, 3, padding_idx=-1).padding_idx == torch.nn.Embedding(10, 3, padding_idx=-1).padding_idx
    for bad in (10, -11):
        for lib in (torch, loom):
            with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
                lib.nn.Embedding(10, 3, padding_idx=bad)


def test_inplace_activations_write_their_input(device):
    x = loom.tensor([-1.0, 0.5, 2.0], device=device)
    ref = np_(LF.silu(x)).copy()
    y = loom.nn.SiLU(inplace=True)(x)
    np.testing.assert_allclose(np_(x), ref, rtol=1e-6)
    assert y is x
    loom.nn.ReLU(inplace=True)(x)
    assert np_(x).min() >= 0


# ---- nn.functional against torch.nn.functional ----

def _inputs(seed, *shapes, dtype=np.float32):
    g = np.random.default_rng(seed)
    return [g.standard_normal(s).astype(dtype) for s in shapes]


FUNCTIONAL = {
    "relu": (lambda F, x: F.relu(x), [(3, 4)]),
    "gelu": (lambda F, x: F.gelu(x), [(3, 4)]),
    "gelu_tanh": (lambda F, x: F.gelu(x, approximate="tanh"), [(3, 4)]),
    "silu": (lambda F, x: F.silu(x), [(3, 4)]),
    "softplus": (lambda F, x: F.softplus(x * 10, beta=0.5, threshold=3), [(3, 4)]),
    "tanh": (lambda F, x: F.tanh(x), [(3, 4)]),
    "sigmoid": (lambda F, x: F.sigmoid(x), [(3, 4)]),
    "softmax": (lambda F, x: F.softmax(x, dim=0), [(3, 4)]),
    "softmax_dtype": (lambda F, x: F.softmax(x, dim=-1, dtype=_dt(F, "float64")), [(3, 4)]),
    "log_softmax": (lambda F, x: F.log_softmax(x, dim=1), [(2, 3, 4)]),
    "linear": (lambda F, x, w, b: F.linear(x, w, b), [(3, 4), (5, 4), (5,)]),
    "linear_no_bias": (lambda F, x, w: F.linear(x, w), [(2, 3, 4), (5, 4)]),
    "layer_norm": (lambda F, x, w, b: F.layer_norm(x, (4,), w, b, eps=1e-4), [(3, 4), (4,), (4,)]),
    "layer_norm_plain": (lambda F, x: F.layer_norm(x, [3, 4]), [(2, 3, 4)]),
    "mse_loss": (lambda F, x, y: F.mse_loss(x, y), [(3, 4), (3, 4)]),
    "mse_loss_sum": (lambda F, x, y: F.mse_loss(x, y, reduction="sum"), [(3, 4), (3, 4)]),
    "mse_loss_none": (lambda F, x, y: F.mse_loss(x, y, reduction="none"), [(3, 4), (3, 4)]),
    "l1_loss": (lambda F, x, y: F.l1_loss(x, y), [(3, 4), (3, 4)]),
    "l1_loss_none": (lambda F, x, y: F.l1_loss(x, y, reduction="none"), [(3, 4), (3, 4)]),
    "bce_with_logits": (lambda F, x, y: F.binary_cross_entropy_with_logits(x * 5, y.sigmoid()), [(3, 4), (3, 4)]),
    "bce_with_logits_pos_weight": (lambda F, x, y, w: F.binary_cross_entropy_with_logits(
        x * 30, y.sigmoid(), pos_weight=w.abs(), reduction="none"), [(3, 4), (3, 4), (4,)]),
    "bce_with_logits_weight_sum": (lambda F, x, y, w: F.binary_cross_entropy_with_logits(
        x, y.sigmoid(), weight=w, reduction="sum"), [(3, 4), (3, 4), (3, 1)]),
}


def _dt(F, name):
    return getattr(loom if F is LF else torch, name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(FUNCTIONAL))
def test_functional_matches_torch(device, name, dtype):
    fn, shapes = FUNCTIONAL[name]
    arrays = _inputs(len(name), *shapes, dtype=dtype)
    lout = fn(LF, *[loom.tensor(a, device=device) for a in arrays])
    tout = fn(TF, *[torch.from_numpy(a.copy()) for a in arrays])
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-11, atol=1e-12)
    assert tuple(lout.shape) == tuple(tout.shape)
    assert str(lout.dtype).split(".")[1] == str(tout.dtype).split(".")[1]
    close(lout, tout, **tol)


CE_CASES = {
    "plain": dict(),
    "sum": dict(reduction="sum"),
    "none": dict(reduction="none"),
    "ignore_index": dict(ignore_index=2),
    "ignore_index_none": dict(ignore_index=2, reduction="none"),
    "label_smoothing": dict(label_smoothing=0.1),
    "label_smoothing_sum": dict(label_smoothing=0.25, reduction="sum"),
    "smoothing_ignore": dict(label_smoothing=0.2, ignore_index=0),
    "weight": dict(weight=[0.2, 1.0, 3.0, 0.5]),
    "weight_ignore": dict(weight=[0.2, 1.0, 3.0, 0.5], ignore_index=1),
    "weight_smoothing": dict(weight=[0.2, 1.0, 3.0, 0.5], label_smoothing=0.3),
    "weight_smoothing_none": dict(weight=[0.2, 1.0, 3.0, 0.5], label_smoothing=0.3, reduction="none"),
}


@pytest.mark.parametrize("shape", ["2d", "3d", "1d"])
@pytest.mark.parametrize("name", list(CE_CASES))
def test_cross_entropy_and_nll_loss_match_torch(device, name, shape):
    kw = dict(CE_CASES[name])
    g = np.random.default_rng(11)
    if shape == "2d":
        x, t = g.standard_normal((6, 4)), np.array([0, 2, 1, 3, 2, 0])
    elif shape == "3d":
        x, t = g.standard_normal((2, 4, 3)), np.array([[0, 2, 1], [3, 3, 0]])
    else:
        x, t = g.standard_normal(4), np.array(2)
    x = x.astype(np.float32)

    def kwargs(lib):
        k = dict(kw)
        if "weight" in k:
            k["weight"] = (loom.tensor(k["weight"], device=device) if lib is loom else torch.tensor(k["weight"]))
        return k

    lx, tx = loom.tensor(x, device=device), torch.from_numpy(x.copy())
    lt, tt = loom.tensor(t, device=device), torch.from_numpy(t.copy())
    close(LF.cross_entropy(lx, lt, **kwargs(loom)), TF.cross_entropy(tx, tt, **kwargs(torch)), rtol=1e-5, atol=1e-6)
    nkw = {k: v for k, v in kwargs(loom).items() if k != "label_smoothing"}
    tkw = {k: v for k, v in kwargs(torch).items() if k != "label_smoothing"}
    close(LF.nll_loss(lx.log_softmax(0 if shape == "1d" else 1), lt, **nkw),
          TF.nll_loss(tx.log_softmax(0 if shape == "1d" else 1), tt, **tkw), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_losses_per_element_keep_the_target_shape(device, reduction):
    g = np.random.default_rng(3)
    x, t = g.standard_normal((2, 4, 3, 2)).astype(np.float32), g.integers(0, 4, (2, 3, 2))
    for kw in (dict(), dict(label_smoothing=0.1), dict(weight=[1.0, 2.0, 0.5, 1.0])):
        lkw = {k: loom.tensor(v, device=device) if k == "weight" else v for k, v in kw.items()}
        tkw = {k: torch.tensor(v) if k == "weight" else v for k, v in kw.items()}
        close(LF.cross_entropy(loom.tensor(x, device=device), loom.tensor(t, device=device), reduction=reduction, **lkw),
              TF.cross_entropy(torch.from_numpy(x), torch.from_numpy(t), reduction=reduction, **tkw))
    lp = torch.from_numpy(x).log_softmax(1)
    close(LF.nll_loss(loom.tensor(lp.numpy(), device=device), loom.tensor(t, device=device), reduction=reduction),
          TF.nll_loss(lp, torch.from_numpy(t), reduction=reduction))


def test_cross_entropy_all_ignored_is_nan_like_torch(device):
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    t = np.array([1, 1, 1])
    want = TF.cross_entropy(torch.from_numpy(x), torch.from_numpy(t), ignore_index=1)
    got = LF.cross_entropy(loom.tensor(x, device=device), loom.tensor(t, device=device), ignore_index=1)
    assert math.isnan(want.item()) and math.isnan(got.item())


def test_invalid_reduction_raises():
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        LF.mse_loss(loom.ones(2), loom.ones(2), reduction="avg")


def test_embedding_one_hot_pad_functional(device):
    w = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
    i = np.array([[5, 0], [2, 2]])
    close(LF.embedding(loom.tensor(i, device=device), loom.tensor(w, device=device)),
          TF.embedding(torch.from_numpy(i), torch.from_numpy(w)), rtol=0, atol=0)
    oh = LF.one_hot(loom.tensor(i, device=device), 7)
    assert oh.dtype is loom.int64
    np.testing.assert_array_equal(np_(oh), TF.one_hot(torch.from_numpy(i), 7).numpy())
    np.testing.assert_array_equal(np_(LF.one_hot(loom.tensor(i, device=device))),
                                  TF.one_hot(torch.from_numpy(i)).numpy())
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for pad, value in [((1, 2), 0.0), ((0, 1, 2, 0), -1.0), ((-1, 1), 0.0), ((1, 1, 1, 1), 2.5)]:
        close(LF.pad(loom.tensor(x, device=device), pad, value=value),
              TF.pad(torch.from_numpy(x), pad, value=value), rtol=0, atol=0)


def test_layer_norm_wrong_shape_raises():
    with pytest.raises(RuntimeError, match="normalized_shape"):
        LF.layer_norm(loom.ones(2, 3), (4,))


def test_scaled_dot_product_attention_matches_a_torch_reference(device):
    g = np.random.default_rng(2)
    q, k, v = (g.standard_normal((2, 2, 4, 8)).astype(np.float32) for _ in range(3))
    tq, tk, tv = (torch.from_numpy(a.copy()) for a in (q, k, v))
    lq, lk, lv = (loom.tensor(a, device=device) for a in (q, k, v))
    for causal in (False, True):
        s = tq @ tk.transpose(-2, -1) / math.sqrt(8)
        if causal:
            s = s.masked_fill(~torch.ones(4, 4, dtype=torch.bool).tril(), float("-inf"))
        want = s.softmax(-1) @ tv
        got = LF.scaled_dot_product_attention(lq, lk, lv, is_causal=causal)
        close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call", [
    lambda F, m: F.cross_entropy(m.ones(3, 4), m.ones(3, 4, dtype=m.int32)),
    lambda F, m: F.cross_entropy(m.ones(3, 4), m.ones(3, 4) / 4, ignore_index=1),
], ids=["integer_probabilities", "ignore_index_with_probabilities"])
def test_cross_entropy_probability_target_errors_match_torch(call):
    with pytest.raises(RuntimeError) as want:
        call(TF, torch)
    with pytest.raises(RuntimeError) as got:
        call(LF, loom)
    assert str(got.value) == str(want.value)
