"""Activations of loom.nn.functional and loom.nn agree with PyTorch's: values and dtypes on every
kind of input (special values, layouts, integer inputs where PyTorch takes them), parameters,
`inplace=`, the in-place functions (torch.celu_, F.elu_, ...), errors, module reprs and state,
gradients (against PyTorch, with PyTorch's choices at the kinks, and finite differences), rrelu's
random slopes in training, and fusion (a chain of activations is one kernel)."""

import numpy as np
import pytest

import loom
import test_autograd_ops as grads
from _ops_helpers import (FLOAT_DTYPES, INT_DTYPES, LAYOUTS, SubChecks, assert_close, check, device, make,  # noqa: F401
                          random_array, torch)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

F = torch.nn.functional

SPECIAL = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.5, -2.5, 0.5, -0.5, 3.0, -3.0, 6.0, 1e-30, 1e30, -40.0,
           40.0, 0.3]

# name -> the keyword arguments to try (besides none)
ACTIVATIONS = {
    "relu": [], "relu6": [], "elu": [{"alpha": 0.5}, {"alpha": 2.0}], "celu": [{"alpha": 0.7}, {"alpha": -1.5}],
    "selu": [], "leaky_relu": [{"negative_slope": 0.2}, {"negative_slope": -0.5}],
    "hardtanh": [{"min_val": -0.5, "max_val": 2.0}, {"min_val": 1.0, "max_val": 0.5}], "hardsigmoid": [],
    "hardswish": [], "logsigmoid": [], "mish": [], "softsign": [], "tanhshrink": [],
    "hardshrink": [{"lambd": 1.0}, {"lambd": 0.0}], "softshrink": [{"lambd": 1.0}, {"lambd": 0.0}],
    "threshold": [{"threshold": 0.3, "value": -2.0}, {"threshold": -1.0, "value": 5.0}], "silu": [], "gelu":
    [{"approximate": "tanh"}], "rrelu": [{"lower": 0.1, "upper": 0.3}], "softplus": [{"beta": 2, "threshold": 3}],
    "sigmoid": [], "tanh": [],
}
REQUIRED = {"threshold": {"threshold": 0.3, "value": -2.0}}


def _call(name, kw):
    def call(m, x):
        return getattr(m.nn.functional, name)(x, **{**REQUIRED.get(name, {}), **kw})
    return call


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_values(device, name, dtype):
    sub = SubChecks()
    for kw in [{}] + ACTIVATIONS[name]:
        for layout in LAYOUTS:
            for shape in [(3, 4), (2, 3, 5), (0, 3), ()]:
                with sub(f"{kw} {layout} {shape}"):
                    check(device, _call(name, kw), random_array(shape, dtype, seed=len(shape)) * 4, layouts=[layout])
        with sub(f"{kw} special"):
            check(device, _call(name, kw), np.array(SPECIAL, dtype=dtype))
    sub.finish()


@pytest.mark.parametrize("dtype", INT_DTYPES + ["bool"])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_integer_and_bool_inputs(device, name, dtype):
    """PyTorch takes integers in relu, relu6, hardtanh and threshold (keeping their dtype),
    softsign and tanhshrink (float results), and raises elsewhere: loom does the same."""
    sub = SubChecks()
    for kw in [{}] + ACTIVATIONS[name]:
        with sub(str(kw)):
            check(device, _call(name, kw), random_array((3, 4), dtype, seed=3))
    sub.finish()


@pytest.mark.parametrize("name", [n for n in ACTIVATIONS if n not in ("logsigmoid", "softsign", "tanhshrink",
                                                                       "hardshrink", "softshrink", "gelu", "softplus",
                                                                       "sigmoid", "tanh")])
def test_inplace(device, name):
    """inplace=True writes into the input and returns it (rrelu in evaluation)."""
    values = random_array((3, 4), "float64", seed=5) * 4
    for kw in [{}] + ACTIVATIONS[name]:
        x, _ = make(values, device)
        ref = torch.from_numpy(values.copy())
        out = getattr(loom.nn.functional, name)(x, **{**REQUIRED.get(name, {}), **kw}, inplace=True)
        tout = getattr(F, name)(ref, **{**REQUIRED.get(name, {}), **kw}, inplace=True)
        assert out is x and tout is ref
        assert_close(x, ref)


@pytest.mark.parametrize("name,args", [("elu_", ()), ("leaky_relu_", (0.3,)), ("hardtanh_", (-0.5, 0.5)),
                                       ("relu_", ()), ("threshold_", (0.1, 9.0)), ("celu_", (0.5,)), ("selu_", ()),
                                       ("rrelu_", (0.1, 0.2))])
def test_inplace_functions(device, name, args):
    """F.elu_, torch.celu_, torch.threshold_, ...: the in-place function forms."""
    values = random_array((3, 4), "float32", seed=6) * 3
    for lib_l, lib_t in [(loom.nn.functional, F), (loom, torch)]:
        if not hasattr(lib_t, name):
            continue
        x, _ = make(values, device)
        ref = torch.from_numpy(values.copy())
        assert getattr(lib_l, name)(x, *args) is x
        getattr(lib_t, name)(ref, *args)
        assert_close(x, ref)


def test_function_and_method_forms(device):
    values = random_array((2, 6), "float64", seed=2) * 3
    w = np.array([0.25, -0.5, 1.5, 0.0, 2.0, 0.1])[:1]
    check(device, lambda m, x: m.celu(x, 0.5), values)
    check(device, lambda m, x: m.selu(x), values)
    check(device, lambda m, x: m.threshold(x, 0.5, -1.0), values)
    check(device, lambda m, x: m.hardshrink(x, 0.7), values)
    check(device, lambda m, x: x.hardshrink(0.7), values)
    check(device, lambda m, x: m.rrelu(x), values)
    check(device, lambda m, x, ww: m.prelu(x, ww), values, w)
    check(device, lambda m, x, ww: x.prelu(ww), values, w)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "int8"])
def test_integer_threshold_hardtanh_relu6(device, dtype):
    """Integers keep their dtype: the numbers are converted to it (0.5 is 0; -1 is 255 in uint8)."""
    values = random_array((4, 5), dtype, seed=1, low=0 if dtype == "uint8" else -10, high=10)
    for call in [lambda m, x: m.nn.functional.threshold(x, 0.5, 2.5), lambda m, x: m.nn.functional.threshold(x, -1, 7),
                 lambda m, x: m.nn.functional.relu6(x), lambda m, x: m.nn.functional.hardtanh(x, -2.5, 4.5),
                 lambda m, x: m.nn.functional.hardtanh(x, 0, 4)]:
        check(device, call, values)


@pytest.mark.parametrize("shape,weight", [((2, 3), (3,)), ((2, 3, 4), (3,)), ((2, 3, 4, 5), (1,)), ((4,), (1,)),
                                          ((2, 3), ()), ((2, 3), (2,)), ((3,), (3,)), ((), (1,)), ((2, 3), (1, 3))],
                         ids=str)
def test_prelu(device, shape, weight):
    x = random_array(shape, "float64", seed=1) * 2
    w = random_array(weight, "float64", seed=2)
    check(device, lambda m, a, b: m.nn.functional.prelu(a, b), x, w)


def test_prelu_dtypes_must_match(device):
    check(device, lambda m, a, b: m.nn.functional.prelu(a, b), random_array((2, 3), "float64", seed=1),
          random_array((3,), "float32", seed=2))
    check(device, lambda m, a, b: m.nn.functional.prelu(a, b), random_array((2, 3), "int64", seed=1),
          random_array((3,), "int64", seed=2))


@pytest.mark.parametrize("dim", [-1, 0, 1, 2, -3, 3])
def test_glu(device, dim):
    check(device, lambda m, x: m.nn.functional.glu(x, dim), random_array((4, 6, 2), "float64", seed=1))
    check(device, lambda m, x: m.nn.functional.glu(x), random_array((3,), "float64", seed=1))
    check(device, lambda m, x: m.nn.functional.glu(x), np.array(1.0))


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 3, 4, 2)], ids=str)
def test_softmin_softmax_default_dims(device, dim, shape):
    """dim=None picks PyTorch's (deprecated) default: 0 for 0-, 1- and 3-d inputs, else 1."""
    x = random_array(shape, "float64", seed=1)
    if dim is not None and dim >= len(shape):
        return
    for name in ["softmin", "softmax", "log_softmax"]:
        check(device, lambda m, t: getattr(m.nn.functional, name)(t, dim), x)
    check(device, lambda m, t: m.nn.functional.softmin(t, dim, dtype=m.float32), x)


def test_errors(device):
    values = np.array([-1.0, 2.0])
    for call in [lambda m, x: m.nn.functional.celu(x, alpha=0.0), lambda m, x: m.nn.functional.softshrink(x, -0.5),
                 lambda m, x: m.nn.functional.rrelu(x, 0.5, 0.1), lambda m, x: m.nn.functional.glu(x[:1]),
                 lambda m, x: m.nn.functional.prelu(x.reshape(1, 2), m.ones(3, dtype=x.dtype)),
                 lambda m, x: m.nn.functional.prelu(x.reshape(1, 2), m.ones(1, 2, dtype=x.dtype)),
                 lambda m, x: m.nn.functional.hardtanh(x.to(m.uint8), -1.0, 1.0),
                 lambda m, x: m.nn.functional.elu(x.long()), lambda m, x: m.nn.functional.leaky_relu(x > 0)]:
        check(device, call, values)


# ---- rrelu in training ----

@pytest.mark.parametrize("lower,upper", [(0.125, 1 / 3), (0.1, 0.1), (0.0, 1.0)])
def test_rrelu_training_slopes(device, lower, upper):
    """Each negative element is scaled by its own slope in [lower, upper]; positive elements pass
    unchanged; the gradient of a negative element is its slope."""
    x = loom.tensor(np.concatenate([-np.linspace(0.5, 3, 2000), np.linspace(0, 3, 100)]), device=device)
    x.requires_grad_()
    out = loom.nn.functional.rrelu(x, lower, upper, training=True)
    out.sum().backward()
    v, o, g = x.detach().numpy(), out.detach().numpy(), x.grad.numpy()
    negative = v < 0  # and 0 itself gets a slope too, as in PyTorch
    slopes = o[negative] / v[negative]
    assert lower <= g[v == 0][0] <= upper
    assert np.all(slopes >= lower - 1e-12) and np.all(slopes <= upper + 1e-12)
    if upper > lower:
        assert len(np.unique(np.round(slopes, 9))) > 1000  # drawn per element
        assert abs(slopes.mean() - (lower + upper) / 2) < 0.05 * (upper - lower) + 1e-9
    np.testing.assert_array_equal(o[~negative], v[~negative])
    np.testing.assert_allclose(g[negative], slopes, rtol=1e-12)
    np.testing.assert_array_equal(g[v > 0], 1.0)


def test_rrelu_module_training_and_eval(device):
    m = loom.nn.RReLU(0.1, 0.3)
    x = loom.tensor(-np.ones(500), device=device)
    train = m(x).numpy()
    assert len(np.unique(train)) > 100
    m.eval()
    np.testing.assert_allclose(m(x).numpy(), -0.2)


# ---- modules ----

MODULES = [
    ("ELU", (), {}), ("ELU", (0.5, True), {}), ("CELU", (), {}), ("CELU", (2.0,), {"inplace": True}), ("SELU", (), {}),
    ("SELU", (True,), {}), ("LeakyReLU", (), {}), ("LeakyReLU", (0.2, True), {}), ("ReLU6", (), {}),
    ("ReLU6", (True,), {}), ("Hardtanh", (), {}), ("Hardtanh", (-2, 2, True), {}), ("Hardsigmoid", (), {}),
    ("Hardsigmoid", (True,), {}), ("Hardswish", (), {}), ("Hardswish", (True,), {}), ("LogSigmoid", (), {}),
    ("Mish", (), {}), ("Mish", (True,), {}), ("Softsign", (), {}), ("Softmin", (1,), {}), ("Softmin", (), {}),
    ("GLU", (), {}), ("GLU", (0,), {}), ("Tanhshrink", (), {}), ("Hardshrink", (), {}), ("Softshrink", (0.3,), {}),
    ("Threshold", (0.1, 20), {}), ("Threshold", (0.1, 20, True), {}), ("PReLU", (), {}), ("PReLU", (4, 0.1), {}),
    ("RReLU", (), {}), ("RReLU", (0.1, 0.3, True), {}), ("Softplus", (), {}), ("Softplus", (2, 10), {}),
    ("Softmax2d", (), {}), ("SiLU", (True,), {}), ("GELU", ("tanh",), {}), ("GELU", (), {}), ("ReLU", (True,), {}),
    ("Tanh", (), {}), ("Sigmoid", (), {}), ("Softmax", (1,), {}), ("LogSoftmax", (-1,), {}),
    ("Hardtanh", (), {"min_value": -3.0}),
]


@pytest.mark.parametrize("name,args,kwargs", MODULES, ids=[f"{n}{a}{k}" for n, a, k in MODULES])
def test_module(device, name, args, kwargs):
    """The module's repr, attributes and state dict are PyTorch's; its output (in evaluation,
    so rrelu is deterministic) too, also in place, and it trains (PReLU's weight gets a gradient)."""
    mine = getattr(loom.nn, name)(*args, **kwargs).eval()
    theirs = getattr(torch.nn, name)(*args, **kwargs).eval()
    assert repr(mine) == repr(theirs)
    assert sorted(mine.state_dict()) == sorted(theirs.state_dict())
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(mine.state_dict()[k].numpy(), v.numpy())
    values = random_array((2, 4, 3, 2), "float64", seed=3) * 3
    x, _ = make(values, device)
    mine.to(device)
    if name == "PReLU":
        mine.double()
    out = mine(x)
    ref = theirs.double()(torch.from_numpy(values.copy()))
    assert_close(out, ref)
    if getattr(theirs, "inplace", False):
        assert out is x
    if name == "PReLU":
        mine(loom.tensor(values, device=device)).sum().backward()
        theirs(torch.from_numpy(values.copy())).sum().backward()
        np.testing.assert_allclose(mine.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-12)


def test_modules_are_exported_where_pytorch_has_them():
    import loom.nn.modules.activation as act
    for name in ["ELU", "CELU", "SELU", "GLU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU",
                 "LogSigmoid", "Mish", "PReLU", "ReLU6", "RReLU", "Softmin", "Softplus", "Softshrink", "Softsign",
                 "Tanhshrink", "Threshold", "Softmax2d"]:
        assert getattr(loom.nn, name) is getattr(act, name)
        assert name in loom.nn.modules.__all__
    for name in ["elu", "elu_", "celu", "celu_", "selu", "selu_", "leaky_relu", "leaky_relu_", "relu6", "hardtanh",
                 "hardtanh_", "hardsigmoid", "hardswish", "logsigmoid", "mish", "softsign", "softmin", "glu",
                 "tanhshrink", "hardshrink", "softshrink", "threshold", "threshold_", "prelu", "rrelu", "rrelu_",
                 "relu_"]:
        assert callable(getattr(loom.nn.functional, name)), name
    for name in ["celu", "celu_", "selu", "selu_", "threshold", "threshold_", "rrelu", "rrelu_", "prelu",
                 "hardshrink"]:
        assert callable(getattr(loom, name)), name


# ---- gradients ----

N, U, C, away = grads.N, grads.U, grads.C, grads.away
CASES = []


def case(*args, **kwargs):
    CASES.append(grads.Case(*args, **kwargs))


def f(name, **kw):
    return lambda m, x: getattr(m.nn.functional, name)(x, **kw)


case("elu", f("elu"), [away(N(3, 4, scale=2))], expand=True)
case("elu_alpha", f("elu", alpha=0.4), [away(N(3, 4, scale=2))])
case("celu", f("celu", alpha=0.7), [away(N(3, 4, scale=2))])
case("selu", f("selu"), [away(N(3, 4, scale=2))])
case("leaky_relu", f("leaky_relu", negative_slope=0.2), [away(N(3, 4))], expand=True)
case("relu6", f("relu6"), [away(N(3, 4, scale=4), points=(0, 6))])
case("hardtanh", f("hardtanh", min_val=-0.5, max_val=1.5), [away(N(3, 4, scale=2), points=(-0.5, 1.5))])
case("hardsigmoid", f("hardsigmoid"), [away(N(3, 4, scale=4), points=(-3, 3))])
case("hardswish", f("hardswish"), [away(N(3, 4, scale=4), points=(-3, 3))])
case("logsigmoid", f("logsigmoid"), [N(3, 4, scale=5)], expand=True)
case("mish", f("mish"), [N(3, 4, scale=3)])
case("softsign", f("softsign"), [N(3, 4, scale=3)])
case("tanhshrink", f("tanhshrink"), [N(3, 4)])
case("hardshrink", f("hardshrink", lambd=0.4), [away(N(3, 4), points=(-0.4, 0.4))])
case("softshrink", f("softshrink", lambd=0.4), [away(N(3, 4), points=(-0.4, 0.4))])
case("threshold", f("threshold", threshold=0.2, value=-1.0), [away(N(3, 4), points=(0.2,))])
case("rrelu_eval", f("rrelu"), [away(N(3, 4))])
case("glu", lambda m, x: m.nn.functional.glu(x, 1), [N(3, 4)])
case("softmin", lambda m, x: m.nn.functional.softmin(x, 1), [N(3, 4)])
case("prelu", lambda m, x, w: m.nn.functional.prelu(x, w), [away(N(2, 3, 4)), N(3)])
case("prelu_single", lambda m, x, w: m.nn.functional.prelu(x, w), [away(N(2, 3)), N(1)])
# PyTorch's gradients at the kinks: hardtanh none at its bounds, leaky_relu the slope's at 0,
# threshold none at the threshold, hardsigmoid none at +-3, hardswish's middle branch at 3 and
# none at -3, the shrinks none at +-lambd, elu the exponential's at 0
KINKS = np.array([[-3.0, 3.0, 0.0, -0.0, 6.0, -0.5], [1.5, 0.4, -0.4, 0.2, -1.0, 1.0]])
for _name, _kw in [("hardtanh", {"min_val": -0.5, "max_val": 1.5}), ("hardtanh", {}), ("relu6", {}),
                   ("leaky_relu", {"negative_slope": 0.3}), ("threshold", {"threshold": 0.2, "value": 5.0}),
                   ("hardsigmoid", {}), ("hardswish", {}), ("hardshrink", {"lambd": 0.4}),
                   ("softshrink", {"lambd": 0.4}), ("elu", {"alpha": 0.5}), ("celu", {}), ("selu", {}),
                   ("relu", {})]:
    case(f"{_name}_boundary_{len(CASES)}", f(_name, **_kw), [KINKS], gradcheck=False,
         layouts=("contiguous", "transposed"))


@pytest.mark.parametrize("c", grads._params(CASES))
def test_grad_matches_torch(device, c):
    grads.check_case(c, device)


@pytest.mark.parametrize("c", grads._params([c for c in CASES if c.gradcheck]))
def test_gradcheck(device, c):
    grads.gradcheck_case(c, device)


def test_grad_fn_names():
    x = loom.tensor([-1.0, 2.0], requires_grad=True)
    tx = torch.tensor([-1.0, 2.0], requires_grad=True)
    for name in ["elu", "celu", "selu", "leaky_relu", "relu6", "hardtanh", "hardsigmoid", "hardswish", "logsigmoid",
                 "mish", "hardshrink", "softshrink", "silu", "gelu"]:
        assert getattr(loom.nn.functional, name)(x).grad_fn.name() == getattr(F, name)(tx).grad_fn.name(), name
    assert loom.nn.functional.threshold(x, 0.0, 1.0).grad_fn.name() == F.threshold(tx, 0.0, 1.0).grad_fn.name()


# ---- fusion ----

def test_a_chain_of_activations_is_one_kernel_forward_and_backward():
    """Each elementwise activation is one expression: forward and backward of a chain fuse."""
    LF = loom.nn.functional
    x = loom.tensor(np.random.default_rng(0).standard_normal(512).astype(np.float32), device="lazy")

    def step(t):
        y = LF.hardswish(LF.mish(LF.elu(LF.leaky_relu(t, 0.1), 0.5)))
        return LF.softshrink(LF.hardtanh(LF.logsigmoid(y) + LF.selu(y), -2, 2), 0.1) * LF.hardsigmoid(t)

    step(x).tolist()
    loom.metrics_reset()
    out = step(x)
    loom.sync()
    assert loom.metrics()["kernel_launches"] == 1
    np.testing.assert_allclose(out.numpy(), step(x.cpu()).numpy(), rtol=1e-5, atol=1e-6)

    w = x.detach().requires_grad_()
    step(w).sum().backward()
    w.grad.tolist()
    w.grad = None
    loom.metrics_reset()
    step(w).sum().backward()
    loom.sync()
    assert loom.metrics()["kernel_launches"] <= 2  # the gradient's kernel (and the sum's)
    cpu = x.cpu().detach().requires_grad_()
    step(cpu).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), cpu.grad.numpy(), rtol=1e-5, atol=1e-6)
