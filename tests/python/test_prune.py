"""loom.nn.utils.prune against torch.nn.utils.prune (torch 1.13): the same masks for the
deterministic methods (L1, Ln structured, custom masks, global L1, combinations of them), the
same re-parametrization (name_orig, name_mask, the hook, state_dict), the same gradients through
a pruned layer, and the counts and structure of the random methods' masks. On cpu and lazy."""

import numpy as np
import pytest

import loom
from _nn_helpers import assert_close, copy_weights, np_, to_loom
from _ops_helpers import device  # noqa: F401  (the cpu / lazy fixture)

torch = pytest.importorskip("torch")
import loom.nn.utils.prune as lprune  # noqa: E402
import torch.nn.utils.prune as tprune  # noqa: E402


def pair(make, device):
    """The same module in torch and loom (float64, torch's initial weights)."""
    torch.manual_seed(0)
    tm = make(torch.nn).double()
    lm = make(loom.nn).double().to(device)
    copy_weights(tm, lm, device)
    return tm, lm


def linear(nn):
    return nn.Linear(6, 5)


def conv(nn):
    return nn.Conv2d(3, 4, 3)


def net(nn):
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))


def same_pruning(tm, lm):
    """Masks, originals, pruned values, hooks and state_dict entries agree."""
    tstate, lstate = tm.state_dict(), lm.state_dict()
    assert list(tstate) == list(lstate)
    for k in tstate:
        assert_close(lstate[k], tstate[k], what=k)
    tnames = [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in lm.named_parameters()] == tnames
    assert [n for n, _ in lm.named_buffers()] == [n for n, _ in tm.named_buffers()]
    for tsub, lsub in zip(tm.modules(), lm.modules()):
        thooks = [h for h in tsub._forward_pre_hooks.values() if isinstance(h, tprune.BasePruningMethod)]
        lhooks = [h for h in lsub._forward_pre_hooks.values() if isinstance(h, lprune.BasePruningMethod)]
        assert [type(h).__name__ for h in lhooks] == [type(h).__name__ for h in thooks]
        for h in thooks:
            assert_close(getattr(lsub, h._tensor_name), getattr(tsub, h._tensor_name), what=h._tensor_name)
    assert lprune.is_pruned(lm) == tprune.is_pruned(tm)


def same_training_step(tm, lm, shape, device):
    """One forward + backward: outputs and the gradients of every parameter (name_orig included)."""
    x = torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    tout = tm(x)
    lout = lm(to_loom(x, device))
    assert_close(lout, tout, what="output")
    tout.square().sum().backward()
    lout.square().sum().backward()
    for (name, tp), (_, lp) in zip(tm.named_parameters(), lm.named_parameters()):
        assert_close(lp.grad, tp.grad, what=name + ".grad")


@pytest.mark.parametrize("amount", [0, 3, 0.0, 0.4, 1.0, 30])
def test_l1_unstructured(device, amount):
    tm, lm = pair(linear, device)
    tprune.l1_unstructured(tm, "weight", amount=amount)
    assert lprune.l1_unstructured(lm, "weight", amount=amount) is lm
    same_pruning(tm, lm)
    assert int((np_(lm.weight_mask) == 0).sum()) == (amount if isinstance(amount, int) else round(amount * 30))
    same_training_step(tm, lm, (4, 6), device)


def test_l1_unstructured_importance_scores(device):
    tm, lm = pair(linear, device)
    scores = torch.arange(30, dtype=torch.float64).reshape(5, 6).flip(0)
    tprune.l1_unstructured(tm, "weight", amount=7, importance_scores=scores)
    lprune.l1_unstructured(lm, "weight", amount=7, importance_scores=to_loom(scores, device))
    same_pruning(tm, lm)


@pytest.mark.parametrize("n, dim, amount", [(1, 0, 2), (2, 1, 0.5), (float("inf"), -1, 1), (2, 0, 0),
                                            (3, 2, 0.25)])
def test_ln_structured(device, n, dim, amount):
    tm, lm = pair(conv, device)
    tprune.ln_structured(tm, "weight", amount=amount, n=n, dim=dim)
    lprune.ln_structured(lm, "weight", amount=amount, n=n, dim=dim)
    same_pruning(tm, lm)
    same_training_step(tm, lm, (2, 3, 5, 5), device)


def test_custom_from_mask_and_remove(device):
    tm, lm = pair(linear, device)
    mask = (torch.arange(5, dtype=torch.float64) % 2).unsqueeze(1).expand(5, 6)
    tprune.custom_from_mask(tm, "weight", mask)
    lprune.custom_from_mask(lm, "weight", to_loom(mask, device))
    tprune.identity(tm, "bias")
    lprune.identity(lm, "bias")
    same_pruning(tm, lm)
    weight = lm.weight_orig
    tprune.remove(tm, "weight")
    assert lprune.remove(lm, "weight") is lm
    same_pruning(tm, lm)
    # The Parameter an optimizer already holds stays the module's parameter.
    assert lm.weight is weight and isinstance(lm.weight, loom.nn.Parameter)
    assert not hasattr(lm, "weight_mask") and not hasattr(lm, "weight_orig")
    same_training_step(tm, lm, (3, 6), device)


def test_pruning_twice_combines_masks(device):
    """A second method only sees what the first kept: a container replaces the first hook."""
    tm, lm = pair(conv, device)
    for prune in (tprune, lprune):
        m = tm if prune is tprune else lm
        prune.l1_unstructured(m, "weight", amount=0.3)
        prune.ln_structured(m, "weight", amount=1, n=2, dim=0)
        prune.l1_unstructured(m, "weight", amount=5)
    same_pruning(tm, lm)
    hook = next(h for h in lm._forward_pre_hooks.values() if isinstance(h, lprune.BasePruningMethod))
    assert isinstance(hook, lprune.PruningContainer) and len(hook) == 3
    assert [type(m).__name__ for m in hook] == ["L1Unstructured", "LnStructured", "L1Unstructured"]
    same_training_step(tm, lm, (2, 3, 5, 5), device)


def test_global_unstructured(device):
    tm, lm = pair(net, device)
    tprune.l1_unstructured(tm[0], "weight", amount=0.5)
    lprune.l1_unstructured(lm[0], "weight", amount=0.5)
    targets = [(0, "weight"), (0, "bias"), (2, "weight")]
    tprune.global_unstructured([(tm[i], n) for i, n in targets], pruning_method=tprune.L1Unstructured, amount=20)
    lprune.global_unstructured([(lm[i], n) for i, n in targets], pruning_method=lprune.L1Unstructured, amount=20)
    same_pruning(tm, lm)
    same_training_step(tm, lm, (4, 6), device)


def test_random_unstructured_and_structured(device):
    lm = conv(loom.nn).to(device)
    loom.manual_seed(3)
    lprune.random_unstructured(lm, "weight", amount=0.25)
    mask = np_(lm.weight_mask)
    assert set(np.unique(mask)) <= {0.0, 1.0} and int((mask == 0).sum()) == round(0.25 * mask.size)
    np.testing.assert_array_equal(np_(lm.weight), np_(lm.weight_orig) * mask)
    lprune.random_structured(lm, "weight", amount=2, dim=1)
    mask2 = np_(lm.weight_mask)
    # Whole input channels are pruned, on top of the earlier entries.
    dead = [c for c in range(3) if not mask2[:, c].any()]
    assert len(dead) == 2 and (mask2 <= mask).all()
    # The forward pre-hook recomputes weight from weight_orig: an update of the original shows.
    with loom.no_grad():
        lm.weight_orig.add_(1.0)
    lm(loom.zeros(1, 3, 5, 5, device=device))
    np.testing.assert_allclose(np_(lm.weight), np_(lm.weight_orig) * mask2)


def test_pruned_state_dict_round_trip(device):
    """A pruned model's state_dict loads into a model with the same entries (name_orig,
    name_mask), here one pruned by identity, whose hook then applies the loaded mask; and into
    torch's."""
    tm, lm = pair(net, device)
    lprune.l1_unstructured(lm[0], "weight", amount=0.5)
    other = net(loom.nn).double().to(device)
    lprune.identity(other[0], "weight")
    other.load_state_dict(lm.state_dict())
    other(loom.zeros(1, 6, dtype=loom.float64, device=device))
    np.testing.assert_array_equal(np_(other[0].weight), np_(lm[0].weight))
    tprune.l1_unstructured(tm[0], "weight", amount=0.5)
    tm.load_state_dict({k: torch.from_numpy(np_(v)) for k, v in lm.state_dict().items()})
    same_pruning(tm, lm)


@pytest.mark.parametrize("call, error", [
    (lambda p, m: p.l1_unstructured(m, "weight", amount=-1), ValueError),
    (lambda p, m: p.l1_unstructured(m, "weight", amount=1.5), ValueError),
    (lambda p, m: p.l1_unstructured(m, "weight", amount="a"), TypeError),
    (lambda p, m: p.l1_unstructured(m, "weight", amount=31), ValueError),
    (lambda p, m: p.ln_structured(m, "bias", amount=1, n=2, dim=0), ValueError),
    (lambda p, m: p.random_structured(m, "bias", amount=1, dim=0), ValueError),
    (lambda p, m: p.l1_unstructured(m, "nothing", amount=1), AttributeError),
    (lambda p, m: p.remove(m, "weight"), ValueError),
    (lambda p, m: p.global_unstructured([(m, "weight")], p.RandomStructured, amount=1), TypeError),
    (lambda p, m: p.global_unstructured(5, p.L1Unstructured, amount=1), TypeError),
])
def test_errors_leave_the_module_unchanged(device, call, error):
    tm, lm = pair(linear, device)
    with pytest.raises(error):
        call(tprune, tm)
    with pytest.raises(error):
        call(lprune, lm)
    assert [n for n, _ in lm.named_parameters()] == ["weight", "bias"]
    assert not lprune.is_pruned(lm) and not list(lm.buffers())


def test_failed_second_pruning_keeps_the_first(device):
    _, lm = pair(linear, device)
    lprune.l1_unstructured(lm, "weight", amount=3)
    before = np_(lm.weight_mask)
    with pytest.raises(ValueError):
        lprune.l1_unstructured(lm, "weight", amount=100)
    assert lprune.is_pruned(lm)
    np.testing.assert_array_equal(np_(lm.weight_mask), before)
    lprune.remove(lm, "weight")
    assert not lprune.is_pruned(lm)


def test_prune_method_on_a_tensor(device):
    t = torch.tensor([[0.5, -2.0, 0.1], [3.0, -0.2, 1.0]], dtype=torch.float64)
    want = tprune.L1Unstructured(amount=2).prune(t)
    got = lprune.L1Unstructured(amount=2).prune(to_loom(t, device))
    assert_close(got, want)


def test_training_a_pruned_model(device):
    """Pruned entries stay zero through optimizer steps (the mask multiplies weight_orig before
    every forward), and the trajectory equals torch's."""
    tm, lm = pair(net, device)
    for prune, m in ((tprune, tm), (lprune, lm)):
        prune.ln_structured(m[0], "weight", amount=3, n=1, dim=0)
        prune.l1_unstructured(m[2], "weight", amount=0.5)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    lopt = loom.optim.SGD(lm.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(2)
    for _ in range(5):
        x = torch.randn(8, 6, dtype=torch.float64, generator=g)
        tloss = tm(x).square().mean()
        lloss = lm(to_loom(x, device)).square().mean()
        topt.zero_grad()
        lopt.zero_grad()
        tloss.backward()
        lloss.backward()
        topt.step()
        lopt.step()
        assert_close(lloss, tloss, what="loss")
    same_pruning(tm, lm)
    assert (np_(lm[0].weight)[np_(lm[0].weight_mask) == 0] == 0).all()
