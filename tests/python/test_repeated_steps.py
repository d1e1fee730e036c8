"""A step that repeats replays its cached plan; a step that only looks like the last one must not.

A lazy training loop records the same trace at every step, and the sync finds the plan it lowered
the first time (DESIGN.md, decision 1). Whatever makes the host's work on a repeated step cheaper
(kept hash tables, shared number leaves, recognising the repeat) must still tell apart a step
that differs from the last one in what a plan depends on: shapes, dtypes, the value of a Python
number, which tensors require grad, and which arguments are the same memory. Each case here runs
a few identical steps (so a plan is cached and replayed), then the changed step, then the
original again, in lazy mode and eagerly, and compares every value with the eager run's.
"""

import numpy as np
import pytest

import loom

_G = np.random.default_rng(33)
W = _G.standard_normal((6, 4))
X = _G.standard_normal((5, 4))


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def sgd_step(w, x, lr, scale=2.0):
    """One training step of a tiny model: forward, backward and a hand-written update."""
    loss = (loom.tanh(x @ w.T) * scale).sum()
    loss.backward()
    with loom.no_grad():
        w.sub_(w.grad * lr)
    w.grad = None
    return loss.item()


def run_steps(device, schedule):
    """Losses and weights after each step of `schedule`, a list of (x_array, dtype, lr, scale)."""
    out = []
    w = None
    for x_array, dtype, lr, scale in schedule:
        if w is None or w.dtype != dtype:
            start = W if w is None else w.detach().double().numpy()
            w = loom.tensor(start, dtype=dtype, device=device).requires_grad_()
        x = loom.tensor(x_array, dtype=dtype, device=device)
        loss = sgd_step(w, x, lr, scale)
        out.append((loss, w.detach().double().numpy().copy()))
    return out


def compare(schedule):
    before = loom.metrics()
    lazy = run_steps("lazy", schedule)
    after = loom.metrics()
    eager = run_steps("cpu", schedule)
    for step, ((ll, lw), (el, ew)) in enumerate(zip(lazy, eager)):
        close(ll, el)
        close(lw, ew)
    return {k: after[k] - before[k] for k in ("graph_cache_hits", "graph_cache_misses")}


def repeated(change, base=(X, loom.float32, 0.1, 2.0), times=3):
    return [base] * times + [change] + [base] * times


def test_identical_steps_replay_one_plan():
    counts = compare([(X, loom.float32, 0.1, 2.0)] * 6)
    assert counts["graph_cache_hits"] >= 4, counts


def test_a_step_of_another_shape_is_not_a_replay():
    counts = compare(repeated((_G.standard_normal((9, 4)), loom.float32, 0.1, 2.0)))
    assert counts["graph_cache_misses"] >= 1


def test_a_step_of_another_dtype_is_not_a_replay():
    compare(repeated((X, loom.float64, 0.1, 2.0)))


@pytest.mark.parametrize("change", [(X, loom.float32, 0.7, 2.0), (X, loom.float32, 0.1, -3.5),
                                    (X, loom.float32, 0.0, 2.0), (X, loom.float32, 0.1, 1.0)])
def test_a_step_with_other_numbers_computes_with_them(change):
    """Numbers are trace parameters (0 and 1 may fold into the trace): a replay reads this step's."""
    compare(repeated(change))


def test_numbers_that_change_every_step():
    compare([(X, loom.float32, 0.1 / (i + 1), 1.0 + 0.25 * i) for i in range(8)])


def grad_step(device, requires):
    """A step in which `requires` says which of two inputs require grad; returns the gradients."""
    a = loom.tensor(W, dtype=loom.float32, device=device).requires_grad_(requires[0])
    b = loom.tensor(W * 0.5, dtype=loom.float32, device=device).requires_grad_(requires[1])
    loss = (a * b + a.exp()).sum()
    if any(requires):
        loss.backward()
    return [None if t.grad is None else t.grad.numpy().copy() for t in (a, b)], loss.item()


def test_a_step_whose_inputs_require_grad_differently_is_not_a_replay():
    pattern = [(True, True)] * 3 + [(True, False), (False, True), (False, False)] + [(True, True)] * 2
    for requires in pattern:
        (lazy_grads, lazy_loss), (eager_grads, eager_loss) = grad_step("lazy", requires), grad_step("cpu", requires)
        close(lazy_loss, eager_loss)
        for lg, eg, r in zip(lazy_grads, eager_grads, requires):
            assert (lg is None) == (eg is None) == (not r)
            if lg is not None:
                close(lg, eg)


def alias_step(device, aliased, view):
    """dst.add_(src) * 2 where src is dst itself, a view of it, or a copy: the in-place write's
    result depends on whether the two arguments are one memory."""
    dst = loom.tensor(W, dtype=loom.float32, device=device)
    if aliased:
        src = dst[:, :] if view else dst
    else:
        src = loom.tensor(W, dtype=loom.float32, device=device)
    dst.add_(src)
    out = dst * 2 + src
    return out.numpy().copy(), dst.numpy().copy()


@pytest.mark.parametrize("view", [False, True])
def test_a_step_whose_arguments_alias_differently_is_not_a_replay(view):
    for aliased in [False] * 3 + [True] + [False] * 2 + [True] * 2:
        for got, want in zip(alias_step("lazy", aliased, view), alias_step("cpu", aliased, view)):
            close(got, want)


def test_a_step_that_reads_its_input_twice_or_two_inputs():
    """x + y with y the same materialized tensor as x, then with y a distinct one of equal value:
    the leaves' storage pattern is part of the key."""
    x = loom.tensor(W, dtype=loom.float32, device="lazy")
    other = loom.tensor(W, dtype=loom.float32, device="lazy")
    for y in [other, other, x, x, other]:
        x2 = x.clone()
        x2.mul_(y)
        close(x2.numpy(), W * W)
        z = (x + y).sum()
        close(z.item(), 2 * W.sum())
