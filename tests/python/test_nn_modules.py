"""The Module system and the small layers against torch.nn: forward pre-hooks and hooks
(with kwargs, prepend, removal), named_modules / named_parameters / named_buffers with and
without duplicates, get_submodule / get_parameter / get_buffer, register_buffer(persistent=False),
apply, requires_grad_, dtype conversions, deepcopy, extra_repr; the containers (Sequential,
ModuleList, ModuleDict, ParameterList, ParameterDict) complete; Identity, Flatten, Unflatten,
Bilinear, Embedding.from_pretrained and EmbeddingBag (sum, mean, max, offsets,
per_sample_weights, padding_idx) with outputs and gradients in eager and lazy mode."""

import copy
from collections import OrderedDict

import numpy as np
import pytest

import loom
from _nn_helpers import assert_close, check_against_torch, copy_weights, np_, to_loom
from _ops_helpers import device, torch  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def randn(*shape, seed=0):
    return torch.tensor(np.random.default_rng(seed).standard_normal(shape))


def both(fn):
    """fn(lib) for torch and loom."""
    return fn(torch), fn(loom)


# ---- hooks ----

def test_forward_hooks_run_in_order_and_can_replace_args_and_output():
    for lib in (torch, loom):
        m = lib.nn.Linear(2, 2)
        calls = []
        h1 = m.register_forward_pre_hook(lambda mod, args: calls.append(("pre1", len(args))))
        m.register_forward_pre_hook(lambda mod, args: args[0] * 0)  # a lone value becomes the new args
        m.register_forward_hook(lambda mod, args, out: calls.append(("post", float(args[0].sum()))))
        m.register_forward_hook(lambda mod, args, out: out + 100)
        out = m(lib.ones(1, 2))
        assert calls == [("pre1", 1), ("post", 0.0)]
        np.testing.assert_allclose(np_(out), np_(m.bias).reshape(1, 2) + 100, rtol=1e-6)
        h1.remove()
        h1.remove()  # twice is fine
        calls.clear()
        m(lib.ones(1, 2))
        assert calls == [("post", 0.0)]


def test_hook_prepend_and_kwargs_as_pytorch_2():
    """prepend= and with_kwargs= (PyTorch >= 2.0, newer than the installed one)."""
    m = loom.nn.Linear(2, 2)
    calls = []
    m.register_forward_pre_hook(lambda mod, args: calls.append("second"))
    m.register_forward_pre_hook(lambda mod, args: calls.append("first"), prepend=True)
    m.register_forward_hook(lambda mod, args, out: calls.append("last"))
    m.register_forward_hook(lambda mod, args, out: calls.append("third"), prepend=True)
    m(loom.ones(1, 2))
    assert calls == ["first", "second", "third", "last"]

    class Scale(loom.nn.Module):
        def forward(self, x, factor=1.0):
            return x * factor

    s = Scale()
    with s.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"factor": 3.0}), with_kwargs=True):
        assert float(s(loom.ones(1)).sum()) == 3.0
    assert float(s(loom.ones(1)).sum()) == 1.0  # removed at the end of the block
    h = s.register_forward_hook(lambda mod, args, kwargs, out: out + kwargs["factor"], with_kwargs=True)
    assert float(s(loom.ones(1), factor=2.0).sum()) == 4.0
    h.remove()
    assert s._forward_hooks == OrderedDict()
    s.register_forward_pre_hook(lambda mod, args, kwargs: 1, with_kwargs=True)
    with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple of"):
        s(loom.ones(1))


def test_hook_handles_as_context_managers():
    for lib in (torch, loom):
        class Scale(lib.nn.Module):
            def forward(self, x, factor=1.0):
                return x * factor

        m = Scale()
        with m.register_forward_pre_hook(lambda mod, args: (args[0] * 3,)):
            assert float(m(lib.ones(1)).sum()) == 3.0
        assert float(m(lib.ones(1)).sum()) == 1.0  # removed at the end of the block
        h = m.register_forward_hook(lambda mod, args, out: out + 1)
        assert float(m(lib.ones(1), factor=2.0).sum()) == 3.0
        h.remove()
        assert m._forward_hooks == OrderedDict()


def test_hooks_see_submodule_calls():
    seen = {}
    for lib in (torch, loom):
        net = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2))
        names = []
        for name, mod in net.named_modules():
            mod.register_forward_hook(lambda m, a, o, name=name: names.append((name, tuple(o.shape))))
        net(lib.zeros(5, 3))
        seen[lib] = names
    assert seen[loom] == seen[torch]


# ---- traversal and lookups ----

def build_tree(lib):
    nn = lib.nn

    class Tree(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2)
            self.b = nn.Sequential(nn.Linear(2, 3), nn.Tanh())
            self.c = self.a  # shared
            self.register_buffer("stat", lib.zeros(2))
            self.register_buffer("scratch", lib.ones(1), persistent=False)
            self.b[0].register_buffer("tied", self.stat)  # the same tensor twice
            self.w = nn.Parameter(lib.ones(3))

    return Tree()


def test_named_traversals_match_pytorch_with_and_without_duplicates():
    t, lm = both(build_tree)
    for kw in ({}, {"remove_duplicate": False}):
        assert [n for n, _ in lm.named_modules(**kw)] == [n for n, _ in t.named_modules(**kw)]
    assert [n for n, _ in lm.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in lm.named_buffers()] == [n for n, _ in t.named_buffers()]
    # remove_duplicate=False (PyTorch >= 2.0): each name a tensor is reachable under
    assert [n for n, _ in lm.named_parameters(remove_duplicate=False)] == [
        "w", "a.weight", "a.bias", "b.0.weight", "b.0.bias", "c.weight", "c.bias"]
    assert [n for n, _ in lm.named_buffers(remove_duplicate=False)] == ["stat", "scratch", "b.0.tied"]
    assert [n for n, _ in lm.named_buffers(prefix="root", recurse=False)] == ["root.stat", "root.scratch"]
    assert list(lm.state_dict()) == list(t.state_dict())
    assert "scratch" not in lm.state_dict()


def test_get_submodule_parameter_buffer():
    t, lm = both(build_tree)
    assert lm.get_submodule("b.0") is lm.b[0] and lm.get_submodule("") is lm
    assert lm.get_parameter("b.0.weight") is lm.b[0].weight and lm.get_parameter("w") is lm.w
    assert lm.get_buffer("stat") is lm.stat
    for lib_m in (t, lm):
        with pytest.raises(AttributeError, match="Sequential has no attribute `9`"):
            lib_m.get_submodule("b.9")
        with pytest.raises(AttributeError, match="`stat` is not an nn.Module"):
            lib_m.get_submodule("stat")
        with pytest.raises(AttributeError, match="`stat` is not an nn.Parameter"):
            lib_m.get_parameter("stat")
        with pytest.raises(AttributeError, match="`w` is not a buffer"):
            lib_m.get_buffer("w")


def test_registration_errors_match_pytorch():
    for lib in (torch, loom):
        m = lib.nn.Module()
        with pytest.raises(KeyError, match="buffer name can.*t contain"):
            m.register_buffer("a.b", lib.zeros(1))
        with pytest.raises(KeyError, match="attribute 'training' already exists"):
            m.register_buffer("training", lib.zeros(1))
        with pytest.raises(TypeError, match="module name should be a string"):
            m.add_module(3, lib.nn.Linear(1, 1))
        with pytest.raises(TypeError, match="is not a Module subclass"):
            m.add_module("x", 3)
        m.sub = lib.nn.Linear(1, 1)
        with pytest.raises(TypeError, match="cannot assign 'int' as child module 'sub'"):
            m.sub = 3
        m.sub = None
        assert m.sub is None and "sub" in m._modules
        with pytest.raises(ValueError, match="training mode is expected to be boolean"):
            m.train(1)


def test_apply_requires_grad_and_zero_grad():
    t, lm = both(build_tree)
    order_t, order_l = [], []
    t.apply(lambda m: order_t.append(type(m).__name__))
    lm.apply(lambda m: order_l.append(type(m).__name__))
    assert order_l == order_t
    assert lm.requires_grad_(False) is lm
    assert not any(p.requires_grad for p in lm.parameters())
    lm.requires_grad_()
    assert all(p.requires_grad for p in lm.parameters())


@pytest.mark.parametrize("method,dtype", [("half", loom.float16), ("bfloat16", loom.bfloat16), ("double", loom.float64),
                                          ("float", loom.float32)])
def test_dtype_conversions_cast_floating_parameters_and_buffers(method, dtype):
    m = loom.nn.BatchNorm1d(3)
    ids = [id(p) for p in m.parameters()]
    assert getattr(m, method)() is m
    assert all(p.dtype is dtype for p in m.parameters())
    assert m.running_mean.dtype is dtype and m.num_batches_tracked.dtype is loom.int64
    assert [id(p) for p in m.parameters()] == ids  # the same Parameter objects
    m.to(loom.float64)
    assert m.weight.dtype is loom.float64
    m.to(dtype=loom.float32, memory_format=loom.channels_last)
    assert m.weight.dtype is loom.float32
    with pytest.raises(TypeError, match="nn.Module.to only accepts floating point"):
        m.to(loom.int32)


def test_deepcopy_copies_parameters_and_buffers():
    m = build_tree(loom)
    with loom.no_grad():
        m.w.mul_(3)
    c = copy.deepcopy(m)
    assert c.a is c.c  # sharing kept
    assert c.b[0].tied is c.stat  # the same buffer twice stays one tensor
    assert isinstance(c.w, loom.nn.Parameter) and c.w.requires_grad and c.w.is_leaf
    assert c.w.data_ptr() != m.w.data_ptr()
    np.testing.assert_array_equal(np_(c.w), np_(m.w))
    with loom.no_grad():
        c.w.zero_()
    assert np_(m.w).tolist() == [3.0, 3.0, 3.0]


def test_extra_repr_in_repr():
    for lib in (torch, loom):
        class WithExtra(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = lib.nn.Linear(2, 3)

            def extra_repr(self):
                return "k=1,\nv=2"

    assert repr(WithExtra()) == "WithExtra(\n  k=1,\n  v=2\n  (inner): Linear(in_features=2, out_features=3, bias=True)\n)"


# ---- containers ----

def test_sequential_complete():
    results = {}
    for lib in (torch, loom):
        s = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.ReLU(), lib.nn.Tanh())
        s.append(lib.nn.Sigmoid())
        s.insert(1, lib.nn.Identity())
        del s[0]
        names = [type(m).__name__ for m in s]
        sliced = type(s[1:3]).__name__, len(s[1:3])
        popped = type(s.pop(0)).__name__
        s.extend(lib.nn.Sequential(lib.nn.ReLU()))
        s[0] = lib.nn.GELU()
        named = lib.nn.Sequential(OrderedDict([("first", lib.nn.Linear(1, 1)), ("second", lib.nn.ReLU())]))
        results[lib] = (names, sliced, popped, [type(m).__name__ for m in s], list(s._modules),
                        [n for n, _ in named.named_children()], len(s + named), repr(s))
    assert results[loom] == results[torch]


def test_module_list_and_dict_complete():
    results = {}
    for lib in (torch, loom):
        ml = lib.nn.ModuleList([lib.nn.Linear(1, 1), lib.nn.ReLU()])
        ml += [lib.nn.Tanh()]
        ml.insert(0, lib.nn.Identity())
        del ml[1]
        popped = type(ml.pop(-1)).__name__
        md = lib.nn.ModuleDict({"b": lib.nn.ReLU(), "a": lib.nn.Tanh()})
        md.update([("c", lib.nn.Identity())])
        md["d"] = lib.nn.Linear(1, 1)
        removed = type(md.pop("a")).__name__
        results[lib] = ([type(m).__name__ for m in ml], popped, list(md.keys()), removed, "c" in md, len(md),
                        [n for n, _ in md.named_parameters()], repr(md))
        md.clear()
        assert len(md) == 0
        with pytest.raises(ValueError, match="has length 3; 2 is required"):
            md.update([("x", lib.nn.ReLU(), 1)])
    assert results[loom] == results[torch]


def test_parameter_list_and_dict_complete():
    results = {}
    for lib in (torch, loom):
        pl = lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2, 3)), lib.zeros(2)])
        pl.append(lib.ones(1))
        pl.extend([lib.ones(4)])
        pl[1] = lib.full((2,), 5.0)
        pd = lib.nn.ParameterDict({"b": lib.ones(2), "a": lib.nn.Parameter(lib.zeros(3))})
        pd["c"] = lib.ones(1)
        pd.update([("d", lib.ones(2, 2))])
        popped = tuple(pd.pop("a").shape)
        key, value = pd.popitem()

        class Holder(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.pl, self.pd = pl, pd

        h = Holder()
        results[lib] = ([tuple(p.shape) for p in pl], [type(p).__name__ for p in pl], list(pd.keys()), popped, key,
                        [n for n, _ in h.named_parameters()], float(pl[1].sum()), len(pl[1:3]),
                        pd.get("zz", "default"), "b" in pd, all(p.requires_grad for p in pl),
                        repr(pl).replace("torch.", "loom."))
        with pytest.raises(TypeError, match="ParameterList.extend should be called with an iterable"):
            pl.extend(lib.ones(2))
        with pytest.raises(RuntimeError, match="ParameterList should not be called"):
            pl(1)
    assert results[loom] == results[torch]


# ---- small layers ----

def test_identity_flatten_unflatten(device):
    x = randn(2, 3, 4, 5)
    for name, args in [("Identity", (1, "ignored")), ("Flatten", ()), ("Flatten", (0, 2)), ("Flatten", (2, -1)),
                       ("Unflatten", (1, (3, 1))), ("Unflatten", (-1, (5, 1, 1)))]:
        tm, lm = getattr(torch.nn, name)(*args), getattr(loom.nn, name)(*args)
        assert repr(lm) == repr(tm)
        check_against_torch(tm, lm, [x], device)
    with pytest.raises(TypeError, match="unflattened_size must be tuple of ints"):
        loom.nn.Unflatten(1, 3)


@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_matches_pytorch(device, bias):
    tm, lm = torch.nn.Bilinear(3, 4, 5, bias=bias).double(), loom.nn.Bilinear(3, 4, 5, bias=bias).double()
    assert repr(lm) == repr(tm)
    assert [(n, tuple(p.shape)) for n, p in lm.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    check_against_torch(tm, lm.to(device), [randn(6, 3), randn(6, 4, seed=1)], device)
    check_against_torch(tm, lm, [randn(2, 6, 3), randn(2, 6, 4, seed=1)], device)
    with pytest.raises(RuntimeError, match="input batch dimensions do not match"):
        lm(loom.zeros(2, 3, device=device, dtype=loom.float64), loom.zeros(3, 4, device=device, dtype=loom.float64))


def test_bilinear_initialization():
    loom.manual_seed(0)
    m = loom.nn.Bilinear(16, 4, 64)
    values = np_(m.weight).ravel()
    assert np.abs(values).max() <= 1 / 4 and np.abs(values).max() > 0.24  # U(-1/sqrt(in1), 1/sqrt(in1))


EMBEDDING_BAG_CASES = [
    ("sum", None, False), ("mean", None, False), ("max", None, False), ("sum", 2, False), ("mean", 2, False),
    ("max", 2, False), ("sum", None, True), ("mean", 0, True),
]


@pytest.mark.parametrize("mode,padding_idx,last", EMBEDDING_BAG_CASES)
def test_embedding_bag_matches_pytorch(device, mode, padding_idx, last):
    kw = dict(mode=mode, padding_idx=padding_idx, include_last_offset=last)
    tm, lm = torch.nn.EmbeddingBag(10, 3, **kw).double(), loom.nn.EmbeddingBag(10, 3, **kw).double()
    assert repr(lm) == repr(tm)
    lm.to(device)
    flat = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = torch.tensor([0, 2, 2, 5, 8]) if last else torch.tensor([0, 2, 2, 5])  # bag 1 is empty
    check_against_torch(tm, lm, [flat, offsets], device)
    # 2-D input: one bag per row (PyTorch 1.13 with include_last_offset drops the last row and
    # corrupts its heap, so the reference there is the module without it)
    tm.include_last_offset = False
    check_against_torch(tm, lm, [torch.tensor([[1, 2, 4], [2, 2, 2], [5, 6, 7]])], device)


def test_embedding_bag_per_sample_weights(device):
    tm, lm = torch.nn.EmbeddingBag(10, 3, mode="sum").double(), loom.nn.EmbeddingBag(10, 3, mode="sum").double()
    copy_weights(tm, lm.to(device), device)
    flat, offsets, w = torch.tensor([1, 2, 4, 5, 4]), torch.tensor([0, 3]), randn(5)
    assert_close(lm(to_loom(flat, device), to_loom(offsets, device), to_loom(w, device)), tm(flat, offsets, w))
    with pytest.raises(NotImplementedError, match="per_sample_weights is only supported for mode='sum'"):
        loom.nn.EmbeddingBag(10, 3)(loom.tensor([1, 2]), loom.tensor([0]), loom.ones(2))
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor but got None"):
        lm(to_loom(flat, device))


def test_embedding_from_pretrained(device):
    for lib in (torch, loom):
        weights = lib.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        frozen = lib.nn.Embedding.from_pretrained(weights)
        assert not frozen.weight.requires_grad
        trainable = lib.nn.Embedding.from_pretrained(weights, freeze=False, padding_idx=1)
        assert trainable.weight.requires_grad and trainable.padding_idx == 1
        assert trainable(lib.tensor([2, 0])).tolist() == [[5.0, 6.0], [1.0, 2.0]]
        bag = lib.nn.EmbeddingBag.from_pretrained(weights, mode="sum")
        assert bag(lib.tensor([[0, 1]])).tolist() == [[4.0, 6.0]]


def test_pytorch_import_paths():
    """Programs import classes from torch.nn.modules.<family>, torch.nn.parameter and
    torch.utils.data.<module>: the same paths hold them in loom."""
    from loom.nn.modules.activation import MultiheadAttention
    from loom.nn.modules.batchnorm import BatchNorm2d, _BatchNorm
    from loom.nn.modules.container import ParameterList
    from loom.nn.modules.linear import Linear, NonDynamicallyQuantizableLinear
    from loom.nn.modules.module import Module
    from loom.nn.modules.rnn import LSTM, RNNBase
    from loom.nn.modules.transformer import TransformerEncoderLayer
    from loom.nn.parameter import Parameter
    from loom.utils.data._utils.collate import default_collate
    from loom.utils.data.dataloader import DataLoader
    from loom.utils.data.sampler import BatchSampler

    assert Module is loom.nn.Module and Parameter is loom.nn.Parameter and Linear is loom.nn.Linear
    assert issubclass(BatchNorm2d, _BatchNorm) and issubclass(LSTM, RNNBase)
    assert MultiheadAttention is loom.nn.MultiheadAttention and issubclass(NonDynamicallyQuantizableLinear, Linear)
    assert ParameterList is loom.nn.ParameterList and TransformerEncoderLayer is loom.nn.TransformerEncoderLayer
    assert DataLoader is loom.utils.data.DataLoader and BatchSampler is loom.utils.data.BatchSampler
    assert default_collate is loom.utils.data.default_collate


def test_backward_hooks_are_called():
    """(Against PyTorch in test_nn_hooks_norms.py.)"""
    m = loom.nn.Linear(2, 2)
    calls = []
    for register in (m.register_full_backward_hook, m.register_backward_hook):
        register(lambda module, grad_input, grad_output: calls.append(module))
    m(loom.ones(1, 2, requires_grad=True)).sum().backward()
    assert calls == [m, m]
