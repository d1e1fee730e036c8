"""loom.autocast against torch.autocast (PyTorch 1.13, CPU, bfloat16): each op's result dtype and
values, in eager and lazy mode; the policy table against PyTorch's lists; regions nested, disabled
inside, as decorators; the cache of weight casts; gradients through the casts; and lazy casts
fusing into the kernels around them."""

import numpy as np
import pytest

import loom
import loom.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DEVICES = ["cpu", "lazy"]


def to_loom(a, device):
    return loom.tensor(a.float().numpy() if a.dtype == torch.bfloat16 else a.numpy(), device=device).to(
        {torch.bfloat16: loom.bfloat16, torch.float32: loom.float32, torch.int64: loom.int64}[a.dtype])


def to_numpy(t):
    return t.float().to("cpu").numpy()


rng = np.random.default_rng(0)


def tensor(*shape):
    return torch.tensor(rng.standard_normal(shape).astype(np.float32))


X, W, B3, T = tensor(4, 8), tensor(8, 8), tensor(2, 4, 8), tensor(4, 8)
TARGET = torch.tensor([1, 0, 3, 2])

# name -> (function of (module, functional, tensors...), the tensors): the same call in both libraries
CASES = {
    "mm": (lambda m, f, x, w: m.mm(x, w), [X, W]),
    "matmul": (lambda m, f, x, w: m.matmul(x, w), [X, W]),
    "@": (lambda m, f, x, w: x @ w, [X, W]),
    "linear": (lambda m, f, x, w: f.linear(x, w), [X, W]),
    "bmm": (lambda m, f, a, b: m.bmm(a, b.transpose(1, 2)), [B3, B3]),
    "addmm": (lambda m, f, c, x, w: m.addmm(c, x, w), [X, X, W]),
    "baddbmm": (lambda m, f, c, a, b: m.baddbmm(c, a, b), [tensor(2, 4, 4), B3, tensor(2, 8, 4)]),
    "einsum": (lambda m, f, x, w: m.einsum("ij,jk->ik", x, w), [X, W]),
    "tensordot": (lambda m, f, x, w: m.tensordot(x, w, 1), [X, W]),
    "softmax": (lambda m, f, x: m.softmax(x, -1), [X]),
    "log_softmax": (lambda m, f, x: f.log_softmax(x, -1), [X]),
    "sum": (lambda m, f, x: x.sum(), [X]),
    "mean": (lambda m, f, x: x.mean(), [X]),
    "exp": (lambda m, f, x: x.exp(), [X]),
    "pow": (lambda m, f, x: x ** 2, [X]),
    "prod": (lambda m, f, x: x.prod(1), [X]),
    "cumsum": (lambda m, f, x: x.cumsum(0), [X]),
    "layer_norm": (lambda m, f, x: f.layer_norm(x, (8,)), [X]),
    "group_norm": (lambda m, f, x: f.group_norm(x.reshape(4, 4, 2), 2), [X]),
    "mse_loss": (lambda m, f, x, t: f.mse_loss(x, t), [X, T]),
    "l1_loss": (lambda m, f, x, t: f.l1_loss(x, t), [X, T]),
    "nll_loss": (lambda m, f, x: f.nll_loss(x, TARGET_OF[m]), [X]),
    "cross_entropy": (lambda m, f, x: f.cross_entropy(x, TARGET_OF[m]), [X]),
    "bce_with_logits": (lambda m, f, x, t: f.binary_cross_entropy_with_logits(x, t.sigmoid()), [X, T]),
    "cat": (lambda m, f, x, y: m.cat([x, y]), [X, T]),
    "stack": (lambda m, f, x, y: m.stack([x, y]), [X, T]),
    "relu": (lambda m, f, x: f.relu(x), [X]),
    "gelu": (lambda m, f, x: f.gelu(x), [X]),
    "add": (lambda m, f, x, y: x + y, [X, T]),
}
TARGET_OF = {torch: TARGET}


@pytest.fixture(autouse=True, scope="module")
def _targets():
    TARGET_OF[loom] = loom.tensor(TARGET.numpy())
    yield


def run_torch(fn, args):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return fn(torch, TF, *args)


def run_loom(fn, args, device):
    if TARGET_OF.get(loom) is not None:
        TARGET_OF[loom] = TARGET_OF[loom].to(device)
    with loom.autocast("cpu" if device == "cpu" else "lazy", dtype=loom.bfloat16):
        return fn(loom, F, *args)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("first", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", list(CASES))
def test_op_matches_torch(name, first, device):
    """Same result dtype as torch.autocast; values within bfloat16's precision."""
    fn, args = CASES[name]
    if first == "bfloat16":
        args = [args[0].bfloat16()] + list(args[1:])
    expected = run_torch(fn, args)
    got = run_loom(fn, [to_loom(a, device) for a in args], device)
    assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1], name
    tol = 2e-2 if expected.dtype == torch.bfloat16 or first == "bfloat16" else 1e-5
    np.testing.assert_allclose(to_numpy(got), expected.float().numpy(), rtol=tol, atol=tol * 4)


def test_policy_table_matches_pytorch_lists():
    """The table's classes for PyTorch 1.13's lists (aten/src/ATen/autocast_mode.cpp)."""
    cuda_low = ["matmul", "mm", "bmm", "linear", "addmm", "baddbmm", "addbmm", "einsum", "mv", "addmv", "addr",
                "conv1d", "conv2d", "conv3d", "conv_transpose2d", "prelu", "lstm_cell", "gru_cell", "chain_matmul"]
    cuda_fp32 = ["exp", "log", "log1p", "pow", "rsqrt", "reciprocal", "softplus", "layer_norm", "group_norm",
                 "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "kl_div", "binary_cross_entropy_with_logits",
                 "cosine_similarity", "cdist", "logsumexp"]
    cuda_dtype = ["sum", "prod", "softmax", "log_softmax", "cumsum", "cumprod", "linalg_vector_norm"]
    cuda_promote = ["addcmul", "addcdiv", "atan2", "bilinear", "cross", "dot", "index_put", "scatter_add"]
    cpu_low = ["matmul", "mm", "bmm", "linear", "addmm", "baddbmm", "addbmm", "conv1d", "conv2d", "prelu"]
    cpu_fp32 = ["mse_loss", "nll_loss", "l1_loss", "kl_div", "binary_cross_entropy", "cdist", "prod"]
    cpu_none = ["softmax", "log_softmax", "layer_norm", "sum", "exp", "pow", "relu", "mean", "cumsum"]
    policy = loom._C._autocast_policy
    for name in cuda_low:
        assert policy(name)[1] == "lower_precision_fp", name
    for name in cuda_fp32:
        assert policy(name)[1] == "fp32", name
    for name in cuda_dtype:
        assert policy(name)[1] == "fp32_set_opt_dtype", name
    for name in cuda_promote:
        assert policy(name)[1] == "promote", name
    assert policy("binary_cross_entropy")[1] == "banned"
    for name in cpu_low:
        assert policy(name)[0] == "lower_precision_fp", name
    for name in cpu_fp32:
        assert policy(name)[0] in ("fp32", "fp32_set_opt_dtype"), name
    for name in cpu_none:
        assert policy(name)[0] == "none", name
    assert policy("stack")[0] == "promote" and policy("relu") == ("none", "none")


@pytest.mark.parametrize("device", DEVICES)
def test_nesting_and_disabled_inside(device):
    x, w = loom.randn(4, 8, device=device), loom.randn(8, 8, device=device)
    assert not loom.is_autocast_cpu_enabled()
    with loom.autocast("cpu"):
        assert loom.is_autocast_cpu_enabled() and loom.get_autocast_cpu_dtype() is loom.bfloat16
        assert (x @ w).dtype is loom.bfloat16
        with loom.autocast("cpu", enabled=False):
            assert not loom.is_autocast_cpu_enabled()
            assert (x @ w).dtype is loom.float32
            with loom.cpu.amp.autocast():
                assert (x @ w).dtype is loom.bfloat16
            assert (x @ w).dtype is loom.float32
        assert (x @ w).dtype is loom.bfloat16
        with loom.amp.autocast("cpu", dtype=loom.float16):
            assert (x @ w).dtype is loom.float16
        assert (x @ w).dtype is loom.bfloat16
    assert (x @ w).dtype is loom.float32
    assert not loom.is_autocast_cpu_enabled()


def test_decorator_and_exceptions_restore_state():
    @loom.autocast("cpu")
    def product(a, b):
        return loom.mm(a, b)

    x = loom.randn(3, 3)
    assert product(x, x).dtype is loom.bfloat16
    assert product.__name__ == "product"
    assert loom.mm(x, x).dtype is loom.float32
    with pytest.raises(ValueError):
        with loom.autocast("cpu"):
            raise ValueError("inside")
    assert not loom.is_autocast_cpu_enabled()
    assert loom._C._autocast_increment_nesting() == 1 and loom._C._autocast_decrement_nesting() == 0


def test_device_types():
    with pytest.raises(RuntimeError, match="must be 'cuda' or 'cpu'"):
        loom.autocast("tpu")
    if not loom.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available"):
            region = loom.cuda.amp.autocast()
        with region:
            assert not loom.is_autocast_enabled("cuda")
            assert (loom.ones(2, 2) @ loom.ones(2, 2)).dtype is loom.float32
    with pytest.warns(UserWarning, match="not supported"):
        region = loom.autocast("cpu", dtype=loom.float64)
    with region:
        assert not loom.is_autocast_cpu_enabled()


def test_cuda_region_leaves_cpu_tensors_alone():
    """A region of one device type casts only that device's tensors, as PyTorch's keys do."""
    loom.set_autocast_enabled("cuda", True)
    try:
        assert loom.is_autocast_enabled("cuda")
        x = loom.randn(3, 3)
        assert (x @ x).dtype is loom.float32
        assert (x.to("lazy") @ x.to("lazy")).dtype is loom.float32 or loom.cuda.is_available()
    finally:
        loom.set_autocast_enabled("cuda", False)


@pytest.mark.parametrize("device", DEVICES)
def test_weight_casts_are_cached_per_region(device):
    """A weight used twice in a region is cast once (its gradient flows back through one cast);
    the cache empties when the outermost region exits, and a write to the weight invalidates it."""
    lin = loom.nn.Linear(8, 8).to(device)
    x = loom.randn(4, 8, device=device)
    with loom.autocast("cpu" if device == "cpu" else "lazy"):
        a = lin(x)
        b = lin(x)
        assert loom._C._autocast_cache_size() == 2  # weight and bias
        assert a.dtype is loom.bfloat16
        with loom.autocast("cpu" if device == "cpu" else "lazy"):
            lin(x)
        assert loom._C._autocast_cache_size() == 2  # an inner region's exit keeps it
        with loom.no_grad():
            lin.weight.mul_(2.0)
        c = lin(x)
        assert loom._C._autocast_cache_size() == 2
    assert loom._C._autocast_cache_size() == 0
    np.testing.assert_allclose(to_numpy(c - lin.bias.to(loom.bfloat16)), 2 * to_numpy(a - lin.bias.to(loom.bfloat16)),
                               rtol=2e-2, atol=2e-2)
    (a.float().sum() + b.float().sum()).backward()
    assert lin.weight.grad.dtype is loom.float32
    with loom.autocast("cpu", cache_enabled=False):
        lin(x.to("cpu") if device == "cpu" else x)
        assert loom._C._autocast_cache_size() == 0


@pytest.mark.parametrize("device", DEVICES)
def test_training_step_gradients_match_torch(device):
    """A small MLP's loss and gradients under autocast, against torch.autocast."""
    torch.manual_seed(0)
    # (no LayerNorm: torch 1.13's CPU layer_norm refuses a bfloat16 input with a float32 weight)
    tmodel = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 16), torch.nn.Tanh(),
                                 torch.nn.Linear(16, 4))
    lmodel = loom.nn.Sequential(loom.nn.Linear(8, 16), loom.nn.GELU(), loom.nn.Linear(16, 16), loom.nn.Tanh(),
                                loom.nn.Linear(16, 4))
    lmodel.load_state_dict({k: loom.tensor(v.detach().numpy()) for k, v in tmodel.state_dict().items()})
    lmodel = lmodel.to(device)
    x = tensor(32, 8)
    y = torch.tensor(rng.integers(0, 4, 32))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tloss = TF.cross_entropy(tmodel(x), y)
    tloss.backward()
    with loom.autocast("cpu" if device == "cpu" else "lazy"):
        out = lmodel(loom.tensor(x.numpy(), device=device))
        lloss = F.cross_entropy(out, loom.tensor(y.numpy(), device=device))
    assert out.dtype is loom.bfloat16 and lloss.dtype is loom.float32
    lloss.backward()
    np.testing.assert_allclose(lloss.item(), tloss.item(), rtol=2e-2)
    for (name, tp), lp in zip(tmodel.named_parameters(), lmodel.parameters()):
        assert lp.grad.dtype is loom.float32, name
        np.testing.assert_allclose(to_numpy(lp.grad), tp.grad.numpy(), rtol=5e-2, atol=2e-2, err_msg=name)


def test_lazy_casts_fuse_into_neighbours():
    """In lazy mode a cast is a node like any other: the float32 cast a loss makes of a bfloat16
    product fuses into the loss's kernel, and the input casts of a product share kernels with
    the work around them; a region adds no kernel of its own beyond one per product operand."""
    x = loom.randn(64, 32, device="lazy")
    w = loom.randn(32, 16, device="lazy")
    t = loom.randn(64, 16, device="lazy")
    loom.sync()

    def kernels(autocast):
        loom.metrics_reset()
        with loom.autocast("lazy", enabled=autocast):
            loss = F.mse_loss((x * 2.0) @ w, t)
        loss.item()
        return loom.metrics()

    plain, mixed = kernels(False), kernels(True)
    assert plain["kernel_launches"] >= 1
    # x * 2.0 and its cast are one kernel, w's cast one more: at most one extra kernel
    assert mixed["kernel_launches"] <= plain["kernel_launches"] + 1, (plain, mixed)


@pytest.mark.parametrize("device", DEVICES)
def test_custom_fwd_casts_inputs(device):
    seen = {}

    @loom.amp.custom_fwd(device_type="cpu", cast_inputs=loom.float32)
    def forward(ctx, a, b):
        seen["dtype"] = a.dtype
        seen["enabled"] = loom.is_autocast_cpu_enabled()
        return a @ b

    class Ctx:
        pass

    a = loom.randn(2, 2, device=device).to(loom.bfloat16)
    with loom.autocast("cpu" if device == "cpu" else "lazy"):
        out = forward(Ctx(), a, a)
    assert seen == {"dtype": loom.float32, "enabled": False} and out.dtype is loom.float32


def test_wrapped_composites_copy_and_pickle_as_functions():
    """The functional composites under the table keep what functions do: names, docs, signature,
    pickling and deepcopy by reference, binding as methods."""
    import copy
    import inspect
    import pickle

    assert F.mse_loss.__name__ == "mse_loss" and F.mse_loss.__module__ == "loom.nn.functional._loss"  # its family file
    assert "input" in str(inspect.signature(F.mse_loss))
    assert pickle.loads(pickle.dumps(F.mse_loss)) is F.mse_loss
    assert copy.deepcopy(F.layer_norm) is F.layer_norm

    class Holder:
        loss = F.mse_loss

    x = loom.ones(3)
    assert Holder.loss(x, x + 1).item() == 1.0
    holder = Holder()
    assert holder.loss.__self__ is holder and holder.loss.__func__ is F.mse_loss  # bound, as a function would be
