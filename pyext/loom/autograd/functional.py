"""loom.autograd.functional: jacobian, hessian, vjp, jvp, vhp and hvp of a Python function, as
torch.autograd.functional, by reverse mode (one autograd.grad per output element for the
Jacobians; jvp by the double-vjp identity). Inputs and results are a tensor or a tuple of them."""

import loom
from loom import _C, autograd


def _as_tuple(x):
    return ((x,), False) if isinstance(x, _C.Tensor) else (tuple(x), True)


def _prepare(inputs, create_graph):
    """Inputs that require grad: fresh leaves, or (create_graph) the inputs themselves where they
    already do, so that the result stays differentiable with respect to them."""
    return tuple(x if create_graph and x.requires_grad else x.detach().requires_grad_(True) for x in inputs)


def _grads(outputs, inputs, grad_outputs, create_graph):
    got = autograd.grad(outputs, inputs, grad_outputs, retain_graph=True, create_graph=create_graph,
                        allow_unused=True)
    return tuple(loom.zeros_like(x) if g is None else g for g, x in zip(got, inputs))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    if strategy != "reverse-mode":
        raise NotImplementedError("loom's jacobian computes in reverse mode only")
    inputs, tuple_in = _as_tuple(inputs)
    with autograd.enable_grad():
        ins = _prepare(inputs, create_graph)
        outputs, tuple_out = _as_tuple(func(*ins))
        result = []
        for out in outputs:
            rows = [[] for _ in ins]
            flat = out.reshape(-1)
            for j in range(flat.numel()):
                if out.requires_grad:
                    grads = _grads((flat[j],), ins, None, create_graph)
                else:
                    grads = tuple(loom.zeros_like(x) for x in ins)
                for k, g in enumerate(grads):
                    rows[k].append(g)
            per_input = tuple(
                (loom.stack(r) if r else loom.zeros(0, *x.shape, dtype=x.dtype, device=x.device)).reshape(
                    *out.shape, *x.shape) for r, x in zip(rows, ins))
            if not create_graph:
                per_input = tuple(p.detach() for p in per_input)
            result.append(per_input if tuple_in else per_input[0])
    return tuple(result) if tuple_out else result[0]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    inputs, tuple_in = _as_tuple(inputs)

    def gradient(*xs):
        out = func(*xs)
        if not isinstance(out, _C.Tensor) or out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        return jacobian(lambda *ys: func(*ys).reshape(()), xs if tuple_in else xs[0], create_graph=True)

    return jacobian(gradient, inputs if tuple_in else inputs[0], create_graph=create_graph)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J)."""
    inputs, tuple_in = _as_tuple(inputs)
    with autograd.enable_grad():
        ins = _prepare(inputs, create_graph)
        outputs, tuple_out = _as_tuple(func(*ins))
        if v is None:
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                                   "Tensor with a single element.")
            vs = (loom.ones_like(outputs[0]),)
        else:
            vs, _ = _as_tuple(v)
        grads = _grads(outputs, ins, vs, create_graph)
    if not create_graph:
        outputs, grads = tuple(o.detach() for o in outputs), tuple(g.detach() for g in grads)
    return (outputs if tuple_out else outputs[0]), (grads if tuple_in else grads[0])


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v), by differentiating v^T J's u^T with respect to u (the double-vjp)."""
    inputs, tuple_in = _as_tuple(inputs)
    with autograd.enable_grad():
        ins = _prepare(inputs, create_graph)
        outputs, tuple_out = _as_tuple(func(*ins))
        if v is None:
            if len(ins) != 1 or ins[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                                   "single Tensor with a single element.")
            vs = (loom.ones_like(ins[0]),)
        else:
            vs, _ = _as_tuple(v)
        us = tuple(loom.zeros_like(o).requires_grad_(True) for o in outputs)
        g = _grads(outputs, ins, us, True)
        result = _grads(g, us, vs, create_graph)
    if not create_graph:
        outputs, result = tuple(o.detach() for o in outputs), tuple(r.detach() for r in result)
    return (outputs if tuple_out else outputs[0]), (result if tuple_out else result[0])


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) of a function with one output element."""
    inputs, tuple_in = _as_tuple(inputs)
    with autograd.enable_grad():
        ins = _prepare(inputs, create_graph)
        out = func(*ins)
        if not isinstance(out, _C.Tensor) or out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hvp should contain a single element")
        g = _grads((out,), ins, None, True)
        vs, _ = _as_tuple(v) if v is not None else ((loom.ones_like(ins[0]),), False)
        result = _grads(g, ins, vs, create_graph)
    if not create_graph:
        out, result = out.detach(), tuple(r.detach() for r in result)
    return out, (result if tuple_in else result[0])


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): for the twice-differentiable functions autograd sees, H is symmetric,
    so this is vhp."""
    return vhp(func, inputs, v, create_graph, strict)
