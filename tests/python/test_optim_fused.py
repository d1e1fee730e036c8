"""The optimizers' fused updates (lazy/optimizer_steps.cpp, Note [Fused updates]): each in-place
update of a rule is one recorded op (AddScaled, EmaUpdate, EmaSquareUpdate, StepAlong,
AdamUpdate) where the tensors are float32 or float64. They must give the same bits as the rules
op by op (loom._C._fused_optimizer_updates(False) turns them off), eager and lazy, over 25 steps
with weight decay, amsgrad, maximize, several parameter groups and a learning-rate schedule;
move version counters as the op-by-op rules do; record a few nodes a parameter; and keep one
plan while a scheduler changes the learning rate.
"""

import contextlib

import numpy as np
import pytest

import loom

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

STEPS = 25
_G = np.random.default_rng(7)
W1, B1, W2 = _G.standard_normal((5, 3)), _G.standard_normal(5), _G.standard_normal((2, 5))
X, Y = _G.standard_normal((16, 3)), _G.standard_normal((16, 2))


@contextlib.contextmanager
def fused_updates(enabled):
    previous = loom._C._fused_optimizer_updates(enabled)
    try:
        yield
    finally:
        loom._C._fused_optimizer_updates(previous)


def groups(params, **second):
    """Two parameter groups: the first layer with the defaults, the second with `second`."""
    return [{"params": params[:2]}, {"params": params[2:], **second}]


OPTIMIZERS = {
    "adamw": lambda p: loom.optim.AdamW(groups(p, lr=0.02, weight_decay=0.0), lr=0.05, weight_decay=0.1),
    "adamw_amsgrad_maximize": lambda p: loom.optim.AdamW(groups(p, maximize=False), lr=0.03, amsgrad=True,
                                                         maximize=True, weight_decay=0.2),
    "adam_l2_amsgrad": lambda p: loom.optim.Adam(groups(p, amsgrad=False, betas=(0.8, 0.95)), lr=0.05,
                                                 weight_decay=0.1, amsgrad=True, eps=1e-6),
    "adam_maximize": lambda p: loom.optim.Adam(groups(p, weight_decay=0.3), lr=0.01, maximize=True),
    "sgd_momentum": lambda p: loom.optim.SGD(groups(p, momentum=0.0), lr=0.05, momentum=0.9, dampening=0.2,
                                             weight_decay=0.05),
    "sgd_nesterov": lambda p: loom.optim.SGD(groups(p, maximize=True), lr=0.03, momentum=0.7, nesterov=True,
                                             weight_decay=0.05),
    "rmsprop": lambda p: loom.optim.RMSprop(groups(p, centered=True, momentum=0.5), lr=0.01, weight_decay=0.1),
    "adadelta": lambda p: loom.optim.Adadelta(groups(p, weight_decay=0.1), lr=0.5),
    "adagrad": lambda p: loom.optim.Adagrad(groups(p, lr_decay=0.01), lr=0.1, weight_decay=0.05),
    "adamax": lambda p: loom.optim.Adamax(groups(p, maximize=True), lr=0.02, weight_decay=0.1),
    "nadam": lambda p: loom.optim.NAdam(groups(p, weight_decay=0.1), lr=0.02),
    "radam": lambda p: loom.optim.RAdam(groups(p, weight_decay=0.1), lr=0.02),
    "asgd": lambda p: loom.optim.ASGD(groups(p, weight_decay=0.1), lr=0.02, t0=5),
}


def run(name, device, dtype, fused, steps=STEPS):
    """Parameters, state and version counters after each step of a two-layer regression with a
    schedule that changes every group's learning rate at every step."""
    dt = getattr(loom, dtype)
    params = [loom.tensor(a, dtype=dt, device=device).requires_grad_() for a in (W1, B1, W2)]
    x, y = loom.tensor(X, dtype=dt, device=device), loom.tensor(Y, dtype=dt, device=device)
    seen = []
    with fused_updates(fused):
        opt = OPTIMIZERS[name](params)
        sched = loom.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0 / (1 + 0.1 * i))
        for _ in range(steps):
            opt.zero_grad()
            loss = ((loom.tanh(x @ params[0].T + params[1]) @ params[2].T - y) ** 2).mean()
            loss.backward()
            opt.step()
            sched.step()
            state = [(k, v) for p in params for k, v in sorted(opt.state[p].items())]
            seen.append({
                "params": [p.detach().numpy().copy() for p in params],
                "state": [(k, v.numpy().copy() if isinstance(v, loom.Tensor) else v) for k, v in state],
                "versions": [p._version for p in params] + [v._version for _, v in state if isinstance(v, loom.Tensor)],
            })
    return seen


def assert_same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), np.max(np.abs(a - b))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_fused_updates_equal_the_rules_op_by_op(name, device, dtype):
    fused = run(name, device, dtype, True)
    op_by_op = run(name, device, dtype, False)
    for step, (f, o) in enumerate(zip(fused, op_by_op)):
        for a, b in zip(f["params"], o["params"]):
            assert_same_bits(a, b)
        for (kf, vf), (ko, vo) in zip(f["state"], o["state"]):
            assert kf == ko
            if isinstance(vf, np.ndarray):
                assert_same_bits(vf, vo)
            else:
                assert vf == vo, (step, kf)
        assert f["versions"] == o["versions"], step


def test_fused_lazy_equals_fused_eager():
    """The fused ops' generated kernels compute what their CPU kernels compute."""
    for name in ["adamw_amsgrad_maximize", "sgd_nesterov", "adam_l2_amsgrad"]:
        for f, e in zip(run(name, "lazy", "float32", True, steps=10), run(name, "cpu", "float32", True, steps=10)):
            for a, b in zip(f["params"], e["params"]):
                assert_same_bits(a, b)


def recorded_per_step(make, fused):
    """Nodes recorded by one lazy optimizer step (after the first, which makes the state), and the
    plan-cache misses and kernels compiled over four more steps whose learning rate changes."""
    params = [loom.tensor(a, dtype=loom.float32, device="lazy").requires_grad_() for a in (W1, B1, W2)]
    with fused_updates(fused):
        opt = make(params)
        sched = loom.optim.lr_scheduler.LambdaLR(opt, lambda i: 0.5 ** i)
        counts = []
        for i in range(6):
            for p in params:
                p.grad = loom.ones_like(p) * (i + 1)
            loom.sync()
            before = loom.metrics()
            opt.step()  # ends the step: a sync
            after = loom.metrics()
            sched.step()
            counts.append({k: after[k] - before[k] for k in ("nodes_recorded", "graph_cache_misses",
                                                             "kernels_compiled")})
    return counts


def test_adamw_step_records_three_ops_a_parameter():
    """AdamW records param, exp_avg and exp_avg_sq's updates as three ops
    (op by op: fourteen), and a changing learning rate compiles nothing."""
    make = lambda p: loom.optim.AdamW(p, lr=0.05, weight_decay=0.1)
    fused = recorded_per_step(make, True)
    op_by_op = recorded_per_step(make, False)
    assert fused[2]["nodes_recorded"] == 3 * 3  # (numbers are leaves, not counted)
    assert op_by_op[2]["nodes_recorded"] > 2 * fused[2]["nodes_recorded"]
    for c in fused[2:]:
        assert c["graph_cache_misses"] == 0 and c["kernels_compiled"] == 0, fused


def test_sgd_momentum_step_records_two_ops_a_parameter():
    make = lambda p: loom.optim.SGD(p, lr=0.05, momentum=0.9)
    fused = recorded_per_step(make, True)
    assert fused[2]["nodes_recorded"] == 3 * 2
    assert recorded_per_step(make, False)[2]["nodes_recorded"] > fused[2]["nodes_recorded"]
    for c in fused[2:]:
        assert c["graph_cache_misses"] == 0 and c["kernels_compiled"] == 0, fused


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_parameters_take_the_rules_op_by_op(dtype):
    """PyTorch rounds each op of a float16 / bfloat16 update to the dtype: those stay op by op."""
    make = lambda p: loom.optim.AdamW(p, lr=0.05, weight_decay=0.1)
    params = [loom.tensor(a, dtype=getattr(loom, dtype), device="lazy").requires_grad_() for a in (W1, B1)]
    results = []
    for fused in (True, False):
        ps = [p.detach().clone().requires_grad_() for p in params]
        with fused_updates(fused):
            opt = make(ps)
            for i in range(3):
                for p in ps:
                    p.grad = loom.ones_like(p) * (0.5 + i)
                opt.step()
        results.append([p.detach().float().numpy() for p in ps])
    for a, b in zip(*results):
        assert_same_bits(a, b)


def test_fused_update_in_a_compiled_step_follows_the_schedule():
    """loom.compile replays the fused update with each call's learning rate (its numbers are
    recomputed at replay, Note [Optimizer numbers]), equal to the uncompiled loop's."""
    def train(compiled):
        params = [loom.tensor(a, dtype=loom.float32, device="lazy").requires_grad_() for a in (W1, B1, W2)]
        x, y = loom.tensor(X, dtype=loom.float32, device="lazy"), loom.tensor(Y, dtype=loom.float32, device="lazy")
        opt = loom.optim.AdamW(params, lr=0.05, weight_decay=0.1, amsgrad=True)
        sched = loom.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0 / (1 + i))

        def step():
            opt.zero_grad()
            loss = ((loom.tanh(x @ params[0].T + params[1]) @ params[2].T - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        fn = loom.compile(step) if compiled else step
        for _ in range(8):
            fn()
            sched.step()
        return [p.detach().numpy() for p in params]

    before = loom.metrics()["compiled_replays"]
    got = train(True)
    assert loom.metrics()["compiled_replays"] - before >= 4
    for a, b in zip(got, train(False)):
        assert_same_bits(a, b)


def test_shared_numbers_follow_each_parameters_step():
    """Parameters of one group whose step counts differ (one had no gradient at first) take
    bias corrections of their own: lazy equals eager bit for bit."""
    def train(device):
        params = [loom.tensor(a, dtype=loom.float32, device=device).requires_grad_() for a in (W1, B1, W2)]
        opt = loom.optim.AdamW(params, lr=0.05, weight_decay=0.1, amsgrad=True)
        sched = loom.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0 / (1 + i))
        seen = []
        for i in range(6):
            for j, p in enumerate(params):
                p.grad = None if (j == 1 and i < 2) else loom.ones_like(p) * (0.5 + i) + p * 0.1
            opt.step()
            sched.step()
            seen.append([p.detach().numpy().copy() for p in params])
        return seen, [float(opt.state[p]["step"]) for p in params]

    lazy, lazy_steps = train("lazy")
    eager, eager_steps = train("cpu")
    assert lazy_steps == eager_steps == [6.0, 4.0, 6.0]
    for a, b in zip(lazy, eager):
        for x, y in zip(a, b):
            assert_same_bits(x, y)
