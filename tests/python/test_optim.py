"""loom.optim against torch.optim: SGD (momentum, dampening, Nesterov, weight decay, maximize),
Adam and AdamW (weight decay, amsgrad, maximize) follow PyTorch's parameter trajectories over 20
steps of a small float64 regression; in lazy mode parameters, gradients and optimizer state keep
their storage across steps and a changing learning rate does not change the trace; zero_grad,
state_dict round trips, param groups and the StepLR / CosineAnnealingLR schedules.
"""

import copy

import numpy as np
import pytest

import loom
from _ops_helpers import device, torch  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

_G = np.random.default_rng(0)
W0 = _G.standard_normal((4, 3))
B0 = _G.standard_normal(4)
X = _G.standard_normal((8, 3))
Y = _G.standard_normal((8, 4))
STEPS = 20


class Problem:
    """A linear least-squares problem with parameters (w, b), in loom (on a device) or torch."""

    def __init__(self, lib, device="cpu", dtype="float64"):
        self.lib, self.device = lib, device
        dt = getattr(lib, dtype)
        if lib is torch:
            self.w = torch.tensor(W0, dtype=dt, requires_grad=True)
            self.b = torch.tensor(B0, dtype=dt, requires_grad=True)
            self.x, self.y = torch.tensor(X, dtype=dt), torch.tensor(Y, dtype=dt)
        else:
            self.w = loom.tensor(W0, dtype=dt, device=device).requires_grad_()
            self.b = loom.tensor(B0, dtype=dt, device=device).requires_grad_()
            self.x, self.y = loom.tensor(X, dtype=dt, device=device), loom.tensor(Y, dtype=dt, device=device)

    @property
    def params(self):
        return [self.w, self.b]

    def loss(self):
        return ((self.x @ self.w.T + self.b - self.y) ** 2).mean() + (self.w * self.w).sum() * 0.01

    def step(self, opt):
        opt.zero_grad()
        loss = self.loss()
        loss.backward()
        opt.step()
        return loss

    def values(self):
        return [np.array(np_(p), copy=True) for p in self.params]


def np_(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return np.asarray(t.detach().numpy())


def trajectory(lib, device, make_opt, steps=STEPS):
    prob = Problem(lib, device)
    opt = make_opt(lib, prob.params)
    out = []
    for _ in range(steps):
        prob.step(opt)
        out.append(prob.values())
    return out, prob, opt


def assert_trajectories_close(got, want, rtol=1e-6):
    assert len(got) == len(want)
    for step, (g, w) in enumerate(zip(got, want)):
        for a, b in zip(g, w):
            scale = np.abs(b).max()
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale, err_msg=f"step {step + 1}")


OPTIMIZERS = {
    "sgd": lambda m, p: m.optim.SGD(p, lr=0.1),
    "sgd_momentum": lambda m, p: m.optim.SGD(p, lr=0.05, momentum=0.9),
    "sgd_dampening": lambda m, p: m.optim.SGD(p, lr=0.05, momentum=0.8, dampening=0.3),
    "sgd_nesterov": lambda m, p: m.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    "sgd_weight_decay": lambda m, p: m.optim.SGD(p, lr=0.1, momentum=0.5, weight_decay=0.1),
    "sgd_maximize": lambda m, p: m.optim.SGD(p, lr=0.01, momentum=0.3, maximize=True),
    "sgd_all": lambda m, p: m.optim.SGD(p, lr=0.03, momentum=0.7, weight_decay=0.05, nesterov=True, maximize=False),
    "adam": lambda m, p: m.optim.Adam(p, lr=0.05),
    "adam_betas_eps": lambda m, p: m.optim.Adam(p, lr=0.02, betas=(0.8, 0.95), eps=1e-6),
    "adam_weight_decay": lambda m, p: m.optim.Adam(p, lr=0.05, weight_decay=0.1),
    "adam_amsgrad": lambda m, p: m.optim.Adam(p, lr=0.05, amsgrad=True),
    "adam_amsgrad_weight_decay": lambda m, p: m.optim.Adam(p, lr=0.05, amsgrad=True, weight_decay=0.2),
    "adam_maximize": lambda m, p: m.optim.Adam(p, lr=0.01, maximize=True),
    "adamw": lambda m, p: m.optim.AdamW(p, lr=0.05),
    "adamw_weight_decay": lambda m, p: m.optim.AdamW(p, lr=0.05, weight_decay=0.3),
    "adamw_amsgrad": lambda m, p: m.optim.AdamW(p, lr=0.05, amsgrad=True, weight_decay=0.1),
    "adamw_maximize": lambda m, p: m.optim.AdamW(p, lr=0.01, maximize=True, betas=(0.5, 0.9)),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_trajectory_matches_pytorch(device, name):
    make = OPTIMIZERS[name]
    want, _, _ = trajectory(torch, "cpu", make)
    got, prob, opt = trajectory(loom, device, make)
    assert_trajectories_close(got, want)
    assert all(p.is_lazy == (device == "lazy") for p in prob.params)
    assert all(p.requires_grad and p.is_leaf for p in prob.params)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_step_moves_version_counters_as_pytorch(device, name):
    """Each in-place update of a step (loom._C's optimizer steps) moves the version counter of the
    parameter and of its state buffers by one, as PyTorch's single-tensor updates do; zero_grad
    without set_to_none and the accumulation of the next backward move the gradient's."""
    versions = []
    for lib, dev in [(torch, "cpu"), (loom, device)]:
        prob = Problem(lib, dev)
        opt = OPTIMIZERS[name](lib, prob.params)
        seen = []
        for _ in range(3):
            opt.zero_grad(set_to_none=False)
            prob.loss().backward()
            opt.step()
            seen.append([[p._version, p.grad._version] for p in prob.params])
            seen.append([[k, v._version] for p in prob.params for k, v in sorted(opt.state[p].items())
                         if isinstance(v, (torch.Tensor, loom.Tensor)) and k != "step"])
        versions.append(seen)
    assert versions[1] == versions[0]


@pytest.mark.parametrize("name", ["sgd_momentum", "adam", "adamw_amsgrad"])
def test_float32_trajectory_matches_pytorch(device, name):
    make = OPTIMIZERS[name]
    results = []
    for lib, dev in [(torch, "cpu"), (loom, device)]:
        prob = Problem(lib, dev, dtype="float32")
        opt = make(lib, prob.params)
        for _ in range(10):
            prob.step(opt)
        results.append(prob.values())
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_lazy_equals_eager_exactly_enough():
    eager, _, _ = trajectory(loom, "cpu", OPTIMIZERS["adamw_amsgrad"])
    lazy, _, _ = trajectory(loom, "lazy", OPTIMIZERS["adamw_amsgrad"])
    assert_trajectories_close(lazy, eager, rtol=1e-12)


def _state_tensors(opt):
    return {(id(p), k): v for p, s in opt.state.items() for k, v in s.items() if isinstance(v, loom.Tensor)}


@pytest.mark.parametrize("name", ["sgd_momentum", "adam_amsgrad", "adamw"])
def test_lazy_parameters_grads_and_state_keep_their_storage(name):
    """In lazy mode each step is one trace whose results are written into the same memory
    (parameters, .grad, optimizer state): their data_ptr is stable from step 2 on."""
    prob = Problem(loom, "lazy")
    opt = OPTIMIZERS[name](loom, prob.params)
    prob.step(opt)
    loom.sync()
    ptrs = [p.data_ptr() for p in prob.params]
    state = _state_tensors(opt)
    state_ptrs = {k: v.data_ptr() for k, v in state.items()}
    assert state_ptrs, "the optimizer keeps state"
    for _ in range(4):
        opt.zero_grad(set_to_none=False)
        prob.loss().backward()
        opt.step()
        loom.sync()
        assert [p.data_ptr() for p in prob.params] == ptrs
        now = _state_tensors(opt)
        assert now.keys() == state.keys()
        assert {k: v.data_ptr() for k, v in now.items()} == state_ptrs
        assert all(v.is_lazy for v in now.values())


def test_lazy_grad_keeps_its_storage_with_zero_grad_set_to_none_false():
    prob = Problem(loom, "lazy")
    opt = loom.optim.SGD(prob.params, lr=0.1)
    prob.step(opt)
    loom.sync()
    ptrs = [p.grad.data_ptr() for p in prob.params]
    for _ in range(3):
        opt.zero_grad(set_to_none=False)
        prob.loss().backward()
        opt.step()
        loom.sync()
        assert [p.grad.data_ptr() for p in prob.params] == ptrs


def test_eager_parameters_and_state_are_updated_in_place():
    prob = Problem(loom, "cpu")
    opt = loom.optim.Adam(prob.params, lr=0.1, amsgrad=True)
    prob.step(opt)
    ptrs = [p.data_ptr() for p in prob.params]
    state_ptrs = {k: v.data_ptr() for k, v in _state_tensors(opt).items()}
    w = prob.w
    for _ in range(3):
        prob.step(opt)
    assert prob.w is w
    assert [p.data_ptr() for p in prob.params] == ptrs
    assert {k: v.data_ptr() for k, v in _state_tensors(opt).items()} == state_ptrs


def test_step_records_no_gradient_history(device):
    prob = Problem(loom, device)
    opt = loom.optim.Adam(prob.params, lr=0.1)
    prob.step(opt)
    assert all(p.is_leaf and p.grad_fn is None and p.requires_grad for p in prob.params)
    assert all(not v.requires_grad for v in _state_tensors(opt).values())


@pytest.mark.parametrize("name", ["sgd_nesterov", "adam_amsgrad", "adamw"])
def test_lr_change_does_not_change_the_lazy_trace_key(name):
    prob = Problem(loom, "lazy")
    opt = OPTIMIZERS[name](loom, prob.params)
    sched = loom.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5, eta_min=0.001)
    keys, lrs = [], []
    for i in range(8):
        prob.step(opt)
        sched.step()
        loom.sync()
        keys.append(loom._C._last_trace_key())
        lrs.append(opt.param_groups[0]["lr"])
    assert len(set(lrs)) > 4
    assert len(set(keys[1:])) == 1, keys  # step 1 creates the state: a trace of its own
    for g in opt.param_groups:
        g["lr"] = 0.123
        if g["weight_decay"] != 0:  # (0 -> non-zero adds ops: another program, as in PyTorch's code)
            g["weight_decay"] = 0.5
    prob.step(opt)
    loom.sync()
    assert loom._C._last_trace_key() == keys[-1]


def test_lr_schedule_reaching_zero_keeps_the_trace_key():
    prob = Problem(loom, "lazy")
    opt = loom.optim.AdamW(prob.params, lr=0.1)
    sched = loom.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    keys = []
    for i in range(6):
        prob.step(opt)
        sched.step()
        loom.sync()
        keys.append(loom._C._last_trace_key())
    assert len(set(keys[1:])) == 1, keys


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_cosine_schedule_to_zero_keeps_one_trace_key(name):
    """A lazy training loop whose lr goes to exactly 0 (CosineAnnealingLR's eta_min=0) and back up
    is one trace from step 2 on (step 1 creates the state), and follows PyTorch."""
    runs = {}
    for lib, dev in [(torch, "cpu"), (loom, "lazy")]:
        prob = Problem(lib, dev)
        opt = OPTIMIZERS[name](lib, prob.params)
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3)
        keys, lrs = [], []
        for _ in range(8):
            lrs.append(opt.param_groups[0]["lr"])
            prob.step(opt)
            sched.step()
            if lib is loom:
                loom.sync()
                keys.append(loom._C._last_trace_key())
        runs[lib] = prob.values()
    assert 0.0 in lrs[1:]
    assert len(set(keys[1:])) == 1, keys
    for a, b in zip(runs[loom], runs[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-10)


# hyperparameter changes after two steps, each followed by one step; "step" makes every bias
# correction of Adam exactly 1.0 (as after ~10^5 steps)
EDGE_CHANGES = {
    "sgd": (lambda m, p: m.optim.SGD(p, lr=0.05, momentum=0.5, weight_decay=0.1),
            [dict(dampening=0.5), dict(dampening=1.0), dict(dampening=0, momentum=1), dict(momentum=0.5, lr=0),
             dict(lr=0.01, weight_decay=1), dict(lr=1.0, weight_decay=0.1), dict(lr=0.05)]),
    "sgd_nesterov": (lambda m, p: m.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
                     [dict(momentum=1.0), dict(lr=0.0), dict(momentum=0.5, lr=1), dict(lr=0.02)]),
    "adam": (lambda m, p: m.optim.Adam(p, lr=0.05, weight_decay=0.1, amsgrad=True),
             [dict(betas=(0.0, 0.0)), dict(betas=(0.5, 0.9), eps=0), dict(lr=0.0), dict(lr=0.01, weight_decay=1),
              "step", dict(lr=1, eps=1.0), dict(lr=0.05, betas=(0, 0.999))]),
    "adamw": (lambda m, p: m.optim.AdamW(p, lr=0.05, weight_decay=0.1),
              [dict(lr=0), dict(lr=10.0), dict(lr=0.05, betas=(0.0, 0.5)), dict(eps=0.0), "step",
               dict(lr=1.0, weight_decay=1.0), dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8)]),
}


@pytest.mark.parametrize("name", list(EDGE_CHANGES))
def test_hyperparameters_reaching_0_or_1_keep_the_trace_key(device, name):
    """Hyperparameters (ints or floats) set to 0 or 1, and Adam's bias corrections reaching 1,
    change neither the lazy trace nor the agreement with PyTorch."""
    make, changes = EDGE_CHANGES[name]
    runs = {}
    for lib, dev in [(torch, "cpu"), (loom, device)]:
        prob = Problem(lib, dev)
        opt = make(lib, prob.params)
        keys = []
        for change in [{}, {}] + changes:
            if change == "step":
                for st in opt.state.values():
                    if lib is torch:
                        st["step"].fill_(100_000)
                    else:
                        st["step"] = 100_000
            else:
                for g in opt.param_groups:
                    g.update(change)
            prob.step(opt)
            if lib is loom and device == "lazy":
                loom.sync()
                keys.append(loom._C._last_trace_key())
        runs[lib] = prob.values()
    if device == "lazy":
        assert len(set(keys[1:])) == 1, keys
    for a, b in zip(runs[loom], runs[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_lazy_update_equals_the_eager_update():
    """The lazy form of the updates (negated numbers) computes what the eager one (PyTorch's
    formulas) does: bitwise on this machine; the tolerance only allows a fused kernel's own
    rounding (contracted multiply-adds)."""
    for name in ("sgd_all", "sgd_dampening", "adam_amsgrad_weight_decay", "adamw_weight_decay", "adamw_maximize"):
        eager, _, _ = trajectory(loom, "cpu", OPTIMIZERS[name], steps=5)
        lazy, _, _ = trajectory(loom, "lazy", OPTIMIZERS[name], steps=5)
        assert_trajectories_close(lazy, eager, rtol=1e-14)


def test_lr_change_between_steps_matches_pytorch(device):
    results = []
    for lib, dev in [(torch, "cpu"), (loom, device)]:
        prob = Problem(lib, dev)
        opt = lib.optim.SGD(prob.params, lr=0.1, momentum=0.9)
        for i in range(6):
            for g in opt.param_groups:
                g["lr"] = 0.1 / (i + 1)
            prob.step(opt)
        results.append(prob.values())
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-10)


# ---- zero_grad ----

@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(device, set_to_none):
    prob = Problem(loom, device)
    opt = loom.optim.SGD(prob.params, lr=0.1)
    prob.loss().backward()
    grads = [p.grad for p in prob.params]
    ptrs = [g.data_ptr() for g in grads]
    opt.zero_grad(set_to_none=set_to_none)
    for p, g, ptr in zip(prob.params, grads, ptrs):
        if set_to_none:
            assert p.grad is None
        else:
            assert not np.any(np_(p.grad))
            assert p.grad.data_ptr() == ptr
    # a step without gradients changes nothing (set_to_none) / steps with zero gradient (SGD: no change)
    before = prob.values()
    opt.step()
    for a, b in zip(prob.values(), before):
        np.testing.assert_array_equal(a, b)


def test_step_skips_parameters_without_grad(device):
    prob = Problem(loom, device)
    opt = loom.optim.Adam(prob.params, lr=0.1)
    (prob.w * 2).sum().backward()
    b_before = np_(prob.b).copy()
    opt.step()
    np.testing.assert_array_equal(np_(prob.b), b_before)
    assert prob.b not in opt.state or not opt.state[prob.b]
    assert opt.state[prob.w]["step"] == 1


def test_closure(device):
    for lib, dev in [(torch, "cpu"), (loom, device)]:
        prob = Problem(lib, dev)
        opt = lib.optim.SGD(prob.params, lr=0.1)

        def closure():
            opt.zero_grad()
            loss = prob.loss()
            loss.backward()
            return loss

        loss = opt.step(closure)
        if lib is torch:
            want_loss, want = loss.item(), prob.values()
        else:
            got_loss, got = loss.item(), prob.values()
    assert got_loss == pytest.approx(want_loss, rel=1e-12)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)


# ---- state_dict ----

def _optimizer_state_equal(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    assert sa["state"].keys() == sb["state"].keys()
    for i in sa["state"]:
        for k, v in sa["state"][i].items():
            w = sb["state"][i][k]
            if isinstance(v, loom.Tensor):
                np.testing.assert_array_equal(np_(v), np_(w))
            else:
                assert v == w


@pytest.mark.parametrize("name", ["sgd_nesterov", "adam_amsgrad", "adamw"])
def test_state_dict_round_trip_continues_identically(device, name):
    """10 steps straight equal 5 steps, state_dict, a new optimizer (on a copy of the parameters)
    loaded from it, and 5 more steps."""
    make = OPTIMIZERS[name]
    straight, _, _ = trajectory(loom, device, make, steps=10)
    p1 = Problem(loom, device)
    o1 = make(loom, p1.params)
    for _ in range(5):
        p1.step(o1)
    state = o1.state_dict()
    p2 = Problem(loom, device)
    with loom.no_grad():
        for a, b in zip(p2.params, p1.params):
            a.copy_(b)
    o2 = make(loom, p2.params)
    o2.load_state_dict(state)
    _optimizer_state_equal(o1, o2)
    assert o2.param_groups[0]["params"][0] is p2.w
    resumed = []
    for _ in range(5):
        p2.step(o2)
        resumed.append(p2.values())
    assert_trajectories_close(resumed, straight[5:], rtol=1e-13)


@pytest.mark.parametrize("name", ["sgd_momentum", "adam_amsgrad"])
def test_loaded_state_is_not_shared_with_the_source(device, name):
    """Both optimizers keep training side by side after the load, as they do in PyTorch."""
    make = OPTIMIZERS[name]
    straight, _, _ = trajectory(loom, device, make, steps=6)
    p1 = Problem(loom, device)
    o1 = make(loom, p1.params)
    for _ in range(3):
        p1.step(o1)
    p2 = Problem(loom, device)
    with loom.no_grad():
        for a, b in zip(p2.params, p1.params):
            a.copy_(b)
    o2 = make(loom, p2.params)
    o2.load_state_dict(o1.state_dict())
    for _ in range(3):
        p1.step(o1)
        p2.step(o2)
    assert_trajectories_close([p1.values(), p2.values()], [straight[-1], straight[-1]], rtol=1e-13)


def test_state_dict_layout_matches_pytorch(device):
    results = {}
    for lib, dev in [(torch, "cpu"), (loom, device)]:
        prob = Problem(lib, dev)
        opt = lib.optim.Adam([{"params": [prob.w]}, {"params": [prob.b], "lr": 0.5}], lr=0.01, amsgrad=True)
        prob.step(opt)
        results[lib.__name__] = opt.state_dict()
    t, lm = results["torch"], results["loom"]
    assert list(lm) == ["state", "param_groups"] == list(t)
    assert [g["params"] for g in lm["param_groups"]] == [g["params"] for g in t["param_groups"]] == [[0], [1]]
    for lg, tg in zip(lm["param_groups"], t["param_groups"]):
        for k in ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"):
            assert lg[k] == tg[k], k
    assert sorted(lm["state"]) == sorted(t["state"]) == [0, 1]
    for i in (0, 1):
        assert set(lm["state"][i]) == set(t["state"][i]) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
        assert float(lm["state"][i]["step"]) == float(t["state"][i]["step"]) == 1.0
        for k in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            np.testing.assert_allclose(np_(lm["state"][i][k]), np_(t["state"][i][k]), rtol=1e-10, atol=1e-15)


def test_load_pytorch_optimizer_state_into_loom(device):
    """A PyTorch state_dict, tensors converted, loads into loom and continues PyTorch's run."""
    tp = Problem(torch, "cpu")
    to = torch.optim.SGD(tp.params, lr=0.05, momentum=0.9, nesterov=True)
    for _ in range(3):
        tp.step(to)
    sd = to.state_dict()
    converted = {"state": {i: {k: loom.tensor(v.numpy(), device=device) for k, v in s.items()}
                           for i, s in sd["state"].items()},
                 "param_groups": copy.deepcopy(sd["param_groups"])}
    lp = Problem(loom, device)
    with loom.no_grad():
        for a, b in zip(lp.params, tp.params):
            a.copy_(loom.tensor(b.detach().numpy(), device=device))
    lo = loom.optim.SGD(lp.params, lr=0.05, momentum=0.9, nesterov=True)
    lo.load_state_dict(converted)
    for _ in range(3):
        tp.step(to)
        lp.step(lo)
    for a, b in zip(lp.values(), tp.values()):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_load_state_dict_restores_hyperparameters_and_checks_groups():
    p = Problem(loom)
    o1 = loom.optim.SGD(p.params, lr=0.5, momentum=0.1)
    o2 = loom.optim.SGD(p.params, lr=0.01)
    o2.load_state_dict(o1.state_dict())
    assert o2.param_groups[0]["lr"] == 0.5 and o2.param_groups[0]["momentum"] == 0.1
    assert o2.param_groups[0]["params"][0] is p.w
    with pytest.raises(ValueError):
        loom.optim.SGD([{"params": [p.w]}, {"params": [p.b]}], lr=0.1).load_state_dict(o1.state_dict())
    with pytest.raises(ValueError):
        loom.optim.SGD([p.w], lr=0.1).load_state_dict(o1.state_dict())


@pytest.mark.parametrize("name", ["sgd_momentum", "adam_amsgrad"])
def test_loaded_state_has_its_own_memory(name):
    p1 = Problem(loom, "cpu")
    o1 = OPTIMIZERS[name](loom, p1.params)
    for _ in range(2):
        p1.step(o1)
    sd = o1.state_dict()
    p2 = Problem(loom, "cpu")
    o2 = OPTIMIZERS[name](loom, p2.params)
    o2.load_state_dict(sd)
    src = {(i, k): v.data_ptr() for i, st in enumerate(o1.state.values()) for k, v in st.items()
           if isinstance(v, loom.Tensor)}
    dst = {(i, k): v.data_ptr() for i, st in enumerate(o2.state.values()) for k, v in st.items()
           if isinstance(v, loom.Tensor)}
    assert src.keys() == dst.keys() and src
    assert not set(src.values()) & set(dst.values())
    sd["param_groups"][0]["lr"] = 123.0  # the loaded groups are copies too
    assert o2.param_groups[0]["lr"] != 123.0
    assert o2.param_groups[0]["params"][0] is p2.w


def test_load_state_dict_casts_state_to_the_parameters_dtype_like_torch():
    """float64 state loads into float32 parameters as float32 (PyTorch casts every tensor but
    'step' to a floating parameter's dtype)."""
    results = {}
    for lib in (torch, loom):
        p64 = Problem(lib, "cpu")
        o64 = lib.optim.Adam(p64.params, lr=0.1, amsgrad=True)
        p64.step(o64)
        p32 = Problem(lib, "cpu", dtype="float32")
        o32 = lib.optim.Adam(p32.params, lr=0.1, amsgrad=True)
        o32.load_state_dict(o64.state_dict())
        st = next(iter(o32.state.values()))
        results[lib] = {k: str(v.dtype).split(".")[1] for k, v in st.items() if k != "step"}
        p32.step(o32)
    assert results[loom] == results[torch] == {"exp_avg": "float32", "exp_avg_sq": "float32",
                                               "max_exp_avg_sq": "float32"}


def test_load_state_dict_moves_state_to_the_parameters_device_and_dtype():
    p = Problem(loom, "cpu")
    o1 = loom.optim.Adam(p.params, lr=0.1)
    p.step(o1)
    q = Problem(loom, "lazy")
    o2 = loom.optim.Adam(q.params, lr=0.1)
    o2.load_state_dict(o1.state_dict())
    for s in o2.state.values():
        assert s["exp_avg"].is_lazy and s["exp_avg"].dtype is loom.float64


# ---- param groups and argument checks ----

def test_param_groups_match_pytorch(device):
    results = []
    for lib, dev in [(torch, "cpu"), (loom, device)]:
        prob = Problem(lib, dev)
        opt = lib.optim.AdamW([{"params": prob.w, "weight_decay": 0.5}, {"params": [prob.b], "lr": 0.2}], lr=0.02)
        assert len(opt.param_groups) == 2
        assert opt.param_groups[0]["lr"] == 0.02 and opt.param_groups[1]["weight_decay"] == 1e-2
        for _ in range(5):
            prob.step(opt)
        results.append(prob.values())
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_add_param_group(device):
    prob = Problem(loom, device)
    opt = loom.optim.SGD([prob.w], lr=0.1, momentum=0.5)
    opt.add_param_group({"params": prob.b, "lr": 0.3})
    assert opt.param_groups[1]["lr"] == 0.3 and opt.param_groups[1]["momentum"] == 0.5
    assert opt.param_groups[1]["params"] == [prob.b] or opt.param_groups[1]["params"][0] is prob.b
    before = np_(prob.b).copy()
    prob.step(opt)
    assert not np.array_equal(np_(prob.b), before)


def test_optimizer_argument_errors():
    p = loom.zeros(2).requires_grad_()
    with pytest.raises(ValueError, match="empty parameter list"):
        loom.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        loom.optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="Invalid momentum"):
        loom.optim.SGD([p], lr=0.1, momentum=-0.5)
    with pytest.raises(ValueError, match="Invalid weight_decay"):
        loom.optim.SGD([p], lr=0.1, weight_decay=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero dampening"):
        loom.optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Nesterov"):
        loom.optim.SGD([p], lr=0.1, momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 0: 1.0"):  # PyTorch's message
        loom.optim.Adam([p], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="Invalid epsilon"):
        loom.optim.AdamW([p], eps=-1e-8)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        loom.optim.Adam([p], lr=-0.1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        loom.optim.SGD([p * 2], lr=0.1)
    # the same errors in PyTorch
    tp = torch.zeros(2, requires_grad=True)
    for bad in [lambda: torch.optim.SGD([], lr=0.1), lambda: torch.optim.SGD([tp], lr=0.1, nesterov=True),
                lambda: torch.optim.Adam([tp], betas=(1.0, 0.9)), lambda: torch.optim.SGD([tp * 2], lr=0.1)]:
        with pytest.raises(ValueError):
            bad()


def test_defaults_match_pytorch():
    p, tp = loom.zeros(2).requires_grad_(), torch.zeros(2, requires_grad=True)
    for name, keys in [("SGD", ["momentum", "dampening", "weight_decay", "nesterov", "maximize"]),
                       ("Adam", ["lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"]),
                       ("AdamW", ["lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"])]:
        kw = {"lr": 0.1} if name == "SGD" else {}
        lo, to = getattr(loom.optim, name)([p], **kw), getattr(torch.optim, name)([tp], **kw)
        for k in keys:
            assert lo.defaults[k] == to.defaults[k], (name, k)


# ---- learning-rate schedules ----

def _lr_sequence(lib, make_sched, steps=30, base_lr=0.1, groups=1):
    p = lib.zeros(2).requires_grad_() if lib is loom else torch.zeros(2, requires_grad=True)
    q = lib.zeros(2).requires_grad_() if lib is loom else torch.zeros(2, requires_grad=True)
    params = [{"params": [p]}, {"params": [q], "lr": base_lr * 3}] if groups == 2 else [p]
    opt = lib.optim.SGD(params, lr=base_lr, momentum=0.9)
    sched = make_sched(lib, opt)
    seq = [[g["lr"] for g in opt.param_groups]]
    for _ in range(steps):
        opt.step()
        sched.step()
        seq.append([g["lr"] for g in opt.param_groups])
        assert sched.get_last_lr() == seq[-1]
    return seq


SCHEDULES = {
    "step": lambda m, o: m.optim.lr_scheduler.StepLR(o, step_size=7),
    "step_gamma": lambda m, o: m.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
    "step_1": lambda m, o: m.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.9),
    "cosine": lambda m, o: m.optim.lr_scheduler.CosineAnnealingLR(o, T_max=30),
    "cosine_short": lambda m, o: m.optim.lr_scheduler.CosineAnnealingLR(o, T_max=8),
    "cosine_eta_min": lambda m, o: m.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=0.01),
}


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_lr_schedule_matches_pytorch(name, groups):
    want = _lr_sequence(torch, SCHEDULES[name], groups=groups)
    got = _lr_sequence(loom, SCHEDULES[name], groups=groups)
    assert len(got) == 31
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-12, atol=1e-15)


def test_scheduler_sets_initial_lr_and_state_dict_round_trip():
    p = loom.zeros(2).requires_grad_()
    opt = loom.optim.SGD([p], lr=0.1)
    sched = loom.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    assert opt.param_groups[0]["initial_lr"] == 0.1 and sched.base_lrs == [0.1]
    for _ in range(3):
        opt.step()
        sched.step()
    state = sched.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 3
    opt2 = loom.optim.SGD([p], lr=0.1)
    sched2 = loom.optim.lr_scheduler.StepLR(opt2, step_size=2, gamma=0.5)
    sched2.load_state_dict(state)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    for _ in range(4):
        sched.step()
        sched2.step()
        assert opt.param_groups[0]["lr"] == opt2.param_groups[0]["lr"]


def test_schedule_drives_training_like_pytorch(device):
    results = []
    for lib, dev in [(torch, "cpu"), (loom, device)]:
        prob = Problem(lib, dev)
        opt = lib.optim.Adam(prob.params, lr=0.1)
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6, eta_min=0.001)
        for _ in range(10):
            prob.step(opt)
            sched.step()
        results.append(prob.values())
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-9)


def test_optimizer_with_nn_module(device):
    results = []
    for lib, dev in [(torch, "cpu"), (loom, device)]:
        torch.manual_seed(0)
        tm = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2)).double()
        if lib is torch:
            model = tm
        else:
            model = loom.nn.Sequential(loom.nn.Linear(3, 5), loom.nn.Tanh(), loom.nn.Linear(5, 2)).double()
            model.load_state_dict({k: loom.tensor(v.numpy()) for k, v in tm.state_dict().items()})
            model.to(dev)
        opt = lib.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1)
        x = lib.tensor(X, device=dev) if lib is loom else torch.tensor(X)
        y = lib.tensor(Y[:, :2], device=dev) if lib is loom else torch.tensor(Y[:, :2])
        for _ in range(10):
            opt.zero_grad()
            loss = lib.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        results.append([np_(p).copy() for p in model.parameters()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
