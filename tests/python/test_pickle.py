"""Tensors and modules through pickle and copy.deepcopy, on cpu and lazy, with PyTorch's semantics:
every dtype bit for bit, views keep their strides, requires_grad and the class (Parameter) and
Python attributes survive, deepcopy gives storage of its own, copies each tensor once (tied
weights stay tied) and refuses non-leaves as PyTorch does.
"""

import copy
import pickle

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "lazy"]
PROTOCOLS = list(range(pickle.HIGHEST_PROTOCOL + 1))


def raw(t):
    """A tensor's values as bytes in row-major order (bfloat16 as its 16-bit patterns)."""
    t = t.detach().to("cpu")
    if t.dtype is loom.bfloat16:
        f = np.ascontiguousarray(t.float().numpy())
        return (f.view(np.uint32) >> 16).astype("<u2").tobytes()
    return np.ascontiguousarray(t.numpy()).tobytes()


def same(a, b):
    return (type(a) is type(b) and a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape)
            and a.device == b.device and raw(a) == raw(b))


def every_dtype(device):
    g = np.random.default_rng(0)
    return [
        loom.tensor(g.random((3, 4)) < 0.5, device=device),
        loom.tensor(g.integers(0, 256, (5,)).astype(np.uint8), device=device),
        loom.tensor(g.integers(-2 ** 31, 2 ** 31 - 1, (2, 3)).astype(np.int32), device=device),
        loom.tensor(np.array([-2 ** 63, 2 ** 63 - 1, 0]), device=device),
        loom.tensor(np.array([1.5, -0.0, 65504, 6e-8, np.inf, np.nan], np.float16), device=device),
        loom.tensor(np.array([[1.0, -2.5], [3.0e38, -0.0]], np.float32), device=device).to(loom.bfloat16),
        loom.tensor(g.standard_normal((2, 3, 4)).astype(np.float32), device=device),
        loom.tensor(np.array([np.pi, -np.inf, np.nan, 5e-324]), device=device),
        loom.tensor(2.5, device=device),
        loom.zeros(0, 3, device=device),
    ]


# ---- pickle ----

@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("device", DEVICES)
def test_every_dtype_pickles_bit_for_bit(device, protocol):
    for t in every_dtype(device):
        back = pickle.loads(pickle.dumps(t, protocol=protocol))
        assert same(back, t), t.dtype
        assert back.is_lazy == (device == "lazy") and not back.requires_grad


@pytest.mark.parametrize("device", DEVICES)
def test_views_keep_their_layout_and_only_their_span_is_stored(device):
    base = loom.arange(10000.0, device=device).reshape(100, 100)
    for view in (base.T, base[3:5, 10:60:7], base[7], loom.ones(3, device=device).expand(1000, 3)):
        back = pickle.loads(pickle.dumps(view))
        assert same(back, view) and back.stride() == view.stride()
    assert len(pickle.dumps(base[7])) < 1000  # one row of 100 floats, not the 40000 bytes of base
    assert len(pickle.dumps(loom.ones(3).expand(1000, 3))) < 500


@pytest.mark.parametrize("device", DEVICES)
def test_pending_lazy_tensors_are_synced_and_stay_lazy(device):
    x = loom.arange(6.0, device=device) * 2 + 1  # pending on lazy
    back = pickle.loads(pickle.dumps(x))
    assert back.is_lazy == (device == "lazy")
    assert back.to("cpu").tolist() == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]
    assert (back + 1).to("cpu").tolist() == [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]


@pytest.mark.parametrize("device", DEVICES)
def test_requires_grad_and_parameters(device):
    leaf = loom.ones(2, device=device).requires_grad_()
    computed = leaf * 3
    p = loom.nn.Parameter(loom.ones(2, 2, device=device))
    frozen = loom.nn.Parameter(loom.zeros(1, device=device), requires_grad=False)
    p.note = "attribute"
    back = pickle.loads(pickle.dumps([leaf, computed, p, frozen]))
    assert back[0].requires_grad and back[0].is_leaf
    assert back[1].requires_grad and back[1].is_leaf  # as PyTorch: a computed tensor unpickles as a leaf
    assert back[1].detach().to("cpu").tolist() == [3.0, 3.0]
    assert type(back[2]) is loom.nn.Parameter and back[2].requires_grad and back[2].note == "attribute"
    assert type(back[3]) is loom.nn.Parameter and not back[3].requires_grad
    assert all(t.is_lazy == (device == "lazy") for t in back)


def test_the_same_tensor_twice_in_one_pickle_is_one_tensor():
    t = loom.arange(3.0)
    a, b = pickle.loads(pickle.dumps([t, t]))
    assert a is b


def test_pickle_matches_torch_semantics_for_requires_grad():
    """What PyTorch does, checked against PyTorch: the same flags after a round trip."""
    for make in (lambda m: m.ones(2).requires_grad_(), lambda m: m.ones(2).requires_grad_() * 2,
                 lambda m: m.nn.Parameter(m.ones(2)), lambda m: m.nn.Parameter(m.ones(2), requires_grad=False)):
        lt, tt = pickle.loads(pickle.dumps(make(loom))), pickle.loads(pickle.dumps(make(torch)))
        assert (lt.requires_grad, lt.is_leaf, type(lt).__name__) == (tt.requires_grad, tt.is_leaf, type(tt).__name__)


# ---- deepcopy ----

@pytest.mark.parametrize("device", DEVICES)
def test_deepcopy_every_dtype(device):
    for t in every_dtype(device):
        c = copy.deepcopy(t)
        assert same(c, t) and c.stride() == t.stride()
    t = loom.arange(12.0, device=device).reshape(3, 4).T
    c = copy.deepcopy(t)
    assert c.stride() == t.stride() and same(c, t)
    t.add_(100.0)  # storage of its own
    assert c.to("cpu")[0].tolist() == [0.0, 4.0, 8.0]


def test_deepcopy_of_a_lazy_tensor_does_not_sync():
    x = loom.arange(4.0, device="lazy") * 2
    before = loom.metrics()["traces"]
    c = copy.deepcopy(x)
    assert loom.metrics()["traces"] == before and c.is_lazy
    assert c.to("cpu").tolist() == [0.0, 2.0, 4.0, 6.0]


@pytest.mark.parametrize("device", DEVICES)
def test_deepcopy_keeps_class_requires_grad_grad_and_attributes(device):
    p = loom.nn.Parameter(loom.ones(2, device=device))
    (p * 3).sum().backward()
    p.tag = {"lr_scale": 2}
    c = copy.deepcopy(p)
    assert type(c) is loom.nn.Parameter and c.requires_grad and c.is_leaf
    assert c.grad is not None and c.grad.to("cpu").tolist() == [3.0, 3.0] and c.grad is not p.grad
    assert c.tag == {"lr_scale": 2} and c.tag is not p.tag
    memo = {}
    assert copy.deepcopy(p, memo) is copy.deepcopy(p, memo)


def test_deepcopy_of_a_non_leaf_raises_as_pytorch():
    with pytest.raises(RuntimeError) as theirs:
        copy.deepcopy(torch.ones(2, requires_grad=True) * 2)
    with pytest.raises(RuntimeError) as ours:
        copy.deepcopy(loom.ones(2, requires_grad=True) * 2)
    assert str(ours.value) == str(theirs.value)


# ---- modules ----

class TiedNet(loom.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = loom.nn.Embedding(6, 4)
        self.norm = loom.nn.BatchNorm1d(4)
        self.head = loom.nn.Linear(4, 6, bias=False)
        self.head.weight = self.emb.weight  # tied
        self.frozen = loom.nn.Linear(4, 4)
        self.frozen.requires_grad_(False)

    def forward(self, idx):
        return self.head(self.frozen(self.norm(self.emb(idx))))


def train_step(model, idx):
    opt = loom.optim.SGD(model.parameters(), lr=0.1)
    opt.zero_grad()
    model(idx).sum().backward()
    opt.step()


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
@pytest.mark.parametrize("device", DEVICES)
def test_modules_copy_and_pickle(device, how):
    loom.manual_seed(0)
    model = TiedNet().to(device)
    idx = loom.tensor([[0, 1, 5], [2, 3, 4]], device=device)
    train_step(model, idx.reshape(-1))  # running statistics move, parameters have grads
    model.eval()
    clone = copy.deepcopy(model) if how == "deepcopy" else pickle.loads(pickle.dumps(model))
    assert type(clone) is TiedNet and clone.head.weight is clone.emb.weight
    for (name, a), (_, b) in zip(model.state_dict().items(), clone.state_dict().items()):
        assert same(a, b), name
    for a, b in zip(model.parameters(), clone.parameters()):
        assert type(b) is loom.nn.Parameter and a.requires_grad == b.requires_grad and b.is_lazy == a.is_lazy
    np.testing.assert_array_equal(clone(idx.reshape(-1)).to("cpu").detach().numpy(),
                                  model(idx.reshape(-1)).to("cpu").detach().numpy())
    clone.train()
    train_step(clone, idx.reshape(-1))  # the clone trains on storage of its own
    assert not same(clone.emb.weight, model.emb.weight)
    assert same(clone.frozen.weight, model.frozen.weight)  # frozen stays frozen
    assert not same(clone.norm.running_mean, model.norm.running_mean)
