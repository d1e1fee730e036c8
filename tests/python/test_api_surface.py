"""The commonly used PyTorch names a ported program or another project's op suite reaches for,
checked by class against torch 1.13: every in-place function form torch has (torch.exp_) for an
op loom has in place; the function forms of view and copy methods (torch.transpose); Tensor's
in-place comparisons (eq_); queries (numel, is_nonzero, ...); composites (diff, tile, dist);
Tensor.register_hook; dtype limits and promotion (finfo, iinfo, result_type, can_cast,
broadcast_shapes); loom.testing.assert_close; scans with NaN."""

import numpy as np
import pytest

import loom
from _ops_helpers import device  # noqa: F401  (the cpu / lazy fixture)

torch = pytest.importorskip("torch")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def rows():
    return {name: forms for name, forms, _ in loom._C._signatures()}


def test_every_in_place_function_of_torch_exists_where_loom_has_the_method():
    # torch.<op>_ exists for most ops with an in-place method: loom has each one whose method it has.
    missing = [n for n in dir(torch) if n.endswith("_") and not n.startswith("_") and hasattr(loom.Tensor, n)
               and not hasattr(loom, n)]
    assert missing == []


def test_every_function_form_of_a_method_torch_has():
    missing = [n for n in dir(torch) if not n.startswith("_") and n in rows() and not hasattr(loom, n)]
    assert missing == []


def test_every_in_place_method_of_torch_exists_where_loom_has_the_row():
    missing = [n for n in dir(torch.Tensor) if n.endswith("_") and not n.startswith("_") and n[:-1] in rows()
               and not hasattr(loom.Tensor, n)]
    assert missing == []


@pytest.mark.parametrize("name", ["exp_", "sigmoid_", "clamp_", "neg_", "sqrt_", "round_", "zero_", "fill_"])
def test_in_place_functions_write_their_input(device, name):
    a = np.array([[0.25, 1.5], [2.0, 4.0]], np.float32)
    extra = {"clamp_": (0.5, 2.0), "fill_": (3.0,)}.get(name, ())
    mine, theirs = loom.tensor(a).to(device), torch.tensor(a)
    result = getattr(loom, name)(mine, *extra)
    getattr(torch, name)(theirs, *extra)
    assert result is mine
    np.testing.assert_allclose(mine.cpu().numpy(), theirs.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["eq_", "ne_", "lt_", "le_", "gt_", "ge_", "greater_", "less_equal_",
                                  "logical_and_", "logical_xor_"])
def test_in_place_comparisons_keep_the_dtype(device, name):
    a = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]], np.float32)
    b = np.array([2.0, 2.0, 0.0], np.float32)
    mine, theirs = loom.tensor(a).to(device), torch.tensor(a)
    getattr(mine, name)(loom.tensor(b).to(device))
    getattr(theirs, name)(torch.tensor(b))
    assert mine.dtype == loom.float32
    np.testing.assert_array_equal(mine.cpu().numpy(), theirs.numpy())


@pytest.mark.parametrize("call", [
    lambda m, x: m.transpose(x, 0, 1), lambda m, x: m.permute(x, (1, 0)), lambda m, x: m.reshape(x, (-1,)),
    lambda m, x: m.squeeze(m.unsqueeze(x, 0)), lambda m, x: m.narrow(x, 1, 1, 2), lambda m, x: m.select(x, 0, 1),
    lambda m, x: m.t(x), lambda m, x: m.clone(x), lambda m, x: m.broadcast_to(x[:1], (3, 3)),
    lambda m, x: m.tile(x, (2,)), lambda m, x: m.tile(x, (2, 1, 2)), lambda m, x: m.ravel(x.t()),
    lambda m, x: m.diff(x), lambda m, x: m.diff(x, n=2, dim=0), lambda m, x: m.diff(x, dim=0, prepend=x[:1]),
    lambda m, x: m.diff(x > 0, append=x[:, :1] > 1), lambda m, x: m.diff(x, n=5),
    lambda m, x: m.dist(x, x * 2), lambda m, x: m.dist(x, x.flip(0), 1), lambda m, x: x.adjoint(),
    lambda m, x: x.mH, lambda m, x: x.H, lambda m, x: m.not_equal(x, 2.0), lambda m, x: m.greater_equal(x, 2.0),
], ids=lambda c: None)
def test_function_forms_and_composites_match_torch(device, call):
    a = np.array([[1.0, -2.0, 4.0], [0.5, 3.0, -1.0], [2.0, 2.0, 7.0]])
    mine, theirs = call(loom, loom.tensor(a).to(device)), call(torch, torch.tensor(a))
    assert tuple(mine.shape) == tuple(theirs.shape) and str(mine.dtype)[5:] == str(theirs.dtype)[6:]
    np.testing.assert_allclose(mine.cpu().numpy(), theirs.numpy(), rtol=1e-12)


@pytest.mark.parametrize("call", [lambda m, x: m.diff(x, dim=1), lambda m, x: m.dist(x, x.flip(0), 3),
                                  lambda m, x: m.tile(x, (2, 2)), lambda m, x: m.ravel(x.t())])
def test_composite_gradients_match_torch(call):
    a = np.array([[1.0, -2.0, 4.0], [0.5, 3.0, -1.0]])
    mine, theirs = loom.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (call(loom, mine) * loom.arange(1.0, 1.0 + call(loom, mine).numel(), dtype=loom.float64).view(
        call(loom, mine).shape)).sum().backward()
    (call(torch, theirs) * torch.arange(1.0, 1.0 + call(torch, theirs).numel(), dtype=torch.float64).view(
        call(torch, theirs).shape)).sum().backward()
    np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-12)


def test_queries_match_torch():
    for m in (loom, torch):
        x = m.ones(2, 3, dtype=m.uint8)
        assert (m.numel(x), m.is_floating_point(x), m.is_complex(x), m.is_signed(x), x.is_signed(),
                m.is_same_size(x, m.zeros(2, 3)), m.is_same_size(x, m.zeros(3, 2)), x.get_device(),
                m.is_nonzero(m.tensor([0.5])), m.equal(x, x.clone()), m.equal(x, x[:1])) == \
            (6, False, False, False, False, True, False, -1, True, True, False)
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        loom.is_nonzero(loom.ones(2))
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with no values is ambiguous"):
        loom.is_nonzero(loom.ones(0))
    with pytest.raises(RuntimeError, match="diff expects input to be at least one-dimensional"):
        loom.diff(loom.tensor(1.0))


# ---- Tensor.register_hook ----

def test_register_hook_on_a_leaf_scales_its_gradient_until_removed(device):
    w = loom.ones(3, device=device, requires_grad=True)
    handle = w.register_hook(lambda g: g * 2)
    (w * 3).sum().backward()
    assert w.grad.tolist() == [6.0, 6.0, 6.0]
    handle.remove()
    w.grad = None
    (w * 3).sum().backward()
    assert w.grad.tolist() == [3.0, 3.0, 3.0]


def test_register_hook_on_a_non_leaf_sees_and_replaces_its_gradient(device):
    for m in (loom, torch):
        w = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        if m is loom:
            w = w.to(device).detach().requires_grad_(True)
        seen = []
        y = w * w
        y.register_hook(lambda g: seen.append(g.tolist()))          # observes, returns None
        y.register_hook(lambda g: g + 1)                           # replaces
        y.retain_grad()
        (y * 2).sum().backward()
        assert seen == [[2.0, 2.0, 2.0]]
        assert y.grad.tolist() == [3.0, 3.0, 3.0]
        assert w.grad.tolist() == [6.0, 12.0, 18.0]


def test_register_hook_errors_match_torch():
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        loom.ones(2).register_hook(lambda g: g)
    w = loom.ones(3, requires_grad=True)

    def wrong(g):
        return g[:2]
    w.register_hook(wrong)
    with pytest.raises(RuntimeError, match=r"hook 'wrong' has changed the size of value"):
        (w * 2).sum().backward()


def test_register_hook_runs_for_autograd_grad():
    w = loom.ones(2, requires_grad=True)
    y = w * 3
    y.register_hook(lambda g: g * 10)
    (g,) = loom.autograd.grad(y.sum(), w)
    assert g.tolist() == [30.0, 30.0]


# ---- dtypes ----

@pytest.mark.parametrize("name", [d for d in DTYPES if d.startswith(("float", "bfloat"))])
def test_finfo_matches_torch(name):
    mine, theirs = loom.finfo(getattr(loom, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(mine, attr) == getattr(theirs, attr), attr


@pytest.mark.parametrize("name", [d for d in DTYPES if not d.startswith(("float", "bfloat"))])
def test_iinfo_matches_torch(name):
    if name == "bool":
        pytest.skip("torch 1.13's iinfo refuses bool")
    mine, theirs = loom.iinfo(getattr(loom, name)), torch.iinfo(getattr(torch, name))
    assert (mine.bits, mine.min, mine.max) == (theirs.bits, theirs.min, theirs.max)
    with pytest.raises(TypeError):
        loom.finfo(getattr(loom, name))


def test_result_type_and_can_cast_match_torch_for_every_pair():
    numbers = [True, 3, 2.5]
    for a in DTYPES:
        for b in DTYPES:
            assert loom.can_cast(getattr(loom, a), getattr(loom, b)) == torch.can_cast(getattr(torch, a),
                                                                                      getattr(torch, b)), (a, b)
            for shape_a, shape_b in [((2,), (2,)), ((), (2,)), ((2,), ())]:
                mine = loom.result_type(loom.zeros(shape_a, dtype=getattr(loom, a)),
                                        loom.zeros(shape_b, dtype=getattr(loom, b)))
                theirs = torch.result_type(torch.zeros(shape_a, dtype=getattr(torch, a)),
                                           torch.zeros(shape_b, dtype=getattr(torch, b)))
                assert str(mine)[5:] == str(theirs)[6:], (a, b, shape_a, shape_b)
        for n in numbers:
            mine = loom.result_type(loom.zeros(2, dtype=getattr(loom, a)), n)
            theirs = torch.result_type(torch.zeros(2, dtype=getattr(torch, a)), n)
            assert str(mine)[5:] == str(theirs)[6:], (a, n)


def test_broadcast_shapes_and_tensors_match_torch():
    for shapes in [((3, 1), (4,)), ((2, 1, 3), (5, 1), ()), (3, (2, 3)), ((0, 1), (1, 4))]:
        assert tuple(loom.broadcast_shapes(*shapes)) == tuple(torch.broadcast_shapes(*shapes))
    with pytest.raises(RuntimeError, match="shape mismatch"):
        loom.broadcast_shapes((3,), (4,))
    a, b = loom.broadcast_tensors(loom.ones(3, 1), loom.zeros(4))
    assert a.shape == (3, 4) and b.shape == (3, 4)
    assert (loom.pi, loom.e, loom.inf) == (torch.pi, torch.e, torch.inf) and loom.nan != loom.nan


# ---- loom.testing ----

@pytest.mark.parametrize("pair", [
    ([1.0, 2.0], [1.0, 2.0 + 1e-7]), ([1.0, 2.0], [1.0, 2.1]), ([1.0, float("nan")], [1.0, float("nan")]),
    ([1, 2], [1, 2]), ([1, 2], [1, 3]), ([[1.0]], [1.0]),
], ids=["close", "far", "nan", "ints", "ints-off", "shape"])
def test_assert_close_passes_and_fails_as_torch(pair):
    def outcome(m):
        try:
            m.testing.assert_close(m.tensor(pair[0]), m.tensor(pair[1]))
            return None
        except AssertionError as e:
            return str(e).split("\n")[0]
    theirs = outcome(torch)
    assert outcome(loom) == (theirs and theirs.replace("torch.", "loom."))


def test_assert_close_checks_dtype_and_nests():
    loom.testing.assert_close({"a": [loom.ones(2), 3]}, {"a": [loom.ones(2), 3]})
    with pytest.raises(AssertionError, match="dtype"):
        loom.testing.assert_close(loom.ones(2), loom.ones(2, dtype=loom.float64))
    loom.testing.assert_close(loom.ones(2), loom.ones(2, dtype=loom.float64), check_dtype=False)
    t = loom.testing.make_tensor(3, 4, dtype=loom.float32, device="cpu", low=-1, high=1, noncontiguous=True)
    assert t.shape == (3, 4) and not t.is_contiguous() and float(t.abs().max()) <= 1


# ---- scans with NaN: a NaN reaches only the rest of its own line ----

def test_cumsum_nan_stays_in_its_line(device):
    a = np.array([[np.nan, np.inf, -np.inf, 0.0], [-0.0, 1.0, -2.5, 3.0]], np.float32)
    for dim in (0, 1):
        mine = loom.cumsum(loom.tensor(a).to(device), dim)
        np.testing.assert_array_equal(mine.cpu().numpy(), torch.cumsum(torch.tensor(a), dim).numpy())


def test_autograd_variable_and_anomaly_mode():
    x = loom.ones(2)
    assert loom.autograd.Variable(x, requires_grad=True) is x and x.requires_grad
    assert isinstance(x, loom.autograd.Variable)
    assert not loom.autograd.is_anomaly_enabled()
    with loom.autograd.detect_anomaly():
        assert loom.autograd.is_anomaly_enabled()
    assert not loom.autograd.is_anomaly_enabled()
    loom.autograd.set_detect_anomaly(True)
    assert loom.autograd.is_anomaly_enabled()
    loom.autograd.set_detect_anomaly(False)


# ---- custom autograd.Function ----

def _functions(m):
    class Cube(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x ** 3 * scale, (x > 0).to(x.dtype)

        @staticmethod
        def backward(ctx, g, g_mask):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * ctx.scale * g + g_mask, None

    class StraightThrough(m.autograd.Function):  # round forward, identity backward
        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, g):
            return g

    return Cube, StraightThrough


def test_custom_function_gradients_match_torch(device):
    a = np.array([[0.5, -1.5], [2.0, 1.25]])
    results = []
    for m, dev in ((loom, device), (torch, "cpu")):
        cube, straight = _functions(m)
        x = m.tensor(a, requires_grad=True) if m is torch else m.tensor(a).to(dev).requires_grad_(True)
        y, mask = cube.apply(x, 2.0)
        z = straight.apply(x * 1.7)
        (y * z).sum().backward()
        results.append((y.detach().cpu().numpy(), mask.detach().cpu().numpy(), x.grad.cpu().numpy()))
    for mine, theirs in zip(*results):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12)


def test_custom_function_passes_gradcheck_and_checks_its_gradient_count():
    cube, _ = _functions(loom)
    x = loom.tensor([0.3, -0.7, 1.1], dtype=loom.float64, requires_grad=True)
    assert loom.autograd.gradcheck(lambda t: cube.apply(t, 1.5)[0], (x,))

    class Wrong(loom.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return (g,)
    with pytest.raises(RuntimeError, match=r"WrongBackward returned an incorrect number of gradients \(expected 2"):
        Wrong.apply(x, x).sum().backward()


def test_custom_function_outside_grad_mode_records_nothing():
    cube, _ = _functions(loom)
    x = loom.ones(2, requires_grad=True)
    with loom.no_grad():
        y, _ = cube.apply(x, 1.0)
    assert not y.requires_grad


# ---- lazy modules, DataParallel ----

def test_lazy_linear_becomes_the_linear_the_same_seed_makes(device):
    m = loom.nn.LazyLinear(3).to(device)
    assert "uninitialized" in repr(m)
    opt = loom.optim.SGD(m.parameters(), lr=0.1)
    weight = m.weight
    x = loom.randn(5, 4).to(device)
    loom.manual_seed(1)
    y = m(x)
    loom.manual_seed(1)
    ref = loom.nn.Linear(4, 3)
    assert type(m) is loom.nn.Linear and m.in_features == 4 and m.weight is weight
    np.testing.assert_array_equal(m.weight.detach().cpu().numpy(), ref.weight.detach().numpy())
    y.sum().backward()
    opt.step()  # the optimizer made before the first call updates the materialized weight
    assert not np.array_equal(m.weight.detach().cpu().numpy(), ref.weight.detach().numpy())


def test_lazy_conv_and_norm_layers_read_their_channels(device):
    net = loom.nn.Sequential(loom.nn.LazyConv2d(8, 3), loom.nn.LazyBatchNorm2d(), loom.nn.ReLU(),
                             loom.nn.LazyConvTranspose2d(4, 2), loom.nn.LazyInstanceNorm2d(affine=True),
                             loom.nn.Flatten(), loom.nn.LazyLinear(2)).to(device)
    out = net(loom.randn(2, 3, 6, 6).to(device))
    assert out.shape == (2, 2)
    assert [type(m).__name__ for m in net] == ["Conv2d", "BatchNorm2d", "ReLU", "ConvTranspose2d",
                                               "InstanceNorm2d", "Flatten", "Linear"]
    assert net[0].weight.shape == (8, 3, 3, 3) and net[1].running_mean.shape == (8,)
    assert net[4].weight.shape == (4,) and net[6].in_features == 4 * 5 * 5


def test_data_parallel_wraps_the_module_as_torch_does():
    for m in (loom, torch):
        inner = m.nn.Linear(2, 3)
        dp = m.nn.DataParallel(inner)
        assert dp.module is inner and list(dp.state_dict()) == ["module.weight", "module.bias"]
        x = m.ones(4, 2)
        assert m.equal(dp(x), inner(x))


@pytest.mark.parametrize("call", [lambda x: x.t_(), lambda x: x.transpose_(0, 1), lambda x: x.swapaxes_(1, 0),
                                  lambda x: x.unsqueeze_(1), lambda x: x.unsqueeze_(-1).squeeze_(),
                                  lambda x: x.unsqueeze_(0).squeeze_(0)])
def test_in_place_views_reshape_self_as_torch(device, call):
    a = np.arange(6.0).reshape(2, 3)
    mine, theirs = loom.tensor(a).to(device), torch.tensor(a)
    assert call(mine) is mine
    call(theirs)
    assert tuple(mine.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(mine.cpu().numpy(), theirs.numpy())
    mine.mul_(2)  # still the same storage as before: writes are seen through it
    assert mine.sum().item() == 30.0


def test_detach_in_place_makes_a_leaf():
    for m in (loom, torch):
        x = m.ones(2, requires_grad=True)
        y = x * 2
        assert y.detach_() is y and y.grad_fn is None and not y.requires_grad and y.is_leaf
        with pytest.raises(RuntimeError, match="Can't detach views in-place"):
            (x * 2)[:1].detach_()
    with pytest.raises(RuntimeError, match="requires grad is not supported by loom"):
        loom.ones(2, 2, requires_grad=True).t_()


# ---- lgamma, digamma ----

GAMMA_POINTS = [0.1, 0.5, 1.0, 1.5, 2.0, 3.7, 10.0, 123.4, -0.3, -1.5, -2.7, 0.0, -1.0, -2.0, 1e-8, 5e5]


@pytest.mark.parametrize("name", ["lgamma", "digamma"])
def test_gamma_functions_match_torch_with_their_poles(device, name):
    a = np.array(GAMMA_POINTS)
    mine = getattr(loom, name)(loom.tensor(a).to(device)).cpu().numpy()
    theirs = getattr(torch, name)(torch.tensor(a)).numpy()
    np.testing.assert_allclose(mine, theirs, rtol=1e-13, atol=1e-13)  # inf, -inf and NaN where torch has them
    ints = getattr(loom, name)(loom.tensor([1, 2, 3]).to(device))
    assert ints.dtype == loom.float32
    np.testing.assert_allclose(ints.cpu().numpy(), getattr(torch, name)(torch.tensor([1, 2, 3])).numpy(), atol=1e-6)


@pytest.mark.parametrize("name", ["lgamma", "digamma"])
def test_gamma_function_gradients_match_torch(name):
    a = np.array([g for g in GAMMA_POINTS if g > 0 or g != int(g)][:11])
    x, tx = loom.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    getattr(loom, name)(x).sum().backward()
    getattr(torch, name)(tx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-8)
    y = loom.tensor([2.5, 0.7])
    getattr(y, name + "_")()
    np.testing.assert_allclose(y.numpy(), getattr(torch, name)(torch.tensor([2.5, 0.7])).numpy(), rtol=1e-5)


def test_einsum_sublist_form_matches_torch(device):
    calls = [lambda m, a, b: m.einsum(a, [0, 1], [1]), lambda m, a, b: m.einsum(a, [0, 1], b, [1, 2], [0, 2]),
             lambda m, a, b: m.einsum(a, [0, 1], b, [1, 2]), lambda m, a, b: m.einsum(a, [Ellipsis, 1], [Ellipsis]),
             lambda m, a, b: m.einsum(a, [30, 51], b, [51, 0])]
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    for call in calls:
        mine = call(loom, loom.tensor(a).to(device), loom.tensor(b).to(device))
        np.testing.assert_allclose(mine.cpu().numpy(), call(torch, torch.tensor(a), torch.tensor(b)).numpy())
    with pytest.raises(ValueError, match=r"range \[0, 52\)"):
        loom.einsum(loom.ones(2), [52])


def test_legacy_autograd_profiler_records_through_loom_profiler():
    x = loom.ones(16, 16)
    with loom.autograd.profiler.profile() as prof:
        with loom.autograd.profiler.record_function("my_step"):
            (x @ x).sum().item()
    assert "my_step" in {e.name for e in prof.events()}
    with loom.autograd.profiler.profile(enabled=False) as off:
        (x @ x).sum().item()
    assert off.enabled is False


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_torch_with_gradients(device, mode, padding_mode, align_corners):
    rng = np.random.default_rng(3)
    a, g = rng.standard_normal((2, 3, 5, 4)), rng.uniform(-1.3, 1.3, (2, 6, 7, 2))
    w = rng.standard_normal((2, 3, 6, 7))
    x, grid = loom.tensor(a).to(device).requires_grad_(True), loom.tensor(g).to(device).requires_grad_(True)
    tx, tgrid = torch.tensor(a, requires_grad=True), torch.tensor(g, requires_grad=True)
    mine = loom.nn.functional.grid_sample(x, grid, mode, padding_mode, align_corners)
    theirs = torch.nn.functional.grid_sample(tx, tgrid, mode, padding_mode, align_corners)
    np.testing.assert_allclose(mine.detach().cpu().numpy(), theirs.detach().numpy(), atol=1e-12)
    (mine * loom.tensor(w).to(device)).sum().backward()
    (theirs * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), tx.grad.numpy(), atol=1e-12)
    if mode == "bilinear":  # nearest: torch's grid gradient is zeros, loom's None (round has none)
        np.testing.assert_allclose(grid.grad.cpu().numpy(), tgrid.grad.numpy(), atol=1e-12)


def test_grid_sample_after_affine_grid_is_the_spatial_transformer_of_the_tutorial():
    theta = np.array([[[0.8, -0.2, 0.1], [0.3, 0.9, -0.05]]])
    img = np.random.default_rng(4).standard_normal((1, 1, 8, 8)).astype(np.float32)
    outs = []
    for m in (loom, torch):
        grid = m.nn.functional.affine_grid(m.tensor(theta, dtype=m.float32), [1, 1, 8, 8], align_corners=False)
        outs.append(m.nn.functional.grid_sample(m.tensor(img), grid, align_corners=False).numpy())
    np.testing.assert_allclose(outs[0], outs[1], atol=1e-5)
    with pytest.raises(NotImplementedError, match="reflection"):
        loom.nn.functional.grid_sample(loom.ones(1, 1, 2, 2), loom.zeros(1, 1, 1, 2), padding_mode="reflection",
                                       align_corners=False)


def test_autograd_submodules_import_as_in_torch():
    """Scripts write `from torch.autograd.functional import jacobian`: a submodule import, which
    needs loom.autograd to be a package, not only an attribute lookup."""
    import importlib
    for name in ("functional", "profiler"):
        module = importlib.import_module(f"loom.autograd.{name}")
        assert getattr(loom.autograd, name) is module
    from loom.autograd.functional import jacobian
    np.testing.assert_allclose(jacobian(lambda x: x * x, loom.tensor([1.0, 2.0])).numpy(), [[2, 0], [0, 4]])


def test_autograd_functional_matches_torch():
    a, b = np.array([0.3, -1.2, 2.0]), np.array([[1.0, 2.0], [0.5, -1.0], [2.0, 0.1]])
    results = []
    for m in (loom, torch):
        F = m.autograd.functional
        x, w, v = m.tensor(a), m.tensor(b), m.tensor([1.0, -2.0, 0.5], dtype=m.float64)
        f = lambda x: (x ** 3).sin()  # noqa: E731
        g = lambda x, w: (x @ w).tanh()  # noqa: E731
        s = lambda x, w: ((x ** 2 * x.exp()).sum() + (w * w.sum()).sum())  # noqa: E731
        flat = [F.jacobian(f, x), *F.jacobian(g, (x, w)), F.hessian(lambda x: s(x, w), x),
                *[h for row in F.hessian(s, (x, w)) for h in row], *F.vjp(g, (x, w), m.ones(2, dtype=m.float64))[1],
                F.jvp(f, x, v)[1], F.vhp(lambda x: s(x, w), x, v)[1], F.hvp(lambda x: s(x, w), x, v)[1]]
        results.append([t.detach().numpy() for t in flat])
    for mine, theirs in zip(*results):
        assert mine.shape == theirs.shape
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-12)


def test_jit_names_model_code_calls_inline_run_the_python():
    class Block(loom.nn.Module):
        scale: loom.jit.Final[float]

        def __init__(self):
            super().__init__()
            self.scale = 2.0

        @loom.jit.ignore
        def helper(self, x):
            return x + 1

        @loom.jit.ignore(drop=False)
        def other(self, x):
            return x

        def forward(self, x):
            if loom.jit.is_scripting() or loom.jit.is_tracing():
                return x
            return self.other(self.helper(x)) * self.scale

    block = loom.jit.script(Block())
    assert block(loom.ones(2)).tolist() == [4.0, 4.0]
    assert loom.jit.script(loom.sin) is loom.sin and loom.jit.annotate(int, 3) == 3
    with pytest.raises(NotImplementedError, match="TorchScript"):
        loom.jit.trace(block, loom.ones(2))
