"""The optimizers PyTorch has beyond SGD and Adam (Adadelta, Adagrad, RMSprop, Adamax, NAdam,
RAdam, ASGD, Rprop) and the complete forms of SGD / Adam / AdamW against torch.optim: parameter
trajectories over 25 float64 steps of a regression with every option, in eager and lazy mode;
param-group keys and defaults; state_dict layout, save and load in both directions (PyTorch's
state dicts hold 0-d tensors where loom keeps numbers); add_param_group, zero_grad; argument
errors; and in lazy mode a changing learning rate (and any hyperparameter) changes no trace."""

import copy

import numpy as np
import pytest

import loom
from _ops_helpers import device, torch  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

_G = np.random.default_rng(0)
W0, B0 = _G.standard_normal((4, 3)), _G.standard_normal(4)
X, Y = _G.standard_normal((8, 3)), _G.standard_normal((8, 4))
STEPS = 25


def problem(lib, device="cpu"):
    if lib is torch:
        w, b = torch.tensor(W0, requires_grad=True), torch.tensor(B0, requires_grad=True)
        x, y = torch.tensor(X), torch.tensor(Y)
    else:
        w, b = loom.tensor(W0, device=device).requires_grad_(), loom.tensor(B0, device=device).requires_grad_()
        x, y = loom.tensor(X, device=device), loom.tensor(Y, device=device)

    def loss():
        return ((x @ w.T + b - y) ** 2).mean() + (w * w).sum() * 0.01

    return [w, b], loss


def trajectory(lib, make, device="cpu", steps=STEPS):
    params, loss_fn = problem(lib, device)
    opt = make(lib, params)
    out = []
    for _ in range(steps):
        opt.zero_grad()
        loss_fn().backward()
        opt.step()
        out.append(np.concatenate([p.detach().cpu().numpy().ravel() for p in params]))
    return np.array(out), opt, params


# PyTorch 1.13 keeps ASGD's eta and mu, and NAdam's mu_product, as float32 tensors: its
# trajectories carry their rounding; loom's numbers are float64.
ROUNDED = {"asgd", "asgd_all", "nadam", "nadam_all"}

OPTIMIZERS = {
    "adadelta": lambda m, p: m.optim.Adadelta(p),
    "adadelta_all": lambda m, p: m.optim.Adadelta(p, lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True),
    "adagrad": lambda m, p: m.optim.Adagrad(p, lr=0.1),
    "adagrad_all": lambda m, p: m.optim.Adagrad(p, lr=0.1, lr_decay=0.01, weight_decay=0.1,
                                                initial_accumulator_value=0.2, eps=1e-8, maximize=True),
    "rmsprop": lambda m, p: m.optim.RMSprop(p),
    "rmsprop_centered": lambda m, p: m.optim.RMSprop(p, lr=0.01, centered=True),
    "rmsprop_momentum": lambda m, p: m.optim.RMSprop(p, lr=0.01, momentum=0.9, maximize=True),
    "rmsprop_all": lambda m, p: m.optim.RMSprop(p, lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.1, momentum=0.5,
                                                centered=True),
    "adamax": lambda m, p: m.optim.Adamax(p),
    "adamax_all": lambda m, p: m.optim.Adamax(p, lr=0.01, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1,
                                              maximize=True),
    "nadam": lambda m, p: m.optim.NAdam(p, foreach=True),
    "nadam_all": lambda m, p: m.optim.NAdam(p, lr=0.01, betas=(0.8, 0.95), weight_decay=0.1, momentum_decay=0.01,
                                            foreach=True),
    "radam": lambda m, p: m.optim.RAdam(p),
    "radam_all": lambda m, p: m.optim.RAdam(p, lr=0.01, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1),
    "asgd": lambda m, p: m.optim.ASGD(p),
    "asgd_all": lambda m, p: m.optim.ASGD(p, lr=0.05, lambd=0.01, alpha=0.5, t0=5, weight_decay=0.1,
                                          maximize=False),
    "rprop": lambda m, p: m.optim.Rprop(p),
    "rprop_all": lambda m, p: m.optim.Rprop(p, lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.1), maximize=True),
    "sgd_nesterov_foreach": lambda m, p: m.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, foreach=True),
    "adam_amsgrad_maximize": lambda m, p: m.optim.Adam(p, lr=0.05, amsgrad=True, maximize=True, foreach=False),
    "adamw_amsgrad": lambda m, p: m.optim.AdamW(p, lr=0.05, amsgrad=True, weight_decay=0.1, capturable=False),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_trajectory_matches_pytorch(device, name):
    want, topt, _ = trajectory(torch, OPTIMIZERS[name])
    got, lopt, params = trajectory(loom, OPTIMIZERS[name], device)
    rtol = 1e-7 if name in ROUNDED else 1e-12
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())
    assert all(p.is_leaf and p.requires_grad and p.is_lazy == (device == "lazy") for p in params)
    # the same state entries per parameter, holding the same values
    tstate, lstate = topt.state_dict()["state"], lopt.state_dict()["state"]
    assert sorted(tstate) == sorted(lstate)
    for i in tstate:
        assert list(lstate[i]) == list(tstate[i]), name
        for key, value in tstate[i].items():
            got_v = lstate[i][key]
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                np.testing.assert_allclose(got_v.cpu().numpy(), value.numpy(), rtol=rtol * 100,
                                           atol=rtol * 100 * max(1.0, np.abs(value.numpy()).max()))
            elif value is not None:
                assert float(got_v) == pytest.approx(float(value), rel=1e-6)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_param_groups_have_pytorch_keys_and_defaults(name):
    tp, lp = problem(torch)[0], problem(loom)[0]
    topt, lopt = OPTIMIZERS[name](torch, tp), OPTIMIZERS[name](loom, lp)
    tgroup, lgroup = topt.param_groups[0], lopt.param_groups[0]
    # loom's groups hold PyTorch 1.13's keys with its values, and the newer keys of PyTorch 2
    for key, value in tgroup.items():
        if key != "params":
            assert lgroup[key] == value or (key == "fused" and not value and not lgroup[key]), (name, key)
    for key, value in topt.defaults.items():
        assert lopt.defaults[key] == value or (key == "fused" and not value and not lopt.defaults[key]), (name, key)


@pytest.mark.parametrize("name", ["adadelta_all", "adagrad_all", "rmsprop_all", "adamax_all", "nadam", "radam",
                                  "asgd_all", "rprop_all", "adam_amsgrad_maximize"])
def test_state_dict_round_trips_with_pytorch(name):
    """A PyTorch optimizer's state_dict (0-d tensors for step, mu_product, eta, mu) loads into
    loom, which then continues PyTorch's trajectory; loom's state_dict loads into PyTorch."""
    make = OPTIMIZERS[name]
    want, _, _ = trajectory(torch, make, steps=12)
    # torch for 6 steps, then loom from its state
    tparams, tloss = problem(torch)
    topt = make(torch, tparams)
    for _ in range(6):
        topt.zero_grad()
        tloss().backward()
        topt.step()
    lparams, lloss = problem(loom)
    with loom.no_grad():
        for lp, tp in zip(lparams, tparams):
            lp.copy_(loom.tensor(tp.detach().numpy()))
    lopt = make(loom, lparams)
    tsd = topt.state_dict()
    lsd = {"state": {i: {k: loom.tensor(v.numpy()) if isinstance(v, torch.Tensor) else v for k, v in s.items()}
                     for i, s in tsd["state"].items()}, "param_groups": copy.deepcopy(tsd["param_groups"])}
    lopt.load_state_dict(lsd)
    assert isinstance(lopt.state[lparams[0]]["step"], (int, float))
    got = []
    for _ in range(6):
        lopt.zero_grad()
        lloss().backward()
        lopt.step()
        got.append(np.concatenate([p.detach().numpy().ravel() for p in lparams]))
    rtol = 1e-7 if name in ROUNDED else 1e-12
    np.testing.assert_allclose(np.array(got), want[6:], rtol=rtol, atol=rtol)
    # and back: loom's state dict into a fresh PyTorch optimizer
    lsd = lopt.state_dict()
    tparams2, _ = problem(torch)
    topt2 = make(torch, tparams2)
    topt2.load_state_dict({"state": {i: {k: torch.tensor(v.numpy()) if isinstance(v, loom.Tensor) else v
                                         for k, v in s.items()} for i, s in lsd["state"].items()},
                           "param_groups": [{k: v for k, v in g.items() if k in topt2.param_groups[0]}
                                            for g in lsd["param_groups"]]})
    assert sorted(topt2.state_dict()["state"][0]) == sorted(lsd["state"][0])


def test_loaded_state_is_copied_and_cast():
    params, loss = problem(loom)
    opt = loom.optim.RMSprop(params, momentum=0.5)
    opt.zero_grad()
    loss().backward()
    opt.step()
    sd = opt.state_dict()
    other = loom.optim.RMSprop([p.detach().float().requires_grad_() for p in params], momentum=0.5)
    other.load_state_dict(sd)
    buf = next(iter(other.state.values()))["momentum_buffer"]
    assert buf.dtype is loom.float32  # cast to the parameter's dtype
    assert buf.data_ptr() != sd["state"][0]["momentum_buffer"].data_ptr()


def test_add_param_group_and_zero_grad():
    params, loss = problem(loom)
    opt = loom.optim.Adagrad([params[0]], lr=0.1)
    opt.add_param_group({"params": params[1], "lr": 0.5})
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["lr_decay"] == 0 and "sum" in opt.state[params[1]]  # Adagrad's eager state
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        opt.add_param_group({"params": [params[0]]})
    with pytest.raises(TypeError, match="optimizer parameters need to be organized in ordered collections"):
        opt.add_param_group({"params": {loom.zeros(1).requires_grad_()}})
    loss().backward()
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in params)
    opt.zero_grad()
    assert all(p.grad is None for p in params)
    sgd = loom.optim.SGD([{"params": [loom.zeros(1).requires_grad_()]}], lr=0.1)
    assert sgd.param_groups[0]["momentum"] == 0


def test_argument_errors_match_pytorch():
    p, tp = loom.zeros(2).requires_grad_(), torch.zeros(2, requires_grad=True)
    cases = [("Adadelta", dict(rho=1.5), "Invalid rho value: 1.5"), ("Adagrad", dict(lr_decay=-1), "Invalid lr_decay"),
             ("Adagrad", dict(initial_accumulator_value=-1), "Invalid initial_accumulator_value"),
             ("RMSprop", dict(alpha=-1), "Invalid alpha value"), ("RMSprop", dict(momentum=-1), "Invalid momentum"),
             ("Adamax", dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1"),
             ("NAdam", dict(momentum_decay=-1), "Invalid momentum_decay value"),
             ("RAdam", dict(eps=-1), "Invalid epsilon value"), ("Rprop", dict(etas=(1.5, 1.2)), "Invalid eta values"),
             ("ASGD", dict(weight_decay=-1), "Invalid weight_decay value")]
    for name, kw, message in cases:
        with pytest.raises(ValueError, match=message):
            getattr(loom.optim, name)([p], **kw)
        with pytest.raises(ValueError, match=message):
            getattr(torch.optim, name)([tp], **kw)


@pytest.mark.parametrize("name", ["adadelta_all", "adagrad_all", "rmsprop_all", "adamax_all", "nadam", "radam",
                                  "asgd", "rprop_all", "adam_amsgrad_maximize", "sgd_nesterov_foreach"])
def test_lazy_hyperparameter_changes_do_not_change_the_trace(name):
    """Every step's lr (and, here, weight decay or momentum) differs, among them 1.0 and 0.0,
    values a Python number would fold into the trace: after the warm-up steps each step
    replays the cached graph. (RAdam's first steps take a different path, as in PyTorch;
    ASGD's averaging starts at t0.)"""
    params, loss_fn = problem(loom, "lazy")
    opt = OPTIMIZERS[name](loom, params)
    lrs = [0.01, 0.02, 1.0, 0.0, 0.03, 0.5, 0.04, 0.07, 0.011]

    def step(lr):
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(7):  # the first steps differ (state appears; RAdam's rectification starts at step 6)
        step(0.01)
    for lr in lrs:
        before = loom.metrics()
        step(lr)
        after = loom.metrics()
        assert after["graph_cache_misses"] == before["graph_cache_misses"], (name, lr)
        assert after["kernels_compiled"] == before["kernels_compiled"]
