"""Autograd semantics, as PyTorch's: requires_grad, .grad accumulation, backward() arguments and
errors, retain_graph, version counters and in-place ops, grad modes, detach / .data, retain_grad,
grad_fn objects, loom.autograd.grad (allow_unused, create_graph) and reprs.

Every test runs eagerly and lazily (the `device` fixture); where the expected behaviour is
PyTorch's, the test runs the same program through torch and compares.
"""

import threading

import numpy as np
import pytest

import loom
from _ops_helpers import device, torch  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

VALUES = [[0.5, -1.25, 2.0], [1.5, 0.75, -0.5]]


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    """No test may leave grad mode off for the next one."""
    yield
    enabled = loom.is_grad_enabled()
    loom.set_grad_enabled(True)
    torch.set_grad_enabled(True)
    assert enabled, "the test left grad mode disabled"


def leaf(device, values=VALUES, dtype=None, requires_grad=True):
    t = loom.tensor(np.asarray(values, dtype=np.float64), device=device)
    if dtype is not None:
        t = t.to(dtype)
    return t.requires_grad_(requires_grad)


def tleaf(values=VALUES, requires_grad=True):
    return torch.tensor(np.asarray(values, dtype=np.float64)).requires_grad_(requires_grad)


def lib_leaf(lib, device, values=VALUES):
    return leaf(device, values) if lib is loom else tleaf(values)


def np_(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    if isinstance(t, loom.Tensor):
        return np.asarray(t.numpy())
    return np.asarray(t)


def assert_close(a, b, rtol=1e-12, atol=1e-14):
    np.testing.assert_allclose(np_(a), np_(b), rtol=rtol, atol=atol)


# ---- requires_grad ----

def test_tensors_do_not_require_grad_by_default(device):
    t = loom.ones(2, 3, device=device)
    assert t.requires_grad is False
    assert t.is_leaf and t.grad is None and t.grad_fn is None


def test_requires_grad_method_and_attribute(device):
    t = loom.zeros(2, 3, device=device)
    assert t.requires_grad_() is t
    assert t.requires_grad and t.is_leaf and t.grad_fn is None
    t.requires_grad_(False)
    assert not t.requires_grad
    t.requires_grad = True
    assert t.requires_grad
    t.requires_grad = False
    assert not t.requires_grad
    u = loom.zeros(2, device=device).requires_grad_(requires_grad=True)
    assert u.requires_grad


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_every_float_dtype_can_require_grad(device, dtype):
    t = loom.ones(3, dtype=getattr(loom, dtype), device=device).requires_grad_()
    (t * 2).sum().backward()
    assert t.grad.dtype is t.dtype
    np.testing.assert_array_equal(np.asarray(t.grad.float().numpy()), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64"])
def test_integer_and_bool_tensors_cannot_require_grad(device, dtype):
    t = loom.zeros(3, dtype=getattr(loom, dtype), device=device)
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require gradients"):
        t.requires_grad_()
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        t.requires_grad = True
    assert not t.requires_grad
    t.requires_grad_(False)  # turning it off is always allowed
    tt = torch.zeros(3, dtype=getattr(torch, dtype))
    with pytest.raises(RuntimeError):
        tt.requires_grad_()


def test_creation_functions_take_requires_grad(device):
    made = [loom.tensor([1.0, 2.0], requires_grad=True, device=device),
            loom.zeros(2, requires_grad=True, device=device),
            loom.ones(2, requires_grad=True, device=device),
            loom.empty(2, requires_grad=True, device=device),
            loom.full((2,), 3.0, requires_grad=True, device=device),
            loom.rand(2, requires_grad=True, device=device),
            loom.randn(2, requires_grad=True, device=device),
            loom.arange(3.0, requires_grad=True, device=device),
            loom.linspace(0, 1, 3, requires_grad=True, device=device),
            loom.eye(2, requires_grad=True, device=device),
            loom.zeros_like(loom.ones(2), requires_grad=True),
            loom.ones_like(loom.ones(2), requires_grad=True),
            loom.randn_like(loom.ones(2), requires_grad=True)]
    assert all(t.requires_grad and t.is_leaf for t in made)


@pytest.mark.parametrize("make", [
    lambda m, d: m.tensor([1, 2], requires_grad=True, device=d),
    lambda m, d: m.zeros(2, dtype=m.int64, requires_grad=True, device=d),
    lambda m, d: m.arange(3, requires_grad=True, device=d),
    lambda m, d: m.full((2,), 3, requires_grad=True, device=d),
    lambda m, d: m.randint(3, (2,), requires_grad=True, device=d),
    lambda m, d: m.ones_like(m.ones(2, dtype=m.int32, device=d), requires_grad=True),
])
def test_creation_functions_refuse_requires_grad_for_integer_dtypes(device, make):
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype can require gradients"):
        make(torch, "cpu")
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype can require gradients"):
        make(loom, device)


def test_creation_functions_requires_grad_false_or_none(device):
    for flag in (False, None):
        t = loom.zeros(2, requires_grad=flag, device=device)
        assert not t.requires_grad
    assert not loom.arange(3, requires_grad=False, device=device).requires_grad  # integers may say False
    with pytest.raises(TypeError):
        loom.ones(2, requires_grad=1, device=device)
    # a leaf made with requires_grad=True collects gradients like any other
    w = loom.full((2,), 3.0, dtype=loom.float64, requires_grad=True, device=device)
    (w * w).sum().backward()
    assert_close(w.grad, [6.0, 6.0])


def test_requires_grad_false_on_a_non_leaf_raises(device):
    y = leaf(device) * 2
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        y.requires_grad = False
    assert y.requires_grad
    with pytest.raises(RuntimeError):
        (tleaf() * 2).requires_grad_(False)


def test_requires_grad_true_on_a_non_leaf_is_a_no_op(device):
    assert (tleaf() * 2).requires_grad_(True).requires_grad
    y = leaf(device) * 2
    assert y.requires_grad_(True) is y
    assert y.requires_grad and y.grad_fn.name() == "MulBackward0"
    # assigning the attribute is stricter: a non-leaf raises either way, as in PyTorch
    ty = tleaf() * 2
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        ty.requires_grad = True
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        y.requires_grad = True


def test_results_of_ops_on_inputs_that_require_grad(device):
    x = leaf(device)
    c = loom.ones(2, 3, dtype=loom.float64, device=device)
    for y in [x * c, c + x, x.exp(), x.sum(), x[0], x.T, loom.cat([c, x]), x.to(loom.float32)]:
        assert y.requires_grad and not y.is_leaf and y.grad_fn is not None
    for y in [c * 2, c.exp(), x.detach() * 2]:
        assert not y.requires_grad and y.is_leaf and y.grad_fn is None
    # integer and bool results never require grad (as PyTorch)
    for y, ty in [(x > 0, tleaf() > 0), (x.argmax(), tleaf().argmax()), (x.max(1).indices, tleaf().max(1).indices),
                  (x.isnan(), tleaf().isnan())]:
        assert not y.requires_grad and y.grad_fn is None and y.is_leaf
        assert not ty.requires_grad


def test_casting_to_an_integer_dtype_ends_the_graph(device):
    x = leaf(device)
    for y, ty in [(x.long(), tleaf().long()), (x.int(), tleaf().int()), (x.bool(), tleaf().bool()),
                  (x.to(loom.uint8), tleaf().to(torch.uint8))]:
        assert not ty.requires_grad and ty.grad_fn is None
        assert not y.requires_grad and y.grad_fn is None and y.is_leaf


def test_is_leaf(device):
    x = leaf(device)
    assert x.is_leaf
    assert loom.ones(2, device=device).is_leaf
    assert not (x * 2).is_leaf
    assert (x * 2).detach().is_leaf
    with loom.no_grad():
        assert (x * 2).is_leaf
    assert x.detach().is_leaf and x.data.is_leaf


# ---- .grad ----

def test_grad_is_none_until_backward_and_matches_the_leaf(device):
    x = leaf(device)
    assert x.grad is None
    (x * x).sum().backward()
    assert tuple(x.grad.shape) == (2, 3) and x.grad.dtype is loom.float64
    assert x.grad.is_lazy == (device == "lazy") and not x.grad.requires_grad
    assert_close(x.grad, 2 * np.asarray(VALUES))


def test_grad_accumulates_across_backward_calls(device):
    x = leaf(device)
    (x * 3).sum().backward()
    (x * x).sum().backward()
    assert_close(x.grad, 3 + 2 * np.asarray(VALUES))
    x.grad = None
    (x * 3).sum().backward()
    assert_close(x.grad, np.full((2, 3), 3.0))


def test_grad_accumulates_with_retain_graph(device):
    x = leaf(device)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward(retain_graph=True)
    y.backward()
    assert_close(x.grad, 6 * np.asarray(VALUES))


def test_grad_accumulation_keeps_the_grad_tensor(device):
    """Accumulating adds in place: .grad keeps its storage from one backward to the next (as
    PyTorch), so a replayed lazy step writes into the same memory."""
    x = leaf(device)
    (x * 2).sum().backward()
    g = x.grad
    ptr = g.data_ptr()
    (x * 3).sum().backward()
    assert x.grad.data_ptr() == ptr
    assert_close(x.grad, np.full((2, 3), 5.0))


def test_assigning_grad(device):
    x = leaf(device)
    x.grad = loom.ones(2, 3, dtype=loom.float64, device=device)
    (x * 3).sum().backward()
    assert_close(x.grad, np.full((2, 3), 4.0))
    with pytest.raises(RuntimeError, match="assigned grad has data of a different size"):
        x.grad = loom.ones(3, dtype=loom.float64, device=device)
    with pytest.raises(RuntimeError, match="assigned grad has data of a different type"):
        x.grad = loom.ones(2, 3, dtype=loom.float32, device=device)
    x.grad = None
    assert x.grad is None
    del x.grad
    assert x.grad is None


def test_non_leaf_grad_is_none_without_retain_grad(device):
    x = leaf(device)
    y = x * 2
    (y * y).sum().backward()
    assert y.grad is None


# ---- backward() ----

def test_backward_with_gradient_on_non_scalar(device):
    g = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]])
    for lib in (loom, torch):
        x = lib_leaf(lib, device)
        y = x * x
        y.backward(loom.tensor(g, device=device) if lib is loom else torch.tensor(g))
        if lib is loom:
            got = x.grad
        else:
            want = x.grad
    assert_close(got, want)


def test_backward_gradient_as_keyword_and_autograd_backward_lists(device):
    x, w = leaf(device), leaf(device, [[1.0, 2.0, 3.0]] * 2)
    a, b = x * w, (x - w).sum()
    loom.autograd.backward([a, b], grad_tensors=[loom.ones(2, 3, dtype=loom.float64, device=device), None])
    tx, tw = tleaf(), tleaf([[1.0, 2.0, 3.0]] * 2)
    torch.autograd.backward([tx * tw, (tx - tw).sum()], grad_tensors=[torch.ones(2, 3, dtype=torch.float64), None])
    assert_close(x.grad, tx.grad)
    assert_close(w.grad, tw.grad)
    y = leaf(device)
    (y * 2).backward(gradient=loom.full((2, 3), 0.5, dtype=loom.float64, device=device))
    assert_close(y.grad, np.ones((2, 3)))


def test_backward_on_non_scalar_without_gradient_raises(device):
    x = leaf(device)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        loom.autograd.grad(x * 2, x)
    # one element is enough (shape [1] or [1, 1]), as in PyTorch
    (x[:1, :1] * 2).backward()
    assert_close(x.grad, [[2.0, 0, 0], [0, 0, 0]])


def test_backward_gradient_of_the_wrong_shape_raises(device):
    x = leaf(device)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(loom.ones(3, dtype=loom.float64, device=device))
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (tleaf() * 2).backward(torch.ones(3, dtype=torch.float64))


def test_backward_of_a_tensor_that_does_not_require_grad_raises(device):
    t = loom.ones(3, device=device)
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does not have a grad_fn"):
        t.sum().backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        torch.ones(3).sum().backward()
    with loom.no_grad():
        y = (leaf(device) * 2).sum()
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        y.backward()


def test_grad_with_respect_to_a_tensor_that_does_not_require_grad_raises(device):
    x = leaf(device)
    c = loom.ones(2, 3, dtype=loom.float64, device=device)
    with pytest.raises(RuntimeError, match="One of the differentiated Tensors does not require grad"):
        loom.autograd.grad((x * c).sum(), c)
    with pytest.raises(RuntimeError, match="One of the differentiated Tensors does not require grad"):
        torch.autograd.grad((tleaf() * 2).sum(), torch.ones(3))


def test_backward_twice_without_retain_graph_raises(device):
    x = leaf(device)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()
    assert_close(x.grad, 2 * np.asarray(VALUES))  # the failed call added nothing
    z = (x.exp() * x).sum()
    loom.autograd.grad(z, x)
    with pytest.raises(RuntimeError, match="Specify retain_graph=True"):
        loom.autograd.grad(z, x)


def test_backward_twice_with_retain_graph_then_free(device):
    x = leaf(device)
    y = (x.sin() * x).sum()
    y.backward(retain_graph=True)
    first = np_(x.grad).copy()
    y.backward()
    assert_close(x.grad, 2 * first)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_second_backward_through_a_graph_without_saved_values(device):
    tx = tleaf()
    ty = (tx + 1).sum()
    ty.backward()
    ty.backward()
    x = leaf(device)
    y = (x + 1).sum()
    y.backward()
    y.backward()
    assert_close(x.grad, tx.grad)


def test_backward_after_reading_the_loss_in_lazy_mode(device):
    """loss.item() is a sync point in lazy mode; backward afterwards reads the stored values."""
    x = leaf(device)
    loss = (x.exp() * x).sum()
    value = loss.item()
    loss.backward()
    tx = tleaf()
    tl = (tx.exp() * tx).sum()
    tl.backward()
    assert value == pytest.approx(tl.item(), rel=1e-12)
    assert_close(x.grad, tx.grad)


def test_one_graph_several_roots_and_shared_subexpressions(device):
    for lib in (loom, torch):
        x = lib_leaf(lib, device)
        h = x.tanh()
        a = (h * x).sum()
        b = (h.exp()).mean()
        (a + b * 2).backward()
        if lib is loom:
            got = x.grad
        else:
            want = x.grad
    assert_close(got, want)


# ---- version counters and in-place ops ----

def test_modifying_a_saved_tensor_in_place_raises(device):
    for lib in (torch, loom):
        x = lib_leaf(lib, device)
        y = x * 2
        z = y.sin()  # saves y
        y.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward()


def test_modifying_a_saved_constant_in_place_raises(device):
    x = leaf(device)
    a = loom.tensor(np.ones((2, 3)), device=device)
    z = x * a  # saves a
    a.mul_(3)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_modifying_a_saved_tensor_through_setitem_or_a_view_raises(device):
    x = leaf(device)
    a = loom.tensor(np.ones((2, 3)), device=device)
    z = x * a
    a[0, 1] = 5.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    b = loom.tensor(np.ones((2, 3)), device=device)
    z = x * b
    b.view(-1)[2:].mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_modifying_through_detach_is_seen_by_the_version_check(device):
    """detach() shares the version counter (PyTorch's rule): the saved x of sin changed."""
    for lib in (torch, loom):
        x = lib_leaf(lib, device)
        y = x.sin()
        x.detach().mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_error_names_the_function_that_saved_the_tensor(device):
    x = leaf(device)
    y = x * 2
    z = y.sin()
    y.add_(1)
    with pytest.raises(RuntimeError, match="SinBackward0"):
        z.sum().backward()


def test_in_place_on_a_leaf_that_requires_grad_raises(device):
    x = leaf(device)
    for op in [lambda t: t.add_(1), lambda t: t.mul_(2), lambda t: t.exp_(), lambda t: t.relu_(),
               lambda t: t.copy_(loom.zeros(2, 3, dtype=loom.float64, device=device)), lambda t: t.clamp_(0, 1),
               lambda t: t.masked_fill_(t > 0, 0.0)]:
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place "
                                               "operation"):
            op(x)
    assert_close(x.detach(), VALUES)
    assert x.requires_grad and x.is_leaf and x.grad_fn is None


def test_fill_zero_and_setitem_on_a_leaf_that_requires_grad_raise(device):
    ops = [lambda t: t.fill_(1.0), lambda t: t.zero_(), lambda t: t.__setitem__((0, 1), 5.0)]
    for op in ops:
        with pytest.raises(RuntimeError):
            op(tleaf())
    x = leaf(device)
    for op in ops[:2]:
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            op(x)
    with pytest.raises(RuntimeError):  # PyTorch: "a view of a leaf Variable ..."
        ops[2](x)
    assert_close(x.detach(), VALUES)


def test_in_place_on_a_leaf_under_no_grad(device):
    x = leaf(device)
    with loom.no_grad():
        x.add_(1)
        x.mul_(2)
        x[0, 0] = 7.0
    assert x.requires_grad and x.is_leaf and x.grad_fn is None
    expected = (np.asarray(VALUES) + 1) * 2
    expected[0, 0] = 7.0
    assert_close(x.detach(), expected)
    (x * x).sum().backward()
    assert_close(x.grad, 2 * expected)


def test_version_counter_starts_at_zero(device):
    x = leaf(device)
    assert x._version == 0
    with loom.no_grad():
        x.add_(1)
    assert x._version > 0


def test_version_counter_counts_in_place_ops(device):
    x = leaf(device)
    with loom.no_grad():
        x.add_(1)
        x.mul_(2)
    assert x._version == 2
    y = leaf(device) * 2
    y.add_(1)
    assert y._version == 1


# Every user-visible in-place op moves the counter by exactly one, through the tensor or a view.
# new(data) makes a tensor of the same library, device and mode (integers stay integers).
VERSION_STEPS = {
    "add_": lambda t, new: t.add_(1), "iadd": lambda t, new: t.__iadd__(2), "imul": lambda t, new: t.__imul__(2),
    "exp_": lambda t, new: t.exp_(), "clamp_": lambda t, new: t.clamp_(0, 1), "fill_": lambda t, new: t.fill_(2),
    "zero_": lambda t, new: t.zero_(), "copy_": lambda t, new: t.copy_(new(np.ones((2, 3)))),
    "masked_fill_": lambda t, new: t.masked_fill_(t > 0, 3.0), "lerp_": lambda t, new: t.lerp_(t * 2, 0.5),
    "addcmul_": lambda t, new: t.addcmul_(t, t), "tril_": lambda t, new: t.tril_(),
    "setitem_number": lambda t, new: t.__setitem__((0, 1), 5.0), "setitem_row": lambda t, new: t.__setitem__(1, t[0]),
    "setitem_index": lambda t, new: t.__setitem__(new([0, 1]), 1.0),
    "setitem_mask": lambda t, new: t.__setitem__(t > 1, 0.5), "view_mul_": lambda t, new: t[:, 1:].mul_(2),
    "view_setitem": lambda t, new: t.view(-1).__setitem__(slice(2, 4), 7.0),
    "chained": lambda t, new: t.mul_(2).add_(1).sub_(3),
}


@pytest.mark.parametrize("grad", [False, True], ids=["plain", "non_leaf"])
def test_version_counter_steps_as_pytorch(device, grad):
    def program(lib, x, make):
        def new(data):
            return lib.tensor(data) if lib is torch else loom.tensor(data, device=device)
        t = x.detach().clone() if not grad else x * 1
        v = t[1]  # a view taken before: the same counter
        counts = []
        for step in VERSION_STEPS.values():
            step(t, new)
            counts.append((t._version, v._version))
        return counts
    _assert_same_in_torch(device, program)


# In-place ops on non-leaf tensors that require grad: the gradient follows the new value.
def _ones(m, device):
    return torch.ones(2, 3, dtype=torch.float64) if m is torch else loom.ones(2, 3, dtype=loom.float64, device=device)


INPLACE = {
    "add_": lambda m, y, d: y.add_(1.0),
    "add_tensor": lambda m, y, d: y.add_(_ones(m, d)),
    "mul_": lambda m, y, d: y.mul_(3.0),
    "mul_tensor": lambda m, y, d: y.mul_(_ones(m, d) * 3),
    "div_": lambda m, y, d: y.div_(2.0),
    "sub_alpha": lambda m, y, d: y.sub_(_ones(m, d), alpha=2.0),
    "exp_": lambda m, y, d: y.exp_(),
    "relu_": lambda m, y, d: y.relu_(),
    "sigmoid_": lambda m, y, d: y.sigmoid_(),
    "pow_": lambda m, y, d: y.pow_(2),
    "tril_": lambda m, y, d: y.tril_(),
    "masked_fill_": lambda m, y, d: y.masked_fill_(y > 1.0, 0.0),
    "nan_to_num_": lambda m, y, d: y.nan_to_num_(),
    "chain": lambda m, y, d: y.mul_(2).add_(1).tanh_(),
}


def _run_inplace(lib, device, op):
    x = lib_leaf(lib, device)
    w = np.arange(6.0).reshape(2, 3) - 2
    w = loom.tensor(w, device=device) if lib is loom else torch.tensor(w)
    y = x * 2
    INPLACE[op](lib, y, device)
    assert y.requires_grad and not y.is_leaf
    (y * w).sum().backward()
    return y, x.grad


@pytest.mark.parametrize("op", list(INPLACE))
def test_in_place_on_a_non_leaf_gives_the_gradient_of_the_new_value(device, op):
    y, g = _run_inplace(loom, device, op)
    ty, tg = _run_inplace(torch, device, op)
    assert_close(y.detach(), ty, rtol=1e-12)
    assert_close(g, tg, rtol=1e-12)
    assert y.grad_fn is not None


def test_in_place_on_a_non_leaf_grad_fn_name(device):
    y = leaf(device) * 2
    y.add_(1)
    assert y.grad_fn.name() == "AddBackward0"
    y.mul_(y.detach())
    assert y.grad_fn.name() == "MulBackward0"


def test_index_put_on_a_non_leaf(device):
    """y[index_tensor] = v and y[bool_mask] = v route the gradient like PyTorch's index_put_."""
    w = np.arange(12.0).reshape(3, 4)
    out = []
    for lib in (torch, loom):
        x = lib.tensor(w * 0.5, dtype=lib.float64, device=device if lib is loom else "cpu").requires_grad_()
        v = lib.tensor(np.ones((2, 4)) * 5, dtype=lib.float64, device=device if lib is loom else "cpu")
        v.requires_grad_()
        y = x * 2
        y[lib.tensor([0, 2], device=device if lib is loom else "cpu")] = v
        m = lib.tensor([False, True, False], device=device if lib is loom else "cpu")
        y[m] = v[:1] * 3
        (y * lib.tensor(w, device=device if lib is loom else "cpu")).sum().backward()
        out.append((x.grad, v.grad))
    assert_close(out[1][0], out[0][0])
    assert_close(out[1][1], out[0][1])


@pytest.mark.parametrize("op", ["fill_", "zero_", "setitem_element", "setitem_row", "setitem_slice"])
def test_overwriting_a_non_leaf_with_a_number_zeroes_its_gradient(device, op):
    ops = {"fill_": lambda y: y.fill_(3.0), "zero_": lambda y: y.zero_(),
           "setitem_element": lambda y: y.__setitem__((0, 1), 7.0), "setitem_row": lambda y: y.__setitem__(0, 7.0),
           "setitem_slice": lambda y: y.__setitem__(slice(1, None), 0.0)}
    grads = []
    for lib in (torch, loom):
        x = lib_leaf(lib, device)
        y = x * 2
        ops[op](y)
        (y * 3).sum().backward()
        grads.append(x.grad)
    assert_close(grads[1], grads[0])


def test_copy_into_a_non_leaf(device):
    x = leaf(device)
    y = x * 2
    y.copy_(loom.ones(2, 3, dtype=loom.float64, device=device))
    assert y.requires_grad
    y.sum().backward()
    assert_close(x.grad, np.zeros((2, 3)))


@pytest.mark.parametrize("case", ["add_then_modify", "clamp_", "clamp_inside", "lerp_", "sub_scaled_self"])
def test_in_place_where_pytorch_saves_nothing(device, case):
    """Ops whose derivatives read nothing of an input save nothing of it, so modifying it in place
    later is no error; composite in-place ops keep what their own parts saved of self."""
    grads = []
    for lib in (torch, loom):
        x = lib_leaf(lib, device)
        y = x * 2
        if case == "add_then_modify":
            z = y + 1
            y.mul_(3)
            out = z
        elif case == "clamp_":
            out = y.clamp_(-1.0, 2.0)
        elif case == "clamp_inside":
            out = y.clamp_(-0.9, 2.5)
        elif case == "lerp_":
            out = y.lerp_(lib.zeros(2, 3, dtype=lib.float64) if lib is torch else
                          loom.zeros(2, 3, dtype=loom.float64, device=device), 0.25)
        else:
            out = y.sub_(y * 0.5)
        (out * 3).sum().backward()
        grads.append(x.grad)
    assert_close(grads[1], grads[0])


def test_in_place_on_a_view_of_a_non_leaf(device):
    grads = []
    for lib in (torch, loom):
        x = lib_leaf(lib, device)
        v = lib_leaf(lib, device, [[9.0, 8.0, 7.0]])
        y = x * 2
        y[1:] = v
        y[0].mul_(3)
        (y * y).sum().backward()
        grads.append((x.grad, v.grad))
    assert_close(grads[1][0], grads[0][0])
    assert_close(grads[1][1], grads[0][1])


def _same_in_torch(device, program):
    """program(lib, x, make) run on a fresh leaf x in PyTorch and in loom (`make(data)` makes a
    float64 tensor of the library on the device): (loom's result, PyTorch's), as numpy values or
    the exception type and the start of its message."""
    results = []
    for lib in (torch, loom):
        def make(data, lib=lib):
            a = np.asarray(data, dtype=np.float64)
            return torch.tensor(a) if lib is torch else loom.tensor(a, device=device)
        try:
            out = program(lib, lib_leaf(lib, device), make)
            results.append(jsonable(out))
        except RuntimeError as e:
            results.append(("RuntimeError", str(e).split(": [")[0][:100]))
    return results[1], results[0]


def jsonable(out):
    if isinstance(out, (list, tuple)):
        return [jsonable(o) for o in out]
    if isinstance(out, (torch.Tensor, loom.Tensor)):
        return np_(out).tolist()
    if isinstance(out, str):
        return out.replace("torch::autograd::", "")
    return out


def assert_same(got, want, rtol=1e-12):
    """Equal structure, strings and None; numbers equal to rtol (transcendental functions round
    apart)."""
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            assert_same(g, w, rtol)
    elif isinstance(want, float) and not isinstance(want, bool):
        assert isinstance(got, (float, int)) and np.isclose(got, want, rtol=rtol, atol=1e-14, equal_nan=True), \
            (got, want)
    else:
        assert got == want, (got, want)


def _assert_same_in_torch(device, program):
    got, want = _same_in_torch(device, program)
    assert_same(got, want)


def test_views_taken_before_a_write_follow_their_base(device):
    """A write through one view (or into the base) changes the other views of the base: their
    grad_fn is re-derived from the base's history (AsStridedBackward0) when next used."""
    def program(lib, x, make):
        y = x * 2
        a = y[0]  # taken before the writes
        b = y[:, 1:]
        b.mul_(3)
        y[1, 0] = 5.0
        names = [a.grad_fn.name(), b.grad_fn.name(), y.grad_fn.name()]
        ((a * a).sum() + (y * y).sum()).backward()
        return names, x.grad, a.detach(), y._version, a._version
    _assert_same_in_torch(device, program)


def test_a_view_of_a_view_written_in_place(device):
    def program(lib, x, make):
        y = x * 2
        a = y[:, 0:2]
        b = a[1:]
        b.mul_(5)
        (y.sum() + (a * a).sum()).backward()
        return x.grad, a.grad_fn.name(), b.grad_fn.name()
    _assert_same_in_torch(device, program)


def _scaled_slice_of_a_local(lib, x, scale_first):
    """A function scales a slice of a tensor it made, in place, and returns the slice: the local
    base is gone when the slice is used (attention code's q *= scale on a slice of qkv)."""
    def attention_like(h):
        qkv = h * 1
        q, k = qkv[:, :2], qkv[:, 1:3]  # overlapping: k sees q's write while qkv lives
        if scale_first:
            q.mul_(0.5)
            return q, k
        k.add_(1.0)
        return q.transpose(0, 1), k
    return attention_like(x)


@pytest.mark.parametrize("scale_first", [True, False])
@pytest.mark.parametrize("sync", [False, True])
def test_views_written_through_then_their_base_dropped(device, scale_first, sync):
    """A pending base held only weakly by its views dies after a write through one of them: the
    views' histories still follow the write (the base's last history, kept for them)."""
    def program(lib, x, make):
        q, k = _scaled_slice_of_a_local(lib, x, scale_first)
        if sync:
            _sync(lib)
        names = [q.grad_fn.name(), k.grad_fn.name()]
        ((q * q).sum() + (k * k * 3).sum()).backward()
        return names, x.grad, q.detach(), k.detach()
    _assert_same_in_torch(device, program)


def test_values_that_require_grad_written_into_a_view_of_a_dropped_constant(device):
    """A base that never took part in autograd dies; a value that requires grad is then written
    through one of its views: the other views' histories follow the write."""
    def program(lib, x, make):
        base = make(np.zeros((2, 3))) * 1
        row, whole = base[0], base[:, 1:]
        del base
        row.copy_(x[1] * 2)
        names = [whole.grad_fn.name(), whole.requires_grad]
        (whole * whole).sum().backward()
        return names, x.grad, whole.detach()
    _assert_same_in_torch(device, program)


def test_writing_values_that_require_grad_into_a_constant(device):
    """out = zeros(...); out[i] = f(x): out starts requiring grad, with a CopySlices history."""
    def program(lib, x, make):
        w = make([1.0, 2.0]).requires_grad_()
        out = make(np.zeros((2, 3)))
        out[0] = x[1] * 2
        out[1, :2].copy_(w)
        flags = [out.requires_grad, out.is_leaf, out.grad_fn.name()]
        (out * out).sum().backward()
        return flags, x.grad, w.grad
    _assert_same_in_torch(device, program)


def test_copy_and_fill_with_values_that_require_grad(device):
    """copy_ and fill_ give the new value's gradient to the source and zeros to the old value."""
    def program(lib, x, make):
        w = make([1.0, 2.0, 3.0]).requires_grad_()  # broadcast over y's rows
        s = make(3.0).requires_grad_()
        y, z = x * 2, x * 3
        y.copy_(w)
        z.fill_(s)
        names = [y.grad_fn.name(), z.grad_fn.name()]
        ((y * y).sum() + (z * z).sum()).backward()
        return names, x.grad, w.grad, s.grad
    _assert_same_in_torch(device, program)


@pytest.mark.parametrize("write", ["fill_number", "zero_", "setitem_number", "setitem_tensor", "copy_"])
def test_grad_fn_names_of_overwrites(device, write):
    ops = {"fill_number": lambda y, make: y.fill_(2.0), "zero_": lambda y, make: y.zero_(),
           "setitem_number": lambda y, make: y.__setitem__(0, 1.0),
           "setitem_tensor": lambda y, make: y.__setitem__(slice(1, None), make([[4.0, 5.0, 6.0]])),
           "copy_": lambda y, make: y.copy_(make(np.ones((2, 3))))}

    def program(lib, x, make):
        y = x * 2
        ops[write](y, make)
        return y.grad_fn.name(), [None if f is None else f.name() for f, _ in y.grad_fn.next_functions]
    _assert_same_in_torch(device, program)


@pytest.mark.parametrize("write", ["mul_", "setitem", "view_add_"])
def test_in_place_through_a_view_of_a_leaf_raises(device, write):
    ops = {"mul_": lambda x: x[0].mul_(2), "setitem": lambda x: x[0].__setitem__(1, 3.0),
           "view_add_": lambda x: x.view(-1).add_(1)}
    for lib in (torch, loom):
        x = lib_leaf(lib, device)
        with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an "
                                               "in-place operation"):
            ops[write](x)
    with loom.no_grad():  # not recorded: allowed
        ops[write](x)
    assert x.is_leaf and x.grad_fn is None


def test_writing_through_a_view_made_in_no_grad_mode_raises(device):
    def program(lib, x, make):
        y = x * 2
        with lib.no_grad():
            v = y[1:]
        v.mul_(2)
    got, want = _same_in_torch(device, program)
    assert want[0] == "RuntimeError" and got == want


def _sync(lib):
    if lib is loom:
        loom.sync()


# Writes through views with syncs between the steps: in lazy mode views and bases are then
# materialized (views alias their base's storage) and the next write starts from stored values.
def _views_before_writes(lib, x, make):
    y = x * 2
    a, b = y[0], y[:, 1:]
    _sync(lib)
    b.mul_(3)
    _sync(lib)
    y[1, 0] = 5.0
    _sync(lib)
    names = [a.grad_fn.name(), b.grad_fn.name(), y.grad_fn.name()]
    ((a * a).sum() + (y * y).sum()).backward()
    return names, a.detach()


def _into_a_constant(lib, x, make):
    out, w = make(np.zeros((2, 3))), make([1.0, 2.0]).requires_grad_()
    _sync(lib)
    out[0] = x[1] * 2
    _sync(lib)
    out[1, :2].copy_(w)
    _sync(lib)
    (out * out).sum().backward()
    return w.grad


def _flat_view_of_a_synced_base(lib, x, make):
    y = x * 2
    _sync(lib)
    y.view(-1)[2:5].mul_(2)
    _sync(lib)
    (y * y).sum().backward()
    return y.grad_fn.name(), y._version


def _transposed_view(lib, x, make):
    y = x * 2
    _sync(lib)
    y.transpose(0, 1)[1].exp_()
    _sync(lib)
    (y * y).sum().backward()
    return y.transpose(0, 1).grad_fn.name()


@pytest.mark.parametrize("program", [_views_before_writes, _into_a_constant, _flat_view_of_a_synced_base,
                                     _transposed_view])
def test_writes_through_views_across_syncs(device, program):
    _assert_same_in_torch(device, lambda lib, x, make: (program(lib, x, make), x.grad))


def test_version_counter_is_shared_by_views_and_detach_but_not_data(device):
    def program(lib, x, make):
        y = x * 2
        v, d, dd = y[1:], y.detach(), y.data
        v.add_(1)
        d.mul_(2)
        dd.mul_(2)
        return y._version, v._version, d._version, dd._version, y.detach()
    _assert_same_in_torch(device, program)


# Which later in-place writes a saved value survives: only what a derivative reads is saved, the
# result where PyTorch's formula reads the result. (out, the tensor then modified in place)
SAVED = {
    "mul_by_constant": lambda y, c: (y * c, y),        # saves c, not y
    "mul_of_two": lambda y, c: (y * y.detach(), y),     # saves the detached y, which shares y's counter
    "sum": lambda y, c: (y.sum(), y),
    "add": lambda y, c: (y + c, c),
    "matmul_by_constant": lambda y, c: (y @ c.T, y),   # saves c only
    "exp": lambda y, c: (y.exp(), y),                   # saves its result, not y
    "exp_result": lambda y, c: (lambda e: (e, e))(y.exp()),
    "sin": lambda y, c: (y.sin(), y),                   # saves y
    "tanh_result_view": lambda y, c: (lambda t: (t, t[0]))(y.tanh()),
    "sqrt_of_input": lambda y, c: (c.sqrt() * y, c),    # sqrt saves its result; mul saves it too
    "relu_result": lambda y, c: (lambda r: (r * 1, r.view(-1)))(y.relu()),
    "sigmoid": lambda y, c: (y.sigmoid(), y),
    "pow_exponent": lambda y, c: (c ** y, y),           # saves c, y and the result
    "amax": lambda y, c: (y.amax(1), y),
    "amax_result": lambda y, c: (lambda m: (m * 1, m))(y.amax(1)),
    "prod_result": lambda y, c: (lambda p: (p * 1, p))(y.prod(1)),
    "prod": lambda y, c: (y.prod(), y),
    "div_by": lambda y, c: (c / y, y),                  # saves y
    "div_of": lambda y, c: (y / c, y),                  # saves c only
    "index_select": lambda y, c: (y[:, [2, 0]], y),     # saves the index only
    "cat": lambda y, c: (lib_cat(y, c), y),
    "where": lambda y, c: (lib_of(y).where(c > 2, y, c), y),  # saves the condition only
}


def lib_of(t):
    return torch if isinstance(t, torch.Tensor) else loom


def lib_cat(y, c):
    return lib_of(y).cat([y, c])


@pytest.mark.parametrize("case", list(SAVED))
def test_modifying_an_input_in_place_fails_backward_exactly_where_pytorch_does(device, case):
    def program(lib, x, make):
        y = x * 2
        c = make(np.arange(6.0).reshape(2, 3) + 1)
        out, modified = SAVED[case](y, c)
        modified.add_(1)
        out.sum().backward()
        return x.grad
    _assert_same_in_torch(device, program)


def test_the_lead_example_raises_only_where_backward_reads_the_overwritten_value(device):
    """exp saves its result and add nothing, so changing their input in place is no error; sin
    saves its input, so the same write breaks its backward."""
    def program(lib, x, make, then_sin=False):
        x = x * 1
        y = x.exp()
        y2 = x + 1
        z = x.sin() if then_sin else 0
        x.add_(1)
        (y.sum() + y2.sum() + (z.sum() if then_sin else 0)).backward()
    _assert_same_in_torch(device, program)
    got, want = _same_in_torch(device, lambda lib, x, make: program(lib, x, make, then_sin=True))
    assert want[0] == "RuntimeError" and got == want


# In-place ops whose own computation reads self: PyTorch saves the original self, loom keeps what
# the op's functions saved of self (SavedTensor::preserve). Values saved before the op, or from
# another view of the data, are not kept: backward then fails in both.
SELF_READING = {
    "sin_": lambda y, w: y.sin_(), "exp_": lambda y, w: y.exp_(), "pow_": lambda y, w: y.pow_(2),
    "sqrt_": lambda y, w: y.abs_().sqrt_(), "tanh_": lambda y, w: y.tanh_(), "sigmoid_": lambda y, w: y.sigmoid_(),
    "relu_": lambda y, w: y.relu_(), "clamp_": lambda y, w: y.clamp_(-1.5, 2.5), "mul_w": lambda y, w: y.mul_(w),
    "div_w": lambda y, w: y.div_(w), "lerp_": lambda y, w: y.lerp_(w, 0.3), "addcmul_": lambda y, w: y.addcmul_(w, w),
    "reciprocal_": lambda y, w: y.reciprocal_(), "log_": lambda y, w: y.abs_().log_(),
    "square_": lambda y, w: y.square_(), "chain": lambda y, w: y.mul_(w).exp_().add_(1).log_(),
    "add_sin_of_self": lambda y, w: y.add_(y.sin()),     # sin saved y before add_: fails
    "view_mul_other_view": lambda y, w: y[:, 1:].mul_(y[:, :2]),  # the other view was saved: fails
    "setitem_product": lambda y, w: y.__setitem__((0, slice(None)), y[1] * y[0]),  # computed before: fails
}


@pytest.mark.parametrize("op", list(SELF_READING))
def test_in_place_ops_reading_self(device, op):
    def program(lib, x, make):
        w = (make(np.arange(6.0).reshape(2, 3)) + 1).requires_grad_()
        y = x * 2
        SELF_READING[op](y, w)
        (y * y).sum().backward()
        return y.detach(), x.grad, w.grad
    _assert_same_in_torch(device, program)


def test_self_multiplication_in_place_keeps_both_operands(device):
    """y.mul_(y): mul saved y as both operands; PyTorch keeps a copy of self only and fails at
    backward, loom keeps both (it cannot tell them apart) and gives the exact gradient."""
    tx = tleaf()
    ty = tx * 2
    ty.mul_(ty)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ty.sum().backward()
    x = leaf(device)
    y = x * 2
    y.mul_(y)
    y.sum().backward()
    assert_close(x.grad, 8 * np.asarray(VALUES))


@pytest.mark.parametrize("write", list(SELF_READING))
def test_in_place_after_a_sync_in_lazy_mode(write):
    """The same programs with y materialized by a sync before the write: a value saved from a
    materialized lazy tensor that the write overwrites is kept (a copy computed before the write),
    and eager mode, lazy mode and PyTorch agree."""
    def program(lib, x, make, device):
        w = (make(np.arange(6.0).reshape(2, 3)) + 1).requires_grad_()
        y = x * 2
        y.sum().item()  # a sync: y is materialized now
        SELF_READING[write](y, w)
        y.sum().item()
        (y * y).sum().backward()
        return y.detach(), x.grad, w.grad
    got, want = _same_in_torch("lazy", lambda lib, x, make: program(lib, x, make, "lazy"))
    assert_same(got, want)


# ---- grad modes ----

def test_no_grad_context_manager(device):
    x = leaf(device)
    assert loom.is_grad_enabled()
    with loom.no_grad():
        assert not loom.is_grad_enabled()
        y = x * 2
    assert loom.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf


def test_grad_mode_decorators(device):
    x = leaf(device)

    @loom.no_grad()
    def f(t):
        assert not loom.is_grad_enabled()
        return t * 2

    @loom.enable_grad()
    def g(t):
        return t * 2

    @loom.set_grad_enabled(False)
    def h(t):
        return t * 2

    # set_grad_enabled(False) turns grad mode off when constructed, also as a decorator (PyTorch
    # 1.13 does the same); turn it back on.
    loom.set_grad_enabled(True)

    @loom.inference_mode()
    def i(t):
        return t * 2

    @loom.inference_mode(False)
    def j(t):
        return t * 2

    assert loom.is_grad_enabled()
    assert not f(x).requires_grad and loom.is_grad_enabled()
    assert not h(x).requires_grad and loom.is_grad_enabled()
    assert not i(x).requires_grad and loom.is_grad_enabled()
    assert j(x).requires_grad
    with loom.no_grad():
        assert g(x).requires_grad
        assert not loom.is_grad_enabled()
        assert j(x).requires_grad
        assert not loom.is_grad_enabled()
    # a decorated function can be called many times and keeps its name
    assert f.__name__ == "f" and not f(x).requires_grad and not f(x).requires_grad


def test_enable_grad_inside_no_grad(device):
    x = leaf(device)
    with loom.no_grad():
        with loom.enable_grad():
            assert loom.is_grad_enabled()
            y = x * 2
        assert not loom.is_grad_enabled()
        z = x * 2
    assert y.requires_grad and not z.requires_grad


def test_set_grad_enabled_as_function_and_context_manager(device):
    x = leaf(device)
    try:
        loom.set_grad_enabled(False)
        assert not loom.is_grad_enabled()
        assert not (x * 2).requires_grad
    finally:
        loom.set_grad_enabled(True)
    assert loom.is_grad_enabled()
    with loom.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert loom.is_grad_enabled()
    with loom.no_grad():
        with loom.set_grad_enabled(True):
            assert (x * 2).requires_grad
        assert not loom.is_grad_enabled()
    assert loom.is_grad_enabled()


def test_inference_mode(device):
    x = leaf(device)
    with loom.inference_mode():
        assert not loom.is_grad_enabled()
        assert not (x * 2).requires_grad
    with loom.inference_mode(False):
        assert (x * 2).requires_grad
    with loom.inference_mode(mode=True):
        assert not (x * 2).requires_grad
    assert loom.is_grad_enabled()


def test_grad_modes_restore_after_exceptions(device):
    with pytest.raises(ValueError):
        with loom.no_grad():
            raise ValueError
    assert loom.is_grad_enabled()

    @loom.no_grad()
    def boom():
        raise KeyError

    with pytest.raises(KeyError):
        boom()
    assert loom.is_grad_enabled()
    with pytest.raises(ValueError):
        with loom.set_grad_enabled(False):
            raise ValueError
    assert loom.is_grad_enabled()


def test_grad_mode_context_managers_nest_and_are_reusable(device):
    ctx = loom.no_grad()
    with ctx:
        with ctx:
            assert not loom.is_grad_enabled()
        assert not loom.is_grad_enabled()
    assert loom.is_grad_enabled()
    with ctx:
        assert not loom.is_grad_enabled()
    assert loom.is_grad_enabled()


def test_grad_mode_is_per_thread(device):
    seen = []
    with loom.no_grad():
        t = threading.Thread(target=lambda: seen.append(loom.is_grad_enabled()))
        t.start()
        t.join()
        assert not loom.is_grad_enabled()
    assert seen == [True]


# ---- detach, .data ----

def test_detach(device):
    x = leaf(device)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    assert_close(d, 2 * np.asarray(VALUES))
    if device == "cpu":
        assert d.data_ptr() == y.data_ptr()
    # d shares values with y: writes through d are seen by y
    d[0, 0] = 100.0
    assert y[0, 0].item() == 100.0
    # gradients do not flow through detach
    z = (x * x.detach()).sum()
    z.backward()
    assert_close(x.grad, VALUES)


def test_data(device):
    x = leaf(device)
    d = x.data
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    assert_close(d, VALUES)
    d.mul_(2)  # in place through .data: no leaf error, and x sees it
    assert_close(x.detach(), 2 * np.asarray(VALUES))
    assert x.requires_grad and x.is_leaf
    if device == "cpu":
        assert x.data.data_ptr() == x.data_ptr()


def test_changes_through_data_are_not_tracked(device):
    grads = []
    for lib in (torch, loom):
        x = lib_leaf(lib, device)
        y = x.sin()
        x.data.mul_(2)
        y.sum().backward()
        grads.append(x.grad)
    assert_close(grads[1], grads[0])


# ---- retain_grad ----

def test_retain_grad(device):
    for lib in (loom, torch):
        x = lib_leaf(lib, device)
        y = x * 2
        y.retain_grad()
        z = y.exp() * y
        z.retain_grad()
        (z * z).sum().backward()
        if lib is loom:
            got = (x.grad, y.grad, z.grad)
        else:
            want = (x.grad, y.grad, z.grad)
    for a, b in zip(got, want):
        assert_close(a, b)


def test_retain_grad_accumulates_and_on_leaves_is_a_no_op(device):
    x = leaf(device)
    x.retain_grad()  # a leaf keeps its gradient anyway
    y = x * 3
    y.retain_grad()
    s = y.sum()
    s.backward(retain_graph=True)
    s.backward()
    assert_close(y.grad, np.full((2, 3), 2.0))
    assert_close(x.grad, np.full((2, 3), 6.0))
    assert not y.grad.requires_grad


def test_retain_grad_on_a_tensor_that_does_not_require_grad_raises(device):
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
        loom.ones(2, device=device).retain_grad()


def test_retains_grad_attribute(device):
    x = leaf(device)
    y = x * 2
    assert not y.retains_grad
    y.retain_grad()
    assert y.retains_grad and not x.retains_grad


# ---- grad_fn objects ----

def _structure(fn, depth=3):
    """(name, [(child structure, input_nr) or (None, input_nr)]) down to `depth`."""
    if fn is None:
        return None
    name = fn.name().replace("torch::autograd::", "")
    if depth == 0:
        return name
    return name, [(_structure(f, depth - 1), i) for f, i in fn.next_functions]


# Ops whose primitive maps 1:1 to PyTorch's (the grad_fn names agree).
SAME_NAMES = {
    "mul": lambda m, x, y: x * y, "add": lambda m, x, y: x + y, "sub": lambda m, x, y: x - y,
    "div": lambda m, x, y: x / y, "neg": lambda m, x, y: -x, "exp": lambda m, x, y: x.exp(),
    "exp2": lambda m, x, y: x.exp2(), "log": lambda m, x, y: x.log(), "log2": lambda m, x, y: x.log2(),
    "expm1": lambda m, x, y: x.expm1(), "sqrt": lambda m, x, y: x.sqrt(), "rsqrt": lambda m, x, y: x.rsqrt(),
    "sin": lambda m, x, y: x.sin(), "cos": lambda m, x, y: x.cos(), "tan": lambda m, x, y: x.tan(),
    "tanh": lambda m, x, y: x.tanh(), "sigmoid": lambda m, x, y: x.sigmoid(), "relu": lambda m, x, y: x.relu(),
    "gelu": lambda m, x, y: m.nn.functional.gelu(x), "silu": lambda m, x, y: m.nn.functional.silu(x),
    "softplus": lambda m, x, y: m.nn.functional.softplus(x), "erf": lambda m, x, y: x.erf(),
    "abs": lambda m, x, y: x.abs(), "reciprocal": lambda m, x, y: x.reciprocal(), "floor": lambda m, x, y: x.floor(),
    "ceil": lambda m, x, y: x.ceil(), "round": lambda m, x, y: x.round(), "sign": lambda m, x, y: x.sign(),
    "nan_to_num": lambda m, x, y: x.nan_to_num(), "pow_scalar": lambda m, x, y: x ** 2,
    "maximum": lambda m, x, y: m.maximum(x, y), "minimum": lambda m, x, y: m.minimum(x, y),
    "where": lambda m, x, y: m.where(x > 1, x, y), "sum": lambda m, x, y: x.sum(), "prod": lambda m, x, y: x.prod(),
    "amax": lambda m, x, y: x.amax(1), "amin": lambda m, x, y: x.amin(0), "cumsum": lambda m, x, y: x.cumsum(1),
    "cat": lambda m, x, y: m.cat([x, y]), "gather": lambda m, x, y: x.gather(1, m.tensor([[0, 2], [1, 1]])),
    "scatter_add": lambda m, x, y: x.scatter_add(1, m.tensor([[0, 2], [1, 1]]), y[:, :2]),
    "index": lambda m, x, y: x[m.tensor([1, 0, 1])], "index_bool": lambda m, x, y: x[x > 1],
    "to_float32": lambda m, x, y: x.to(m.float32), "float": lambda m, x, y: x.float(),
    "clone": lambda m, x, y: x.clone(), "contiguous": lambda m, x, y: x.T.contiguous(),
    "view": lambda m, x, y: x.view(6), "reshape": lambda m, x, y: x.reshape(3, 2),
    "flatten": lambda m, x, y: x.flatten(), "permute": lambda m, x, y: x.permute(1, 0), "T": lambda m, x, y: x.T,
    "transpose": lambda m, x, y: x.transpose(0, 1), "mT": lambda m, x, y: x.mT, "t": lambda m, x, y: x.t(),
    "linear": lambda m, x, y: m.nn.functional.linear(x, y),
    "expand": lambda m, x, y: x[:1].expand(4, 3), "squeeze": lambda m, x, y: x[None].squeeze(),
    "squeeze_dim": lambda m, x, y: x[None].squeeze(0), "unsqueeze": lambda m, x, y: x.unsqueeze(1),
    "select": lambda m, x, y: x[1], "slice": lambda m, x, y: x[:, 1:], "view_as": lambda m, x, y: x.view_as(y),
}


# Ops with arguments that are numbers or index tensors: PyTorch's grad_fn lists only the inputs
# of the backward graph (and the numbers it wraps into tensors, as in x * 2).
EXTRA_EDGES = {"softplus", "nan_to_num", "pow_scalar", "where", "gather", "scatter_add", "index", "index_bool"}


def _names(fn):
    return fn.name().replace("torch::autograd::", "")


@pytest.mark.parametrize("op", list(SAME_NAMES))
def test_grad_fn_names_and_next_functions_match_pytorch(device, op):
    fn = SAME_NAMES[op]
    values = np.array([[0.5, 1.25, 2.0], [1.5, 0.75, 3.0]])
    lx, ly = leaf(device, values), leaf(device, values[::-1].copy())
    tx, ty = tleaf(values), tleaf(values[::-1].copy())
    if op in ("gather", "scatter_add", "index"):
        out = fn(_OnDevice(device), lx, ly)
    else:
        out = fn(loom, lx, ly)
    ref = fn(torch, tx, ty)
    assert _names(out.grad_fn) == _names(ref.grad_fn)
    assert _structure(out.grad_fn) == _structure(ref.grad_fn)


@pytest.mark.parametrize("op", sorted(EXTRA_EDGES))
def test_next_functions_list_only_differentiable_inputs(device, op):
    fn = SAME_NAMES[op]
    values = np.array([[0.5, 1.25, 2.0], [1.5, 0.75, 3.0]])
    lib = _OnDevice(device) if op in ("gather", "scatter_add", "index") else loom
    out = fn(lib, leaf(device, values), leaf(device, values[::-1].copy()))
    ref = fn(torch, tleaf(values), tleaf(values[::-1].copy()))
    assert len(out.grad_fn.next_functions) == len(ref.grad_fn.next_functions)


class _OnDevice:
    """loom with tensor() placing its result on a device (index tensors for lazy inputs)."""

    def __init__(self, device):
        self.device = device

    def tensor(self, data):
        return loom.tensor(data, device=self.device)


def test_grad_fn_names_of_overloads_and_log1p(device):
    x, y = leaf(device, [[1.0, 2.0, 3.0]]), leaf(device, [[2.0, 3.0, 4.0]])
    tx, ty = tleaf([[1.0, 2.0, 3.0]]), tleaf([[2.0, 3.0, 4.0]])
    for f in [lambda a, b: a.log1p(), lambda a, b: a.sum(1), lambda a, b: a ** b, lambda a, b: a.remainder(b)]:
        assert f(x, y).grad_fn.name() == f(tx, ty).grad_fn.name()


def test_grad_fn_names_of_each_overload(device):
    x = leaf(device, [[1.0, 2.0, 3.0]])
    tx = tleaf([[1.0, 2.0, 3.0]])
    # (x.sum(dims) naming every dim is SumBackward1 in PyTorch and SumBackward0 in loom, whose Sum op
    # does not record whether the dims were listed)
    fns = [lambda m, a: a.sum(), lambda m, a: a.sum(1), lambda m, a: a.sum(0, keepdim=True),
           lambda m, a: a.prod(), lambda m, a: a.prod(1), lambda m, a: a ** 2, lambda m, a: m.pow(2.0, a),
           lambda m, a: a.remainder(2.0), lambda m, a: a.square(), lambda m, a: m.nn.functional.gelu(a, approximate="tanh"),
           lambda m, a: a.clone(), lambda m, a: a.float(), lambda m, a: a.to(m.float32).double()]
    for f in fns:
        assert f(loom, x).grad_fn.name() == f(torch, tx).grad_fn.name()


def test_next_functions_of_numbers_and_reflected_operators(device):
    """PyTorch wraps the number of x * 2, 2 * x, x + 2, x - 2, x / 2 into a tensor (a (None, 0) entry after x's);
    x ** 2 and clamp's bounds are not inputs of the backward graph."""
    x, tx = leaf(device), tleaf()
    for f in [lambda a: 2 * a, lambda a: a * 2, lambda a: 2 + a, lambda a: a + 2, lambda a: a - 2, lambda a: a / 2,
              lambda a: a ** 2, lambda a: a.pow(0.5), lambda a: a.remainder(2.0)]:
        assert _structure(f(x).grad_fn) == _structure(f(tx).grad_fn)
    assert_close(2 * x, 2 * np.asarray(VALUES))


def test_grad_fn_objects(device):
    x = leaf(device)
    w = leaf(device)
    z = x * w + x
    assert isinstance(z.grad_fn, loom.autograd.Function)
    assert z.grad_fn.name() == "AddBackward0"
    assert repr(z.grad_fn).startswith("<AddBackward0 object at 0x")
    (mul, i0), (acc, i1) = z.grad_fn.next_functions
    assert (i0, i1) == (0, 0)
    assert mul.name() == "MulBackward0" and acc.name() == "AccumulateGrad"
    assert repr(acc).startswith("<AccumulateGrad object at")
    # the same function object compares equal (and hashes equal) each time it is reached
    assert mul.next_functions[0][0] == acc and hash(mul.next_functions[0][0]) == hash(acc)
    assert mul.next_functions[1][0] != acc
    assert z.grad_fn == z.grad_fn
    assert acc.next_functions == ()
    # a Python number argument has no edge
    assert [f is None for f, _ in (x * 2).grad_fn.next_functions] == [False, True]
    # an input that does not require grad has no edge either
    c = loom.ones(2, 3, dtype=loom.float64, device=device)
    assert [f is None for f, _ in (x * c).grad_fn.next_functions] == [False, True]


def test_grad_fn_of_views_and_split_outputs(device):
    x = leaf(device)
    parts = x.split(1, dim=1)
    for p in parts:
        assert p.grad_fn is not None
        assert p.grad_fn.next_functions[0][0].name() == "AccumulateGrad"
    outs = x.unbind(0)
    assert all(o.grad_fn.name() == "SelectBackward0" for o in outs)


# ---- loom.autograd.grad ----

def test_autograd_grad_returns_gradients_without_touching_grad(device):
    x, w = leaf(device), leaf(device, [[2.0, 1.0, 0.5]] * 2)
    out = (x * w).exp().sum()
    gx, gw = loom.autograd.grad(out, (x, w))
    tx, tw = tleaf(), tleaf([[2.0, 1.0, 0.5]] * 2)
    tgx, tgw = torch.autograd.grad((tx * tw).exp().sum(), (tx, tw))
    assert_close(gx, tgx)
    assert_close(gw, tgw)
    assert x.grad is None and w.grad is None
    assert not gx.requires_grad


def test_autograd_grad_of_an_intermediate_and_with_grad_outputs(device):
    x = leaf(device)
    h = x * 3
    out = h.sin()
    g = loom.autograd.grad(out, h, grad_outputs=loom.full((2, 3), 2.0, dtype=loom.float64, device=device),
                           retain_graph=True)[0]
    assert_close(g, 2 * np.cos(3 * np.asarray(VALUES)))
    (gx,) = loom.autograd.grad([out.sum()], [x], retain_graph=True)
    assert_close(gx, 3 * np.cos(3 * np.asarray(VALUES)))


def test_autograd_grad_with_respect_to_a_leaf_and_an_intermediate(device):
    tx = tleaf()
    th = tx * 3
    tgx, tgh = torch.autograd.grad(th.sin().sum(), [tx, th])
    x = leaf(device)
    h = x * 3
    gx, gh = loom.autograd.grad(h.sin().sum(), [x, h])
    assert_close(gx, tgx)
    assert_close(gh, tgh)


def test_autograd_grad_leaves_other_leaves_alone(device):
    """grad() with respect to some leaves neither fills nor changes the .grad of the others."""
    x, w = leaf(device), leaf(device, [[2.0, 1.0, 0.5]] * 2)
    (gx,) = loom.autograd.grad((x * w).sum(), [x])
    assert_close(gx, [[2.0, 1.0, 0.5]] * 2)
    assert w.grad is None and x.grad is None
    h = x * 3
    (gh,) = loom.autograd.grad((h * w).sum(), [h])
    assert_close(gh, [[2.0, 1.0, 0.5]] * 2)
    assert w.grad is None and x.grad is None


def test_autograd_grad_with_respect_to_an_intermediate_and_its_input_in_any_order(device):
    x = leaf(device)
    h = x.exp()
    out = (h * h).sum()
    gh, gx = loom.autograd.grad(out, [h, x], retain_graph=True)
    assert_close(gh, 2 * np.exp(np.asarray(VALUES)))
    assert_close(gx, 2 * np.exp(2 * np.asarray(VALUES)))
    (gx2,) = loom.autograd.grad(out, [x])
    assert_close(gx2, gx)


def test_autograd_grad_allow_unused(device):
    x, u = leaf(device), leaf(device, [1.0])
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        loom.autograd.grad((x * 2).sum(), [x, u])
    gx, gu = loom.autograd.grad((x * 2).sum(), [x, u], allow_unused=True)
    assert gu is None
    assert_close(gx, np.full((2, 3), 2.0))


def test_autograd_grad_create_graph_false_gives_constants(device):
    x = leaf(device)
    (g,) = loom.autograd.grad((x ** 3).sum(), x)
    assert not g.requires_grad and g.grad_fn is None
    assert_close(g, 3 * np.asarray(VALUES) ** 2)


def test_double_backward_with_autograd_grad(device):
    x = leaf(device)
    (g,) = loom.autograd.grad((x ** 3).sum(), x, create_graph=True)
    assert g.requires_grad
    (gg,) = loom.autograd.grad(g.sum(), x)
    assert_close(gg, 6 * np.asarray(VALUES))


def test_double_backward_with_backward_create_graph(device):
    x = leaf(device)
    (x ** 3).sum().backward(create_graph=True)
    g = x.grad
    assert g.requires_grad
    x.grad = None
    g.sum().backward()
    assert_close(x.grad, 6 * np.asarray(VALUES))


# Second derivatives: the first gradient (create_graph=True) differentiated again, against PyTorch.
GRADGRAD = {
    "pow": lambda m, x, y: x ** 3, "exp": lambda m, x, y: x.exp(), "sin": lambda m, x, y: x.sin(),
    "tanh": lambda m, x, y: x.tanh(), "sigmoid": lambda m, x, y: x.sigmoid(), "log": lambda m, x, y: x.abs().log(),
    "mul": lambda m, x, y: x * y * x, "div": lambda m, x, y: x / (y * y + 1),
    "pow_tensor": lambda m, x, y: x.abs() ** y, "matmul": lambda m, x, y: (x @ y.T) ** 2,
    "softmax": lambda m, x, y: x.softmax(1) * y, "log_softmax": lambda m, x, y: x.log_softmax(0) * y,
    "gelu": lambda m, x, y: m.nn.functional.gelu(x), "silu": lambda m, x, y: m.nn.functional.silu(x),
    "mean_var": lambda m, x, y: x.var(1) * x.mean(), "norm": lambda m, x, y: x.norm(dim=1),
    "prod": lambda m, x, y: x.prod(1), "views": lambda m, x, y: (x.T[1:] * y.T[:2]).reshape(-1).exp(),
    "layer_norm": lambda m, x, y: m.nn.functional.layer_norm(x, (3,)),
    "mse": lambda m, x, y: m.nn.functional.mse_loss(x.sin(), y),
}


@pytest.mark.parametrize("op", list(GRADGRAD))
def test_second_derivatives_match_pytorch(device, op):
    """grad(grad(f)(x) . v) for each op, with both inputs differentiated twice, as in PyTorch."""
    fn = GRADGRAD[op]
    v = np.array([[0.3, -1.1, 0.8], [1.7, 0.2, -0.6]])
    results = []
    for lib in (torch, loom):
        x, y = lib_leaf(lib, device), lib_leaf(lib, device, VALUES[::-1])
        out = fn(lib, x, y)
        gx, gy = lib.autograd.grad(out.sum(), (x, y), create_graph=True, allow_unused=True)
        assert gx.requires_grad
        w = lib.tensor(v) if lib is torch else loom.tensor(v, device=device)
        total = (gx * w).sum() + (gy * w).sum() if gy is not None else (gx * w).sum()
        results.append([np_(g) if g is not None else None
                        for g in lib.autograd.grad(total, (x, y), allow_unused=True)])
    for got, want in zip(results[1], results[0]):
        if want is None:
            assert got is None or not np.any(got)
        else:
            assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_double_backward_leaves_first_grad_history_to_an_accumulated_grad(device):
    """backward(create_graph=True) twice: .grad sums both gradients, with the history of both."""
    x = leaf(device)
    (x ** 3).sum().backward(create_graph=True)
    (x ** 2).sum().backward(create_graph=True)
    (gg,) = loom.autograd.grad(x.grad.sum(), x)
    assert_close(gg, 6 * np.asarray(VALUES) + 2)


def test_create_graph_keeps_the_history_of_grad_outputs(device):
    """What create_graph does record: the gradient's dependence on grad_outputs."""
    x = leaf(device)
    v = leaf(device, np.ones((2, 3)))
    (g,) = loom.autograd.grad(x * 3, x, grad_outputs=v, create_graph=True)
    assert g.requires_grad
    (gv,) = loom.autograd.grad(g.sum(), v)
    assert_close(gv, np.full((2, 3), 3.0))


# ---- repr ----

def test_repr_shows_requires_grad_and_grad_fn(device):
    x = leaf(device, [1.0, 2.0])
    tx = tleaf([1.0, 2.0])
    suffix = ", device='lazy:cpu'" if device == "lazy" else ""
    assert repr(x) == repr(tx).replace("torch.", "loom.").replace("tensor([1., 2.]", "tensor([1., 2.]" + suffix)
    assert "requires_grad=True" in repr(x)
    y = x * 2
    assert repr(y).endswith("grad_fn=<MulBackward0>)")
    assert "requires_grad" not in repr(y)
    assert repr((x * 2).sum()) == (f"tensor(6.{suffix}, dtype=loom.float64, grad_fn=<SumBackward0>)")
    assert "grad_fn" not in repr(x.detach()) and "requires_grad" not in repr(x.detach())
    f32 = loom.tensor([1.0, 2.0], device=device).requires_grad_()
    assert repr(f32) == f"tensor([1., 2.]{suffix}, requires_grad=True)"
    assert repr(f32 * 2) == f"tensor([2., 4.]{suffix}, grad_fn=<MulBackward0>)"
    assert repr(torch.tensor([1.0, 2.0]).requires_grad_() * 2) == "tensor([2., 4.], grad_fn=<MulBackward0>)"


# ---- lazy specifics ----

def test_lazy_backward_records_and_equals_eager():
    """backward() in lazy mode records the backward ops into the trace; the gradients are pending
    until read, and equal the eager ones."""
    results = []
    for dev in ("cpu", "lazy"):
        x = leaf(dev)
        w = leaf(dev, [[0.25, -1.0, 2.0], [1.0, 0.5, -0.5]])
        loss = (loom.nn.functional.gelu(x * w) + x.softmax(1)).sum()
        loss.backward()
        results.append((np_(x.grad).copy(), np_(w.grad).copy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_lazy_grads_on_a_lazy_leaf_are_lazy():
    x = leaf("lazy")
    (x * 2).sum().backward()
    assert x.grad.is_lazy and x.grad.device == x.device


def test_mixing_lazy_and_eager_tensors_in_backward_raises():
    x = leaf("lazy")
    with pytest.raises(RuntimeError, match="invalid gradient at index 0 - expected device lazy:cpu but got cpu"):
        (x * 2).backward(loom.ones(2, 3, dtype=loom.float64))
    with pytest.raises(RuntimeError, match="invalid gradient at index 0 - expected device cpu but got lazy:cpu"):
        loom.autograd.grad(leaf("cpu") * 2, leaf("cpu"), loom.ones(2, 3, dtype=loom.float64, device="lazy"))
    assert x.grad is None


def test_grad_mode_survives_an_error_in_detach():
    """detach() of an errored lazy tensor raises; grad mode must stay on afterwards (repr detaches)."""
    x = loom.tensor([4, 5], device="lazy")
    q = x // loom.tensor([0, 1], device="lazy")  # fails at the sync
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        loom.sync()  # which raises the failure
    assert (x * 2).tolist() == [8, 10]
    for read in (q.detach, lambda: repr(q)):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            read()
        assert loom.is_grad_enabled()
