"""torch.autograd.gradcheck / gradgradcheck: autograd's derivatives against finite differences.

gradcheck compares, for every output element and every element of every input that requires
grad, the gradient backward computes with a central difference (f(x + eps) - f(x - eps)) / 2 eps,
in float64. gradgradcheck does the same for the function (inputs, cotangents) -> the gradients
of fn's outputs with those cotangents (built with create_graph=True): second derivatives.

Options of torch's that check machinery loom does not have raise NotImplementedError when asked
for: forward-mode AD (check_forward_ad, check_fwd_over_rev) and vmap (check_batched_grad,
check_batched_forward_grad). fast_mode=True runs the full check (it is exact, only slower);
check_undefined_grad is accepted and has nothing to check (loom's backward functions receive
zeros, never undefined gradients)."""

import numpy as np

import loom
from loom import _C
from loom.autograd import _tensors, enable_grad, grad

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


class GradcheckError(RuntimeError):
    """A derivative autograd computes differs from its finite difference."""


_NEEDS = {"check_forward_ad": "forward-mode AD", "check_fwd_over_rev": "forward-mode AD",
          "check_batched_grad": "vmap", "check_batched_forward_grad": "vmap"}


def _refuse(options):
    for name, wanted in options.items():
        if wanted:
            raise NotImplementedError(f"gradcheck: {name}=True needs {_NEEDS[name]}, which loom does not have")


def _fail(message, raise_exception):
    if raise_exception:
        raise GradcheckError(message)
    return False


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, check_sparse_nnz=False,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True, fast_mode=False):
    """True if func's gradients at inputs (float64 tensors that require grad) match central
    differences within atol + rtol * |numerical| (+ nondet_tol); otherwise raises GradcheckError
    naming the first mismatching element (or returns False with raise_exception=False)."""
    _refuse({"check_forward_ad": check_forward_ad, "check_batched_grad": check_batched_grad,
             "check_batched_forward_grad": check_batched_forward_grad})
    if check_sparse_nnz:
        raise NotImplementedError("gradcheck: check_sparse_nnz=True needs sparse tensors, which loom does not have")
    inputs = _tensors(inputs)
    diff = [i for i, t in enumerate(inputs) if isinstance(t, _C.Tensor) and t.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of the them have "
                         "requires_grad=True.")
    for i in diff:
        if inputs[i].dtype is not loom.float64:
            raise ValueError("gradcheck expects float64 inputs that require grad (finite differences need them)")
    if not check_backward_ad:
        return True

    def evaluate(args):
        # With grad mode on and inputs that require grad as the originals do: func may itself
        # differentiate (gradgradcheck's function does).
        with enable_grad():
            return [o.detach().double().cpu().numpy().copy() for o in _tensors(func(*args))]

    outputs = _tensors(func(*inputs))
    for out_index, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        for j in range(out.numel()):
            # contiguous whatever out's strides (zeros_like keeps a transposed output's), so the
            # flat view exists
            seed = loom.zeros(out.shape, dtype=out.dtype, device=out.device)
            seed.view(-1)[j] = 1.0
            analytic = grad([out], [inputs[i] for i in diff], [seed], retain_graph=True, allow_unused=True)
            for k, i in enumerate(diff):
                x = inputs[i]
                if check_grad_dtypes and analytic[k] is not None and analytic[k].dtype is not x.dtype:
                    return _fail(f"Gradient has dtype mismatch: input {i} is {x.dtype}, its gradient "
                                 f"{analytic[k].dtype}", raise_exception)
                flat = x.detach().cpu().numpy().reshape(-1).copy()
                numeric = np.zeros(flat.size)
                for e in range(flat.size):
                    values = []
                    for sign in (1, -1):
                        probe = flat.copy()
                        probe[e] += sign * eps
                        args = list(inputs)
                        args[i] = loom.tensor(probe.reshape(tuple(x.shape)), dtype=loom.float64,
                                              device=x.device).requires_grad_(True)
                        values.append(evaluate(args)[out_index].reshape(-1)[j])
                    numeric[e] = (values[0] - values[1]) / (2 * eps)
                got = np.zeros(flat.size) if analytic[k] is None else analytic[k].double().cpu().numpy().reshape(-1)
                if not np.allclose(got, numeric, atol=atol + nondet_tol, rtol=rtol):
                    bad = int(np.argmax(np.abs(got - numeric)))
                    return _fail(f"Jacobian mismatch for output {out_index} element {j} with respect to input {i} "
                                 f"element {bad}: analytical {got[bad]!r}, numerical {numeric[bad]!r}", raise_exception)
    return True


def _non_contiguous(t):
    """t's values in every other element of a buffer twice its size: a non-contiguous leaf."""
    spaced = loom.zeros(*t.shape, 2, dtype=t.dtype, device=t.device)[..., 0]
    spaced.copy_(t.detach())
    return spaced.requires_grad_(True)


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False):
    """gradcheck of the gradients of func: of (inputs, grad_outputs) -> grad(func(inputs),
    inputs, grad_outputs, create_graph=True). grad_outputs default to random float64 cotangents
    (fixed seed), one per output that requires grad; they are differentiated too."""
    _refuse({"check_fwd_over_rev": check_fwd_over_rev, "check_batched_grad": check_batched_grad})
    inputs = _tensors(inputs)
    if grad_outputs is None:
        outputs = [o for o in _tensors(func(*inputs)) if o.requires_grad]
        generator = loom.Generator().manual_seed(0)
        grad_outputs = tuple(
            loom.randn(o.shape, dtype=o.dtype, generator=generator).to(o.device).requires_grad_(True)
            for o in outputs)
        if gen_non_contig_grad_outputs:
            grad_outputs = tuple(_non_contiguous(g) for g in grad_outputs)
    else:
        grad_outputs = _tensors(grad_outputs)
    count = len(grad_outputs)

    def gradients(*args):
        given, cotangents = args[:len(args) - count], args[len(args) - count:]
        outputs = [o for o in _tensors(func(*given)) if o.requires_grad]
        wrt = [t for t in given if isinstance(t, _C.Tensor) and t.requires_grad]
        found = grad(outputs, wrt, cotangents, create_graph=True, allow_unused=True)
        return tuple(g for g in found if g is not None)

    if not check_rev_over_rev:
        return True
    return gradcheck(gradients, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol, check_grad_dtypes=check_grad_dtypes)
