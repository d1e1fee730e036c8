"""loom.amp.GradScaler: training loops against a float64 reference of PyTorch 1.13's algorithm
(torch.cuda.amp.GradScaler needs a GPU; its CPU-free parts are compared directly), with steps
skipped on infs and NaNs, the scale backed off and grown; in lazy mode no sync of its own; its
state dict, pickling, disabled form and errors."""

import pickle

import numpy as np
import pytest

import loom
import loom.nn.functional as F

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)
X = rng.standard_normal((16, 4))
Y = rng.standard_normal((16, 3))
W0 = rng.standard_normal((3, 4)) * 0.5
BAD_STEPS = {0: np.inf, 4: np.nan, 5: np.inf}  # steps whose input holds an inf or a NaN
STEPS = 12


def reference(rule, lr=0.05, init_scale=2.0 ** 10, growth_interval=3, growth=2.0, backoff=0.5):
    """PyTorch 1.13's GradScaler + SGD(momentum) / Adam on a linear least-squares model, in float64:
    the weights, scale and growth tracker after each step."""
    w = W0.copy()
    scale, tracker = init_scale, 0
    state = {}
    history = []
    for step in range(STEPS):
        x = X.copy()
        if step in BAD_STEPS:
            x[0, 0] = BAD_STEPS[step]
        with np.errstate(all="ignore"):
            out = x @ w.T
            grad_out = 2.0 * (out - Y) / out.size * scale  # d(scale * mse)/d out
            g = grad_out.T @ x
            g = g * np.float64(np.float32(1.0 / np.float64(np.float32(scale))))
        found_inf = not np.all(np.isfinite(g))
        if not found_inf:
            if rule == "sgd":
                buf = state.get("buf")
                buf = g.copy() if buf is None else 0.9 * buf + g
                state["buf"] = buf
                w = w - lr * buf
            else:
                b1, b2, eps = 0.9, 0.999, 1e-8
                state["step"] = state.get("step", 0) + 1
                m = b1 * state.get("m", 0) + (1 - b1) * g
                v = b2 * state.get("v", 0) + (1 - b2) * g * g
                state["m"], state["v"] = m, v
                bc1, bc2 = 1 - b1 ** state["step"], 1 - b2 ** state["step"]
                w = w - (lr / bc1) * m / (np.sqrt(v) / np.sqrt(bc2) + eps)
        if found_inf:
            scale *= backoff
            tracker = 0
        else:
            tracker += 1
            if tracker == growth_interval:
                scale *= growth
                tracker = 0
        history.append((w.copy(), scale, tracker, dict(state)))
    return history


def make_optimizer(rule, params):
    if rule == "sgd":
        return loom.optim.SGD(params, lr=0.05, momentum=0.9)
    return loom.optim.Adam(params, lr=0.05)


def loom_loop(rule, device, sync_each_step=True):
    w = loom.nn.Parameter(loom.tensor(W0.astype(np.float32), device=device))
    optimizer = make_optimizer(rule, [w])
    scaler = loom.amp.GradScaler(device, init_scale=2.0 ** 10, growth_interval=3)
    history = []
    y = loom.tensor(Y.astype(np.float32), device=device)
    inputs = []
    for step in range(STEPS):
        x = X.astype(np.float32).copy()
        if step in BAD_STEPS:
            x[0, 0] = BAD_STEPS[step]
        inputs.append(loom.tensor(x, device=device))
    loom.sync()
    loom.metrics_reset()
    for step in range(STEPS):
        optimizer.zero_grad()
        loss = F.mse_loss(inputs[step] @ w.t(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if sync_each_step:
            loss.item()  # the loop's own sync, as a training loop logs its loss
            history.append((w.detach().to("cpu").numpy().astype(np.float64), scaler._scale.item(),
                            scaler._growth_tracker.item()))
    return w, optimizer, scaler, history


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("rule", ["sgd", "adam"])
def test_training_loop_matches_reference(rule, device):
    expected = reference(rule)
    w, optimizer, scaler, history = loom_loop(rule, device)
    for step, ((ew, escale, etracker, _), (gw, gscale, gtracker)) in enumerate(zip(expected, history)):
        np.testing.assert_allclose(gw, ew, rtol=1e-5, atol=1e-6, err_msg=f"step {step}")
        assert gscale == escale and gtracker == etracker, step
    assert scaler.get_scale() == expected[-1][1]
    if rule == "adam":
        scaler._settle()
        assert optimizer.state[w]["step"] == expected[-1][3]["step"]


@pytest.mark.parametrize("rule", ["sgd", "adam"])
def test_lazy_loop_adds_no_sync(rule):
    """One sync per step, whatever the scaler skipped: the step's end (scaler.update() ends it,
    so the update, the skip and the new scale are one trace); the loop's reads of the loss and
    the scale then find values already computed."""
    loom_loop(rule, "lazy")
    metrics = loom.metrics()
    assert metrics["syncs"] == STEPS, metrics
    assert metrics["syncs_step"] == STEPS and metrics["syncs_item"] == 0, metrics


def test_lazy_loop_without_syncs_matches_reference():
    """A loop that never syncs still gets PyTorch's numbers (the scaler then reads each flag)."""
    w, _, scaler, _ = loom_loop("adam", "lazy", sync_each_step=False)
    np.testing.assert_allclose(w.detach().to("cpu").numpy(), reference("adam")[-1][0], rtol=1e-5, atol=1e-6)


def test_sgd_lazy_loop_never_reads_the_flag():
    """SGD after its first step has nothing a where() cannot undo: no sync from the scaler, only
    the step's end (in scaler.update())."""
    w, _, scaler, _ = loom_loop("sgd", "lazy", sync_each_step=False)
    # the fresh momentum buffer is settled (its flag read) at the next step, after step 0 (skipped,
    # so the buffer is dropped) and after step 1 (which made it again): the flag was computed by
    # the step's end, so reading it is no sync
    metrics = loom.metrics()
    assert metrics["syncs"] == metrics["syncs_step"] == STEPS, metrics
    np.testing.assert_allclose(w.detach().to("cpu").numpy(), reference("sgd")[-1][0], rtol=1e-5, atol=1e-6)


def test_unscale_matches_torch_cpu_reference():
    """unscale_ then clipping, as the documented recipe: gradients equal to torch's unscaled ones."""
    torch.manual_seed(0)
    tl = torch.nn.Linear(4, 3)
    ll = loom.nn.Linear(4, 3)
    ll.load_state_dict({k: loom.tensor(v.detach().numpy()) for k, v in tl.state_dict().items()})
    x = torch.tensor(X, dtype=torch.float32)
    torch.nn.functional.mse_loss(tl(x), torch.tensor(Y, dtype=torch.float32)).backward()
    opt = loom.optim.SGD(ll.parameters(), lr=0.1)
    scaler = loom.amp.GradScaler("cpu", init_scale=256.0)
    scaler.scale(F.mse_loss(ll(loom.tensor(x.numpy())), loom.tensor(Y.astype(np.float32)))).backward()
    scaler.unscale_(opt)
    for tp, lp in zip(tl.parameters(), ll.parameters()):
        np.testing.assert_allclose(lp.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-7)
    norm = loom.nn.utils.clip_grad_norm_(ll.parameters(), 0.1)
    assert np.isfinite(norm.item())
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    scaler.update()
    assert scaler.get_scale() == 256.0 and scaler._get_growth_tracker() == 1


def test_state_dict_pickle_and_disabled():
    scaler = loom.amp.GradScaler("cpu", init_scale=8.0, growth_interval=5)
    w = loom.nn.Parameter(loom.ones(2))
    opt = loom.optim.SGD([w], lr=0.1)
    scaler.scale((w * 2).sum()).backward()
    scaler.step(opt)
    scaler.update()
    sd = scaler.state_dict()
    assert sd == {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 5,
                  "_growth_tracker": 1}
    other = loom.amp.GradScaler("cpu")
    other.load_state_dict(sd)
    assert other.get_scale() == 8.0 and other._get_growth_tracker() == 1
    clone = pickle.loads(pickle.dumps(scaler))
    assert clone.state_dict() == sd
    off = loom.amp.GradScaler("cpu", enabled=False)
    loss = (w * 2).sum()
    assert off.scale(loss) is loss and off.state_dict() == {} and off.get_scale() == 1.0
    with pytest.raises(RuntimeError, match="empty"):
        other.load_state_dict({})
    with pytest.raises(ValueError, match="growth factor"):
        loom.amp.GradScaler("cpu", growth_factor=0.5)
    with pytest.raises(AssertionError, match="_scale is None"):
        loom.amp.GradScaler("cpu").step(opt)
    if not loom.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available"):
            assert not loom.cuda.amp.GradScaler().is_enabled()


def test_scale_of_several_outputs_and_new_scale():
    scaler = loom.amp.GradScaler("lazy", init_scale=4.0)
    a, b = loom.ones(2, device="lazy"), loom.ones(3, device="lazy")
    sa, (sb,) = scaler.scale([a, (b,)])
    assert sa.tolist() == [4.0, 4.0] and sb.tolist() == [4.0] * 3
    with pytest.raises(ValueError, match="iterable of Tensors"):
        scaler.scale(3)
    scaler.update(new_scale=16.0)
    assert scaler.get_scale() == 16.0
    scaler.update(new_scale=loom.tensor([2.0], device="lazy"))
    assert scaler.get_scale() == 2.0


def test_growth_stops_at_float32_overflow():
    """_amp_update_scale_ keeps the scale when growing it would overflow float32."""
    scaler = loom.amp.GradScaler("lazy", init_scale=2.0 ** 127, growth_interval=1)
    w = loom.nn.Parameter(loom.ones(1, device="lazy"))
    opt = loom.optim.SGD([w], lr=0.0)
    scaler.scale(w.sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 127 and scaler._get_growth_tracker() == 0
