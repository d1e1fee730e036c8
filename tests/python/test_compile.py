"""loom.compile: a compiled step computes what the uncompiled step computes, replays without
recording, and runs uncompiled (saying why) where it cannot replay.

Every test runs the same program compiled and uncompiled from the same state and compares: losses,
parameters, gradients, optimizer state and version counters; on the CPU's compiled plans and
through the host emulator of the CUDA executor (lazy:cuda's lowering, one graph launch a replay).
"""

import inspect
import re
import warnings

import numpy as np
import pytest

import loom
import loom.nn as nn
import loom.nn.functional as F

EXECUTORS = ["compiled", "cuda-emulated"]


@pytest.fixture(params=EXECUTORS)
def executor(request):
    loom._C._set_executor(request.param)
    yield request.param
    loom._C._set_executor("compiled")


def metrics_delta(before):
    now = loom.metrics()
    return {k: now[k] - before[k] for k in before}


def mlp(dtype, dropout=0.1, seed=0):
    loom.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Dropout(dropout), nn.Linear(16, 16), nn.Tanh(),
                          nn.Linear(16, 3))
    return model.to(dtype).to("lazy")


def batch(n=6, seed=1, dtype=loom.float32):
    rng = np.random.default_rng(seed)
    x = loom.tensor(rng.standard_normal((n, 8)), dtype=dtype, device="lazy")
    y = loom.tensor(rng.integers(0, 3, n), device="lazy")
    return x, y


def training(dtype, compiled, steps=50, optimizer="adamw", scheduler=True):
    """Trains an mlp with dropout for `steps` steps; returns the losses and the final state."""
    model = mlp(dtype)
    opt = loom.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05) if optimizer == "adamw" else \
        loom.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = loom.optim.lr_scheduler.StepLR(opt, step_size=7, gamma=0.5) if scheduler else None
    x, y = batch(dtype=dtype)

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    run = loom.compile(step) if compiled else step
    loom.manual_seed(123)  # dropout's masks: the same stream in both runs
    losses = []
    for _ in range(steps):
        losses.append(run(x, y).item())
        if sched:
            sched.step()
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    grads = {k: p.grad.numpy().copy() for k, p in model.named_parameters()}
    versions = {k: p._version for k, p in model.named_parameters()}
    steps_done = [s["step"] for s in opt.state.values()]
    return np.array(losses), state, grads, versions, steps_done, run


@pytest.mark.parametrize("dtype", [loom.float64, loom.float32])
def test_compiled_training_equals_uncompiled(executor, dtype):
    want = training(dtype, compiled=False)
    before = loom.metrics()
    got = training(dtype, compiled=True)
    delta = metrics_delta(before)
    np.testing.assert_array_equal(got[0], want[0])
    for k in want[1]:
        np.testing.assert_array_equal(got[1][k], want[1][k], err_msg=k)
        np.testing.assert_array_equal(got[2].get(k, 0), want[2].get(k, 0), err_msg=k)
    assert got[3] == want[3]  # version counters moved as the uncompiled steps moved them
    assert got[4] == want[4] == [50] * len(want[4])  # optimizer step counts, written back by every replay
    assert want[0][-1] < want[0][0]
    # The first call makes the optimizer's state (not a step a replay can repeat), the next two
    # record the same trace; a replay for every later call.
    assert delta["compiled_calls"] == 50
    assert delta["compiled_replays"] == 47
    assert delta["compiled_recaptures"] == 0 and delta["compiled_fallbacks"] == 0


def test_replay_records_nothing_and_runs_one_plan(executor):
    model = mlp(loom.float32, dropout=0.0)
    opt = loom.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = batch()

    @loom.compile
    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):
        step(x, y).item()
    before = loom.metrics()
    for _ in range(5):
        step(x, y).item()
    delta = metrics_delta(before)
    assert delta["compiled_replays"] == 5
    assert delta["nodes_recorded"] == 0 and delta["traces"] == 0 and delta["graph_cache_misses"] == 0
    if executor == "cuda-emulated":
        assert delta["graph_replays"] == 5  # one (emulated) CUDA Graph launch per call
    assert loom._C._pending_count(loom.device("cpu")) == 0


def test_recapture_on_a_new_batch_size(executor):
    model = mlp(loom.float64)
    opt = loom.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    twin = mlp(loom.float64)
    twin_opt = loom.optim.SGD(twin.parameters(), lr=0.1)

    def twin_step(x, y):
        loss = F.cross_entropy(twin(x), y)
        twin_opt.zero_grad()
        loss.backward()
        twin_opt.step()
        return loss

    compiled = loom.compile(step)
    big, small = batch(6, dtype=loom.float64), batch(4, seed=2, dtype=loom.float64)
    warmup, alternating = [big] * 4 + [small] * 4, [big, small] * 3
    loom.manual_seed(5)
    before = loom.metrics()
    got = [compiled(*b).item() for b in warmup]
    assert metrics_delta(before)["compiled_recaptures"] == 1
    before = loom.metrics()
    got += [compiled(*b).item() for b in alternating]
    delta = metrics_delta(before)
    loom.manual_seed(5)
    want = [twin_step(*b).item() for b in warmup + alternating]
    np.testing.assert_array_equal(got, want)
    # One captured step per batch size, each replayed when its size comes back.
    assert delta["compiled_replays"] == len(alternating) and delta["compiled_recaptures"] == 0
    assert len(compiled._entries()) == 2
    history = "\n".join(compiled._history())
    assert re.search(r"no captured step matches \(argument [01] is \w+ \[4(, 8)?\], was \w+ \[6(, 8)?\]\)", history)


def test_item_inside_the_step_runs_uncompiled_and_names_the_line(executor):
    model = mlp(loom.float32, dropout=0.0)
    x, _ = batch()
    seen = []

    def step(x):
        out = model(x).sum()
        seen.append(out.item())  # the sync point
        return out

    line = inspect.getsourcelines(step)[1] + 2
    compiled = loom.compile(step)
    with pytest.warns(RuntimeWarning, match="runs uncompiled from now on"):
        results = [compiled(x).item() for _ in range(10)]
    assert results == seen == [seen[0]] * 10
    assert compiled._entries() == []
    text = str(loom.compile.explain(compiled))
    assert f"test_compile.py:{line} in step: seen.append(out.item())" in text
    assert "reads a tensor's value" in text
    # fullgraph=True: the sync point is an error, at its line, before anything is computed.
    strict = loom.compile(step, fullgraph=True)
    with pytest.raises(RuntimeError, match=f"fullgraph=True.*test_compile.py:{line}"):
        strict(x)


def test_a_held_output_is_not_overwritten_by_the_next_replay(executor):
    w = loom.tensor(np.linspace(-1, 1, 24).reshape(8, 3), dtype=loom.float32, device="lazy")

    @loom.compile
    def f(x):
        return (x @ w).tanh() * 2.0

    xs = [batch(seed=s)[0] for s in range(6)]
    outs = [f(x) for x in xs]
    kept = [o.numpy().copy() for o in outs]
    for x in xs:  # more replays, after the outputs above were read
        f(x)
    for o, k, x in zip(outs, kept, xs):
        np.testing.assert_array_equal(o.numpy(), k)
        np.testing.assert_allclose(k, np.tanh(x.numpy() @ w.numpy()) * 2.0, rtol=1e-6)
    assert len({o.data_ptr() for o in outs}) == len(outs)


class Scale:
    value = 1.0


def test_python_state_the_trace_does_not_see_is_found_by_comparing_recordings(executor):
    cfg = Scale()
    x, _ = batch()

    def f(x):
        return x * (cfg.value * 2)  # a number computed in Python from an attribute: not followed

    compiled = loom.compile(f)
    for i in range(12):
        cfg.value = 1.0 + i
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            np.testing.assert_array_equal(compiled(x).numpy(), x.numpy() * np.float32(cfg.value * 2))
    assert compiled._entries() == []
    text = str(loom.compile.explain(compiled))
    assert "changed between the two recorded calls" in text
    assert compiled._fallback is not None


def test_a_float_argument_is_a_number_of_the_step(executor):
    x, _ = batch()

    def f(x, scale):
        return (x * scale).sum(dim=1) - scale

    compiled = loom.compile(f)
    before = loom.metrics()
    for scale in [0.5, 0.25, 3.0, -1.5, 7.0]:
        np.testing.assert_array_equal(compiled(x, scale).numpy(), f(x, scale).numpy())
    delta = metrics_delta(before)
    assert delta["compiled_replays"] == 3 and delta["compiled_recaptures"] == 0


def test_dynamic_false_makes_float_arguments_guards():
    x, _ = batch()
    f = loom.compile(lambda x, s: x * s, dynamic=False)
    for s in [0.5, 0.5, 0.5, 2.0, 2.0, 2.0]:
        np.testing.assert_array_equal(f(x, s).numpy(), x.numpy() * np.float32(s))
    assert len(f._entries()) == 2


def test_random_ops_draw_fresh_numbers_each_replay(executor):
    @loom.compile
    def f(x):
        return x + loom.rand(3, 4, device="lazy")

    x = loom.zeros(3, 4, device="lazy")
    loom.manual_seed(7)
    got = [f(x).numpy().copy() for _ in range(6)]
    loom.manual_seed(7)
    want = [(x + loom.rand(3, 4, device="lazy")).numpy() for _ in range(6)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert len({g.tobytes() for g in got}) == 6


def test_a_scheduled_learning_rate_takes_effect_without_a_recapture(executor):
    losses = {}
    for compiled in (False, True):
        model = mlp(loom.float64, dropout=0.0)
        opt = loom.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
        sched = loom.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1.0 / (1 + epoch))
        x, y = batch(dtype=loom.float64)

        def step():
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        run = loom.compile(step) if compiled else step
        before = loom.metrics()
        losses[compiled] = []
        for _ in range(12):
            losses[compiled].append(run().item())
            sched.step()
        if compiled:
            delta = metrics_delta(before)
            assert delta["compiled_recaptures"] == 0 and delta["compiled_replays"] >= 9
    np.testing.assert_array_equal(losses[True], losses[False])


OPTIMIZERS = {
    "SGD": lambda p: loom.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "Adam": lambda p: loom.optim.Adam(p, lr=0.01, amsgrad=True),
    "AdamW": lambda p: loom.optim.AdamW(p, lr=0.01),
    "Adadelta": lambda p: loom.optim.Adadelta(p, lr=0.5, weight_decay=0.01),
    "Adagrad": lambda p: loom.optim.Adagrad(p, lr=0.1, lr_decay=0.01),
    "RMSprop": lambda p: loom.optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True),
    "Adamax": lambda p: loom.optim.Adamax(p, lr=0.01),
    "NAdam": lambda p: loom.optim.NAdam(p, lr=0.01),
    "RAdam": lambda p: loom.optim.RAdam(p, lr=0.01),
    "ASGD": lambda p: loom.optim.ASGD(p, lr=0.05, t0=3),
    "Rprop": lambda p: loom.optim.Rprop(p, lr=0.01),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_every_optimizer_replays_its_numbers_and_bookkeeping(name):
    results = {}
    for compiled in (False, True):
        model = mlp(loom.float64, dropout=0.0)
        opt = OPTIMIZERS[name](model.parameters())
        x, y = batch(dtype=loom.float64)

        def step():
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        run = loom.compile(step) if compiled else step
        before = loom.metrics()
        losses = [run().item() for _ in range(12)]
        replays = metrics_delta(before)["compiled_replays"]
        state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
        results[compiled] = (losses, state, opt.state_dict(), replays, opt._step_count)
    (want, want_state, want_opt, _, want_count), (got, got_state, got_opt, replays, got_count) = \
        results[False], results[True]
    np.testing.assert_array_equal(got, want)
    for k in want_state:
        np.testing.assert_array_equal(got_state[k], want_state[k], err_msg=k)
    for i, s in want_opt["state"].items():
        for key, v in s.items():
            g = got_opt["state"][i][key]
            if isinstance(v, loom.Tensor):
                np.testing.assert_array_equal(g.numpy(), v.numpy(), err_msg=key)
            else:
                assert g == v, key  # step counts, NAdam's mu_product, ASGD's eta and mu
    assert got_count == want_count == 12
    # ASGD's averaging starts after t0 steps (another trace), RAdam rectifies from step 6 on.
    assert replays >= {"ASGD": 4, "RAdam": 4}.get(name, 9)


def test_an_error_inside_a_replay_leaves_tensors_as_a_failed_sync_must(executor):
    loom.manual_seed(0)
    emb = nn.Embedding(10, 4).to("lazy")
    opt = loom.optim.SGD(emb.parameters(), lr=0.1)

    @loom.compile
    def step(idx):
        loss = emb(idx).square().sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    good = loom.tensor([1, 2, 3], device="lazy")
    for _ in range(4):
        step(good).item()
    assert loom.metrics()["compiled_replays"] > 0
    weight = emb.weight.numpy().copy()
    version = emb.weight._version
    bad = loom.tensor([1, 12, 3], device="lazy")  # out of range: found by the kernel, at the run
    # The replay fails; the call then runs uncompiled, whose optimizer step ends with a sync: the
    # error raises there, as it would without loom.compile.
    with pytest.raises(IndexError, match="out of range|out of bounds"):
        step(bad)
    assert "a replay failed" in str(loom.compile.explain(step))
    # As a failed sync leaves them: the parameter keeps its value and stays readable.
    np.testing.assert_array_equal(emb.weight.numpy(), weight)
    assert emb.weight._version >= version
    # The next good call computes as if the failed one never wrote anything.
    before = loom.metrics()
    value = step(good).item()
    np.testing.assert_allclose(value, (weight[[1, 2, 3]] ** 2).sum(), rtol=1e-6)
    assert metrics_delta(before)["compiled_replays"] == 1


def test_grads_made_by_the_step_exist_after_a_replay():
    model = mlp(loom.float32, dropout=0.0)
    x, y = batch()

    @loom.compile
    def step():
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()

    for _ in range(3):
        step()
    grads = [p.grad for p in model.parameters()]
    before = loom.metrics()
    step()
    assert metrics_delta(before)["compiled_replays"] == 1
    for p, old in zip(model.parameters(), grads):
        assert p.grad is not None and p.grad.data_ptr() != old.data_ptr()
        np.testing.assert_array_equal(p.grad.numpy(), old.numpy())


def test_a_step_that_keeps_a_result_in_python_state_is_not_captured():
    kept = []
    x, _ = batch()

    def f(x):
        y = x.exp()
        kept.append(y)  # a result the replay could not hand over
        return x + 1

    compiled = loom.compile(f)
    for _ in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            np.testing.assert_array_equal(compiled(x).numpy(), x.numpy() + 1)
    assert compiled._entries() == []
    assert "in Python state that loom.compile cannot follow" in "\n".join(compiled._history())
    assert len(kept) == 3


def test_a_returned_tensor_that_requires_grad_is_not_captured():
    model = mlp(loom.float32, dropout=0.0)
    x, _ = batch()
    f = loom.compile(lambda x: model(x))
    for _ in range(3):
        out = f(x)
    assert out.requires_grad and f._entries() == []
    assert "requires grad" in "\n".join(f._history())
    with loom.no_grad():  # an inference step compiles
        g = loom.compile(lambda x: model(x))
        outs = [g(x) for _ in range(4)]
    assert len(g._entries()) == 1
    np.testing.assert_array_equal(outs[-1].numpy(), outs[0].numpy())


def test_guards_on_grad_mode_and_training_flags():
    model = mlp(loom.float32, dropout=0.5)
    x, _ = batch()
    with loom.no_grad():
        f = loom.compile(lambda x: model(x))
        for _ in range(3):
            f(x)
        model.eval()
        a, b = f(x), f(x)
        c = f(x)
        np.testing.assert_array_equal(a.numpy(), b.numpy())  # no dropout in eval mode
        np.testing.assert_array_equal(a.numpy(), c.numpy())
    assert len(f._entries()) == 2
    assert "module is in eval mode, was in training mode" in "\n".join(f._history())


def test_cache_size_limit_falls_back_and_says_why_once():
    f = loom.compile(lambda x: x * 2, cache_size_limit=2)
    sizes = [2, 2, 3, 3, 4, 4, 5, 2]
    with pytest.warns(RuntimeWarning, match="cache_size_limit \\(2\\)") as caught:
        for n in sizes:
            x = loom.ones(n, device="lazy")
            np.testing.assert_array_equal(f(x).numpy(), np.full(n, 2, np.float32))
    assert len([w for w in caught if "runs uncompiled" in str(w.message)]) == 1
    assert f._fallback is not None


def test_disable_keeps_a_function_out_of_compiled_steps():
    @loom.compiler.disable
    def log(t):
        return t

    x, _ = batch()
    f = loom.compile(lambda x: log(x * 2))
    for _ in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            np.testing.assert_array_equal(f(x).numpy(), x.numpy() * 2)
    assert f._entries() == []
    assert "loom.compiler.disable" in str(loom.compile.explain(f))
    assert loom.compile(log) is log


def test_loom_compile_0_records_without_replaying(monkeypatch):
    monkeypatch.setenv("LOOM_COMPILE", "0")
    x, _ = batch()
    f = loom.compile(lambda x: x + 1)
    before = loom.metrics()
    for _ in range(4):
        np.testing.assert_array_equal(f(x).numpy(), x.numpy() + 1)
    assert metrics_delta(before)["compiled_replays"] == 0


def test_torch_compile_call_shapes():
    x, _ = batch()

    @loom.compile(mode="reduce-overhead", fullgraph=False, dynamic=None)
    def f(x):
        return x + 1

    assert f.__name__ == "f" and f.__wrapped__ is not None
    model = mlp(loom.float32, dropout=0.0)
    with loom.no_grad():
        compiled = loom.compile(model)
        assert isinstance(compiled, nn.Module) and compiled._orig_mod is model
        outs = [compiled(x) for _ in range(4)]
    np.testing.assert_array_equal(outs[-1].numpy(), outs[0].numpy())
    assert loom.compile(f, disable=True) is f
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        loom.compile(f, mode="fast")
    with pytest.raises(NotImplementedError, match="custom backends"):
        loom.compile(f, backend=lambda gm, inputs: gm)

    class Net:
        def __init__(self):
            self.scale = 3.0

        @loom.compile
        def run(self, x):
            return x * 3

    net = Net()
    for _ in range(4):
        np.testing.assert_array_equal(net.run(x).numpy(), x.numpy() * 3)


def test_explain_reports_what_a_capture_reads_and_writes():
    model = mlp(loom.float32, dropout=0.0)
    opt = loom.optim.Adam(model.parameters())
    x, y = batch()

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    compiled = loom.compile(step)
    for _ in range(3):
        compiled(x, y)
    explanation = loom.compile.explain(compiled)
    assert explanation.capture_count == 1 and explanation.syncs == [] and explanation.fallback is None
    text = str(explanation)
    assert "captured the step" in text and "reads" in text and "writes" in text
    assert "1 optimizer updates recomputed" in text


def test_parameters_at_different_step_counts_get_their_own_numbers():
    """A replay computes one parameter's optimizer numbers for all where every parameter is at the
    same step; here the first layer starts later (no gradient for two steps), so Adam's bias
    corrections differ between the layers and each must get its own."""
    results = {}
    for compiled in (False, True):
        model = mlp(loom.float64, dropout=0.0)
        opt = loom.optim.Adam(model.parameters(), lr=0.01)
        x, y = batch(dtype=loom.float64)
        for _ in range(2):  # the last layer alone: the others have no .grad, so no step counted
            opt.zero_grad()
            model[-1](loom.ones(6, 16, dtype=loom.float64, device="lazy")).square().sum().backward()
            opt.step()

        def step():
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        run = loom.compile(step) if compiled else step
        before = loom.metrics()
        losses = [run().item() for _ in range(8)]
        results[compiled] = (losses, {k: v.numpy().copy() for k, v in model.state_dict().items()},
                             metrics_delta(before)["compiled_replays"])
    assert sorted({s["step"] for s in opt.state.values()}) == [8, 10]
    np.testing.assert_array_equal(results[True][0], results[False][0])
    for k, v in results[False][1].items():
        np.testing.assert_array_equal(results[True][1][k], v, err_msg=k)
    assert results[True][2] >= 5


def test_a_float_argument_python_computes_with_is_a_guard():
    """A float the step's Python computes with (1 - p) or an op reads by value (data of a tensor it
    makes, a setting that decides a shape) is baked into the captured trace: it must be a guard, so
    a new value records again instead of replaying the old one."""
    x, _ = batch()

    def arithmetic(x, p):
        return x * (1 - p)

    def data(x, p):
        return x + loom.tensor([p] * 8, device="lazy")  # read by value, into a tensor made in the step

    def shape(x, step):
        return x.sum() + loom.arange(0.0, 1.0, step, device="lazy").sum()  # its value decides a shape

    for fn in (arithmetic, data, shape):
        compiled = loom.compile(fn)
        for p in [0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.1]:
            np.testing.assert_array_equal(compiled(x, p).numpy(), fn(x, p).numpy(), err_msg=f"{fn.__name__} {p}")
        assert len(compiled._entries()) == 2, fn.__name__
        assert "is used by the step's Python" in "\n".join(compiled._history())


def test_arguments_that_share_memory_differently_do_not_replay(executor):
    """The captured plan relies on which tensors it reads share memory (a write through one is
    seen through the other): the same tensor passed twice records again."""
    def f(a, b):
        a.add_(1.0)
        return b * 2.0

    compiled = loom.compile(f)
    fresh = lambda: loom.tensor(np.arange(4.0), dtype=loom.float32, device="lazy")  # noqa: E731
    for _ in range(3):
        compiled(fresh(), fresh())
    x, twin = fresh(), fresh()
    np.testing.assert_array_equal(compiled(x, x).numpy(), f(twin, twin).numpy())
    np.testing.assert_array_equal(x.numpy(), twin.numpy())
    assert "share memory differently" in "\n".join(compiled._history())


def test_a_tensor_passed_twice_then_two_tensors_do_not_replay(executor):
    """The converse: captured with one tensor in both places, the step read its data through the
    first argument only; a call with two separate tensors must not read the first one twice."""
    def f(a, b):
        return a * 2.0 + b

    compiled = loom.compile(f)
    x = loom.tensor(np.arange(4.0), dtype=loom.float32, device="lazy")
    for _ in range(3):
        np.testing.assert_array_equal(compiled(x, x).numpy(), np.arange(4.0) * 3)
    y = loom.tensor(np.full(4, 10.0), dtype=loom.float32, device="lazy")
    np.testing.assert_array_equal(compiled(x, y).numpy(), np.arange(4.0) * 2 + 10)
    assert "share memory differently" in "\n".join(compiled._history())
    # And a view of an argument passed as another: found through the first, guarded as the second.
    whole = loom.tensor(np.arange(6.0), dtype=loom.float32, device="lazy")
    g = loom.compile(lambda a, b: b * 2.0 + a.sum())
    for _ in range(3):
        g(whole, whole[3:]).numpy()
    other = loom.tensor(np.full(3, 7.0), dtype=loom.float32, device="lazy")
    np.testing.assert_array_equal(g(whole, other).numpy(), np.full(3, 14.0) + 15)
