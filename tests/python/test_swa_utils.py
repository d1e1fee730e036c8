"""loom.optim.swa_utils against torch.optim.swa_utils: AveragedModel's equal-weight and
exponential averages (avg_fn and multi_avg_fn forms, use_buffers both ways) over the same
sequence of weights, SWALR's learning rates for both ramps, update_bn's statistics, a state-dict
round trip, and in lazy mode an EMA update that neither syncs nor compiles after warm-up."""

import numpy as np
import pytest

import loom
from _nn_helpers import counters_after_warm_up
from _ops_helpers import torch  # noqa: F401

swa = pytest.importorskip("torch.optim.swa_utils")


def nets(seed=0):
    rng = np.random.default_rng(seed)
    ours = loom.nn.Sequential(loom.nn.Linear(3, 4), loom.nn.BatchNorm1d(4), loom.nn.Linear(4, 2)).double()
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2)).double()
    for (_, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        if a.dtype == loom.float64:
            value = rng.standard_normal(tuple(a.shape))
            a.copy_(loom.tensor(value))
            b.copy_(torch.tensor(value))
    return ours, theirs


def perturb(step, ours, theirs):
    rng = np.random.default_rng(100 + step)
    with loom.no_grad(), torch.no_grad():
        for a, b in zip(list(ours.parameters()) + list(ours.buffers()), list(theirs.parameters()) + list(theirs.buffers())):
            if a.dtype == loom.float64:
                delta = rng.standard_normal(tuple(a.shape))
                a.add_(loom.tensor(delta))
                b.add_(torch.tensor(delta))
            else:
                a.add_(1)
                b.add_(1)


def same(ours, theirs, source=None):
    """ours' state equals theirs'; with `source`, ours' buffers and integer tensors equal the source
    model's instead. There loom follows PyTorch 2 (not the 1.13 here): buffers that are not
    averaged follow the model, and an integer buffer (batch norm's counter) takes the model's
    latest value rather than an average truncated to an integer."""
    buffers = {n for n, _ in ours.named_buffers()}
    followed = dict(source.state_dict()) if source is not None else {}
    for (name, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        local = name.removeprefix("module.")
        if source is not None and local in followed and (name in buffers and not getattr(ours, "use_buffers", True)
                                   or not a.dtype.is_floating_point):
            b = followed[local]
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14, err_msg=name)


@pytest.mark.parametrize("use_buffers", [False, True])
@pytest.mark.parametrize("form", ["swa", "ema_avg_fn", "ema_multi"])
def test_averaged_model_matches_torch(form, use_buffers):
    ours, theirs = nets()
    kw = {"ema_avg_fn": lambda m: {"avg_fn": m.get_ema_avg_fn(0.9)},
          "ema_multi": lambda m: {"multi_avg_fn": m.get_ema_multi_avg_fn(0.9)}, "swa": lambda m: {}}[form]
    if form != "swa" and not hasattr(swa, "get_ema_avg_fn"):  # torch 1.13 has only avg_fn
        kw_theirs = {"avg_fn": lambda e, c, n: 0.9 * e + 0.1 * c}
    else:
        kw_theirs = kw(swa)
    a = loom.optim.swa_utils.AveragedModel(ours, use_buffers=use_buffers, **kw(loom.optim.swa_utils))
    b = swa.AveragedModel(theirs, use_buffers=use_buffers, **kw_theirs)
    for step in range(4):
        perturb(step, ours, theirs)
        a.update_parameters(ours)
        b.update_parameters(theirs)
        same(a, b, source=ours)
    assert a.n_averaged.item() == 4
    x = np.random.default_rng(5).standard_normal((5, 3))
    a.eval(), b.eval()
    np.testing.assert_allclose(a(loom.tensor(x)).detach().numpy(), b(torch.tensor(x)).detach().numpy(), rtol=1e-12)


def test_state_dict_round_trip_continues_the_average():
    ours, _ = nets()
    a = loom.optim.swa_utils.AveragedModel(ours)
    for _ in range(3):
        a.update_parameters(ours)
        with loom.no_grad():
            for p in ours.parameters():
                p.add_(1.0)
    b = loom.optim.swa_utils.AveragedModel(ours)
    b.load_state_dict(a.state_dict())
    a.update_parameters(ours)
    b.update_parameters(ours)  # an average with n_averaged 3 from the loaded buffer, not a first copy
    for p, q in zip(a.parameters(), b.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy())


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("anneal_epochs", [0, 1, 5])
def test_swalr_matches_torch(strategy, anneal_epochs):
    lrs = []
    for lib in (loom, torch):
        params = [lib.zeros(2, requires_grad=True)]
        opt = lib.optim.SGD([{"params": params}, {"params": [lib.zeros(1, requires_grad=True)], "lr": 0.3}], lr=0.1)
        sched = lib.optim.swa_utils.SWALR(opt, swa_lr=[0.01, 0.02], anneal_epochs=anneal_epochs,
                                          anneal_strategy=strategy) if lib is loom else \
            swa.SWALR(opt, swa_lr=[0.01, 0.02], anneal_epochs=anneal_epochs, anneal_strategy=strategy)
        seen = []
        for _ in range(8):
            opt.step()
            sched.step()
            seen.append([g["lr"] for g in opt.param_groups])
        lrs.append(seen)
    np.testing.assert_allclose(lrs[0], lrs[1], rtol=1e-12)
    with pytest.raises(ValueError, match="anneal_strategy"):
        loom.optim.swa_utils.SWALR(loom.optim.SGD([loom.zeros(1, requires_grad=True)], lr=0.1), 0.1,
                                   anneal_strategy="step")


def test_update_bn_matches_torch():
    ours, theirs = nets(1)
    data = np.random.default_rng(2).standard_normal((12, 3))
    loaders = ([(loom.tensor(data[i:i + 4]),) for i in range(0, 12, 4)],
               [(torch.tensor(data[i:i + 4]),) for i in range(0, 12, 4)])
    ours.eval(), theirs.eval()
    loom.optim.swa_utils.update_bn(loaders[0], ours)
    swa.update_bn(loaders[1], theirs)
    same(ours, theirs)
    assert not ours.training and ours[1].momentum == theirs[1].momentum


def test_a_lazy_ema_update_does_not_sync_or_recompile():
    loom.manual_seed(0)
    model = loom.nn.Sequential(loom.nn.Linear(4, 4), loom.nn.Tanh(), loom.nn.Linear(4, 1)).to("lazy")
    ema = loom.optim.swa_utils.AveragedModel(model, multi_avg_fn=loom.optim.swa_utils.get_ema_multi_avg_fn(0.99))
    opt = loom.optim.Adam(model.parameters(), lr=1e-2)
    x = loom.randn(8, 4, device="lazy")

    def step():
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update_parameters(model)
        float(loss)

    moved = counters_after_warm_up(step, steps=3)
    assert moved["syncs"] == 3  # the float(loss) per step only
    assert moved["kernels_compiled"] == 0 and moved["graph_cache_misses"] == 0
