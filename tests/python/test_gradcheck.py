"""loom.autograd.gradcheck / gradgradcheck with torch 1.13's signatures: they pass for correct
first and second derivatives (composite and primitive ops, several inputs and outputs, lazy),
and they catch a wrong derivative (a custom Function with a deliberately wrong backward)."""

import pytest

import loom
from loom.autograd import GradcheckError, gradcheck, gradgradcheck
from _ops_helpers import device  # noqa: F401  (the cpu / lazy fixture)


def inputs(device, *shapes, seed=0):
    g = loom.Generator().manual_seed(seed)
    return tuple(loom.randn(*s, dtype=loom.float64, generator=g).to(device).requires_grad_(True) for s in shapes)


FUNCTIONS = {
    "tanh-mul": (lambda a, b: (a.tanh() * b).sum(1), [(3, 2), (3, 2)]),
    "softmax-matmul": (lambda a, b: loom.softmax(a @ b, dim=-1), [(2, 3), (3, 2)]),
    "two-outputs": (lambda a: (a.exp(), a.sin().cumsum(0)), [(4,)]),
    "norm-division": (lambda a, b: a / (b.norm() + 1), [(2, 2), (3,)]),
    "log-softmax-loss": (lambda a: loom.nn.functional.log_softmax(a, 1)[:, 0].mean(), [(2, 3)]),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_correct_derivatives_pass(device, name):
    fn, shapes = FUNCTIONS[name]
    args = inputs(device, *shapes)
    assert gradcheck(fn, args, eps=1e-6, atol=1e-5, rtol=1e-3)
    assert gradgradcheck(fn, args)
    assert gradgradcheck(fn, args, gen_non_contig_grad_outputs=True, check_grad_dtypes=True)


class WrongSquare(loom.autograd.Function):
    """x ** 2 whose backward is wrong by a factor (and whose double backward is then wrong too)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * g


class RightFirstWrongSecond(loom.autograd.Function):
    """x ** 3 with a correct first derivative computed from a detached x: its gradient's own
    gradient with respect to x is missing."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x.detach() ** 2 * g


def test_a_wrong_derivative_is_caught():
    (x,) = inputs("cpu", (3,))
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradcheck(WrongSquare.apply, (x,))
    assert gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False
    assert issubclass(GradcheckError, RuntimeError)


def test_a_wrong_second_derivative_is_caught():
    (x,) = inputs("cpu", (3,))
    assert gradcheck(RightFirstWrongSecond.apply, (x,))
    with pytest.raises(GradcheckError):
        gradgradcheck(RightFirstWrongSecond.apply, (x,))


def test_torch_options_are_accepted_or_refused_by_name():
    (x,) = inputs("cpu", (2,))
    assert gradcheck(loom.sin, (x,), fast_mode=True, nondet_tol=1e-12, check_undefined_grad=False,
                     check_grad_dtypes=True)
    assert gradcheck(loom.sin, x)  # a lone tensor for inputs
    with pytest.raises(NotImplementedError, match="forward-mode AD"):
        gradcheck(loom.sin, (x,), check_forward_ad=True)
    with pytest.raises(NotImplementedError, match="vmap"):
        gradgradcheck(loom.sin, (x,), check_batched_grad=True)
    with pytest.raises(ValueError, match="require"):
        gradcheck(loom.sin, (x.detach(),))
