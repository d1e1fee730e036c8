"""Names training scripts and custom layers import, added this wave, against torch where torch
1.13 has them: torch.nn.modules.utils (_pair, ...), torch.nn.common_types, torch.nn.attention's
sdpa_kernel and the backend switches of torch.backends.cuda, Module.set_submodule / to_empty /
load-state-dict hooks, and StackDataset."""

import numpy as np
import pytest

import loom
from _ops_helpers import torch  # noqa: F401


def test_module_utils_parse_like_torch():
    from torch.nn.modules import utils as tu

    from loom.nn.modules import utils as lu
    for name in ("_single", "_pair", "_triple", "_quadruple"):
        for value in (3, (1, 2), [4, 5, 6], range(2)):
            assert getattr(lu, name)(value) == getattr(tu, name)(value)
    assert lu._reverse_repeat_tuple((1, 2), 2) == tu._reverse_repeat_tuple((1, 2), 2)
    assert lu._list_with_default([None, 3], [8, 9, 10]) == tu._list_with_default([None, 3], [8, 9, 10])
    assert lu._ntuple(3)(7) == (7, 7, 7)


def test_common_types_annotate():
    from loom.nn.common_types import _size_2_t, _size_any_t

    def layer(kernel_size: _size_2_t, stride: _size_any_t = 1):
        return kernel_size, stride

    assert layer(3) == (3, 1)


def test_sdpa_kernel_and_backend_switches():
    from loom.nn.attention import SDPBackend, sdpa_kernel
    cuda = loom.backends.cuda
    assert cuda.flash_sdp_enabled() and cuda.math_sdp_enabled()
    with sdpa_kernel([SDPBackend.MATH]):
        assert cuda.math_sdp_enabled() and not cuda.flash_sdp_enabled() and not cuda.mem_efficient_sdp_enabled()
        q = loom.randn(1, 2, 4, 8)
        out = loom.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)  # one kernel serves all
        assert out.shape == (1, 2, 4, 8)
    assert cuda.flash_sdp_enabled()
    with cuda.sdp_kernel(enable_flash=False):
        assert not cuda.flash_sdp_enabled() and cuda.math_sdp_enabled()
    cuda.enable_flash_sdp(False)
    try:
        assert not cuda.flash_sdp_enabled()
    finally:
        cuda.enable_flash_sdp(True)
    with pytest.raises(AssertionError, match="SDPBackend"):
        sdpa_kernel(["math"])


def test_set_submodule_and_to_empty():
    m = loom.nn.Sequential(loom.nn.Linear(2, 2), loom.nn.Sequential(loom.nn.ReLU()))
    m.set_submodule("1.0", loom.nn.Tanh())
    assert isinstance(m[1][0], loom.nn.Tanh)
    with pytest.raises(AttributeError, match="has no attribute"):
        m.set_submodule("1.7", loom.nn.Tanh(), strict=True)
    with pytest.raises(ValueError, match="not an nn.Module"):
        m.set_submodule("0", 3)
    weight = m[0].weight
    assert m.to_empty(device="lazy") is m
    assert m[0].weight is weight and m[0].weight.device.type == "lazy" and m[0].weight.shape == (2, 2)


def test_load_state_dict_hooks_run_like_torch():
    calls = {}
    for lib in (loom, torch):
        seen = []
        m = lib.nn.Sequential(lib.nn.Linear(2, 2))

        def pre(module, state_dict, prefix, *rest, seen=seen):
            seen.append(("pre", prefix))
            state_dict.pop(prefix + "extra", None)  # a pre-hook may change what is loaded

        def post(module, keys, seen=seen):
            seen.append(("post", sorted(keys.missing_keys)))
            keys.missing_keys.clear()  # and a post-hook may forgive missing keys before strict raises

        if lib is loom:
            m[0].register_load_state_dict_pre_hook(pre)
        else:  # torch 1.13's private form of the same hook
            m[0]._register_load_state_dict_pre_hook(pre, with_module=True)
        handle = m.register_load_state_dict_post_hook(post)
        state = {"0.weight": lib.ones(2, 2), "0.extra": lib.ones(1)}
        result = m.load_state_dict(state, strict=True)
        assert list(result.missing_keys) == [] and "0.extra" in state  # the caller's dict is untouched
        handle.remove()
        with pytest.raises(RuntimeError, match="Missing key"):
            m.load_state_dict({"0.weight": lib.ones(2, 2)})
        calls[lib.__name__] = seen
    assert calls["loom"][:2] == calls["torch"][:2]


def test_stack_dataset():
    a, b = loom.arange(4), loom.arange(4) * 10
    ds = loom.utils.data.StackDataset(a, b)
    assert len(ds) == 4 and [int(v) for v in ds[2]] == [2, 20]
    named = loom.utils.data.StackDataset(x=a, y=b)
    assert {k: int(v) for k, v in named[1].items()} == {"x": 1, "y": 10}
    batch = next(iter(loom.utils.data.DataLoader(named, batch_size=2)))
    np.testing.assert_array_equal(batch["y"].numpy(), [0, 10])
    with pytest.raises(ValueError, match="Size mismatch"):
        loom.utils.data.StackDataset(a, loom.arange(3))


@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_embedding_bag_max_norm_and_gradient_by_frequency_match_torch(mode, device):
    """Values and the renormalized weight against torch's EmbeddingBag. The gradient against the
    same bags made of torch's Embedding (scale_grad_by_freq) and sums: torch 1.13's CPU
    EmbeddingBag divides some rows' gradients by another index's count (rows looked up twice get
    2/3 of their gradient when another is looked up 3 times), which its Embedding does not."""
    rng = np.random.default_rng(8)
    w = rng.standard_normal((6, 3)) * 2
    idx, offsets = np.array([1, 2, 2, 5, 1, 1, 0]), np.array([0, 3, 5])
    bag = loom.nn.EmbeddingBag(6, 3, max_norm=1.5, scale_grad_by_freq=True, mode=mode).double()
    with loom.no_grad():
        bag.weight.copy_(loom.tensor(w))
    bag = bag.to(device)
    out = bag(loom.tensor(idx, device=device), loom.tensor(offsets, device=device))
    (out * out).sum().backward()

    reference = torch.nn.EmbeddingBag(6, 3, max_norm=1.5, mode=mode).double()
    with torch.no_grad():
        reference.weight.copy_(torch.tensor(w))
    want = reference(torch.tensor(idx), torch.tensor(offsets))
    np.testing.assert_allclose(out.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(bag.weight.detach().cpu().numpy(), reference.weight.detach().numpy(), rtol=1e-10)

    emb = torch.nn.Embedding(6, 3, scale_grad_by_freq=True).double()
    with torch.no_grad():
        emb.weight.copy_(reference.weight)  # already renormalized
    rows = emb(torch.tensor(idx))
    bags = [rows[a:b] for a, b in zip(offsets, list(offsets[1:]) + [len(idx)])]
    sums = torch.stack([r.sum(0) if mode == "sum" else r.mean(0) for r in bags])
    (sums * sums).sum().backward()
    np.testing.assert_allclose(bag.weight.grad.cpu().numpy(), emb.weight.grad.numpy(), rtol=1e-10)


def test_embedding_module_scales_gradients_by_frequency_like_torch():
    w = np.random.default_rng(9).standard_normal((5, 2))
    idx = np.array([[0, 1, 1], [1, 4, 0]])
    grads = []
    for lib in (torch, loom):
        emb = lib.nn.Embedding(5, 2, scale_grad_by_freq=True, padding_idx=4).double()
        with lib.no_grad():
            emb.weight.copy_(lib.tensor(w))
        emb(lib.tensor(idx)).pow(2).sum().backward()
        grads.append(emb.weight.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)
    with pytest.raises(ValueError, match="max mode"):
        loom.nn.functional.embedding_bag(loom.tensor([[0, 1]]), loom.ones(2, 2), mode="max", scale_grad_by_freq=True)
